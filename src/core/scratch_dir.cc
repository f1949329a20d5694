#include "core/scratch_dir.h"

#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace gw {

Result<std::string> make_scratch_dir(std::string_view prefix) {
  std::error_code ec;
  const std::filesystem::path base = std::filesystem::temp_directory_path(ec);
  if (ec) {
    const char* tmpdir = ::getenv("TMPDIR");
    return make_error(Code::kUnavailable, "cannot create a scratch directory under $TMPDIR (" +
                                              std::string(tmpdir != nullptr ? tmpdir : "") +
                                              "): " + ec.message());
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
