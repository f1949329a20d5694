// The projections column family's memtable insert hint (store/store.cc), on a real RocksDB:
// a batch in key order is inserted from where the previous key went, not searched from the top.
// Counted in key comparisons (RocksDB's perf context), not in time.
#include <doctest/doctest.h>

#include <rocksdb/perf_context.h>
#include <rocksdb/perf_level.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "store/store.h"
#include "store/store_test_util.h"

namespace gw {
namespace {

// Record-like keys ("r\0" and 16 random letters), not in order.
std::vector<std::string> random_keys(std::mt19937& rng, size_t n) {
  std::uniform_int_distribution<int> letter('a', 'z');
  std::vector<std::string> out(n, std::string("r\0", 2));
  for (auto& key : out) {
    for (int i = 0; i < 16; ++i) key.push_back(static_cast<char>(letter(rng)));
  }
  return out;
}

// The user-key comparisons of writing `keys`, in key order, as one batch into `which`.
uint64_t comparisons_of_sorted_batch(Store& store, Cf which, std::vector<std::string> keys) {
  std::sort(keys.begin(), keys.end());
  rocksdb::WriteBatch batch;
  for (const auto& key : keys) REQUIRE(batch.Put(store.cf(which), key, "v").ok());
  rocksdb::SetPerfLevel(rocksdb::PerfLevel::kEnableCount);
  rocksdb::get_perf_context()->Reset();
  const bool written = store.db()->Write(rocksdb::WriteOptions(), &batch).ok();
  const uint64_t count = rocksdb::get_perf_context()->user_key_comparison_count;
  rocksdb::SetPerfLevel(rocksdb::PerfLevel::kDisable);
  REQUIRE(written);
  return count;
}

TEST_CASE("a batch in key order is inserted into the projections memtable from key to key") {
  testing::ScratchDir dir;
  auto opened = Store::open(dir.path());
  REQUIRE(opened.ok());
  Store& store = *opened.value();
  std::mt19937 rng(11);
  // The same 20,000 keys in the memtables of the projections and of the default column family
  // (RocksDB's options: no hint), written in batches of 500 out of order.
  const auto present = random_keys(rng, 20000);
  for (size_t at = 0; at < present.size(); at += 500) {
    rocksdb::WriteBatch batch;
    for (size_t i = at; i < at + 500; ++i) {
      REQUIRE(batch.Put(store.cf(Cf::kProjections), present[i], "v").ok());
      REQUIRE(batch.Put(store.cf(Cf::kMeta), present[i], "v").ok());
    }
    REQUIRE(store.db()->Write(rocksdb::WriteOptions(), &batch).ok());
  }
  // 2,000 new keys spread among them, as a batch of updates writes its records.
  const auto added = random_keys(rng, 2000);
  const uint64_t hinted = comparisons_of_sorted_batch(store, Cf::kProjections, added);
  const uint64_t unhinted = comparisons_of_sorted_batch(store, Cf::kMeta, added);
  INFO("key comparisons for 2,000 inserts: " << hinted << " with the hint, " << unhinted
                                             << " without");
  CHECK(unhinted > 0);
  CHECK(hinted * 10 < unhinted * 8);
  // Every key reads back.
  size_t missing = 0;
  for (const auto* keys : {&present, &added}) {
    for (const auto& key : *keys) {
      auto got = store.get(Cf::kProjections, key);
      REQUIRE(got.ok());
      if (got.value() != std::optional<std::string>("v")) ++missing;
    }
  }
  CHECK(missing == 0);
}

}  // namespace
}  // namespace gw
