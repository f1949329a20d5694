// Helpers for tests on a real RocksDB in a temporary directory.
#pragma once

#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <thread>

#include "store/store.h"

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

}  // namespace gw::testing
