// Lingering after a refusal: a request refused before it was read whole (400, 413, 414, 431, 501,
// 505) is answered, the connection's write side is shut, and what the client still sends (the rest
// of a refused body) is read and dropped, so that its close does not reset the connection and take
// the answer with it. Without a bound, a client that keeps its side open held one of gatewayd's
// descriptors for Pistache's idle limit of 300 s. As nginx's lingering close: the connection
// ends once nothing has come from the client for `idle`, or `total` after the refusal, whichever
// comes first (nginx: lingering_timeout 5 s, lingering_time 30 s).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <queue>
#include <thread>
#include <vector>

namespace Pistache::Tcp {
class Peer;
}

namespace gw::http {

class Linger {
 public:
  using Clock = std::chrono::steady_clock;

  // When the client last sent something, as Clock's count of nanoseconds: set by the
  // connection's HTTP thread, read by the linger thread.
  using LastInput = std::atomic<int64_t>;

  Linger(std::chrono::milliseconds idle, std::chrono::milliseconds total);
  ~Linger();  // stop()
  Linger(const Linger&) = delete;
  Linger& operator=(const Linger&) = delete;

  // Starts the thread that ends lingering connections.
  void start();
  // Ends that thread; connections watched after this are never ended by it. Called before the
  // connections' transports go (end_connection reaches them).
  void stop();

  // From `peer`'s HTTP thread, once its refusal is queued: ends the connection once it has been
  // quiet for `idle` (the returned clock, which that thread sets to now() as bytes come), or
  // `total` from now. Throws std::bad_alloc.
  std::shared_ptr<LastInput> watch(std::weak_ptr<Pistache::Tcp::Peer> peer);

  static int64_t now();

 private:
  struct Watched {
    int64_t due = 0;    // when to look at it again
    int64_t until = 0;  // `total` after the refusal
    std::weak_ptr<Pistache::Tcp::Peer> peer;
    std::shared_ptr<LastInput> last_input;
    bool operator>(const Watched& other) const { return due > other.due; }
  };

  void run();

  const int64_t idle_ns_;
  const int64_t total_ns_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::priority_queue<Watched, std::vector<Watched>, std::greater<>> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace gw::http
