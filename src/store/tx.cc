#include "store/tx.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <iterator>

#include "core/hex.h"

namespace gw {

namespace {

rocksdb::Slice slice(std::string_view s) { return rocksdb::Slice(s.data(), s.size()); }

size_t index_of(Cf which) { return static_cast<size_t>(which); }

}  // namespace

std::optional<std::string> event_hash(std::string_view stored) {
  rapidjson::Document doc;
  doc.Parse(stored.data(), stored.size());
  if (doc.HasParseError() || !doc.IsObject()) return std::nullopt;
  auto hash = doc.FindMember("hash");
  if (hash == doc.MemberEnd() || !hash->value.IsString()) return std::nullopt;
  return std::string(hash->value.GetString(), hash->value.GetStringLength());
}

std::string encode_event(uint64_t seq, const std::string& event_id, const EventDraft& d,
                         const std::string& prev_hash, std::string* hash_out) {
  // Sized for the whole event, so the buffer does not grow while it is written.
  rapidjson::StringBuffer buf(nullptr, 512 + d.data_json.size());
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
  std::string_view canonical(buf.GetString(), buf.GetSize());
  std::string hash = to_hex(sha256(prev_hash, canonical));
  std::string out;
  out.reserve(canonical.size() + 2 * 64 + 32);
  out.append(canonical.substr(0, canonical.size() - 1));  // without the closing brace
  out += ",\"prev_hash\":\"";
  out += prev_hash;
  out += "\",\"hash\":\"";
  out += hash;
  out += "\"}";
  if (hash_out != nullptr) *hash_out = std::move(hash);
  return out;
}

Tx::Tx(Store& store, IdGenerator& ids, uint64_t last_seq, std::string last_hash,
       ScannedKeys scanned)
    : store_(store),
      ids_(ids),
      scanned_(scanned),
      last_seq_(last_seq),
      last_hash_(std::move(last_hash)) {
  staged_bytes_.reserve(256 << 10);
}

Tx::Tx(Store& store, IdGenerator& ids, uint64_t last_seq, std::string last_hash,
       ScannedKeys scanned, const Tx* base, std::function<void()> settle)
    : Tx(store, ids, last_seq, std::move(last_hash), scanned) {
  base_ = base;
  settle_ = std::move(settle);
}

const std::optional<std::string>* Tx::staged(size_t cf, std::string_view key) const {
  auto in = [key](const Overlay& overlay) -> const std::optional<std::string>* {
    auto it = overlay.find(key);
    return it == overlay.end() ? nullptr : &it->second;
  };
  if (const auto* mine = in(overlay_[cf])) return mine;
  return base_ == nullptr ? nullptr : in(base_->overlay_[cf]);
}

Result<std::optional<std::string>> Tx::get(Cf which, std::string_view key) {
  if (write_only_ != nullptr && write_only_(which, key)) {
    return make_error(Code::kInternal, "a Tx read of a key it only writes");
  }
  if (const auto* value = staged(index_of(which), key)) return *value;
  return store_.get(which, key);
}

void Tx::settle() {
  if (base_ == nullptr) return;
  settle_();
  base_ = nullptr;
}

void Tx::write(Cf which, std::string_view key, std::optional<std::string_view> value) {
  if (write_only_ != nullptr && write_only_(which, key)) {  // in the batch only
    // Listed at every write: a write-only key has no overlay entry to tell a first write by.
    if (watched_ != nullptr && watched_(which, key)) watched_keys_.emplace_back(key);
    return;
  }
  const size_t cf = index_of(which);
  auto [it, inserted] = overlay_[cf].try_emplace(std::string(key));
  Undo undo{cf, &*it, !inserted, std::nullopt};
  if (!inserted) undo.previous = std::move(it->second);
  undo_.push_back(std::move(undo));
  if (value) {
    it->second.emplace(*value);
  } else {
    it->second.reset();
  }
  if (inserted && (scanned_ == nullptr || scanned_(which, key))) {
    ordered_[cf].emplace(it->first, &it->second);
  }
  // A key's first write in this Tx (again after a rollback erased it: listed twice then).
  if (inserted && watched_ != nullptr && watched_(which, key)) watched_keys_.emplace_back(key);
}

void Tx::stage(Cf which, Op::Type type, std::string_view key, std::string_view value) {
  Op op{staged_bytes_.size(),
        key.size(),
        0,
        value.size(),
        static_cast<uint8_t>(index_of(which)),
        type};
  staged_bytes_.append(key);
  op.value_at = staged_bytes_.size();
  staged_bytes_.append(value);
  ops_.push_back(op);
}

void Tx::put(Cf which, std::string_view key, std::string_view value) {
  stage(which, Op::kPut, key, value);
  write(which, key, value);
}

void Tx::del(Cf which, std::string_view key) {
  stage(which, Op::kDelete, key, {});
  write(which, key, std::nullopt);
}

Result<bool> Tx::scan(Cf which, std::string_view prefix, const Visit& visit,
                      std::string_view from) {
  if ((scanned_ != nullptr && !scanned_(which, prefix)) ||
      (write_only_ != nullptr && write_only_(which, prefix))) {
    return make_error(Code::kInternal, "a Tx scan of keys it does not keep in order");
  }
  settle();  // the base's writes are in the database from here on
  const size_t cf = index_of(which);
  auto in_range = [&](std::string_view k) { return k.starts_with(prefix); };
  const std::string_view start = std::max(from, prefix);
  const auto& ordered = ordered_[cf];
  auto mine = ordered.lower_bound(start);
  auto db = store_.iterate_under(which, prefix);
  db->Seek(slice(start));
  for (;;) {
    const bool have_db = db->Valid();
    const bool have_mine = mine != ordered.end() && in_range(mine->first);
    if (!have_db && !have_mine) break;
    std::string_view db_key =
        have_db ? std::string_view(db->key().data(), db->key().size()) : std::string_view();
    if (have_mine && (!have_db || mine->first <= db_key)) {
      if (have_db && mine->first == db_key) db->Next();  // the batch's write replaces it
      const auto [key, value] = *mine;
      ++mine;
      if (*value && !visit(key, **value)) return true;
    } else {
      if (!visit(db_key, std::string_view(db->value().data(), db->value().size()))) return true;
      db->Next();
    }
  }
  if (!db->status().ok()) return io_error(db->status());
  return true;
}

void Tx::add_to_counter(Cf which, std::string_view key, int64_t delta) {
  int64_t& sum = counters_[{index_of(which), std::string(key)}];
  sum += delta;
  counter_undo_.emplace_back(&sum, delta);
}

void Tx::put_at_seal(Cf which, std::string_view key, std::string_view value) {
  at_seal_[{index_of(which), std::string(key)}] = value;
}

uint64_t Tx::append(const EventDraft& draft) {
  uint64_t seq = last_seq_ + 1;
  std::string hash;
  std::string value = encode_event(seq, ids_.next("evt"), draft, last_hash_, &hash);
  stage(Cf::kEvents, Op::kPut, encode_u64(seq), value);
  last_seq_ = seq;
  last_hash_ = std::move(hash);
  return seq;
}

void Tx::set_savepoint() {
  saved_ops_ = ops_.size();
  saved_bytes_ = staged_bytes_.size();
  undo_.clear();
  counter_undo_.clear();
  saved_at_seal_ = at_seal_;
  saved_seq_ = last_seq_;
  saved_hash_ = last_hash_;
}

void Tx::rollback_to_savepoint() {
  ops_.resize(saved_ops_);
  staged_bytes_.resize(saved_bytes_);
  for (auto u = undo_.rbegin(); u != undo_.rend(); ++u) {
    if (u->existed) {
      u->entry->second = std::move(u->previous);
    } else {
      std::string key = u->entry->first;  // rare: a rejected job's first write of a key
      ordered_[u->cf].erase(key);
      overlay_[u->cf].erase(key);
    }
  }
  undo_.clear();
  for (auto& [sum, delta] : counter_undo_) *sum -= delta;
  counter_undo_.clear();
  at_seal_ = saved_at_seal_;
  last_seq_ = saved_seq_;
  last_hash_ = saved_hash_;
}

Result<bool> Tx::build_batch() {
  // By column family and first key byte first (a stable counting sort: keys of one kind share
  // it), then each run by key unless it is in order already, as the log's sequence numbers and
  // most index entries of a batch of creates are. Stable: of several writes of one key the last
  // stays last, and only it is kept below unless it is a merge (a counter's delta, which adds to
  // what is before it).
  auto key_of = [this](const Op& op) {
    return std::string_view(staged_bytes_.data() + op.key_at, op.key_size);
  };
  constexpr size_t kBuckets = kCfs * 256;
  auto bucket_of = [&](const Op& op) {
    return op.cf * 256 + (op.key_size == 0 ? 0 : static_cast<unsigned char>(key_of(op)[0]));
  };
  std::vector<uint32_t> start(kBuckets + 1, 0);  // bucket b holds [start[b], start[b + 1])
  for (const auto& op : ops_) ++start[bucket_of(op) + 1];
  for (size_t b = 0; b < kBuckets; ++b) start[b + 1] += start[b];
  std::vector<uint32_t> order(ops_.size());  // indexes into ops_
  {
    std::vector<uint32_t> next(start.begin(), start.end() - 1);
    for (uint32_t i = 0; i < ops_.size(); ++i) order[next[bucket_of(ops_[i])]++] = i;
  }
  auto by_key = [&](uint32_t a, uint32_t b) { return key_of(ops_[a]) < key_of(ops_[b]); };
  for (size_t b = 0; b < kBuckets; ++b) {
    auto first = order.begin() + start[b];
    auto last = order.begin() + start[b + 1];
    if (!std::is_sorted(first, last, by_key)) std::stable_sort(first, last, by_key);
  }
  // Each record takes its bytes plus a tag, a column family id and two lengths.
  rocksdb::WriteBatch batch(staged_bytes_.size() + 16 * ops_.size() + 12);
  for (size_t i = 0; i < order.size(); ++i) {
    const Op& op = ops_[order[i]];
    const std::string_view key = key_of(op);
    if (i + 1 < order.size()) {
      const Op& after = ops_[order[i + 1]];
      if (after.cf == op.cf && after.type != Op::kMerge && key_of(after) == key) {
        continue;  // overwritten
      }
    }
    auto* cf = store_.cf(static_cast<Cf>(op.cf));
    const rocksdb::Slice value(staged_bytes_.data() + op.value_at, op.value_size);
    rocksdb::Status s;
    switch (op.type) {
      case Op::kPut:
        s = batch.Put(cf, slice(key), value);
        break;
      case Op::kDelete:
        s = batch.Delete(cf, slice(key));
        break;
      case Op::kMerge:
        s = batch.Merge(cf, slice(key), value);
        break;
    }
    if (!s.ok()) return make_error(Code::kInternal, "cannot build a batch: " + s.ToString());
  }
  wb_ = std::move(batch);
  return true;
}

Result<rocksdb::WriteBatch*> Tx::seal() {
  settle();
  // Counters and seal values go into the batch only, not the overlay: seal() may run on another
  // thread while the next Tx reads this one's overlay (see the header).
  // A counter is a merge of the batch's summed change (see the column family's CounterAdd), a
  // blind write: sealing reads nothing, where a read per counter was most of it. Only a counter
  // with many deltas in the memtable already is read, and its sum written (Store::
  // fold_counter_now); the base is written by now, so the read sees every earlier batch.
  for (const auto& [where, delta] : counters_) {
    if (delta == 0) continue;
    const Cf which = static_cast<Cf>(where.first);
    if (which == Cf::kProjections && store_.fold_counter_now(where.second)) {
      auto stored = store_.get(which, where.second);
      if (!stored.ok()) return std::move(stored.error());
      uint64_t sum = static_cast<uint64_t>(delta);
      if (stored.value()) {
        if (stored.value()->size() != 8) {
          return make_error(Code::kInternal, "counter " + where.second + " is not 8 bytes");
        }
        sum += decode_u64(*stored.value());
      }
      stage(which, Op::kPut, where.second, encode_u64(sum));
    } else {
      stage(which, Op::kMerge, where.second, encode_u64(static_cast<uint64_t>(delta)));
    }
  }
  for (const auto& [where, value] : at_seal_) {
    stage(static_cast<Cf>(where.first), Op::kPut, where.second, value);
  }
  // In key order, each memtable insert of a projections key starts from where the previous one
  // ended (the column family's insert hint, store/store.cc) instead of searching from the top:
  // on a large memtable that search, a cache miss per level, was most of a batch's write.
  auto built = build_batch();
  if (!built.ok()) return std::move(built.error());
  return &wb_;
}

}  // namespace gw
