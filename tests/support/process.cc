#include "support/process.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <utility>

extern char** environ;

namespace gw::testing {
namespace {

using Clock = std::chrono::steady_clock;

std::runtime_error sys_error(const std::string& what) {
  return std::runtime_error(what + ": " + std::strerror(errno));
}

std::vector<std::string> child_environment(const ChildEnv& env) {
  auto name_of = [](std::string_view var) { return var.substr(0, var.find('=')); };
  std::vector<std::string> out;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view var(*e);
    bool drop = false;
    for (const auto& prefix : env.drop_prefixes) drop = drop || var.starts_with(prefix);
    for (const auto& added : env.add) drop = drop || name_of(var) == name_of(added);
    if (!drop) out.emplace_back(var);
  }
  out.insert(out.end(), env.add.begin(), env.add.end());
  return out;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// fork + execve with stdin=/dev/null, stdout=out_fd, stderr=err_fd, then env.closed_fds closed;
// every other descriptor closed.
// Only async-signal-safe calls happen between fork and exec.
pid_t spawn_raw(std::vector<std::string> argv, const ChildEnv& env, int out_fd, int err_fd) {
  if (argv.empty()) throw std::runtime_error("spawn: empty argv");
  std::vector<std::string> envs = child_environment(env);
  std::vector<char*> c_argv = c_strings(argv);
  std::vector<char*> c_env = c_strings(envs);
  int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull < 0) throw sys_error("open /dev/null");
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    close(devnull);
    throw sys_error("fork");
  }
  if (pid == 0) {
    if (dup2(devnull, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0) _exit(126);
    syscall(SYS_close_range, 3U, ~0U, 0U);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(125);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int sig : {SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGCHLD, SIGXFSZ}) {
      sigaction(sig, &dfl, nullptr);
    }
    struct sigaction ignored {};
    ignored.sa_handler = SIG_IGN;
    for (int sig : env.ignored_signals) sigaction(sig, &ignored, nullptr);
    if (env.max_file_bytes > 0) {
      struct rlimit limit {};
      limit.rlim_cur = limit.rlim_max = env.max_file_bytes;
      if (setrlimit(RLIMIT_FSIZE, &limit) != 0) _exit(124);
    }
    if (env.max_open_files > 0) {
      struct rlimit limit {};
      limit.rlim_cur = limit.rlim_max = env.max_open_files;
      if (setrlimit(RLIMIT_NOFILE, &limit) != 0) _exit(124);
    }
    for (int fd : env.closed_fds) close(fd);
    execve(c_argv[0], c_argv.data(), c_env.data());
    _exit(127);
  }
  close(devnull);
  return pid;
}

ExitStatus decode(int wait_status, bool timed_out) {
  ExitStatus s;
  s.timed_out = timed_out;
  if (WIFEXITED(wait_status)) {
    s.exited = true;
    s.code = WEXITSTATUS(wait_status);
  } else if (WIFSIGNALED(wait_status)) {
    s.signal = WTERMSIG(wait_status);
  }
  return s;
}

// Polls waitpid until the child ends or the deadline passes; then SIGKILLs it and reaps it.
ExitStatus wait_child(pid_t pid, Clock::time_point deadline) {
  int ws = 0;
  while (true) {
    pid_t r = waitpid(pid, &ws, WNOHANG);
    if (r == pid) return decode(ws, false);
    if (r < 0 && errno != EINTR) throw sys_error("waitpid");
    if (Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ::kill(pid, SIGKILL);
  while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
  }
  return decode(ws, true);
}

std::array<int, 2> make_pipe() {
  std::array<int, 2> fds{};
  if (pipe2(fds.data(), O_CLOEXEC) != 0) throw sys_error("pipe2");
  return fds;
}

}  // namespace

std::string ExitStatus::describe() const {
  std::string s = timed_out ? "timed out, then " : "";
  if (exited) return s + "exit " + std::to_string(code);
  return s + "signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
}

std::string trim(std::string_view s) {
  const char* ws = " \t\r\n\f\v";
  size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  size_t e = s.find_last_not_of(ws);
  return std::string(s.substr(b, e - b + 1));
}

ChildProcess::~ChildProcess() {
  if (running()) kill();
  if (drainer_.joinable()) drainer_.join();
}

void ChildProcess::spawn(const std::vector<std::string>& argv, const ChildEnv& env) {
  if (pid_ > 0) throw std::runtime_error("ChildProcess::spawn called twice");
  auto fds = make_pipe();
  try {
    pid_ = spawn_raw(argv, env, fds[1], fds[1]);
  } catch (...) {
    close(fds[0]);
    close(fds[1]);
    throw;
  }
  close(fds[1]);
  drainer_ = std::thread([this, fd = fds[0]] { drain(fd); });
}

void ChildProcess::drain(int fd) {
  std::array<char, 8192> buf{};
  while (true) {
    ssize_t n = read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    std::lock_guard lock(mu_);
    output_.append(buf.data(), static_cast<size_t>(n));
    cv_.notify_all();
  }
  close(fd);
  std::lock_guard lock(mu_);
  eof_ = true;
  cv_.notify_all();
}

std::optional<std::string> ChildProcess::wait_for_line(std::string_view needle,
                                                       std::chrono::milliseconds timeout) {
  std::optional<std::string> found;
  auto match = [&] {
    size_t start = 0;
    while (true) {
      size_t nl = output_.find('\n', start);
      if (nl == std::string::npos) return false;
      std::string_view line(output_.data() + start, nl - start);
      if (line.find(needle) != std::string_view::npos) {
        found = trim(line);
        return true;
      }
      start = nl + 1;
    }
  };
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return match() || eof_; });
  return found;
}

std::string ChildProcess::output() const {
  std::lock_guard lock(mu_);
  return output_;
}

void ChildProcess::reaped(int wait_status, bool timed_out) {
  status_ = decode(wait_status, timed_out);
  pid_ = -1;
  if (drainer_.joinable()) drainer_.join();
}

bool ChildProcess::running() {
  if (pid_ <= 0) return false;
  int ws = 0;
  pid_t r = waitpid(pid_, &ws, WNOHANG);
  if (r == pid_) {
    reaped(ws, false);
    return false;
  }
  return true;
}

void ChildProcess::send_signal(int sig) {
  if (running()) ::kill(pid_, sig);
}

void ChildProcess::freeze(std::chrono::milliseconds timeout) {
  if (!running()) throw std::runtime_error("freeze: the process is not running");
  send_signal(SIGSTOP);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const std::vector<std::string> stat = proc_stat(pid_);
    if (!stat.empty() && stat[0] == "T") return;
    if (std::chrono::steady_clock::now() >= deadline) {
      throw std::runtime_error("freeze: the process did not stop on SIGSTOP");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

ExitStatus ChildProcess::wait(std::chrono::milliseconds timeout) {
  if (!running()) return status_.value_or(ExitStatus{});
  ExitStatus s = wait_child(pid_, Clock::now() + timeout);
  status_ = s;
  pid_ = -1;
  if (drainer_.joinable()) drainer_.join();
  return s;
}

ExitStatus ChildProcess::terminate(std::chrono::milliseconds timeout) {
  send_signal(SIGTERM);
  return wait(timeout);
}

ExitStatus ChildProcess::kill() {
  send_signal(SIGKILL);
  return wait(std::chrono::seconds(10));
}

CommandResult run_command(const std::vector<std::string>& argv, const ChildEnv& env,
                          std::chrono::milliseconds timeout) {
  auto out = make_pipe();
  auto err = make_pipe();
  pid_t pid = -1;
  try {
    pid = spawn_raw(argv, env, out[1], err[1]);
  } catch (...) {
    for (int fd : {out[0], out[1], err[0], err[1]}) close(fd);
    throw;
  }
  close(out[1]);
  close(err[1]);
  CommandResult result;
  auto deadline = Clock::now() + timeout;
  std::array<pollfd, 2> fds{pollfd{out[0], POLLIN, 0}, pollfd{err[0], POLLIN, 0}};
  std::array<std::string*, 2> sinks{&result.out, &result.err};
  int open_fds = 2;
  while (open_fds > 0 && Clock::now() < deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    int r = poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(left.count(), 1)));
    if (r < 0 && errno != EINTR) break;
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      std::array<char, 4096> buf{};
      ssize_t n = read(fds[i].fd, buf.data(), buf.size());
      if (n > 0) {
        sinks[i]->append(buf.data(), static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (auto& p : fds) {
    if (p.fd >= 0) close(p.fd);
  }
  result.status = wait_child(pid, open_fds > 0 ? Clock::now() : deadline);
  return result;
}

std::vector<std::string> proc_stat(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(in, stat);  // one line; the command name, in parentheses, may hold anything
  const size_t paren = stat.rfind(')');
  std::vector<std::string> fields;
  if (paren == std::string::npos) return fields;
  std::istringstream rest(stat.substr(paren + 1));
  for (std::string field; rest >> field;) fields.push_back(field);
  return fields;
}

std::vector<std::string> open_descriptors(pid_t pid) {
  std::vector<std::string> out;
  std::error_code ec;
  std::filesystem::directory_iterator fds("/proc/" + std::to_string(pid) + "/fd", ec);
  for (; !ec && fds != std::filesystem::directory_iterator(); fds.increment(ec)) {
    std::error_code gone;  // a descriptor closed meanwhile
    out.push_back(std::filesystem::read_symlink(fds->path(), gone).string());
  }
  return out;
}

namespace {

// Each thread of process `pid`, as its id and its name (/proc/PID/task/TID/comm).
std::vector<std::pair<pid_t, std::string>> threads_of(pid_t pid) {
  std::vector<std::pair<pid_t, std::string>> out;
  const std::filesystem::path tasks = "/proc/" + std::to_string(pid) + "/task";
  std::error_code error;
  for (const auto& task : std::filesystem::directory_iterator(tasks, error)) {
    std::ifstream in(task.path() / "comm");
    std::string name;
    if (std::getline(in, name)) {
      out.emplace_back(static_cast<pid_t>(std::stol(task.path().filename().string())), name);
    }
  }
  return out;
}

}  // namespace

std::vector<std::string> thread_names(pid_t pid) {
  std::vector<std::string> out;
  for (auto& [tid, name] : threads_of(pid)) out.push_back(std::move(name));
  return out;
}

std::vector<pid_t> threads_named(pid_t pid, std::string_view name) {
  std::vector<pid_t> out;
  for (const auto& [tid, its_name] : threads_of(pid)) {
    if (its_name == name) out.push_back(tid);
  }
  return out;
}

std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> out;
  const std::filesystem::path tasks = "/proc/" + std::to_string(pid) + "/task";
  std::error_code error;
  for (const auto& task : std::filesystem::directory_iterator(tasks, error)) {
    std::ifstream in(task.path() / "children");
    for (pid_t child; in >> child;) out.push_back(child);
  }
  return out;
}

}  // namespace gw::testing
