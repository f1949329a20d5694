// RocksDB's CRC-32C as replaced by store/crc32c.cc: the same checksums as librocksdb's own
// function, and the one librocksdb's calls are bound to in this program.
#include <doctest/doctest.h>

#include <dlfcn.h>

#include <rocksdb/transaction_log.h>

#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>

#include "store/crc32c.h"
#include "store/store.h"
#include "store/store_test_util.h"

namespace gw {
namespace {

TEST_CASE("crc32c: the replacement gives librocksdb's checksums") {
  const Crc32cExtend library = rocksdb_crc32c_extend();
  REQUIRE(reinterpret_cast<void*>(library) != nullptr);
  REQUIRE(reinterpret_cast<void*>(library) != reinterpret_cast<void*>(&rocksdb::crc32c::Extend));

  // The check value of CRC-32C (RFC 3720's polynomial), and its continuation across calls.
  CHECK(rocksdb::crc32c::Extend(0, "123456789", 9) == 0xE3069283u);
  CHECK(rocksdb::crc32c::Extend(rocksdb::crc32c::Extend(0, "1234", 4), "56789", 5) == 0xE3069283u);
  CHECK(rocksdb::crc32c::Extend(0, "", 0) == library(0, "", 0));

  std::mt19937 rng(42);
  std::uniform_int_distribution<int> byte(0, 255);
  std::string buffer(70000, '\0');
  for (auto& c : buffer) c = static_cast<char>(byte(rng));
  // Every length up to 300 from every offset within a word, then log-record sizes.
  for (size_t offset = 0; offset < 8; ++offset) {
    for (size_t n = 0; n <= 300; ++n) {
      const uint32_t seed = static_cast<uint32_t>(n * 2654435761u);
      REQUIRE(rocksdb::crc32c::Extend(seed, buffer.data() + offset, n) ==
              library(seed, buffer.data() + offset, n));
    }
  }
  for (size_t n : {4096u, 32768u, 32761u, 40967u, 69990u}) {
    CHECK(rocksdb::crc32c::Extend(0, buffer.data() + 3, n) == library(0, buffer.data() + 3, n));
  }
}

TEST_CASE("crc32c: librocksdb's calls are bound to the replacement") {
  void* bound = dlsym(RTLD_DEFAULT, kCrc32cExtendSymbol);
  CHECK(bound == reinterpret_cast<void*>(&rocksdb::crc32c::Extend));
  CHECK(bound != reinterpret_cast<void*>(rocksdb_crc32c_extend()));
  const std::string expected = __builtin_cpu_supports("sse4.2") ? "sse4.2" : "rocksdb";
  CHECK(std::string(crc32c_implementation()) == expected);
}

TEST_CASE("crc32c: a log written and replayed with the replacement reads back") {
  testing::ScratchDir dir;
  {
    auto store = Store::open(dir.path());
    REQUIRE(store.ok());
    rocksdb::WriteOptions sync;
    sync.sync = true;
    for (int i = 0; i < 100; ++i) {
      rocksdb::WriteBatch batch;
      REQUIRE(batch
                  .Put(store.value()->cf(Cf::kEvents), "k" + std::to_string(i),
                       std::string(1000 + i, static_cast<char>('a' + i % 26)))
                  .ok());
      REQUIRE(store.value()->db()->Write(sync, &batch).ok());
    }
    // RocksDB's log reader, which checks each record's checksum, gives every write back.
    std::unique_ptr<rocksdb::TransactionLogIterator> log;
    REQUIRE(store.value()->db()->GetUpdatesSince(1, &log).ok());
    int read_back = 0;
    for (; log->Valid(); log->Next()) {
      CHECK(log->GetBatch().writeBatchPtr->Count() == 1);
      ++read_back;
    }
    CHECK(log->status().ok());
    CHECK(read_back == 100);
  }
  auto store = Store::open(dir.path());  // replays the log, checking every record's checksum
  REQUIRE(store.ok());
  std::ostringstream text;
  text << std::ifstream(dir.path() + "/LOG", std::ios::binary).rdbuf();
  const std::string log = text.str();
  CHECK(log.find(std::string("checksums (CRC-32C) computed by ") + crc32c_implementation() +
                 "\n") != std::string::npos);
  for (int i = 0; i < 100; ++i) {
    std::string value;
    REQUIRE(store.value()
                ->db()
                ->Get(rocksdb::ReadOptions(), store.value()->cf(Cf::kEvents),
                      "k" + std::to_string(i), &value)
                .ok());
    CHECK(value == std::string(1000 + i, static_cast<char>('a' + i % 26)));
  }
}

}  // namespace
}  // namespace gw
