#include "store/writer.h"

#include <cstdio>
#include <sstream>

#include "core/deferral.h"
#include "core/thread_name.h"

namespace gw {

namespace {

constexpr size_t kMaxBatchJobs = 1024;

}  // namespace

Result<std::unique_ptr<Writer>> Writer::start(Store& store, IdGenerator& ids, ScannedKeys scanned,
                                              WriteWatcher* watcher, WriteOnlyKeys write_only) {
  uint64_t seq = 0;
  std::string hash = kGenesisHash;
  auto it = store.iterate(Cf::kEvents);
  it->SeekToLast();
  if (it->Valid()) {
    auto last = event_hash(std::string_view(it->value().data(), it->value().size()));
    if (!last || it->key().size() != 8) {
      return make_error(Code::kInternal, "the last event in the log cannot be read");
    }
    seq = decode_u64(std::string_view(it->key().data(), 8));
    hash = std::move(*last);
  } else if (!it->status().ok()) {
    return io_error(it->status());
  }
  std::unique_ptr<Writer> w(
      new Writer(store, ids, scanned, watcher, write_only, seq, std::move(hash)));
  w->finish_thread_ = std::thread([p = w.get()] { p->finish_loop(); });
  w->commit_thread_ = std::thread([p = w.get()] { p->commit_loop(); });
  w->thread_ = std::thread([p = w.get()] { p->run(); });
  // RocksDB stopped by an error met on its own threads takes no more writes: stopped now, not at
  // the next batch, so that /readyz says so while no write comes.
  // A batch whose write fails is told by commit() itself, which knows it was a batch.
  w->commit_thread_id_ = w->commit_thread_.get_id();
  store.on_writes_stopped([p = w.get()](const std::string& why) {
    if (std::this_thread::get_id() != p->commit_thread_id_) p->stop_writes(why);
  });
  return w;
}

Writer::Writer(Store& store, IdGenerator& ids, ScannedKeys scanned, WriteWatcher* watcher,
               WriteOnlyKeys write_only, uint64_t seq, std::string hash)
    : store_(store),
      ids_(ids),
      scanned_(scanned),
      watcher_(watcher),
      watched_(watcher != nullptr ? watcher->watched_keys() : nullptr),
      write_only_(write_only),
      seq_(seq),
      hash_(std::move(hash)),
      published_seq_(seq) {}

Writer::~Writer() { stop(); }

void Writer::submit(std::unique_ptr<Job> job) {
  std::unique_lock<std::mutex> lock(mu_);
  if (stopping_) {
    lock.unlock();
    job->finish(false);
    return;
  }
  queue_.push_back(std::move(job));
  ++submitted_;
  // Only a parked writer thread needs waking (otherwise a futex call per request); a busy one
  // looks at the queue before it parks. Woken after unlocking, so it does not wait for mu_.
  const bool wake = parked_;
  lock.unlock();
  if (wake) cv_.notify_one();
}

bool Writer::has_unfinished() {
  std::lock_guard<std::mutex> lock(mu_);
  return finished_.load(std::memory_order_acquire) != submitted_;
}

void Writer::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    cv_.notify_one();
  }
  if (thread_.joinable()) thread_.join();
  if (commit_thread_.joinable()) commit_thread_.join();
  {
    std::lock_guard<std::mutex> lock(finish_mu_);
    finish_stop_ = true;
  }
  finish_cv_.notify_one();
  if (finish_thread_.joinable()) finish_thread_.join();
  {
    std::lock_guard<std::mutex> lock(commit_mu_);
    stopped_ = true;
  }
  commit_cv_.notify_all();
  store_.on_writes_stopped(nullptr);  // a failed flush at gatewayd's stop says so itself
}

void Writer::stop_writes(const std::string& why) {
  // Once: every later batch fails without a write. The operator learns why here; /healthz and
  // /readyz answer 503 from now on.
  if (writable_.exchange(false, std::memory_order_acq_rel)) {
    std::fprintf(stderr,
                 "gatewayd: writes stopped: %s; every write now answers 503 until gatewayd is "
                 "restarted\n",
                 why.c_str());
  }
}

uint64_t Writer::wait_beyond(uint64_t seq, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(commit_mu_);
  commit_cv_.wait_for(lock, timeout, [&] {
    return stopped_ || published_seq_.load(std::memory_order_acquire) > seq;
  });
  return published_seq_.load(std::memory_order_acquire);
}

std::string Writer::render_metrics() const {
  std::ostringstream out;
  out << "# HELP gatewayd_store_batch_write_seconds Duration of each synced batch write "
         "(write-ahead log append and fsync, memtable inserts).\n"
      << "# TYPE gatewayd_store_batch_write_seconds histogram\n";
  write_seconds_.render(out, "gatewayd_store_batch_write_seconds", "");
  return out.str();
}

void Writer::queue_finish(std::vector<std::unique_ptr<Job>>& jobs, bool committed) {
  if (jobs.empty()) return;
  {
    std::lock_guard<std::mutex> lock(finish_mu_);
    finishing_.push_back(Finished{std::move(jobs), committed});
  }
  jobs.clear();
  finish_cv_.notify_one();
}

void Writer::finish_loop() {
  name_this_thread("gw-finish");
  std::deque<Finished> todo;
  std::unique_lock<std::mutex> lock(finish_mu_);
  for (;;) {
    finish_cv_.wait(lock, [this] { return finish_stop_ || !finishing_.empty(); });
    if (finishing_.empty()) return;  // stopping, nothing left
    todo.swap(finishing_);
    lock.unlock();
    {
      // What the answers put off (each HTTP thread's wake-up) happens once, after the last one.
      DeferralScope scope;
      for (auto& f : todo) {
        for (auto& job : f.jobs) job->finish(f.committed);
        finished_.fetch_add(f.jobs.size(), std::memory_order_release);
      }
    }
    todo.clear();  // the jobs are destroyed here too, off the writer and commit threads
    lock.lock();
  }
}

void Writer::await_written(uint64_t number) {
  std::unique_lock<std::mutex> lock(commit_mu_);
  commit_cv_.wait(lock, [&] { return written_ >= number; });
}

std::unique_ptr<Writer::Batch> Writer::open_batch() {
  auto batch = std::make_unique<Batch>();
  batch->number = ++opened_;
  batch->base = last_tx_;
  if (last_tx_) {
    // The base is the batch before this one; the one before the base is written already.
    batch->tx = std::make_shared<Tx>(store_, ids_, last_tx_->last_seq(), last_tx_->last_hash(),
                                     scanned_, last_tx_.get(),
                                     [this, n = batch->number - 1] { await_written(n); });
  } else {
    batch->tx = std::make_shared<Tx>(store_, ids_, seq_, hash_, scanned_);
  }
  if (watched_ != nullptr) batch->tx->watch(watched_);
  if (write_only_ != nullptr) batch->tx->write_only(write_only_);
  last_tx_ = batch->tx;
  return batch;
}

void Writer::run() {
  name_this_thread("gw-stage");
  disable_rocksdb_perf_counters();
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (commit_wants_ && open_ && !ready_ &&
        (submitted_ - queue_.size() >= wanted_upto_ || open_->jobs.size() >= kMaxBatchJobs)) {
      // The commit thread is free, and every job queued before it asked is staged (group
      // commit: the jobs that queued up during the last write share the next one).
      ready_ = std::move(open_);
      commit_wants_ = false;
      handoff_cv_.notify_one();
    }
    if (!queue_.empty() && !ready_ && !(open_ && open_->jobs.size() >= kMaxBatchJobs)) {
      if (!open_) open_ = open_batch();
      Batch* batch = open_.get();  // stays the writer thread's while it is not parked
      std::unique_ptr<Job> job = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      // After a failed write nothing is executed; the job only waits in its batch to be failed
      // in order (fail-stop: the log's tail on disk is unknown until a restart recovers it).
      if (writable_.load(std::memory_order_acquire)) {
        batch->tx->set_savepoint();
        if (!job->execute(*batch->tx)) batch->tx->rollback_to_savepoint();
      }
      lock.lock();
      batch->jobs.push_back(std::move(job));
      continue;
    }
    if (stopping_ && queue_.empty() && !open_ && !ready_) break;
    parked_ = true;
    if (open_) handoff_cv_.notify_one();  // the commit thread may take it now
    cv_.wait(lock);
    parked_ = false;
  }
  commit_stop_ = true;
  handoff_cv_.notify_one();
}

void Writer::commit_loop() {
  name_this_thread("gw-commit");
  disable_rocksdb_perf_counters();
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    std::unique_ptr<Batch> batch;
    if (ready_) {
      batch = std::move(ready_);
      cv_.notify_one();  // the writer thread may stage again
    } else if (parked_ && open_) {
      batch = std::move(open_);
      // The writer thread waits: for jobs (none queued) or, when stopping, for the last batch to
      // be taken, or for this batch to be taken because it is full.
      if (stopping_ || !queue_.empty()) cv_.notify_one();
    } else if (commit_stop_) {
      return;
    } else {
      // Nothing staged yet, or the writer thread is still staging: it hands the batch over once
      // every job queued by now is staged.
      if (!commit_wants_) {
        commit_wants_ = true;
        wanted_upto_ = submitted_;
      }
      handoff_cv_.wait(lock);
      continue;
    }
    commit_wants_ = false;
    lock.unlock();
    commit(*batch);
    batch.reset();  // drops the base; the Tx itself lives on as the base of the next batch
    lock.lock();
  }
}

void Writer::commit(Batch& batch) {
  bool committed = writable_.load(std::memory_order_acquire);
  if (committed) {
    auto sealed = batch.tx->seal();  // settles: the base was written by this thread
    batch.base.reset();
    std::string failure;
    if (!sealed.ok()) {
      // The batch could not be sealed: nothing of it is written, but the batch after it may be
      // staged on its writes already, so writing stops as after a failed write.
      committed = false;
      failure = "cannot seal a batch: " + sealed.error().detail;
    } else if (sealed.value()->Count() == 0) {
      // Every job was rejected or changed nothing: committed, trivially.
    } else {
      rocksdb::WriteOptions wo;
      wo.sync = true;
      const auto& watched = batch.tx->watched();
      if (watcher_ != nullptr && !watched.empty()) watcher_->before_write(watched);
      const auto started = std::chrono::steady_clock::now();
      auto s = store_.db()->Write(wo, sealed.value());
      write_seconds_.observe(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
      if (watcher_ != nullptr && !watched.empty()) watcher_->after_write(watched);
      committed = s.ok();
      if (!committed) failure = "cannot write a batch: " + s.ToString();
      if (committed) {
        {
          std::lock_guard<std::mutex> published(commit_mu_);
          published_seq_.store(batch.tx->last_seq(), std::memory_order_release);
        }
        batches_.fetch_add(1, std::memory_order_relaxed);
      }
    }
    // Said here unless RocksDB's report of the failure stopped the writes first
    // (Store::on_writes_stopped), in its words.
    if (!committed) stop_writes(failure);
  }
  queue_finish(batch.jobs, committed);
  {
    std::lock_guard<std::mutex> lock(commit_mu_);
    written_ = batch.number;
  }
  commit_cv_.notify_all();
}

}  // namespace gw
