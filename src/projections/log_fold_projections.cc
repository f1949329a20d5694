// LogFold::projections: the read model a fold implies, generated in key order. One big sort of
// every key would dominate a rebuild, so each key family comes out of a source that is already in
// order or cheap to order: index entries ending in a create_seq (lists and filters) grouped by
// their prefix in creation order; records, histories and tenant feeds from orders of ids, team
// names and sequence numbers; only the few other entries are sorted as strings.
#include <algorithm>
#include <cassert>
#include <future>
#include <memory>
#include <numeric>

#include "projections/keys.h"
#include "projections/log_fold.h"
#include "store/store.h"

namespace gw {

namespace {

using Stream = LogFold::Stream;
using Pairs = std::vector<std::pair<std::string, std::string>>;

// The parts of projections() meet here: lists and filters before, records with their histories
// and tenant feeds from here on.
constexpr std::string_view kSecondPart = "r";

// Merges sorted streams whose keys never collide (each one covers its own key families).
class Merge {
 public:
  explicit Merge(std::vector<Stream> streams) {
    for (auto& s : streams) {
      Head h{std::move(s), {}, {}, false};
      h.valid = h.stream(&h.key, &h.value);
      heads_.push_back(std::move(h));
    }
  }
  bool next(std::string* key, std::string* value) {
    Head* min = nullptr;
    for (auto& h : heads_) {
      if (h.valid && (min == nullptr || h.key < min->key)) min = &h;
    }
    if (min == nullptr) return false;
    key->swap(min->key);
    value->swap(min->value);
    min->valid = min->stream(&min->key, &min->value);
    return true;
  }

 private:
  struct Head {
    Stream stream;
    std::string key;
    std::string value;
    bool valid;
  };
  std::vector<Head> heads_;
};

Stream merged(std::vector<Stream> streams) {
  auto merge = std::make_shared<Merge>(std::move(streams));
  return [merge](std::string* key, std::string* value) { return merge->next(key, value); };
}

// The index entries of some aggregates.
struct Entries {
  // List and filter entries (see counted() in apply.h): key prefix -> the aggregates with an entry
  // under it, in creation order, which is the order of their keys. Per keys.h such an entry is
  // <prefix><create_seq> -> id, so the aggregate is all it takes to write it.
  std::map<std::string, std::vector<uint32_t>, std::less<>> numbered;
  Pairs other;  // every other entry, in creation order
};

Entries collect(const std::deque<LogFold::Aggregate>& aggregates, size_t from, size_t to) {
  Entries out;
  // The k-th counted entry of an aggregate usually has the previous aggregate's k-th prefix.
  std::vector<std::pair<std::string_view, std::vector<uint32_t>*>> recent;
  for (size_t i = from; i < to; ++i) {
    const auto& a = aggregates[i];
    size_t k = 0;
    for (auto& [key, value] : entries_of(a.record, a.create_seq)) {
      if (!counted(key)) {
        out.other.emplace_back(key, std::move(value));
        continue;
      }
      assert(value == meta_of(a.record).id);
      const std::string_view prefix(key.data(), key.size() - 8);
      if (k == recent.size()) recent.emplace_back();
      if (recent[k].second == nullptr || recent[k].first != prefix) {
        auto list = out.numbered.find(prefix);
        if (list == out.numbered.end()) {
          list = out.numbered.emplace(std::string(prefix), std::vector<uint32_t>()).first;
        }
        recent[k] = {list->first, &list->second};
      }
      recent[k++].second->push_back(static_cast<uint32_t>(i));
    }
  }
  return out;
}

// Streams pairs[from, to), which are sorted; of equal keys only the last one (the later write)
// is kept, as applying the events one by one would leave it.
Stream sorted_pairs(std::shared_ptr<Pairs> pairs, size_t from, size_t to) {
  return [pairs, i = from, to](std::string* key, std::string* value) mutable {
    while (i + 1 < to && (*pairs)[i].first == (*pairs)[i + 1].first) ++i;
    if (i >= to) return false;
    *key = std::move((*pairs)[i].first);
    *value = std::move((*pairs)[i].second);
    ++i;
    return true;
  };
}

// The indexes of `names` in ascending order of the names.
std::vector<uint32_t> order_by(const std::vector<std::string_view>& names) {
  std::vector<uint32_t> order(names.size());
  std::iota(order.begin(), order.end(), 0);
  auto less = [&names](uint32_t a, uint32_t b) { return names[a] < names[b]; };
  // Ids are made in time order, so the aggregates usually are in order already.
  if (!std::is_sorted(order.begin(), order.end(), less))
    std::sort(order.begin(), order.end(), less);
  return order;
}

// The rank of each index in `order`.
std::vector<uint32_t> ranks(const std::vector<uint32_t>& order) {
  std::vector<uint32_t> rank(order.size());
  for (uint32_t r = 0; r < order.size(); ++r) rank[order[r]] = r;
  return rank;
}

}  // namespace

std::vector<Stream> LogFold::projections() const {
  // Index entries, gathered on two threads; the second half's come after the first half's.
  const size_t half = aggregates_.size() / 2;
  auto later =
      std::async(std::launch::async, collect, std::cref(aggregates_), half, aggregates_.size());
  Entries entries = collect(aggregates_, 0, half);
  Entries second = later.get();
  for (auto& [prefix, list] : second.numbered) {
    auto& into = entries.numbered[prefix];
    into.insert(into.end(), std::make_move_iterator(list.begin()),
                std::make_move_iterator(list.end()));
  }
  entries.other.insert(entries.other.end(), std::make_move_iterator(second.other.begin()),
                       std::make_move_iterator(second.other.end()));

  // The other entries, the counters of the numbered ones, the open-request queue and the
  // checkpoint: few enough to sort as strings.
  auto other = std::make_shared<Pairs>(std::move(entries.other));
  for (const auto& [prefix, list] : entries.numbered) {
    other->emplace_back(keys::count_of_prefix(prefix), encode_u64(list.size()));
  }
  for (const auto& [seq, domain] : open_requests_) {
    other->emplace_back(keys::request_prefix() + encode_u64(seq), domain);
  }
  for (const auto& [domain, seq] : latest_request_) {
    other->emplace_back(keys::open_request(domain), encode_u64(seq));
  }
  if (last_seq_ != 0) other->emplace_back(keys::checkpoint(), encode_u64(last_seq_));
  std::stable_sort(other->begin(), other->end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  const size_t split =
      std::lower_bound(other->begin(), other->end(), kSecondPart,
                       [](const auto& pair, std::string_view key) { return pair.first < key; }) -
      other->begin();

  auto ids = std::make_shared<std::vector<std::string_view>>();
  ids->reserve(aggregates_.size());
  for (const Aggregate& a : aggregates_) ids->push_back(meta_of(a.record).id);

  auto numbered = std::make_shared<decltype(entries.numbered)>(std::move(entries.numbered));
  auto lists = [this, ids, numbered, list = numbered->begin(), i = size_t{0}](
                   std::string* key, std::string* value) mutable {
    for (; list != numbered->end(); ++list, i = 0) {
      if (i == list->second.size()) continue;
      const uint32_t aggregate = list->second[i++];
      *key = list->first + encode_u64(aggregates_[aggregate].create_seq);
      *value = (*ids)[aggregate];
      return true;
    }
    return false;
  };

  // Records and their histories in the order of their ids; tenant feeds by team, then seq.
  auto by_id = std::make_shared<std::vector<uint32_t>>(order_by(*ids));
  const std::vector<uint32_t> id_rank = ranks(*by_id);
  auto records = [this, by_id, i = size_t{0}](std::string* key, std::string* value) mutable {
    if (i >= by_id->size()) return false;
    const Aggregate& a = aggregates_[(*by_id)[i++]];
    const Meta& m = meta_of(a.record);
    *key = keys::record(m.id);
    *value = keys::encode_record(
        keys::RecordHeader{a.version, a.create_seq, m.deleted_at != 0, m.team_id},
        to_json(a.record));
    return true;
  };
  auto touches = std::make_shared<std::vector<Touch>>(touches_);
  auto by_aggregate = [&id_rank](const Touch& a, const Touch& b) {
    auto ra = id_rank[a.aggregate], rb = id_rank[b.aggregate];
    return ra != rb ? ra < rb : a.version != b.version ? a.version < b.version : a.seq < b.seq;
  };
  if (!std::is_sorted(touches->begin(), touches->end(), by_aggregate)) {
    std::sort(touches->begin(), touches->end(), by_aggregate);
  }
  auto history = [ids, touches, i = size_t{0}](std::string* key, std::string* value) mutable {
    // Of two events with one aggregate version, the later one's entry stands.
    while (i + 1 < touches->size() && (*touches)[i].aggregate == (*touches)[i + 1].aggregate &&
           (*touches)[i].version == (*touches)[i + 1].version) {
      ++i;
    }
    if (i >= touches->size()) return false;
    const Touch& t = (*touches)[i++];
    *key = keys::history_prefix((*ids)[t.aggregate]) + encode_u64(t.version);
    *value = encode_u64(t.seq);
    return true;
  };
  const std::vector<uint32_t> team_rank =
      ranks(order_by(std::vector<std::string_view>(teams_.begin(), teams_.end())));
  auto feed = std::make_shared<std::vector<TeamEvent>>(team_events_);
  auto by_team = [&team_rank](const TeamEvent& a, const TeamEvent& b) {
    return team_rank[a.team] < team_rank[b.team];
  };
  if (!std::is_sorted(feed->begin(), feed->end(), by_team)) {
    std::stable_sort(feed->begin(), feed->end(), by_team);
  }
  auto tenant_feed = [this, feed, i = size_t{0}](std::string* key, std::string* value) mutable {
    if (i >= feed->size()) return false;
    const TeamEvent& t = (*feed)[i++];
    *key = keys::tenant_events_prefix(teams_[t.team]) + encode_u64(t.seq);
    value->clear();
    return true;
  };

  return {merged({sorted_pairs(other, 0, split), lists}),
          merged({sorted_pairs(other, split, other->size()), records, history, tenant_feed})};
}

LogFold::Stream concatenated(std::vector<LogFold::Stream> parts) {
  return [parts = std::move(parts), i = size_t{0}](std::string* key, std::string* value) mutable {
    for (; i < parts.size(); ++i) {
      if (parts[i](key, value)) return true;
    }
    return false;
  };
}

}  // namespace gw
