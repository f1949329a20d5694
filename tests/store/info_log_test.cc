// gatewayd's RocksDB info log (store/info_log.h): set aside at a size, old ones pruned by RocksDB.
#include "store/info_log.h"

#include <doctest/doctest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "store/store.h"
#include "store/store_test_util.h"

namespace gw {
namespace {

namespace fs = std::filesystem;

// The logs set aside in `dir` (`LOG.old.<microseconds>`), oldest first.
std::vector<fs::path> old_logs(const std::string& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename().string().starts_with("LOG.old.")) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end(), [](const fs::path& a, const fs::path& b) {
    return std::stoll(a.filename().string().substr(8)) <
           std::stoll(b.filename().string().substr(8));
  });
  return out;
}

std::string read_all(const fs::path& p) {
  std::ostringstream text;
  text << std::ifstream(p, std::ios::binary).rdbuf();
  return text.str();
}

void log_line(rocksdb::Logger& log, const char* format, ...) {
  va_list ap;
  va_start(ap, format);
  log.Logv(format, ap);
  va_end(ap);
}

}  // namespace

TEST_CASE("the info log is set aside when it reaches its size, and no line is lost or split") {
  testing::ScratchDir dir;
  const std::string path = dir.path() + "/LOG";
  { std::ofstream(path) << "an earlier run's log\n"; }
  {
    InfoLog log(path, 1000);
    // About 70 bytes a line with the time stamp: 14 lines a file.
    for (int i = 0; i < 100; ++i)
      log_line(log, "line %03d of the test, padded to a fixed width", i);
    // A line longer than the limit still goes out whole, into a file of its own.
    log_line(log, "%s", std::string(3000, 'x').c_str());
    log_line(log, "the last line");
  }
  const auto old = old_logs(dir.path());
  REQUIRE(old.size() >= 8);
  CHECK(read_all(old.front()) == "an earlier run's log\n");
  std::string all;
  for (size_t i = 1; i < old.size(); ++i) {
    const std::string part = read_all(old[i]);
    INFO("file ", old[i].string());
    CHECK(!part.empty());
    CHECK(part.back() == '\n');
    // Over the limit only by a line that was alone in its file.
    CHECK((part.size() <= 1000 || std::count(part.begin(), part.end(), '\n') == 1));
    all += part;
  }
  const std::string current = read_all(path);
  CHECK(current.ends_with(" the last line\n"));
  all += current;
  for (int i = 0; i < 100; ++i) {
    char expected[80];
    std::snprintf(expected, sizeof expected, " line %03d of the test, padded to a fixed width\n",
                  i);
    INFO("line ", i);
    CHECK(all.find(expected) != std::string::npos);
  }
  CHECK(all.find(std::string(3000, 'x') + "\n") != std::string::npos);
  // In order: the lines of each file follow those of the file set aside before it.
  CHECK(all.find(" line 000 ") < all.find(" line 099 "));
  CHECK(all.find(" line 099 ") < all.find(" the last line"));
}

TEST_CASE("RocksDB keeps only the newest info logs set aside, across starts") {
  testing::ScratchDir dir;
  const std::string data = dir.path() + "/data";
  const int starts = static_cast<int>(Store::kInfoLogsKept) + 4;
  for (int i = 0; i < starts; ++i) {
    auto store = Store::open(data);
    REQUIRE(store.ok());
  }
  // Every start set the previous start's LOG aside; RocksDB removed all but the newest ones
  // (its count includes the current LOG).
  CHECK(old_logs(data).size() == Store::kInfoLogsKept - 1);
  CHECK(fs::exists(data + "/LOG"));
}

// A second open of a data dir in use set the running store's LOG aside before RocksDB refused the
// LOCK, so the running store went on writing into a file among those RocksDB deletes first.
TEST_CASE("an open that finds the data dir in use leaves its info log alone") {
  testing::ScratchDir dir;
  const std::string data = dir.path() + "/data";
  auto running = Store::open(data);
  REQUIRE(running.ok());
  struct stat before {};
  REQUIRE(::stat((data + "/LOG").c_str(), &before) == 0);
  auto second = Store::open(data);
  REQUIRE_FALSE(second.ok());
  CHECK(second.error().detail.starts_with(Store::kInUse));
  CHECK(old_logs(data).empty());
  struct stat after {};
  REQUIRE(::stat((data + "/LOG").c_str(), &after) == 0);
  CHECK(after.st_ino == before.st_ino);
}

// An empty LOG (what a start on a full disk leaves) is not worth one of the places kept.
TEST_CASE("an empty info log is not set aside") {
  testing::ScratchDir dir;
  const std::string path = dir.path() + "/LOG";
  { std::ofstream create(path); }
  {
    InfoLog log(path);
    log_line(log, "the new run");
  }
  CHECK(old_logs(dir.path()).empty());
  CHECK(read_all(path).ends_with(" the new run\n"));
}

// When the rename failed (here: a directory its user may not write), the reopen truncated the
// file it meant to keep, at every rotation and at start.
TEST_CASE("a log that cannot be set aside is appended to, never truncated") {
  testing::ScratchDir dir;
  const std::string sub = dir.path() + "/logs";
  REQUIRE(fs::create_directory(sub));
  // Root may rename anywhere: the logging runs in a child as nobody, in a directory of its own.
  const bool root = ::geteuid() == 0;
  if (root) {
    REQUIRE(::chmod(dir.path().c_str(), 0755) == 0);
    REQUIRE(::chown(sub.c_str(), 65534, 65534) == 0);
  }
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    if (root && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(2);
    {
      InfoLog log(sub + "/LOG", 1000);  // about 14 lines a file
      for (int i = 0; i < 10; ++i) log_line(log, "before %02d, padded to a fixed width", i);
      if (::chmod(sub.c_str(), 0555) != 0) ::_exit(3);
      for (int i = 0; i < 30; ++i) log_line(log, "during %02d, padded to a fixed width", i);
    }
    {
      InfoLog again(sub + "/LOG", 1000);  // a start that cannot set the last run's log aside
      log_line(again, "after the restart");
    }
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  REQUIRE(::chmod(sub.c_str(), 0755) == 0);
  CHECK(old_logs(sub).empty());
  const std::string text = read_all(sub + "/LOG");
  CHECK(std::count(text.begin(), text.end(), '\n') == 41);
  CHECK(text.find(" before 00,") != std::string::npos);
  CHECK(text.find(" during 29,") != std::string::npos);
  CHECK(text.ends_with(" after the restart\n"));
}

}  // namespace gw
