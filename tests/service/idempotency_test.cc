// Kept answers for Idempotency-Key: found within 24 hours, gone after, and pruned by later writes.
#include <doctest/doctest.h>
#include <rocksdb/perf_context.h>
#include <rocksdb/perf_level.h>

#include "service/idempotency.h"
#include "store/store_test_util.h"

namespace gw {
namespace {

class FixedClock final : public Clock {
 public:
  int64_t now_seconds() const override { return 0; }
  int64_t now_millis() const override { return 0; }
};

struct IdempotencyFixture {
  testing::ScratchDir dir;
  std::unique_ptr<Store> store = std::move(Store::open(dir.path()).value());
  FixedClock clock;
  std::unique_ptr<IdGenerator> ids = make_system_id_generator(clock);
  PruneCursor pruned;

  // Runs `f` on a Tx and writes what it staged.
  template <typename F>
  void write(F f) {
    Tx tx(*store, *ids, 0, kGenesisHash);
    f(tx);
    REQUIRE(store->db()->Write(rocksdb::WriteOptions(), tx.seal().value()).ok());
  }
  std::optional<KeptAnswer> find(const IdempotencyKey& key, int64_t now) {
    Tx tx(*store, *ids, 0, kGenesisHash);
    auto r = find_answer(tx, key, now);
    REQUIRE(r.ok());
    return r.value();
  }
  // Keeps an answer for each of team_a's keys <name>0 .. <name><count - 1>, made at `time`, in
  // one write.
  void keep_many(const std::string& name, int count, int64_t time) {
    write([&](Tx& tx) {
      for (int i = 0; i < count; ++i) keep(tx, name + std::to_string(i), time);
    });
  }
  // Keeps an answer for team_a's key `name` made at `time`, pruning as a keyed write does.
  void keep_one(const std::string& name, int64_t time) {
    write([&](Tx& tx) { keep(tx, name, time); });
  }
  void keep(Tx& tx, const std::string& name, int64_t time) {
    IdempotencyKey k = key_of("team_a", name);
    REQUIRE(keep_answer(tx, k, {k.fingerprint, time, 1, "{}"}, time, pruned).ok());
  }
  static IdempotencyKey key_of(std::string tenant, std::string key) {
    return IdempotencyKey{std::move(tenant), std::move(key),
                          request_fingerprint("POST", "/v1/x", "{}")};
  }
  size_t meta_keys() {
    size_t n = 0;
    auto it = store->iterate(Cf::kMeta);
    for (it->SeekToFirst(); it->Valid(); it->Next()) ++n;
    return n;
  }
};

// When the tests' answers are made, and a time at which all of those have expired.
constexpr int64_t kT0 = 1'800'000'000;
constexpr int64_t kLater = kT0 + kIdempotencyWindowSeconds + 10;

IdempotencyKey key_of(std::string tenant, std::string key) {
  return IdempotencyFixture::key_of(std::move(tenant), std::move(key));
}

// The tombstones RocksDB stepped over while `f` ran.
template <typename F>
uint64_t deletes_skipped(F f) {
  rocksdb::SetPerfLevel(rocksdb::PerfLevel::kEnableCount);
  rocksdb::get_perf_context()->Reset();
  f();
  const uint64_t skipped = rocksdb::get_perf_context()->internal_delete_skipped_count;
  rocksdb::SetPerfLevel(rocksdb::PerfLevel::kDisable);
  return skipped;
}

TEST_CASE("an answer is kept for 24 hours per tenant and key") {
  IdempotencyFixture f;
  IdempotencyKey k = key_of("team_a", "k1");
  f.write([&](Tx& tx) {
    REQUIRE(keep_answer(tx, k, {k.fingerprint, kT0, 3, "{\"a\":1}"}, kT0, f.pruned).ok());
  });
  auto found = f.find(k, kT0 + kIdempotencyWindowSeconds - 1);
  REQUIRE(found.has_value());
  CHECK(found->fingerprint == k.fingerprint);
  CHECK(found->time == kT0);
  CHECK(found->version == 3);
  CHECK(found->json == "{\"a\":1}");
  CHECK_FALSE(f.find(k, kT0 + kIdempotencyWindowSeconds).has_value());
  CHECK_FALSE(f.find(key_of("team_b", "k1"), kT0).has_value());
  CHECK_FALSE(f.find(key_of("team_a", "k2"), kT0).has_value());
}

// find_written_answer reads the store, outside the writer: what a written batch kept, with the
// same window.
TEST_CASE("a written answer is found in the store by any thread within its window") {
  IdempotencyFixture f;
  IdempotencyKey k = key_of("team_a", "k1");
  auto written = [&](const IdempotencyKey& key, int64_t now) {
    auto r = find_written_answer(*f.store, key, now);
    REQUIRE(r.ok());
    return r.value();
  };
  CHECK_FALSE(written(k, kT0).has_value());
  f.write([&](Tx& tx) {
    REQUIRE(keep_answer(tx, k, {k.fingerprint, kT0, 3, "{\"a\":1}"}, kT0, f.pruned).ok());
  });
  auto found = written(k, kT0 + kIdempotencyWindowSeconds - 1);
  REQUIRE(found.has_value());
  CHECK(found->fingerprint == k.fingerprint);
  CHECK(found->version == 3);
  CHECK(found->json == "{\"a\":1}");
  CHECK_FALSE(written(k, kT0 + kIdempotencyWindowSeconds).has_value());
  CHECK_FALSE(written(key_of("team_b", "k1"), kT0).has_value());
}

TEST_CASE("new answers prune expired ones, but not a key that was used again since") {
  IdempotencyFixture f;
  for (int i = 0; i < 5; ++i) {
    IdempotencyKey k = key_of("team_a", "old" + std::to_string(i));
    f.write([&](Tx& tx) {
      REQUIRE(keep_answer(tx, k, {k.fingerprint, kT0 + i, 1, "{}"}, kT0 + i, f.pruned).ok());
    });
  }
  CHECK(f.meta_keys() == 10);  // an answer and an expiry entry each
  // "old0" is used again after it expired: its new answer must survive the pruning below.
  IdempotencyKey reused = key_of("team_a", "old0");
  f.write([&](Tx& tx) {
    REQUIRE(keep_answer(tx, reused, {reused.fingerprint, kLater, 2, "{}"}, kLater, f.pruned).ok());
  });
  // Pruning ran before the new entry was staged: the five old expiry entries and four old
  // answers are gone; old0's new answer and its new expiry entry remain.
  CHECK(f.meta_keys() == 2);
  auto found = f.find(reused, kLater);
  REQUIRE(found.has_value());
  CHECK(found->version == 2);
}

TEST_CASE("a clock within a day of 1970 prunes no answer that has not expired") {
  // A machine whose clock lost its setting starts in 1970. Its answers expire 24 hours after
  // they were made, as anywhere else; none has expired before the first day is over.
  IdempotencyFixture f;
  f.keep_one("early", 100);
  f.keep_one("second", 200);
  CHECK(f.meta_keys() == 4);
  auto found = f.find(key_of("team_a", "early"), 300);
  REQUIRE(found.has_value());
  CHECK(found->time == 100);
  // Once a day has passed the first one expires, and the next keyed write prunes it.
  f.keep_one("third", 100 + kIdempotencyWindowSeconds + 1);
  CHECK_FALSE(f.find(key_of("team_a", "early"), 100 + kIdempotencyWindowSeconds + 1).has_value());
  CHECK(f.meta_keys() == 4);  // second and third, an answer and an expiry entry each
}

TEST_CASE("pruning goes on where it stopped, without stepping over what it pruned before") {
  IdempotencyFixture f;
  constexpr int kOld = 2000;
  f.keep_many("old", kOld, kT0);
  // Every later keyed write prunes up to 8 expired entries; RocksDB keeps each deleted one as
  // a tombstone until a compaction, which a scan from the start of the index steps over.
  auto keep_new = [&](int i) { f.keep_one("new" + std::to_string(i), kLater); };
  for (int i = 0; i < 100; ++i) keep_new(i);
  CHECK(f.meta_keys() == 2 * (kOld - 800 + 100));

  // The last write's own deletions at most; 800 from the start.
  CHECK(deletes_skipped([&] { keep_new(100); }) <= 8);
  CHECK(f.meta_keys() == 2 * (kOld - 808 + 101));

  // A new cursor (a restart) starts over from the start of the index, and prunes on.
  f.pruned = PruneCursor{};
  keep_new(101);
  CHECK(f.meta_keys() == 2 * (kOld - 816 + 102));
  // Each entry is found once, and the cursor does not pass an entry staged behind it (the
  // wall clock went back): it is pruned in turn.
  IdempotencyKey back = key_of("team_b", "back");
  f.write([&](Tx& tx) {
    REQUIRE(keep_answer(tx, back, {back.fingerprint, kT0 - 5, 1, "{}"}, kLater, f.pruned).ok());
  });
  CHECK(f.meta_keys() == 2 * (kOld - 824 + 103));
  for (int i = 0; i < 200; ++i) keep_new(200 + i);
  CHECK(f.meta_keys() == 2 * 302);  // every old one and `back` pruned; the 302 new ones kept
}

// After a restart, with every expired entry pruned already (tombstones until a compaction), the
// cursor stayed empty, since only a prune moved it: every keyed write walked all the tombstones
// again to find nothing to prune.
TEST_CASE("after a restart only the first keyed write steps over the entries pruned before") {
  IdempotencyFixture f;
  constexpr int kOld = 400;
  f.keep_many("old", kOld, kT0);
  int n = 0;
  auto keep_new = [&] { f.keep_one("new" + std::to_string(n++), kLater); };
  for (int i = 0; i < kOld / 8; ++i) keep_new();
  REQUIRE(f.meta_keys() == 2 * static_cast<size_t>(n));  // every old entry pruned
  f.pruned = PruneCursor{};                              // a restart
  CHECK(deletes_skipped(keep_new) >= kOld);  // the first write walks the tombstones once
  CHECK(deletes_skipped(keep_new) == 0);
  CHECK(deletes_skipped(keep_new) == 0);
  CHECK(f.meta_keys() == 2 * static_cast<size_t>(n));
}

TEST_CASE("an Idempotency-Key header is 1 to 255 visible ASCII characters") {
  CHECK(valid_idempotency_key("a"));
  CHECK(valid_idempotency_key("3f1c-4b2a_key:1/2"));
  CHECK(valid_idempotency_key(std::string(255, 'x')));
  CHECK_FALSE(valid_idempotency_key(""));
  CHECK_FALSE(valid_idempotency_key(std::string(256, 'x')));
  CHECK_FALSE(valid_idempotency_key("a b"));
  CHECK_FALSE(valid_idempotency_key("caf\xc3\xa9"));
  CHECK(request_fingerprint("POST", "/v1/a", "{}") != request_fingerprint("POST", "/v1/b", "{}"));
  CHECK(request_fingerprint("POST", "/v1/a", "{}") != request_fingerprint("POST", "/v1/a", "{} "));
}

}  // namespace
}  // namespace gw
