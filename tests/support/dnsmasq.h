// A real dnsmasq (Debian dnsmasq-base) as a child process, serving test records on a free
// loopback port (UDP and TCP), plus a raw DNS query over UDP to probe it.
//
// dnsmasq reads its records only at start, so changing them means restart(), which keeps the
// port. Records always go to a conf file (`--conf-file=FILE`, one `cname=...` line each), so a
// thousand records cost nothing on the command line. Unknown names are NXDOMAIN (`--local=/#/`);
// nothing is ever forwarded except to zones named in `DnsRecords::extra`.
//
// What dnsmasq 2.90 serves (measured):
//  - `cname=NAME,TARGET` answers a CNAME (TTL 0) even when TARGET is unknown to it, for QTYPE
//    CNAME and for QTYPE A (the CNAME alone, NOERROR). The target is lower-cased and a trailing dot
//    dropped, so it cannot serve a mixed-case target; `raw_cnames` (a `dns-rr=NAME,5,HEX` line)
//    serves the target's bytes exactly as given.
//  - `host-record=NAME,IP` is an A record: QTYPE CNAME for NAME is NOERROR with no answer.
//  - SIGSTOP: queries wait in the socket buffer (answered after SIGCONT); after SIGKILL the port
//    is closed, so a connected UDP socket reads ECONNREFUSED.
//
// A Dnsmasq is used from one thread at a time, the test's main thread (see process.h: children die
// with the thread that spawned them).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "support/process.h"
#include "support/temp_dir.h"

namespace gw::testing {

struct DnsRecords {
  // NAME -> TARGET, served as CNAME records (target lower-cased by dnsmasq).
  std::vector<std::pair<std::string, std::string>> cnames;
  // NAME -> TARGET, a CNAME whose target is served byte for byte (case kept), via `dns-rr`.
  std::vector<std::pair<std::string, std::string>> raw_cnames;
  // NAME -> IPv4 address: an A record, so NAME exists but has no CNAME.
  std::vector<std::pair<std::string, std::string>> hosts;
  // Further dnsmasq conf-file lines, verbatim (e.g. `server=/zone/127.0.0.1#5353`).
  std::vector<std::string> extra;
  // `local=/#/`: names not served here are NXDOMAIN. When false, they go to the `server=` lines
  // of `extra`.
  bool unknown_is_nxdomain = true;

  DnsRecords& cname(std::string name, std::string target);
  DnsRecords& raw_cname(std::string name, std::string target);
  DnsRecords& host(std::string name, std::string ipv4 = "127.0.0.1");
};

class Dnsmasq {
 public:
  explicit Dnsmasq(std::string binary = "/usr/sbin/dnsmasq");
  ~Dnsmasq();  // SIGKILLs a dnsmasq that is still running (paused or not)
  Dnsmasq(const Dnsmasq&) = delete;
  Dnsmasq& operator=(const Dnsmasq&) = delete;

  // Starts dnsmasq with `records` on a free 127.0.0.1 port (the same port as before if it ran
  // already) and returns once it answers a query. Retries with a new port when the first choice
  // is taken. Throws std::runtime_error with dnsmasq's output when it does not come up.
  void start(const DnsRecords& records = {});
  // stop(), then start(records) on the same port.
  void restart(const DnsRecords& records);
  // SIGSTOP / SIGCONT: while paused, queries get no answer (a resolver times out). pause() returns
  // once the kernel reports the process stopped.
  void pause();
  void resume();
  // SIGKILL and reap: the port is closed afterwards (queries are refused). The port is kept for
  // a later start()/restart().
  void stop();
  bool running();

  int port() const { return port_; }
  // "127.0.0.1:PORT", the c-ares csv form for `--dns-servers`.
  std::string server() const;
  // Everything dnsmasq printed in its current or last run.
  std::string output() const;
  // Path of the conf file written by the last start.
  std::string conf_file() const { return dir_.file("dnsmasq.conf"); }

 private:
  bool try_start(int port, std::string* why);

  std::string binary_;
  TempDir dir_{"gatewayd-dnsmasq-"};
  int port_ = 0;
  std::unique_ptr<ChildProcess> proc_;
};

// A zone in which every name answers SERVFAIL: a DNSSEC-validating dnsmasq (root trust anchor)
// that forwards to an empty dnsmasq, so every answer it gets is bogus. Put forward_line() into the
// `extra` of the dnsmasq the resolver asks; it passes the SERVFAIL on. Two child processes.
class ServfailZone {
 public:
  explicit ServfailZone(std::string zone);
  // "server=/ZONE/127.0.0.1#PORT"
  std::string forward_line() const;
  const std::string& zone() const { return zone_; }
  int port() const { return validator_.port(); }

 private:
  std::string zone_;
  Dnsmasq empty_;
  Dnsmasq validator_;
};

// A UDP relay in front of a DNS server on 127.0.0.1:upstream_port, on a port of its own: each
// query goes to the server and its reply back to the asker. With `fold_case`, the reply's question
// name is lower-cased first, as a server that does not keep the case of names would send it. It
// records every question name it relays, as the asker sent it. A thread of its own; UDP only.
class DnsRelay {
 public:
  DnsRelay(int upstream_port, bool fold_case);
  ~DnsRelay();
  DnsRelay(const DnsRelay&) = delete;
  DnsRelay& operator=(const DnsRelay&) = delete;

  int port() const { return port_; }
  // "127.0.0.1:PORT", the c-ares csv form for `--dns-servers`.
  std::string server() const;
  // The question names relayed so far, in order, as sent (dotted, no trailing dot).
  std::vector<std::string> names() const;

 private:
  void run();

  int upstream_port_;
  bool fold_case_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;
  std::vector<std::string> names_;  // GUARDED_BY(mu_)
  std::thread thread_;
};

// One raw DNS query over a connected UDP socket to 127.0.0.1:port.
struct DnsAnswer {
  enum class Status { kAnswered, kTimedOut, kRefused, kError };
  Status status = Status::kError;
  std::string error;                   // for kError / kRefused
  int rcode = -1;                      // 0 NOERROR, 2 SERVFAIL, 3 NXDOMAIN, 5 REFUSED
  std::vector<std::string> cnames;     // CNAME targets in the answer section, case kept, no dot
  std::vector<std::string> addresses;  // A records in the answer section, dotted quad
};
inline constexpr uint16_t kDnsTypeA = 1;
inline constexpr uint16_t kDnsTypeCname = 5;
DnsAnswer dns_query(int port, std::string_view name, uint16_t qtype = kDnsTypeCname,
                    std::chrono::milliseconds timeout = std::chrono::milliseconds(500));
std::string describe(const DnsAnswer& a);

// A 127.0.0.1 port that was free for both UDP and TCP a moment ago (bound to port 0, then
// released). Throws std::runtime_error when none is found.
int free_loopback_port();

}  // namespace gw::testing
