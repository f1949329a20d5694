// gatewayd: wiring only. Parses flags, opens the store, catches the read model up with the log,
// starts the writer, the verifier, the Kafka mirror and the HTTP server, and shuts down cleanly on
// SIGTERM, SIGINT or SIGHUP.
#include <arpa/inet.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string_view>
#include <system_error>
#include <thread>

#include "commands/challenge.h"
#include "commands/fields.h"
#include "core/clock.h"
#include "core/flags.h"
#include "core/std_fds.h"
#include "http/api.h"
#include "http/server.h"
#include "http/transport.h"
#include "mirror/kafka_sink.h"
#include "mirror/publisher.h"
#include "projections/catch_up.h"
#include "projections/keys.h"
#include "projections/list_memo.h"
#include "projections/read_cache.h"
#include "projections/read_model.h"
#include "projections/watchers.h"
#include "sandbox/waf_check.h"
#include "service/service.h"
#include "store/quiet_compaction.h"
#include "store/store.h"
#include "store/writer.h"
#include "verify/ares_resolver.h"
#include "verify/verifier.h"

namespace {

// The longest a DNS lookup may wait for one server, all its tries together.
constexpr int64_t kMaxDnsWaitMs = 60000;

int fail(const std::string& message) {
  std::cerr << "gatewayd: " << message << std::endl;
  return 1;
}

// A namespace flag in the form hostnames are compared in (lower case, no trailing dot), so that
// `--platform-domain Plat.Example.` reserves what `plat.example` does. Empty, or why the value
// is no hostname.
std::string domain_flag(const gw::Flags& flags, const char* name, std::string* out) {
  auto problem = gw::fields::hostname(flags.get(name), out);
  return problem ? flags.named(name) + " " + *problem : std::string();
}

// Whether `entry` is a DNS server as c-ares takes it: an IP address, with a port 1..65535 after
// it or none (an IPv6 address in brackets when a port follows).
bool dns_server_ok(const std::string& entry) {
  in_addr v4{};
  in6_addr v6{};
  if (::inet_pton(AF_INET, entry.c_str(), &v4) == 1) return true;
  if (::inet_pton(AF_INET6, entry.c_str(), &v6) == 1) return true;
  std::string host;
  uint16_t port = 0;
  if (!gw::split_host_port(entry, &host, &port) || port == 0) return false;
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    return ::inet_pton(AF_INET6, host.substr(1, host.size() - 2).c_str(), &v6) == 1;
  }
  return ::inet_pton(AF_INET, host.c_str(), &v4) == 1;
}

// The first entry of the comma-separated `list` that `ok` refuses, if any (an empty entry too).
std::optional<std::string> first_bad_entry(const std::string& list,
                                           bool (*ok)(const std::string& entry)) {
  size_t start = 0;
  for (;;) {
    const size_t comma = list.find(',', start);
    std::string entry = list.substr(start, comma == std::string::npos ? comma : comma - start);
    if (!ok(entry)) return entry;
    if (comma == std::string::npos) return std::nullopt;
    start = comma + 1;
  }
}

// Why `list` is no list of DNS servers (`ip[:port][,ip[:port]...]`), or "". c-ares takes a port
// past 65535 modulo 65536, and port 0, so a typo looked like a DNS server that does not answer
// (every verification failed as a timeout).
std::string dns_server_list_problem(const std::string& list) {
  if (auto bad = first_bad_entry(list, dns_server_ok)) {
    return "must be ip[:port][,ip[:port]...] with ports 1..65535 (an IPv6 address in brackets "
           "before a port: [::1]:53); \"" +
           *bad + "\" is not";
  }
  return "";
}

// Whether `host` is a broker's host: an IPv6 address in brackets, or a DNS name or IPv4 address,
// dot-separated labels of letters, digits, '-' and '_' (none empty, none starting or ending with
// '-'; one dot may end the name). librdkafka took "[zz]" or "a..b" and failed to resolve it for
// ever (helper 48).
bool broker_host_ok(std::string host) {
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    in6_addr v6{};
    return ::inet_pton(AF_INET6, host.substr(1, host.size() - 2).c_str(), &v6) == 1;
  }
  if (host.size() > 1 && host.back() == '.') host.pop_back();
  if (host.empty() || host.size() > 253) return false;
  size_t start = 0;
  for (;;) {
    const size_t dot = host.find('.', start);
    const std::string_view label =
        std::string_view(host).substr(start, dot == std::string::npos ? dot : dot - start);
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-')
      return false;
    for (char c : label) {
      if (std::isalnum(static_cast<unsigned char>(c)) == 0 && c != '-' && c != '_') return false;
    }
    if (dot == std::string::npos) return true;
    start = dot + 1;
  }
}

// Whether `entry` is a Kafka bootstrap server: host:port, a port 1..65535.
bool broker_ok(const std::string& entry) {
  std::string host;
  uint16_t port = 0;
  return gw::split_host_port(entry, &host, &port) && port != 0 && broker_host_ok(host);
}

// Why `list` is no list of Kafka bootstrap servers (`host:port[,host:port...]`), or "". librdkafka
// takes almost anything and then retries forever, so a typo would look like a broker that is down.
std::string broker_list_problem(const std::string& list) {
  if (auto bad = first_bad_entry(list, broker_ok)) {
    return "must be host:port[,host:port...] with ports 1..65535 (a host is a DNS name, an IPv4 "
           "address or an IPv6 address in brackets); \"" +
           *bad + "\" is not host:port";
  }
  return "";
}

// Every connection takes a file descriptor, and connections may take up to three quarters of
// the limit; past that new connections wait in the listen backlog until others close
// (http/server.cc; about 200 idle connections under `ulimit -n 256` are enough). So the soft
// limit is raised to the hard one, as far as the process may raise it itself (the WAF sandbox,
// started before, keeps the limit it had).
void raise_open_file_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  limit.rlim_cur = limit.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &limit);
}

// Pistache's limit on worker threads: past it, its listener refuses to start.
constexpr unsigned kMaxThreads = 255;

// The cores this process may run on: its CPU affinity (taskset, a container's cpuset), which
// std::thread::hardware_concurrency() does not look at; the machine's if it cannot be read.
unsigned usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) {
    return static_cast<unsigned>(CPU_COUNT(&set));
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace

int run_gatewayd(int argc, char** argv);

int main(int argc, char** argv) {
  try {
    return run_gatewayd(argc, argv);
  } catch (const std::filesystem::filesystem_error& e) {
    // A system_error too, but of a file, not of a thread.
    std::fprintf(stderr, "gatewayd: %s\n", e.what());
    return 1;
  } catch (const std::system_error& e) {
    // A thread that could not be started (a limit on processes or memory: `ulimit -u`, `-v`),
    // which aborted gatewayd (std::terminate). What was started was stopped as the exception
    // left it.
    std::fprintf(stderr, "gatewayd: cannot start a thread: %s\n", e.what());
    return 1;
  }
}

int run_gatewayd(int argc, char** argv) {
  // In the WAF sandbox's zygote process (a run of this program that Sandbox::start made), this
  // is all main() does.
  if (auto code = gw::sandbox::zygote_main_if_asked(argc, argv, {gw::sandbox::kWafTask})) {
    return *code;
  }
  // Before anything opens a file or a socket: a standard descriptor left closed would be the
  // first one's (gatewayd's output went into the WAF sandbox's socket and RocksDB's LOG).
  gw::occupy_closed_std_fds(O_WRONLY);
  // The stop signals are blocked from the start, in every thread started later too; main waits
  // for them once it serves. One that comes while gatewayd starts waits until it serves (it
  // killed the process in the first milliseconds before). The sandbox's processes set their own.
  // SIGINT or SIGHUP ignored when gatewayd started stays ignored: `nohup gatewayd &` ignores
  // SIGHUP, and a shell ignores SIGINT for a job it starts in the background; waited for, either
  // stopped gatewayd all the same (a hangup of the terminal it was started from).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  for (int sig : {SIGINT, SIGHUP}) {
    struct sigaction inherited {};
    if (sigaction(sig, nullptr, &inherited) == 0 && inherited.sa_handler == SIG_IGN) continue;
    sigaddset(&signals, sig);
  }
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  // A write past the file size limit (`ulimit -f`, systemd's LimitFSIZE) fails with EFBIG, a
  // failed write like a full disk's (503, writes stopped), instead of killing gatewayd with
  // nothing on stderr (helper 113: exit 153 at a 4 MiB log, clients reset).
  signal(SIGXFSZ, SIG_IGN);
  const unsigned cores = usable_cores();
  gw::Flags flags({
      {"listen", "GATEWAY_LISTEN", "127.0.0.1:8080", "HTTP address; port 0 picks a free port"},
      {"data-dir", "GATEWAY_DATA_DIR", "./data", "RocksDB event log and projections"},
      {"tokens-file", "GATEWAY_TOKENS_FILE", "", "hashed API tokens [default: <data-dir>/tokens]"},
      {"platform-domain", "GATEWAY_PLATFORM_DOMAIN", "platform.test", "reserved namespace"},
      {"platform-run-domain", "GATEWAY_PLATFORM_RUN_DOMAIN", "",
       "reserved namespace [default: run.<platform-domain>]"},
      {"verification-domain", "GATEWAY_VERIFICATION_DOMAIN", "",
       "suffix of every verification_value [default: verify.<platform-domain>]"},
      {"max-request-bytes", "GATEWAY_MAX_REQUEST_BYTES", "1048576", "larger bodies get 413"},
      {"threads", "GATEWAY_THREADS", std::to_string(std::min(cores, kMaxThreads)),
       "HTTP worker threads"},
      {"rate-limit", "GATEWAY_RATE_LIMIT", "0", "requests per second per tenant; 0 = off"},
      {"idle-timeout-ms", "GATEWAY_IDLE_TIMEOUT_MS", "60000",
       "answer 408 and close a connection on which no whole request came for this long"},
      {"lingering-timeout-ms", "GATEWAY_LINGERING_TIMEOUT_MS", "5000",
       "after a refused request (400, 413, 414, 431, 501, 505), end the connection once its "
       "client has sent nothing for this long"},
      {"lingering-time-ms", "GATEWAY_LINGERING_TIME_MS", "30000",
       "and at most this long after the refusal"},
      {"read-cache-mb", "GATEWAY_READ_CACHE_MB", "64",
       "memory for records read by GET, kept for the next read; 0 = off"},
      {"dns-servers", "GATEWAY_DNS_SERVERS", "",
       "DNS servers for verification, e.g. 127.0.0.1:5353 [default: system resolver]"},
      {"dns-timeout-ms", "GATEWAY_DNS_TIMEOUT_MS", "500",
       "timeout of a DNS lookup's first try, doubled at each later try (all tries at one "
       "server together at most 60000)"},
      {"dns-tries", "GATEWAY_DNS_TRIES", "2", "tries of a DNS lookup at each server"},
      {"dns-0x20", "GATEWAY_DNS_0X20", "on",
       "on: ask names in random mixed case and count only replies that repeat it letter for "
       "letter, against forged replies; off: for a server that changes the case of names"},
      {"kafka-brokers", "GATEWAY_KAFKA_BROKERS", "",
       "bootstrap servers for the Kafka mirror [default: empty = mirroring off]"},
      {"kafka-topic", "GATEWAY_KAFKA_TOPIC", "gateway-config.events", "topic for mirrored events"},
      {"fold", "GATEWAY_FOLD", "auto",
       "with no read model at start (a new layout), where the log is folded to rebuild it: "
       "memory (fastest, about 1.2 KB per event, or 1.6 times the events' bytes if more), disk "
       "(<data-dir>/fold.tmp; slower, about "
       "150 MB plus 100 bytes per event), or auto (memory if that takes at most half of the "
       "memory available)"},
  });
  auto parsed = flags.parse(argc, argv, 1);
  if (!parsed.ok()) return fail(parsed.error().detail + "\n" + flags.usage());
  if (flags.help_requested()) {
    std::cout << "usage: gatewayd [flags]\n" << flags.usage();
    return 0;
  }
  auto waf_sandbox = gw::sandbox::start_waf_sandbox();
  if (!waf_sandbox.ok()) return fail(waf_sandbox.error().detail);
  gw::http::ServerConfig server_config;
  if (!gw::split_host_port(flags.get("listen"), &server_config.host, &server_config.port)) {
    return fail(flags.named("listen") +
                " must be HOST:PORT (an IPv6 address in brackets: [::1]:8080)");
  }
  auto max_bytes = gw::parse_int(flags.get("max-request-bytes"), 1, 64 << 20);
  auto threads = gw::parse_int(flags.get("threads"), 1, kMaxThreads);
  auto rate = gw::parse_int(flags.get("rate-limit"), 0, 1000000);
  if (!max_bytes) return fail(flags.named("max-request-bytes") + " must be 1..67108864");
  if (!threads) {
    return fail(flags.named("threads") + " must be 1.." + std::to_string(kMaxThreads));
  }
  if (!rate) return fail(flags.named("rate-limit") + " must be 0..1000000");
  auto idle_timeout = gw::parse_int(flags.get("idle-timeout-ms"), 3000, 3600000);
  if (!idle_timeout) return fail(flags.named("idle-timeout-ms") + " must be 3000..3600000");
  auto lingering_timeout = gw::parse_int(flags.get("lingering-timeout-ms"), 1, 300000);
  auto lingering_time = gw::parse_int(flags.get("lingering-time-ms"), 1, 300000);
  if (!lingering_timeout) return fail(flags.named("lingering-timeout-ms") + " must be 1..300000");
  if (!lingering_time) return fail(flags.named("lingering-time-ms") + " must be 1..300000");
  auto read_cache_mb = gw::parse_int(flags.get("read-cache-mb"), 0, 1 << 20);
  if (!read_cache_mb) return fail(flags.named("read-cache-mb") + " must be 0..1048576");
  auto dns_timeout = gw::parse_int(flags.get("dns-timeout-ms"), 10, 60000);
  auto dns_tries = gw::parse_int(flags.get("dns-tries"), 1, 10);
  if (!dns_timeout) return fail(flags.named("dns-timeout-ms") + " must be 10..60000");
  if (!dns_tries) return fail(flags.named("dns-tries") + " must be 1..10");
  // c-ares doubles the timeout at each try after the first: a lookup waits N x (2^tries - 1) ms
  // for each server, which the two bounds alone let reach 17 hours.
  const int64_t dns_wait = *dns_timeout * ((int64_t{1} << *dns_tries) - 1);
  if (dns_wait > kMaxDnsWaitMs) {
    return fail(flags.named("dns-timeout-ms") + " " + std::to_string(*dns_timeout) + " with " +
                flags.named("dns-tries") + " " + std::to_string(*dns_tries) +
                " makes a lookup wait up to " + std::to_string(dns_wait) +
                " ms for each server (c-ares doubles the timeout at each try); at most " +
                std::to_string(kMaxDnsWaitMs) + " is allowed");
  }
  const std::string dns_0x20 = flags.get("dns-0x20");
  if (dns_0x20 != "on" && dns_0x20 != "off")
    return fail(flags.named("dns-0x20") + " must be on or off");
  // Kafka's rule for topic names (an empty one was used as is, and a real broker refuses it).
  const std::string topic = flags.get("kafka-topic");
  if (topic.empty() || topic.size() > 249 || topic == "." || topic == ".." ||
      topic.find_first_not_of(
          "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") !=
          std::string::npos) {
    return fail(flags.named("kafka-topic") +
                " must be 1-249 of a-z, A-Z, 0-9, '.', '_' and '-', not . or ..");
  }
  if (const std::string& servers = flags.get("dns-servers"); !servers.empty()) {
    if (auto problem = dns_server_list_problem(servers); !problem.empty())
      return fail(flags.named("dns-servers") + " " + problem);
  }
  if (const std::string& brokers = flags.get("kafka-brokers"); !brokers.empty()) {
    if (auto problem = broker_list_problem(brokers); !problem.empty())
      return fail(flags.named("kafka-brokers") + " " + problem);
  } else if (flags.given("kafka-topic")) {
    // The mirror was off, and nothing said so (helper 48): a misspelt broker variable looked
    // like a mirror that was on.
    return fail(flags.named("kafka-topic") +
                " is given but --kafka-brokers (GATEWAY_KAFKA_BROKERS) is not, and without "
                "brokers nothing is mirrored: give both, or neither");
  }
  server_config.threads = static_cast<int>(*threads);
  server_config.max_request_bytes = static_cast<size_t>(*max_bytes);
  server_config.idle_timeout = std::chrono::milliseconds(*idle_timeout);
  server_config.lingering_timeout = std::chrono::milliseconds(*lingering_timeout);
  server_config.lingering_time = std::chrono::milliseconds(*lingering_time);

  const std::string data_dir = flags.get("data-dir");
  // RocksDB's words for it were "cannot open : IO error: No such file or directory".
  if (data_dir.empty()) return fail(flags.named("data-dir") + " must not be empty");
  std::string tokens_file = flags.get("tokens-file");
  if (tokens_file.empty()) tokens_file = data_dir + "/tokens";
  gw::http::ApiConfig api_config;
  api_config.max_request_bytes = server_config.max_request_bytes;
  // As many WAF checks at once as HTTP threads, as when each ran on its HTTP thread.
  api_config.waf_check_threads = server_config.threads;
  gw::PlatformNamespaces& platform = api_config.policy.platform;
  if (auto problem = domain_flag(flags, "platform-domain", &platform.domain); !problem.empty()) {
    return fail(problem);
  }
  // Like --verification-domain, the run namespace follows --platform-domain unless given.
  platform.run_domain = "run." + platform.domain;
  if (!flags.get("platform-run-domain").empty()) {
    auto problem = domain_flag(flags, "platform-run-domain", &platform.run_domain);
    if (!problem.empty()) return fail(problem);
  } else if (platform.run_domain.size() > 253) {
    return fail(flags.named("platform-domain") + " makes the run namespace " + platform.run_domain +
                ", over 253 bytes; give a shorter one, or --platform-run-domain");
  }
  api_config.policy.check_waf_directives = [sandbox =
                                                waf_sandbox.value().get()](std::string_view text) {
    return gw::sandbox::waf_problem(sandbox->run(text));
  };
  std::string verification_domain = "verify." + platform.domain;
  if (!flags.get("verification-domain").empty()) {
    auto problem = domain_flag(flags, "verification-domain", &verification_domain);
    if (!problem.empty()) return fail(problem);
    if (verification_domain.size() > gw::kMaxVerificationDomainBytes) {
      return fail(flags.named("verification-domain") + " is over " +
                  std::to_string(gw::kMaxVerificationDomainBytes) +
                  " bytes: a verification_value under it (gv-, 32 hex digits and a dot before "
                  "it) would be no DNS name, and no domain could be verified");
    }
  } else if (verification_domain.size() > gw::kMaxVerificationDomainBytes) {
    return fail(flags.named("platform-domain") + " makes the verification domain " +
                verification_domain + ", over " + std::to_string(gw::kMaxVerificationDomainBytes) +
                " bytes: no verification_value under it would be a DNS name; give a shorter "
                "one, or --verification-domain");
  }

  gw::FoldOptions fold;
  if (auto place = gw::parse_fold_place(flags.get("fold"))) {
    fold.place = *place;
  } else {
    return fail(flags.named("fold") + " must be auto, memory or disk");
  }
  fold.on_disk_note = [](const std::string& note) {
    std::fprintf(stderr, "gatewayd: no read model to start with: %s\n", note.c_str());
  };

  raise_open_file_limit();
  auto store = gw::Store::open(data_dir);
  if (!store.ok()) return fail("cannot open " + data_dir + ": " + store.error().detail);
  if (!store.value()->recovery_note().empty()) {
    std::fprintf(stderr, "gatewayd: %s: %s\n", data_dir.c_str(),
                 store.value()->recovery_note().c_str());
  }
  gw::SystemClock clock;
  auto ids = gw::make_system_id_generator(clock);
  // A read model of another layout (another release's) is rebuilt by the catch-up: said, as an
  // upgrade's first start takes longer for it (helper 119: nothing said so).
  auto other_layout = gw::other_projections_layout(*store.value());
  if (!other_layout.ok())
    return fail("cannot read the projections: " + other_layout.error().detail);
  // Refused before the writer would take the lost events' sequence numbers again.
  auto ahead = gw::read_model_ahead_of_log(*store.value());
  if (!ahead.ok()) return fail("cannot read the store: " + ahead.error().detail);
  if (ahead.value()) return fail("cannot open " + data_dir + ": " + *ahead.value());
  auto caught_up = gw::catch_up_projections(*store.value(), *ids, fold);
  if (!caught_up.ok())
    return fail("cannot bring projections up to date: " + caught_up.error().detail);
  // A read model made from the log (here, or by a rebuild stopped before it checked them) may
  // lack records whose creates' answers are kept: a repeat would get 201 for a record that is
  // gone.
  auto dropped = gw::drop_answers_of_lost_creates(*store.value());
  if (!dropped.ok()) return fail("cannot read the store: " + dropped.error().detail);
  if (dropped.value() != 0) {
    std::fprintf(stderr, "gatewayd: %s\n", gw::dropped_answers_note(dropped.value()).c_str());
  }
  if (other_layout.value()) {
    std::fprintf(stderr,
                 "gatewayd: the read model was of layout %s, not this release's %s: rebuilt from "
                 "the log's %llu events\n",
                 other_layout.value()->c_str(), std::string(gw::keys::kLayout).c_str(),
                 static_cast<unsigned long long>(caught_up.value()));
  }
  std::unique_ptr<gw::ReadCache> read_cache;
  if (*read_cache_mb > 0)
    read_cache = std::make_unique<gw::ReadCache>(static_cast<size_t>(*read_cache_mb) << 20);
  gw::ListMemo list_memo;
  gw::ProjectionWatchers watchers(read_cache.get(), &list_memo);
  auto writer = gw::Writer::start(*store.value(), *ids, gw::scanned_by_commands, &watchers,
                                  gw::written_only_by_commands);
  if (!writer.ok()) return fail("cannot start the writer: " + writer.error().detail);

  gw::Writer* w = writer.value().get();
  gw::QuietCompaction quiet_compaction(*store.value(), [w] { return w->batches(); }, {});
  quiet_compaction.start();

  gw::Service service(*writer.value(), clock, *ids, verification_domain, platform);
  gw::ResolverConfig resolver_config;
  resolver_config.servers = flags.get("dns-servers");
  resolver_config.timeout_ms = static_cast<int>(*dns_timeout);
  resolver_config.tries = static_cast<int>(*dns_tries);
  resolver_config.mixed_case = dns_0x20 == "on";
  auto resolver = gw::AresResolver::create(resolver_config);
  if (!resolver.ok()) return fail(flags.named("dns-servers") + ": " + resolver.error().detail);
  gw::Verifier verifier(*store.value(), service, *resolver.value());
  gw::ReadModel reads(*store.value(), read_cache.get(), &list_memo);
  gw::http::TokenStore tokens(tokens_file);
  gw::http::RateLimiter limiter(static_cast<uint32_t>(*rate));
  gw::http::Metrics metrics;
  metrics.set_sources([&service] { return service.events_appended(); },
                      [w] { return w->last_seq(); }, [w] { return w->batches(); });
  metrics.set_timeouts(&gw::http::timeout_answers);
  metrics.add_section([w] { return w->render_metrics(); });
  metrics.add_section([&verifier] { return verifier.render_metrics(); });
  if (read_cache) metrics.add_section([&read_cache] { return read_cache->render_metrics(); });
  metrics.add_section([&list_memo] { return list_memo.render_metrics(); });
  metrics.add_section([&quiet_compaction] { return quiet_compaction.render_metrics(); });
  std::unique_ptr<gw::mirror::Publisher> mirror;
  if (!flags.get("kafka-brokers").empty()) {
    gw::mirror::KafkaConfig kafka{flags.get("kafka-brokers"), flags.get("kafka-topic")};
    // An event holds a record of up to --max-request-bytes plus its envelope.
    kafka.max_message_bytes = std::max<size_t>(1000000, 2 * server_config.max_request_bytes);
    gw::mirror::PublisherConfig publishing;
    publishing.destination = kafka.topic;
    mirror = std::make_unique<gw::mirror::Publisher>(
        *store.value(), *w, clock,
        [kafka]() -> gw::Result<std::unique_ptr<gw::mirror::Sink>> {
          auto sink = gw::mirror::KafkaSink::create(kafka);
          if (!sink.ok()) return sink.error();
          return std::unique_ptr<gw::mirror::Sink>(std::move(sink.value()));
        },
        publishing);
    auto started = mirror->start();
    if (!started.ok()) return fail("cannot start the Kafka mirror: " + started.error().detail);
    metrics.add_section([&mirror] { return mirror->render_metrics(); });
  } else {
    metrics.add_section(&gw::mirror::Publisher::render_disabled_metrics);
  }
  auto api = std::make_shared<gw::http::Api>(api_config, service, reads, tokens, limiter, metrics,
                                             [w] { return w->writable(); });
  server_config.writes_unfinished = [w] { return w->has_unfinished(); };
  gw::http::Server server(server_config, api);
  auto port = server.start();
  if (!port.ok()) return fail(port.error().detail);
  // Only once gatewayd serves: a start that fails (the port in use) must append nothing, and the
  // verifier answers the requests left open (in the log) as soon as it runs. Started before the
  // listener, it appended their outcomes, looked up with the failed start's --dns-servers.
  verifier.start();
  std::printf("listening on http://%s:%u\n", server_config.host.c_str(), port.value());
  std::fflush(stdout);

  int sig = 0;
  sigwait(&signals, &sig);
  std::fprintf(stderr, "gatewayd: signal %d, draining\n", sig);
  server.shutdown(10000);
  verifier.stop();
  if (mirror) mirror->stop();
  resolver.value().reset();  // cancels lookups in flight; their requests stay open
  writer.value()->stop();
  const bool http_stopped = server.join(std::chrono::seconds(3));
  if (!http_stopped) {
    std::fprintf(stderr,
                 "gatewayd: an HTTP thread did not stop within 3 s (busy on one connection); "
                 "stopping without it\n");
  }
  // Memtables to table files, so the next start replays no write-ahead log (after a long run
  // that was up to about 256 MB, seconds of start-up).
  if (auto flushed = store.value()->flush(); !flushed.ok()) {
    std::fprintf(stderr, "gatewayd: cannot flush the store: %s\n", flushed.error().detail.c_str());
  }
  // A compaction of L0 in progress (seconds on a large store) ends now instead of being waited for.
  store.value()->stop_background_work();
  quiet_compaction.stop();
  server.drop_unread_input();
  if (!http_stopped) {
    // The busy thread still runs in Pistache, on objects that returning would destroy.
    std::fflush(nullptr);
    std::_Exit(0);
  }
  return 0;
}
