// A private directory under /tmp that is removed, with everything in it, when the object dies.
// Not thread-safe to destroy while another thread uses the directory; otherwise a plain value.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace gw::testing {

// The bytes of the file at `path` ("" if it cannot be read).
std::string read_file(const std::string& path);

// The bytes of disk the file at `path` holds past its size (st_blocks counts 512-byte units): what
// a reservation (fallocate with FALLOC_FL_KEEP_SIZE) holds past its end, and the rest of its last
// block. Throws std::runtime_error if it cannot be looked at.
int64_t held_past_size(const std::string& path);

// What a change to a file shows: its size, modification and status change times (ns).
struct FileState {
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  bool operator==(const FileState&) const = default;
};
// Each entry of the directory `dir` (not followed if a symlink) by name, with its state: what an
// operation that must change nothing there keeps. Throws std::runtime_error if it cannot be read.
std::map<std::string, FileState> dir_state(const std::string& dir);

class TempDir {
 public:
  // Creates /tmp/<prefix>XXXXXX with mkdtemp. Throws std::runtime_error on failure.
  explicit TempDir(std::string_view prefix = "gatewayd-test-");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // path() + "/" + name; the file is not created.
  std::string file(std::string_view name) const;

 private:
  std::string path_;
};

}  // namespace gw::testing
