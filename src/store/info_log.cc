#include "store/info_log.h"

#include <sys/stat.h>
#include <sys/time.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <ctime>

namespace gw {

namespace {

// Renames `path` the way RocksDB names an old info log, unless it is missing or empty (a start
// that failed on a full disk leaves an empty one: set aside, a few of those would push the logs
// that say why out of the ones kept). Two renames in one microsecond would clash; the later name
// gets a larger number. False if the file is still there: it could not be renamed.
bool set_aside(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return errno == ENOENT;
  if (st.st_size == 0) return true;
  static std::mutex mu;
  static int64_t last = 0;
  std::lock_guard<std::mutex> lock(mu);
  int64_t micros = std::chrono::duration_cast<std::chrono::microseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  micros = std::max(micros, last + 1);
  last = micros;
  return ::rename(path.c_str(), (path + ".old." + std::to_string(micros)).c_str()) == 0;
}

// Opens `path` after set_aside(): a file that could not be set aside (`renamed` false) is
// appended to, never truncated.
std::FILE* open_after(bool renamed, const std::string& path) {
  return std::fopen(path.c_str(), renamed ? "we" : "ae");
}

}  // namespace

InfoLog::InfoLog(std::string path, size_t max_bytes)
    : path_(std::move(path)), max_bytes_(max_bytes) {
  file_ = open_after(set_aside(path_), path_);
}

InfoLog::~InfoLog() {
  if (file_ != nullptr) std::fclose(file_);
}

void InfoLog::rotate() {
  std::fclose(file_);
  // If it could not be set aside, it grows by another max_bytes_ before the next try.
  file_ = open_after(set_aside(path_), path_);
  written_ = 0;
}

void InfoLog::Logv(const char* format, va_list ap) {
  timeval now;
  gettimeofday(&now, nullptr);
  tm t;
  localtime_r(&now.tv_sec, &t);
  char stamp[32];
  int n = std::snprintf(stamp, sizeof stamp, "%04d/%02d/%02d-%02d:%02d:%02d.%06ld ",
                        t.tm_year + 1900, t.tm_mon + 1, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec,
                        static_cast<long>(now.tv_usec));
  // Statistics dumps run to several KB; like RocksDB's logger, keep up to 64 KB of a line.
  std::string line(stamp, std::max(n, 0));
  va_list copy;
  va_copy(copy, ap);
  int m = std::vsnprintf(nullptr, 0, format, copy);
  va_end(copy);
  if (m < 0) return;
  const size_t at = line.size();
  line.resize(at + std::min(m, 65535) + 1);
  std::vsnprintf(line.data() + at, line.size() - at, format, ap);
  line.pop_back();  // vsnprintf's terminating zero
  if (line.empty() || line.back() != '\n') line.push_back('\n');
  std::lock_guard<std::mutex> lock(mu_);
  // A file that could not be opened (or reopened at a rotation) is tried again at the next line.
  if (file_ == nullptr) file_ = std::fopen(path_.c_str(), "ae");
  if (file_ == nullptr) return;
  if (max_bytes_ != 0 && written_ > 0 && written_ + line.size() > max_bytes_) {
    rotate();
    if (file_ == nullptr) return;
  }
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0) {
    std::clearerr(file_);
    return;
  }
  written_ += line.size();
}

}  // namespace gw
