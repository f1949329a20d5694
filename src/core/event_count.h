// A count that threads wait on to move: one side raises it after something happened, the other
// reads it, looks for what happened, then waits for it to move past what it read. A raise
// between the read and the wait is not lost (the wait returns at once).
// Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace gw {

class EventCount {
 public:
  uint64_t current() const;
  // Adds one and wakes every waiter.
  void raise();
  // Blocks until the count is beyond `seen` or `timeout` passes; returns the count.
  uint64_t wait_beyond(uint64_t seen, std::chrono::milliseconds timeout);

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t count_ = 0;  // GUARDED_BY(mu_)
};

}  // namespace gw
