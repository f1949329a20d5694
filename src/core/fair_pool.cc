#include "core/fair_pool.h"

#include <utility>

#include "core/thread_name.h"

namespace gw {

FairPool::FairPool(const char* thread_name, int threads, size_t max_waiting_per_owner)
    : max_waiting_per_owner_(max_waiting_per_owner) {
  threads_.reserve(static_cast<size_t>(threads));
  try {
    for (int i = 0; i < threads; ++i) {
      threads_.emplace_back([this, thread_name] {
        name_this_thread(thread_name);
        run();
      });
    }
  } catch (...) {
    // A thread that cannot be started (a process or memory limit): those started are joined,
    // or their destruction would end the program (std::terminate), and the caller is told.
    stop();
    throw;
  }
}

FairPool::~FairPool() { stop(); }

bool FairPool::post(std::string owner, Job job) {
  bool queued = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopping_) {
      if (waiting_.waiting(owner) >= max_waiting_per_owner_) {
        ++refused_;
        return false;
      }
      waiting_.push(std::move(owner), std::move(job));
      queued = true;
    }
  }
  if (queued) {
    wake_.notify_one();
  } else {
    job(false);
  }
  return true;
}

void FairPool::stop() {
  std::call_once(stopped_, [this] {
    TakingTurns<Job> left;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      std::swap(left, waiting_);
    }
    wake_.notify_all();
    while (!left.empty()) left.pop()(false);
    for (auto& t : threads_) t.join();
  });
}

FairPool::Counts FairPool::counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return Counts{running_, waiting_.size(), refused_};
}

void FairPool::run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || !waiting_.empty(); });
    if (stopping_) return;  // what waited is stop()'s to cancel
    Job job = waiting_.pop();
    ++running_;
    lock.unlock();
    job(true);
    job = nullptr;  // what it holds goes before the count says it is done
    lock.lock();
    --running_;
  }
}

}  // namespace gw
