#include "core/scratch_dir.h"

#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace gw {

namespace {

// Where temp_directory_path() looked, for its error: libstdc++ takes the first of these variables
// that is set (even to ""), and /tmp when none is.
std::string temp_directory_source() {
  for (const char* name : {"TMPDIR", "TMP", "TEMP", "TEMPDIR"}) {
    if (const char* value = ::secure_getenv(name)) {
      return "$" + std::string(name) + " (" + value + ")";
    }
  }
  return "/tmp";
}

}  // namespace

Result<std::string> make_scratch_dir(std::string_view prefix) {
  std::error_code ec;
  const std::filesystem::path base = std::filesystem::temp_directory_path(ec);
  if (ec) {
    return make_error(Code::kUnavailable, "cannot create a scratch directory under " +
                                              temp_directory_source() + ": " + ec.message());
  }
  std::string dir = (base / (std::string(prefix) + "XXXXXX")).string();
  if (::mkdtemp(dir.data()) == nullptr) {
    const int error = errno;
    return make_error(Code::kUnavailable, "cannot create a scratch directory under " +
                                              base.string() + ": " + std::strerror(error));
  }
  return dir;
}

}  // namespace gw
