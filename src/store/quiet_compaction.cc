#include "store/quiet_compaction.h"

#include <cstdio>
#include <sstream>

#include "core/metric_text.h"
#include "core/thread_name.h"

namespace gw {

QuietCompaction::QuietCompaction(Store& store, std::function<uint64_t()> writes, Options options)
    : store_(store), writes_(std::move(writes)), options_(options) {}

QuietCompaction::~QuietCompaction() { stop(); }

void QuietCompaction::start() {
  thread_ = std::thread([this] { run(); });
}

void QuietCompaction::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

std::string QuietCompaction::render_metrics() const {
  std::ostringstream out;
  write_metric(out, "gatewayd_quiet_compactions_total", "counter",
               "Compactions of the projections' L0 files into L1 done while writes paused.",
               compactions());
  write_metric(out, "gatewayd_quiet_compaction_failures_total", "counter",
               "Such compactions that failed.", failures());
  return out.str();
}

void QuietCompaction::run() {
  name_this_thread("gw-quiet");
  using Clock = std::chrono::steady_clock;
  uint64_t seen = writes_();
  Clock::time_point since = Clock::now();  // when `seen` was last seen to change
  // After a failure (a full disk), the count of writes then: it is tried again only once writes
  // came and paused again. Tried at every pause, it failed about twice a second on an idle
  // server whose disk was full, each time with an error line in RocksDB's LOG (helper 44).
  bool failed = false;
  uint64_t failed_at = 0;
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, options_.poll, [this] { return stopping_; })) {
    const uint64_t now_writes = writes_();
    const Clock::time_point now = Clock::now();
    if (now_writes != seen) {
      seen = now_writes;
      since = now;
      continue;
    }
    if (now - since < options_.quiet) continue;
    if (failed && failed_at == now_writes) continue;
    if (store_.level0_files(Cf::kProjections) < options_.min_files) continue;
    lock.unlock();
    auto done = store_.compact_level0(Cf::kProjections);
    lock.lock();
    failed = !done.ok();
    failed_at = now_writes;
    if (!done.ok()) {
      // Told once; the metric counts every failure.
      if (failures_.fetch_add(1, std::memory_order_relaxed) == 0) {
        std::fprintf(stderr, "gatewayd: cannot compact the projections' L0 files: %s\n",
                     done.error().detail.c_str());
      }
    } else if (done.value()) {
      compactions_.fetch_add(1, std::memory_order_relaxed);
    }
    since = Clock::now();
  }
}

}  // namespace gw
