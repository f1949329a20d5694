// The RocksDB database behind gatewayd: column family `events` (the append-only log, key = 8-byte
// big-endian sequence number, value = the event's JSON) and `projections` (read models, see
// projections/keys.h). One process opens a data dir for writing at a time (RocksDB's LOCK file);
// read-only secondaries (open_secondary) may look on meanwhile.
// A Store is safe for concurrent use: readers call get()/iterate() from any thread without a
// lock of ours; all writes to the log and the projections go through the single Writer
// (store/writer.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <rocksdb/db.h>

#include "core/error.h"
#include "core/unique_fd.h"

namespace gw {

// kMeta is RocksDB's default column family: small state kept beside the log by a component that
// owns its keys and writes them itself (the Kafka mirror's checkpoint), not through the Writer.
enum class Cf { kEvents, kProjections, kMeta };

// A failed RocksDB call as gatewayd's error: kUnavailable with RocksDB's message.
Error io_error(const rocksdb::Status& s);

// RocksDB counts per-thread perf statistics on every key comparison of a read or write, each
// count a TLS lookup into the shared library; nothing in gatewayd reads them. Turns them off for
// the calling thread, once (Store's reads and the writer thread call it).
void disable_rocksdb_perf_counters();

class MemtableSeals;  // store.cc: counts the projections' sealed memtables
class WriteStops;     // store.cc: RocksDB's errors that stop it taking writes

class Store {
 public:
  // Opens (creating if missing) the database in `dir`. kUnavailable with RocksDB's message if it
  // cannot (corrupt, unwritable); one held by another open (another process, or this one) starts
  // with kInUse. A write-ahead log whose last write a
  // crash tore (store/wal_tail.h) is replayed up to that write, and recovery_note() says so.
  // `env` replaces RocksDB's default Env (tests inject faults through it); it must outlive the
  // Store.
  // A dir holding kUnfinishedBackup is refused (kUnavailable): a backup was stopped half way.
  static Result<std::unique_ptr<Store>> open(const std::string& dir, rocksdb::Env* env = nullptr);
  // The data dir's RocksDB info log (`LOG`, store/info_log.h) is set aside at this size (and at
  // every start), and RocksDB keeps this many info logs: `LOG` and the newest `LOG.old.*`.
  static constexpr size_t kInfoLogBytes = 8 << 20;
  static constexpr size_t kInfoLogsKept = 10;
  // How open() begins its error for a data dir another open holds.
  static constexpr const char* kInUse = "it is in use";
  // The file `gatewayctl backup` keeps in its copy until the copy is complete and durable, so that
  // a copy it could not finish (killed, power cut) is never opened as if it were whole.
  static constexpr const char* kUnfinishedBackup = "BACKUP-UNFINISHED";
  // Open for `gatewayctl backup` only: as open(), but in a dir holding kUnfinishedBackup.
  static Result<std::unique_ptr<Store>> open_backup_copy(const std::string& dir);
  // Opens `dir` read-only as a RocksDB secondary instance: a view of the database as of this call
  // (its table files, MANIFEST and write-ahead logs), also while another process has it open for
  // writing; the LOCK is not taken. RocksDB keeps the secondary's own log in `scratch_dir`, which
  // must exist and outlive the Store. Writes fail. kUnavailable if it cannot be opened (no
  // database there, unreadable, an unfinished backup).
  //
  // A secondary reads the MANIFEST, then lists the write-ahead logs. A writer that flushed in
  // between and deleted the log it had flushed left a view without that log's writes, which
  // RocksDB gave as whole (helper 146: a backup beside a gatewayd that was stopping exited 0
  // without acknowledged events). A view is therefore kept only if the MANIFEST (the file CURRENT
  // names, and its length) was the same before the open and after it: a writer deletes a log
  // only after it has written the flush that made it obsolete to the MANIFEST, and a compaction
  // its table files after writing its edit. Otherwise it is opened again, up to kSecondaryOpens
  // times, then kUnavailable ("changed during each of N opens"). `env` is for tests.
  static constexpr int kSecondaryOpens = 40;
  static Result<std::unique_ptr<Store>> open_secondary(const std::string& dir,
                                                       const std::string& scratch_dir,
                                                       rocksdb::Env* env = nullptr);
  // Whether another process has `dir` open for writing: holds its LOCK, or the lock on the
  // directory itself (which stays when LOCK is deleted).
  static bool locked_by_another_process(const std::string& dir);
  // kUnavailable if `dir` holds a database's files (MANIFEST-*, numbered .log, .sst or .blob) but
  // no CURRENT, the file naming the MANIFEST: opened, RocksDB made a new, empty database there
  // and deleted them. open() and gatewayctl's reads refuse such a dir. The message begins "it
  // holds", to follow "cannot open DIR: ".
  static std::optional<Error> files_without_current(const std::string& dir);
  // kUnavailable if `dir` holds a copy that `gatewayctl backup` did not finish (its
  // kUnfinishedBackup marker): part of the log, or projections half copied, would be served as if
  // they were the whole database. open() and gatewayctl's commands refuse such a dir.
  static std::optional<Error> unfinished_backup(const std::string& dir);
  // The names of gatewayd's column families `dir`'s database lacks (none if it cannot be read).
  // RocksDB makes them one by one after the database itself, so a first start stopped in between
  // lacks some, and holds no event then; a rebuild drops the projections and makes them again,
  // so one stopped in between lacks those. open() makes what is missing.
  static std::vector<std::string> missing_column_families(const std::string& dir);
  // kUnavailable if `dir`, whose data format mark is `format` (not 0: a gatewayd opened it whole
  // once, having made every column family), lacks the events' column family, which nothing
  // drops: its MANIFEST is cut short or damaged. Opened, it made an empty log anew and served
  // nothing of the old one (helper 156). open() and gatewayctl's reads refuse such a dir. The
  // message begins "its", to follow "cannot open DIR: ".
  static std::optional<Error> events_gone(const std::string& dir, uint64_t format);
  // Opens `dir` strictly read-only and closes it again: an error (RocksDB's, naming the file) if
  // a table file its MANIFEST names is missing or unreadable, which a secondary would pass over
  // (see admin/read_only.h). Not beside a writer: a read-only open's view of the files is not
  // safe from the writer's deletions. RocksDB's log of the open goes to `scratch_dir`.
  static std::optional<Error> check_table_files(const std::string& dir,
                                                const std::string& scratch_dir);
  ~Store();

  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  rocksdb::DB* db() const { return db_.get(); }
  rocksdb::ColumnFamilyHandle* cf(Cf which) const;

  // Point read of committed data (as of `snapshot` if given). nullopt if absent; kUnavailable on
  // an I/O error.
  Result<std::optional<std::string>> get(Cf which, std::string_view key,
                                         const rocksdb::Snapshot* snapshot = nullptr) const;
  std::unique_ptr<rocksdb::Iterator> iterate(Cf which,
                                             const rocksdb::Snapshot* snapshot = nullptr) const;
  // Whether column family `which` holds any live key; kUnavailable on an I/O error.
  Result<bool> holds_keys(Cf which) const;
  // An iterator over the keys that start with `prefix` only. Without the bound, a step past the
  // prefix's last live key goes on over every deleted key (a tombstone until a compaction drops
  // it) up to the next live one, which may lie far on, in another tenant's range.
  // `max_skipped`, if not 0: a Seek or Next that would step over more keys than that (deleted
  // ones, older versions, ones newer than the snapshot) stops there, the iterator no longer
  // valid and its status Incomplete (RocksDB's max_skippable_internal_keys).
  std::unique_ptr<rocksdb::Iterator> iterate_under(Cf which, std::string_view prefix,
                                                   const rocksdb::Snapshot* snapshot = nullptr,
                                                   uint64_t max_skipped = 0) const;

  // Calls `stopped` with why once RocksDB has stopped taking writes after an error of its own
  // (of severity hard or worse: a flush, a compaction or a MANIFEST write that failed, or a
  // write to the write-ahead log, from any thread), or at once if it has already; nullptr
  // forgets it. Every later write would fail with that error; RocksDB met it on its own thread,
  // maybe long before the next write. Called on the thread that met the error, never while
  // another call of it runs, and not after on_writes_stopped(nullptr) has returned. One at a time:
  // a call replaces the one before (gatewayd has one Writer for its Store).
  void on_writes_stopped(std::function<void(const std::string& why)> stopped);
  // Writes every memtable to table files (a clean stop: the next open replays no log).
  Result<bool> flush();
  // Writes one kMeta key, synced (every write to the log is, so that only its last record can be
  // torn). kUnavailable on an I/O error.
  Result<bool> put_meta(std::string_view key, std::string_view value);
  // The same for several keys, in one atomic write.
  Result<bool> put_meta(
      std::initializer_list<std::pair<std::string_view, std::string_view>> entries);
  // Deletes kMeta keys, in one synced atomic write. kUnavailable on an I/O error.
  Result<bool> delete_meta(const std::vector<std::string>& keys);
  // Drops and recreates the projections column family (offline rebuild only).
  Result<bool> reset_projections();
  // The number of table files in L0 of `which`.
  int level0_files(Cf which) const;
  // About how many bytes of keys and values `which` holds, uncompressed: its table files' raw
  // sizes (from their properties, which count what a later compaction may drop) and its
  // memtables' size.
  uint64_t raw_bytes(Cf which) const;
  // Compacts every L0 table file of `which` into L1, with the L1 files they overlap, on the
  // calling thread; RocksDB's own compactions and writes go on beside it. false if there was
  // nothing to do or a compaction of RocksDB's holds one of the files (try again later), or if
  // stop_background_work() ended it (the files stay as they were); kUnavailable with RocksDB's
  // message if it failed.
  Result<bool> compact_level0(Cf which);
  // For a stop, after the last flush(): RocksDB's flushes and compactions, and a compact_level0()
  // in progress on any thread, end at their next check of it (a compaction drops what it wrote),
  // and none starts after it. Returns at once; closing the Store waits for them. On 1M records,
  // gatewayd then exits 0.10 to 0.12 s after SIGTERM during a compaction of 14 L0 files, where
  // it waited 3.8 to 5.7 s for it to end (three runs each).
  void stop_background_work();

  // For Tx::seal, which adds a counter's change as a merged delta: true when this delta should
  // rather be folded, written as the counter's sum, because `key` has kMaxCounterDeltas - 1
  // deltas in the projections' active memtable already, so that a read never folds more. As far
  // as this Store's seals know: the count of each key is forgotten when the memtable is sealed
  // (a flush folds a key's deltas into one), and all counts when more than kCounterTallyKeys
  // keys have been counted since (then a key may get the bound's worth of deltas once more for
  // each such reset within one memtable). This replaces RocksDB's
  // max_successive_merges, which searched the memtable for every merged key, a second skiplist
  // search for each counter a batch changes. Counts are kept by a 64-bit hash of the key, so
  // that counting allocates no copy of it; two keys with the same hash would share a count, and
  // when one of them is folded the other's deltas go uncounted, so it may collect more than the
  // bound until the memtable is sealed (slower reads of it, never a wrong sum). Thread-safe; one
  // thread seals at a time.
  static constexpr uint32_t kMaxCounterDeltas = 32;
  static constexpr size_t kCounterTallyKeys = 1 << 16;
  bool fold_counter_now(std::string_view key);

  const std::string& dir() const { return dir_; }
  // What open() dropped to open the database: empty, or a sentence saying that the write-ahead
  // log ended in a write a crash tore, never acknowledged (store/wal_tail.h), and where. The
  // program that opened the store says it on stderr.
  const std::string& recovery_note() const { return recovery_note_; }

 private:
  static Result<std::unique_ptr<Store>> open_unchecked(const std::string& dir, rocksdb::Env* env);
  // put_meta's and delete_meta's write of their batch, synced.
  Result<bool> write_meta(rocksdb::WriteBatch& batch);
  Store() = default;
  static std::unique_ptr<Store> adopt(const std::string& dir, rocksdb::DB* raw,
                                      const std::vector<rocksdb::ColumnFamilyHandle*>& handles);
  std::string dir_;
  UniqueFd dir_lock_;  // the data dir, flock'ed while open for writing; let go after db_ closes
  std::unique_ptr<rocksdb::DB> db_;
  rocksdb::ColumnFamilyHandle* default_cf_ = nullptr;
  rocksdb::ColumnFamilyHandle* events_cf_ = nullptr;
  rocksdb::ColumnFamilyHandle* projections_cf_ = nullptr;
  std::shared_ptr<MemtableSeals> seals_;
  std::shared_ptr<WriteStops> stops_;
  std::string recovery_note_;
  std::mutex tally_mu_;
  uint64_t tally_seals_ = 0;                            // GUARDED_BY(tally_mu_)
  std::unordered_map<uint64_t, uint32_t> tally_;  // key hash -> deltas; GUARDED_BY(tally_mu_)
};

// A consistent point-in-time view for reads that must agree with each other (a list page and its
// total). Released on destruction.
class Snapshot {
 public:
  explicit Snapshot(const Store& store) : db_(store.db()), snap_(db_->GetSnapshot()) {}
  ~Snapshot() { db_->ReleaseSnapshot(snap_); }
  Snapshot(const Snapshot&) = delete;
  Snapshot& operator=(const Snapshot&) = delete;
  const rocksdb::Snapshot* get() const { return snap_; }

 private:
  rocksdb::DB* db_;
  const rocksdb::Snapshot* snap_;
};

// 8-byte big-endian encoding, so keys sort numerically.
std::string encode_u64(uint64_t v);
// The number in the first 8 bytes of `bytes`; a value cut short (a damaged store: gatewayd writes
// 8 bytes) gives the number its own bytes make, never a read past them.
uint64_t decode_u64(std::string_view bytes);

// A projections counter (a `c` key of projections/keys.h) whose count came back to 0: it reads as
// no counter, a replay of the log writes none, and a compaction drops it (see store.cc).
bool is_spent_counter(std::string_view key, std::string_view value);

}  // namespace gw
