// Store::open_secondary beside a writer: the view gatewayctl's events, replay, check and backup
// read while gatewayd runs.
#include <doctest/doctest.h>
#include <rocksdb/env.h>
#include <rocksdb/file_system.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "store/store.h"
#include "store/store_test_util.h"

namespace gw {
namespace {

// The numbered write-ahead logs in `dir`.
std::vector<std::string> logs_in(const std::string& dir) {
  std::vector<std::string> logs;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.ends_with(".log") && name != "LOG") logs.push_back(entry.path().string());
  }
  return logs;
}

uint64_t keys_in(const Store& store, Cf cf) {
  uint64_t n = 0;
  auto it = store.iterate(cf);
  for (it->SeekToFirst(); it->Valid(); it->Next()) ++n;
  REQUIRE(it->status().ok());
  return n;
}

// Calls `before_listing` each time the secondary lists the data dir (for its write-ahead logs),
// and counts the MANIFEST's opens: where a writer's flush, and its deletion of the log it
// flushed, fall between the secondary's reading of the MANIFEST and its listing of the logs.
class BeforeListing final : public rocksdb::FileSystemWrapper {
 public:
  explicit BeforeListing(std::function<void()> before_listing)
      : FileSystemWrapper(rocksdb::FileSystem::Default()), before_(std::move(before_listing)) {}
  const char* Name() const override { return "BeforeListing"; }
  rocksdb::IOStatus NewSequentialFile(const std::string& name, const rocksdb::FileOptions& options,
                                      std::unique_ptr<rocksdb::FSSequentialFile>* file,
                                      rocksdb::IODebugContext* debug) override {
    if (name.find("/MANIFEST-") != std::string::npos) ++manifest_opens;
    return target()->NewSequentialFile(name, options, file, debug);
  }
  rocksdb::IOStatus GetChildren(const std::string& dir, const rocksdb::IOOptions& options,
                                std::vector<std::string>* result,
                                rocksdb::IODebugContext* debug) override {
    before_();
    return target()->GetChildren(dir, options, result, debug);
  }
  std::atomic<int> manifest_opens{0};

 private:
  std::function<void()> before_;
};

// A secondary read the MANIFEST, then listed the logs; gatewayd had flushed and deleted the log
// in between, and the view lacked every write that log held, with no error: a backup beside a
// gatewayd that was stopping exited 0 without acknowledged events, and check passed on it
// (helper 146, 4 of 60 rounds). Its MANIFEST changed during that open, so it is opened again.
TEST_CASE("a secondary opened while the writer flushes and deletes its log sees every write") {
  testing::ScratchDir dir;
  testing::ScratchDir scratch;
  auto writer = std::move(Store::open(dir.path()).value());
  rocksdb::WriteOptions synced;
  synced.sync = true;
  constexpr int kWrites = 500;
  for (int i = 0; i < kWrites; ++i) {
    REQUIRE(writer->db()
                ->Put(synced, writer->cf(Cf::kEvents), encode_u64(i + 1), std::string(100, 'e'))
                .ok());
    REQUIRE(
        writer->db()->Put(synced, writer->cf(Cf::kProjections), "p" + std::to_string(i), "p").ok());
  }
  const std::vector<std::string> logs = logs_in(dir.path());
  REQUIRE(logs.size() == 1);  // every write is in it, none in a table file

  std::atomic<bool> flushed{false};
  // Told after the open: a REQUIRE would throw through RocksDB's open, which holds its mutex.
  std::string trouble;
  std::shared_ptr<BeforeListing> fs;
  fs = std::make_shared<BeforeListing>([&] {
    // Once, after the first open has read the MANIFEST.
    if (fs->manifest_opens.load() == 0 || flushed.exchange(true)) return;
    if (!writer->flush().ok()) trouble += "the writer's flush failed; ";
    // RocksDB deletes the flushed log just after the flush is done.
    if (!testing::eventually([&] { return !std::filesystem::exists(logs[0]); })) {
      trouble += "the flushed log stayed; ";
    }
  });
  auto env = rocksdb::NewCompositeEnv(fs);
  auto view = Store::open_secondary(dir.path(), scratch.path(), env.get());
  CHECK(trouble.empty());
  REQUIRE(view.ok());
  CHECK(flushed.load());
  CHECK(fs->manifest_opens.load() >= 2);  // opened again
  CHECK(keys_in(*view.value(), Cf::kEvents) == kWrites);
  CHECK(keys_in(*view.value(), Cf::kProjections) == kWrites);
}

// Opens the data dir again while its MANIFEST keeps changing, then gives up with a message
// that says so, rather than serve a view that may lack writes.
TEST_CASE("a secondary whose writer changes the MANIFEST during every open is refused") {
  testing::ScratchDir dir;
  testing::ScratchDir scratch;
  auto writer = std::move(Store::open(dir.path()).value());
  int flushes = 0;
  std::string trouble;  // told after the open, as above
  auto fs = std::make_shared<BeforeListing>([&] {
    if (!writer->db()
             ->Put(rocksdb::WriteOptions(), writer->cf(Cf::kEvents), encode_u64(++flushes), "e")
             .ok() ||
        !writer->flush().ok()) {
      trouble += "the writer's write or flush failed; ";
    }
  });
  auto env = rocksdb::NewCompositeEnv(fs);
  auto view = Store::open_secondary(dir.path(), scratch.path(), env.get());
  CHECK(trouble.empty());
  REQUIRE_FALSE(view.ok());
  CHECK(view.error().code == Code::kUnavailable);
  CHECK(view.error().detail == dir.path() + " changed during each of " +
                                   std::to_string(Store::kSecondaryOpens) +
                                   " opens (its writer flushing or compacting all the while); "
                                   "try again");
  CHECK(flushes >= Store::kSecondaryOpens);
}

// With no CURRENT there is no MANIFEST to compare: RocksDB's own error, not 40 opens and a
// message that the dir kept changing.
TEST_CASE("a secondary of a dir that holds no database says why") {
  testing::ScratchDir dir;
  testing::ScratchDir scratch;
  auto view = Store::open_secondary(dir.path(), scratch.path());
  REQUIRE_FALSE(view.ok());
  CHECK(view.error().detail.find("changed during") == std::string::npos);
  CHECK(view.error().detail.find("CURRENT") != std::string::npos);
}

}  // namespace
}  // namespace gw
