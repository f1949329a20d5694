#include "store/data_format.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <string_view>

#include "core/fsync_dir.h"

namespace gw {
namespace {

std::string mark_path(const std::string& dir) { return dir + "/" + kDataFormatFile; }

// The mark's text as a format number: decimal digits, and a newline after them or none. nullopt
// for anything else.
std::optional<uint64_t> format_number(std::string_view text) {
  if (text.ends_with('\n')) text.remove_suffix(1);
  uint64_t n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return n;
}

}  // namespace

Result<uint64_t> read_data_format(const std::string& dir) {
  const std::string path = mark_path(dir);
  // O_NONBLOCK: a FIFO put in its place would block the open.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) return uint64_t{0};
    if (errno == ENOTDIR) return make_error(Code::kUnavailable, "it is not a directory");
    return make_error(Code::kUnavailable, std::string("cannot read its ") + kDataFormatFile + ": " +
                                              std::strerror(errno));
  }
  struct stat st {};
  char text[32];
  ssize_t got = -1;
  int error = 0;
  if (::fstat(fd, &st) != 0) {
    error = errno;
  } else if (S_ISREG(st.st_mode)) {
    got = ::read(fd, text, sizeof text);
    if (got < 0) error = errno;
  }
  ::close(fd);
  if (error != 0) {
    return make_error(Code::kUnavailable, std::string("cannot read its ") + kDataFormatFile + ": " +
                                              std::strerror(error));
  }
  const auto format = got < 0 || static_cast<size_t>(got) == sizeof text
                          ? std::nullopt
                          : format_number(std::string_view(text, static_cast<size_t>(got)));
  if (!format) {
    return make_error(Code::kUnavailable,
                      std::string("its ") + kDataFormatFile +
                          " holds no data format number (gatewayd writes a decimal number and a "
                          "newline there): the dir was damaged; restore the file or a backup");
  }
  if (*format > kDataFormat) {
    return make_error(Code::kUnavailable,
                      "it holds data of format " + std::to_string(*format) + " (" +
                          kDataFormatFile + "), which a newer gatewayd wrote; this one reads " +
                          "formats up to " + std::to_string(kDataFormat) +
                          ". Run that gatewayd, or restore the backup taken before the upgrade");
  }
  return *format;
}

std::optional<Error> mark_data_format(const std::string& dir) {
  const std::string path = mark_path(dir);
  const std::string scratch = path + ".new";
  const std::string text = std::to_string(kDataFormat) + "\n";
  ::unlink(scratch.c_str());  // left by a run killed while it wrote the mark
  int error = 0;
  // Readable as RocksDB's files are (0644 under the umask): a user who may read the data dir
  // (gatewayctl check, backup) must read the mark first (helper 121: 0600 stopped them).
  const int fd = ::open(scratch.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    error = errno;
  } else {
    const ssize_t wrote = ::write(fd, text.data(), text.size());
    if (wrote != static_cast<ssize_t>(text.size())) error = wrote < 0 ? errno : EIO;
    if (error == 0 && ::fsync(fd) != 0) error = errno;
    ::close(fd);
    if (error == 0 && ::rename(scratch.c_str(), path.c_str()) != 0) error = errno;
    if (error != 0) ::unlink(scratch.c_str());
  }
  if (error == 0) {
    errno = 0;
    if (!fsync_dir(dir)) error = errno != 0 ? errno : EIO;
  }
  if (error != 0) {
    return make_error(Code::kUnavailable, "cannot write " + path + " (by way of " +
                                              kDataFormatFile + ".new): " + std::strerror(error));
  }
  return std::nullopt;
}

}  // namespace gw
