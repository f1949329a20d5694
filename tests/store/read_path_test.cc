// Point reads on a large table must not read filter or index blocks from disk again and again.
#include <doctest/doctest.h>

#include <rocksdb/perf_context.h>
#include <rocksdb/perf_level.h>

#include "store/store.h"
#include "store/store_test_util.h"

namespace gw {
namespace {

TEST_CASE("repeated point reads of a large projections table are served from memory") {
  testing::ScratchDir dir;
  auto store = std::move(Store::open(dir.path()).value());
  // One table file with 1M keys: its Bloom filter (about 1.2 MB) is larger than one shard of the
  // 64 MB block cache, which is what made every read fetch and checksum it from disk.
  rocksdb::WriteBatch batch;
  for (uint64_t i = 0; i < 1'000'000; ++i) {
    batch.Put(store->cf(Cf::kProjections), "r" + encode_u64(i), "v");
  }
  REQUIRE(store->db()->Write(rocksdb::WriteOptions(), &batch).ok());
  REQUIRE(store->db()->Flush(rocksdb::FlushOptions(), store->cf(Cf::kProjections)).ok());

  auto read = [&](uint64_t i) { return store->get(Cf::kProjections, "r" + encode_u64(i)); };
  REQUIRE(read(7).value() == std::optional<std::string>("v"));  // warm: the data block
  rocksdb::SetPerfLevel(rocksdb::PerfLevel::kEnableCount);
  rocksdb::get_perf_context()->Reset();
  for (int n = 0; n < 200; ++n) REQUIRE(read(7).value().has_value());
  const uint64_t blocks_read = rocksdb::get_perf_context()->block_read_count;
  rocksdb::SetPerfLevel(rocksdb::PerfLevel::kDisable);
  CHECK(blocks_read == 0);
}

}  // namespace
}  // namespace gw
