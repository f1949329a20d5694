#include "admin/interrupt_cleanup.h"

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <mutex>
#include <thread>
#include <vector>

namespace gw::admin {

namespace {

std::mutex registry_mutex;
std::vector<std::string>& registry() {
  static auto* paths = new std::vector<std::string>();  // never destroyed: the waiter may run late
  return *paths;
}

// The interrupts gatewayctl was not started with ignored. One started ignored (`nohup` ignores
// SIGHUP, a shell's background job SIGINT) stays ignored: blocked and waited for, a signal is
// taken even if its action is to ignore it, and it ended the command (helper 136).
sigset_t interrupts() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction now {};
    if (sigaction(sig, nullptr, &now) == 0 && now.sa_handler == SIG_IGN) continue;
    sigaddset(&set, sig);
  }
  return set;
}

}  // namespace

void remove_on_interrupt() {
  const sigset_t set = interrupts();
  if (sigisemptyset(&set)) return;
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([set] {
    int sig = 0;
    while (sigwait(&set, &sig) != 0) {
    }
    {
      // Held to the end: a path registered or deregistered meanwhile waits, and nothing removes
      // a path twice.
      std::lock_guard<std::mutex> lock(registry_mutex);
      for (const auto& path : registry()) {
        // The process's other threads still run: one that makes a file in the directory between
        // remove_all's listing and its rmdir keeps the directory (a rebuild's table writers; a
        // test found rebuild.tmp left in 1 of 4 runs under ASan). Removed again until it is gone.
        for (int tries = 0; tries < 100; ++tries) {
          std::error_code ignored;
          std::filesystem::remove_all(path, ignored);
          if (!std::filesystem::exists(path, ignored)) break;
        }
      }
      signal(sig, SIG_DFL);
      sigset_t one;
      sigemptyset(&one);
      sigaddset(&one, sig);
      pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
      raise(sig);
    }
  }).detach();
}

RemovedOnInterrupt::RemovedOnInterrupt(std::string path) : path_(std::move(path)) {
  if (path_.empty()) return;
  std::lock_guard<std::mutex> lock(registry_mutex);
  registry().push_back(path_);
}

RemovedOnInterrupt::~RemovedOnInterrupt() {
  if (path_.empty()) return;
  std::lock_guard<std::mutex> lock(registry_mutex);
  auto& paths = registry();
  auto it = std::find(paths.begin(), paths.end(), path_);
  if (it != paths.end()) paths.erase(it);
}

}  // namespace gw::admin
