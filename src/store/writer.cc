#include "store/writer.h"

#include <rapidjson/document.h>

namespace gw {

namespace {

constexpr size_t kMaxBatchJobs = 1024;

}  // namespace

Result<std::unique_ptr<Writer>> Writer::start(Store& store, IdGenerator& ids,
                                              ScannedKeys scanned) {
  uint64_t seq = 0;
  std::string hash = kGenesisHash;
  auto it = store.iterate(Cf::kEvents);
  it->SeekToLast();
  if (it->Valid()) {
    rapidjson::Document doc;
    doc.Parse(it->value().data(), it->value().size());
    if (doc.HasParseError() || !doc.IsObject() || !doc.HasMember("hash") ||
        !doc["hash"].IsString() || it->key().size() != 8) {
      return make_error(Code::kInternal, "the last event in the log cannot be read");
    }
    seq = decode_u64(std::string_view(it->key().data(), 8));
    hash = doc["hash"].GetString();
  } else if (!it->status().ok()) {
    return make_error(Code::kUnavailable, it->status().ToString());
  }
  std::unique_ptr<Writer> w(new Writer(store, ids, scanned, seq, std::move(hash)));
  w->finish_thread_ = std::thread([p = w.get()] { p->finish_loop(); });
  w->commit_thread_ = std::thread([p = w.get()] { p->commit_loop(); });
  w->thread_ = std::thread([p = w.get()] { p->run(); });
  return w;
}

Writer::Writer(Store& store, IdGenerator& ids, ScannedKeys scanned, uint64_t seq,
               std::string hash)
    : store_(store),
      ids_(ids),
      scanned_(scanned),
      seq_(seq),
      hash_(std::move(hash)),
      published_seq_(seq) {}

Writer::~Writer() { stop(); }

void Writer::submit(std::unique_ptr<Job> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopping_) {
      queue_.push_back(std::move(job));
      cv_.notify_one();
      return;
    }
  }
  job->finish(false);
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
}

uint64_t Writer::wait_beyond(uint64_t seq, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(commit_mu_);
  commit_cv_.wait_for(lock, timeout, [&] {
    return stopped_ || published_seq_.load(std::memory_order_acquire) > seq;
  });
  return published_seq_.load(std::memory_order_acquire);
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
  std::deque<Finished> todo;
  std::unique_lock<std::mutex> lock(finish_mu_);
  for (;;) {
    finish_cv_.wait(lock, [this] { return finish_stop_ || !finishing_.empty(); });
    if (finishing_.empty()) return;  // stopping, nothing left
    todo.swap(finishing_);
    lock.unlock();
    for (auto& f : todo) {
      for (auto& job : f.jobs) job->finish(f.committed);
    }
    todo.clear();  // the jobs are destroyed here too, off the writer and commit threads
    lock.lock();
  }
}

void Writer::await_commit() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return !committing_; });
}

void Writer::run() {
  disable_rocksdb_perf_counters();
  std::vector<std::unique_ptr<Job>> jobs;
  // The last batch handed to the commit thread; the next Tx is staged on top of it.
  std::unique_ptr<Tx> previous;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) break;  // stopping and drained
    if (!writable_.load(std::memory_order_acquire)) {
      // Fail-stop: after a failed write the log's tail on disk is unknown (the WAL may hold the
      // failed batch), so nothing more is written until a restart recovers it.
      cv_.wait(lock, [this] { return !committing_; });  // the failed batch's jobs finish first
      std::vector<std::unique_ptr<Job>> failed(std::make_move_iterator(queue_.begin()),
                                               std::make_move_iterator(queue_.end()));
      queue_.clear();
      queue_finish(failed, false);
      continue;
    }
    auto tx = std::make_unique<Tx>(store_, ids_, seq_, hash_, scanned_, previous.get(),
                                   [this] { await_commit(); });
    for (;;) {
      const size_t first = jobs.size();
      while (!queue_.empty() && jobs.size() < kMaxBatchJobs) {
        jobs.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      lock.unlock();
      for (size_t i = first; i < jobs.size(); ++i) {
        tx->set_savepoint();
        if (!jobs[i]->execute(*tx)) tx->rollback_to_savepoint();
      }
      lock.lock();
      // While the previous batch is still being written, the jobs arriving meanwhile join this
      // one: a batch is as large as the time its predecessor's write took allows.
      if (!committing_ || jobs.size() >= kMaxBatchJobs) break;
      cv_.wait(lock, [this] { return !committing_ || !queue_.empty(); });
      if (queue_.empty()) break;
    }
    lock.unlock();
    auto batch = tx->seal();  // waits for the previous batch's write to end
    previous.reset();
    if (!writable_.load(std::memory_order_acquire) || !batch.ok() ||
        batch.value()->Count() == 0) {
      // The previous batch failed (this one was staged on writes that never happened), or a
      // counter could not be read (nothing was written), or every job was rejected or changed
      // nothing (committed, trivially). The log's tail is unchanged.
      queue_finish(jobs, writable_.load(std::memory_order_acquire) && batch.ok());
      lock.lock();
      continue;
    }
    seq_ = tx->last_seq();
    hash_ = tx->last_hash();
    lock.lock();
    handed_tx_ = tx.get();
    handed_ = std::move(jobs);
    jobs.clear();
    committing_ = true;
    handoff_cv_.notify_one();
    previous = std::move(tx);
  }
  cv_.wait(lock, [this] { return !committing_; });
  commit_stop_ = true;
  handoff_cv_.notify_one();
}

void Writer::commit_loop() {
  disable_rocksdb_perf_counters();
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    handoff_cv_.wait(lock, [this] { return commit_stop_ || handed_tx_ != nullptr; });
    if (handed_tx_ == nullptr) return;  // stopping, nothing left
    Tx* tx = handed_tx_;
    std::vector<std::unique_ptr<Job>> jobs = std::move(handed_);
    handed_.clear();
    lock.unlock();
    rocksdb::WriteOptions wo;
    wo.sync = true;
    auto s = store_.db()->Write(wo, tx->batch());
    const bool committed = s.ok();
    if (committed) {
      {
        std::lock_guard<std::mutex> published(commit_mu_);
        published_seq_.store(tx->last_seq(), std::memory_order_release);
      }
      commit_cv_.notify_all();
      batches_.fetch_add(1, std::memory_order_relaxed);
    } else {
      writable_.store(false, std::memory_order_release);
    }
    queue_finish(jobs, committed);
    lock.lock();
    handed_tx_ = nullptr;
    committing_ = false;
    cv_.notify_one();
  }
}

}  // namespace gw
