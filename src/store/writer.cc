#include "store/writer.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "core/hex.h"

namespace gw {

namespace {

constexpr size_t kMaxBatchJobs = 1024;

rocksdb::Slice slice(std::string_view s) { return rocksdb::Slice(s.data(), s.size()); }

}  // namespace

std::string encode_event(uint64_t seq, const std::string& event_id, const EventDraft& d,
                         const std::string& prev_hash, std::string* hash_out) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  auto str = [&w](const char* key, const std::string& v) {
    w.Key(key);
    w.String(v.data(), static_cast<rapidjson::SizeType>(v.size()));
  };
  w.StartObject();
  w.Key("seq");
  w.Uint64(seq);
  str("event_id", event_id);
  str("type", d.type);
  str("aggregate_kind", d.aggregate_kind);
  str("aggregate_id", d.aggregate_id);
  w.Key("aggregate_version");
  w.Uint64(d.aggregate_version);
  str("tenant", d.tenant);
  str("actor", d.actor);
  w.Key("time");
  w.Int64(d.time);
  w.Key("schema_version");
  w.Int(kSchemaVersion);
  if (d.caused_by != 0) {
    w.Key("caused_by");
    w.Uint64(d.caused_by);
  }
  w.Key("data");
  w.RawValue(d.data_json.data(), d.data_json.size(), rapidjson::kObjectType);
  w.EndObject();
  std::string canonical(buf.GetString(), buf.GetSize());
  std::string hash = sha256_hex(prev_hash + canonical);
  std::string out = canonical;
  out.pop_back();  // the closing brace
  out += ",\"prev_hash\":\"" + prev_hash + "\",\"hash\":\"" + hash + "\"}";
  if (hash_out != nullptr) *hash_out = std::move(hash);
  return out;
}

Tx::Tx(Store& store, IdGenerator& ids, uint64_t last_seq, std::string last_hash)
    : store_(store),
      ids_(ids),
      wb_(rocksdb::BytewiseComparator(), 0, /*overwrite_key=*/true),
      last_seq_(last_seq),
      last_hash_(std::move(last_hash)) {}

Result<std::optional<std::string>> Tx::get(Cf which, std::string_view key) {
  std::string value;
  auto s = wb_.GetFromBatchAndDB(store_.db(), rocksdb::ReadOptions(), store_.cf(which), slice(key),
                                 &value);
  if (s.IsNotFound()) return std::optional<std::string>();
  if (!s.ok()) return make_error(Code::kUnavailable, s.ToString());
  return std::optional<std::string>(std::move(value));
}

void Tx::put(Cf which, std::string_view key, std::string_view value) {
  wb_.Put(store_.cf(which), slice(key), slice(value));
}

void Tx::del(Cf which, std::string_view key) { wb_.Delete(store_.cf(which), slice(key)); }

std::unique_ptr<rocksdb::Iterator> Tx::iterate(Cf which) {
  auto* base = store_.db()->NewIterator(rocksdb::ReadOptions(), store_.cf(which));
  return std::unique_ptr<rocksdb::Iterator>(wb_.NewIteratorWithBase(store_.cf(which), base));
}

uint64_t Tx::append(const EventDraft& draft) {
  uint64_t seq = last_seq_ + 1;
  std::string hash;
  std::string value = encode_event(seq, ids_.next("evt"), draft, last_hash_, &hash);
  wb_.Put(store_.cf(Cf::kEvents), encode_u64(seq), value);
  last_seq_ = seq;
  last_hash_ = std::move(hash);
  return seq;
}

void Tx::set_savepoint() {
  wb_.SetSavePoint();
  saved_seq_ = last_seq_;
  saved_hash_ = last_hash_;
}

void Tx::rollback_to_savepoint() {
  wb_.RollbackToSavePoint();
  last_seq_ = saved_seq_;
  last_hash_ = saved_hash_;
}

Result<std::unique_ptr<Writer>> Writer::start(Store& store, IdGenerator& ids) {
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
  std::unique_ptr<Writer> w(new Writer(store, ids, seq, std::move(hash)));
  w->thread_ = std::thread([p = w.get()] { p->run(); });
  return w;
}

Writer::Writer(Store& store, IdGenerator& ids, uint64_t seq, std::string hash)
    : store_(store), ids_(ids), seq_(seq), hash_(std::move(hash)), published_seq_(seq) {}

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
    Tx tx(store_, ids_, seq_, hash_);
    for (auto& job : jobs) {
      tx.set_savepoint();
      if (!job->execute(tx)) tx.rollback_to_savepoint();
    }
    bool committed = true;
    if (tx.batch()->Count() > 0) {
      rocksdb::WriteOptions wo;
      wo.sync = true;
      auto s = store_.db()->Write(wo, tx.batch());
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
