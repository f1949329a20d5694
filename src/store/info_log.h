#pragma once

#include <rocksdb/env.h>

#include <cstdarg>
#include <cstdio>
#include <mutex>
#include <string>

namespace gw {

// RocksDB's info log, `LOG` in the data dir, written by gatewayd instead of RocksDB's own logger.
//
// - RocksDB's logger writes through a file writer that, in Debian's build (assertions on), aborts
//   the process on the next write after a failed one: on a full disk the first line logged after
//   the failure killed gatewayd, at run time and again at every start. A line this one cannot
//   write is dropped; the write after it is tried as usual.
// - An earlier run's log, and this run's once it reaches `max_bytes`, is renamed
//   `LOG.old.<microseconds>`, as RocksDB names its own, so RocksDB's `keep_log_file_num` removes
//   the oldest (when it purges obsolete files: at open, and then at most every 6 hours). An empty
//   log is not set aside, and one that cannot be renamed is appended to, never truncated. Store
//   makes sure the data dir is not in use before it makes one (the earlier run's log would be
//   that of a running gatewayd).
class InfoLog final : public rocksdb::Logger {
 public:
  // `max_bytes` 0: never rotated while running.
  explicit InfoLog(std::string path, size_t max_bytes = 0);
  ~InfoLog() override;
  InfoLog(const InfoLog&) = delete;
  InfoLog& operator=(const InfoLog&) = delete;

  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override;

 private:
  // Renames the current file to `LOG.old.<microseconds>` and opens a new one; under mu_.
  void rotate();

  const std::string path_;
  const size_t max_bytes_;
  std::mutex mu_;
  std::FILE* file_ = nullptr;
  size_t written_ = 0;  // bytes in the current file
};

}  // namespace gw
