#include "http/transport.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pistache/endpoint.h>
#include <pistache/http.h>
#include <pistache/peer.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/deferral.h"

namespace gw::http {
namespace {

namespace P = Pistache;
using std::chrono::milliseconds;

// The connections whose requests a bare Pistache server was given, in order; none is answered
// by the server itself.
struct Seen {
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<std::shared_ptr<P::Tcp::Peer>> peers;
};

// With `expect_answers`, each request is also told to the transport as one an answer will follow
// (expect_answer, on the connection's HTTP thread, as gatewayd's handler does).
class Recorder final : public P::Http::Handler {
 public:
  HTTP_PROTOTYPE(Recorder)
  Recorder(std::shared_ptr<Seen> seen, bool expect_answers)
      : seen_(std::move(seen)), expect_answers_(expect_answers) {}

  void onRequest(const P::Http::Request& /*request*/, P::Http::ResponseWriter response) override {
    if (expect_answers_) expect_answer(*response.getPeer());
    std::lock_guard<std::mutex> lock(seen_->mutex);
    seen_->peers.push_back(response.getPeer());
    seen_->changed.notify_all();
  }

 private:
  std::shared_ptr<Seen> seen_;
  bool expect_answers_;
};

// A Pistache endpoint on a loopback port with one HTTP thread, so that every connection is on
// the thread a freed descriptor number is given to again (Pistache picks a connection's thread
// by its number).
class BareServer {
 public:
  explicit BareServer(bool expect_answers = false)
      : endpoint_(P::Address(P::Ipv4::loopback(), P::Port(0))) {
    endpoint_.init(P::Http::Endpoint::options().threads(1));
    endpoint_.setHandler(std::make_shared<Recorder>(seen_, expect_answers));
    endpoint_.serveThreaded();
  }
  ~BareServer() { endpoint_.shutdown(); }
  BareServer(const BareServer&) = delete;
  BareServer& operator=(const BareServer&) = delete;

  // A client connection that has sent one request, and the server's side of it. With `half_close`
  // the client shuts its sending side right after the request.
  struct Client {
    int fd = -1;
    std::shared_ptr<P::Tcp::Peer> peer;
  };
  Client connect_and_ask(bool half_close = false) {
    const size_t before = seen_count();
    Client client;
    client.fd = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(client.fd >= 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(endpoint_.getPort()));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(client.fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0);
    const std::string request = "GET / HTTP/1.1\r\nHost: t\r\n\r\n";
    REQUIRE(::send(client.fd, request.data(), request.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(request.size()));
    if (half_close) REQUIRE(::shutdown(client.fd, SHUT_WR) == 0);
    std::unique_lock<std::mutex> lock(seen_->mutex);
    REQUIRE(seen_->changed.wait_for(lock, std::chrono::seconds(5),
                                    [&] { return seen_->peers.size() > before; }));
    client.peer = seen_->peers.back();
    return client;
  }

 private:
  size_t seen_count() {
    std::lock_guard<std::mutex> lock(seen_->mutex);
    return seen_->peers.size();
  }

  std::shared_ptr<Seen> seen_ = std::make_shared<Seen>();
  P::Http::Endpoint endpoint_;
};

std::string write_of(std::string_view text) {
  std::string write = start_write(text.size());
  write += text;
  return write;
}

// What the client reads until `size` bytes came, the end of the stream, or 5 s passed; and
// whether the stream ended.
struct Read {
  std::string bytes;
  bool ended = false;
};
// Reads until `size` bytes or the end of the stream; a bound of 30 s, never reached when the test
// passes (32 MB under ThreadSanitizer on a loaded machine took longer than the 5 s it had).
Read read_from(int fd, size_t size) {
  Read got;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  char buffer[65536];
  while (got.bytes.size() < size && std::chrono::steady_clock::now() < deadline) {
    pollfd ready{fd, POLLIN, 0};
    if (::poll(&ready, 1, 50) <= 0) continue;
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0) {
      got.ended = n == 0;
      break;
    }
    got.bytes.append(buffer, static_cast<size_t>(n));
  }
  return got;
}

// Whether descriptor `fd` of this process is closed within 5 s.
bool closed_soon(int fd) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    if (::fcntl(fd, F_GETFD) == -1 && errno == EBADF) return true;
    std::this_thread::sleep_for(milliseconds(1));
  }
  return false;
}

// The window: an answering thread holds the connection (as gatewayd's does between finding its
// client still there and queuing the answer) while the client goes away, the server closes the
// connection's descriptor, and the next connection accepted is given the same number. Pistache
// queues a write by that number alone, so the first connection's answer went to the second.
TEST_CASE("a write for a connection that has ended never reaches the next one given its number") {
  BareServer server;
  BareServer::Client first = server.connect_and_ask();
  const int number = first.peer->fd();
  ::close(first.fd);
  REQUIRE(closed_soon(number));
  BareServer::Client second = server.connect_and_ask();
  // The case this is about: the number was given again, to a connection on the same thread.
  REQUIRE(second.peer->fd() == number);
  REQUIRE(second.peer->getID() != first.peer->getID());

  queue_write(first.peer, write_of("meant for the first"), false);
  queue_write(second.peer, write_of("meant for the second"), false);
  const Read got = read_from(second.fd, 20);
  CHECK(got.bytes == "meant for the second");
  CHECK_FALSE(got.ended);
  ::close(second.fd);
}

TEST_CASE("writes reach their connection in order, from any thread, and can end its stream") {
  BareServer server;
  BareServer::Client client = server.connect_and_ask();
  // Queued from a thread that is not the connection's: the write side is shut once the last
  // write is out, and what was queued before it comes first.
  std::thread([&] {
    queue_write(client.peer, write_of("first, "), false);
    queue_write(client.peer, write_of("then the end"), true);
  }).join();
  const Read got = read_from(client.fd, 100);
  CHECK(got.bytes == "first, then the end");
  CHECK(got.ended);
  ::close(client.fd);
}

// A write larger than the socket buffers hold waits for the client to read; what is queued after
// it waits behind it (Transport::handleWriteQueue), and the shutdown it asks for comes after its
// last byte.
TEST_CASE("a write queued behind one that waits for the socket follows it, then the end") {
  BareServer server;
  BareServer::Client client = server.connect_and_ask();
  std::string large(32 << 20, ' ');
  for (size_t i = 0; i < large.size(); i += 4096) large[i] = static_cast<char>('a' + i / 4096 % 26);
  queue_write(client.peer, write_of(large), false);
  queue_write(client.peer, write_of("and the rest"), true);
  std::this_thread::sleep_for(milliseconds(300));  // the buffers fill up; the rest waits
  const Read got = read_from(client.fd, large.size() + 100);
  CHECK(got.bytes.size() == large.size() + 12);
  CHECK(got.bytes.compare(0, large.size(), large) == 0);
  CHECK(got.bytes.ends_with("and the rest"));
  CHECK(got.ended);
  ::close(client.fd);
}

// The writer's finish thread answers a batch inside a DeferralScope: the HTTP thread is woken
// once, at the scope's end, instead of once per answer.
TEST_CASE("writes queued inside a deferral scope go out when it ends, in order") {
  BareServer server;
  BareServer::Client one = server.connect_and_ask();
  BareServer::Client two = server.connect_and_ask();
  std::thread([&] {
    DeferralScope batch;
    queue_write(one.peer, write_of("one, "), false);
    queue_write(two.peer, write_of("two"), false);
    queue_write(one.peer, write_of("one again"), true);
    // Not woken yet: neither client has anything to read.
    pollfd ready[2] = {{one.fd, POLLIN, 0}, {two.fd, POLLIN, 0}};
    CHECK(::poll(ready, 2, 300) == 0);
  }).join();
  const Read got_one = read_from(one.fd, 100);
  CHECK(got_one.bytes == "one, one again");
  CHECK(got_one.ended);
  const Read got_two = read_from(two.fd, 3);
  CHECK(got_two.bytes == "two");
  CHECK_FALSE(got_two.ended);
  ::close(one.fd);
  ::close(two.fd);
}

// A client may shut its sending side right after its request and wait for the answer (a
// half-close). Pistache ended the connection as soon as it read that end, and the answer, queued
// later from another thread as gatewayd's are, went nowhere. Bytes queued on the connection
// before (an interim answer, say) keep it too; once the answer expected is out, it ends.
TEST_CASE("a client that ends its side after a request still gets what is queued and the answer") {
  BareServer server(/*expect_answers=*/true);
  BareServer::Client client = server.connect_and_ask(/*half_close=*/true);
  const int number = client.peer->fd();
  std::this_thread::sleep_for(milliseconds(100));  // the end of the client's stream is read
  queue_write(client.peer, write_of("interim, "), false);
  std::this_thread::sleep_for(milliseconds(100));
  // Still open: the answer is expected yet.
  CHECK(::fcntl(number, F_GETFD) != -1);
  std::thread([&] {
    queue_write(client.peer, write_of("the answer"), false, /*answer=*/true);
  }).join();
  client.peer.reset();
  const Read got = read_from(client.fd, 100);
  CHECK(got.bytes == "interim, the answer");
  CHECK(got.ended);
  // The server's side is closed once the answer is out.
  CHECK(closed_soon(number));
  ::close(client.fd);
}

// With nothing expected on it, a connection ends as soon as the end of its client's stream is read,
// as before.
TEST_CASE("a half-closed connection with no answer expected ends at once") {
  BareServer server;
  BareServer::Client client = server.connect_and_ask(/*half_close=*/true);
  const int number = client.peer->fd();
  client.peer.reset();
  CHECK(closed_soon(number));
  const Read got = read_from(client.fd, 100);
  CHECK(got.bytes.empty());
  CHECK(got.ended);
  ::close(client.fd);
}

}  // namespace
}  // namespace gw::http
