// Where the entries of a list's index stand, remembered from earlier list requests, so that a deep
// page does not step over every entry before it again. Pages are found by offset: page N of a
// list is the index's entries from (N - 1) * per_page on, and an index has no count of the
// entries before a key. Without a memo, page 5,000 of 100k records (per_page 20) stepped over
// 99,980 index entries (17 to 21 ms; page 1 0.4 ms).
//
// A checkpoint says: the index entry ending in `seq` has `offset` entries before it. A walk to a
// deep page keeps one every kStride entries it steps over and one at the page's last entry; a
// later request starts from the nearest checkpoint at or before its offset. So the first walk to
// a deep page costs what it did, the next page costs about a page, and any page up to the deepest
// walked costs at most kStride steps more than one near the start.
//
// Coherence comes from the writer (store/writer.h), as for the read cache: the memo is told of
// every index entry (`l` and `f` keys of projections/keys.h) a batch writes, right before the
// write and right after it. A write of the entry `seq` of an index can move every entry after it
// and no entry before it, so the index's checkpoints at `seq` or after are dropped before the
// write (after it only the count of writes under way is lowered), and the ones
// before it stay true: an index only ever appended to (creates) keeps them all. A reader takes its
// snapshot under its index's shard lock, where no checkpoint can be added or dropped, so every
// checkpoint it finds is true in its snapshot (a write under way is in it or not; either way the
// checkpoints left are true before and after it). Of what its walk found, it adds the checkpoints
// before every entry of its index written since it took the snapshot, or under way then: each
// shard logs the last kLoggedWrites entries written to it, and a walk that more writes of the
// shard overlapped keeps nothing. So a walk keeps its checkpoints while creates go on.
//
// Thread-safe: the indexes are spread over shards, each with a mutex of its own; a list request
// of an offset under kStride never takes one. Memory: at most `max_checkpoints` checkpoints of 16
// bytes in all (4 MB at the default, with their vectors' spare room up to twice that), least
// recently used indexes dropped first; and about 200 bytes for each index held, which is one
// read at an offset of kStride or more, so one of at least kStride entries: an index per kStride
// entries of the store at most.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace gw {

class ListMemo {
 public:
  // A checkpoint every kStride entries walked; requests of smaller offsets do not use the memo.
  static constexpr uint64_t kStride = 1024;
  // The last pages' ends kept per index (clients paging through a list one page after another).
  static constexpr size_t kPageEnds = 8;
  static constexpr size_t kDefaultMaxCheckpoints = size_t{1} << 18;

  explicit ListMemo(size_t max_checkpoints = kDefaultMaxCheckpoints);
  ListMemo(const ListMemo&) = delete;
  ListMemo& operator=(const ListMemo&) = delete;

  struct Checkpoint {
    uint64_t offset = 0;  // entries of the index before this one
    uint64_t seq = 0;     // the entry's key ends in it (8 bytes, big-endian)
  };
  // Taken by begin(), for remember().
  struct Visit {
    size_t shard = 0;
    // Every write of the shard logged after this one was under way at the snapshot or began
    // after it.
    uint64_t settled = 0;
  };
  // The entries written to a shard that remember() can tell apart, at most.
  static constexpr size_t kLoggedWrites = 256;

  // Under the lock of the shard of the index `prefix` (a list or filter prefix of keys.h): calls
  // take_snapshot(), and returns the index's checkpoint of the greatest offset at or before
  // `offset`, if it has one.
  std::optional<Checkpoint> begin(std::string_view prefix, uint64_t offset,
                                  const std::function<void()>& take_snapshot, Visit* visit);
  // Keeps those of `found`, checkpoints of the index `prefix` read in the snapshot begin() took,
  // that come before every entry of the index written since or under way then (none if more than
  // kLoggedWrites entries of the shard were). `stepped`: index entries the walk stepped over, for
  // the metrics, and whether it started from begin()'s checkpoint. Called once per walk: a
  // request past the index's end walks nothing and is not counted.
  void remember(std::string_view prefix, const Visit& visit, const std::vector<Checkpoint>& found,
                uint64_t stepped, bool from_checkpoint);

  // A walk found no entry at the checkpoint begin() gave, and started from the index's start
  // (which the coherence above rules out; counted so that a fault would show).
  void count_misplaced() { misplaced_.fetch_add(1, std::memory_order_relaxed); }

  // Whether `key` is an index entry (whose writes the memo must be told of).
  static bool is_index_entry(std::string_view key);
  // The keys a batch writes (the memo keeps to index entries), around its write (see
  // WriteWatcher): before_write logs the entries and drops the checkpoints they can move.
  void before_write(const std::vector<std::string>& keys);
  void after_write(const std::vector<std::string>& keys);

  struct Stats {
    uint64_t walks = 0;            // deep-page requests that walked the index
    uint64_t from_checkpoint = 0;  // of them, started from a checkpoint found in it
    uint64_t stepped = 0;          // index entries walked by all of them
    uint64_t misplaced = 0;        // see count_misplaced()
    uint64_t indexes = 0, checkpoints = 0;
  };
  Stats stats() const;
  // Prometheus text for /metrics.
  std::string render_metrics() const;

 private:
  static constexpr size_t kShards = 64;
  struct Index {
    std::string prefix;
    std::vector<Checkpoint> strided;    // at multiples of kStride, by offset (and so by seq)
    std::vector<Checkpoint> page_ends;  // the last pages' ends, oldest first
    size_t size() const { return strided.size() + page_ends.size(); }
  };
  struct Written {
    size_t index_hash = 0;  // of the index's prefix (two indexes of one hash: more is dropped)
    uint64_t seq = 0;
  };
  struct alignas(64) Shard {
    mutable std::mutex mu;  // guards everything below
    std::list<Index> lru;   // most recently used first
    std::unordered_map<std::string_view, std::list<Index>::iterator> by_prefix;  // Index::prefix
    size_t checkpoints = 0;
    uint64_t logged = 0;   // entries ever written to the shard's indexes; the last ones in `log`
    uint64_t settled = 0;  // `logged` when the writes under way began (or now, with none)
    uint32_t writing = 0;  // writes of its indexes under way
    Written log[kLoggedWrites];  // entry n at n % kLoggedWrites
  };
  Shard& shard_of(std::string_view prefix);
  static void drop(Shard& shard, std::list<Index>::iterator it);

  size_t max_shard_checkpoints_;
  std::unique_ptr<Shard[]> shards_;
  std::atomic<uint64_t> walks_{0}, from_checkpoint_{0}, stepped_{0}, misplaced_{0};
};

}  // namespace gw
