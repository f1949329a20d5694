#include "projections/read_model.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>

#include "projections/apply.h"
#include "projections/keys.h"
#include "projections/list_memo.h"
#include "projections/read_cache.h"

namespace gw {

namespace {

std::string_view view(const rocksdb::Slice& s) { return std::string_view(s.data(), s.size()); }

// Steps along an iterator before a Seek: a key a few entries on is reached with Next() (one step
// along the memtable's bottom level, or within a table file's block), a larger gap with Seek.
constexpr int kMaxSteps = 8;

// Steps `it` on to its first key at or after `key` in at most kMaxSteps steps; false if that is
// farther. True also at its end (or on an error: see status()).
bool step_to(rocksdb::Iterator& it, const rocksdb::Slice& key) {
  for (int steps = 0; it.Valid() && it.key().compare(key) < 0; ++steps) {
    if (steps == kMaxSteps) return false;
    it.Next();
  }
  return true;
}

// Moves `it` to its first key at or after `key`: a few steps, else a Seek (also of an iterator
// not placed yet). False if it has none, or on an error (see status()), which is never sought
// over: a Seek clears an iterator's status, and a read that failed went unseen (the page of a
// list one record short; helper 92).
bool move_to(rocksdb::Iterator& it, const rocksdb::Slice& key) {
  const bool near = step_to(it, key);
  if (!it.status().ok()) return false;
  if (!near || !it.Valid()) it.Seek(key);
  return it.Valid();
}

// Another filter's index in a list's join (ReadModel::list): whether it has the entry of a seq the
// walk of the narrowest index is at. Where its entries lie close to the walk's, an iterator of its
// own steps along with the walk; where they lie far apart (a Seek, which merges every level and
// steps over deleted entries, cost about 5 us where a point lookup, its levels passed over by
// their Bloom filters, cost 1.5), entries are looked up one by one and the iterator is moved on
// only after kLookupsPerSeek of them (twice as many after each Seek that bought nothing). Where it
// is, it tells the walk of its next entry: a run of the walk's entries it lacks is stepped over at
// once, and its end ends the list. An iterator steps over every deleted entry in its way (a moved
// or deleted record's, until a compaction drops it), which a lookup does not see: one Seek or Next
// that would step over more than kMaxSkipped keys stops, and the cursor looks entries up from then
// on (with 99,950 of 100,000 entries moved out of `active`, a list of `active` and a rare
// workload went from 0.1 ms to 12 to 29 ms with the join before this bound; helper 88).
class FilterCursor {
 public:
  enum class Has { kEntry, kNone, kEnded };
  static constexpr int kLookupsPerSeek = 16;
  static constexpr int kMaxLookupsPerSeek = 1024;
  static constexpr uint64_t kMaxSkipped = 32;

  FilterCursor(const Store& store, std::string prefix, const rocksdb::Snapshot* snap)
      : store_(store),
        prefix_(std::move(prefix)),
        snap_(snap),
        it_(store.iterate_under(Cf::kProjections, prefix_, snap, kMaxSkipped)) {}

  // Whether the index has the entry of `seq`. kNone sets *next to the seq of its next entry when
  // that is known (else leaves it empty); kEnded: it has no entry at or after `seq`, or an error:
  // the caller checks error() after every call.
  Has has(std::string_view seq, std::string* next) {
    key_.assign(prefix_).append(seq);
    const rocksdb::Slice key(key_);
    if (placed_) {
      const bool near = step_to(*it_, key);
      // A Seek after which the next entry asked for was not near bought nothing: the next one
      // waits for twice as many lookups (entries far apart stay so); one after which it was near
      // resets the wait.
      if (sought_) {
        seek_after_ = near ? kLookupsPerSeek : std::min(2 * seek_after_, kMaxLookupsPerSeek);
      }
      sought_ = false;
      placed_ = near;
    }
    if (!placed_ && !lookups_only_ && lookups_ >= seek_after_) {
      it_->Seek(key);
      placed_ = true;
      sought_ = true;
      lookups_ = 0;
    }
    if (placed_ && it_->status().IsIncomplete()) {  // too many deleted entries in the way
      placed_ = false;
      lookups_only_ = true;
    }
    if (!placed_) {
      ++lookups_;
      auto hit = store_.get(Cf::kProjections, key_, snap_);
      if (!hit.ok()) {
        error_ = std::move(hit.error());
        return Has::kEnded;
      }
      return hit.value() ? Has::kEntry : Has::kNone;
    }
    if (!it_->Valid()) {
      if (!it_->status().ok()) error_ = io_error(it_->status());
      return Has::kEnded;
    }
    if (it_->key() == key) return Has::kEntry;
    next->assign(view(it_->key()).substr(prefix_.size()));
    return Has::kNone;
  }

  // Moves *seq on to the index's first entry at or after it, where its iterator can tell (else
  // leaves it); false if the index has none there, or on an error (see error()). The next has()
  // must ask for *seq or a later one.
  bool skip_to(std::string* seq) {
    if (lookups_only_) return true;
    key_.assign(prefix_).append(*seq);
    it_->Seek(key_);
    placed_ = true;
    sought_ = false;
    lookups_ = 0;
    if (it_->status().IsIncomplete()) {  // too many deleted entries in the way
      placed_ = false;
      lookups_only_ = true;
      return true;
    }
    if (!it_->Valid()) {
      if (!it_->status().ok()) error_ = io_error(it_->status());
      return false;
    }
    seq->assign(view(it_->key()).substr(prefix_.size()));
    return true;
  }

  std::optional<Error>& error() { return error_; }

 private:
  const Store& store_;
  const std::string prefix_;
  const rocksdb::Snapshot* snap_;
  std::unique_ptr<rocksdb::Iterator> it_;
  std::string key_;      // an entry key; its buffer is reused
  bool placed_ = false;  // the iterator is at the first entry at or after the one asked for last
  bool lookups_only_ = false;  // the iterator stopped at too many deleted entries
  bool sought_ = false;        // the iterator was placed by a Seek for the entry asked for last
  int seek_after_ = kLookupsPerSeek;  // lookups before the next Seek
  int lookups_ = kLookupsPerSeek;  // point lookups since the iterator was last placed
  std::optional<Error> error_;
};

// How many create_seqs lie from index entry suffix `from` to `to` (each an encoded seq), at most
// the gap in entries of any index; 0 if `to` is not past `from` or either is no encoded seq.
uint64_t seq_gap(std::string_view from, std::string_view to) {
  if (from.size() != 8 || to.size() != 8) return 0;
  const uint64_t a = decode_u64(from), b = decode_u64(to);
  return b > a ? b - a : 0;
}

// A list of several filters (ReadModel::list): a join of their indexes, `prefixes` narrowest
// first (by their counters), all in create_seq order. The narrowest index is walked, and each
// walked entry is looked for in the others (FilterCursor); where one of them tells of its next
// entry, the walk goes on from there, so a run of entries it lacks is stepped over at once, and
// an index at its end ends the list. Every match is counted for the total, which is returned;
// `want` is given the values (record ids) of the matches from the `offset`-th on, at most
// `per_page` of them. The work is bounded by the narrowest filter, in whatever order the query
// names them.
Result<uint64_t> join(const Store& store, const std::vector<std::string>& prefixes,
                      const rocksdb::Snapshot* snap, uint64_t offset, uint64_t per_page,
                      const std::function<void(std::string_view)>& want) {
  const std::string& walked = prefixes[0];
  std::vector<FilterCursor> others;
  others.reserve(prefixes.size() - 1);
  for (size_t i = 1; i < prefixes.size(); ++i) others.emplace_back(store, prefixes[i], snap);
  uint64_t bound = FilterCursor::kMaxSkipped;  // see below
  auto it = store.iterate_under(Cf::kProjections, walked, snap, bound);
  uint64_t total = 0;
  uint64_t taken = 0;  // entries given to `want`
  std::string seq;     // the walked entry's
  std::string next;    // where another index's next entry is
  std::string key;     // an entry key of the walked index; its buffer is reused
  std::string stop;    // where the walk stopped at deleted entries
  it->Seek(walked);
  while (true) {
    if (!it->Valid()) {
      if (it->status().ok()) break;  // the end
      if (!it->status().IsIncomplete()) return io_error(it->status());
      // The walked index has a run of deleted or moved entries here, over `bound` of RocksDB's
      // internal keys (each such entry is two: the entry and a tombstone over it). The
      // narrowest index by its counter need not be the cheapest to walk: with all but 60 of
      // 24,000 entries moved out of `active`, a list of `active` and a 60-record workload
      // stepped over the 23,940, 10 ms (helper 88). From where the walk stopped (RocksDB's
      // "rocksdb.iterator.internal-key"), the others tell where their next entries are (a Seek
      // each), and the walk goes on from the farthest, so a run the others lack is passed at
      // once. Where that bought less than the walk's bound (the others have entries all along
      // the run, or beside its entries), the walk's bound doubles, so such a run costs a few
      // Seeks more than a walk through it (helper 92: with the others' entries beside the
      // deleted ones, 2 to 4 times as long before it doubled on such gains too).
      auto at = it->GetProperty("rocksdb.iterator.internal-key", &stop);
      if (!at.ok() || stop.size() <= walked.size() || !stop.starts_with(walked)) {
        return make_error(Code::kInternal, "a list's walk cannot tell where it stopped");
      }
      next.assign(stop, walked.size());
      bool ended = false;
      for (size_t i = 0; i < others.size() && !ended; ++i) {
        ended = !others[i].skip_to(&next);
        if (auto& error = others[i].error()) return std::move(*error);
      }
      if (ended) break;
      if (seq_gap(std::string_view(stop).substr(walked.size()), next) < bound) {
        bound *= 2;
        it = store.iterate_under(Cf::kProjections, walked, snap, bound);
      }
      key.assign(walked).append(next);
      it->Seek(key);
      continue;
    }
    seq.assign(view(it->key()).substr(walked.size()));
    next.clear();
    FilterCursor::Has has = FilterCursor::Has::kEntry;
    for (size_t i = 0; i < others.size() && has == FilterCursor::Has::kEntry; ++i) {
      has = others[i].has(seq, &next);
      if (auto& error = others[i].error()) return std::move(*error);
    }
    if (has == FilterCursor::Has::kEnded) break;
    if (has == FilterCursor::Has::kEntry) {
      if (total++ >= offset && taken < per_page) {
        want(view(it->value()));
        ++taken;
      }
      it->Next();
    } else if (next.empty()) {
      it->Next();
    } else {
      key.assign(walked).append(next);
      move_to(*it, rocksdb::Slice(key));
    }
  }
  return total;  // the loop returns its errors; it may end on an Incomplete status (`ended`)
}

}  // namespace

bool ReadModel::filterable(Kind kind, std::string_view field) {
  switch (kind) {
    case Kind::kProfile:
      return field == "hostname";
    case Kind::kDomain:
      return field == "hostname" || field == "status" || field == "workload_id";
    case Kind::kWebhook:
      return field == "status" || field == "workload_id";
  }
  return false;
}

Result<bool> ReadModel::read_owned(Kind kind, std::string_view team, std::string_view id,
                                   const rocksdb::Snapshot* snap, Owned* out) const {
  if (kind_of_id(id) != kind) return false;
  const std::string key = keys::record(id);
  // The read cache holds a record for its owner only (see ReadCache::find).
  const bool use_cache = cache_ != nullptr && snap == nullptr;
  ReadCache::Ticket ticket;
  const bool hit = use_cache && cache_->find(key, team, &out->raw, &ticket);
  if (!hit) {
    auto raw = store_.get(Cf::kProjections, key, snap);
    if (!raw.ok()) return std::move(raw.error());
    if (!raw.value()) return false;
    out->raw = std::move(*raw.value());
  }
  if (!keys::decode_record(out->raw, &out->header, &out->json)) {
    return make_error(Code::kInternal, "stored record is malformed");
  }
  if (out->header.team != team) return false;
  if (use_cache && !hit) cache_->fill(key, team, ticket, out->raw);
  return true;
}

Result<std::optional<ReadModel::Found>> ReadModel::get(Kind kind, std::string_view team,
                                                       std::string_view id) const {
  Owned record;
  auto owned = read_owned(kind, team, id, nullptr, &record);
  if (!owned.ok()) return std::move(owned.error());
  if (!owned.value() || record.header.deleted) return std::optional<Found>();
  return std::optional<Found>(Found{std::string(record.json), record.header.version});
}

Result<std::optional<ReadModel::Found>> ReadModel::get_as_of(Kind kind, std::string_view team,
                                                             std::string_view id,
                                                             uint64_t as_of) const {
  using Maybe = std::optional<Found>;
  Snapshot snap(store_);
  Owned current;
  auto owned = read_owned(kind, team, id, snap.get(), &current);
  if (!owned.ok()) return std::move(owned.error());
  if (!owned.value()) return Maybe();
  // The record's last event at or before `as_of`. Its history holds versions 1 to its current
  // one, and sequence numbers grow with versions, so a binary search over the versions finds it
  // in about log2(versions) point reads (a walk from version 1 grew with the history).
  std::optional<std::string> last;
  const std::string prefix = keys::history_prefix(id);
  uint64_t low = 1, high = current.header.version;
  while (low <= high) {
    const uint64_t version = low + (high - low) / 2;
    auto seq = store_.get(Cf::kProjections, prefix + encode_u64(version), snap.get());
    if (!seq.ok()) return std::move(seq.error());
    if (!seq.value()) {
      return make_error(Code::kInternal, "the history of " + std::string(id) + " misses version " +
                                             std::to_string(version));
    }
    if (decode_u64(*seq.value()) <= as_of) {
      last = std::move(*seq.value());
      low = version + 1;
    } else {
      high = version - 1;
    }
  }
  if (!last) return Maybe();
  auto event = store_.get(Cf::kEvents, *last, snap.get());
  if (!event.ok()) return std::move(event.error());
  if (!event.value()) return make_error(Code::kInternal, "history names a missing event");
  auto parsed = parse_logged_event(*event.value());  // upcasts older schema versions
  if (!parsed.ok()) return std::move(parsed.error());
  const LoggedEvent& e = parsed.value();
  if (meta_of(e.record).deleted_at != 0) return Maybe();
  return Maybe(Found{to_json(e.record), e.version});
}

Result<uint64_t> ReadModel::last_seq() const {
  auto it = store_.iterate(Cf::kEvents);
  it->SeekToLast();
  if (!it->status().ok()) return io_error(it->status());
  if (!it->Valid()) return uint64_t{0};
  if (it->key().size() != 8) return make_error(Code::kInternal, "an event key is malformed");
  return decode_u64(view(it->key()));
}

std::string the_logs_end(uint64_t last_seq) {
  if (last_seq == 0) return "it has no events yet";
  return "its last event is " + std::to_string(last_seq);
}

Result<ReadModel::Page> ReadModel::list(Kind kind, std::string_view team,
                                        const std::vector<Filter>& filters, uint64_t page,
                                        uint64_t per_page) const {
  const uint64_t offset = (page - 1) * per_page;
  Page out;
  // The page's record keys, with their positions on the page.
  std::vector<std::pair<std::string, size_t>> wanted;
  auto want = [&wanted](std::string_view id) {
    wanted.emplace_back(keys::record(id), wanted.size());
  };
  // The indexes to read (the kind's list, or one per filter), each with its entry count from its
  // counter, fewest first. An index with no entries means an empty list.
  std::vector<std::pair<uint64_t, std::string>> indexes;
  if (filters.empty()) indexes.emplace_back(0, keys::list_prefix(team, kind));
  for (const Filter& f : filters) {
    indexes.emplace_back(0, keys::filter_prefix(team, kind, f.field, f.value));
  }
  // A deep page of one index starts from the memo's nearest checkpoint, if it has one; the
  // snapshot is then taken under the memo's lock (see projections/list_memo.h).
  std::optional<Snapshot> snap;
  const bool memo = memo_ != nullptr && indexes.size() == 1 && offset >= ListMemo::kStride;
  ListMemo::Visit visit;
  std::optional<ListMemo::Checkpoint> from;
  if (memo) {
    from = memo_->begin(
        indexes[0].second, offset, [&] { snap.emplace(store_); }, &visit);
  } else {
    snap.emplace(store_);
  }
  for (auto& [entries, prefix] : indexes) {
    auto count = store_.get(Cf::kProjections, keys::count_of_prefix(prefix), snap->get());
    if (!count.ok()) return std::move(count.error());
    entries = count.value() ? decode_u64(*count.value()) : 0;
    if (entries == 0) return out;
  }
  std::sort(indexes.begin(), indexes.end());
  if (indexes.size() > 1) {
    std::vector<std::string> prefixes;
    for (auto& index : indexes) prefixes.push_back(std::move(index.second));
    auto total = join(store_, prefixes, snap->get(), offset, per_page, want);
    if (!total.ok()) return std::move(total.error());
    out.total = total.value();
  } else {
    // The index's counter gives the total; only the entries before the page (from the memo's
    // checkpoint, if any) and the page itself are read.
    const std::string& walked = indexes[0].second;
    auto it = store_.iterate_under(Cf::kProjections, walked, snap->get());
    out.total = indexes[0].first;
    if (offset >= out.total) return out;
    uint64_t at = 0;  // the iterator's offset in the index
    bool placed = false;
    if (from) {
      const std::string key = walked + encode_u64(from->seq);
      it->Seek(key);
      // The checkpoint is true in this snapshot (see ListMemo::begin); were it not, the walk
      // would start from the index's start.
      placed = it->Valid() && it->key() == rocksdb::Slice(key);
      if (placed) {
        at = from->offset;
      } else {
        memo_->count_misplaced();
      }
    }
    if (!placed) it->Seek(walked);
    const uint64_t start = at;
    std::vector<ListMemo::Checkpoint> found;  // for the memo
    for (; it->Valid() && it->key().starts_with(walked) && wanted.size() < per_page;
         it->Next(), ++at) {
      if (memo && at % ListMemo::kStride == 0 && at != start) {
        found.push_back({at, decode_u64(view(it->key()).substr(walked.size()))});
      }
      if (at < offset) continue;
      want(view(it->value()));
      if (memo && wanted.size() == per_page) {  // the page's last entry: where the next one starts
        found.push_back({at, decode_u64(view(it->key()).substr(walked.size()))});
      }
    }
    if (!it->status().ok()) return io_error(it->status());
    if (memo) memo_->remember(walked, visit, found, at - start, placed);
  }
  // The page's records, walked in key order with one iterator of their own (the index's stops at
  // the index's end). Ids are time-ordered, so
  // records created one after another are usually neighbours in key order: a record a few keys
  // further on is reached with Next() (one step along the memtable's bottom level) and only a
  // larger gap costs a Seek. Twenty point lookups, each a search from the top of the memtable's
  // skiplist, were about half of a list request. (Records are never deleted from the store: a
  // deleted one is kept, marked, so there are no tombstones to step over.)
  auto it = store_.iterate_under(Cf::kProjections, keys::record(""), snap->get());
  const size_t page_size = wanted.size();
  std::sort(wanted.begin(), wanted.end());
  std::vector<std::optional<std::string>> found(page_size);
  for (const auto& [key, position] : wanted) {
    const rocksdb::Slice target(key);
    // Not stored (cannot happen), or an error, which the status check after the loop returns.
    if (!move_to(*it, target) || it->key() != target) continue;
    keys::RecordHeader header;
    std::string_view json;
    if (!keys::decode_record(view(it->value()), &header, &json)) {
      return make_error(Code::kInternal, "stored record is malformed");
    }
    found[position].emplace(json);
  }
  if (!it->status().ok()) return io_error(it->status());
  out.items.reserve(page_size);
  for (auto& item : found) {
    if (item) out.items.push_back(std::move(*item));
  }
  return out;
}

namespace {

// Whether one more event of `size` bytes fits a page that holds `count` events of `bytes` bytes.
bool fits_page(size_t count, size_t bytes, size_t size) {
  return count == 0 || bytes + size <= ReadModel::kMaxPageBytes;
}

}  // namespace

Result<std::optional<ReadModel::History>> ReadModel::history(Kind kind, std::string_view team,
                                                             std::string_view id,
                                                             uint64_t after_version,
                                                             uint64_t limit) const {
  Snapshot snap(store_);
  Owned record;
  auto owned = read_owned(kind, team, id, snap.get(), &record);
  if (!owned.ok()) return std::move(owned.error());
  if (!owned.value()) return std::optional<History>();
  History out;
  if (after_version == UINT64_MAX) return std::optional<History>(std::move(out));
  const std::string prefix = keys::history_prefix(id);
  auto it = store_.iterate_under(Cf::kProjections, prefix, snap.get());
  size_t bytes = 0;
  uint64_t last_version = 0;
  for (it->Seek(prefix + encode_u64(after_version + 1));
       it->Valid() && it->key().starts_with(prefix); it->Next()) {
    if (out.events.size() >= limit) {
      out.next_after_version = last_version;
      break;
    }
    auto event = store_.get(Cf::kEvents, std::string(view(it->value())), snap.get());
    if (!event.ok()) return std::move(event.error());
    if (!event.value()) return make_error(Code::kInternal, "history names a missing event");
    if (!fits_page(out.events.size(), bytes, event.value()->size())) {
      out.next_after_version = last_version;
      break;
    }
    bytes += event.value()->size();
    last_version = decode_u64(view(it->key()).substr(prefix.size()));
    out.events.push_back(std::move(*event.value()));
  }
  if (!it->status().ok()) return io_error(it->status());
  return std::optional<History>(std::move(out));
}

Result<ReadModel::Events> ReadModel::tenant_events(std::string_view team, uint64_t after,
                                                   uint64_t limit) const {
  const std::string prefix = keys::tenant_events_prefix(team);
  Events out;
  out.next_after = after;
  if (after == UINT64_MAX) return out;  // nothing comes after it (and after + 1 would wrap to 0)
  auto it = store_.iterate_under(Cf::kProjections, prefix);
  size_t bytes = 0;
  for (it->Seek(prefix + encode_u64(after + 1));
       it->Valid() && it->key().starts_with(prefix) && out.events.size() < limit; it->Next()) {
    uint64_t seq = decode_u64(view(it->key()).substr(prefix.size()));
    auto event = store_.get(Cf::kEvents, encode_u64(seq));
    if (!event.ok()) return std::move(event.error());
    if (!event.value()) return make_error(Code::kInternal, "tenant index names a missing event");
    if (!fits_page(out.events.size(), bytes, event.value()->size())) break;
    bytes += event.value()->size();
    out.events.push_back(std::move(*event.value()));
    out.next_after = seq;
  }
  if (!it->status().ok()) return io_error(it->status());
  return out;
}

}  // namespace gw
