// What Store::open refuses before RocksDB sees a data dir.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "store/store.h"
#include "store/store_test_util.h"

namespace gw {
namespace {

std::set<std::string> names_in(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    names.insert(entry.path().filename().string());
  }
  return names;
}

// A store holding `n` events, closed: in table files if `flushed`, else in the write-ahead log.
void write_events(const std::string& dir, int n, bool flushed) {
  auto store = Store::open(dir);
  REQUIRE(store.ok());
  for (int i = 0; i < n; ++i) {
    REQUIRE(store.value()
                ->db()
                ->Put(rocksdb::WriteOptions(), store.value()->cf(Cf::kEvents),
                      "e" + std::to_string(i), "event")
                .ok());
  }
  if (flushed) REQUIRE(store.value()->flush().ok());
}

// Without CURRENT, RocksDB made a new database over the old one's files: the first open failed on
// the old write-ahead log but wrote a CURRENT naming an empty MANIFEST, and the second served an
// empty store and deleted every table file (helper 113: 5,231 events gone). With the events in
// table files and no log holding any, the first open did so.
TEST_CASE("a dir holding a database's files but no CURRENT is refused, and nothing changes") {
  for (const bool flushed : {false, true}) {
    CAPTURE(flushed);
    testing::ScratchDir dir;
    write_events(dir.path(), 100, flushed);
    std::filesystem::remove(dir.path() + "/CURRENT");
    const std::set<std::string> before = names_in(dir.path());
    for (int attempt = 0; attempt < 2; ++attempt) {
      auto refused = Store::open(dir.path());
      REQUIRE_FALSE(refused.ok());
      CHECK(refused.error().code == Code::kUnavailable);
      CHECK(refused.error().detail.starts_with("it holds a database's files ("));
      CHECK(refused.error().detail.find(
                ") but no CURRENT, the file that names its MANIFEST: opened, it would become a "
                "new, empty database and those files would be deleted. Restore CURRENT (the "
                "name of the newest MANIFEST-NNNNNN file, and a newline) or a backup") !=
            std::string::npos);
      CHECK(names_in(dir.path()) == before);
    }
    // Restored, every event is there.
    std::string manifest;
    for (const std::string& name : before) {
      if (name.starts_with("MANIFEST-")) manifest = std::max(manifest, name);
    }
    REQUIRE_FALSE(manifest.empty());
    std::ofstream(dir.path() + "/CURRENT") << manifest << "\n";
    auto store = Store::open(dir.path());
    REQUIRE(store.ok());
    int events = 0;
    auto it = store.value()->iterate(Cf::kEvents);
    for (it->SeekToFirst(); it->Valid(); it->Next()) ++events;
    CHECK(events == 100);
  }
}

// Only RocksDB's names count: an operator's own files in a new data dir do not stop its first
// start.
TEST_CASE("a new data dir with other files, a .log of the operator's among them, opens") {
  testing::ScratchDir dir;
  for (const char* name : {"gatewayd.log", "tokens", "1.log.txt", "MANIFEST-x", "000007.sst~"}) {
    std::ofstream(dir.path() + "/" + name) << "not the database's\n";
  }
  CHECK_FALSE(Store::files_without_current(dir.path()).has_value());
  auto store = Store::open(dir.path());
  INFO((store.ok() ? std::string() : store.error().detail));
  CHECK(store.ok());
}

}  // namespace
}  // namespace gw
