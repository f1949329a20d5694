#include "integration/fixture.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/text.h"
#include "support/json.h"

namespace gw::itest {
namespace {

using testing::json_quote;

constexpr const char* kGatewayd = GATEWAYD_PATH;
constexpr const char* kGatewayctl = GATEWAYCTL_PATH;
// Port 1 on loopback has no listener: lookups are refused at once and nothing leaves the machine.
constexpr std::string_view kClosedDnsServerEnv = "GATEWAY_DNS_SERVERS=127.0.0.1:1";

std::string kind_profile_body(std::string_view team, int n) {
  return profile_body(team, "p" + std::to_string(n) + ".profiles.example.com");
}
std::string kind_domain_body(std::string_view team, int n) {
  return domain_body(team, "d" + std::to_string(n) + ".domains.example.com");
}
std::string kind_webhook_body(std::string_view team, int n) {
  return webhook_body(team, "wl-" + std::to_string(n));
}

}  // namespace

const Kind kProfile{"gateway_security_profile",
                    "/v1/gateway_security_profile",
                    "profile_id",
                    "gsp_",
                    kind_profile_body,
                    "waf_mode",
                    R"("monitor")"};
const Kind kDomain{"domain",
                   "/v1/domain",
                   "domain_id",
                   "dom_",
                   kind_domain_body,
                   "redirect_to",
                   R"("https://www.example.org/landing")"};
const Kind kWebhook{"webhook",         "/v1/webhook", "webhook_id",   "whk_",
                    kind_webhook_body, "status",      R"("inactive")"};

std::string profile_body(std::string_view team, std::string_view hostname) {
  return R"({"team_id":)" + json_quote(team) + R"(,"hostname":)" + json_quote(hostname) +
         R"(,"enabled":true,"force_https":true,"hsts_enabled":true,"cors_enabled":true,)"
         R"("waf_mode":"off","waf_template":"workload_default"})";
}

std::string domain_body(std::string_view team, std::string_view hostname) {
  return R"({"team_id":)" + json_quote(team) + R"(,"hostname":)" + json_quote(hostname) + "}";
}

std::string webhook_body(std::string_view team, std::string_view workload_id) {
  return R"({"team_id":)" + json_quote(team) + R"(,"workload_id":)" + json_quote(workload_id) +
         R"(,"provider":"github","status":"active"})";
}

std::string item_path(const Kind& kind, std::string_view id) {
  return std::string(kind.path) + "/" + std::string(id);
}

namespace {

// The tokens file every Server starts with, made by the real gatewayctl once per test program
// and copied into each server's data dir: two gatewayctl runs for each of the program's servers
// cost half as much CPU as the server's own start and stop under AddressSanitizer (0.28 against
// 0.55 s), 0.4 times as much under ThreadSanitizer.
struct StartingTokens {
  StartingTokens()
      : team_a(testing::create_token(kGatewayctl, dir.file("tokens"), std::string(kTeamA),
                                     std::string(kTeamA) + "-token")),
        team_b(testing::create_token(kGatewayctl, dir.file("tokens"), std::string(kTeamB),
                                     std::string(kTeamB) + "-token")) {}
  testing::TempDir dir;
  std::string team_a;
  std::string team_b;
};

const StartingTokens& starting_tokens() {
  static const StartingTokens tokens;
  return tokens;
}

}  // namespace

Server::Server(std::vector<std::string> extra_args, std::vector<std::string> env)
    : extra_args_(std::move(extra_args)), env_(std::move(env)) {
  bool dns_given = false;
  for (const auto& var : env_) dns_given = dns_given || var.starts_with("GATEWAY_DNS_SERVERS=");
  if (!dns_given) env_.push_back(std::string(kClosedDnsServerEnv));
  const StartingTokens& tokens = starting_tokens();
  std::filesystem::copy_file(tokens.dir.file("tokens"), tokens_file());
  token_a_ = tokens.team_a;
  token_b_ = tokens.team_b;
  start();
}

Server::~Server() {
  if (!proc_.running()) return;
  // A WAF sandbox zygote a test stopped (stop_zygote) and did not continue, because a REQUIRE
  // ended the test first, would outlive gatewayd stopped, holding its output open: the test
  // program then waited for the end of that output for good.
  for (const pid_t child : testing::children_of(proc_.pid())) ::kill(child, SIGCONT);
  proc_.kill();
}

void Server::start() { proc_.start(kGatewayd, dir_.path(), extra_args_, env_); }

std::string Server::token(std::string_view team) const {
  if (team == kTeamA) return token_a_;
  if (team == kTeamB) return token_b_;
  throw std::invalid_argument("no token for team " + std::string(team));
}

std::string Server::new_token(std::string_view team, std::string_view name) const {
  return testing::create_token(kGatewayctl, tokens_file(), std::string(team), std::string(name));
}

testing::ExitStatus Server::stop(int sig) { return proc_.stop(sig); }
testing::ExitStatus Server::kill() { return proc_.kill(); }
void Server::restart(ServerLimits limits) {
  proc_.limit_file_size(limits.max_file_bytes);
  proc_.limit_open_files(limits.max_open_files);
  start();
}

void Server::restart_with(std::vector<std::string> extra_args) {
  extra_args_ = std::move(extra_args);
  start();
}

Api::Api(const Server& server, std::string_view team)
    : Api(server, server.token(team), std::string(team)) {}

Api::Api(const Server& server, std::string token, std::string tenant)
    : server_(&server), token_(std::move(token)), tenant_(std::move(tenant)) {}

Response Api::send(std::string_view method, const std::string& path, const Headers& extra,
                   const std::optional<std::string>& body) {
  Headers headers = {{"Authorization", "Bearer " + token_}, {"X-Tenant-ID", tenant_}};
  headers.insert(headers.end(), extra.begin(), extra.end());
  return http_.request(method, server_->url() + path, headers, body);
}

Response Api::get(const std::string& path, const Headers& extra) {
  return send("GET", path, extra);
}

Response Api::post(const std::string& path, const std::string& body, const Headers& extra) {
  Headers headers = {{"Content-Type", "application/json"}};
  headers.insert(headers.end(), extra.begin(), extra.end());
  return send("POST", path, headers, body);
}

Response Api::put(const std::string& path, const std::string& body, const Headers& extra) {
  Headers headers = {{"Content-Type", "application/json"}};
  headers.insert(headers.end(), extra.begin(), extra.end());
  return send("PUT", path, headers, body);
}

Response Api::del(const std::string& path, const Headers& extra) {
  return send("DELETE", path, extra);
}

rapidjson::Document json(const Response& r) { return testing::parse_json(r.body); }

Response verify(Api& api, std::string_view domain_id) {
  return api.send("POST", item_path(kDomain, domain_id) + "/verify", {}, std::string());
}

std::string create(Api& api, const Kind& kind, int n) {
  Response r = api.post(std::string(kind.path), kind.body(api.team(), n));
  INFO("create ", kind.name, " #", n, " -> ", r.status, " ", r.body, r.error);
  CHECK(r.status == 201);
  if (r.status != 201) return "";
  return testing::str(json(r), kind.id_field);
}

int64_t total(Api& api, const Kind& kind) {
  Response r = api.get(std::string(kind.path));
  INFO("GET ", kind.path, " -> ", r.status, " ", r.body, r.error);
  CHECK(r.status == 200);
  return testing::num(field(json(r), "pagination"), "total");
}

std::string padded(std::string body, size_t size) {
  body.insert(body.size() - 1, size - body.size(), ' ');
  return body;
}

void check_problem(const Response& r, long status, std::string_view code) {
  INFO("expected ", status, " ", code, "; got ", r.status, " ", r.body, r.error);
  CHECK(r.status == status);
  std::string content_type = r.header("Content-Type").value_or("");
  CHECK(content_type.starts_with("application/problem+json"));
  rapidjson::Document d = json(r);
  if (d.HasParseError() || !d.IsObject()) {
    FAIL_CHECK("the error body is not a JSON object");
    return;
  }
  CHECK(testing::str(d, "code") == code);
  CHECK(testing::str(d, "type") == "urn:gatewayd:problem:" + std::string(code));
  CHECK(testing::num(d, "status") == status);
  CHECK_FALSE(testing::str(d, "title").empty());
  CHECK(field(d, "detail").IsString());
  CHECK(field(d, "errors").IsArray());
  for (const rapidjson::Value* e : items(field(d, "errors"))) {
    CHECK(e->IsObject());
    CHECK_FALSE(str(*e, "field").empty());
    CHECK_FALSE(str(*e, "message").empty());
  }
}

std::vector<std::string> error_fields(const Response& r) {
  std::vector<std::string> out;
  rapidjson::Document d = json(r);
  for (const rapidjson::Value* e : items(field(d, "errors"))) out.push_back(str(*e, "field"));
  return out;
}

bool has_field(const std::vector<std::string>& fields, std::string_view name) {
  for (const auto& f : fields) {
    if (f == name) return true;
    if (f.size() > name.size() && f.starts_with(name) &&
        (f[name.size()] == '.' || f[name.size()] == '[' || f[name.size()] == '/')) {
      return true;
    }
  }
  return false;
}

std::vector<std::string> split_list(std::string_view value) {
  std::vector<std::string> out;
  while (!value.empty()) {
    size_t comma = value.find(',');
    std::string item = testing::trim(value.substr(0, comma));
    if (!item.empty()) out.push_back(item);
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return out;
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::vector<std::string> traced_env() {
  const char* asan = std::getenv("ASAN_OPTIONS");
  if (asan == nullptr) return {};
  return {std::string("ASAN_OPTIONS=") + asan + ":detect_leaks=0"};
}

Traced run_traced(const std::vector<std::string>& argv) {
  testing::TempDir dir;
  const std::string trace = dir.file("trace");
  std::vector<std::string> traced{"/usr/bin/strace",
                                  "-f",
                                  "-qq",
                                  "-o",
                                  trace,
                                  "-s",
                                  "64",
                                  "-e",
                                  "trace=openat,fsync,fdatasync,rename,renameat,renameat2,write"};
  traced.insert(traced.end(), argv.begin(), argv.end());
  Traced out{testing::run_command(traced, testing::ChildEnv{{"GATEWAY_"}, traced_env()},
                                  std::chrono::seconds(60)),
             {}};
  // A call another thread's interrupted is two lines, "PID call(args <unfinished ...>" and later
  // "PID <... call resumed>rest": joined, at the place of its end.
  std::map<std::string, std::string> unfinished;
  std::ifstream in(trace);
  for (std::string line; std::getline(in, line);) {
    const std::string pid = line.substr(0, line.find(' '));
    constexpr std::string_view kCut = " <unfinished ...>";
    if (line.ends_with(kCut)) {
      unfinished[pid] = line.substr(0, line.size() - kCut.size());
      continue;
    }
    const size_t resumed = line.find(" resumed>");
    if (resumed != std::string::npos && line.find(" <... ") != std::string::npos) {
      line = unfinished[pid] + line.substr(resumed + 9);
      unfinished.erase(pid);
    }
    // strace pads a short call to a column before its " = result".
    for (size_t pad; (pad = line.find("  =")) != std::string::npos;) line.erase(pad, 1);
    out.lines.push_back(line);
  }
  return out;
}

size_t first_line(const std::vector<std::string>& lines, std::string_view needle) {
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].find(needle) != std::string::npos) return i;
  }
  return lines.size();
}

size_t dir_sync(const std::vector<std::string>& lines, const std::string& dir, size_t from) {
  // "PID openat(AT_FDCWD, \"DIR\", O_RDONLY|O_CLOEXEC|O_DIRECTORY) = FD", then "PID fsync(FD) = 0";
  // a descriptor number is what its last openat made it (numbers are reused).
  std::map<std::string, bool> is_dir;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    const size_t eq = line.rfind(") = ");
    if (line.find(" openat(") != std::string::npos && eq != std::string::npos) {
      is_dir[line.substr(eq + 4)] = line.find("\"" + dir + "\"") != std::string::npos &&
                                    line.find("O_DIRECTORY") != std::string::npos;
    }
    const size_t call = line.find(" fsync(");
    if (i < from || call == std::string::npos || !line.ends_with(") = 0")) continue;
    const size_t open = call + 7;
    if (is_dir[line.substr(open, line.find(')', open) - open)]) return i;
  }
  return lines.size();
}

std::vector<std::string> all_events(Api& api) {
  std::vector<std::string> events;
  int64_t after = 0;
  for (;;) {
    Response r = api.get("/v1/events?after=" + std::to_string(after) + "&limit=1000");
    REQUIRE(r.status == 200);
    const rapidjson::Document page = json(r);
    for (const rapidjson::Value* e : items(field(page, "data"))) {
      events.push_back(testing::to_json(*e));
    }
    const int64_t next = num(page, "next_after");
    if (next == after) return events;
    after = next;
  }
}

int connect_to(const Server& server, int receive_buffer) {
  const int port = server.port();
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  if (receive_buffer > 0) {
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer);
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// gatewayd's end of the client's connection `fd` to `server`, from /proc/net/tcp; nullopt if it
// is not there.
struct ServerEnd {
  int state = 0;        // TCP_ESTABLISHED, TCP_FIN_WAIT1, ...
  uint64_t unread = 0;  // rx_queue: bytes received and not yet read
};
static std::optional<ServerEnd> server_end(const Server& server, int fd) {
  sockaddr_in client{};
  socklen_t size = sizeof client;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&client), &size) != 0) return std::nullopt;
  const int server_port = server.port();
  char wanted[32];
  std::snprintf(wanted, sizeof wanted, ":%04X %08X:%04X", server_port, 0x0100007Fu,
                ntohs(client.sin_port));
  std::ifstream tcp("/proc/net/tcp");
  std::string line;
  while (std::getline(tcp, line)) {
    if (line.find(wanted) == std::string::npos) continue;
    // "sl local rem st tx_queue:rx_queue ..."
    std::istringstream fields(line);
    std::string sl, local, remote, state, queues;
    fields >> sl >> local >> remote >> state >> queues;
    return ServerEnd{.state = std::stoi(state, nullptr, 16),
                     .unread = std::stoull(queues.substr(queues.find(':') + 1), nullptr, 16)};
  }
  return std::nullopt;
}

// Whether gatewayd has read everything that the client's connection `fd` to `server` sent.
static bool server_read_all(const Server& server, int fd) {
  int unsent = 0;
  if (::ioctl(fd, TIOCOUTQ, &unsent) != 0 || unsent != 0) return false;
  const std::optional<ServerEnd> end = server_end(server, fd);
  return end && end->unread == 0;
}

void wait_until_server_shut_writing(const Server& server, int fd) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::optional<ServerEnd> end;
  for (;;) {
    end = server_end(server, fd);
    if (!end || (end->state != TCP_ESTABLISHED && end->state != TCP_CLOSE_WAIT)) break;
    REQUIRE(std::chrono::steady_clock::now() < until);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  INFO("gatewayd's end of the connection is no longer in /proc/net/tcp");
  REQUIRE(end.has_value());
}

void send_until_read(const Server& server, int fd, const std::string& bytes) {
  REQUIRE(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(bytes.size()));
  bool read_all = false;
  for (int i = 0; i < 5000 && !(read_all = server_read_all(server, fd)); ++i) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  REQUIRE(read_all);
}

std::string raw_post(const Server& server, std::string_view team, std::string_view path,
                     const std::string& body, std::string_view more_headers) {
  return "POST " + std::string(path) + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
         server.token(team) + "\r\nX-Tenant-ID: " + std::string(team) +
         "\r\nContent-Type: application/json\r\n" + std::string(more_headers) +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

// The size of the response `got` starts with (its head and the body its Content-Length says), or
// 0 if it has not all come. Called after every read, it copies nothing of the body: a copy of the
// rest of `got` to parse the length made reading a 10 MB answer quadratic (5.4 s under
// ThreadSanitizer; on a loaded machine, longer than the 10 s a stop's drain writes answers for).
static size_t whole_response(const std::string& got) {
  const size_t head_end = got.find("\r\n\r\n");
  if (head_end == std::string::npos) return 0;
  const size_t at = ascii_lower(got.substr(0, head_end)).find("content-length: ");
  size_t length = 0;
  if (at != std::string::npos) {
    const char* digits = got.data() + at + 16;
    std::from_chars(digits, got.data() + head_end, length);
  }
  return got.size() >= head_end + 4 + length ? head_end + 4 + length : 0;
}

bool answer_started(int fd) {
  pollfd readable{fd, POLLIN, 0};
  return ::poll(&readable, 1, 10'000) == 1;
}

std::string read_response(int fd) {
  std::string got;
  std::vector<char> buf(64 << 10);
  while (whole_response(got) == 0) {
    const ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
    if (n <= 0) break;
    got.append(buf.data(), static_cast<size_t>(n));
  }
  return got;
}

std::vector<std::string> read_responses(int fd, size_t count, bool* ended) {
  std::vector<std::string> responses;
  std::string got;
  std::vector<char> buf(64 << 10);
  if (ended != nullptr) *ended = false;
  while (responses.size() < count) {
    if (const size_t size = whole_response(got); size > 0) {
      responses.push_back(got.substr(0, size));
      got.erase(0, size);
      continue;
    }
    const ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
    if (n <= 0) {
      if (ended != nullptr) *ended = n == 0 && got.empty();
      break;
    }
    got.append(buf.data(), static_cast<size_t>(n));
  }
  return responses;
}

std::string metrics(const Server& server) {
  testing::HttpClient http;
  Response r = http.request("GET", server.url() + "/metrics");
  CHECK(r.status == 200);
  return r.body;
}

double metric(const Server& server, std::string_view name) {
  return testing::sample(metrics(server), name).value_or(-1);
}

bool metric_reaches(const Server& server, std::string_view name, double value) {
  double last = -1;
  for (int i = 0; i < 1000; ++i) {
    if ((last = metric(server, name)) == value) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // What the caller's failed check cannot say: seen once (three ThreadSanitizer runs of
  // lifecycle_test started together, 2026-12-05), gatewayd_waf_checks_waiting was never 3 when
  // read, and nothing more was known.
  MESSAGE(name, " was ", last, " at the end of the wait, not ", value, "; server output:\n",
          server.output());
  return false;
}

pid_t stop_zygote(const Server& server) {
  const std::vector<pid_t> children = testing::children_of(server.pid());
  REQUIRE(children.size() == 1);
  REQUIRE(::kill(children[0], SIGSTOP) == 0);
  return children[0];
}

std::string custom_waf_body(std::string_view team, const std::string& label) {
  return testing::json_with(
      testing::json_with(profile_body(team, label + ".example.com"), "waf_template", R"("custom")"),
      "waf_custom_directives", R"("SecRule ARGS \"@rx a\" \"id:1,phase:2,deny\"")");
}

std::string exchange_on(int fd, const std::string& request) {
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    return "";
  }
  return read_response(fd);
}

int connect_with_timeout(const Server& server) {
  const int fd = connect_to(server);
  REQUIRE(fd >= 0);
  timeval timeout{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  return fd;
}

std::string profile_page_request(const Server& server) {
  return "GET /v1/gateway_security_profile?per_page=100 HTTP/1.1\r\nHost: x\r\n"
         "Authorization: Bearer " +
         server.token(kTeamA) + "\r\nX-Tenant-ID: " + std::string(kTeamA) + "\r\n\r\n";
}

size_t open_sockets(pid_t pid) {
  const std::vector<std::string> open = testing::open_descriptors(pid);
  return static_cast<size_t>(std::count_if(open.begin(), open.end(), [](const std::string& target) {
    return target.starts_with("socket:");
  }));
}

size_t sockets_at_rest(const Server& server, Api& api) {
  REQUIRE(api.get("/v1/webhook").status == 200);  // its connection stays open
  return open_sockets(server.pid());
}

size_t sockets_once_down_to(const Server& server, size_t count, std::chrono::milliseconds wait) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (open_sockets(server.pid()) > count && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return open_sockets(server.pid());
}

std::string read_to_end(int fd) {
  timeval short_wait{2, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &short_wait, sizeof short_wait);
  std::string got;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;)
    got.append(buf, static_cast<size_t>(n));
  return got;
}

void create_large_profiles(Api& api) {
  std::string rules;
  while (rules.size() < 60000) rules += "# " + std::string(200, 'c') + "\\n";
  rules += "SecRule ARGS \\\"@contains a\\\" \\\"id:1,phase:2,pass\\\"";
  for (int i = 0; i < 10; ++i) {
    const std::string body = testing::json_with(
        testing::json_with(profile_body(kTeamA, "slow" + std::to_string(i) + ".example.com"),
                           "waf_template", R"("custom")"),
        "waf_custom_directives", "\"" + rules + "\"");
    Response created = api.post("/v1/gateway_security_profile", body);
    INFO(created.body);
    REQUIRE(created.status == 201);
  }
}

int slow_reader(const Server& server, const std::string& request) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  const int small_segment = 536;
  const int small_buffer = 4096;
  REQUIRE(::setsockopt(fd, IPPROTO_TCP, TCP_MAXSEG, &small_segment, sizeof small_segment) == 0);
  REQUIRE(::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small_buffer, sizeof small_buffer) == 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(server.port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0);
  timeval timeout{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  REQUIRE(::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(request.size()));
  return fd;
}

}  // namespace gw::itest
