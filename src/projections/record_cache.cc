#include "projections/record_cache.h"

#include <iterator>
#include <utility>

namespace gw {

namespace {

// What an entry costs beyond its JSON's length: the list and map nodes, the id and the parsed
// record's own members (a rough figure; the JSON's length stands for the strings' contents).
constexpr size_t kRecordEntryOverhead = 256;

}  // namespace

const Stored* RecordCache::find(const std::string& id) {
  auto it = index_.find(id);
  if (it == index_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return &it->second->stored;
}

void RecordCache::put(const std::string& id, Stored stored, size_t json_bytes) {
  erase(id);
  const size_t bytes = json_bytes + id.size() + kRecordEntryOverhead;
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
