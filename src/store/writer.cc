#include "store/writer.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "core/hex.h"

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
  w->thread_ = std::thread([p = w.get()] { p->run(); });
  return w;
}

Writer::Writer(Store& store, IdGenerator& ids, ScannedKeys scanned, uint64_t seq,
               std::string hash)
    : store_(store), ids_(ids), scanned_(scanned), seq_(seq), hash_(std::move(hash)), published_seq_(seq) {}

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

void Writer::run() {
  disable_rocksdb_perf_counters();
  std::vector<std::unique_ptr<Job>> jobs;
  for (;;) {
    jobs.clear();
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      while (!queue_.empty() && jobs.size() < kMaxBatchJobs) {
        jobs.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    if (!writable_.load(std::memory_order_relaxed)) {
      // Fail-stop: after a failed write the log's tail on disk is unknown (the WAL may hold the
      // failed batch), so nothing more is written until a restart recovers it.
      for (auto& job : jobs) job->finish(false);
      continue;
    }
    Tx tx(store_, ids_, seq_, hash_, scanned_);
    for (auto& job : jobs) {
      tx.set_savepoint();
      if (!job->execute(tx)) tx.rollback_to_savepoint();
    }
    bool committed = true;
    auto batch = tx.seal();
    if (!batch.ok()) {
      // A counter could not be read: nothing was written, the log's tail is unchanged.
      committed = false;
    } else if (batch.value()->Count() > 0) {
      rocksdb::WriteOptions wo;
      wo.sync = true;
      auto s = store_.db()->Write(wo, batch.value());
      committed = s.ok();
      if (!committed) writable_.store(false, std::memory_order_release);
      if (committed) {
        seq_ = tx.last_seq();
        hash_ = tx.last_hash();
        {
          std::lock_guard<std::mutex> lock(commit_mu_);
          published_seq_.store(seq_, std::memory_order_release);
        }
        commit_cv_.notify_all();
        batches_.fetch_add(1, std::memory_order_relaxed);
      }
    }
    for (auto& job : jobs) job->finish(committed);
  }
}

}  // namespace gw
