#include "projections/log_fold.h"

#include <future>

#include "store/store.h"

namespace gw {

namespace {

// A batch of events read and parsed at once holds at most kParseBatch events, and stops taking
// more once their bytes reach kParseBatchBytes: 4096 profiles with 60 KB of WAF directives each
// made a batch of 240 MB, its bytes and what was parsed from them held together.
constexpr size_t kParseBatch = 4096;
constexpr size_t kParseBatchBytes = 4 << 20;

// A run of consecutive stored events and, once parsed, what they hold.
struct Batch {
  struct Stored {
    uint64_t seq;
    size_t offset;  // of its bytes in `bytes`
    size_t size;
  };
  std::string bytes;  // every event's stored bytes, one after another
  std::vector<Stored> stored;
  std::vector<Result<LoggedEvent>> parsed;

  std::string_view event(size_t i) const {
    return std::string_view(bytes).substr(stored[i].offset, stored[i].size);
  }
};

// Reads the events after `it`'s position through `until` into `batch`, at most kParseBatch (or
// kParseBatchBytes, past the first event).
Result<bool> read_batch(rocksdb::Iterator& it, uint64_t until, Batch& batch) {
  batch.bytes.clear();
  batch.stored.clear();
  for (; it.Valid() && batch.stored.size() < kParseBatch && batch.bytes.size() < kParseBatchBytes;
       it.Next()) {
    if (it.key().size() != 8) return make_error(Code::kInternal, "an event key is malformed");
    const uint64_t seq = decode_u64(std::string_view(it.key().data(), 8));
    if (seq > until) break;
    batch.stored.push_back(Batch::Stored{seq, batch.bytes.size(), it.value().size()});
    batch.bytes.append(it.value().data(), it.value().size());
  }
  if (!it.status().ok()) return io_error(it.status());
  return true;
}

void parse_batch(Batch& batch) {
  batch.parsed.clear();
  batch.parsed.reserve(batch.stored.size());
  for (size_t i = 0; i < batch.stored.size(); ++i) {
    batch.parsed.push_back(parse_logged_event(batch.event(i)));
  }
}

Result<bool> fold_batch(Batch& batch, const EventSink& add, const EventInspector& inspect) {
  for (size_t i = 0; i < batch.stored.size(); ++i) {
    const uint64_t seq = batch.stored[i].seq;
    if (inspect) {
      if (auto r = inspect(seq, batch.event(i)); !r.ok()) return r;
    }
    auto& parsed = batch.parsed[i];
    if (!parsed.ok()) {
      return make_error(Code::kInternal,
                        "event " + std::to_string(seq) + ": " + parsed.error().detail);
    }
    if (parsed.value().seq != seq) {
      return make_error(Code::kInternal, "event " + std::to_string(seq) + " names seq " +
                                             std::to_string(parsed.value().seq));
    }
    if (auto r = add(std::move(parsed.value())); !r.ok()) return r;
  }
  return true;
}

}  // namespace

void LogFold::reserve(uint64_t events) {
  index_.reserve(index_.size() + events);
  touches_.reserve(touches_.size() + events);
  team_events_.reserve(team_events_.size() + events);
}

Result<bool> LogFold::add(LoggedEvent e) {
  if (e.seq <= last_seq_) {
    return make_error(Code::kInternal, "event " + std::to_string(e.seq) + " is out of order");
  }
  const Meta& m = meta_of(e.record);
  auto [team, new_team] = team_index_.try_emplace(m.team_id, static_cast<uint32_t>(teams_.size()));
  if (new_team) teams_.push_back(m.team_id);
  team_events_.push_back(TeamEvent{team->second, e.seq});
  auto found = index_.find(m.id);
  const auto at = static_cast<uint32_t>(found == index_.end() ? aggregates_.size() : found->second);
  if (found == index_.end()) {
    aggregates_.push_back(Aggregate{std::move(e.record), e.version, e.seq});
  } else {
    index_.erase(found);  // its key views the id of the record about to be replaced
    aggregates_[at].record = std::move(e.record);
    aggregates_[at].version = e.version;
  }
  const std::string& id = meta_of(aggregates_[at].record).id;
  index_.emplace(id, at);
  touches_.push_back(Touch{at, e.version, e.seq});
  // The open-request queue, by the rules of track_requests in projections/apply.cc.
  if (opens_verification_request(e.type)) {
    open_requests_[e.seq] = id;
    latest_request_[id] = e.seq;
  } else if (answers_verification_request(e.type) && e.caused_by != 0) {
    open_requests_.erase(e.caused_by);
    auto latest = latest_request_.find(id);
    if (latest != latest_request_.end() && latest->second == e.caused_by) {
      latest_request_.erase(latest);
    }
  }
  ++events_;
  last_seq_ = e.seq;
  return true;
}

Result<bool> fold_events(rocksdb::Iterator& it, uint64_t until, LogFold& fold,
                         const EventInspector& inspect) {
  return fold_events(
      it, until, [&fold](LoggedEvent event) { return fold.add(std::move(event)); }, inspect);
}

Result<bool> fold_events(rocksdb::Iterator& it, uint64_t until, const EventSink& add,
                         const EventInspector& inspect) {
  // A helper thread parses one batch while this one reads the next and folds the one before.
  Batch batches[2];
  Batch* current = &batches[0];
  Batch* next = &batches[1];
  if (auto r = read_batch(it, until, *current); !r.ok()) return r;
  auto parsing = std::async(std::launch::async, parse_batch, std::ref(*current));
  while (!current->stored.empty()) {
    auto read = read_batch(it, until, *next);
    parsing.get();
    if (!read.ok()) return read;
    if (!next->stored.empty())
      parsing = std::async(std::launch::async, parse_batch, std::ref(*next));
    if (auto r = fold_batch(*current, add, inspect); !r.ok()) return r;
    std::swap(current, next);
  }
  return true;
}

}  // namespace gw
