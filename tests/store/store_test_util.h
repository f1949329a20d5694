// Helpers for tests on a real RocksDB in a temporary directory.
#pragma once

#include <pthread.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <rocksdb/env.h>

#include "core/clock.h"
#include "store/store.h"
#include "support/temp_dir.h"

namespace gw::testing {

class ScratchDir {
 public:
  ScratchDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "gwtest-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Cuts the MANIFEST of the closed store in `dir` at the end of the longest part that still reads
// and names no column family of events, as damage could; returns the whole MANIFEST's path and
// bytes, to put back. The cut is 0 bytes long if there is none (a REQUIRE in the caller).
struct CutManifest {
  std::string path;
  std::string whole;
  size_t cut = 0;
};
inline CutManifest cut_manifest_before_events(const std::string& dir) {
  CutManifest m;
  std::string current;
  std::ifstream(dir + "/CURRENT") >> current;
  m.path = dir + "/" + current;
  m.whole = read_file(m.path);
  for (m.cut = m.whole.size(); m.cut > 0; --m.cut) {
    std::ofstream(m.path, std::ios::binary | std::ios::trunc) << m.whole.substr(0, m.cut);
    const auto absent = Store::missing_column_families(dir);
    if (std::find(absent.begin(), absent.end(), "events") != absent.end()) break;
  }
  return m;
}

// Every projections key and value as a reader sees them: a counter back at 0 reads as none
// (is_spent_counter), so it is left out, as a replay of the log leaves it out.
inline std::map<std::string, std::string> projections_as_read(const Store& store) {
  std::map<std::string, std::string> out;
  auto it = store.iterate(Cf::kProjections);
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    const std::string_view key(it->key().data(), it->key().size());
    const std::string_view value(it->value().data(), it->value().size());
    if (!is_spent_counter(key, value)) out.emplace(key, value);
  }
  return out;
}

// Polls `condition` every millisecond until it holds or `timeout` passes; its last answer.
template <typename F>
bool eventually(F condition, std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return condition();
}

// A point in one of RocksDB's file calls (a test Env's) where threads wait while the gate is
// shut: the test shuts it, waits until a thread waits there, and opens it again.
class Gate {
 public:
  void shut() {
    std::lock_guard<std::mutex> lock(mu_);
    shut_ = true;
  }
  // Blocks until a thread waits in pass().
  void await_waiting() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return waiting_ > 0; });
  }
  void open() {
    std::lock_guard<std::mutex> lock(mu_);
    shut_ = false;
    cv_.notify_all();
  }
  // At the point: returns at once while the gate is open, else once it is opened.
  void pass() {
    std::unique_lock<std::mutex> lock(mu_);
    if (!shut_) return;
    ++waiting_;
    cv_.notify_all();
    cv_.wait(lock, [this] { return !shut_; });
    --waiting_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool shut_ = false;  // GUARDED_BY(mu_)
  int waiting_ = 0;    // GUARDED_BY(mu_)
};

// Wraps the real Env; while `fail` is set, reads of table files fail (a disk that cannot read):
// every thread's, or, if `only_thread` names one (set before `fail`, and not changed while reads
// may run), only the reads of threads of that name (name_this_thread).
class FailingReadsEnv final : public rocksdb::EnvWrapper {
 public:
  FailingReadsEnv() : rocksdb::EnvWrapper(rocksdb::Env::Default()) {}
  const char* Name() const override { return "FailingReadsEnv"; }
  std::atomic<bool> fail{false};
  std::string only_thread;

  rocksdb::Status NewRandomAccessFile(const std::string& name,
                                      std::unique_ptr<rocksdb::RandomAccessFile>* result,
                                      const rocksdb::EnvOptions& options) override {
    std::unique_ptr<rocksdb::RandomAccessFile> file;
    auto s = target()->NewRandomAccessFile(name, &file, options);
    if (s.ok() && name.ends_with(".sst")) file = std::make_unique<File>(std::move(file), *this);
    if (s.ok()) *result = std::move(file);
    return s;
  }

 private:
  class File final : public rocksdb::RandomAccessFileWrapper {
   public:
    File(std::unique_ptr<rocksdb::RandomAccessFile> target, const FailingReadsEnv& env)
        : rocksdb::RandomAccessFileWrapper(target.get()), owned_(std::move(target)), env_(env) {}
    rocksdb::Status Read(uint64_t offset, size_t n, rocksdb::Slice* result,
                         char* scratch) const override {
      if (failing()) return rocksdb::Status::IOError("injected: read failed");
      return rocksdb::RandomAccessFileWrapper::Read(offset, n, result, scratch);
    }
    rocksdb::Status MultiRead(rocksdb::ReadRequest* reqs, size_t num_reqs) override {
      if (failing()) return rocksdb::Status::IOError("injected: read failed");
      return rocksdb::RandomAccessFileWrapper::MultiRead(reqs, num_reqs);
    }

   private:
    bool failing() const {
      if (!env_.fail) return false;
      if (env_.only_thread.empty()) return true;
      char name[16] = {};
      pthread_getname_np(pthread_self(), name, sizeof name);
      return env_.only_thread == name;
    }
    std::unique_ptr<rocksdb::RandomAccessFile> owned_;
    const FailingReadsEnv& env_;
  };
};

// A scratch data dir with what a store whose table-file reads can fail needs: the Env that fails
// them and an id generator for its writes.
struct FailingReadsDir {
  ScratchDir dir;
  SystemClock clock;
  std::unique_ptr<IdGenerator> ids = make_system_id_generator(clock);
  FailingReadsEnv env;
  // The store in `dir`, on `env`.
  std::unique_ptr<Store> open() { return std::move(Store::open(dir.path(), &env).value()); }
};

}  // namespace gw::testing
