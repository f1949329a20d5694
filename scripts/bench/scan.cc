// The baseline of `gatewayctl rebuild` in scripts/bench.sh: the raw rate of reading gatewayd's
// event log. Opens the data dir read-only with the column families and table options of
// src/store/store.cc, iterates the `events` column family from its first key and parses every
// value with RapidJSON (Document::Parse), on one thread, checking each is a JSON object. Nothing
// else: no projections, no hashing, no writes.
//
//   g++ -O2 -std=c++20 -Isrc scripts/bench/scan.cc src/store/crc32c.cc -o build-bench/scan
//       $(pkg-config --cflags --libs rocksdb)          (one line; scripts/bench.sh does this)
// src/store/crc32c.cc gives it gatewayd's CRC-32C for the write-ahead log (the CPU's instruction
// instead of Debian's table-driven one), as gatewayctl rebuild has it.
//   build-bench/scan --data-dir DIR
//     prints: scan: events=N bytes=B seconds=S open_seconds=O events_per_s=R (S includes O: the
//     open replays the write-ahead log, as it does for gatewayctl rebuild)
//     exit 1 when the log cannot be opened or read, or an event is not a JSON object.
#include <rapidjson/document.h>
#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/merge_operator.h>
#include <rocksdb/table.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace {

// The projections' counters are RocksDB merges (src/store/store.cc, CounterAdd), and RocksDB
// refuses to replay a logged merge into a column family without a merge operator: the open then
// fails with "SST file is ahead of WALs". The scan never reads a projection, so this operator
// only lets the replay keep the deltas; asked to merge, it fails rather than compute anything.
class KeepDeltas final : public rocksdb::MergeOperator {
 public:
  const char* Name() const override { return "scan.KeepDeltas"; }
  bool FullMergeV2(const MergeOperationInput&, MergeOperationOutput*) const override {
    return false;
  }
};

// As src/store/store.cc opens them (the cache is shared by both column families there too).
rocksdb::ColumnFamilyOptions projection_options(const std::shared_ptr<rocksdb::Cache>& cache) {
  rocksdb::ColumnFamilyOptions o;
  rocksdb::BlockBasedTableOptions t;
  t.block_cache = cache;
  t.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  t.cache_index_and_filter_blocks = false;
  o.table_factory.reset(rocksdb::NewBlockBasedTableFactory(t));
  o.merge_operator = std::make_shared<KeepDeltas>();
  return o;
}

rocksdb::ColumnFamilyOptions event_options(const std::shared_ptr<rocksdb::Cache>& cache) {
  rocksdb::ColumnFamilyOptions o;
  rocksdb::BlockBasedTableOptions t;
  t.block_cache = cache;
  o.table_factory.reset(rocksdb::NewBlockBasedTableFactory(t));
  return o;
}

int fail(const std::string& message) {
  std::fprintf(stderr, "scan: %s\n", message.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || std::string(argv[1]) != "--data-dir") {
    std::fprintf(stderr, "usage: scan --data-dir DIR\n");
    return 2;
  }
  const auto start = std::chrono::steady_clock::now();
  auto cache = rocksdb::NewLRUCache(64 << 20);
  rocksdb::DBOptions options;
  options.max_background_jobs = 2;
  std::vector<rocksdb::ColumnFamilyDescriptor> cfs{
      {rocksdb::kDefaultColumnFamilyName, rocksdb::ColumnFamilyOptions()},
      {"events", event_options(cache)},
      {"projections", projection_options(cache)},
  };
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  auto s = rocksdb::DB::OpenForReadOnly(options, argv[2], cfs, &handles, &raw);
  if (!s.ok()) return fail("cannot open " + std::string(argv[2]) + ": " + s.ToString());
  std::unique_ptr<rocksdb::DB> db(raw);
  const auto opened = std::chrono::steady_clock::now();

  uint64_t events = 0;
  uint64_t bytes = 0;
  {
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions(), handles[1]));
    rapidjson::Document doc;
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      const rocksdb::Slice v = it->value();
      doc.Parse(v.data(), v.size());
      if (doc.HasParseError() || !doc.IsObject()) {
        return fail("event " + std::to_string(events + 1) + " is not a JSON object");
      }
      ++events;
      bytes += v.size();
    }
    if (!it->status().ok()) return fail("reading the log: " + it->status().ToString());
  }
  const auto end = std::chrono::steady_clock::now();
  const double seconds = std::chrono::duration<double>(end - start).count();
  const double open_seconds = std::chrono::duration<double>(opened - start).count();
  for (auto* h : handles) db->DestroyColumnFamilyHandle(h);
  db.reset();
  std::printf("scan: events=%llu bytes=%llu seconds=%.3f open_seconds=%.3f events_per_s=%.0f\n",
              static_cast<unsigned long long>(events), static_cast<unsigned long long>(bytes),
              seconds, open_seconds, seconds > 0 ? static_cast<double>(events) / seconds : 0.0);
  return 0;
}
