// Threads that run jobs posted under an owner's name (a tenant), taking turns by owner, with a
// bound on the jobs each owner may have waiting. For work that may block for seconds, such as a
// WAF check that waits for the sandbox, and must not hold the thread that took the request.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/taking_turns.h"

namespace gw {

class FairPool {
 public:
  struct Counts {
    size_t running = 0;
    size_t waiting = 0;
    uint64_t refused = 0;  // posts refused because their owner had too many waiting
  };

  // `threads` >= 1, each named `thread_name`.
  FairPool(const char* thread_name, int threads, size_t max_waiting_per_owner);
  // Runs the jobs still waiting, then joins the threads.
  ~FairPool();
  FairPool(const FairPool&) = delete;
  FairPool& operator=(const FairPool&) = delete;

  // Queues `job` (which must not throw) behind `owner`'s others; false, and `job` dropped, if
  // `owner` already has max_waiting_per_owner jobs waiting. From any thread.
  bool post(std::string owner, std::function<void()> job);
  Counts counts() const;

 private:
  void run();

  const size_t max_waiting_per_owner_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  TakingTurns<std::function<void()>> waiting_;  // GUARDED_BY(mu_)
  size_t running_ = 0;                          // GUARDED_BY(mu_)
  uint64_t refused_ = 0;                        // GUARDED_BY(mu_)
  bool stopping_ = false;                       // GUARDED_BY(mu_)
  std::vector<std::thread> threads_;
};

}  // namespace gw
