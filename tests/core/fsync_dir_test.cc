#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/fsync_dir.h"
#include "support/temp_dir.h"

namespace gw {
namespace {

using Dirs = std::vector<std::string>;

TEST_CASE("missing_directories names what create_directories would make, deepest first") {
  testing::TempDir t;
  CHECK(missing_directories(t.path()) == Dirs{});
  CHECK(missing_directories("/") == Dirs{});
  CHECK(missing_directories(t.file("a")) == Dirs{t.file("a")});
  CHECK(missing_directories(t.file("a/b/c")) == Dirs{t.file("a/b/c"), t.file("a/b"), t.file("a")});
  // "d/" names d.
  CHECK(missing_directories(t.file("a/b//")) == Dirs{t.file("a/b"), t.file("a")});
  std::filesystem::create_directories(t.file("a/b"));
  CHECK(missing_directories(t.file("a/b/c")) == Dirs{t.file("a/b/c")});
  // A relative one is the working directory's: its last parent is ".", which exists.
  CHECK(missing_directories("gatewayd-absent-dir/x") ==
        Dirs{"gatewayd-absent-dir/x", "gatewayd-absent-dir"});
}

TEST_CASE("sync_made_directories syncs where each was made; on a failure it takes them back") {
  testing::TempDir t;
  std::filesystem::create_directories(t.file("a/b"));
  CHECK(sync_made_directories({t.file("a/b"), t.file("a")}) == std::nullopt);
  CHECK(sync_made_directories({}) == std::nullopt);
  CHECK(std::filesystem::exists(t.file("a/b")));
  // A directory whose parent cannot be synced (gone): the message names both, and the directories
  // made that are still empty are removed, so that the next try makes and syncs them again; one
  // that holds something stays.
  std::filesystem::create_directories(t.file("full"));
  std::ofstream(t.file("full/file")) << "x";
  auto failed = sync_made_directories({t.file("a/b"), t.file("full"), t.file("gone/x")});
  REQUIRE(failed.has_value());
  CHECK(*failed == "cannot sync " + t.file("gone") + ", the directory " + t.file("gone/x") +
                       " was made in: No such file or directory");
  CHECK_FALSE(std::filesystem::exists(t.file("a/b")));
  CHECK(std::filesystem::exists(t.file("a")));  // not in the list
  CHECK(std::filesystem::exists(t.file("full/file")));
}

}  // namespace
}  // namespace gw
