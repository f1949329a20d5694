// Tx: one batch of writes being staged on the writer thread, and the stored form of an event.
//
// Reads through a Tx see committed data plus this batch's own writes. The writes are kept as
// compact records (a byte buffer and an index of them), which seal() sorts into a plain
// rocksdb::WriteBatch, beside an overlay of what it wrote: a hash map for point reads and, for
// keys that are scanned in key order, a sorted index. (RocksDB's WriteBatchWithIndex keeps every
// key in a skiplist whose comparator decodes entries out of the batch; on the write path that
// cost more than the memtable insert itself.)
//
// Jobs stage into one Tx one after another; a rejected job is rolled back to the save point set
// before it, which undoes its writes, its counter changes and its appended events alike.
// Not thread-safe: one thread at a time stages a Tx and then seals it (see seal() for what may
// run beside it).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <rocksdb/write_batch.h>

#include "core/clock.h"
#include "core/error.h"
#include "store/store.h"

namespace gw {

// An event before the log assigns its sequence number, id and hash.
struct EventDraft {
  std::string type;
  std::string aggregate_kind;
  std::string aggregate_id;
  uint64_t aggregate_version = 0;
  std::string tenant;
  std::string actor;
  int64_t time = 0;
  std::string data_json;  // the full record after the change
  // The event this one answers (a verification request) or follows from (the change that made a
  // domain inherit or lose its verification), 0 for none.
  uint64_t caused_by = 0;
};

inline constexpr int kSchemaVersion = 2;
inline constexpr char kGenesisHash[] =
    "0000000000000000000000000000000000000000000000000000000000000000";

// The stored form of an event: canonical JSON (fixed member order, no hash members; `caused_by`
// only when non-zero) with `prev_hash` and `hash` appended,
// hash = hex(SHA-256(prev_hash || canonical bytes)).
std::string encode_event(uint64_t seq, const std::string& event_id, const EventDraft& draft,
                         const std::string& prev_hash, std::string* hash_out);
// The `hash` member of a stored event, or nullopt for bytes that are no stored event.
std::optional<std::string> event_hash(std::string_view stored);

// Which keys a Tx must be able to scan in key order (see Tx::scan). nullptr: every key.
using ScannedKeys = bool (*)(Cf which, std::string_view key);
// Which keys a Tx lists in watched() when it writes them.
using WatchedKeys = bool (*)(Cf which, std::string_view key);
// Which keys a Tx only writes: it never reads them back (see Tx::write_only).
using WriteOnlyKeys = bool (*)(Cf which, std::string_view key);

class Tx {
 public:
  Tx(Store& store, IdGenerator& ids, uint64_t last_seq, std::string last_hash,
     ScannedKeys scanned = nullptr);
  // A Tx staged on top of `base`, a sealed Tx that may still be being written: reads see the
  // base's writes whether or not they are in the database yet. `settle` must block until the
  // base's write has ended; a scan calls it first (scans do not merge the base) and the Tx
  // stops reading the base after it. `base` must outlive this Tx or settle(), whichever is first.
  Tx(Store& store, IdGenerator& ids, uint64_t last_seq, std::string last_hash, ScannedKeys scanned,
     const Tx* base, std::function<void()> settle);
  Tx(const Tx&) = delete;
  Tx& operator=(const Tx&) = delete;

  Result<std::optional<std::string>> get(Cf which, std::string_view key);
  void put(Cf which, std::string_view key, std::string_view value);
  void del(Cf which, std::string_view key);

  // Calls visit(key, value) for each key starting with `prefix`, in key order, committed data
  // merged with this batch's writes, until visit returns false. Every key under `prefix` must be
  // one the Tx was told it scans (kInternal otherwise); kUnavailable on an I/O error. With
  // `from`, the scan starts at the first key at or after it (keys before it are not visited,
  // nor are the deleted ones RocksDB would otherwise step over).
  using Visit = std::function<bool(std::string_view key, std::string_view value)>;
  Result<bool> scan(Cf which, std::string_view prefix, const Visit& visit,
                    std::string_view from = {});

  // A counter: an 8-byte big-endian count stored under `key` in a column family whose merge
  // operator adds (Store's projections). The changes of the whole batch are summed and merged in
  // when it is sealed, so a counter costs one blind write per batch however many jobs change it
  // (now and then a read and a write of its sum instead, see Store::fold_counter_now).
  // A count back at 0 may stay stored as 0 until a compaction drops it. get() reads it from the
  // database only (see seal()).
  void add_to_counter(Cf which, std::string_view key, int64_t delta);
  // Writes `value` under `key` when the batch is sealed; the last value set wins (a checkpoint).
  void put_at_seal(Cf which, std::string_view key, std::string_view value);

  // Appends an event to the log; returns its sequence number.
  uint64_t append(const EventDraft& draft);

  uint64_t last_seq() const { return last_seq_; }
  const std::string& last_hash() const { return last_hash_; }
  // The bytes of the writes staged so far (their keys and values), from which seal() builds its
  // batch.
  size_t staged_bytes() const { return staged_bytes_.size(); }

  // From now on, list each key `keys` accepts in watched() when a write of it is staged.
  void watch(WatchedKeys keys) { watched_ = keys; }
  // The watched keys this Tx wrote, each once (write-only keys once per write); may also hold
  // keys only rolled-back jobs wrote.
  const std::vector<std::string>& watched() const { return watched_keys_; }
  // From now on, the keys `keys` accepts go into the batch only, not into the overlay: a get()
  // or scan() of one is kInternal, and a Tx staged on this one does not see them either. Index
  // entries, history and the like are written by every job and read by none; keeping them out
  // of the overlay saves the writer thread a hash-map insert and two copies per key.
  void write_only(WriteOnlyKeys keys) { write_only_ = keys; }

  void set_savepoint();
  void rollback_to_savepoint();

  // Writes the counters and the put_at_seal values into the batch, puts the batch in key order
  // and returns it, ready for DB::Write. Call once, after the last job; the Tx takes no more
  // writes after it. Settles the base first (the writer drops the base once this Tx is sealed, and
  // a Tx staged on this one reads through it). The counters and seal values are not written to the
  // overlay, so neither this Tx nor one staged on it reads them before the batch is stored; and
  // seal() changes nothing a Tx staged on this one reads, so it may run on another thread while
  // that Tx is being staged. kInternal if the batch cannot be rebuilt, kUnavailable if a counter
  // to fold cannot be read (the batch must then be dropped). The batch must be written before the
  // next Tx of the Store is sealed (the counters' tally counts it as written).
  Result<rocksdb::WriteBatch*> seal();

 private:
  static constexpr size_t kCfs = 3;
  // Transparent, so a lookup by string_view allocates nothing.
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  using Overlay =
      std::unordered_map<std::string, std::optional<std::string>, Hash, std::equal_to<>>;
  using Entry = Overlay::value_type;
  struct Undo {
    size_t cf;
    Entry* entry;
    bool existed;
    std::optional<std::string> previous;
  };
  // A staged write to the database; its key and value are bytes of staged_bytes_.
  struct Op {
    enum Type : uint8_t { kPut, kDelete, kMerge };
    size_t key_at;
    size_t key_size;
    size_t value_at;
    size_t value_size;
    uint8_t cf;  // index_of(Cf)
    Type type;
  };
  void stage(Cf which, Op::Type type, std::string_view key, std::string_view value);
  // Overlay bookkeeping of a put or delete.
  void write(Cf which, std::string_view key, std::optional<std::string_view> value);
  // Builds wb_ from the staged writes in (column family, key) order, keeping only the last write
  // of each key (and every merge).
  Result<bool> build_batch();
  // Waits for the base's write to end (see the constructor); no-op without a base.
  void settle();
  // This batch's (or, unsettled, the base's) write of `key`: nullptr if neither wrote it.
  const std::optional<std::string>* staged(size_t cf, std::string_view key) const;

  Store& store_;
  IdGenerator& ids_;
  ScannedKeys scanned_;
  WatchedKeys watched_ = nullptr;
  WriteOnlyKeys write_only_ = nullptr;
  std::vector<std::string> watched_keys_;
  const Tx* base_ = nullptr;
  std::function<void()> settle_;
  // The writes in the order they were staged, as compact records; seal() builds wb_ from them.
  // (Kept apart from a WriteBatch so that sorting them does not parse one back.)
  std::string staged_bytes_;
  std::vector<Op> ops_;
  size_t saved_ops_ = 0;
  size_t saved_bytes_ = 0;
  rocksdb::WriteBatch wb_;  // built by seal()
  Overlay overlay_[kCfs];
  // The overlay entries of keys that are scanned, in key order (keys and values point into
  // overlay_, whose nodes do not move).
  std::map<std::string_view, const std::optional<std::string>*> ordered_[kCfs];
  std::vector<Undo> undo_;                    // writes since the save point
  std::map<std::pair<size_t, std::string>, int64_t> counters_;
  std::vector<std::pair<int64_t*, int64_t>> counter_undo_;
  std::map<std::pair<size_t, std::string>, std::string> at_seal_;
  std::map<std::pair<size_t, std::string>, std::string> saved_at_seal_;
  uint64_t last_seq_;
  std::string last_hash_;
  uint64_t saved_seq_ = 0;
  std::string saved_hash_;
};

}  // namespace gw
