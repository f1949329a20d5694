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
  // A job is called once: with true on a pool thread to do its work, or with false, on the thread
  // that stopped the pool (or posted to a stopped one), to tell its requester it will not run.
  // It must not throw.
  using Job = std::function<void(bool run)>;
  struct Counts {
    size_t running = 0;
    size_t waiting = 0;
    uint64_t refused = 0;  // posts refused because their owner had too many waiting
  };

  // `threads` >= 1, each named `thread_name`.
  FairPool(const char* thread_name, int threads, size_t max_waiting_per_owner);
  // stop().
  ~FairPool();
  FairPool(const FairPool&) = delete;
  FairPool& operator=(const FairPool&) = delete;

  // Queues `job` behind `owner`'s others; false, and `job` dropped uncalled, if `owner` already
  // has max_waiting_per_owner jobs waiting. After stop() it calls job(false) at once. From any
  // thread.
  bool post(std::string owner, Job job);
  // Calls job(false) for every job still waiting, waits for those running, and ends the threads.
  // Does this once: a later call returns once the first has. From any thread but the pool's own.
  void stop();
  Counts counts() const;

 private:
  void run();

  const size_t max_waiting_per_owner_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  TakingTurns<Job> waiting_;  // GUARDED_BY(mu_)
  size_t running_ = 0;        // GUARDED_BY(mu_)
  uint64_t refused_ = 0;      // GUARDED_BY(mu_)
  bool stopping_ = false;     // GUARDED_BY(mu_)
  std::vector<std::thread> threads_;
  std::once_flag stopped_;
};

}  // namespace gw
