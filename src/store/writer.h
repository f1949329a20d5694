// The single writer: every change to the database goes through it. Jobs submitted from any thread
// are executed one after another on the writer thread; all jobs that queued up while the previous
// batch was being synced are staged into one WriteBatch and made durable with one fsync (group
// commit). A job's writes, including its events, are atomic: all of a batch or none.
// Thread-safe: submit() may be called from any thread; Tx is used only on the writer thread.
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

#include <rocksdb/utilities/write_batch_with_index.h>

#include "core/clock.h"
#include "core/error.h"
#include "store/store.h"

namespace gw {

// An event before the log assigns its sequence number, id and hash.
struct EventDraft {
  std::string type;
  std::string aggregate_kind;
  std::string aggregate_id;
  uint64_t aggregate_version = 0;
  std::string tenant;
  std::string actor;
  int64_t time = 0;
  std::string data_json;  // the full record after the change
  uint64_t caused_by = 0;  // the event this one answers (a verification request), 0 for none
};

inline constexpr int kSchemaVersion = 2;
inline constexpr char kGenesisHash[] =
    "0000000000000000000000000000000000000000000000000000000000000000";

// The stored form of an event: canonical JSON (fixed member order, no hash members; `caused_by`
// only when non-zero) with `prev_hash` and `hash` appended,
// hash = hex(SHA-256(prev_hash || canonical bytes)).
std::string encode_event(uint64_t seq, const std::string& event_id, const EventDraft& draft,
                         const std::string& prev_hash, std::string* hash_out);

// A batch being staged on the writer thread. Reads see committed data plus this batch's writes.
class Tx {
 public:
  Tx(Store& store, IdGenerator& ids, uint64_t last_seq, std::string last_hash);

  Result<std::optional<std::string>> get(Cf which, std::string_view key);
  void put(Cf which, std::string_view key, std::string_view value);
  void del(Cf which, std::string_view key);
  // An iterator over committed data merged with this batch's writes.
  std::unique_ptr<rocksdb::Iterator> iterate(Cf which);
  // Appends an event to the log; returns its sequence number.
  uint64_t append(const EventDraft& draft);

  uint64_t last_seq() const { return last_seq_; }
  const std::string& last_hash() const { return last_hash_; }
  rocksdb::WriteBatch* batch() { return wb_.GetWriteBatch(); }

  void set_savepoint();
  void rollback_to_savepoint();

 private:
  Store& store_;
  IdGenerator& ids_;
  rocksdb::WriteBatchWithIndex wb_;
  uint64_t last_seq_;
  std::string last_hash_;
  uint64_t saved_seq_ = 0;
  std::string saved_hash_;
};

class Job {
 public:
  virtual ~Job() = default;
  // Writer thread. Decide and stage writes through `tx`. Return false to discard whatever this
  // job staged (a rejected command). Must not block.
  virtual bool execute(Tx& tx) = 0;
  // Writer thread, after the batch holding this job was made durable (`committed`) or failed to
  // be written (every job of the batch then sees false and must answer "unavailable").
  virtual void finish(bool committed) = 0;
};

class Writer {
 public:
  // Reads the log's tail to continue its sequence and hash chain. Starts the writer thread.
  static Result<std::unique_ptr<Writer>> start(Store& store, IdGenerator& ids);
  ~Writer();  // stops: finishes queued jobs, joins

  // Queues a job. After stop() the job is finished at once with committed=false.
  void submit(std::unique_ptr<Job> job);
  void stop();

  uint64_t last_seq() const { return published_seq_.load(std::memory_order_acquire); }
  // False after a batch failed to be written (disk full, I/O error). The writer then fails every
  // later job without executing it: the failed batch may or may not be in the WAL, so only a
  // restart, which recovers the log's true tail, can continue the sequence and the hash chain.
  bool writable() const { return writable_.load(std::memory_order_acquire); }
  uint64_t batches() const { return batches_.load(std::memory_order_relaxed); }
  // Blocks until an event beyond `seq` is committed, the writer stops, or `timeout` passes.
  // Returns last_seq().
  uint64_t wait_beyond(uint64_t seq, std::chrono::milliseconds timeout);

 private:
  Writer(Store& store, IdGenerator& ids, uint64_t seq, std::string hash);
  void run();

  Store& store_;
  IdGenerator& ids_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Job>> queue_;  // GUARDED_BY(mu_)
  bool stopping_ = false;                   // GUARDED_BY(mu_)
  // Owned by the writer thread:
  uint64_t seq_;
  std::string hash_;
  std::atomic<uint64_t> published_seq_;
  std::atomic<bool> writable_{true};
  std::atomic<uint64_t> batches_{0};
  std::mutex commit_mu_;
  std::condition_variable commit_cv_;  // notified after each commit and on stop
  bool stopped_ = false;               // GUARDED_BY(commit_mu_)
  std::thread thread_;
};

}  // namespace gw
