#include "projections/watchers.h"

#include "projections/list_memo.h"
#include "projections/read_cache.h"

namespace gw {

namespace {

bool index_entries(Cf which, std::string_view key) {
  return which == Cf::kProjections && ListMemo::is_index_entry(key);
}
bool records_and_index_entries(Cf which, std::string_view key) {
  return ReadCache::watches(which, key) || index_entries(which, key);
}

}  // namespace

WatchedKeys ProjectionWatchers::watched_keys() const {
  if (cache_ != nullptr && memo_ != nullptr) return &records_and_index_entries;
  if (cache_ != nullptr) return &ReadCache::watches;
  if (memo_ != nullptr) return &index_entries;
  return nullptr;  // the writer lists no key
}

// Each is given every watched key and keeps to its own (the read cache to record keys, the memo
// to index entries).
void ProjectionWatchers::before_write(const std::vector<std::string>& keys) {
  if (cache_ != nullptr) cache_->before_write(keys);
  if (memo_ != nullptr) memo_->before_write(keys);
}

void ProjectionWatchers::after_write(const std::vector<std::string>& keys) {
  if (cache_ != nullptr) cache_->after_write(keys);
  if (memo_ != nullptr) memo_->after_write(keys);
}

}  // namespace gw
