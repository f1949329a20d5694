// The stored records GET read most recently, as their stored bytes, so that reading a record
// again costs a hash lookup instead of a RocksDB point read (about 8% of a GET's CPU, with the
// store's memtables and table files searched for every read). Least recently used records go
// first once the cache holds `max_bytes` of them. Thread-safe: the entries are spread over
// shards, each with a mutex of its own; no lock is held while the store is read.
//
// Coherence comes from the writer (store/writer.h): the cache is its WriteWatcher, told of every
// record key a batch writes, right before the write and right after it. A record's entry is
// dropped at both points, and while the write of a key of a shard is under way the shard takes
// no new entries. A reader that missed takes a ticket before it reads the store and keeps what it
// read only if no write of its shard began since. So an entry never holds a value older than
// what the store shows a reader, and once a write has ended (before its client is answered),
// every read of its records shows it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "store/writer.h"

namespace gw {

class ReadCache final : public WriteWatcher {
 public:
  // Taken on a miss, before the store is read; see fill().
  struct Ticket {
    uint64_t generation = 0;  // the shard's, then
  };

  // `max_bytes` 0: nothing is ever kept (every find misses).
  explicit ReadCache(size_t max_bytes);
  ReadCache(const ReadCache&) = delete;
  ReadCache& operator=(const ReadCache&) = delete;

  // The value kept under the projections key `key` for the team `team` copied to *value (true),
  // marked the most recently used; or false and *ticket set for a fill() after reading the store.
  // An entry is found only by the team that owns the record: for any other team it is a miss
  // like that of a key never stored, counted alike and leaving the entry's place unchanged, so
  // that /metrics (which needs no token) cannot tell another team's ids from made-up ones.
  bool find(std::string_view key, std::string_view team, std::string* value, Ticket* ticket);
  // Keeps `value`, the record of `team` read from the store after find() gave `ticket`, unless a
  // write of the key's shard began since (or was under way then). A value heavier than a shard's
  // share of the cache is not kept. Only for the team that owns the record (see find()).
  void fill(std::string_view key, std::string_view team, const Ticket& ticket,
            std::string_view value);

  // The keys it watches: the projections' record keys.
  static bool watches(Cf which, std::string_view key);
  // WriteWatcher: watches().
  WatchedKeys watched_keys() const override;
  void before_write(const std::vector<std::string>& keys) override;
  void after_write(const std::vector<std::string>& keys) override;

  struct Stats {
    uint64_t hits = 0, misses = 0, entries = 0, bytes = 0;
  };
  Stats stats() const;
  // Prometheus text for /metrics.
  std::string render_metrics() const;

 private:
  static constexpr size_t kShards = 64;
  struct Entry {
    std::string key;
    std::string team;  // the record's owner
    std::string value;
    size_t bytes;
  };
  struct alignas(64) Shard {  // a cache line of its own: shards are locked from many threads
    mutable std::mutex mu;    // guards everything below
    std::list<Entry> lru;  // most recently used first
    std::unordered_map<std::string_view, std::list<Entry>::iterator> index;  // keys: Entry::key
    size_t bytes = 0;
    uint64_t generation = 0;  // raised at the start and at the end of every write of its keys
    uint32_t writing = 0;     // writes of its keys under way
    uint64_t hits = 0, misses = 0;
  };
  Shard& shard_of(std::string_view key);
  static void drop(Shard& shard, std::list<Entry>::iterator it);
  static void erase(Shard& shard, std::string_view key);

  size_t max_shard_bytes_;
  std::unique_ptr<Shard[]> shards_;
};

}  // namespace gw
