// The projections' L0 files are compacted into L1 once writes pause, on a real RocksDB.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>

#include "store/quiet_compaction.h"
#include "store/store.h"
#include "store/store_test_util.h"

namespace gw {
namespace {

using std::chrono::milliseconds;
using testing::eventually;

// `files` flushes of the projections, each with 100 keys of its own and one key all of them
// write (so every L0 file spans the same key range, as gatewayd's do). Returns the shared key's
// last value.
std::string write_level0(Store& store, int files) {
  static int round = 0;
  for (int f = 0; f < files; ++f, ++round) {
    rocksdb::WriteBatch batch;
    for (int i = 0; i < 100; ++i) {
      batch.Put(store.cf(Cf::kProjections), "r" + std::to_string(round) + "-" + std::to_string(i),
                "v" + std::to_string(round));
    }
    batch.Put(store.cf(Cf::kProjections), "shared", "v" + std::to_string(round));
    REQUIRE(store.db()->Write(rocksdb::WriteOptions(), &batch).ok());
    REQUIRE(store.db()->Flush(rocksdb::FlushOptions(), store.cf(Cf::kProjections)).ok());
  }
  return "v" + std::to_string(round - 1);
}

QuietCompaction::Options quick() {
  QuietCompaction::Options o;
  o.quiet = milliseconds(100);
  o.min_files = 4;
  o.poll = milliseconds(10);
  return o;
}

TEST_CASE("compact_level0 moves every L0 file of the projections into L1 and keeps every key") {
  testing::ScratchDir dir;
  auto store = std::move(Store::open(dir.path()).value());
  CHECK(store->compact_level0(Cf::kProjections).value() == false);  // nothing there
  write_level0(*store, 5);
  REQUIRE(store->level0_files(Cf::kProjections) == 5);
  const auto before = testing::projections_as_read(*store);
  CHECK(store->compact_level0(Cf::kProjections).value() == true);
  CHECK(store->level0_files(Cf::kProjections) == 0);
  CHECK(testing::projections_as_read(*store) == before);
  CHECK(before.size() == 501);
}

TEST_CASE("L0 files are compacted once writes pause, not while they go on") {
  testing::ScratchDir dir;
  auto store = std::move(Store::open(dir.path()).value());
  std::atomic<uint64_t> batches{0};
  // While `busy`, every look at the count finds a batch more: writes that never pause, whatever
  // the scheduler does to the test's threads.
  std::atomic<bool> busy{false};
  QuietCompaction quiet(
      *store, [&] { return busy.load() ? batches.fetch_add(1) + 1 : batches.load(); }, quick());
  quiet.start();

  SUBCASE("below the minimum, nothing is compacted") {
    write_level0(*store, 3);
    std::this_thread::sleep_for(milliseconds(500));  // five times the pause it waits for
    CHECK(quiet.compactions() == 0);
    CHECK(store->level0_files(Cf::kProjections) == 3);
  }

  SUBCASE("while batches are written, nothing is compacted; after they stop, L0 is") {
    // Batches from before the first file is made, as in gatewayd, where the files come from the
    // writes: counted only once the five were made, a pause of 100 ms while they were made (a
    // slow flush, under the sanitizers on a busy machine) let the first four be compacted. A
    // thread adding a batch every 10 ms stood in for the writes, and a 100 ms stall of that
    // thread alone could let them be compacted too.
    busy.store(true);
    const std::string last = write_level0(*store, 5);
    std::this_thread::sleep_for(milliseconds(500));  // five times the pause it waits for
    CHECK(quiet.compactions() == 0);
    CHECK(store->level0_files(Cf::kProjections) == 5);
    busy.store(false);
    CHECK(eventually([&] { return quiet.compactions() == 1; }));
    CHECK(store->level0_files(Cf::kProjections) == 0);
    CHECK(store->get(Cf::kProjections, "shared").value() == std::optional<std::string>(last));
  }

  SUBCASE("it compacts again after the next burst") {
    write_level0(*store, 4);
    REQUIRE(eventually([&] { return quiet.compactions() == 1; }));
    const std::string last = write_level0(*store, 4);
    const auto before = testing::projections_as_read(*store);
    batches.fetch_add(1);
    CHECK(eventually([&] { return quiet.compactions() == 2; }));
    CHECK(store->level0_files(Cf::kProjections) == 0);
    // Compacted with the L1 file the first one made, which holds the older values.
    CHECK(testing::projections_as_read(*store) == before);
    CHECK(store->get(Cf::kProjections, "shared").value() == std::optional<std::string>(last));
    CHECK(quiet.failures() == 0);
    CHECK(quiet.render_metrics().find("gatewayd_quiet_compactions_total 2\n") != std::string::npos);
  }
  quiet.stop();
}

// Wraps the real Env for the making of table files. While `table_files` is shut, a table file
// to be made waits in NewWritableFile: a compaction is then in progress, at its first output
// file. While `full` is set, none can be made, as on a full disk.
class TableFilesEnv final : public rocksdb::EnvWrapper {
 public:
  TableFilesEnv() : rocksdb::EnvWrapper(rocksdb::Env::Default()) {}
  const char* Name() const override { return "TableFilesEnv"; }
  testing::Gate table_files;
  std::atomic<bool> full{false};

  rocksdb::Status NewWritableFile(const std::string& name,
                                  std::unique_ptr<rocksdb::WritableFile>* result,
                                  const rocksdb::EnvOptions& options) override {
    if (name.ends_with(".sst")) {
      if (full.load()) return rocksdb::Status::NoSpace("full (test)");
      table_files.pass();
    }
    return target()->NewWritableFile(name, result, options);
  }
};

TEST_CASE("a compaction of L0 in progress ends at stop_background_work and changes nothing") {
  // gatewayd's stop: without this it waited seconds for a compaction of a large L0 to end.
  testing::ScratchDir dir;
  TableFilesEnv env;
  auto store = std::move(Store::open(dir.path(), &env).value());
  write_level0(*store, 5);
  const auto before = testing::projections_as_read(*store);
  REQUIRE(before.size() == 501);

  env.table_files.shut();
  std::optional<Result<bool>> done;
  std::thread compacting([&] { done = store->compact_level0(Cf::kProjections); });
  env.table_files.await_waiting();  // the compaction is making its first output file
  store->stop_background_work();
  env.table_files.open();
  compacting.join();
  REQUIRE(done.has_value());
  REQUIRE(done->ok());            // not a failure: QuietCompaction counts none
  CHECK(done->value() == false);  // nothing compacted
  CHECK(store->level0_files(Cf::kProjections) == 5);
  CHECK(testing::projections_as_read(*store) == before);

  store.reset();  // closes; the compaction's output, if any, is not part of the store
  auto reopened = std::move(Store::open(dir.path()).value());
  CHECK(reopened->level0_files(Cf::kProjections) == 5);
  CHECK(testing::projections_as_read(*reopened) == before);
}

// A failed compaction was tried again at every pause: on an idle server whose disk was full,
// about twice a second, each with an error line in RocksDB's LOG (helper 44). It is tried again
// once writes came and paused again.
TEST_CASE("a failed compaction of L0 is tried again only after writes come and pause again") {
  testing::ScratchDir dir;
  TableFilesEnv env;
  auto store = std::move(Store::open(dir.path(), &env).value());
  write_level0(*store, 4);
  env.full.store(true);
  std::atomic<uint64_t> batches{0};
  // While `busy`, every look at the count finds a batch more: writes that never pause, whatever
  // the scheduler does to the test's threads.
  std::atomic<bool> busy{false};
  QuietCompaction quiet(
      *store, [&] { return busy.load() ? batches.fetch_add(1) + 1 : batches.load(); }, quick());
  quiet.start();
  REQUIRE(eventually([&] { return quiet.failures() == 1; }));
  std::this_thread::sleep_for(milliseconds(600));  // six pauses of 100 ms, no write among them
  CHECK(quiet.failures() == 1);
  CHECK(store->level0_files(Cf::kProjections) == 4);
  // Writes come (the disk has room again) and pause: it is tried again.
  env.full.store(false);
  batches.fetch_add(1);
  CHECK(eventually([&] { return quiet.compactions() + quiet.failures() >= 2; }));
  quiet.stop();
}

}  // namespace
}  // namespace gw
