#include "http/linger.h"

#include <pistache/peer.h>

#include <algorithm>
#include <exception>
#include <utility>

#include "core/thread_name.h"
#include "http/transport.h"

namespace gw::http {

Linger::Linger(std::chrono::milliseconds idle, std::chrono::milliseconds total)
    : idle_ns_(std::chrono::nanoseconds(idle).count()),
      total_ns_(std::chrono::nanoseconds(total).count()) {}

Linger::~Linger() { stop(); }

int64_t Linger::now() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

void Linger::start() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (thread_.joinable() || stopping_) return;
  thread_ = std::thread([this] { run(); });
}

void Linger::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(mutex_);
  queue_ = {};
}

std::shared_ptr<Linger::LastInput> Linger::watch(std::weak_ptr<Pistache::Tcp::Peer> peer) {
  const int64_t at = now();
  auto last_input = std::make_shared<LastInput>(at);
  Watched watched{at + std::min(idle_ns_, total_ns_), at + total_ns_, std::move(peer), last_input};
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return last_input;
    first = queue_.empty() || watched.due < queue_.top().due;
    queue_.push(std::move(watched));
  }
  if (first) wake_.notify_one();
  return last_input;
}

void Linger::run() {
  name_this_thread("gw-linger");
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    if (queue_.empty()) {
      wake_.wait(lock);
      continue;
    }
    const int64_t at = now();
    if (queue_.top().due > at) {
      wake_.wait_for(lock, std::chrono::nanoseconds(queue_.top().due - at));
      continue;
    }
    Watched watched = queue_.top();
    queue_.pop();
    // Quiet for `idle` since the client last sent something, or `total` after the refusal.
    const int64_t due =
        std::min(watched.last_input->load(std::memory_order_relaxed) + idle_ns_, watched.until);
    if (due > at) {
      watched.due = due;
      queue_.push(std::move(watched));
      continue;
    }
    lock.unlock();
    if (const std::shared_ptr<Pistache::Tcp::Peer> peer = watched.peer.lock()) {
      try {
        end_connection(peer);
      } catch (const std::exception&) {
        // Out of memory, or the connection has no transport any more: it ended, or ends with
        // Pistache's own timer.
      }
    }
    lock.lock();
  }
}

}  // namespace gw::http
