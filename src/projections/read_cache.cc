#include "projections/read_cache.h"

#include <functional>
#include <iterator>
#include <sstream>

#include "core/metric_text.h"
#include "projections/keys.h"

namespace gw {

namespace {

// What an entry costs beyond its key and value: the list and hash map nodes and the two strings'
// headers (a rough figure).
constexpr size_t kReadEntryOverhead = 160;

}  // namespace

ReadCache::ReadCache(size_t max_bytes)
    : max_shard_bytes_(max_bytes / kShards), shards_(new Shard[kShards]) {}

ReadCache::Shard& ReadCache::shard_of(std::string_view key) {
  return shards_[std::hash<std::string_view>{}(key) % kShards];
}

void ReadCache::drop(Shard& shard, std::list<Entry>::iterator it) {
  shard.bytes -= it->bytes;
  shard.index.erase(it->key);
  shard.lru.erase(it);
}

void ReadCache::erase(Shard& shard, std::string_view key) {
  auto it = shard.index.find(key);
  if (it != shard.index.end()) drop(shard, it->second);
}

bool ReadCache::find(std::string_view key, std::string_view team, std::string* value,
                     Ticket* ticket) {
  Shard& shard = shard_of(key);
  std::lock_guard<std::mutex> lock(shard.mu);
  auto it = shard.index.find(key);
  if (it == shard.index.end() || it->second->team != team) {
    ++shard.misses;
    *ticket = Ticket{shard.generation};
    return false;
  }
  ++shard.hits;
  shard.lru.splice(shard.lru.begin(), shard.lru, it->second);
  value->assign(it->second->value);
  return true;
}

void ReadCache::fill(std::string_view key, std::string_view team, const Ticket& ticket,
                     std::string_view value) {
  const size_t bytes = key.size() + team.size() + value.size() + kReadEntryOverhead;
  if (bytes > max_shard_bytes_) return;
  Shard& shard = shard_of(key);
  std::lock_guard<std::mutex> lock(shard.mu);
  // Every write of the shard's keys raises the generation when it begins and when it ends: with
  // none under way now and the generation unchanged, none began since the ticket, and none was
  // under way then (its end would have moved the generation).
  if (shard.writing != 0 || shard.generation != ticket.generation) return;
  erase(shard, key);  // another reader's fill of the same value
  while (shard.bytes + bytes > max_shard_bytes_) drop(shard, std::prev(shard.lru.end()));
  shard.lru.push_front(Entry{std::string(key), std::string(team), std::string(value), bytes});
  shard.index.emplace(shard.lru.front().key, shard.lru.begin());
  shard.bytes += bytes;
}

bool ReadCache::watches(Cf which, std::string_view key) {
  return which == Cf::kProjections && keys::is_record(key);
}

WatchedKeys ReadCache::watched_keys() const { return &ReadCache::watches; }

void ReadCache::before_write(const std::vector<std::string>& keys) {
  for (const auto& key : keys) {
    if (!keys::is_record(key)) continue;  // another watcher's (projections/watchers.h)
    Shard& shard = shard_of(key);
    std::lock_guard<std::mutex> lock(shard.mu);
    ++shard.generation;
    ++shard.writing;
    erase(shard, key);
  }
}

void ReadCache::after_write(const std::vector<std::string>& keys) {
  for (const auto& key : keys) {
    if (!keys::is_record(key)) continue;
    Shard& shard = shard_of(key);
    std::lock_guard<std::mutex> lock(shard.mu);
    // Readers that saw the old value while the write was under way kept nothing (their ticket
    // was not valid, or the generation moved), and an entry made before the write was dropped
    // then; this drop only repeats that for safety.
    ++shard.generation;
    --shard.writing;
    erase(shard, key);
  }
}

ReadCache::Stats ReadCache::stats() const {
  Stats out;
  for (size_t i = 0; i < kShards; ++i) {
    const Shard& shard = shards_[i];
    std::lock_guard<std::mutex> lock(shard.mu);
    out.hits += shard.hits;
    out.misses += shard.misses;
    out.entries += shard.index.size();
    out.bytes += shard.bytes;
  }
  return out;
}

std::string ReadCache::render_metrics() const {
  const Stats s = stats();
  std::ostringstream out;
  write_metric(out, "gatewayd_read_cache_hits_total", "counter",
               "Record reads answered from the read cache.", s.hits);
  write_metric(out, "gatewayd_read_cache_misses_total", "counter",
               "Record reads that went to the store.", s.misses);
  write_metric(out, "gatewayd_read_cache_entries", "gauge", "Records held by the read cache.",
               s.entries);
  write_metric(out, "gatewayd_read_cache_bytes", "gauge",
               "Bytes held by the read cache (estimated).", s.bytes);
  return out.str();
}

}  // namespace gw
