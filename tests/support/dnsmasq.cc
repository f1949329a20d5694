#include "support/dnsmasq.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <random>
#include <stdexcept>
#include <thread>

namespace gw::testing {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// The DS record of the root zone's KSK-2017; any anchor works, since nothing we serve is signed.
constexpr const char* kRootTrustAnchor =
    "trust-anchor=.,20326,8,2,E06D44B80B8F1D39A95C0B0D7C65D08458E880409BBC683457104237C7F8EC8D";

// Closes a descriptor on scope exit.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

sockaddr_in loopback(int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

bool bind_loopback(int fd, int port) {
  sockaddr_in a = loopback(port);
  return bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0;
}

// The wire form of a dotted name ("a.b" -> 1 'a' 1 'b' 0). Labels are taken as they are.
std::string wire_name(std::string_view name) {
  if (name.ends_with('.')) name.remove_suffix(1);
  std::string out;
  while (!name.empty()) {
    size_t dot = name.find('.');
    std::string_view label = name.substr(0, dot);
    if (label.empty() || label.size() > 63) throw std::invalid_argument("bad DNS name");
    out.push_back(static_cast<char>(label.size()));
    out.append(label);
    if (dot == std::string_view::npos) break;
    name.remove_prefix(dot + 1);
  }
  out.push_back('\0');
  return out;
}

std::string hex(std::string_view bytes) {
  static constexpr std::string_view kDigits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

uint16_t u16(const std::string& m, size_t at) {
  return static_cast<uint16_t>((static_cast<unsigned char>(m[at]) << 8) |
                               static_cast<unsigned char>(m[at + 1]));
}

// Reads the (possibly compressed) name at `at`; sets `*end` past it in the original position.
// False when malformed.
bool read_name(const std::string& m, size_t at, std::string* name, size_t* end) {
  name->clear();
  bool jumped = false;
  for (int hops = 0; hops < 64; ++hops) {
    if (at >= m.size()) return false;
    auto len = static_cast<unsigned char>(m[at]);
    if (len == 0) {
      if (!jumped) *end = at + 1;
      return true;
    }
    if ((len & 0xC0) == 0xC0) {
      if (at + 1 >= m.size()) return false;
      if (!jumped) *end = at + 2;
      jumped = true;
      at = ((len & 0x3F) << 8) | static_cast<unsigned char>(m[at + 1]);
      continue;
    }
    if (at + 1 + len > m.size()) return false;
    if (!name->empty()) name->push_back('.');
    name->append(m, at + 1, len);
    at += 1 + len;
  }
  return false;
}

bool parse_answer(const std::string& m, uint16_t id, DnsAnswer* out) {
  if (m.size() < 12 || u16(m, 0) != id) return false;
  out->rcode = u16(m, 2) & 0x0F;
  uint16_t qd = u16(m, 4);
  uint16_t an = u16(m, 6);
  size_t at = 12;
  std::string name;
  for (uint16_t i = 0; i < qd; ++i) {
    if (!read_name(m, at, &name, &at) || at + 4 > m.size()) return false;
    at += 4;
  }
  for (uint16_t i = 0; i < an; ++i) {
    if (!read_name(m, at, &name, &at) || at + 10 > m.size()) return false;
    uint16_t type = u16(m, at);
    uint16_t rdlen = u16(m, at + 8);
    at += 10;
    if (at + rdlen > m.size()) return false;
    if (type == kDnsTypeCname) {
      std::string target;
      size_t ignored = 0;
      if (!read_name(m, at, &target, &ignored)) return false;
      out->cnames.push_back(target);
    } else if (type == kDnsTypeA && rdlen == 4) {
      out->addresses.push_back(std::to_string(static_cast<unsigned char>(m[at])) + "." +
                               std::to_string(static_cast<unsigned char>(m[at + 1])) + "." +
                               std::to_string(static_cast<unsigned char>(m[at + 2])) + "." +
                               std::to_string(static_cast<unsigned char>(m[at + 3])));
    }
    at += rdlen;
  }
  return true;
}

std::string conf_text(const DnsRecords& r) {
  std::string out;
  auto line = [&out](std::string_view key, std::string_view name, std::string_view value) {
    out.append(key).append("=").append(name).append(",").append(value).append("\n");
  };
  for (const auto& [name, target] : r.cnames) line("cname", name, target);
  for (const auto& [name, target] : r.raw_cnames) {
    line("dns-rr", name, std::to_string(kDnsTypeCname) + "," + hex(wire_name(target)));
  }
  for (const auto& [name, ip] : r.hosts) line("host-record", name, ip);
  for (const auto& extra : r.extra) out.append(extra).append("\n");
  return out;
}

}  // namespace

DnsRecords& DnsRecords::cname(std::string name, std::string target) {
  cnames.emplace_back(std::move(name), std::move(target));
  return *this;
}

DnsRecords& DnsRecords::raw_cname(std::string name, std::string target) {
  raw_cnames.emplace_back(std::move(name), std::move(target));
  return *this;
}

DnsRecords& DnsRecords::host(std::string name, std::string ipv4) {
  hosts.emplace_back(std::move(name), std::move(ipv4));
  return *this;
}

DnsRelay::DnsRelay(int upstream_port, bool fold_case)
    : upstream_port_(upstream_port), fold_case_(fold_case) {
  fd_ = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0 || !bind_loopback(fd_, 0)) throw std::runtime_error("DnsRelay: cannot bind");
  sockaddr_in a{};
  socklen_t len = sizeof a;
  if (getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    throw std::runtime_error("DnsRelay: getsockname failed");
  port_ = ntohs(a.sin_port);
  thread_ = std::thread([this] { run(); });
}

DnsRelay::~DnsRelay() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  if (fd_ >= 0) ::close(fd_);
}

std::string DnsRelay::server() const { return "127.0.0.1:" + std::to_string(port_); }

std::vector<std::string> DnsRelay::names() const {
  std::lock_guard<std::mutex> lock(mu_);
  return names_;
}

void DnsRelay::run() {
  // One query at a time: each is sent upstream from a socket of its own and its reply awaited
  // (up to 2 s) before the next is read, which is all the tests using it need.
  while (!stop_.load()) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    std::array<char, 4096> buf{};
    sockaddr_in from{};
    socklen_t from_len = sizeof from;
    ssize_t n =
        recvfrom(fd_, buf.data(), buf.size(), 0, reinterpret_cast<sockaddr*>(&from), &from_len);
    if (n <= 0) continue;
    const std::string query(buf.data(), static_cast<size_t>(n));
    std::string name;
    size_t end = 0;
    if (read_name(query, 12, &name, &end)) {  // the question's name
      std::lock_guard<std::mutex> lock(mu_);
      names_.push_back(name);
    }
    Fd up(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    sockaddr_in to = loopback(upstream_port_);
    if (up.get() < 0 || connect(up.get(), reinterpret_cast<const sockaddr*>(&to), sizeof to) != 0 ||
        send(up.get(), query.data(), query.size(), 0) < 0)
      continue;
    pollfd w{up.get(), POLLIN, 0};
    if (poll(&w, 1, 2000) <= 0) continue;
    ssize_t r = recv(up.get(), buf.data(), buf.size(), 0);
    if (r <= 0) continue;
    std::string reply(buf.data(), static_cast<size_t>(r));
    if (fold_case_ && read_name(reply, 12, &name, &end)) {
      for (size_t i = 12; i < end; ++i) {
        if (reply[i] >= 'A' && reply[i] <= 'Z') reply[i] = static_cast<char>(reply[i] - 'A' + 'a');
      }
    }
    sendto(fd_, reply.data(), reply.size(), 0, reinterpret_cast<const sockaddr*>(&from), from_len);
  }
}

int free_loopback_port() {
  for (int attempt = 0; attempt < 100; ++attempt) {
    Fd udp(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (udp.get() < 0 || !bind_loopback(udp.get(), 0)) continue;
    sockaddr_in a{};
    socklen_t len = sizeof a;
    if (getsockname(udp.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0) continue;
    int port = ntohs(a.sin_port);
    Fd tcp(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (tcp.get() >= 0 && bind_loopback(tcp.get(), port)) return port;
  }
  throw std::runtime_error("no free loopback port for UDP and TCP");
}

DnsAnswer dns_query(int port, std::string_view name, uint16_t qtype, milliseconds timeout) {
  DnsAnswer out;
  thread_local std::mt19937 rng{std::random_device{}()};
  auto id = static_cast<uint16_t>(rng());
  std::string q;
  q.push_back(static_cast<char>(id >> 8));
  q.push_back(static_cast<char>(id & 0xFF));
  q += std::string("\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00", 10);  // RD, QDCOUNT 1
  q += wire_name(name);
  q.push_back(static_cast<char>(qtype >> 8));
  q.push_back(static_cast<char>(qtype & 0xFF));
  q += std::string("\x00\x01", 2);  // class IN

  Fd fd(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_in to = loopback(port);
  if (fd.get() < 0 || connect(fd.get(), reinterpret_cast<const sockaddr*>(&to), sizeof to) != 0 ||
      send(fd.get(), q.data(), q.size(), 0) < 0) {
    out.status = errno == ECONNREFUSED ? DnsAnswer::Status::kRefused : DnsAnswer::Status::kError;
    out.error = std::strerror(errno);
    return out;
  }
  auto deadline = Clock::now() + timeout;
  while (true) {
    auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      out.status = DnsAnswer::Status::kTimedOut;
      return out;
    }
    pollfd p{fd.get(), POLLIN, 0};
    int r = poll(&p, 1, static_cast<int>(left));
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) continue;
    std::array<char, 4096> buf{};
    ssize_t n = recv(fd.get(), buf.data(), buf.size(), 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      out.status = errno == ECONNREFUSED ? DnsAnswer::Status::kRefused : DnsAnswer::Status::kError;
      out.error = std::strerror(errno);
      return out;
    }
    DnsAnswer parsed;
    if (parse_answer(std::string(buf.data(), static_cast<size_t>(n)), id, &parsed)) {
      parsed.status = DnsAnswer::Status::kAnswered;
      return parsed;
    }
    // Not ours or malformed: keep waiting for the real answer.
  }
}

std::string describe(const DnsAnswer& a) {
  switch (a.status) {
    case DnsAnswer::Status::kTimedOut:
      return "timed out";
    case DnsAnswer::Status::kRefused:
      return "refused (" + a.error + ")";
    case DnsAnswer::Status::kError:
      return "error (" + a.error + ")";
    case DnsAnswer::Status::kAnswered:
      break;
  }
  std::string s = "rcode " + std::to_string(a.rcode);
  for (const auto& c : a.cnames) s += " CNAME " + c;
  for (const auto& ip : a.addresses) s += " A " + ip;
  return s;
}

Dnsmasq::Dnsmasq(std::string binary) : binary_(std::move(binary)) {}

Dnsmasq::~Dnsmasq() {
  if (proc_ && proc_->running()) proc_->kill();
}

std::string Dnsmasq::server() const { return "127.0.0.1:" + std::to_string(port_); }

std::string Dnsmasq::output() const { return proc_ ? proc_->output() : std::string(); }

bool Dnsmasq::running() { return proc_ && proc_->running(); }

bool Dnsmasq::try_start(int port, std::string* why) {
  std::vector<std::string> argv = {binary_,
                                   "--keep-in-foreground",
                                   "--no-resolv",
                                   "--no-hosts",
                                   "--conf-file=" + conf_file(),
                                   "--port=" + std::to_string(port),
                                   "--listen-address=127.0.0.1",
                                   "--bind-interfaces",
                                   "--pid-file=" + dir_.file("dnsmasq.pid"),
                                   "--log-facility=-",
                                   "--user=root"};
  proc_ = std::make_unique<ChildProcess>();
  proc_->spawn(argv, ChildEnv{});
  bool started = proc_->wait_for_line("started, version", milliseconds(5000)).has_value();
  auto deadline = Clock::now() + milliseconds(5000);
  while (started && proc_->running() && Clock::now() < deadline) {
    DnsAnswer a = dns_query(port, "gatewayd-harness-probe.invalid", kDnsTypeA, milliseconds(200));
    if (a.status == DnsAnswer::Status::kAnswered) {
      port_ = port;
      return true;
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
  if (proc_->running()) proc_->kill();
  *why = "dnsmasq on port " + std::to_string(port) + " did not come up (" +
         proc_->status().value_or(ExitStatus{}).describe() + "); output:\n" + proc_->output();
  return false;
}

void Dnsmasq::start(const DnsRecords& records) {
  if (running()) throw std::runtime_error("dnsmasq is already running");
  {
    std::ofstream out(conf_file(), std::ios::trunc);
    out << "# written by gw::testing::Dnsmasq\n";
    if (records.unknown_is_nxdomain) out << "local=/#/\n";
    out << conf_text(records);
    if (!out) throw std::runtime_error("cannot write " + conf_file());
  }
  std::string why;
  if (port_ != 0) {
    // Same port as before: it was ours a moment ago, so only a slow release can get in the way.
    for (int attempt = 0; attempt < 20; ++attempt) {
      if (try_start(port_, &why)) return;
      if (why.find("Address already in use") == std::string::npos) break;
      std::this_thread::sleep_for(milliseconds(100));
    }
    throw std::runtime_error(why);
  }
  for (int attempt = 0; attempt < 10; ++attempt) {
    if (try_start(free_loopback_port(), &why)) return;
    if (why.find("Address already in use") == std::string::npos) break;
  }
  throw std::runtime_error(why);
}

void Dnsmasq::restart(const DnsRecords& records) {
  stop();
  start(records);
}

void Dnsmasq::pause() {
  if (!running()) throw std::runtime_error("dnsmasq is not running");
  proc_->freeze();
}

void Dnsmasq::resume() {
  if (running()) proc_->send_signal(SIGCONT);
}

void Dnsmasq::stop() {
  if (proc_ && proc_->running()) proc_->kill();
}

ServfailZone::ServfailZone(std::string zone) : zone_(std::move(zone)) {
  empty_.start();
  DnsRecords v;
  v.unknown_is_nxdomain = false;
  v.extra = {"dnssec", kRootTrustAnchor, "server=127.0.0.1#" + std::to_string(empty_.port())};
  validator_.start(v);
}

std::string ServfailZone::forward_line() const {
  return "server=/" + zone_ + "/127.0.0.1#" + std::to_string(validator_.port());
}

}  // namespace gw::testing
