#include "support/gatewayd.h"

#include <stdexcept>
#include <string_view>

namespace gw::testing {
namespace {

constexpr std::string_view kListening = "listening on http://";

// Parses the port of "... listening on http://HOST:PORT"; 0 when malformed.
int parse_port(std::string_view line, std::string* base_url) {
  size_t at = line.find(kListening);
  std::string_view url = line.substr(at);
  url.remove_prefix(kListening.size() - std::string_view("http://").size());
  size_t colon = url.rfind(':');
  if (colon == std::string_view::npos) return 0;
  int port = 0;
  for (char c : url.substr(colon + 1)) {
    if (c < '0' || c > '9' || port > 65535) return 0;
    port = port * 10 + (c - '0');
  }
  if (port <= 0 || port > 65535) return 0;
  *base_url = std::string(url);
  return port;
}

}  // namespace

Gatewayd::~Gatewayd() {
  if (running()) kill();
}

void Gatewayd::start(const std::string& binary, const std::string& data_dir,
                     const std::vector<std::string>& extra_args,
                     const std::vector<std::string>& env_add, std::chrono::milliseconds timeout) {
  if (running()) throw std::runtime_error("gatewayd is already running");
  std::vector<std::string> argv = {binary, "--listen", "127.0.0.1:0", "--data-dir", data_dir};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  proc_ = std::make_unique<ChildProcess>();
  proc_->spawn(
      argv,
      ChildEnv{
          {"GATEWAY_"}, env_add, max_file_bytes_, max_open_files_, ignored_signals_, closed_fds_});
  std::optional<std::string> line = proc_->wait_for_line(kListening, timeout);
  std::string url;
  int port = line ? parse_port(*line, &url) : 0;
  if (port == 0) {
    ExitStatus s = proc_->running() ? proc_->kill() : proc_->status().value_or(ExitStatus{});
    throw std::runtime_error("gatewayd did not report `listening on http://HOST:PORT` (" +
                             (line ? "bad line: " + *line : s.describe()) + "); output:\n" +
                             proc_->output());
  }
  base_url_ = url;
  port_ = port;
}

ExitStatus Gatewayd::stop(int sig, std::chrono::milliseconds timeout) {
  if (!proc_) return ExitStatus{};
  proc_->send_signal(sig);
  return proc_->wait(timeout);
}

ExitStatus Gatewayd::kill() {
  if (!proc_) return ExitStatus{};
  return proc_->kill();
}

pid_t Gatewayd::pid() const { return proc_ ? proc_->pid() : 0; }

bool Gatewayd::running() const { return proc_ && proc_->running(); }

std::optional<std::string> Gatewayd::wait_for_line(std::string_view needle,
                                                   std::chrono::milliseconds timeout) {
  return proc_ ? proc_->wait_for_line(needle, timeout) : std::nullopt;
}

std::string Gatewayd::output() const { return proc_ ? proc_->output() : std::string(); }

std::string create_token(const std::string& ctl, const std::string& tokens_file,
                         const std::string& tenant, const std::string& name) {
  CommandResult r = run_command(
      {ctl, "token", "create", "--tokens-file", tokens_file, "--tenant", tenant, "--name", name},
      ChildEnv{{"GATEWAY_"}, {}});
  std::string token = trim(r.out);
  if (!r.status.success() || token.empty() || token.find_first_of(" \t\r\n") != std::string::npos) {
    throw std::runtime_error("gatewayctl token create failed (" + r.status.describe() +
                             "); stdout: " + r.out + "; stderr: " + r.err);
  }
  return token;
}

}  // namespace gw::testing
