// RecordCache: the writer thread's parsed records, and TxLookups keeping it coherent on a real
// RocksDB: what a rejected job changed never reaches it, what a kept job changed does.
#include <doctest/doctest.h>

#include <malloc.h>

#include <string>
#include <type_traits>
#include <variant>

#include "projections/apply.h"
#include "projections/record_cache.h"
#include "store/store_test_util.h"

namespace gw {
namespace {

Stored webhook_at(const std::string& id, uint64_t version, std::string status = "active") {
  Webhook w;
  w.meta.id = id;
  w.meta.team_id = "team_a";
  w.workload_id = "w-" + std::to_string(version);
  w.provider = "github";
  w.status = std::move(status);
  w.external_id = "x";
  return Stored{w, version, 1};
}

const Webhook& webhook(const Stored& s) { return std::get<Webhook>(s.record); }

TEST_CASE("a RecordCache drops its least recently used records once its bytes are spent") {
  // Each entry weighs the same: its id and its JSON's length are.
  const size_t kEntry = RecordCache::weight("wh_a", 100);
  CHECK(kEntry > 100 + 4);
  RecordCache cache(3 * kEntry);
  for (const char* id : {"wh_a", "wh_b", "wh_c"}) cache.put(id, webhook_at(id, 1), 100);
  CHECK(cache.size() == 3);
  CHECK(cache.bytes() == 3 * kEntry);
  REQUIRE(cache.find("wh_a") != nullptr);  // now the most recently used
  cache.put("wh_d", webhook_at("wh_d", 1), 100);
  CHECK(cache.find("wh_b") == nullptr);
  CHECK(cache.find("wh_a") != nullptr);
  CHECK(cache.find("wh_c") != nullptr);
  CHECK(cache.find("wh_d") != nullptr);
  CHECK(cache.bytes() == 3 * kEntry);

  cache.put("wh_a", webhook_at("wh_a", 2), 100);  // replaces
  CHECK(cache.find("wh_a")->version == 2);
  CHECK(cache.size() == 3);

  cache.put("wh_c", webhook_at("wh_c", 2), 4 * kEntry);  // heavier than the cache: not kept
  CHECK(cache.find("wh_c") == nullptr);
  CHECK(cache.size() == 2);
  CHECK(cache.bytes() == 2 * kEntry);
  cache.erase("wh_a");
  CHECK(cache.find("wh_a") == nullptr);
  CHECK(cache.bytes() == kEntry);
}

// The memory the cache's entries take, as glibc's malloc counts it (mallinfo2), against their
// weight: 32 MB of webhooks took about 43 MB when each entry weighed its JSON, its id and 256.
// The sanitizers' allocators keep no such count, so there the test has nothing to measure.
TEST_CASE("a RecordCache's entries weigh at least the memory they take") {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  MESSAGE("not measured under a sanitizer's allocator");
#else
  Domain d;
  d.meta.team_id = "team_a";
  d.scope = "exact";
  d.verification_value = "gv-0123456789abcdef0123456789abcdef.verify.platform.test";
  Profile p;
  p.meta.team_id = "team_a";
  p.cors_origins = "https://a.example.com,https://b.example.com";
  p.geo_policy = p.waf_overrides = p.waf_rule_exclusions = "null";
  for (const Record& kind : {Record{webhook_at("x", 1).record}, Record{d}, Record{p}}) {
    CAPTURE(kind.index());
    RecordCache cache(size_t{1} << 30);
    const size_t before = mallinfo2().uordblks;
    size_t weight = 0;
    for (int i = 0; i < 5000; ++i) {
      const std::string id = "whk_01JABCDEFGHJKMNPQRSTV" + std::to_string(10000 + i);
      Stored s{kind, 1, 1};
      std::visit(
          [&](auto& r) {
            r.meta.id = id;
            if constexpr (!std::is_same_v<std::decay_t<decltype(r)>, Webhook>) {
              r.hostname = "shop" + std::to_string(i) + ".example.com";
            } else {
              r.workload_id = "workload-" + std::to_string(i);
            }
          },
          s.record);
      const size_t json = to_json(s.record).size();
      weight += RecordCache::weight(id, json);
      cache.put(id, std::move(s), json);
    }
    const size_t taken = mallinfo2().uordblks - before;
    CAPTURE(taken);
    CAPTURE(weight);
    CHECK(taken <= weight);
    CHECK(cache.bytes() == weight);
  }
#endif
}

struct RecordCacheFixture {
  testing::ScratchDir dir;
  std::unique_ptr<Store> store = std::move(Store::open(dir.path()).value());
  SystemClock clock;
  std::unique_ptr<IdGenerator> ids = make_system_id_generator(clock);
  uint64_t seq = 0;
  std::string hash = kGenesisHash;
  RecordCache cache{1 << 20};

  std::unique_ptr<Tx> begin() {
    auto tx = std::make_unique<Tx>(*store, *ids, seq, hash);
    tx->set_savepoint();
    return tx;
  }
  void commit(Tx& tx) {
    auto batch = tx.seal();
    REQUIRE(batch.ok());
    REQUIRE(store->db()->Write(rocksdb::WriteOptions(), batch.value()).ok());
    seq = tx.last_seq();
    hash = tx.last_hash();
  }
  // The record as stored, read without the cache.
  Stored stored(const std::string& id) {
    auto tx = begin();
    TxLookups plain(*tx);
    auto s = plain.load(id);
    REQUIRE(s.has_value());
    return *s;
  }
};

Decision change_of(const Stored& s, std::string status, std::string workload) {
  Webhook w = webhook(s);
  w.status = std::move(status);
  w.workload_id = std::move(workload);
  return Decision{{Change{event_type(Kind::kWebhook, "updated"), w}}, w};
}

TEST_CASE("TxLookups caches what it reads and what kept jobs change, never a rejected job's") {
  RecordCacheFixture f;
  const std::string id = "whk_01TESTRECORDCACHE000000000";
  const Actor actor{"team_a", "test"};
  {
    auto tx = f.begin();
    TxLookups lookups(*tx, &f.cache);
    Stored first = webhook_at(id, 0);
    Decision create{{Change{event_type(Kind::kWebhook, "created"), first.record, 0, true}},
                    first.record};
    REQUIRE(record_changes(*tx, lookups, create, actor, 1).ok());
    lookups.keep_written();
    f.commit(*tx);
    CHECK(f.cache.size() == 0);  // a new record is not kept
  }
  const Stored v1 = f.stored(id);
  REQUIRE(v1.version == 1);

  SUBCASE("a read is kept, and the next job gets it from the cache") {
    {
      auto tx = f.begin();
      TxLookups lookups(*tx, &f.cache);
      REQUIRE(lookups.load(id).has_value());
    }
    REQUIRE(f.cache.size() == 1);
    // Put something else in the cache's entry: a lookup answering with it read the cache.
    f.cache.put(id, webhook_at(id, 7), 100);
    auto tx = f.begin();
    TxLookups lookups(*tx, &f.cache);
    CHECK(lookups.load(id)->version == 7);
  }

  SUBCASE("a job rejected after its changes leaves the cache as the store is") {
    auto tx = f.begin();
    {
      TxLookups lookups(*tx, &f.cache);
      auto current = lookups.load(id);
      REQUIRE(current.has_value());
      REQUIRE(f.cache.size() == 1);
      // Two changes of the record in one decision: the second reads the first back through the
      // Tx, a state that is gone once the job is rolled back.
      Decision d = change_of(*current, "inactive", "w-first");
      Decision second = change_of(*current, "inactive", "w-second");
      d.changes.push_back(second.changes.front());
      REQUIRE(record_changes(*tx, lookups, d, actor, 2).ok());
      // The job reads its record back: its own write, not to be cached.
      auto written = lookups.load(id);
      REQUIRE(written.has_value());
      CHECK(written->version == 3);
      // The job is rejected after its changes (as when keeping its idempotent answer fails).
      tx->rollback_to_savepoint();
    }
    TxLookups after(*tx, &f.cache);
    auto seen = after.load(id);
    REQUIRE(seen.has_value());
    CHECK(seen->version == 1);
    CHECK(webhook(*seen).status == "active");
    CHECK(webhook(*seen).workload_id == webhook(v1).workload_id);
  }

  SUBCASE("a kept job's change is in the cache, as stored") {
    {
      auto tx = f.begin();
      TxLookups lookups(*tx, &f.cache);
      auto current = lookups.load(id);
      REQUIRE(current.has_value());
      Decision d = change_of(*current, "inactive", "w-kept");
      REQUIRE(record_changes(*tx, lookups, d, actor, 2).ok());
      lookups.keep_written();
      f.commit(*tx);
    }
    const Stored* cached = f.cache.find(id);
    REQUIRE(cached != nullptr);
    const Stored stored = f.stored(id);
    CHECK(stored.version == 2);
    CHECK(cached->version == stored.version);
    CHECK(cached->create_seq == stored.create_seq);
    CHECK(cached->record == stored.record);
  }
}

}  // namespace
}  // namespace gw
