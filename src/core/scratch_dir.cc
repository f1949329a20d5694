#include "core/scratch_dir.h"

#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace gw {

namespace {

// Where scratch directories go: the first of these variables that is set and not empty, as
// libstdc++'s temp_directory_path looks (which takes an empty one too, and then fails), else /tmp.
// `source` names it for an error.
struct TempBase {
  std::string path;
  std::string source;
};
TempBase temp_base() {
  for (const char* name : {"TMPDIR", "TMP", "TEMP", "TEMPDIR"}) {
    const char* value = ::secure_getenv(name);
    if (value != nullptr && *value != '\0') {
      return {value, "$" + std::string(name) + " (" + value + ")"};
    }
  }
  return {"/tmp", "/tmp"};
}

}  // namespace

Result<std::string> make_scratch_dir(std::string_view prefix) {
  const TempBase base = temp_base();
  std::error_code ec;
  if (!std::filesystem::is_directory(base.path, ec) && !ec) {
    ec = std::make_error_code(std::errc::not_a_directory);
  }
  if (ec) {
    return make_error(Code::kUnavailable, "cannot create a scratch directory under " + base.source +
                                              ": " + ec.message());
  }
  std::string dir = (std::filesystem::path(base.path) / (std::string(prefix) + "XXXXXX")).string();
  if (::mkdtemp(dir.data()) == nullptr) {
    const int error = errno;
    return make_error(Code::kUnavailable, "cannot create a scratch directory under " + base.path +
                                              ": " + std::strerror(error));
  }
  return dir;
}

}  // namespace gw
