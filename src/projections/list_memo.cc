#include "projections/list_memo.h"

#include <algorithm>
#include <sstream>

#include "core/metric_text.h"
#include "store/store.h"

namespace gw {

namespace {

constexpr size_t kIndexSeqBytes = 8;

// The index of an entry key: the key without its sequence number.
std::string_view index_prefix_of(std::string_view key) {
  return key.substr(0, key.size() - kIndexSeqBytes);
}

}  // namespace

ListMemo::ListMemo(size_t max_checkpoints)
    : max_shard_checkpoints_(std::max<size_t>(max_checkpoints / kShards, kPageEnds + 1)),
      shards_(new Shard[kShards]) {}

ListMemo::Shard& ListMemo::shard_of(std::string_view prefix) {
  return shards_[std::hash<std::string_view>{}(prefix) % kShards];
}

bool ListMemo::is_index_entry(std::string_view key) {
  return key.size() > 2 + kIndexSeqBytes && (key[0] == 'l' || key[0] == 'f') && key[1] == '\0';
}

std::optional<ListMemo::Checkpoint> ListMemo::begin(std::string_view prefix, uint64_t offset,
                                                    const std::function<void()>& take_snapshot,
                                                    Visit* visit) {
  Shard& shard = shard_of(prefix);
  std::lock_guard<std::mutex> lock(shard.mu);
  take_snapshot();
  visit->shard = static_cast<size_t>(&shard - shards_.get());
  visit->settled = shard.writing == 0 ? shard.logged : shard.settled;
  auto found = shard.by_prefix.find(prefix);
  if (found == shard.by_prefix.end()) return std::nullopt;
  shard.lru.splice(shard.lru.begin(), shard.lru, found->second);
  const Index& index = *found->second;
  std::optional<Checkpoint> best;
  auto after = std::upper_bound(index.strided.begin(), index.strided.end(), offset,
                                [](uint64_t o, const Checkpoint& c) { return o < c.offset; });
  if (after != index.strided.begin()) best = *std::prev(after);
  for (const Checkpoint& c : index.page_ends) {
    if (c.offset <= offset && (!best || c.offset > best->offset)) best = c;
  }
  return best;
}

void ListMemo::remember(std::string_view prefix, const Visit& visit,
                        const std::vector<Checkpoint>& found, uint64_t stepped,
                        bool from_checkpoint) {
  walks_.fetch_add(1, std::memory_order_relaxed);
  if (from_checkpoint) from_checkpoint_.fetch_add(1, std::memory_order_relaxed);
  stepped_.fetch_add(stepped, std::memory_order_relaxed);
  if (found.empty()) return;
  Shard& shard = shards_[visit.shard];
  std::lock_guard<std::mutex> lock(shard.mu);
  // The first entry of this index written since the snapshot, or under way then: the checkpoints
  // at or after it may not hold now (or in the snapshot).
  if (shard.logged - visit.settled > kLoggedWrites) return;  // the log no longer reaches back
  const size_t index_hash = std::hash<std::string_view>{}(prefix);
  uint64_t first_written = UINT64_MAX;
  for (uint64_t n = visit.settled; n < shard.logged; ++n) {
    const Written& w = shard.log[n % kLoggedWrites];
    if (w.index_hash == index_hash) first_written = std::min(first_written, w.seq);
  }
  if (found.front().seq >= first_written) return;  // found is in walk order
  auto at = shard.by_prefix.find(prefix);
  if (at == shard.by_prefix.end()) {
    shard.lru.push_front(Index{std::string(prefix), {}, {}});
    at = shard.by_prefix.emplace(shard.lru.front().prefix, shard.lru.begin()).first;
  } else {
    shard.lru.splice(shard.lru.begin(), shard.lru, at->second);
  }
  Index& index = *at->second;
  const size_t before = index.size();
  for (const Checkpoint& c : found) {
    if (c.seq >= first_written) break;
    if (c.offset % kStride == 0) {
      auto place =
          std::lower_bound(index.strided.begin(), index.strided.end(), c.offset,
                           [](const Checkpoint& have, uint64_t o) { return have.offset < o; });
      // One already there says the same: both are true in the current state.
      if (place != index.strided.end() && place->offset == c.offset) continue;
      if (index.strided.size() + kPageEnds >= max_shard_checkpoints_) continue;
      index.strided.insert(place, c);
    } else {
      auto same = std::find_if(index.page_ends.begin(), index.page_ends.end(),
                               [&c](const Checkpoint& have) { return have.offset == c.offset; });
      if (same != index.page_ends.end()) index.page_ends.erase(same);
      if (index.page_ends.size() == kPageEnds) index.page_ends.erase(index.page_ends.begin());
      index.page_ends.push_back(c);
    }
  }
  shard.checkpoints = shard.checkpoints - before + index.size();
  if (index.size() == 0) {  // nothing found could be kept (the shard's bound)
    drop(shard, at->second);
    return;
  }
  // The least recently used indexes go first, never the one just used.
  while (shard.checkpoints > max_shard_checkpoints_ && std::prev(shard.lru.end()) != at->second) {
    drop(shard, std::prev(shard.lru.end()));
  }
}

void ListMemo::drop(Shard& shard, std::list<Index>::iterator it) {
  shard.checkpoints -= it->size();
  shard.by_prefix.erase(it->prefix);
  shard.lru.erase(it);
}

void ListMemo::before_write(const std::vector<std::string>& keys) {
  for (const auto& key : keys) {
    if (!is_index_entry(key)) continue;
    const std::string_view prefix = index_prefix_of(key);
    const uint64_t seq = decode_u64(key.substr(prefix.size()));
    const size_t index_hash = std::hash<std::string_view>{}(prefix);
    Shard& shard = shards_[index_hash % kShards];
    std::lock_guard<std::mutex> lock(shard.mu);
    if (shard.writing++ == 0) shard.settled = shard.logged;
    shard.log[shard.logged++ % kLoggedWrites] = Written{index_hash, seq};
    // The index's checkpoints at `seq` or after it.
    auto at = shard.by_prefix.find(prefix);
    if (at == shard.by_prefix.end()) continue;
    Index& index = *at->second;
    const size_t before = index.size();
    auto keep = [seq](const Checkpoint& c) { return c.seq < seq; };
    // Strided checkpoints are in offset order, and so in seq order: the ones to drop are a tail.
    index.strided.erase(std::partition_point(index.strided.begin(), index.strided.end(), keep),
                        index.strided.end());
    if (index.strided.capacity() > 4 * index.strided.size() + 16) index.strided.shrink_to_fit();
    std::erase_if(index.page_ends, [&keep](const Checkpoint& c) { return !keep(c); });
    shard.checkpoints = shard.checkpoints - before + index.size();
    if (index.size() == 0) drop(shard, at->second);
  }
}

void ListMemo::after_write(const std::vector<std::string>& keys) {
  // Nothing to drop again: what a walk found while the write was under way (or after its
  // snapshot) is kept only before the entries the write logged (see remember()).
  for (const auto& key : keys) {
    if (!is_index_entry(key)) continue;
    Shard& shard = shard_of(index_prefix_of(key));
    std::lock_guard<std::mutex> lock(shard.mu);
    --shard.writing;
  }
}

ListMemo::Stats ListMemo::stats() const {
  Stats out;
  out.walks = walks_.load(std::memory_order_relaxed);
  out.from_checkpoint = from_checkpoint_.load(std::memory_order_relaxed);
  out.stepped = stepped_.load(std::memory_order_relaxed);
  out.misplaced = misplaced_.load(std::memory_order_relaxed);
  for (size_t i = 0; i < kShards; ++i) {
    const Shard& shard = shards_[i];
    std::lock_guard<std::mutex> lock(shard.mu);
    out.indexes += shard.by_prefix.size();
    out.checkpoints += shard.checkpoints;
  }
  return out;
}

std::string ListMemo::render_metrics() const {
  const Stats s = stats();
  std::ostringstream out;
  write_metric(out, "gatewayd_list_deep_pages_total", "counter",
               "List requests of one index (no filter, or one) at an offset of at least " +
                   std::to_string(kStride) + " entries, before the index's end.",
               s.walks);
  write_metric(out, "gatewayd_list_deep_pages_from_checkpoint_total", "counter",
               "Of them, those that started from a remembered place in the index.",
               s.from_checkpoint);
  write_metric(out, "gatewayd_list_deep_pages_entries_stepped_total", "counter",
               "Index entries they stepped over or read.", s.stepped);
  write_metric(out, "gatewayd_list_deep_pages_misplaced_total", "counter",
               "Of them, those whose remembered place was not in the index (a fault: the walk "
               "started from the index's start).",
               s.misplaced);
  write_metric(out, "gatewayd_list_memo_checkpoints", "gauge", "Places in list indexes remembered.",
               s.checkpoints);
  return out.str();
}

}  // namespace gw
