#include "projections/record_cache.h"

#include <iterator>
#include <utility>

namespace gw {

namespace {

// What the list's and the index's nodes add to an Entry: the list's two links, the index's node
// (its key, the iterator, the next link and the cached hash) and its bucket, with the
// allocator's rounding.
constexpr size_t kNodeBytes = 96;

}  // namespace

const Stored* RecordCache::find(const std::string& id) {
  auto it = index_.find(id);
  if (it == index_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return &it->second->stored;
}

size_t RecordCache::weight(std::string_view id, size_t json_bytes) {
  // The Entry itself (a Stored is as large as the largest kind, a profile: a webhook's entry is
  // mostly its unused room), its nodes, the id's copy, and the JSON's length for the contents of
  // the record's strings (their member names make it an upper bound), and a quarter more of it:
  // jemalloc's size classes are up to a quarter apart (a 1,025-byte string takes 1,280). It was
  // the JSON's length and the id's plus 256: a cache of webhooks took 1.34 to 1.38 times its
  // bytes (helper 163).
  return sizeof(Entry) + kNodeBytes + id.size() + json_bytes + json_bytes / 4;
}

void RecordCache::put(const std::string& id, Stored stored, size_t json_bytes) {
  erase(id);
  const size_t bytes = weight(id, json_bytes);
  if (bytes > max_bytes_) return;
  while (bytes_ + bytes > max_bytes_) drop(std::prev(lru_.end()));
  lru_.push_front(Entry{id, std::move(stored), bytes});
  index_.emplace(lru_.front().id, lru_.begin());
  bytes_ += bytes;
}

void RecordCache::erase(const std::string& id) {
  auto it = index_.find(id);
  if (it != index_.end()) drop(it->second);
}

void RecordCache::drop(std::list<Entry>::iterator it) {
  bytes_ -= it->bytes;
  index_.erase(it->id);
  lru_.erase(it);
}

}  // namespace gw
