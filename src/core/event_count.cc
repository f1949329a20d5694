#include "core/event_count.h"

namespace gw {

uint64_t EventCount::current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return count_;
}

void EventCount::raise() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++count_;
  }
  cv_.notify_all();
}

uint64_t EventCount::wait_beyond(uint64_t seen, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return count_ > seen; });
  return count_;
}

}  // namespace gw
