// Child processes for integration tests: spawn a program, capture what it prints, wait for a line,
// signal it, reap it. A ChildProcess is used from one thread at a time (its output is collected by
// an internal thread and read under a lock). Every child gets PR_SET_PDEATHSIG=SIGKILL, so it dies
// with the *thread* that spawned it: spawn from the test's main thread only.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace gw::testing {

struct ExitStatus {
  bool exited = false;     // exited normally; `code` is its exit status
  int code = -1;
  int signal = 0;          // the terminating signal when it did not exit normally
  bool timed_out = false;  // it had not ended by the deadline and was killed with SIGKILL
  bool success() const { return exited && code == 0 && !timed_out; }
  std::string describe() const;  // e.g. "exit 0", "signal 9", "timed out, then signal 9"
};

// The environment of a child: this process's variables minus those whose name starts with one of
// `drop_prefixes`, plus `add` ("NAME=value", replacing a variable of the same name).
// `max_file_bytes` > 0 sets the child's RLIMIT_FSIZE: a write past that size raises SIGXFSZ,
// which kills a child that does not ignore it, or fails with EFBIG, as on a full disk. (gatewayd
// and gatewayctl ignore it; this used to ignore it for them, which hid that gatewayd did not.)
// `max_open_files` > 0 sets the child's RLIMIT_NOFILE, soft and hard: it cannot raise it.
struct ChildEnv {
  std::vector<std::string> drop_prefixes;
  std::vector<std::string> add;
  uint64_t max_file_bytes = 0;
  uint64_t max_open_files = 0;
  // Signals the child starts with ignored, as `nohup` (SIGHUP) or a shell's background job
  // (SIGINT) starts a program; the others of SIGTERM, SIGINT and SIGHUP start as by default.
  std::vector<int> ignored_signals = {};
  // Standard descriptors (0, 1, 2) the child starts with closed, as a shell's `>&-` starts it.
  std::vector<int> closed_fds = {};
};

class ChildProcess {
 public:
  ChildProcess() = default;
  ~ChildProcess();  // SIGKILLs and reaps a child that is still running
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Starts argv[0] (a path) with stdin from /dev/null and stdout+stderr into one pipe that a
  // background thread drains into output(), so the child never blocks on a full pipe.
  // Throws std::runtime_error if the process cannot be started. Call at most once.
  void spawn(const std::vector<std::string>& argv, const ChildEnv& env = {});

  // Waits until a complete output line contains `needle` and returns that line (without the
  // newline); std::nullopt on timeout or when the child closed its output first.
  std::optional<std::string> wait_for_line(std::string_view needle,
                                           std::chrono::milliseconds timeout);

  // Everything the child printed so far (stdout and stderr interleaved).
  std::string output() const;

  pid_t pid() const { return pid_; }
  bool running();            // started and not yet reaped (reaps it if it has ended)
  void send_signal(int sig);  // no-op when not running
  // SIGSTOP, then waits until the kernel reports the process stopped. Throws std::runtime_error
  // if it is not running or has not stopped within `timeout`.
  void freeze(std::chrono::milliseconds timeout = std::chrono::seconds(2));
  // Waits for the child to end; past the deadline it is SIGKILLed and timed_out is set.
  ExitStatus wait(std::chrono::milliseconds timeout);
  ExitStatus terminate(std::chrono::milliseconds timeout);  // SIGTERM, then wait(timeout)
  ExitStatus kill();                                         // SIGKILL, then reap
  // The status of a reaped child (std::nullopt while it runs or before spawn).
  std::optional<ExitStatus> status() const { return status_; }

 private:
  void drain(int fd);
  void reaped(int wait_status, bool timed_out);

  pid_t pid_ = -1;
  std::optional<ExitStatus> status_;
  std::thread drainer_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::string output_;  // guarded by mu_
  bool eof_ = false;    // guarded by mu_
};

struct CommandResult {
  ExitStatus status;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs argv[0] (a path) to completion with stdin from /dev/null, capturing stdout and stderr
// separately. Past the timeout the child is killed (status.timed_out). Throws std::runtime_error
// if it cannot be started.
CommandResult run_command(const std::vector<std::string>& argv, const ChildEnv& env = {},
                          std::chrono::milliseconds timeout = std::chrono::seconds(30));

// `s` without leading and trailing ASCII whitespace.
std::string trim(std::string_view s);

// The fields of /proc/PID/stat after the command name, from the state (field 3, at [0]) on; empty
// when the process is gone.
std::vector<std::string> proc_stat(pid_t pid);

// The children of process `pid`, forked by any of its threads (each thread lists its own).
std::vector<pid_t> children_of(pid_t pid);

// The name of each thread of process `pid` (/proc/PID/task/TID/comm); empty when it is gone.
std::vector<std::string> thread_names(pid_t pid);

// The ids of the threads of process `pid` named `name`.
std::vector<pid_t> threads_named(pid_t pid, std::string_view name);

// What each open descriptor of process `pid` refers to (the targets of /proc/PID/fd, such as
// "socket:[123]" or a path); empty when the process is gone.
std::vector<std::string> open_descriptors(pid_t pid);

}  // namespace gw::testing
