// Running a parser we do not trust with a tenant's text in a process of its own, so that a crash,
// a hang or stray output of the parser costs one request an answer and never the server.
//
// Sandbox::start starts a small "zygote" process: a fresh run of this program (/proc/self/exe,
// fork and exec) whose main() hands it to zygote_main_if_asked. For every run() the zygote forks
// a worker that calls the task on the input and exits; the zygote reaps it (killing it at the
// time limit) and reports how it ended. Each run gets a fresh process, so no state of one parse
// (libmodsecurity's lexer keeps its state in globals) reaches the next, and runs do not wait for
// each other. A zygote that is gone (killed) is replaced by the next run that finds it so, and
// one that stops answering (stopped, hung) is killed and replaced by the run that waited for it.
//
//   program --socketpair (SOCK_SEQPACKET)--> zygote --fork--> worker
//      \_____ per run: one end of a fresh socketpair (SCM_RIGHTS) _____/
//
// The zygote says 'Y' on the control socket once it is ready (or the child that failed to
// exec it says 'E' <errno, 4 bytes>). On the run's socket the caller writes the input and shuts
// its side for writing; the worker answers with a frame 'D' <u32 length> <output>, then the zygote
// with 'S' <u32 length> <how the worker ended> ("exit 0", "signal 11 (Segmentation fault)", "time
// limit"), or 'U' <...> when it could not start the worker. Worker: stdin and stdout are
// /dev/null, CPU time is limited (RLIMIT_CPU) as well as wall time (the zygote's SIGKILL), and
// so is memory (RLIMIT_DATA). Once it has read its input, a seccomp filter confines it to
// computing: it keeps its memory, its descriptors' reads and writes, the clock and its exit;
// any other system call (open, socket, exec, fork, kill of another process) kills it (SIGSYS).
// A worker that cannot be confined does not run the task: it says 'U' <why> and exits.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "core/error.h"

namespace gw::sandbox {

// What a worker computes. Runs in the worker process; it may crash or loop.
using Task = std::string (*)(std::string_view input);

// A task as Sandbox::start names it and zygote_main_if_asked finds it.
struct NamedTask {
  std::string_view name;
  Task task;
  // Run once in the zygote before any worker: what it makes, each worker inherits, though a
  // confined worker could not make it itself (it may not open files or sockets). May be null.
  void (*prepare)() = nullptr;
};

// For the first line of main() in every program that starts a sandbox: in a zygote process that
// Sandbox::start started, runs the zygote with the task of that name and never returns (or
// returns 2 when the arguments are not a zygote's, with the reason on stderr); in any other
// process, returns nothing at once.
std::optional<int> zygote_main_if_asked(int argc, char** argv,
                                        std::initializer_list<NamedTask> tasks);

struct Limits {
  int time_limit_ms = 10000;          // wall time of one worker; then SIGKILL
  size_t max_output_bytes = 1 << 20;  // a longer answer counts as a crash
  // Memory a worker may map beyond what it has at its start (RLIMIT_DATA); an allocation past it
  // fails, which for most tasks means a crash.
  size_t max_memory_bytes = 256 << 20;
};

struct Outcome {
  enum class Kind {
    kDone,         // the task returned; `output` is its answer
    kCrashed,      // the worker ended without an answer (`detail` says how)
    kTimedOut,     // the worker ran past the time limit and was killed
    kUnavailable,  // no worker could be started (`detail` says why)
  };
  Kind kind = Kind::kUnavailable;
  std::string output;
  std::string detail;
};

class Sandbox {
 public:
  // Starts a zygote for `task` (one that this program's main() passes to zygote_main_if_asked;
  // the zygote finds it by name) and waits until it is ready. The zygote is a new program, not a
  // copy of this process, so any thread may call this. kUnavailable if it cannot be started.
  static Result<std::unique_ptr<Sandbox>> start(const NamedTask& task, Limits limits = {});
  // Closes the control socket (the zygote exits when it sees that) and reaps the zygote.
  ~Sandbox();
  Sandbox(const Sandbox&) = delete;
  Sandbox& operator=(const Sandbox&) = delete;

  // Runs the task on `input` in a new worker and waits for it. Thread-safe; runs of several
  // threads proceed in parallel. A run that finds the zygote gone starts a new one (one for all
  // the runs that find it gone at once) and runs there; kUnavailable if that fails too. A run
  // the zygote neither takes nor answers within the time limit and 5 s kills it, and then does
  // the same.
  Outcome run(std::string_view input) const;

  // The current zygote's process id.
  pid_t zygote_pid() const;
  // How many zygotes replaced one that was gone.
  uint64_t restarts() const;

 private:
  struct Zygote;
  Sandbox(std::string task_name, Limits limits, std::shared_ptr<Zygote> zygote);
  std::shared_ptr<Zygote> current() const;
  // A zygote in place of `gone`: a new one, or the one another run started already.
  Result<std::shared_ptr<Zygote>> replace(const std::shared_ptr<Zygote>& gone) const;
  // `*stuck`: set when the zygote did not take the run, or answer it, within the time limit and
  // 5 s.
  Outcome run_on(const Zygote& zygote, std::string_view input, bool* stuck) const;

  const std::string task_name_;
  const Limits limits_;
  mutable std::mutex mutex_;  // guards zygote_ and restarts_
  mutable std::shared_ptr<Zygote> zygote_;
  mutable uint64_t restarts_ = 0;
};

}  // namespace gw::sandbox
