// The single writer: every change to the database goes through it. Jobs submitted from any thread
// are executed one after another on the writer thread; all jobs that queued up while the previous
// batch was being written are staged into one WriteBatch and made durable with one fsync (group
// commit). A job's writes, including its events, are atomic: all of a batch or none.
//
// Three threads form a pipeline: the writer thread stages batch N+1 (executes its jobs on a Tx
// whose reads see batch N, written or not), the commit thread seals and writes batch N, and the
// finish thread finishes the jobs of batch N-1 (their replies). When the commit thread is done
// with batch N it takes batch N+1: by itself if the writer thread is waiting for jobs (no thread
// has to wake up between two writes), or from the writer thread once every job queued before
// the commit thread asked is staged. A batch is opened only after the one before its base was
// written, so batches are written one at a time, in order; after a failed write every later job
// fails, and a job is never finished as committed before its batch and every batch before it
// are durable.
// Thread-safe: submit() may be called from any thread; a Tx is used by one thread at a time.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/error.h"
#include "core/histogram.h"
#include "store/store.h"
#include "store/tx.h"

namespace gw {

class Job {
 public:
  virtual ~Job() = default;
  // Writer thread. Decide and stage writes through `tx`. Return false to discard whatever this
  // job staged (a rejected command). Must not block.
  virtual bool execute(Tx& tx) = 0;
  // Finish thread, after the batch holding this job was made durable (`committed`) or failed to
  // be written (every job of the batch then sees false and must answer "unavailable"). Jobs are
  // finished in submission order.
  virtual void finish(bool committed) = 0;
};

// Told which of the keys it watches each batch writes, around the batch's write, on the commit
// thread: a cache of what readers read from the store keeps coherent with it (see
// projections/read_cache.h). Both calls must be quick; the commit thread is the one serial step.
class WriteWatcher {
 public:
  virtual ~WriteWatcher() = default;
  // The keys it watches (nullptr: none); called once, when the writer starts.
  virtual WatchedKeys watched_keys() const = 0;
  // Right before a batch that writes `keys` is written: none of its writes is visible yet.
  virtual void before_write(const std::vector<std::string>& keys) = 0;
  // Once that write has returned, whether it succeeded or failed; before any job of the batch is
  // finished.
  virtual void after_write(const std::vector<std::string>& keys) = 0;
};

class Writer {
 public:
  // Reads the log's tail to continue its sequence and hash chain. Starts the writer thread.
  // `scanned`: the keys jobs scan through Tx::scan (nullptr: any key). `watcher` (optional) must
  // outlive the Writer. `write_only`: the keys jobs write and never read (Tx::write_only).
  static Result<std::unique_ptr<Writer>> start(Store& store, IdGenerator& ids,
                                               ScannedKeys scanned = nullptr,
                                               WriteWatcher* watcher = nullptr,
                                               WriteOnlyKeys write_only = nullptr);
  ~Writer();  // stops: finishes queued jobs, joins

  // Queues a job. After stop() the job is finished at once with committed=false.
  void submit(std::unique_ptr<Job> job);
  void stop();

  uint64_t last_seq() const { return published_seq_.load(std::memory_order_acquire); }
  // Whether jobs submitted are not yet finished (their replies not yet given): a stop waits for
  // their answers for as long as this holds, since stop() waits for the jobs themselves anyway.
  bool has_unfinished();
  // The store it writes, for reads of what it has written.
  const Store& store() const { return store_; }
  // False after a batch failed to be written (disk full, I/O error), or RocksDB stopped taking
  // writes after an error of its own (a failed flush or compaction: Store::on_writes_stopped).
  // The writer then fails every later job without executing it: the failed batch may or may not
  // be in the WAL, so only a restart, which recovers the log's true tail, can continue the
  // sequence and the hash chain.
  bool writable() const { return writable_.load(std::memory_order_acquire); }
  uint64_t batches() const { return batches_.load(std::memory_order_relaxed); }
  // How long each synced batch write took (RocksDB's Write: the write-ahead log's append and
  // fsync, the memtable inserts, and any stall RocksDB imposes), written or failed. Every job of a
  // batch waits this long at least, so a slow disk shows here first.
  const LatencyHistogram& write_latency() const { return write_seconds_; }
  // Prometheus text of write_latency(): gatewayd_store_batch_write_seconds.
  std::string render_metrics() const;
  // Blocks until an event beyond `seq` is committed, the writer stops, or `timeout` passes.
  // Returns last_seq().
  uint64_t wait_beyond(uint64_t seq, std::chrono::milliseconds timeout);

 private:
  // A batch: its Tx and its jobs, in submission order.
  struct Batch {
    std::shared_ptr<Tx> tx;
    std::shared_ptr<Tx> base;  // the Tx it is staged on, kept until this one is sealed
    std::vector<std::unique_ptr<Job>> jobs;
    uint64_t number = 0;       // batches are numbered 1, 2, ... in the order they are written
  };

  Writer(Store& store, IdGenerator& ids, ScannedKeys scanned, WriteWatcher* watcher,
         WriteOnlyKeys write_only, uint64_t seq, std::string hash);
  void run();
  void commit_loop();
  void finish_loop();
  // Writer thread, under mu_: a new open batch staged on the last one.
  std::unique_ptr<Batch> open_batch();
  // Commit thread: seals and writes `batch`, queues its jobs to be finished, marks it written.
  void commit(Batch& batch);
  // Blocks until batch `number` is written (or failed to be).
  void await_written(uint64_t number);
  // Stops the writes (writable() false from now on) and says why on stderr, the first time.
  void stop_writes(const std::string& why);
  // Queues `jobs` to be finished on the finish thread, after every batch queued before them.
  void queue_finish(std::vector<std::unique_ptr<Job>>& jobs, bool committed);

  Store& store_;
  IdGenerator& ids_;
  ScannedKeys scanned_;
  WriteWatcher* watcher_;
  WatchedKeys watched_;  // watcher_'s keys
  WriteOnlyKeys write_only_;
  std::mutex mu_;
  std::condition_variable cv_;          // wakes the writer thread
  std::condition_variable handoff_cv_;  // wakes the commit thread
  std::deque<std::unique_ptr<Job>> queue_;  // GUARDED_BY(mu_)
  bool stopping_ = false;                   // GUARDED_BY(mu_)
  // The batch the writer thread stages into. The commit thread takes it only while `parked_`
  // (the writer thread waits and touches no batch), or when the writer thread hands it over as
  // `ready_` after the commit thread asked (`commit_wants_`). While `ready_` is set the writer
  // thread stages nothing: a batch must not be staged on one whose base is not written yet.
  std::unique_ptr<Batch> open_;   // GUARDED_BY(mu_)
  std::unique_ptr<Batch> ready_;  // GUARDED_BY(mu_)
  bool parked_ = false;           // GUARDED_BY(mu_)
  bool commit_wants_ = false;     // GUARDED_BY(mu_)
  // Jobs queued so far; those the writer thread has taken are submitted_ - queue_.size().
  uint64_t submitted_ = 0;        // GUARDED_BY(mu_)
  // Of the jobs queued, those finished (the finish thread counts them after their finish()).
  std::atomic<uint64_t> finished_{0};
  uint64_t wanted_upto_ = 0;      // GUARDED_BY(mu_); submitted_ when the commit thread asked
  bool commit_stop_ = false;      // GUARDED_BY(mu_)
  std::shared_ptr<Tx> last_tx_;   // GUARDED_BY(mu_); the newest Tx, the base of the next one
  uint64_t opened_ = 0;           // GUARDED_BY(mu_); the number of the newest batch
  uint64_t seq_;                  // the log's tail before the first batch
  std::string hash_;
  std::atomic<uint64_t> published_seq_;
  std::atomic<bool> writable_{true};
  std::atomic<uint64_t> batches_{0};
  LatencyHistogram write_seconds_;
  std::mutex commit_mu_;
  std::condition_variable commit_cv_;  // notified after each batch's write and on stop
  uint64_t written_ = 0;               // GUARDED_BY(commit_mu_); the last batch written (or failed)
  bool stopped_ = false;               // GUARDED_BY(commit_mu_)
  struct Finished {
    std::vector<std::unique_ptr<Job>> jobs;
    bool committed;
  };
  std::mutex finish_mu_;
  std::condition_variable finish_cv_;
  std::deque<Finished> finishing_;  // GUARDED_BY(finish_mu_)
  bool finish_stop_ = false;        // GUARDED_BY(finish_mu_)
  std::thread thread_;
  std::thread commit_thread_;
  std::thread::id commit_thread_id_;  // set before the store's writes-stopped call is
  std::thread finish_thread_;
};

}  // namespace gw
