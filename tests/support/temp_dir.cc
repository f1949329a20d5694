#include "support/temp_dir.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <vector>

#include <stdlib.h>  // mkdtemp
#include <sys/stat.h>

namespace gw::testing {

std::string read_file(const std::string& path) {
  std::ostringstream text;
  text << std::ifstream(path, std::ios::binary).rdbuf();
  return text.str();
}

int64_t held_past_size(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    throw std::runtime_error("stat(" + path + "): " + std::strerror(errno));
  }
  return static_cast<int64_t>(st.st_blocks) * 512 - st.st_size;
}

std::map<std::string, FileState> dir_state(const std::string& dir) {
  std::map<std::string, FileState> out;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    struct stat st {};
    if (::lstat(entry.path().c_str(), &st) != 0) {
      throw std::runtime_error("lstat(" + entry.path().string() + "): " + std::strerror(errno));
    }
    out[entry.path().filename().string()] = {static_cast<uint64_t>(st.st_size),
                                             st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec,
                                             st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec};
  }
  return out;
}

TempDir::TempDir(std::string_view prefix) {
  std::string pattern = "/tmp/" + std::string(prefix) + "XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) == nullptr) {
    throw std::runtime_error("mkdtemp(" + pattern + "): " + std::strerror(errno));
  }
  path_ = buf.data();
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string TempDir::file(std::string_view name) const { return path_ + "/" + std::string(name); }

}  // namespace gw::testing
