// Runs the real gatewayd binary for a test and issues tokens with the real gatewayctl. The binary
// paths are parameters (the integration target passes GATEWAYD_PATH / GATEWAYCTL_PATH).
// A Gatewayd is used from one thread at a time; start() it from the test's main thread (see
// process.h). It can be started again after stop()/kill(), e.g. on the same data dir.
#pragma once

#include <chrono>
#include <csignal>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "support/process.h"

namespace gw::testing {

class Gatewayd {
 public:
  Gatewayd() = default;
  ~Gatewayd();  // SIGKILLs a server that is still running
  Gatewayd(const Gatewayd&) = delete;
  Gatewayd& operator=(const Gatewayd&) = delete;

  // Starts `binary --listen 127.0.0.1:0 --data-dir data_dir extra_args...`. The child's
  // environment is this process's without GATEWAY_* variables, plus `env_add` ("NAME=value").
  // Returns once it printed `listening on http://HOST:PORT`. Throws std::runtime_error carrying
  // the server's output if it exits first, or does not print the line within `timeout`.
  void start(const std::string& binary, const std::string& data_dir,
             const std::vector<std::string>& extra_args = {},
             const std::vector<std::string>& env_add = {},
             std::chrono::milliseconds timeout = std::chrono::seconds(20));

  // From the next start() on, the server's files cannot grow past `bytes` (0: no limit); writes
  // beyond fail with EFBIG, like writes to a full disk (ChildEnv::max_file_bytes).
  void limit_file_size(uint64_t bytes) { max_file_bytes_ = bytes; }
  // From the next start() on, the server may have at most `files` open files (0: as this process;
  // ChildEnv::max_open_files), a limit it cannot raise.
  void limit_open_files(uint64_t files) { max_open_files_ = files; }
  // From the next start() on, the server starts with `signals` ignored (ChildEnv::ignored_signals).
  void ignore_signals(std::vector<int> signals) { ignored_signals_ = std::move(signals); }
  // From the next start() on, the server starts with these standard descriptors closed
  // (ChildEnv::closed_fds); not stdout (1), which start() reads the port from.
  void close_fds(std::vector<int> fds) { closed_fds_ = std::move(fds); }

  // Sends `sig` (SIGTERM by default), then waits (SIGKILL past the timeout, reported as timed_out).
  ExitStatus stop(int sig = SIGTERM, std::chrono::milliseconds timeout = std::chrono::seconds(15));
  // SIGKILL, then reap.
  ExitStatus kill();
  bool running() const;

  // "http://HOST:PORT" as printed by the server.
  const std::string& base_url() const { return base_url_; }
  int port() const { return port_; }
  pid_t pid() const;  // of the current or last run; 0 before the first
  // What the server printed (stdout and stderr) in its current or last run.
  std::string output() const;
  // Waits until a complete output line of the current run contains `needle` (ChildProcess).
  std::optional<std::string> wait_for_line(std::string_view needle,
                                           std::chrono::milliseconds timeout);

 private:
  std::unique_ptr<ChildProcess> proc_;
  std::string base_url_;
  int port_ = 0;
  uint64_t max_file_bytes_ = 0;
  uint64_t max_open_files_ = 0;
  std::vector<int> ignored_signals_;
  std::vector<int> closed_fds_;
};

// Runs `ctl token create --tokens-file tokens_file --tenant tenant --name name` and returns the
// token it printed on stdout (trimmed). Throws std::runtime_error (with stderr) on failure.
std::string create_token(const std::string& ctl, const std::string& tokens_file,
                         const std::string& tenant, const std::string& name);

}  // namespace gw::testing
