// The read cache of GET (projections/read_cache.h): alone, and as the watcher of a real Writer on
// a real RocksDB, read through the ReadModel while the Service updates the records it holds.
#include <doctest/doctest.h>

#include <atomic>
#include <future>
#include <map>
#include <thread>

#include "projections/keys.h"
#include "projections/read_cache.h"
#include "projections/read_model.h"
#include "service/service.h"
#include "store/store_test_util.h"

namespace gw {
namespace {

const std::string kKey = keys::record("whk_01");
const std::string kTeam = "team_a";

// Fills `key` with `value` the way ReadModel does after a miss; true if it was a miss.
bool miss_and_fill(ReadCache& cache, const std::string& key, const std::string& value) {
  std::string got;
  ReadCache::Ticket ticket;
  if (cache.find(key, kTeam, &got, &ticket)) return false;
  cache.fill(key, kTeam, ticket, value);
  return true;
}

std::optional<std::string> cached(ReadCache& cache, const std::string& key) {
  std::string got;
  ReadCache::Ticket ticket;
  if (!cache.find(key, kTeam, &got, &ticket)) return std::nullopt;
  return got;
}

TEST_CASE("the read cache answers a filled key until a write of it begins") {
  ReadCache cache(1 << 20);
  CHECK_FALSE(cached(cache, kKey));
  CHECK(miss_and_fill(cache, kKey, "v1"));
  CHECK(cached(cache, kKey) == "v1");
  CHECK(cached(cache, kKey) == "v1");
  auto stats = cache.stats();
  CHECK(stats.hits == 2);
  CHECK(stats.misses == 2);
  CHECK(stats.entries == 1);

  cache.before_write({kKey});
  CHECK_FALSE(cached(cache, kKey));  // dropped as the write begins, before it is visible
  cache.after_write({kKey});
  CHECK_FALSE(cached(cache, kKey));
  CHECK(miss_and_fill(cache, kKey, "v2"));
  CHECK(cached(cache, kKey) == "v2");
  CHECK(cache.stats().entries == 1);
}

// Another team's lookup of a record is a miss, counted as one, and moves nothing (see
// ReadCache::find): the cache's metrics cannot tell another team's ids from made-up ones.
TEST_CASE("the read cache answers a record to its own team only") {
  ReadCache cache(1 << 20);
  CHECK(miss_and_fill(cache, kKey, "v1"));
  const ReadCache::Stats before = cache.stats();
  std::string got;
  ReadCache::Ticket ticket;
  CHECK_FALSE(cache.find(kKey, "team_b", &got, &ticket));
  CHECK_FALSE(cache.find(keys::record("whk_02"), "team_b", &got, &ticket));
  CHECK(got.empty());
  const ReadCache::Stats after = cache.stats();
  CHECK(after.misses == before.misses + 2);
  CHECK(after.hits == before.hits);
  CHECK(after.entries == before.entries);
  CHECK(after.bytes == before.bytes);
  CHECK(cached(cache, kKey) == "v1");
}

TEST_CASE("the read cache keeps no value read before or during a write of its shard") {
  ReadCache cache(1 << 20);
  std::string got;

  SUBCASE("read before the write began, kept after it ended") {
    ReadCache::Ticket ticket;
    REQUIRE_FALSE(cache.find(kKey, kTeam, &got, &ticket));
    cache.before_write({kKey});
    cache.after_write({kKey});
    cache.fill(kKey, kTeam, ticket, "old");  // the reader read the store before the write
    CHECK_FALSE(cached(cache, kKey));
  }
  SUBCASE("read before the write began, kept while it is under way") {
    ReadCache::Ticket ticket;
    REQUIRE_FALSE(cache.find(kKey, kTeam, &got, &ticket));
    cache.before_write({kKey});
    cache.fill(kKey, kTeam, ticket, "old");
    CHECK_FALSE(cached(cache, kKey));
    cache.after_write({kKey});
    CHECK_FALSE(cached(cache, kKey));
  }
  SUBCASE("read while the write was under way, kept after it ended") {
    cache.before_write({kKey});
    ReadCache::Ticket ticket;
    REQUIRE_FALSE(cache.find(kKey, kTeam, &got, &ticket));
    cache.fill(kKey, kTeam, ticket,
               "old or new");  // still under way: either value may have been read
    CHECK_FALSE(cached(cache, kKey));
    cache.after_write({kKey});
    cache.fill(kKey, kTeam, ticket, "old or new");
    CHECK_FALSE(cached(cache, kKey));
  }
  SUBCASE("another key of the shard being written blocks fills too; the next read fills") {
    // Keys of the same shard as kKey: the shard is the key's hash modulo the shard count.
    std::string other;
    for (int i = 0; other.empty(); ++i) {
      std::string k = keys::record("whk_" + std::to_string(i));
      if (k != kKey &&
          std::hash<std::string_view>{}(k) % 64 == std::hash<std::string_view>{}(kKey) % 64)
        other = k;
    }
    ReadCache::Ticket ticket;
    REQUIRE_FALSE(cache.find(kKey, kTeam, &got, &ticket));
    cache.before_write({other});
    cache.fill(kKey, kTeam, ticket, "v1");
    CHECK_FALSE(cached(cache, kKey));
    cache.after_write({other});
    CHECK(miss_and_fill(cache, kKey, "v1"));
    CHECK(cached(cache, kKey) == "v1");
  }
}

TEST_CASE("the read cache holds at most its size, least recently used out first") {
  // 64 shards of 2,000 bytes: an entry of a 300-byte value weighs about 480.
  ReadCache cache(64 * 2000);
  const std::string value(300, 'x');
  std::vector<std::string> keys_filled;
  for (int i = 0; i < 2000; ++i) {
    keys_filled.push_back(keys::record("whk_" + std::to_string(i)));
    miss_and_fill(cache, keys_filled.back(), value);
  }
  auto stats = cache.stats();
  CHECK(stats.bytes <= 64 * 2000);
  CHECK(stats.entries > 64);
  CHECK(stats.entries < 2000);
  CHECK(cached(cache, keys_filled.back()) == value);  // the newest stays
  CHECK_FALSE(cached(cache, keys_filled.front()));    // the oldest went first

  // A value heavier than a shard's share is never kept; a cache of size 0 keeps nothing.
  CHECK(miss_and_fill(cache, kKey, std::string(3000, 'y')));
  CHECK_FALSE(cached(cache, kKey));
  ReadCache none(0);
  CHECK(miss_and_fill(none, kKey, "v"));
  CHECK_FALSE(cached(none, kKey));
}

TEST_CASE("the read cache watches the projections' record keys only") {
  ReadCache cache(1 << 20);
  WatchedKeys watched = cache.watched_keys();
  CHECK(watched(Cf::kProjections, keys::record("whk_01")));
  CHECK_FALSE(watched(Cf::kEvents, keys::record("whk_01")));
  CHECK_FALSE(watched(Cf::kProjections, keys::history_prefix("whk_01")));
  CHECK_FALSE(watched(Cf::kProjections, keys::checkpoint()));
  CHECK_FALSE(watched(Cf::kProjections, "r"));
}

class ReadCacheFixture {
 public:
  ReadCacheFixture() {
    store_ = std::move(Store::open(dir_.path()).value());
    ids_ = make_system_id_generator(clock_);
    writer_ = std::move(
        Writer::start(*store_, *ids_, scanned_by_commands, &cache_, written_only_by_commands)
            .value());
    service_ = std::make_unique<Service>(*writer_, clock_, *ids_, "verify.platform.test",
                                         FieldPolicy().platform);
    reads_ = std::make_unique<ReadModel>(*store_, &cache_);
  }
  ~ReadCacheFixture() { writer_->stop(); }

  Result<Written> call(const std::function<void(Done)>& f) {
    std::promise<Result<Written>> p;
    auto fut = p.get_future();
    f([&p](Result<Written> r) { p.set_value(std::move(r)); });
    return fut.get();
  }

  static Webhook hook(const std::string& status, int n) {
    Webhook h;
    h.meta.team_id = "team_a";
    h.workload_id = "w-" + std::to_string(n);
    h.provider = "github";
    h.status = status;
    h.external_id = "x-" + std::to_string(n);
    return h;
  }

  std::string create(int n) {
    auto r = call([&](Done d) { service_->create(hook("active", n), actor_, std::nullopt, d); });
    REQUIRE(r.ok());
    return r.value().json.substr(15, 30);  // {"webhook_id":"<30 chars>"
  }

  uint64_t update(const std::string& id, int n) {
    auto r = call([&](Done d) {
      service_->update(Kind::kWebhook, id, hook(n % 2 ? "inactive" : "active", n), actor_, {}, d);
    });
    REQUIRE(r.ok());
    return r.value().version;
  }

  std::optional<ReadModel::Found> get(const std::string& id) {
    auto r = reads_->get(Kind::kWebhook, "team_a", id);
    REQUIRE(r.ok());
    return r.value();
  }

  testing::ScratchDir dir_;
  SystemClock clock_;
  ReadCache cache_{1 << 20};
  std::unique_ptr<Store> store_;
  std::unique_ptr<IdGenerator> ids_;
  std::unique_ptr<Writer> writer_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<ReadModel> reads_;
  Actor actor_{"team_a", "test"};
};

TEST_CASE("a GET through the read cache shows an update as soon as it is acknowledged") {
  ReadCacheFixture fx;
  const std::string id = fx.create(1);
  REQUIRE(id.starts_with("whk_"));
  auto first = fx.get(id);
  REQUIRE(first);
  CHECK(first->version == 1);
  CHECK(fx.get(id)->json == first->json);
  CHECK(fx.cache_.stats().hits == 1);  // the second read came from the cache

  CHECK(fx.update(id, 2) == 2);
  auto second = fx.get(id);
  REQUIRE(second);
  CHECK(second->version == 2);
  CHECK(second->json.find("\"workload_id\":\"w-2\"") != std::string::npos);

  // Deleted, then read as gone; the cache keeps no record of another team's read either.
  REQUIRE(fx.call([&](Done d) { fx.service_->remove(Kind::kWebhook, id, fx.actor_, d); }).ok());
  CHECK_FALSE(fx.get(id));
  CHECK_FALSE(fx.get(id));
  auto other = fx.reads_->get(Kind::kWebhook, "team_b", id);
  REQUIRE(other.ok());
  CHECK_FALSE(other.value());
}

TEST_CASE(
    "readers racing updates through the read cache never see an acknowledged version undone") {
  ReadCacheFixture fx;
  std::vector<std::string> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(fx.create(i));
  std::atomic<bool> stop{false};
  std::atomic<int> went_back{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t) {
    readers.emplace_back([&] {
      std::map<std::string, uint64_t> seen;
      while (!stop.load(std::memory_order_relaxed)) {
        for (const auto& id : ids) {
          auto r = fx.reads_->get(Kind::kWebhook, "team_a", id);
          if (!r.ok() || !r.value()) continue;
          if (r.value()->version < seen[id]) went_back.fetch_add(1);
          seen[id] = std::max(seen[id], r.value()->version);
        }
      }
    });
  }
  int stale = 0;
  for (int n = 0; n < 300; ++n) {
    const std::string& id = ids[n % ids.size()];
    uint64_t acked = fx.update(id, n);
    auto now = fx.get(id);
    if (!now || now->version != acked) ++stale;
  }
  stop = true;
  for (auto& r : readers) r.join();
  CHECK(stale == 0);
  CHECK(went_back.load() == 0);
  CHECK(fx.cache_.stats().hits > 0);
}

}  // namespace
}  // namespace gw
