// Compacts the projections' L0 table files into L1 once writes pause.
//
// Every flush of the projections holds keys of every kind, so each L0 file spans the whole key
// range, and a point read checks the Bloom filter of every L0 file, newest first, until one holds
// the key. RocksDB compacts L0 only at 16 files (store.cc: fewer rewrites of L1 while writes
// stream in), so after a burst of writes up to 15 such files would stay, and every read would pay
// for them, until the next burst. This compacts them as soon as no batch has been written for a
// short while and at least `min_files` are there: while writes stream in, L0 behaves as RocksDB's
// trigger sets; once they pause, reads check at most min_files - 1 L0 files.
// Thread-safe: start() and stop() from the thread that owns it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "store/store.h"

namespace gw {

class QuietCompaction {
 public:
  struct Options {
    // No batch written for this long counts as a pause.
    std::chrono::milliseconds quiet{500};
    // Compacts only when L0 holds at least this many files.
    int min_files = 4;
    // How often it looks.
    std::chrono::milliseconds poll{100};
  };

  // `writes`: a count that grows with every batch written (Writer::batches). Both must outlive it.
  QuietCompaction(Store& store, std::function<uint64_t()> writes, Options options);
  ~QuietCompaction();  // stop()
  QuietCompaction(const QuietCompaction&) = delete;
  QuietCompaction& operator=(const QuietCompaction&) = delete;

  void start();
  // Joins the thread, after the compaction in progress if there is one; Store::
  // stop_background_work() before it ends that compaction early (RocksDB's
  // DisableManualCompaction does not: it waits for it).
  void stop();

  // Compactions done, and those that failed (RocksDB's error; it tries again after a pause).
  uint64_t compactions() const { return compactions_.load(std::memory_order_relaxed); }
  uint64_t failures() const { return failures_.load(std::memory_order_relaxed); }
  // Prometheus text for GET /metrics.
  std::string render_metrics() const;

 private:
  void run();

  Store& store_;
  std::function<uint64_t()> writes_;
  const Options options_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // GUARDED_BY(mu_)
  std::thread thread_;
  std::atomic<uint64_t> compactions_{0};
  std::atomic<uint64_t> failures_{0};
};

}  // namespace gw
