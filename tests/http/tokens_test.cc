#include "http/tokens.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/temp_dir.h"

namespace gw::http {
namespace {

// Takes every descriptor this process may still open (its soft limit lowered to a few above
// the lowest free one) and gives them back, and the limit, when it dies.
class DescriptorsTaken {
 public:
  DescriptorsTaken() {
    REQUIRE(::getrlimit(RLIMIT_NOFILE, &saved_) == 0);
    const int lowest = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    REQUIRE(lowest >= 0);
    ::close(lowest);
    rlimit lowered = saved_;
    lowered.rlim_cur = static_cast<rlim_t>(lowest) + 16;
    REQUIRE(::setrlimit(RLIMIT_NOFILE, &lowered) == 0);
    for (int fd; (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) taken_.push_back(fd);
    REQUIRE(errno == EMFILE);
  }
  ~DescriptorsTaken() {
    for (int fd : taken_) ::close(fd);
    ::setrlimit(RLIMIT_NOFILE, &saved_);
  }
  DescriptorsTaken(const DescriptorsTaken&) = delete;
  DescriptorsTaken& operator=(const DescriptorsTaken&) = delete;

 private:
  rlimit saved_{};
  std::vector<int> taken_;
};

// The file is looked at again at most every 250 ms while known tokens come.
void let_the_next_check_come() { std::this_thread::sleep_for(std::chrono::milliseconds(300)); }

// A tokens file with one token of team_a, named first, and a store that has read it.
struct OneToken {
  OneToken() : path(dir.file("tokens")), first(make("team_a", "first")), store(path) {
    REQUIRE(store.find(first).has_value());
  }
  std::string make(const std::string& tenant, const std::string& name) {
    auto token = create_token(path, tenant, name);
    REQUIRE(token.ok());
    return token.value();
  }
  testing::TempDir dir;
  std::string path;
  std::string first;
  TokenStore store;
};

// A lookup's read of the map raced a reload's replacement of it in libstdc++ 12's
// std::atomic<std::shared_ptr> (its load releases its lock bit with a relaxed store): reported by
// ThreadSanitizer under token churn (helper 120). Lookups on several threads while every missed
// token forces a reload: each finds the token that is in every version of the file, and the ones
// made meanwhile once they are there.
TEST_CASE("lookups on several threads while reloads replace the tokens find what the file holds") {
  OneToken t;
  std::atomic<bool> done{false};
  std::atomic<int> missed{0};
  std::atomic<int> lookups{0};
  std::vector<std::thread> readers;
  for (int i = 0; i < 3; ++i) {
    readers.emplace_back([&] {
      while (!done.load()) {
        if (!t.store.find(t.first)) missed.fetch_add(1);
        t.store.find("gw_unknown");  // a miss: reloads the file if it changed
        lookups.fetch_add(1);
      }
    });
  }
  std::vector<std::string> made;
  for (int i = 0; i < 40; ++i) made.push_back(t.make("team_b", "n" + std::to_string(i)));
  done.store(true);
  for (auto& r : readers) r.join();
  CHECK(missed.load() == 0);
  CHECK(lookups.load() > 0);
  for (const auto& token : made) CHECK(t.store.find(token).has_value());
}

TEST_CASE("out of descriptors, the tokens read before stay accepted until the file can be read") {
  OneToken file;
  // The file changes, so the next check reads it again.
  const std::string second = file.make("team_b", "second");
  {
    DescriptorsTaken taken;
    let_the_next_check_come();
    auto known = file.store.find(file.first);
    REQUIRE(known.has_value());
    CHECK(known->tenant == "team_a");
    CHECK(known->name == "first");
    // The new token is in a file that cannot be read yet.
    CHECK_FALSE(file.store.find(second).has_value());
  }
  auto added = file.store.find(second);
  REQUIRE(added.has_value());
  CHECK(added->tenant == "team_b");
  CHECK(file.store.find(file.first).has_value());
}

// The tokens read before stayed accepted for as long as the shortage lasted, a token taken out of
// the file meanwhile with them (helper 44). Now for at most the store's keep_last_for.
TEST_CASE("out of descriptors for longer than the store keeps the last tokens, none is accepted") {
  testing::TempDir dir;
  const std::string path = dir.file("tokens");
  auto removed = create_token(path, "team_a", "removed");
  REQUIRE(removed.ok());
  TokenStore store(path, std::chrono::milliseconds(500));
  REQUIRE(store.find(removed.value()).has_value());
  {
    std::ofstream(path, std::ios::trunc) << "";  // the token is taken out of the file
    DescriptorsTaken taken;
    let_the_next_check_come();
    CHECK(store.find(removed.value()).has_value());  // the shortage has just begun
    std::this_thread::sleep_for(std::chrono::milliseconds(600));
    CHECK_FALSE(store.find(removed.value()).has_value());
  }
  CHECK_FALSE(store.find(removed.value()).has_value());
  auto added = create_token(path, "team_b", "added");
  REQUIRE(added.ok());
  CHECK(store.find(added.value()).has_value());
}

// A full disk took part of the new line (up to the end of its last block): the file ended in a
// line without a name or a newline, which gatewayd named at every read (helper 44). The limit
// on file size stands in for the full disk here.
TEST_CASE("a token that cannot be written leaves the tokens file as it was, and says why") {
  OneToken file;
  auto contents = [&] {
    std::ostringstream read;
    read << std::ifstream(file.path).rdbuf();
    return read.str();
  };
  const std::string before = contents();
  struct sigaction ignore {
  }, saved{};
  ignore.sa_handler = SIG_IGN;
  REQUIRE(::sigaction(SIGXFSZ, &ignore, &saved) == 0);  // past the limit: EFBIG, not the signal
  rlimit limit{};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &limit) == 0);
  const rlimit unlimited = limit;
  limit.rlim_cur = before.size() + 10;
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &limit) == 0);
  auto added = create_token(file.path, "team_b", "second");
  ::setrlimit(RLIMIT_FSIZE, &unlimited);
  ::sigaction(SIGXFSZ, &saved, nullptr);
  REQUIRE_FALSE(added.ok());
  CHECK(added.error().code == Code::kUnavailable);
  CHECK(added.error().detail == "cannot write " + file.path + ": File too large");
  CHECK(contents() == before);
  // The next one goes on the line after the last whole one.
  const std::string next = file.make("team_b", "third");
  CHECK(file.store.find(next).has_value());
  CHECK(file.store.find(file.first).has_value());
}

TEST_CASE("a revoke that cannot write the file revokes nothing and leaves no file behind") {
  OneToken file;
  const std::string kept = file.make("team_b", "kept");
  std::ostringstream read;
  read << std::ifstream(file.path).rdbuf();
  const std::string before = read.str();
  const std::string scratch = file.path + ".revoke-test";
  struct sigaction ignore {
  }, saved{};
  ignore.sa_handler = SIG_IGN;
  REQUIRE(::sigaction(SIGXFSZ, &ignore, &saved) == 0);
  rlimit limit{};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &limit) == 0);
  const rlimit unlimited = limit;
  limit.rlim_cur = 10;  // the new file's one line does not fit
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &limit) == 0);
  auto revoked = revoke_tokens(file.path, "team_a", "first", scratch);
  ::setrlimit(RLIMIT_FSIZE, &unlimited);
  ::sigaction(SIGXFSZ, &saved, nullptr);
  REQUIRE_FALSE(revoked.ok());
  CHECK(revoked.error().code == Code::kUnavailable);
  CHECK(revoked.error().detail ==
        "cannot write " + file.path + ": File too large; no token was revoked");
  std::ostringstream after;
  after << std::ifstream(file.path).rdbuf();
  CHECK(after.str() == before);
  CHECK(::access(scratch.c_str(), F_OK) != 0);
  let_the_next_check_come();
  CHECK(file.store.find(file.first).has_value());
  // Then it goes, and the other stays.
  auto done = revoke_tokens(file.path, "team_a", "first", scratch);
  REQUIRE(done.ok());
  CHECK(done.value() == 1);
  let_the_next_check_come();
  CHECK_FALSE(file.store.find(file.first).has_value());
  CHECK(file.store.find(kept).has_value());
}

// The scratch file's name holds gatewayctl's process id, which a later gatewayctl may have too (in
// another PID namespace): one left by a gatewayctl killed halfway made every revoke of that id
// fail with "File exists" (helper 75).
TEST_CASE("a revoke writes over a scratch file a killed revoke left") {
  OneToken file;
  const std::string scratch = file.path + ".revoke-7";
  std::ofstream(scratch) << "left by a killed revoke";
  auto done = revoke_tokens(file.path, "team_a", "first", scratch);
  REQUIRE(done.ok());
  CHECK(done.value() == 1);
  CHECK(::access(scratch.c_str(), F_OK) != 0);
  let_the_next_check_come();
  CHECK_FALSE(file.store.find(file.first).has_value());
}

TEST_CASE("a tokens file that is gone accepts no token, though the tokens read before were") {
  OneToken file;
  REQUIRE(::unlink(file.path.c_str()) == 0);
  let_the_next_check_come();
  CHECK_FALSE(file.store.find(file.first).has_value());
}

// Swaps `other` in at `path` and back, again and again, until stopped: as someone who may write
// the directory of the tokens file (not the file) can, between a check of the file and its read.
class Swapper {
 public:
  Swapper(const std::string& path, const std::string& other) {
    thread_ = std::thread([this, path, other] {
      const std::string link = other + ".link";
      const std::string held = path + ".held";
      while (!stop_.load()) {
        if (::link(other.c_str(), link.c_str()) != 0) continue;
        ::rename(path.c_str(), held.c_str());
        ::rename(link.c_str(), path.c_str());
        ::rename(held.c_str(), path.c_str());
      }
    });
  }
  ~Swapper() {
    stop_.store(true);
    thread_.join();
  }
  Swapper(const Swapper&) = delete;
  Swapper& operator=(const Swapper&) = delete;

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Sends this process's stderr to /dev/null while it lives: every change of why no token is
// accepted is said there, and the swaps below make thousands of them.
class StderrSilenced {
 public:
  StderrSilenced() : saved_(::dup(STDERR_FILENO)) {
    std::fflush(stderr);
    const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null >= 0) {
      ::dup2(null, STDERR_FILENO);
      ::close(null);
    }
  }
  ~StderrSilenced() {
    std::fflush(stderr);
    if (saved_ >= 0) {
      ::dup2(saved_, STDERR_FILENO);
      ::close(saved_);
    }
  }
  StderrSilenced(const StderrSilenced&) = delete;
  StderrSilenced& operator=(const StderrSilenced&) = delete;

 private:
  int saved_;
};

// The file was checked by its path (stat) and then opened by its path again: a file others may
// write, renamed in between, gave its tokens (helper 156: 80,468 of 91,800 requests with a token
// of a file owned by another user). The file read is the file checked now.
TEST_CASE("a file swapped in between the check and the read gives no token") {
  OneToken t;
  const std::string other = t.dir.file("other");
  auto planted = create_token(other, "team_victim", "planted");
  REQUIRE(planted.ok());
  REQUIRE(::chmod(other.c_str(), 0666) == 0);  // others may write it: no token may come from it
  int accepted = 0;
  {
    StderrSilenced quiet;
    Swapper swapper(t.path, other);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (std::chrono::steady_clock::now() < until) {
      if (t.store.find(planted.value())) ++accepted;
    }
  }
  CHECK(accepted == 0);
  let_the_next_check_come();
  CHECK(t.store.find(t.first).has_value());
}

// A FIFO renamed in between was opened blocking, waiting for a writer that never came, with the
// reload's lock held: every request behind it hung for good (helper 156).
TEST_CASE("a FIFO swapped in between the check and the read holds no lookup") {
  OneToken t;
  const std::string fifo = t.dir.file("fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::atomic<bool> finished{false};
  std::thread lookups;
  {
    StderrSilenced quiet;
    Swapper swapper(t.path, fifo);
    lookups = std::thread([&] {
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
      while (std::chrono::steady_clock::now() < until) t.store.find("gw_unknown");
      finished.store(true);
    });
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!finished.load() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  CHECK(finished.load());
  // A lookup held in the FIFO's open is let go by a writer, which goes at once.
  for (int i = 0; i < 1000 && !finished.load(); ++i) {
    const int writer = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (writer >= 0) ::close(writer);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  lookups.join();
  let_the_next_check_come();
  CHECK(t.store.find(t.first).has_value());
}

}  // namespace
}  // namespace gw::http
