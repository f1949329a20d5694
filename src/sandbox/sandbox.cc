#include "sandbox/sandbox.h"

#include <fcntl.h>
#include <poll.h>
#include <seccomp.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>

#include "core/unique_fd.h"

namespace gw::sandbox {

namespace {

using Clock = std::chrono::steady_clock;

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

// Writes all of `data` to a blocking descriptor. Used by the zygote's processes only.
bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// A frame: its tag, the body's size (4 bytes, little-endian) and the body.
std::string frame(char tag, std::string_view body) {
  std::string out(1, tag);
  uint32_t size = static_cast<uint32_t>(body.size());
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((size >> (8 * i)) & 0xff));
  out.append(body);
  return out;
}

void write_frame(int fd, char tag, std::string_view body) { write_all(fd, frame(tag, body)); }

// The zygote and its workers never return into the program's main(), and leave with _exit (no
// atexit handlers, no static destructors, no buffered stdio flushed twice by copies of a
// process).
[[noreturn]] void leave(int code) { ::_exit(code); }

void die_with_parent(pid_t parent) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) leave(0);  // the parent ended before the line above
}

void unblock_all_signals() {
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
}

std::string describe(int status) {
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return "signal " + std::to_string(sig) + " (" + ::strsignal(sig) + ")";
  }
  return "status " + std::to_string(status);
}

// The bytes of this process's data segment and private writable mappings (VmData), which
// RLIMIT_DATA limits; 0 if /proc does not say.
size_t data_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.starts_with("VmData:")) return std::strtoull(line.c_str() + 7, nullptr, 10) * 1024;
  }
  return 0;
}

// What a worker may still do once it has its input: compute, manage its memory, read and write
// the descriptors it has, look at the clock, signal itself (abort) and leave. Any other system
// call (opening a file, a socket, exec, fork, signalling another process, ptrace) kills it with
// SIGSYS: a parser taken over by its input can reach nothing but its own answer.
//
// Made once by the zygote (each worker inherits a copy), so that a worker only adds the rules
// that name its own pid and loads the filter: reading /proc and adding the rules took a worker
// about 0.2 ms.
struct Confinement {
  size_t data_bytes = 0;  // the zygote's mapped memory, which a worker starts with
  scmp_filter_ctx filter = nullptr;
  std::string error;  // why there is no filter
};

// Adds to `filter` a rule that allows `call` when `conditions` hold, unless an earlier addition
// failed (*rc is then that failure's negative errno).
template <typename... Conditions>
void allow(scmp_filter_ctx filter, int* rc, int call, Conditions... conditions) {
  if (*rc == 0) {
    *rc = ::seccomp_rule_add(filter, SCMP_ACT_ALLOW, call,
                             static_cast<unsigned>(sizeof...(conditions)), conditions...);
  }
}

std::string seccomp_failure(int rc) {
  return std::string("cannot confine a worker: seccomp: ") + std::strerror(-rc);
}

Confinement prepare_confinement() {
  Confinement c;
  c.data_bytes = data_bytes();
  c.filter = ::seccomp_init(SCMP_ACT_KILL_PROCESS);
  if (c.filter == nullptr) {
    c.error = "cannot confine a worker: seccomp_init failed";
    return c;
  }
  int rc = 0;
  for (int call : {SCMP_SYS(read),
                   SCMP_SYS(write),
                   SCMP_SYS(readv),
                   SCMP_SYS(writev),
                   SCMP_SYS(lseek),
                   SCMP_SYS(close),
                   SCMP_SYS(brk),
                   SCMP_SYS(mmap),
                   SCMP_SYS(munmap),
                   SCMP_SYS(mremap),
                   SCMP_SYS(mprotect),
                   SCMP_SYS(madvise),
                   SCMP_SYS(futex),
                   SCMP_SYS(sched_yield),
                   SCMP_SYS(nanosleep),
                   SCMP_SYS(clock_nanosleep),
                   SCMP_SYS(clock_gettime),
                   SCMP_SYS(gettimeofday),
                   SCMP_SYS(getrandom),
                   SCMP_SYS(getpid),
                   SCMP_SYS(gettid),
                   SCMP_SYS(rt_sigaction),
                   SCMP_SYS(rt_sigprocmask),
                   SCMP_SYS(rt_sigreturn),
                   SCMP_SYS(sigaltstack),
                   SCMP_SYS(restart_syscall),
                   SCMP_SYS(exit),
                   SCMP_SYS(exit_group),
                   SCMP_SYS(fstat)}) {
    allow(c.filter, &rc, call);
  }
  // A pipe reaches nothing outside the worker; sanitizer runtimes probe memory through one.
  allow(c.filter, &rc, SCMP_SYS(pipe2));
  // stdio's look at stdout (the lexer prints there): fstat of a descriptor it has, never of a
  // path, and isatty.
  allow(c.filter, &rc, SCMP_SYS(newfstatat),
        SCMP_A3(SCMP_CMP_MASKED_EQ, AT_EMPTY_PATH, AT_EMPTY_PATH));
  allow(c.filter, &rc, SCMP_SYS(ioctl), SCMP_A1(SCMP_CMP_EQ, TCGETS));
  if (rc != 0) {
    ::seccomp_release(c.filter);
    c.filter = nullptr;
    c.error = seccomp_failure(rc);
  }
  return c;
}

// In the worker: limits its memory and installs the filter (its own copy of the zygote's, which
// it completes). Returns why it cannot be confined (it must then not run the task), or nothing.
std::optional<std::string> confine(const Limits& limits, const Confinement& c) {
  // Memory: what the worker has mapped at its start (the program, and under a sanitizer its
  // shadow) plus the budget.
  const rlim_t data = static_cast<rlim_t>(c.data_bytes + limits.max_memory_bytes);
  struct rlimit memory {
    data, data
  };
  if (::setrlimit(RLIMIT_DATA, &memory) != 0) {
    return errno_text("cannot limit a worker's memory: setrlimit");
  }
  if (c.filter == nullptr) return c.error;
  // raise() and abort(): a signal to this process only.
  const auto self = static_cast<scmp_datum_t>(::getpid());
  int rc = 0;
  allow(c.filter, &rc, SCMP_SYS(tgkill), SCMP_A0(SCMP_CMP_EQ, self));
  allow(c.filter, &rc, SCMP_SYS(kill), SCMP_A0(SCMP_CMP_EQ, self));
  if (rc == 0) rc = ::seccomp_load(c.filter);  // also sets no_new_privs
  if (rc != 0) return seccomp_failure(rc);
  return std::nullopt;
}

[[noreturn]] void worker_main(int fd, Task task, const Limits& limits,
                              const Confinement& confinement) {
  ::signal(SIGPIPE, SIG_IGN);
  unblock_all_signals();
  int null_in = ::open("/dev/null", O_RDONLY);
  int null_out = ::open("/dev/null", O_WRONLY);
  if (null_in < 0 || null_out < 0) leave(120);
  ::dup2(null_in, STDIN_FILENO);
  ::dup2(null_out, STDOUT_FILENO);  // libmodsecurity's lexer echoes characters it drops there
  ::close(null_in);
  ::close(null_out);
  // A backstop for the zygote's wall-time limit: CPU seconds, rounded up, plus one.
  rlim_t seconds = static_cast<rlim_t>(limits.time_limit_ms / 1000 + 2);
  struct rlimit cpu {
    seconds, seconds + 1
  };
  ::setrlimit(RLIMIT_CPU, &cpu);

  std::string input;
  char buf[16384];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) leave(121);
    if (n == 0) break;
    input.append(buf, static_cast<size_t>(n));
  }
  if (auto why = confine(limits, confinement)) {
    // Not the input's fault: the run is unavailable, as when no worker can be started.
    write_frame(fd, 'U', *why);
    leave(122);
  }
  std::string output = task(input);
  write_frame(fd, 'D', output);
  leave(0);
}

struct Run {
  int fd;
  Clock::time_point deadline;
  bool killed = false;
};

// Reports how a worker ended on its run's socket and closes the zygote's copy of it. Never
// blocks: a caller that stopped reading loses the report, not the zygote its loop.
void finish(const Run& run, int status) {
  std::string report = frame('S', run.killed ? std::string("time limit") : describe(status));
  ::send(run.fd, report.data(), report.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  ::close(run.fd);
}

// One descriptor received on the control socket, or -1 (none in the message); *eof when the
// caller closed its end.
int receive_fd(int control, bool* eof) {
  char byte = 0;
  struct iovec iov {
    &byte, 1
  };
  alignas(struct cmsghdr) char space[CMSG_SPACE(sizeof(int))];
  struct msghdr msg {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = space;
  msg.msg_controllen = sizeof space;
  ssize_t n = ::recvmsg(control, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  *eof = n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN);
  int fd = -1;
  if (n <= 0) return fd;
  for (struct cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
      std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
  }
  return fd;
}

// Forks a worker for every descriptor the caller sends, reaps the workers and reports how each
// ended, and kills those past the time limit. Leaves when the caller closes the control socket,
// which the kernel does when the caller's process ends, however it ends.
[[noreturn]] void zygote_main(int control, Task task, void (*prepare)(), Limits limits) {
  // Default signal handlers (a program's main() may have set its own before it got here: a test
  // framework's crash handler would report a worker's crash as its own).
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) ::signal(sig, SIG_DFL);
  }
  // Ctrl-C (or a hangup) reaches the whole process group: the server drains, and the zygote
  // leaves when the server closes the control socket.
  ::signal(SIGINT, SIG_IGN);
  ::signal(SIGTERM, SIG_IGN);
  ::signal(SIGHUP, SIG_IGN);
  ::signal(SIGPIPE, SIG_IGN);
  // Keep only stdio and the control socket: a descriptor the caller left open across exec (its
  // files, sockets, pipes) must not stay open in a process that outlives their closing.
  if (control > 3) ::close_range(3, static_cast<unsigned>(control) - 1, 0);
  ::close_range(static_cast<unsigned>(control) + 1, ~0U, 0);
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  ::sigprocmask(SIG_SETMASK, &chld, nullptr);  // SIGCHLD is read from `children` below
  int children = ::signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
  if (children < 0) leave(1);
  const Confinement confinement = prepare_confinement();
  if (prepare != nullptr) prepare();  // before any worker is forked, so each one inherits it
  if (::send(control, "Y", 1, MSG_NOSIGNAL) != 1) leave(1);

  std::map<pid_t, Run> runs;
  pid_t self = ::getpid();
  while (true) {
    int timeout = -1;
    auto now = Clock::now();
    for (auto& [pid, run] : runs) {
      if (run.killed) continue;
      if (run.deadline <= now) {
        ::kill(pid, SIGKILL);
        run.killed = true;
        continue;
      }
      auto ms = std::chrono::ceil<std::chrono::milliseconds>(run.deadline - now).count();
      if (timeout < 0 || ms < timeout) timeout = static_cast<int>(ms);
    }
    struct pollfd p[2] = {{control, POLLIN, 0}, {children, POLLIN, 0}};
    if (::poll(p, 2, timeout) < 0 && errno != EINTR) leave(1);
    if (p[1].revents != 0) {
      struct signalfd_siginfo info;
      while (::read(children, &info, sizeof info) > 0) {
      }
      int status = 0;
      pid_t done;
      while ((done = ::waitpid(-1, &status, WNOHANG)) > 0) {
        auto it = runs.find(done);
        if (it == runs.end()) continue;
        finish(it->second, status);
        runs.erase(it);
      }
    }
    if (p[0].revents == 0) continue;
    bool eof = false;
    int fd = receive_fd(control, &eof);
    if (eof) leave(0);  // the caller closed its end (or is gone); workers die with us
    if (fd < 0) continue;
    pid_t worker = ::fork();
    if (worker == 0) {
      ::close(control);
      ::close(children);
      // The other runs' sockets: a worker reaches its own run alone (it could read another's
      // input or answer for it), and a run whose worker ends gets its answer without waiting
      // for the end of every worker forked after it.
      for (const auto& [pid, run] : runs) ::close(run.fd);
      die_with_parent(self);
      worker_main(fd, task, limits, confinement);
    }
    if (worker < 0) {
      write_frame(fd, 'U', errno_text("cannot start a worker: fork"));
      ::close(fd);
      continue;
    }
    runs.emplace(worker, Run{fd, Clock::now() + std::chrono::milliseconds(limits.time_limit_ms)});
  }
}

// Waits until `fd` is ready for `events` or the deadline passes.
bool wait_for(int fd, short events, Clock::time_point deadline) {
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    struct pollfd p {
      fd, events, 0
    };
    int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;
  }
}

struct Frames {
  bool done = false, status = false, unavailable = false;
  std::string output, status_text, unavailable_text;
};

// The body size in the header of the frame `bytes` starts with (at least 5 bytes).
uint32_t frame_size(std::string_view bytes) {
  uint32_t size = 0;
  for (int i = 0; i < 4; ++i)
    size |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[1 + i])) << (8 * i);
  return size;
}

Frames parse_frames(std::string_view bytes) {
  Frames f;
  while (bytes.size() >= 5) {
    char tag = bytes[0];
    uint32_t size = frame_size(bytes);
    if (bytes.size() - 5 < size) break;  // cut short: the worker died while writing
    std::string body(bytes.substr(5, size));
    bytes.remove_prefix(5 + size);
    if (tag == 'D') {
      f.done = true;
      f.output = std::move(body);
    } else if (tag == 'S') {
      f.status = true;
      f.status_text = std::move(body);
    } else if (tag == 'U') {
      f.unavailable = true;
      f.unavailable_text = std::move(body);
    }
  }
  return f;
}

Outcome unavailable(std::string detail) {
  return Outcome{Outcome::Kind::kUnavailable, {}, std::move(detail)};
}

constexpr char kZygoteFlag[] = "--sandbox-zygote";

// Reads the zygote's first message: nothing when it is ready ('Y'), or why it is not, after
// reaping it.
std::optional<Error> not_ready(int control, pid_t pid) {
  auto deadline = Clock::now() + std::chrono::seconds(30);
  char message[8] = {};
  ssize_t n = -1;
  bool late = false;
  while (true) {
    if (!wait_for(control, POLLIN, deadline)) {
      late = true;
      ::kill(pid, SIGKILL);
      break;
    }
    n = ::recv(control, message, sizeof message, MSG_DONTWAIT);
    if (n >= 0 || (errno != EINTR && errno != EAGAIN)) break;
  }
  if (!late && n == 1 && message[0] == 'Y') return std::nullopt;
  const bool exec_failed = !late && n == 5 && message[0] == 'E';
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  std::string why;
  if (late) {
    why = "it did not start within 30 s";
  } else if (exec_failed) {
    int err = 0;
    std::memcpy(&err, message + 1, sizeof err);
    why = std::string("exec /proc/self/exe: ") + std::strerror(err);
  } else {
    why = "it ended at start (" + describe(status) + ")";
  }
  return make_error(Code::kUnavailable, "cannot start the sandbox: " + why);
}

}  // namespace

std::optional<int> zygote_main_if_asked(int argc, char** argv,
                                        std::initializer_list<NamedTask> tasks) {
  if (argc < 2 || std::string_view(argv[1]) != kZygoteFlag) return std::nullopt;
  auto number = [](const char* text, long long max) -> std::optional<long long> {
    char* end = nullptr;
    errno = 0;
    long long v = std::strtoll(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || v < 0 || v > max) return std::nullopt;
    return v;
  };
  std::optional<long long> control, time_limit_ms, max_output, max_memory;
  if (argc == 7) {
    control = number(argv[3], 1 << 20);
    time_limit_ms = number(argv[4], 1 << 30);
    max_output = number(argv[5], 1LL << 40);
    max_memory = number(argv[6], 1LL << 40);
  }
  if (!control || !time_limit_ms || !max_output || !max_memory) {
    std::fprintf(stderr,
                 "%s: %s takes TASK CONTROL_FD TIME_LIMIT_MS MAX_OUTPUT_BYTES MAX_MEMORY_BYTES\n",
                 argv[0], kZygoteFlag);
    return 2;
  }
  for (const NamedTask& t : tasks) {
    if (t.name == argv[2]) {
      Limits limits;
      limits.time_limit_ms = static_cast<int>(*time_limit_ms);
      limits.max_output_bytes = static_cast<size_t>(*max_output);
      limits.max_memory_bytes = static_cast<size_t>(*max_memory);
      zygote_main(static_cast<int>(*control), t.task, t.prepare, limits);
    }
  }
  std::fprintf(stderr, "%s: no sandbox task named %s\n", argv[0], argv[2]);
  return 2;
}

// One zygote: its control socket and its process, closed and reaped with the last run that uses
// it.
struct Sandbox::Zygote {
  Zygote(int control_fd, pid_t process) : control(control_fd), pid(process) {}
  ~Zygote() {
    ::close(control);
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  Zygote(const Zygote&) = delete;
  Zygote& operator=(const Zygote&) = delete;

  // Whether the zygote has closed its end of the control socket (it exited or was killed):
  // POLLHUP on ours, even before the zygote is a zombie, and before a run it had not taken yet
  // loses its socket.
  bool gone() const {
    struct pollfd p {
      control, 0, 0
    };
    return ::poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR)) != 0;
  }

  // Starts a zygote for the task `name` and waits until it is ready.
  static Result<std::shared_ptr<Zygote>> spawn(const std::string& name, const Limits& limits) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
      return make_error(Code::kUnavailable, errno_text("cannot start the sandbox: socketpair"));
    // Everything the child needs is made before the fork: between fork and exec a child of a
    // process with other threads may only make async-signal-safe calls (no allocation).
    std::string args[] = {"gatewayd-sandbox",
                          kZygoteFlag,
                          name,
                          std::to_string(sv[1]),
                          std::to_string(limits.time_limit_ms),
                          std::to_string(limits.max_output_bytes),
                          std::to_string(limits.max_memory_bytes)};
    char* argv[std::size(args) + 1] = {};
    for (size_t i = 0; i < std::size(args); ++i) argv[i] = args[i].data();
    pid_t pid = ::fork();
    if (pid == 0) {
      // The zygote's end stays open across exec; every other descriptor of this program that
      // is not close-on-exec is closed by zygote_main.
      ::fcntl(sv[1], F_SETFD, 0);
      ::execv("/proc/self/exe", argv);
      char failed[5] = {'E'};
      int err = errno;
      std::memcpy(failed + 1, &err, sizeof err);
      (void)!::write(sv[1], failed, sizeof failed);
      ::_exit(127);
    }
    ::close(sv[1]);
    if (pid < 0) {
      std::string why = errno_text("cannot start the sandbox: fork");
      ::close(sv[0]);
      return make_error(Code::kUnavailable, why);
    }
    if (auto why = not_ready(sv[0], pid)) {
      ::close(sv[0]);
      return *why;
    }
    return std::make_shared<Zygote>(sv[0], pid);
  }

  const int control;
  const pid_t pid;
};

Sandbox::Sandbox(std::string task_name, Limits limits, std::shared_ptr<Zygote> zygote)
    : task_name_(std::move(task_name)), limits_(limits), zygote_(std::move(zygote)) {}

Result<std::unique_ptr<Sandbox>> Sandbox::start(const NamedTask& task, Limits limits) {
  std::string name(task.name);
  auto zygote = Zygote::spawn(name, limits);
  if (!zygote.ok()) return zygote.error();
  return std::unique_ptr<Sandbox>(new Sandbox(std::move(name), limits, std::move(zygote.value())));
}

// The last reference to the zygote closes its control socket and reaps it.
Sandbox::~Sandbox() = default;

std::shared_ptr<Sandbox::Zygote> Sandbox::current() const {
  std::lock_guard lock(mutex_);
  return zygote_;
}

pid_t Sandbox::zygote_pid() const { return current()->pid; }

uint64_t Sandbox::restarts() const {
  std::lock_guard lock(mutex_);
  return restarts_;
}

Result<std::shared_ptr<Sandbox::Zygote>> Sandbox::replace(
    const std::shared_ptr<Zygote>& gone) const {
  std::lock_guard lock(mutex_);
  if (zygote_ != gone) return zygote_;  // another run replaced it meanwhile
  auto fresh = Zygote::spawn(task_name_, limits_);
  if (!fresh.ok()) return fresh.error();
  std::fprintf(stderr, "%s: sandbox: the zygote (pid %d) was gone; a new one is pid %d\n",
               program_invocation_short_name, gone->pid, fresh.value()->pid);
  zygote_ = fresh.value();
  ++restarts_;
  return fresh;
}

Outcome Sandbox::run(std::string_view input) const {
  std::shared_ptr<Zygote> zygote = current();
  bool stuck = false;
  Outcome outcome = run_on(*zygote, input, &stuck);
  if (outcome.kind != Outcome::Kind::kUnavailable) return outcome;
  if (!zygote->gone()) {
    if (!stuck) return outcome;
    // The zygote, which enforces the time limit itself, let it pass by 5 s: it is stopped or
    // hung, and every later run would wait for it too. Killed, it is replaced as a lost one is.
    std::fprintf(stderr, "%s: sandbox: the zygote (pid %d) stopped answering; killing it\n",
                 program_invocation_short_name, zygote->pid);
    ::kill(zygote->pid, SIGKILL);
  }
  // The zygote is gone (or killed above): this run never reached a worker, or lost it with the
  // zygote. The task is run again in a new zygote (a task is a function of its input).
  auto fresh = replace(zygote);
  if (!fresh.ok()) return unavailable(outcome.detail + "; " + fresh.error().detail);
  return run_on(*fresh.value(), input, &stuck);
}

Outcome Sandbox::run_on(const Zygote& zygote, std::string_view input, bool* stuck) const {
  // kUnavailable for a run that failed with `detail`, naming the zygote's loss if that was it: a
  // zygote killed with a run queued for it drops the run's socket, the read below then fails
  // (ECONNRESET) or ends, and the cause worth logging is the zygote's loss.
  auto lost = [&zygote](std::string detail) {
    if (zygote.gone()) return unavailable("the sandbox process is gone (" + detail + ")");
    return unavailable(std::move(detail));
  };
  // The zygote enforces the time limit; this one only guards against a sandbox that stopped
  // answering at all (a stopped or overloaded zygote).
  auto deadline = Clock::now() + std::chrono::milliseconds(limits_.time_limit_ms + 5000);
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    return unavailable(errno_text("socketpair"));
  UniqueFd ours(sv[0]);
  // Only our end waits with a deadline; the worker's end stays blocking.
  ::fcntl(ours.get(), F_SETFL, ::fcntl(ours.get(), F_GETFL) | O_NONBLOCK);
  {
    UniqueFd theirs(sv[1]);
    char byte = 'R';
    struct iovec iov {
      &byte, 1
    };
    alignas(struct cmsghdr) char space[CMSG_SPACE(sizeof(int))] = {};
    struct msghdr msg {};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = space;
    msg.msg_controllen = sizeof space;
    struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    int fd = theirs.get();
    std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
    while (true) {
      if (::sendmsg(zygote.control, &msg, MSG_NOSIGNAL | MSG_DONTWAIT) == 1) break;
      if (errno == EINTR) continue;
      if (errno != EAGAIN) return unavailable(errno_text("the sandbox process is gone"));
      if (!wait_for(zygote.control, POLLOUT, deadline)) {
        *stuck = true;
        return unavailable("the sandbox process did not take the run in time");
      }
    }
  }
  // The input, then end of input. A worker that dies early makes the rest fail with EPIPE: what
  // the zygote says of it is read below all the same.
  std::string_view rest = input;
  while (!rest.empty()) {
    ssize_t n = ::send(ours.get(), rest.data(), rest.size(), MSG_NOSIGNAL);
    if (n > 0) {
      rest.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN && wait_for(ours.get(), POLLOUT, deadline)) continue;
    break;
  }
  ::shutdown(ours.get(), SHUT_WR);

  std::string bytes;
  const size_t max_bytes = limits_.max_output_bytes + 4096;
  char buf[16384];
  while (true) {
    ssize_t n = ::read(ours.get(), buf, sizeof buf);
    if (n > 0) {
      bytes.append(buf, static_cast<size_t>(n));
      if (bytes.size() > max_bytes)
        return Outcome{Outcome::Kind::kCrashed, {}, "the worker's answer is too long"};
      // The worker's answer comes first and is all we need: no wait for its exit.
      if (bytes[0] == 'D' && bytes.size() >= 5 && bytes.size() - 5 >= frame_size(bytes)) break;
      continue;
    }
    if (n == 0) break;
    if (errno == EINTR) continue;
    if (errno != EAGAIN) return lost(errno_text("read"));
    if (!wait_for(ours.get(), POLLIN, deadline)) {
      *stuck = true;
      return unavailable("the sandbox did not answer in time");
    }
  }
  Frames f = parse_frames(bytes);
  if (f.done && f.output.size() <= limits_.max_output_bytes)
    return Outcome{Outcome::Kind::kDone, std::move(f.output), {}};
  if (f.done) return Outcome{Outcome::Kind::kCrashed, {}, "the worker's answer is too long"};
  // Before the status: a worker that could not be confined says so, then exits.
  if (f.unavailable) return unavailable(f.unavailable_text);
  if (f.status && f.status_text == "time limit")
    return Outcome{Outcome::Kind::kTimedOut,
                   {},
                   "killed after " + std::to_string(limits_.time_limit_ms) + " ms"};
  if (f.status)
    return Outcome{
        Outcome::Kind::kCrashed, {}, "the worker ended without an answer: " + f.status_text};
  return lost("the sandbox ended the run without an answer");
}

}  // namespace gw::sandbox
