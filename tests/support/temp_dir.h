// A private directory under /tmp that is removed, with everything in it, when the object dies.
// Not thread-safe to destroy while another thread uses the directory; otherwise a plain value.
#pragma once

#include <string>
#include <string_view>

namespace gw::testing {

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
