// The disk's synced appends alone, as scripts/bench.sh reports them beside gatewayd's batch
// writes: appends a record of --record-kb KB (40, about one batch's write-ahead log record at 64
// connections) to a file in --dir and calls fdatasync, in a loop for --seconds, on one thread, and
// prints how long the syncs took (each append and its sync). A new file is begun every 64 MB, the
// last one removed, as RocksDB begins a new log. With --busy-cpu N a second thread spins on CPU N
// at SCHED_IDLE, the lowest priority Linux has: the kernel runs it only when nothing else wants
// that CPU, so it takes no CPU time from the syncing thread, and what it changes in the syncs'
// times is the machine's, not this process's (on a virtual machine, a busy virtual CPU can slow
// the host's handling of the disk).
//
//   g++ -O2 -std=c++20 -pthread scripts/bench/sync_probe.cc -o build-bench/sync_probe
//   build-bench/sync_probe --dir DIR [--seconds 5] [--record-kb 40] [--busy-cpu N]
//     prints: sync_probe: syncs=N p50_ms=X p99_ms=X p999_ms=X max_ms=X over_10ms=N
//     over_50ms=N busy_cpu=N|none
//     exit 1 when a write, sync or file operation fails; 2 on a bad argument.
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kFileBytes = 64 << 20;

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "sync_probe: %s\nusage: sync_probe --dir DIR [--seconds N] [--record-kb N] "
               "[--busy-cpu N]\n",
               why);
  std::exit(2);
}

[[noreturn]] void fail(const char* what, const std::string& path) {
  std::fprintf(stderr, "sync_probe: %s %s: %s\n", what, path.c_str(), std::strerror(errno));
  std::exit(1);
}

int number(std::string_view flag, const char* text, int min, int max) {
  int value = 0;
  const std::string_view s(text);
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end != s.data() + s.size() || value < min || value > max) {
    usage((std::string(flag) + " needs a whole number from " + std::to_string(min) + " to " +
           std::to_string(max))
              .c_str());
  }
  return value;
}

// Spins on `cpu` at SCHED_IDLE until `stop`. Exits the process when the CPU cannot be had: a
// probe that silently measured without its load would report an idle machine.
void spin(int cpu, const std::atomic<bool>& stop) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (int e = pthread_setaffinity_np(pthread_self(), sizeof set, &set); e != 0) {
    errno = e;
    fail("cannot pin the busy thread to CPU", std::to_string(cpu));
  }
  sched_param lowest{};
  if (int e = pthread_setschedparam(pthread_self(), SCHED_IDLE, &lowest); e != 0) {
    errno = e;
    fail("cannot give SCHED_IDLE to the busy thread on CPU", std::to_string(cpu));
  }
  while (!stop.load(std::memory_order_relaxed)) {
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir;
  int seconds = 5;
  int record_kb = 40;
  std::optional<int> busy_cpu;
  const int cpus = static_cast<int>(std::thread::hardware_concurrency());
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (i + 1 == argc) usage((std::string(flag) + " needs a value").c_str());
    const char* value = argv[++i];
    if (flag == "--dir") {
      dir = value;
    } else if (flag == "--seconds") {
      seconds = number(flag, value, 1, 3600);
    } else if (flag == "--record-kb") {
      record_kb = number(flag, value, 1, 16384);
    } else if (flag == "--busy-cpu") {
      busy_cpu = number(flag, value, 0, std::max(cpus, 1) - 1);
    } else {
      usage(("unknown flag " + std::string(flag)).c_str());
    }
  }
  if (dir.empty()) usage("--dir is required");

  std::atomic<bool> stop{false};
  std::thread busy;
  if (busy_cpu) busy = std::thread(spin, *busy_cpu, std::cref(stop));

  const std::string path = dir + "/sync_probe." + std::to_string(getpid());
  const std::vector<char> record(static_cast<size_t>(record_kb) << 10, 'x');
  std::vector<double> ms;
  ms.reserve(static_cast<size_t>(seconds) * 20000);
  int fd = -1;
  size_t in_file = kFileBytes;  // begins the first file
  const auto end = Clock::now() + std::chrono::seconds(seconds);
  while (Clock::now() < end) {
    if (in_file + record.size() > kFileBytes) {
      if (fd >= 0 && (close(fd) != 0 || unlink(path.c_str()) != 0)) fail("cannot remove", path);
      fd = open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_APPEND | O_CLOEXEC, 0600);
      if (fd < 0) fail("cannot create", path);
      in_file = 0;
    }
    const auto t0 = Clock::now();
    if (write(fd, record.data(), record.size()) != static_cast<ssize_t>(record.size())) {
      fail("cannot append to", path);
    }
    if (fdatasync(fd) != 0) fail("cannot sync", path);
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    in_file += record.size();
  }
  stop = true;
  if (busy.joinable()) busy.join();
  if (close(fd) != 0 || unlink(path.c_str()) != 0) fail("cannot remove", path);

  const size_t over10 = std::count_if(ms.begin(), ms.end(), [](double v) { return v > 10; });
  const size_t over50 = std::count_if(ms.begin(), ms.end(), [](double v) { return v > 50; });
  std::sort(ms.begin(), ms.end());
  auto at = [&](double q) {
    return ms[std::min(ms.size() - 1, static_cast<size_t>(q * ms.size()))];
  };
  std::printf(
      "sync_probe: syncs=%zu p50_ms=%.3f p99_ms=%.3f p999_ms=%.3f max_ms=%.1f over_10ms=%zu "
      "over_50ms=%zu busy_cpu=%s\n",
      ms.size(), at(0.5), at(0.99), at(0.999), ms.back(), over10, over50,
      busy_cpu ? std::to_string(*busy_cpu).c_str() : "none");
  return 0;
}
