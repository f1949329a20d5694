#include "admin/backup.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>

#include "admin/interrupt_cleanup.h"
#include "admin/read_only.h"
#include "core/fsync_dir.h"
#include "store/store.h"

namespace gw::admin {

namespace {

namespace fs = std::filesystem;

constexpr size_t kBatchBytes = 8 << 20;

// Copies one column family; returns the number of keys.
Result<uint64_t> copy_cf(const Store& from, Store& to, Cf cf) {
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;  // made durable by the flush at the end
  rocksdb::WriteBatch batch;
  uint64_t keys = 0;
  auto it = from.iterate(cf);
  for (it->SeekToFirst(); it->Valid(); it->Next(), ++keys) {
    batch.Put(to.cf(cf), it->key(), it->value());
    if (batch.GetDataSize() >= kBatchBytes) {
      if (auto s = to.db()->Write(wo, &batch); !s.ok()) return io_error(s);
      batch.Clear();
    }
  }
  if (!it->status().ok()) return io_error(it->status());
  if (auto s = to.db()->Write(wo, &batch); !s.ok()) return io_error(s);
  return keys;
}

Result<BackupReport> copy_database(const std::string& data_dir, const std::string& out_dir) {
  auto source = ReadOnlyStore::open(data_dir);
  if (!source.ok()) return std::move(source.error());
  const Store& from = source.value()->store();
  auto target = Store::open_backup_copy(out_dir);
  if (!target.ok()) {
    return make_error(Code::kUnavailable,
                      "cannot create a database in " + out_dir + ": " + target.error().detail);
  }
  Store& to = *target.value();
  BackupReport report;
  for (auto [cf, count] :
       {std::pair{Cf::kEvents, &report.events}, std::pair{Cf::kProjections, &report.projections},
        std::pair{Cf::kMeta, &report.meta}}) {
    auto copied = copy_cf(from, to, cf);
    if (!copied.ok()) return std::move(copied.error());
    *count = copied.value();
  }
  auto last = from.iterate(Cf::kEvents);
  last->SeekToLast();
  if (last->Valid() && last->key().size() == 8) {
    report.last_seq = decode_u64(std::string_view(last->key().data(), 8));
  }
  rocksdb::FlushOptions flush;
  flush.wait = true;
  auto s = to.db()->Flush(flush, {to.cf(Cf::kMeta), to.cf(Cf::kEvents), to.cf(Cf::kProjections)});
  if (!s.ok()) return io_error(s);
  if (s = to.db()->SyncWAL(); !s.ok()) return io_error(s);
  target.value().reset();  // closes the copy
  if (!fsync_dir(out_dir)) return make_error(Code::kUnavailable, "cannot sync " + out_dir);
  return report;
}

}  // namespace

bool inside_dir(const std::string& dir, const std::string& path) {
  std::error_code ec;
  const fs::path outer = fs::weakly_canonical(dir, ec);
  const fs::path inner = fs::weakly_canonical(path, ec);
  return !ec &&
         std::mismatch(outer.begin(), outer.end(), inner.begin(), inner.end()).first == outer.end();
}

Result<BackupReport> backup(const std::string& data_dir, const std::string& out_dir) {
  std::error_code ec;
  // A copy inside the data dir would be a second database among gatewayd's own files, and copied
  // into the next backup of that dir (helper 48).
  if (inside_dir(data_dir, out_dir)) {
    return make_error(Code::kValidationFailed,
                      out_dir + " is inside the data dir " + data_dir + "; back up outside it");
  }
  // `existed`: not made by this backup (also when another made it since the look).
  bool existed = fs::exists(out_dir, ec);
  // Its entry, and that of each parent made with it, is synced as it is made.
  const std::vector<std::string> made =
      existed ? std::vector<std::string>{} : missing_directories(out_dir);
  // What this backup makes is removed if an interrupt (SIGINT, SIGTERM, SIGHUP) ends it before
  // the marker below is durable in it: left, it was an empty, unmarked directory, which gatewayd
  // served as an empty store (helper 146). Once marked, an interrupt leaves it, refused.
  std::optional<RemovedOnInterrupt> unmarked;
  if (!made.empty()) unmarked.emplace(made.back());  // the outermost one made
  if (!existed) {
    existed = !fs::create_directories(out_dir, ec);
    if (existed || ec) unmarked.reset();  // another made it meanwhile, or none was made
    if (ec) return make_error(Code::kUnavailable, "cannot create " + out_dir + ": " + ec.message());
  }
  // Synced before anything is copied: a sync that failed after the copy would leave a whole copy
  // that said nothing of it (helper 124).
  if (auto unsynced = existed ? std::nullopt : sync_made_directories(made)) {
    return make_error(Code::kUnavailable, *unsynced);
  }
  if (existed && !fs::is_directory(out_dir, ec)) {
    return make_error(Code::kPreconditionFailed,
                      out_dir + " exists and is not a directory; back up into a new one");
  }
  if (existed && !fs::is_empty(out_dir, ec)) {
    return make_error(Code::kPreconditionFailed,
                      out_dir + " exists and is not an empty directory; back up into a new one");
  }
  // Its owner's alone, as gatewayd's own data dir and replay's file: it holds every tenant's
  // records. A directory given empty keeps its mode.
  if (!existed) fs::permissions(out_dir, fs::perms::owner_all, fs::perm_options::replace, ec);
  // The copy is marked unfinished before anything else happens in it, and the mark goes only
  // once all of it is durable: gatewayd and gatewayctl refuse a copy that still has it, so a
  // backup stopped half way (killed, a power cut) is never restored as if it were whole.
  // The marker is also what makes the directory this backup's: of two backups started into one
  // empty directory, the one that made it goes on, and the other leaves at once, touching
  // nothing (it would otherwise clear away the first one's copy as it failed).
  const std::string marker = out_dir + "/" + Store::kUnfinishedBackup;
  const int marker_fd = ::open(marker.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (marker_fd < 0) {
    const int error = errno;
    if (!existed) fs::remove(out_dir, ec);  // only if still empty
    return make_error(error == EEXIST ? Code::kPreconditionFailed : Code::kUnavailable,
                      error == EEXIST
                          ? out_dir + " is being written by another backup; back up into a new one"
                          : "cannot create " + marker + ": " + std::strerror(error));
  }
  Result<BackupReport> report = make_error(Code::kUnavailable, "cannot sync " + marker);
  const bool durable = ::fsync(marker_fd) == 0;
  ::close(marker_fd);
  if (durable && fsync_dir(out_dir)) {
    unmarked.reset();
    report = copy_database(data_dir, out_dir);
  }
  if (report.ok() && (::unlink(marker.c_str()) != 0 || !fsync_dir(out_dir))) {
    report = make_error(Code::kUnavailable, "cannot remove " + marker);
  }
  if (!report.ok()) {
    // Everything in out_dir is ours: it was empty or missing, and this backup made the marker.
    // The marker goes last: while it is there no other backup starts in out_dir, whose files
    // this would remove.
    for (const auto& entry : fs::directory_iterator(out_dir, ec)) {
      if (entry.path().filename() != Store::kUnfinishedBackup) fs::remove_all(entry.path(), ec);
    }
    fs::remove(marker, ec);
    if (!existed) fs::remove(out_dir, ec);
    return report;
  }
  return report;
}

}  // namespace gw::admin
