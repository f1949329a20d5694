#include <doctest/doctest.h>

#include <filesystem>
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

TEST_CASE("fsync_parents syncs the directory each was made in, and names the one it could not") {
  testing::TempDir t;
  std::filesystem::create_directories(t.file("a/b"));
  CHECK(fsync_parents({t.file("a/b"), t.file("a")}) == std::nullopt);
  CHECK(fsync_parents({}) == std::nullopt);
  // A parent that is gone.
  auto failed = fsync_parents({t.file("gone/x")});
  REQUIRE(failed.has_value());
  CHECK(*failed == "cannot sync " + t.file("gone") + ", the directory " + t.file("gone/x") +
                       " was made in: No such file or directory");
}

}  // namespace
}  // namespace gw
