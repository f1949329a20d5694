// The data format mark (store/data_format.h): written at the first open, and a dir of a newer
// format refused before anything in it changes.
#include "store/data_format.h"

#include <doctest/doctest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "admin/read_only.h"
#include "store/store.h"
#include "store/store_test_util.h"
#include "support/temp_dir.h"

namespace gw {
namespace {

std::string mark_of(const std::string& dir) {
  return testing::read_file(dir + "/" + kDataFormatFile);
}

void set_mark(const std::string& dir, const std::string& text) {
  std::ofstream(dir + "/" + kDataFormatFile, std::ios::trunc) << text;
}

// A closed store holding one event.
void make_store(const std::string& dir) {
  auto store = Store::open(dir);
  REQUIRE(store.ok());
  REQUIRE(store.value()
              ->db()
              ->Put(rocksdb::WriteOptions(), store.value()->cf(Cf::kEvents), "e", "event")
              .ok());
}

constexpr char kNewer[] =
    "it holds data of format 2 (GATEWAYD-FORMAT), which a newer gatewayd wrote; this one reads "
    "formats up to 1. Run that gatewayd, or restore the backup taken before the upgrade";

TEST_CASE("a data dir gets this release's data format mark at its first open, and keeps it") {
  testing::ScratchDir dir;
  make_store(dir.path());
  CHECK(mark_of(dir.path()) == "1\n");
  // Readable by whoever may read the database's files (helper 121: at 0600, a group allowed to
  // run gatewayctl check could not).
  struct stat st {
  }, current{};
  REQUIRE(::stat((dir.path() + "/GATEWAYD-FORMAT").c_str(), &st) == 0);
  REQUIRE(::stat((dir.path() + "/CURRENT").c_str(), &current) == 0);
  CHECK((st.st_mode & 0777) == (current.st_mode & 0777));
  CHECK_FALSE(std::filesystem::exists(dir.path() + "/GATEWAYD-FORMAT.new"));
  // An open of a marked dir writes no mark again.
  const auto marked = testing::dir_state(dir.path())["GATEWAYD-FORMAT"];
  REQUIRE(Store::open(dir.path()).ok());
  CHECK(testing::dir_state(dir.path())["GATEWAYD-FORMAT"] == marked);
}

TEST_CASE("a dir of a release before the mark, or of an older format, is marked at its next open") {
  for (const char* old : {"", "0\n"}) {
    CAPTURE(old);
    testing::ScratchDir dir;
    make_store(dir.path());
    if (*old == '\0') {
      REQUIRE(std::filesystem::remove(dir.path() + "/GATEWAYD-FORMAT"));
    } else {
      set_mark(dir.path(), old);
    }
    // A mark a killed run left half written goes.
    std::ofstream(dir.path() + "/GATEWAYD-FORMAT.new") << "9";
    auto store = Store::open(dir.path());
    REQUIRE(store.ok());
    CHECK(mark_of(dir.path()) == "1\n");
    CHECK_FALSE(std::filesystem::exists(dir.path() + "/GATEWAYD-FORMAT.new"));
    auto event = store.value()->get(Cf::kEvents, "e");
    REQUIRE(event.ok());
    CHECK(event.value() == std::optional<std::string>("event"));
  }
}

TEST_CASE("a dir of a newer data format is refused, for writing or reading, and nothing changes") {
  testing::ScratchDir dir;
  make_store(dir.path());
  set_mark(dir.path(), "2\n");
  const auto before = testing::dir_state(dir.path());
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto refused = Store::open(dir.path());
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().code == Code::kUnavailable);
    CHECK(refused.error().detail == kNewer);
    auto read = admin::ReadOnlyStore::open(dir.path());
    REQUIRE_FALSE(read.ok());
    CHECK(read.error().detail == "cannot read " + dir.path() + ": " + kNewer);
    CHECK(testing::dir_state(dir.path()) == before);
  }
  // Nor does a copy without its LOCK get one (helper 121).
  REQUIRE(std::filesystem::remove(dir.path() + "/LOCK"));
  const auto unlocked = testing::dir_state(dir.path());
  CHECK(Store::open(dir.path()).error().detail == kNewer);
  CHECK(testing::dir_state(dir.path()) == unlocked);
  // The format it reads, without a newline too, opens.
  set_mark(dir.path(), "1");
  CHECK(Store::open(dir.path()).ok());
  CHECK(mark_of(dir.path()) == "1");
}

TEST_CASE("a mark that holds no format number is refused as damage") {
  const std::string damaged =
      "its GATEWAYD-FORMAT holds no data format number (gatewayd writes a decimal number and a "
      "newline there): the dir was damaged; restore the file or a backup";
  for (const std::string& text :
       std::vector<std::string>{"", "\n", "x\n", "1\r\n", "1 \n", " 1\n", "-1\n", "1\n\n", "+1\n",
                                "0x1\n", "99999999999999999999\n", std::string(40, '1')}) {
    CAPTURE(text);
    testing::ScratchDir dir;
    make_store(dir.path());
    set_mark(dir.path(), text);
    auto refused = Store::open(dir.path());
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().detail == damaged);
    CHECK(mark_of(dir.path()) == text);
  }
  // Something other than a file in its place: never read, and no wait on a FIFO.
  for (const bool fifo : {false, true}) {
    CAPTURE(fifo);
    testing::ScratchDir dir;
    make_store(dir.path());
    const std::string mark = dir.path() + "/GATEWAYD-FORMAT";
    REQUIRE(std::filesystem::remove(mark));
    if (fifo) {
      REQUIRE(::mkfifo(mark.c_str(), 0600) == 0);
    } else {
      std::filesystem::create_directory(mark);
    }
    auto refused = Store::open(dir.path());
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().detail == damaged);
  }
}

// The mark is the first thing an open reads: a data dir that is a file was "cannot read its
// GATEWAYD-FORMAT: Not a directory".
TEST_CASE("a data dir that is a file is said to be no directory") {
  testing::ScratchDir dir;
  const std::string file = dir.path() + "/file";
  std::ofstream(file) << "x";
  auto refused = Store::open(file);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().detail == "it is not a directory");
}

TEST_CASE("an open that cannot write the mark fails and says why") {
  testing::ScratchDir dir;
  make_store(dir.path());
  REQUIRE(std::filesystem::remove(dir.path() + "/GATEWAYD-FORMAT"));
  // A directory where the mark is written first: neither removed nor replaced.
  std::filesystem::create_directory(dir.path() + "/GATEWAYD-FORMAT.new");
  auto refused = Store::open(dir.path());
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().detail == "cannot write " + dir.path() +
                                      "/GATEWAYD-FORMAT (by way of GATEWAYD-FORMAT.new): File "
                                      "exists");
  CHECK_FALSE(std::filesystem::exists(dir.path() + "/GATEWAYD-FORMAT"));
  // Once it can, the next open marks the dir, which lost nothing.
  std::filesystem::remove(dir.path() + "/GATEWAYD-FORMAT.new");
  auto store = Store::open(dir.path());
  REQUIRE(store.ok());
  CHECK(mark_of(dir.path()) == "1\n");
  CHECK(store.value()->get(Cf::kEvents, "e").value() == std::optional<std::string>("event"));
}

}  // namespace
}  // namespace gw
