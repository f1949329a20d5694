// Running a parser we do not trust with a tenant's text in a process of its own, so that a crash,
// a hang or stray output of the parser costs one request an answer and never the server.
//
// Sandbox::start forks a small "zygote" process while the caller still has a single thread. For
// every run() the zygote forks a worker that calls the task on the input and exits; the zygote
// reaps it (killing it at the time limit) and reports how it ended. Each run gets a fresh
// process, so no state of one parse (libmodsecurity's lexer keeps its state in globals) reaches
// the next, and runs do not wait for each other.
//
//   gatewayd --socketpair (SOCK_SEQPACKET)--> zygote --fork--> worker
//      \_____ per run: one end of a fresh socketpair (SCM_RIGHTS) _____/
//
// On the run's socket the caller writes the input and shuts its side for writing; the worker
// answers with a frame 'D' <u32 length> <output>, then the zygote with 'S' <u32 length> <how the
// worker ended> ("exit 0", "signal 11 (Segmentation fault)", "time limit"), or 'U' <...> when it
// could not start the worker. Worker: stdin and stdout are /dev/null, CPU time is limited
// (RLIMIT_CPU) as well as wall time (the zygote's SIGKILL).
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <string_view>

#include "core/error.h"

namespace gw::sandbox {

// What a worker computes. Runs in the worker process; it may crash or loop.
using Task = std::string (*)(std::string_view input);

struct Limits {
  int time_limit_ms = 10000;          // wall time of one worker; then SIGKILL
  size_t max_output_bytes = 1 << 20;  // a longer answer counts as a crash
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
  // Forks the zygote. Call it while this process has one thread: the zygote and its children are
  // copies of this process at this point, and a fork of a multi-threaded process may copy a lock
  // some other thread holds. kUnavailable if the zygote cannot be started.
  static Result<std::unique_ptr<Sandbox>> start(Task task, Limits limits = {});
  // Closes the control socket (the zygote exits when it sees that) and reaps the zygote.
  ~Sandbox();
  Sandbox(const Sandbox&) = delete;
  Sandbox& operator=(const Sandbox&) = delete;

  // Runs the task on `input` in a new worker and waits for it. Thread-safe; runs of several
  // threads proceed in parallel.
  Outcome run(std::string_view input) const;

  pid_t zygote_pid() const { return zygote_; }

 private:
  Sandbox(int control, pid_t zygote, Limits limits)
      : control_(control), zygote_(zygote), limits_(limits) {}
  // Whether the zygote has closed its end of the control socket (it exited or was killed).
  bool zygote_gone() const;
  // kUnavailable for a run that failed with `detail`, naming the zygote's loss if that was it.
  Outcome lost(std::string detail) const;
  int control_;
  pid_t zygote_;
  Limits limits_;
};

}  // namespace gw::sandbox
