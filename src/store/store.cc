#include "store/store.h"

#include "core/fsync_dir.h"
#include "core/text.h"
#include "store/crc32c.h"
#include "store/data_format.h"
#include "store/info_log.h"
#include "store/wal_tail.h"

#include <rocksdb/compaction_filter.h>
#include <rocksdb/convenience.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/merge_operator.h>
#include <rocksdb/perf_level.h>
#include <rocksdb/slice_transform.h>
#include <rocksdb/table.h>
#include <rocksdb/table_properties.h>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace gw {

namespace {

// Where the memtable starts looking when it inserts a projections key. RocksDB's skiplist can
// start an insert from a splice (the nodes around an earlier insert) kept under a prefix of the
// key: it walks up from there only as far as the new key lies away (O(log D) for D entries in
// between) and down again, instead of searching from the top, a cache miss per level on a large
// memtable. Without a hint it keeps one splice but uses it only when the key lands right next to
// the previous insert, and otherwise searches from the top.
// - The list (l), tenant event (t) and open request (q) keys of projections/keys.h end in an
//   8-byte sequence number and are written in increasing order under the rest of the key: each
//   gets the splice of that rest, where it lands right after the previous one.
// - Every other key (records, histories, filter entries, counters) shares one splice, the empty
//   prefix's: a batch is written in key order (Tx::build_batch), so each of them starts from the
//   one before it in the batch. In A/B runs of PUT at 64 connections (three pairs, 6 s, on copies
//   of one 10k-record data dir) this took the commit thread's CPU per PUT from 28.4 to 31.8 us
//   down to 21.6 to 24.2, and PUT/s from 15.0k to 16.7k up to 17.8k to 20.2k.
// Only a speed-up: a key is inserted correctly from any splice.
class InsertHint final : public rocksdb::SliceTransform {
 public:
  const char* Name() const override { return "gw.InsertHint"; }
  rocksdb::Slice Transform(const rocksdb::Slice& key) const override {
    if (ends_in_sequence(key)) return rocksdb::Slice(key.data(), key.size() - 8);
    return rocksdb::Slice(key.data(), 0);
  }
  bool InDomain(const rocksdb::Slice& /*key*/) const override { return true; }

 private:
  static bool ends_in_sequence(const rocksdb::Slice& key) {
    if (key.size() <= 8) return false;
    const char c = key[0];
    return c == 'l' || c == 't' || c == 'q';
  }
};

// Counters (the `c` keys of projections/keys.h: an 8-byte big-endian count) are changed by
// merging an 8-byte big-endian delta (two's complement), so a write batch adds to a count without
// reading it first. The sum is taken modulo 2^64, so a negative delta needs no sign handling.
class CounterAdd final : public rocksdb::AssociativeMergeOperator {
 public:
  const char* Name() const override { return "gw.CounterAdd"; }
  bool Merge(const rocksdb::Slice& /*key*/, const rocksdb::Slice* existing,
             const rocksdb::Slice& delta, std::string* sum, rocksdb::Logger* /*logger*/)
      const override {
    if (delta.size() != 8 || (existing != nullptr && existing->size() != 8)) {
      return false;  // not a counter: RocksDB reports Corruption rather than guess
    }
    uint64_t n = decode_u64(std::string_view(delta.data(), 8));
    if (existing != nullptr) n += decode_u64(std::string_view(existing->data(), 8));
    *sum = encode_u64(n);
    return true;
  }
};

// A counter that has come back to zero reads the same as none (is_spent_counter);
// compactions drop it, so the counters of filter values no longer used (a workload id that is
// gone) do not pile up. Only `c` keys: no other projection's value is read as a number here.
// RocksDB turns a removed key into a tombstone unless the compaction is at the bottom, so no
// older count comes back. The compaction that folds a counter's deltas to 0 writes the 0; a
// later one drops it.
class ZeroCounterDrop final : public rocksdb::CompactionFilter {
 public:
  const char* Name() const override { return "gw.ZeroCounterDrop"; }
  bool Filter(int /*level*/, const rocksdb::Slice& key, const rocksdb::Slice& value,
              std::string* /*new_value*/, bool* /*value_changed*/) const override {
    return is_spent_counter(std::string_view(key.data(), key.size()),
                            std::string_view(value.data(), value.size()));
  }
};

rocksdb::ColumnFamilyOptions projection_options(const std::shared_ptr<rocksdb::Cache>& cache) {
  rocksdb::ColumnFamilyOptions o;
  rocksdb::BlockBasedTableOptions t;
  t.block_cache = cache;
  t.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  // Index and filter blocks stay in the table readers' own memory (about 1.3 bytes per key),
  // not in the block cache: a cached filter block of a large file does not fit one shard of the
  // cache and was read from disk and checksummed again on every point read.
  t.cache_index_and_filter_blocks = false;
  o.table_factory.reset(rocksdb::NewBlockBasedTableFactory(t));
  o.memtable_insert_with_hint_prefix_extractor = std::make_shared<InsertHint>();
  // Every flush holds keys of every kind (records, index entries, counters), so each L0 file
  // spans the whole key range and an L0 compaction rewrites all of L1. Starting it at 16 files
  // rewrites L1 once per 16 flushes instead of RocksDB's 4. At 8, in 30 s of creates at 256
  // connections the compaction threads' CPU went from 4.5 to 2.2 s and creates/s rose by about
  // 8%. At 16, a create/update sequence like the benchmark's phase A did 5% more creates and 7%
  // more updates than at 8, with GET of one record the same; the full benchmark run after it
  // had more creates but fewer updates (scripts/bench/NOTES.md). Point reads check more L0
  // files, each behind its Bloom filter. Writes are slowed and stopped further on than RocksDB's
  // 20 and 36 files, so that the trigger keeps its margin. Once writes pause, QuietCompaction
  // (store/quiet_compaction.h) compacts L0 into L1, so that reads between bursts of writes do
  // not check up to 15 L0 files.
  o.level0_file_num_compaction_trigger = 16;
  o.level0_slowdown_writes_trigger = 40;
  o.level0_stop_writes_trigger = 60;
  o.merge_operator = std::make_shared<CounterAdd>();
  // A hot counter (a tenant's list count) gets a delta per batch; Tx::seal writes its sum instead
  // once it has Store::kMaxCounterDeltas in the memtable (max_successive_merges stays 0).
  static const ZeroCounterDrop zero_counter_drop;
  o.compaction_filter = &zero_counter_drop;
  return o;
}

rocksdb::ColumnFamilyOptions event_options(const std::shared_ptr<rocksdb::Cache>& cache) {
  rocksdb::ColumnFamilyOptions o;
  rocksdb::BlockBasedTableOptions t;
  t.block_cache = cache;
  o.table_factory.reset(rocksdb::NewBlockBasedTableFactory(t));
  return o;
}

constexpr char kProjectionsName[] = "projections";

// Why the LOCK of `dir` could not be taken. Held by another process, fcntl refuses it (RocksDB:
// "While lock file: ...: Resource temporarily unavailable"); held by this one, RocksDB refuses it
// itself ("lock hold by current process"). Any other failure (a read-only file system, a LOCK that
// is no file) is told as it is: it was taken for a data dir in use, and `gatewayctl rebuild` said
// to stop gatewayd.
Error lock_refused(const std::string& dir, const rocksdb::Status& s) {
  const std::string why = s.ToString();
  if (why.find("While lock file") == std::string::npos &&
      why.find("lock hold by current process") == std::string::npos) {
    return io_error(s);
  }
  return make_error(Code::kUnavailable, std::string(Store::kInUse) +
                                            " (another gatewayd, or gatewayctl rebuild, holds " +
                                            dir + "/LOCK): " + why);
}

// The first key after every key that starts with `prefix` ("" if there is none).
std::string prefix_end(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty() && static_cast<unsigned char>(end.back()) == 0xff) end.pop_back();
  if (!end.empty()) end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
  return end;
}

// Default (kMeta), events, projections: the order of Store's handles.
std::vector<rocksdb::ColumnFamilyDescriptor> column_families() {
  auto cache = rocksdb::NewLRUCache(64 << 20);
  return {
      {rocksdb::kDefaultColumnFamilyName, rocksdb::ColumnFamilyOptions()},
      {"events", event_options(cache)},
      {kProjectionsName, projection_options(cache)},
  };
}

}  // namespace

// Counts the memtables of projections that RocksDB sealed (made immutable, to be flushed).
class MemtableSeals final : public rocksdb::EventListener {
 public:
  void OnMemTableSealed(const rocksdb::MemTableInfo& info) override {
    if (info.cf_name == kProjectionsName) count.fetch_add(1, std::memory_order_release);
  }
  std::atomic<uint64_t> count{0};
};

// RocksDB stops taking writes after an error of severity hard or worse, met by its own threads
// (a flush, a compaction: a table file that cannot be read, a disk that fails) as well as by a
// write: every later write fails with it until the database is opened again. Said once, to
// whoever listens (the Writer, which stops at once rather than at the next write: helper 123's
// failed read in a compaction on an idle server left /readyz 200 until a client's write met it).
class WriteStops final : public rocksdb::EventListener {
 public:
  void OnBackgroundError(rocksdb::BackgroundErrorReason reason, rocksdb::Status* error) override {
    if (error == nullptr || error->ok() || error->IsShutdownInProgress() ||
        error->severity() < rocksdb::Status::Severity::kHardError) {
      return;  // a soft error: RocksDB goes on taking writes
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (!why_.empty()) return;
    why_ = "RocksDB stopped taking writes after " + std::string(failed(reason)) + ": " +
           error->ToString();
    if (stopped_) stopped_(why_);
  }

  void set(std::function<void(const std::string&)> stopped) {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = std::move(stopped);
    if (stopped_ && !why_.empty()) stopped_(why_);
  }

 private:
  static const char* failed(rocksdb::BackgroundErrorReason reason) {
    switch (reason) {
      case rocksdb::BackgroundErrorReason::kFlush:
      case rocksdb::BackgroundErrorReason::kFlushNoWAL:
        return "a flush of a memtable failed";
      case rocksdb::BackgroundErrorReason::kCompaction:
        return "a compaction failed";
      case rocksdb::BackgroundErrorReason::kWriteCallback:
        return "a write failed";
      case rocksdb::BackgroundErrorReason::kMemTable:
        return "a write to a memtable failed";
      case rocksdb::BackgroundErrorReason::kManifestWrite:
      case rocksdb::BackgroundErrorReason::kManifestWriteNoWAL:
        return "a write to the MANIFEST failed";
    }
    return "an error";
  }

  std::mutex mu_;
  std::string why_;                                  // GUARDED_BY(mu_)
  std::function<void(const std::string&)> stopped_;  // GUARDED_BY(mu_)
};

void Store::on_writes_stopped(std::function<void(const std::string& why)> stopped) {
  if (stops_) stops_->set(std::move(stopped));
}

std::string encode_u64(uint64_t v) {
  std::string out(8, '\0');
  for (int i = 7; i >= 0; --i) {
    out[i] = static_cast<char>(v & 0xff);
    v >>= 8;
  }
  return out;
}

uint64_t decode_u64(std::string_view bytes) {
  uint64_t v = 0;
  const size_t n = std::min<size_t>(bytes.size(), 8);
  for (size_t i = 0; i < n; ++i) v = (v << 8) | static_cast<unsigned char>(bytes[i]);
  return v;
}

Error io_error(const rocksdb::Status& s) { return make_error(Code::kUnavailable, s.ToString()); }

bool is_spent_counter(std::string_view key, std::string_view value) {
  return !key.empty() && key[0] == 'c' && value.size() == 8 && decode_u64(value) == 0;
}

std::optional<Error> Store::unfinished_backup(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::path(dir) / Store::kUnfinishedBackup, ec)) {
    return std::nullopt;
  }
  return make_error(
      Code::kUnavailable,
      dir + " holds a backup that gatewayctl backup did not finish (" + Store::kUnfinishedBackup +
          "): it may lack events or projections; remove it and make the backup again");
}

namespace {

// A name RocksDB gives a database's files: MANIFEST-NNNNNN, or NNNNNN.log, .sst or .blob.
bool database_file(std::string_view name) {
  auto number = [](std::string_view digits) {
    return !digits.empty() && std::all_of(digits.begin(), digits.end(), ascii_digit);
  };
  if (name.starts_with("MANIFEST-")) return number(name.substr(9));
  for (std::string_view suffix : {".log", ".sst", ".blob"}) {
    if (name.ends_with(suffix)) return number(name.substr(0, name.size() - suffix.size()));
  }
  return false;
}

// What give_back_reserved_space gave back, and the files it could not give theirs back from.
struct GivenBack {
  int files = 0;
  uint64_t bytes = 0;
  std::vector<std::pair<std::string, std::string>> kept;  // a file's name, why
};

// Below this, what a file holds past its end is not a reservation worth a write: an extent tree's
// blocks (st_blocks counts them too) make a few KB on a large table file that RocksDB closed.
constexpr uint64_t kReservationWorthGivingBack = 256 << 10;

// The bytes of disk `st`'s file holds past the block its last byte is in (st_blocks counts
// 512-byte units).
uint64_t held_past_end(const struct stat& st) {
  const uint64_t block = st.st_blksize > 0 ? static_cast<uint64_t>(st.st_blksize) : 4096;
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  const uint64_t used = (size + block - 1) / block * block;
  const uint64_t held = static_cast<uint64_t>(st.st_blocks) * 512;
  return held > used ? held - used : 0;
}

// Gives back what the regular file `path` holds past its end into `given`; why not, if it could
// not. The file's bytes are left as they are: a truncate to the size it has, then, on a file
// system that keeps the blocks past the end through that, a hole punched from the end on (ext4
// and tmpfs give them back at the truncate).
std::optional<std::string> give_back(const std::filesystem::path& path, GivenBack& given) {
  // Not blocking: a FIFO put in the file's place since it was looked at would hold the open.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return std::strerror(errno);
  std::optional<std::string> why;
  struct stat st {};
  struct stat after {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    why = "not a regular file any more";
  } else if (::ftruncate(fd, st.st_size) != 0) {
    why = std::strerror(errno);
  } else {
    if (::fstat(fd, &after) == 0 && held_past_end(after) >= kReservationWorthGivingBack) {
      // Past every block the file holds: the reservation lies within.
      const auto reach = static_cast<off_t>(static_cast<uint64_t>(after.st_blocks) * 512);
      if (::fallocate(fd, FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE, after.st_size, reach) != 0) {
        why = std::strerror(errno);
      }
    }
    if (::fstat(fd, &after) == 0) {
      const uint64_t was = static_cast<uint64_t>(st.st_blocks) * 512;
      const uint64_t now = static_cast<uint64_t>(after.st_blocks) * 512;
      if (now < was) {
        ++given.files;
        given.bytes += was - now;
      }
      if (!why && held_past_end(after) >= kReservationWorthGivingBack) {
        why = "the file system kept it through a truncate and a hole punched past the end";
      }
    }
  }
  ::close(fd);
  return why;
}

// RocksDB reserves disk ahead of a file it writes (fallocate with FALLOC_FL_KEEP_SIZE: about 70 MB
// ahead of a write-ahead log, 4 MB ahead of a MANIFEST) and gives the rest back as it closes the
// file, by truncating it to its size. A crash (SIGKILL, a power cut) leaves the reservation in
// place, and the next open needs room for a new log, MANIFEST and table file besides: on a disk
// the reservation had filled, the restart failed with "No space left on device" (helper 113), until
// the operator truncated each log by hand. Given back here, as RocksDB's close would have, with
// `dir`'s LOCK held, so that no other process is writing those files through this dir. A file with
// other names (hard links: `cp -al` of a running data dir) may be written through another one, by
// a process the LOCK does not keep out, and a truncate to the size seen could cut what it wrote
// meanwhile: it is left as it is (helper 118).
GivenBack give_back_reserved_space(const std::string& dir) {
  GivenBack given;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!database_file(name)) continue;
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (held_past_end(st) < kReservationWorthGivingBack) continue;
    std::optional<std::string> why;
    if (st.st_nlink > 1) {
      why = "it has other names (hard links), through which another process may be writing it";
    } else {
      why = give_back(it->path(), given);
    }
    if (why) {
      // Kept for want of that: a full disk's restart fails with RocksDB's "No space left".
      try {
        given.kept.emplace_back(name, std::move(*why));
      } catch (const std::exception&) {
        // Out of memory: not said.
      }
    }
  }
  return given;
}

}  // namespace

// Without CURRENT, RocksDB's create_if_missing made a new database in the dir: the first open
// failed on the old write-ahead log ("wal_dir contains existing log file") but left a CURRENT
// naming an empty MANIFEST, and the next start served an empty store, deleting every table file
// of the old one (helper 113: 5,231 events gone). With no log left, the first start did so.
std::optional<Error> Store::files_without_current(const std::string& dir) {
  std::error_code ec;
  if (std::filesystem::exists(std::filesystem::path(dir) / "CURRENT", ec) || ec) {
    return std::nullopt;  // an error reading the dir is RocksDB's to report
  }
  std::vector<std::string> found;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (database_file(name)) found.push_back(std::move(name));
  }
  if (found.empty()) return std::nullopt;
  std::sort(found.begin(), found.end());
  std::string shown;
  for (size_t i = 0; i < found.size() && i < 3; ++i) shown += (i == 0 ? "" : ", ") + found[i];
  if (found.size() > 3) shown += " and " + std::to_string(found.size() - 3) + " more";
  return make_error(Code::kUnavailable,
                    "it holds a database's files (" + shown +
                        ") but no CURRENT, the file that names its MANIFEST: opened, it would "
                        "become a new, empty database and those files would be deleted. Restore "
                        "CURRENT (the name of the newest MANIFEST-NNNNNN file, and a newline) or "
                        "a backup");
}

Result<std::unique_ptr<Store>> Store::open(const std::string& dir, rocksdb::Env* env) {
  if (auto refused = unfinished_backup(dir)) return std::move(*refused);
  return open_unchecked(dir, env);
}

Result<std::unique_ptr<Store>> Store::open_backup_copy(const std::string& dir) {
  return open_unchecked(dir, nullptr);
}

Result<std::unique_ptr<Store>> Store::open_unchecked(const std::string& dir, rocksdb::Env* env) {
  if (auto refused = files_without_current(dir)) return std::move(*refused);
  rocksdb::DBOptions options;
  options.create_if_missing = true;
  options.create_missing_column_families = true;
  options.max_background_jobs = 2;
  options.bytes_per_sync = 1 << 20;
  // A write-ahead log file is kept until every column family has flushed what it holds, and the
  // default column family (Idempotency-Key answers) may go hours without filling a memtable. So
  // RocksDB's default bound, 4 times all the memtables (about 1.5 GB, replayed at start: 3.3 s
  // for 914 MB), is replaced: past 256 MB of log the column family holding the oldest is flushed.
  options.max_total_wal_size = 256 << 20;
  // A record that cannot be read at the very end of the write-ahead log is a write a crash cut
  // short, never acknowledged (a 201 waits for the sync), so it is dropped. Anywhere else it is
  // damage to acknowledged events: RocksDB's default (point-in-time recovery) replays up to it and
  // silently drops everything after it, and the log would then reuse their sequence numbers for
  // new events. So the open fails instead, with RocksDB's "Corruption: ..." (restore a backup),
  // unless the damage is the log's last write, torn by the crash (below).
  options.wal_recovery_mode = rocksdb::WALRecoveryMode::kTolerateCorruptedTailRecords;
  if (env != nullptr) options.env = env;
  auto seals = std::make_shared<MemtableSeals>();
  options.listeners.push_back(seals);
  auto stops = std::make_shared<WriteStops>();
  options.listeners.push_back(stops);
  // A data dir gatewayd makes is its owner's alone (0700): it holds every tenant's records. One
  // that exists keeps its mode. RocksDB syncs the entries of the files it makes in the dir, not
  // the dir's own entry: until the directory it was made in is synced (and so for each parent
  // made with it), a power cut could take the dir away with every event acknowledged in it
  // (helper 122, with a model of what a sync makes durable; ext4's journal would most likely
  // have kept it).
  const std::vector<std::string> missing = missing_directories(dir);
  std::error_code made;
  if (std::filesystem::create_directories(dir, made)) {
    std::error_code ignored;
    std::filesystem::permissions(dir, std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::replace, ignored);
    if (auto unsynced = sync_made_directories(missing)) {
      return make_error(Code::kUnavailable, *unsynced);
    }
  } else if (made && made != std::errc::not_a_directory && made != std::errc::file_exists) {
    // Told here: RocksDB went on to say "No such file or directory: while open a file for lock"
    // for a dir whose parent gatewayd may not write. A path through a file is told below ("it
    // is not a directory"). The parents it made before the failure go again (deepest first).
    std::error_code ignored;
    for (const std::string& parent : missing) std::filesystem::remove(parent, ignored);
    return make_error(Code::kUnavailable, "cannot make the directory: " + made.message());
  }
  // A dir of a newer data format is refused before anything in it changes (store/data_format.h),
  // also its LOCK (helper 121: a copy without one got one). The mark is read again under the LOCK,
  // which a newer gatewayd holds while it writes the mark.
  auto newer = read_data_format(dir);
  if (!newer.ok()) return std::move(newer.error());
  // Damage is refused before anything in the dir changes too.
  if (auto gone = events_gone(dir, newer.value())) return std::move(*gone);
  // RocksDB's LOCK keeps a second writer out only while the name LOCK is the file locked: one
  // deleted (by hand, or by a cleanup of "stale" lock files) let a second gatewayd open the dir and
  // write beside the first (helper 156: the first's acknowledged events were gone after a restart,
  // and check passed). The directory itself is locked too (flock), which no unlink takes away;
  // held for as long as the Store is open. Where flock cannot lock a directory (NFS and CIFS
  // make it an fcntl lock, which wants a file open for writing), RocksDB's LOCK alone keeps a
  // second writer out, as before, and LOG says so.
  std::string dir_lock_note;
  UniqueFd dir_lock(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir_lock.get() < 0) {
    const int error = errno;
    return make_error(Code::kUnavailable,
                      std::string("cannot open the directory: ") + std::strerror(error));
  }
  if (::flock(dir_lock.get(), LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    if (error == EWOULDBLOCK) {
      return make_error(Code::kUnavailable,
                        std::string(Store::kInUse) +
                            " (another gatewayd, or gatewayctl rebuild, holds a lock on " + dir +
                            ")");
    }
    if (error != EBADF && error != ENOLCK && error != EOPNOTSUPP && error != EINVAL) {
      return make_error(Code::kUnavailable,
                        std::string("cannot lock the directory: ") + std::strerror(error));
    }
    dir_lock_note = std::string("gatewayd: cannot lock the data dir itself (") +
                    std::strerror(error) +
                    "; a network file system?): only RocksDB's LOCK file keeps a second writer "
                    "out, so never delete it while gatewayd runs";
    dir_lock.reset();
  }
  // The LOCK is tried before the info log is made, which sets the earlier run's LOG aside: a
  // second gatewayd, or `gatewayctl rebuild` beside a running one, moved the live process's LOG
  // (which it went on writing to) among the ten kept, so that a few such tries had it deleted.
  // Released again at once for DB::Open, which takes it for good (and says so if it lost a race).
  GivenBack given;
  uint64_t format = 0;
  {
    rocksdb::Env* lock_env = env != nullptr ? env : rocksdb::Env::Default();
    rocksdb::FileLock* lock = nullptr;
    auto locked = lock_env->LockFile(dir + "/LOCK", &lock);
    if (!locked.ok()) return lock_refused(dir, locked);
    auto read = read_data_format(dir);
    if (read.ok()) {
      format = read.value();
      given = give_back_reserved_space(dir);
    }
    lock_env->UnlockFile(lock);
    if (!read.ok()) return std::move(read.error());
  }
  // The info log grows by about 130 KB an hour under load (statistics every 10 minutes): each
  // file is set aside at 8 MiB, and RocksDB keeps 10 in all (`LOG` and the newest set aside).
  options.info_log = std::make_shared<InfoLog>(dir + "/LOG", kInfoLogBytes);
  options.keep_log_file_num = kInfoLogsKept;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  rocksdb::Log(rocksdb::InfoLogLevel::INFO_LEVEL, options.info_log,
               "gatewayd: write-ahead log checksums (CRC-32C) computed by %s",
               crc32c_implementation());
  if (!dir_lock_note.empty()) {
    rocksdb::Log(rocksdb::InfoLogLevel::WARN_LEVEL, options.info_log, "%s", dir_lock_note.c_str());
  }
  if (given.files > 0) {
    rocksdb::Log(rocksdb::InfoLogLevel::WARN_LEVEL, options.info_log,
                 "gatewayd: gave back %llu bytes of disk reserved past the ends of %d of the "
                 "database's files by a run that did not close them (a crash)",
                 static_cast<unsigned long long>(given.bytes), given.files);
  }
  for (const auto& [name, why] : given.kept) {
    rocksdb::Log(rocksdb::InfoLogLevel::WARN_LEVEL, options.info_log,
                 "gatewayd: cannot give back the disk reserved past the end of %s: %s (a run that "
                 "did not close the file left it; on a full disk the open fails for want of it)",
                 name.c_str(), why.c_str());
  }
  auto s = rocksdb::DB::Open(options, dir, column_families(), &handles, &raw);
  std::string note;
  if (s.IsCorruption()) {
    // RocksDB drops a last record cut short, not one of full length with parts that never reached
    // the disk (store/wal_tail.h). If that is all the damage, the log is replayed up to it.
    const WalTail tail = examine_wal_tail(dir);
    if (tail.kind == WalTail::Kind::kDamaged) {
      return make_error(Code::kUnavailable, s.ToString() + " (" + tail.detail + ")");
    }
    if (tail.kind == WalTail::Kind::kTorn) {
      rocksdb::DBOptions up_to_damage = options;
      up_to_damage.wal_recovery_mode = rocksdb::WALRecoveryMode::kPointInTimeRecovery;
      // First a replay that writes nothing: an open for writing flushes what it replayed and
      // deletes the logs. If the replay stops before the last complete batch, something before
      // the torn write would be dropped too, so the open fails as RocksDB's did.
      std::vector<rocksdb::ColumnFamilyHandle*> probe_handles;
      rocksdb::DB* probe = nullptr;
      auto replayed = rocksdb::DB::OpenForReadOnly(up_to_damage, dir, column_families(),
                                                   &probe_handles, &probe);
      const bool reaches =
          replayed.ok() && probe->GetLatestSequenceNumber() >= tail.last_complete_seq;
      if (replayed.ok()) {
        for (auto* h : probe_handles) probe->DestroyColumnFamilyHandle(h);
        delete probe;
      }
      if (!reaches) {
        return make_error(Code::kUnavailable,
                          s.ToString() + " (a replay up to the damage in " + tail.file +
                              " does not reach the last complete batch before it)");
      }
      handles.clear();
      auto again = rocksdb::DB::Open(up_to_damage, dir, column_families(), &handles, &raw);
      if (again.ok()) {
        s = again;
        note = "the write-ahead log ended in a write that a crash tore (" + tail.detail + " in " +
               tail.file + ", " + std::to_string(tail.bytes) + " bytes from byte " +
               std::to_string(tail.offset) +
               "): it was never synced, so never acknowledged, and it was dropped";
        rocksdb::Log(rocksdb::InfoLogLevel::WARN_LEVEL, options.info_log, "gatewayd: %s",
                     note.c_str());
      }
    }
  }
  if (!s.ok()) {
    // Said with the error too: on the full disk where it matters, LOG may have had no room for it.
    Error error = io_error(s);
    for (const auto& [name, why] : given.kept) {
      error.detail += "; the disk reserved past the end of " + name +
                      " by a run that did not close it could not be given back (" + why + ")";
    }
    return error;
  }
  auto store = adopt(dir, raw, handles);
  store->dir_lock_ = std::move(dir_lock);
  store->seals_ = std::move(seals);
  store->stops_ = std::move(stops);
  store->recovery_note_ = std::move(note);
  // Marked once open, with RocksDB's LOCK held: before, a new dir would hold a file and no
  // database, and an open that then failed would have marked a dir it never read.
  if (format < kDataFormat) {
    if (auto unmarked = mark_data_format(dir)) return std::move(*unmarked);
  }
  return store;
}

namespace {

// The MANIFEST CURRENT names and its length, as "MANIFEST-000012 4711" (nullopt if either cannot
// be read). A writer appends to the MANIFEST each flush and compaction before it deletes the
// files they made obsolete, and a new MANIFEST is named in CURRENT.
std::optional<std::string> manifest_mark(const std::string& dir) {
  std::string current;
  if (!rocksdb::ReadFileToString(rocksdb::Env::Default(), dir + "/CURRENT", &current).ok()) {
    return std::nullopt;
  }
  while (!current.empty() && current.back() == '\n') current.pop_back();
  if (current.empty() || current.find('/') != std::string::npos) return std::nullopt;
  struct stat st {};
  if (::stat((dir + "/" + current).c_str(), &st) != 0) return std::nullopt;
  return current + " " + std::to_string(st.st_size);
}

}  // namespace

Result<std::unique_ptr<Store>> Store::open_secondary(const std::string& dir,
                                                     const std::string& scratch_dir,
                                                     rocksdb::Env* env) {
  if (auto refused = unfinished_backup(dir)) return std::move(*refused);
  rocksdb::DBOptions options;
  if (env != nullptr) options.env = env;
  options.max_open_files = -1;  // required of a secondary: it keeps every table file it reads open
  // Its info log goes to the scratch dir: RocksDB's own logger aborts once a write to it failed.
  options.info_log = std::make_shared<InfoLog>(scratch_dir + "/LOG");
  for (int open = 1;; ++open) {
    const std::optional<std::string> before = manifest_mark(dir);
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* raw = nullptr;
    auto s =
        rocksdb::DB::OpenAsSecondary(options, dir, scratch_dir, column_families(), &handles, &raw);
    std::unique_ptr<Store> store = s.ok() ? adopt(dir, raw, handles) : nullptr;
    const bool unchanged = before && before == manifest_mark(dir);
    // An open that failed while the files changed (a file it listed was deleted) is tried again;
    // one that failed with no MANIFEST to mark (no CURRENT, say) says why at once.
    if (!s.ok() && (unchanged || !before)) return io_error(s);
    if (unchanged) return store;
    if (open == kSecondaryOpens) {
      return make_error(Code::kUnavailable,
                        dir + " changed during each of " + std::to_string(kSecondaryOpens) +
                            " opens (its writer flushing or compacting all the while); try again");
    }
    store.reset();
    // A flush or compaction takes tens of milliseconds; the waits add up to about 4 s.
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(5 * open, 200)));
  }
}

std::vector<std::string> Store::missing_column_families(const std::string& dir) {
  std::vector<std::string> names, missing;
  if (!rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), dir, &names).ok()) return missing;
  for (const auto& wanted : column_families()) {
    if (std::find(names.begin(), names.end(), wanted.name) == names.end()) {
      missing.push_back(wanted.name);
    }
  }
  return missing;
}

std::optional<Error> Store::events_gone(const std::string& dir, uint64_t format) {
  if (format == 0) return std::nullopt;
  const std::vector<std::string> absent = missing_column_families(dir);
  if (std::find(absent.begin(), absent.end(), "events") == absent.end()) return std::nullopt;
  return make_error(Code::kUnavailable,
                    std::string("its MANIFEST names no column family of events, yet a gatewayd "
                                "opened it whole (it holds ") +
                        kDataFormatFile +
                        "): the MANIFEST is cut short or damaged, and opened, the dir would "
                        "serve an empty log. Restore a backup");
}

bool Store::locked_by_another_process(const std::string& dir) {
  // RocksDB locks LOCK with fcntl (a write lock over the whole file), which F_GETLK reports.
  if (const UniqueFd fd(::open((dir + "/LOCK").c_str(), O_RDONLY | O_CLOEXEC)); fd.get() >= 0) {
    struct flock lock {};
    lock.l_type = F_WRLCK;
    lock.l_whence = SEEK_SET;
    if (::fcntl(fd.get(), F_GETLK, &lock) == 0 && lock.l_type != F_UNLCK) return true;
  }
  // The directory's own lock (open_unchecked), held also once LOCK was deleted: looked up in
  // /proc/locks, which takes no lock (a probe with flock could refuse a gatewayd starting then).
  // A lock held there: "1: FLOCK  ADVISORY  WRITE 4242 08:01:131074 0 EOF" (the holder's pid;
  // device major and minor in hex, inode in decimal); one waited for has "->" after the number.
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return false;
  char id[64];
  std::snprintf(id, sizeof id, "%02x:%02x:%llu", ::major(st.st_dev), ::minor(st.st_dev),
                static_cast<unsigned long long>(st.st_ino));
  const std::string self = std::to_string(::getpid());
  std::ifstream locks("/proc/locks");
  for (std::string line; std::getline(locks, line);) {
    std::istringstream fields(line);
    std::string number, kind, mode, access, pid, file;
    if ((fields >> number >> kind >> mode >> access >> pid >> file) && kind == "FLOCK" &&
        access == "WRITE" && pid != self && file == id) {
      return true;
    }
  }
  return false;
}

std::optional<Error> Store::check_table_files(const std::string& dir,
                                              const std::string& scratch_dir) {
  rocksdb::DBOptions options;
  options.max_open_files = -1;  // every table file is opened by the open itself
  options.info_log = std::make_shared<InfoLog>(scratch_dir + "/LOG.check");
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  auto s = rocksdb::DB::OpenForReadOnly(options, dir, column_families(), &handles, &raw);
  if (!s.ok()) return io_error(s);
  for (auto* h : handles) raw->DestroyColumnFamilyHandle(h);
  delete raw;
  return std::nullopt;
}

std::unique_ptr<Store> Store::adopt(const std::string& dir, rocksdb::DB* raw,
                                    const std::vector<rocksdb::ColumnFamilyHandle*>& handles) {
  std::unique_ptr<Store> store(new Store());
  store->dir_ = dir;
  store->db_.reset(raw);
  store->default_cf_ = handles[0];
  store->events_cf_ = handles[1];
  store->projections_cf_ = handles[2];
  return store;
}

Store::~Store() {
  if (!db_) return;
  for (auto* h : {default_cf_, events_cf_, projections_cf_}) {
    if (h != nullptr) db_->DestroyColumnFamilyHandle(h);
  }
  db_->Close();
}

rocksdb::ColumnFamilyHandle* Store::cf(Cf which) const {
  switch (which) {
    case Cf::kEvents: return events_cf_;
    case Cf::kProjections: return projections_cf_;
    case Cf::kMeta: break;
  }
  return default_cf_;
}

Result<bool> Store::flush() {
  auto s = db_->Flush(rocksdb::FlushOptions(), {default_cf_, events_cf_, projections_cf_});
  if (!s.ok()) return io_error(s);
  return true;
}

int Store::level0_files(Cf which) const {
  // A property RocksDB keeps (a decimal string), where GetColumnFamilyMetaData would copy every
  // file's metadata.
  std::string files;
  const std::string property = rocksdb::DB::Properties::kNumFilesAtLevelPrefix + "0";
  if (!db_->GetProperty(cf(which), property, &files)) return 0;
  return std::atoi(files.c_str());
}

uint64_t Store::raw_bytes(Cf which) const {
  uint64_t bytes = 0;
  rocksdb::TablePropertiesCollection tables;
  if (db_->GetPropertiesOfAllTables(cf(which), &tables).ok()) {
    for (const auto& [file, properties] : tables) {
      bytes += properties->raw_key_size + properties->raw_value_size;
    }
  }
  uint64_t in_memtables = 0;
  if (db_->GetIntProperty(cf(which), rocksdb::DB::Properties::kCurSizeAllMemTables,
                          &in_memtables)) {
    bytes += in_memtables;
  }
  return bytes;
}

Result<bool> Store::compact_level0(Cf which) {
  rocksdb::ColumnFamilyMetaData meta;
  db_->GetColumnFamilyMetaData(cf(which), &meta);
  if (meta.levels.empty() || meta.levels[0].files.empty()) return false;
  std::vector<std::string> files;
  for (const auto& file : meta.levels[0].files) {
    if (file.being_compacted) return false;
    files.push_back(file.name);
  }
  rocksdb::CompactionOptions options;
  // Files of the size RocksDB's own compactions make (its target_file_size_base), not one file
  // as large as L1.
  options.output_file_size_limit = 64 << 20;
  auto s = db_->CompactFiles(options, cf(which), files, 1);
  if (s.IsAborted() || s.IsInvalidArgument()) return false;  // files taken by RocksDB meanwhile
  if (s.IsShutdownInProgress()) return false;                // stop_background_work()
  if (!s.ok()) return io_error(s);
  return true;
}

void Store::stop_background_work() { rocksdb::CancelAllBackgroundWork(db_.get(), false); }

Result<bool> Store::put_meta(std::string_view key, std::string_view value) {
  return put_meta({{key, value}});
}

Result<bool> Store::put_meta(
    std::initializer_list<std::pair<std::string_view, std::string_view>> entries) {
  rocksdb::WriteBatch batch;
  for (const auto& [key, value] : entries) {
    auto s = batch.Put(default_cf_, rocksdb::Slice(key.data(), key.size()),
                       rocksdb::Slice(value.data(), value.size()));
    if (!s.ok()) return io_error(s);
  }
  return write_meta(batch);
}

Result<bool> Store::delete_meta(const std::vector<std::string>& keys) {
  rocksdb::WriteBatch batch;
  for (const std::string& key : keys) {
    auto s = batch.Delete(default_cf_, key);
    if (!s.ok()) return io_error(s);
  }
  return write_meta(batch);
}

Result<bool> Store::write_meta(rocksdb::WriteBatch& batch) {
  // Synced, as every write to the log is: an unsynced record between two synced batches could be
  // lost while the later batch was kept, damage a power loss left short of the log's last write,
  // which the start refuses (store/wal_tail.h; helper 104 saw the mirror's checkpoint there in
  // 141 of 2,162 sync windows). The mirror's checkpoint is written every 100 ms at most.
  rocksdb::WriteOptions wo;
  wo.sync = true;
  auto s = db_->Write(wo, &batch);
  if (!s.ok()) return io_error(s);
  return true;
}

void disable_rocksdb_perf_counters() {
  thread_local bool disabled = false;
  if (disabled) return;
  rocksdb::SetPerfLevel(rocksdb::PerfLevel::kDisable);
  disabled = true;
}

Result<std::optional<std::string>> Store::get(Cf which, std::string_view key,
                                             const rocksdb::Snapshot* snapshot) const {
  disable_rocksdb_perf_counters();
  std::string value;
  rocksdb::ReadOptions ro;
  ro.snapshot = snapshot;
  auto s = db_->Get(ro, cf(which), rocksdb::Slice(key.data(), key.size()),
                    &value);
  if (s.IsNotFound()) return std::optional<std::string>();
  if (!s.ok()) return io_error(s);
  return std::optional<std::string>(std::move(value));
}

std::unique_ptr<rocksdb::Iterator> Store::iterate(Cf which,
                                                  const rocksdb::Snapshot* snapshot) const {
  disable_rocksdb_perf_counters();
  rocksdb::ReadOptions ro;
  ro.snapshot = snapshot;
  return std::unique_ptr<rocksdb::Iterator>(db_->NewIterator(ro, cf(which)));
}

Result<bool> Store::holds_keys(Cf which) const {
  auto it = iterate(which);
  it->SeekToFirst();
  if (!it->status().ok()) return io_error(it->status());
  return it->Valid();
}

std::unique_ptr<rocksdb::Iterator> Store::iterate_under(Cf which, std::string_view prefix,
                                                        const rocksdb::Snapshot* snapshot,
                                                        uint64_t max_skipped) const {
  disable_rocksdb_perf_counters();
  // The bound must outlive the iterator: it is freed with it.
  struct Bound {
    std::string end;
    rocksdb::Slice slice;
  };
  auto bound = std::make_unique<Bound>();
  bound->end = prefix_end(prefix);
  rocksdb::ReadOptions ro;
  ro.snapshot = snapshot;
  ro.max_skippable_internal_keys = max_skipped;
  if (!bound->end.empty()) {
    bound->slice = rocksdb::Slice(bound->end);
    ro.iterate_upper_bound = &bound->slice;
  }
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, cf(which)));
  it->RegisterCleanup([](void* b, void*) { delete static_cast<Bound*>(b); }, bound.release(),
                      nullptr);
  return it;
}

bool Store::fold_counter_now(std::string_view key) {
  std::lock_guard<std::mutex> lock(tally_mu_);
  const uint64_t seals = seals_ ? seals_->count.load(std::memory_order_acquire) : 0;
  if (seals != tally_seals_ || tally_.size() >= kCounterTallyKeys) {
    // A batch written while the memtable was being switched may have put its deltas in the new
    // one uncounted: a key may then reach one delta more than the bound.
    tally_.clear();
    tally_seals_ = seals;
  }
  uint32_t& deltas = tally_[std::hash<std::string_view>{}(key)];
  if (++deltas < kMaxCounterDeltas) return false;
  deltas = 0;  // the sum hides every delta under it
  return true;
}

Result<bool> Store::reset_projections() {
  auto s = db_->DropColumnFamily(projections_cf_);
  if (!s.ok()) return io_error(s);
  db_->DestroyColumnFamilyHandle(projections_cf_);
  projections_cf_ = nullptr;
  auto cache = rocksdb::NewLRUCache(64 << 20);
  s = db_->CreateColumnFamily(projection_options(cache), kProjectionsName, &projections_cf_);
  if (!s.ok()) return io_error(s);
  std::lock_guard<std::mutex> lock(tally_mu_);
  tally_.clear();
  return true;
}

}  // namespace gw
