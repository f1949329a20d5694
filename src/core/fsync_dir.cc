#include "core/fsync_dir.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace gw {

bool fsync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::fsync(fd) == 0;
  const int error = errno;
  ::close(fd);
  errno = error;
  return ok;
}

namespace {

// `path` without the separators it ends in ("d/" names d); "/" stays.
std::filesystem::path without_trailing_separators(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

}  // namespace

std::vector<std::string> missing_directories(const std::string& dir) {
  std::vector<std::string> missing;
  std::error_code ec;
  for (std::filesystem::path p = without_trailing_separators(dir); !p.empty();
       p = p.parent_path()) {
    if (std::filesystem::exists(p, ec) || ec || p == p.parent_path()) break;
    missing.push_back(p.string());
  }
  return missing;
}

std::optional<std::string> sync_made_directories(const std::vector<std::string>& made) {
  for (const std::string& dir : made) {
    std::string parent = std::filesystem::path(dir).parent_path().string();
    if (parent.empty()) parent = ".";
    if (!fsync_dir(parent)) {
      std::string failed = "cannot sync " + parent + ", the directory " + dir +
                           " was made in: " + std::strerror(errno);
      std::error_code ec;
      for (const std::string& gone : made) std::filesystem::remove(gone, ec);  // if empty
      return failed;
    }
  }
  return std::nullopt;
}

}  // namespace gw
