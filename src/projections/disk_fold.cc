#include "projections/disk_fold.h"

#include <filesystem>
#include <mutex>
#include <optional>

#include "projections/keys.h"

namespace gw {

namespace {

// Where the two streams of projections() meet: lists and filters before, records and the rest
// from here on (the part of the key space each holds about half of).
constexpr std::string_view kSecondStreamFrom = "r";

}  // namespace

Error scratch_failed(Error error) {
  error.code = Code::kUnavailable;
  error.detail = std::string(kFoldScratchFailed) + error.detail;
  return error;
}

// The sorted projections in [from, to) of the scratch database (no bound where empty), spent
// counters left out. A read error ends the stream and is kept for stream_error().
LogFold::Stream DiskFold::stream_range(std::string from, std::string to) const {
  struct Range {
    std::string from;
    std::string to;
    rocksdb::Slice lower;
    rocksdb::Slice upper;
    std::unique_ptr<rocksdb::Iterator> it;
    bool started = false;
  };
  auto range = std::make_shared<Range>();
  range->from = std::move(from);
  range->to = std::move(to);
  range->lower = range->from;
  range->upper = range->to;
  rocksdb::ReadOptions ro;
  ro.fill_cache = false;
  ro.readahead_size = 4 << 20;
  if (!range->from.empty()) ro.iterate_lower_bound = &range->lower;
  if (!range->to.empty()) ro.iterate_upper_bound = &range->upper;
  range->it.reset(scratch_->db()->NewIterator(ro, scratch_->cf(Cf::kProjections)));
  return [this, range](std::string* key, std::string* value) {
    auto& it = *range->it;
    if (!range->started) {
      range->started = true;
      it.SeekToFirst();
    } else {
      it.Next();
    }
    for (; it.Valid(); it.Next()) {
      const std::string_view k(it.key().data(), it.key().size());
      const std::string_view v(it.value().data(), it.value().size());
      if (is_spent_counter(k, v)) continue;
      key->assign(k);
      value->assign(v);
      return true;
    }
    if (!it.status().ok()) {
      const std::lock_guard lock(stream_error_mu_);
      if (!stream_error_) stream_error_ = scratch_failed(io_error(it.status()));
    }
    return false;
  };
}

std::optional<Error> DiskFold::stream_error() const {
  const std::lock_guard lock(stream_error_mu_);
  return stream_error_;
}

Result<std::unique_ptr<DiskFold>> DiskFold::create(const std::string& dir) {
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (ec)
    return scratch_failed(
        make_error(Code::kUnavailable, "cannot remove " + dir + ": " + ec.message()));
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir)) {
    return scratch_failed(make_error(
        Code::kUnavailable,
        "cannot create " + dir + ": " + (ec ? ec.message() : std::string("not a directory"))));
  }
  std::unique_ptr<DiskFold> fold(new DiskFold());
  fold->dir_ = dir;
  auto store = Store::open(dir);
  if (!store.ok()) return scratch_failed(std::move(store.error()));  // ~DiskFold removes `dir`
  fold->scratch_ = std::move(store.value());
  // Its memtables hold what the fold wrote without a log; a close would write them out first.
  if (auto s = fold->scratch_->db()->SetDBOptions({{"avoid_flush_during_shutdown", "true"}});
      !s.ok()) {
    return scratch_failed(io_error(s));
  }
  fold->ids_ = make_system_id_generator(fold->clock_);
  return fold;
}

DiskFold::~DiskFold() {
  tx_.reset();
  scratch_.reset();
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

Result<bool> DiskFold::add(LoggedEvent e) {
  if (e.seq <= last_seq_) {
    return make_error(Code::kInternal, "event " + std::to_string(e.seq) + " is out of order");
  }
  if (!tx_) {
    tx_ = std::make_unique<Tx>(*scratch_, *ids_, 0, kGenesisHash);
    tx_->write_only(written_only_by_projections);
  }
  bool created = false;
  // It reads the scratch database only: an error is the scratch's, not the log's.
  if (auto r = apply_event(*tx_, e, &created); !r.ok()) return scratch_failed(std::move(r.error()));
  if (created) firsts_.emplace_back(e.seq, meta_of(e.record).id);
  ++events_;
  last_seq_ = e.seq;
  if (++staged_ == kEventsPerBatch || tx_->staged_bytes() >= kBytesPerBatch) return finish();
  return true;
}

Result<bool> DiskFold::finish() {
  if (!tx_) return true;
  auto batch = tx_->seal();
  if (!batch.ok()) return scratch_failed(std::move(batch.error()));
  for (const auto& [seq, id] : firsts_) {
    batch.value()->Put(scratch_->cf(Cf::kMeta), encode_u64(seq), id);
  }
  // A scratch database: a crash loses it whole, so nothing is logged or synced.
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;
  auto s = scratch_->db()->Write(wo, batch.value());
  tx_.reset();
  firsts_.clear();
  staged_ = 0;
  if (!s.ok()) return scratch_failed(io_error(s));
  ++batches_written_;
  return true;
}

std::vector<LogFold::Stream> DiskFold::projections() const {
  return {stream_range("", std::string(kSecondStreamFrom)),
          stream_range(std::string(kSecondStreamFrom), "")};
}

Result<bool> DiskFold::for_each_record(const Visit& visit) const {
  rocksdb::ReadOptions ro;
  ro.fill_cache = false;
  std::unique_ptr<rocksdb::Iterator> it(scratch_->db()->NewIterator(ro, scratch_->cf(Cf::kMeta)));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    const std::string id = it->value().ToString();
    auto stored = scratch_->get(Cf::kProjections, keys::record(id));
    if (!stored.ok()) return scratch_failed(std::move(stored.error()));
    keys::RecordHeader header;
    std::string_view json;
    const auto kind = kind_of_id(id);
    if (!stored.value() || !kind || !keys::decode_record(*stored.value(), &header, &json)) {
      return scratch_failed(
          make_error(Code::kInternal, "its record of " + id + " is missing or malformed"));
    }
    auto record = parse_stored_record(*kind, id, json);
    if (!record.ok()) return scratch_failed(std::move(record.error()));
    if (auto r = visit(record.value()); !r.ok()) return r;
  }
  if (!it->status().ok()) return scratch_failed(io_error(it->status()));
  return true;
}

Result<bool> DiskFold::for_each_kind(const KindVisit& visit) const {
  const std::string prefix = keys::record("");
  rocksdb::ReadOptions ro;
  ro.fill_cache = false;
  ro.readahead_size = 4 << 20;
  std::string end = prefix;
  end.back() = static_cast<char>(end.back() + 1);
  const rocksdb::Slice upper(end);
  ro.iterate_upper_bound = &upper;
  std::unique_ptr<rocksdb::Iterator> it(
      scratch_->db()->NewIterator(ro, scratch_->cf(Cf::kProjections)));
  for (it->Seek(prefix); it->Valid(); it->Next()) {
    const std::string_view key(it->key().data(), it->key().size());
    if (!keys::is_record(key)) continue;  // a history entry, stored right after its record
    const std::string_view id = key.substr(prefix.size());
    keys::RecordHeader header;
    std::string_view json;
    const auto kind = kind_of_id(id);
    if (!kind || !keys::decode_record({it->value().data(), it->value().size()}, &header, &json)) {
      return scratch_failed(
          make_error(Code::kInternal, "its record of " + std::string(id) + " is malformed"));
    }
    visit(*kind, header.deleted);
  }
  if (!it->status().ok()) return scratch_failed(io_error(it->status()));
  return true;
}

}  // namespace gw
