#include "projections/read_model.h"

#include <algorithm>
#include <cstdint>

#include "projections/apply.h"
#include "projections/keys.h"
#include "projections/list_memo.h"
#include "projections/read_cache.h"

namespace gw {

namespace {

std::string_view view(const rocksdb::Slice& s) { return std::string_view(s.data(), s.size()); }

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
  const bool cached = cache_ != nullptr && snap == nullptr;
  ReadCache::Ticket ticket;
  const bool hit = cached && cache_->find(key, team, &out->raw, &ticket);
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
  if (cached && !hit) cache_->fill(key, team, ticket, out->raw);
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
  const std::string& walked = indexes[0].second;
  auto it = store_.iterate_under(Cf::kProjections, walked, snap->get());
  if (indexes.size() == 1) {
    // The index's counter gives the total; only the entries before the page (from the memo's
    // checkpoint, if any) and the page itself are read.
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
    if (memo && it->status().ok()) memo_->remember(walked, visit, found, at - start, placed);
  } else {
    // Several filters: walk the narrowest index and test the others by point lookups of their
    // index entries (same team, kind and create_seq), counting every match for the total. The
    // work is bounded by the narrowest filter, in whatever order the query names them.
    std::string key;  // an entry of another filter's index; its buffer is reused
    for (it->Seek(walked); it->Valid() && it->key().starts_with(walked); it->Next()) {
      std::string_view seq = view(it->key()).substr(walked.size());
      bool match = true;
      for (size_t i = 1; i < indexes.size() && match; ++i) {
        key.assign(indexes[i].second).append(seq);
        auto hit = store_.get(Cf::kProjections, key, snap->get());
        if (!hit.ok()) return std::move(hit.error());
        match = hit.value().has_value();
      }
      if (!match) continue;
      if (out.total++ >= offset && wanted.size() < per_page) want(view(it->value()));
    }
  }
  if (!it->status().ok()) return io_error(it->status());
  // The page's records, walked in key order with one iterator of their own (the index's stops at
  // the index's end). Ids are time-ordered, so
  // records created one after another are usually neighbours in key order: a record a few keys
  // further on is reached with Next() (one step along the memtable's bottom level) and only a
  // larger gap costs a Seek. Twenty point lookups, each a search from the top of the memtable's
  // skiplist, were about half of a list request. (Records are never deleted from the store: a
  // deleted one is kept, marked, so there are no tombstones to step over.)
  it = store_.iterate_under(Cf::kProjections, keys::record(""), snap->get());
  constexpr int kMaxSteps = 8;
  const size_t page_size = wanted.size();
  std::sort(wanted.begin(), wanted.end());
  std::vector<std::optional<std::string>> found(page_size);
  for (const auto& [key, position] : wanted) {
    const rocksdb::Slice target(key);
    int steps = 0;
    while (it->Valid() && it->key().compare(target) < 0 && steps++ < kMaxSteps) it->Next();
    if (!it->Valid() || it->key().compare(target) < 0) it->Seek(target);
    if (!it->Valid() || it->key() != target) continue;  // not stored (cannot happen: same snapshot)
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
