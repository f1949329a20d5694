#include "projections/catch_up.h"

#include <rocksdb/sst_file_writer.h>

#include <filesystem>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "projections/apply.h"
#include "projections/keys.h"
#include "projections/read_model.h"
#include "store/writer.h"

namespace gw {

namespace {

constexpr size_t kEventsPerBatch = 1024;
constexpr uint64_t kTableFileBytes = 256 << 20;

// Writes the sorted `stream` to table files of about kTableFileBytes each, named
// `<prefix><n>.sst`; returns their paths (none for an empty stream).
Result<std::vector<std::string>> write_tables(Store& store, const std::string& prefix,
                                              const LogFold::Stream& stream) {
  auto* cf = store.cf(Cf::kProjections);
  const rocksdb::Options options = store.db()->GetOptions(cf);
  std::vector<std::string> files;
  std::unique_ptr<rocksdb::SstFileWriter> table;
  std::string key;
  std::string value;
  while (stream(&key, &value)) {
    if (table && table->FileSize() >= kTableFileBytes) {
      if (auto s = table->Finish(); !s.ok()) return io_error(s);
      table.reset();
    }
    if (!table) {
      files.push_back(prefix + std::to_string(files.size() + 1) + ".sst");
      // No column family named: the files may be ingested into the projections column family
      // made anew after they were written (`gatewayctl rebuild` drops it only once they are).
      table = std::make_unique<rocksdb::SstFileWriter>(rocksdb::EnvOptions(), options);
      if (auto s = table->Open(files.back()); !s.ok()) return io_error(s);
    }
    if (auto s = table->Put(key, value); !s.ok()) return io_error(s);
  }
  if (table) {
    if (auto s = table->Finish(); !s.ok()) return io_error(s);
  }
  return files;
}

// Writes each part of the fold's projections on its own thread into table files under `dir`
// (made afresh); returns their paths.
Result<std::vector<std::string>> write_tables_of(Store& store, const Fold& fold,
                                                 const std::string& dir) {
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (!std::filesystem::create_directories(dir, ec)) {
    return make_error(Code::kUnavailable, "cannot create " + dir + ": " + ec.message());
  }
  std::vector<std::future<Result<std::vector<std::string>>>> parts;
  for (auto& part : fold.projections()) {
    const std::string prefix = dir + "/part" + std::to_string(parts.size() + 1) + "-";
    parts.push_back(std::async(std::launch::async, [&store, prefix, part = std::move(part)] {
      return write_tables(store, prefix, part);
    }));
  }
  std::vector<std::string> files;
  std::optional<Error> failed;
  for (auto& part : parts) {
    auto written = part.get();
    if (!written.ok()) {
      failed = std::move(written.error());
      continue;
    }
    files.insert(files.end(), written.value().begin(), written.value().end());
  }
  if (failed) return std::move(*failed);
  if (auto ended = fold.stream_error()) return std::move(*ended);
  return files;
}

// Ingests the table files in one step (they cover disjoint key ranges).
Result<bool> ingest(Store& store, const std::vector<std::string>& files) {
  if (files.empty()) return true;
  rocksdb::IngestExternalFileOptions options;
  options.move_files = true;
  options.write_global_seqno = false;
  auto s = store.db()->IngestExternalFile(store.cf(Cf::kProjections), files, options);
  if (!s.ok()) return io_error(s);
  return true;
}

}  // namespace

Result<std::unique_ptr<Fold>> fold_log(Store& store, const FoldOptions& options) {
  FoldOptions in_data_dir = options;
  in_data_dir.scratch_dir = fold_scratch_dir(store, options);
  return Fold::of_log(store, UINT64_MAX, in_data_dir);
}

std::string fold_scratch_dir(const Store& store, const FoldOptions& options) {
  return options.scratch_dir.empty() ? store.dir() + "/" + kFoldDir : options.scratch_dir;
}

Result<bool> write_projections(Store& store, const Fold& fold,
                               const std::function<Result<bool>()>& before_ingest) {
  const std::string dir = store.dir() + "/" + kRebuildDir;
  auto files = write_tables_of(store, fold, dir);
  Result<bool> r = true;
  if (!files.ok()) r = std::move(files.error());
  if (r.ok()) r = store.put_meta(kAnswersToCheckKey, "");
  if (r.ok() && before_ingest) r = before_ingest();
  if (r.ok()) r = ingest(store, files.value());
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return r;
}

Result<uint64_t> rebuild_projections(Store& store, const FoldOptions& options) {
  auto fold = fold_log(store, options);
  if (!fold.ok()) return std::move(fold.error());
  if (auto r = write_projections(store, *fold.value()); !r.ok()) return std::move(r.error());
  return fold.value()->events();
}

Result<std::optional<std::string>> other_projections_layout(const Store& store) {
  std::optional<std::string> other;
  auto it = store.iterate_under(Cf::kProjections, keys::checkpoint_prefix());
  for (it->Seek(keys::checkpoint_prefix()); it->Valid(); it->Next()) {
    auto layout = keys::checkpoint_layout(std::string_view(it->key().data(), it->key().size()));
    if (layout == keys::kLayout) return std::optional<std::string>();
    if (layout) other = std::move(layout);
  }
  if (!it->status().ok()) return io_error(it->status());
  return other;
}

Result<std::optional<std::string>> read_model_ahead_of_log(const Store& store) {
  auto checkpoint = store.get(Cf::kProjections, keys::checkpoint());
  if (!checkpoint.ok()) return std::move(checkpoint.error());
  if (!checkpoint.value()) return std::optional<std::string>();
  const uint64_t applied = decode_u64(*checkpoint.value());
  auto last_seq = ReadModel(store).last_seq();
  if (!last_seq.ok()) return std::move(last_seq.error());
  const uint64_t last = last_seq.value();
  if (applied <= last) return std::optional<std::string>();
  return std::optional<std::string>(
      "the read model has applied the log up to event " + std::to_string(applied) +
      ", but the log " +
      (last == 0 ? std::string("holds no events") : "ends at event " + std::to_string(last)) +
      ": events it acknowledged are gone from the log, which something other than a crash cut "
      "short or damaged (a copy that stopped, a truncate, an edit). Restore a backup "
      "(gatewayctl backup); or, to go on without them, run gatewayctl rebuild, which makes the "
      "read model again from the log as it is");
}

Result<uint64_t> catch_up_projections(Store& store, IdGenerator& ids, const FoldOptions& options) {
  // What a rebuild stopped half way (a kill, a power cut) left: nothing reads it.
  for (const char* left : {kFoldDir, kRebuildDir}) {
    std::error_code ec;
    std::filesystem::remove_all(store.dir() + "/" + left, ec);
  }
  auto checkpoint = store.get(Cf::kProjections, keys::checkpoint());
  if (!checkpoint.ok()) return std::move(checkpoint.error());
  if (!checkpoint.value()) {
    // None, or projections of another layout (keys.h): rebuilt from empty ones, dropped only
    // once the log has been read to its end.
    auto fold = fold_log(store, options);
    if (!fold.ok()) return std::move(fold.error());
    auto stale = store.holds_keys(Cf::kProjections);
    if (!stale.ok()) return std::move(stale.error());
    if (stale.value()) {
      if (auto r = store.reset_projections(); !r.ok()) return std::move(r.error());
    }
    if (auto r = write_projections(store, *fold.value()); !r.ok()) return std::move(r.error());
    return fold.value()->events();
  }
  uint64_t after = decode_u64(*checkpoint.value());
  uint64_t applied = 0;
  auto it = store.iterate(Cf::kEvents);
  it->Seek(encode_u64(after + 1));
  while (it->Valid()) {
    // The Tx's own sequence/hash are unused here: catching up appends no event.
    Tx tx(store, ids, 0, kGenesisHash);
    tx.write_only(written_only_by_projections);
    for (size_t n = 0; it->Valid() && n < kEventsPerBatch; ++n, it->Next()) {
      auto r = apply_logged_event(tx, std::string_view(it->value().data(), it->value().size()));
      if (!r.ok()) return std::move(r.error());
      ++applied;
    }
    auto batch = tx.seal();
    if (!batch.ok()) return std::move(batch.error());
    rocksdb::WriteOptions wo;
    wo.sync = true;
    auto s = store.db()->Write(wo, batch.value());
    if (!s.ok()) return io_error(s);
  }
  if (!it->status().ok()) return io_error(it->status());
  return applied;
}

}  // namespace gw
