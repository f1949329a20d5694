// Shared pieces of the HTTP integration suite: a real gatewayd on port 0 in a temp data dir with
// a token per team, an authenticated client, the three resource kinds as a table, and checks for
// the problem+json error shape. Used from the test's main thread unless noted.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <doctest/doctest.h>
#include <rapidjson/document.h>

#include "support/gatewayd.h"
#include "support/http_client.h"
#include "support/json.h"
#include "support/prometheus.h"
#include "support/temp_dir.h"

namespace gw::itest {

using testing::at;
using testing::field;
using testing::Headers;
using testing::HttpClient;
using testing::items;
using testing::length;
using testing::num;
using testing::Response;
using testing::str;

inline constexpr std::string_view kTeamA = "team_a";
inline constexpr std::string_view kTeamB = "team_b";

// What a restarted Server may use (Server::restart); 0: no limit of the test's own.
struct ServerLimits {
  // No file the server writes can grow past this size (testing::Gatewayd::limit_file_size).
  uint64_t max_file_bytes = 0;
  // The server may have at most this many open files (testing::Gatewayd::limit_open_files).
  uint64_t max_open_files = 0;
};

// A gatewayd on 127.0.0.1:0 with a fresh data dir and one token per team (team_a and team_b,
// named "<team>-token"): a copy of the tokens file gatewayctl made for the first Server of the
// test program, so the servers of one program accept the same two tokens. The verifier gets a
// DNS server on a closed loopback port (GATEWAY_DNS_SERVERS=127.0.0.1:1, unless `env` sets that
// variable; a `--dns-servers` in `extra_args` wins over it), so nothing ever leaves the machine.
// Throws if the server does not start.
class Server {
 public:
  explicit Server(std::vector<std::string> extra_args = {}, std::vector<std::string> env = {});
  ~Server();  // SIGKILL if still running (tests that care call stop() and check its status)
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  const std::string& url() const { return proc_.base_url(); }
  int port() const { return proc_.port(); }        // the port of url()
  std::string token(std::string_view team) const;  // team_a or team_b
  // A new token made with gatewayctl now (the server may be running).
  std::string new_token(std::string_view team, std::string_view name) const;
  std::string tokens_file() const { return dir_.file("tokens"); }
  const std::string& data_dir() const { return dir_.path(); }

  testing::ExitStatus stop(int sig = SIGTERM);  // signal (SIGTERM) and wait for the exit
  testing::ExitStatus kill();  // SIGKILL
  // Starts again on the same data dir with the same arguments, under `limits`.
  void restart(ServerLimits limits = {});
  // Starts again on the same data dir with `extra_args` instead of those it had.
  void restart_with(std::vector<std::string> extra_args);
  std::string output() const { return proc_.output(); }
  // What the server prints reaches output() through a pipe some time after it printed it: a
  // line printed before a response may not be there yet when the response is.
  std::optional<std::string> wait_for_line(std::string_view needle) {
    return proc_.wait_for_line(needle, std::chrono::seconds(10));
  }
  pid_t pid() const { return proc_.pid(); }

 private:
  void start();

  testing::TempDir dir_;
  std::vector<std::string> extra_args_;
  std::vector<std::string> env_;
  std::string token_a_;
  std::string token_b_;
  testing::Gatewayd proc_;
};

// An HTTP client acting for one team: every request carries `Authorization: Bearer <token>` and
// `X-Tenant-ID: <team>`; bodies are sent as application/json. Follows the server across restarts.
// One Api per thread.
class Api {
 public:
  Api(const Server& server, std::string_view team);
  Api(const Server& server, std::string token, std::string tenant);

  Response get(const std::string& path, const Headers& extra = {});
  Response post(const std::string& path, const std::string& body, const Headers& extra = {});
  Response put(const std::string& path, const std::string& body, const Headers& extra = {});
  Response del(const std::string& path, const Headers& extra = {});
  // `method` with the auth headers, then `extra`, and the body as given (no Content-Type added).
  Response send(std::string_view method, const std::string& path, const Headers& extra,
                const std::optional<std::string>& body = std::nullopt);

  HttpClient& http() { return http_; }
  const std::string& team() const { return tenant_; }

 private:
  const Server* server_;
  std::string token_;
  std::string tenant_;
  HttpClient http_;
};

// One resource kind of the API, so shared behaviour is tested once for all three.
struct Kind {
  std::string_view name;       // "domain"; also the event type prefix ("domain.created")
  std::string_view path;       // "/v1/domain"
  std::string_view id_field;   // "domain_id"
  std::string_view id_prefix;  // "dom_"
  // A valid create body for `team`; `n` makes its hostname / workload unique.
  std::string (*body)(std::string_view team, int n);
  std::string_view edit_field;  // a field a PUT can change, and a valid new value (JSON)
  std::string_view edit_value;
};

std::string profile_body(std::string_view team, std::string_view hostname);
std::string domain_body(std::string_view team, std::string_view hostname);
std::string webhook_body(std::string_view team, std::string_view workload_id);

extern const Kind kProfile;
extern const Kind kDomain;
extern const Kind kWebhook;
inline const Kind* const kKinds[] = {&kProfile, &kDomain, &kWebhook};

std::string item_path(const Kind& kind, std::string_view id);

// The parsed body of `r` (HasParseError() set when it is not JSON).
rapidjson::Document json(const Response& r);

// POST /v1/domain/{id}/verify with no body (Content-Length: 0, no Content-Type).
Response verify(Api& api, std::string_view domain_id);

// Creates one record (expects 201) and returns its id ("" on failure, with a failed CHECK).
std::string create(Api& api, const Kind& kind, int n);

// pagination.total of the first page of the api's tenant's records of `kind` (expects 200).
int64_t total(Api& api, const Kind& kind);

// `body`, a JSON object, with blanks before its closing brace up to `size` bytes in all.
std::string padded(std::string body, size_t size);

// CHECKs that `r` is an application/problem+json error with this status and code, in the agreed
// shape: type "urn:gatewayd:problem:<code>", title, status, detail, code, errors[{field,message}].
void check_problem(const Response& r, long status, std::string_view code);

// The `field` of each entry of a problem's `errors` array.
std::vector<std::string> error_fields(const Response& r);

// True when `fields` has `name` itself or a sub-field of it ("name.x", "name[0]...").
bool has_field(const std::vector<std::string>& fields, std::string_view name);

// The comma-separated tokens of a header value such as Allow, trimmed.
std::vector<std::string> split_list(std::string_view value);

// Seconds since the epoch, now.
int64_t unix_now();

// `argv` run under strace, following forks, tracing openat, fsync, fdatasync, the renames and
// write: its result, and the trace's lines (strace from Debian's package; scripts/deps.sh).
struct Traced {
  testing::CommandResult result;
  std::vector<std::string> lines;
};
Traced run_traced(const std::vector<std::string>& argv);
// The environment to add for a command run under strace: under ASan, its ASAN_OPTIONS with leak
// checks off (LeakSanitizer cannot stop a traced process's threads: "LeakSanitizer has
// encountered a fatal error"); nothing otherwise.
std::vector<std::string> traced_env();
// The index of the first line of `lines` holding `needle` (lines.size() if none).
size_t first_line(const std::vector<std::string>& lines, std::string_view needle);
// The index of the first line that fsyncs directory `dir` (a descriptor openat gave for it, with
// O_DIRECTORY) at or after line `from` (lines.size() if none).
size_t dir_sync(const std::vector<std::string>& lines, const std::string& dir, size_t from = 0);

// Every event of the api's tenant, paged through /v1/events, each as testing::to_json of it.
std::vector<std::string> all_events(Api& api);

// A new TCP connection to the server, connected (-1 if it could not be made). The caller closes it.
// A `receive_buffer` over 0 is set (SO_RCVBUF) before the connection is made: set after it, the
// window the client offers shrinks below what the two ends agreed on, and once the buffer has
// filled, the server's TCP sends the rest only as its zero-window probes, which back off to
// minutes.
int connect_to(const Server& server, int receive_buffer = 0);

// Sends `bytes` on connection `fd` whole, then waits until gatewayd has read all of them: the
// client's kernel has no byte of them left unacknowledged (TIOCOUTQ), and the server's socket
// has none left unread (its receive queue in /proc/net/tcp). REQUIREs both. IPv4 loopback only.
void send_until_read(const Server& server, int fd, const std::string& bytes);

// Waits until gatewayd has shut the sending side of the client's connection `fd` (its end has
// left ESTABLISHED in /proc/net/tcp: a FIN is queued behind whatever it still has to send), at
// most 10 s. REQUIREs it, and that the end is still there (not reset). IPv4 loopback only.
void wait_until_server_shut_writing(const Server& server, int fd);

// A POST of `body` (application/json) to `path` as the bytes of an HTTP/1.1 request, with `team`'s
// token and X-Tenant-ID and `more_headers` (each line ending in CRLF), for tests that write to a
// connection themselves.
std::string raw_post(const Server& server, std::string_view team, std::string_view path,
                     const std::string& body, std::string_view more_headers = "");

// Whether the answer to the request sent on connection `fd` starts to come (a byte of it can be
// read) within 10 s.
bool answer_started(int fd);

// Reads one response from connection `fd`: its head and as many body bytes as its Content-Length
// says ("" if none came; what came if the connection ends or a read times out first).
std::string read_response(int fd);

// Reads `count` responses from connection `fd`, each its head and the body its Content-Length
// says (no response to HEAD among them), split apart. Fewer if the connection ends or a read times
// out first: `*ended` (if given) says whether it ended, with no byte of a response left over.
std::vector<std::string> read_responses(int fd, size_t count, bool* ended = nullptr);

// GET /metrics (CHECKs 200) and returns the Prometheus text.
std::string metrics(const Server& server);
// The value of gatewayd's gauge or counter `name` (no labels) in /metrics; -1 when absent.
double metric(const Server& server, std::string_view name);
// Waits (up to 10 s) until metric(server, name) is `value`; false if it never was.
bool metric_reaches(const Server& server, std::string_view name, double value);

// Stops (SIGSTOP) the WAF sandbox's zygote, gatewayd's only child, so that every check waits
// until it is continued (SIGCONT); its pid. The Server's end continues it if the test did not.
pid_t stop_zygote(const Server& server);

// The body of team `team`'s profile `label`.example.com with one custom WAF rule, which the
// sandbox checks.
std::string custom_waf_body(std::string_view team, const std::string& label);

// Raw connections, for tests of the connection's life.

// Writes `request` on connection `fd` (whose reads time out after 5 s) and reads one response:
// its head and as many body bytes as its Content-Length says ("" if none came).
std::string exchange_on(int fd, const std::string& request);

// A new connection to the server whose reads time out after 5 s.
int connect_with_timeout(const Server& server);

// The bytes of a GET of team A's first page of 100 profiles, with its token.
std::string profile_page_request(const Server& server);

// The sockets process `pid` has open (its listener, its connections, its own socket pairs).
size_t open_sockets(pid_t pid);

// The sockets the server has open with one idle keep-alive connection of `api`'s, opened here:
// what the count goes back to once a test's own connections have ended.
size_t sockets_at_rest(const Server& server, Api& api);

// The sockets the server has open once they are down to `count`, or after `wait`.
size_t sockets_once_down_to(const Server& server, size_t count,
                            std::chrono::milliseconds wait = std::chrono::seconds(5));

// Everything a connection sends until it ends (or 2 s without a byte).
std::string read_to_end(int fd);

// Ten profiles of about 60 KB each for team_a: a list page of about 600 KB.
void create_large_profiles(Api& api);

// A connection from a client with small segments and a small receive buffer, so that a large
// answer waits for it to read; `request` sent on it.
int slow_reader(const Server& server, const std::string& request);

// sample(text, series): the value of one sample of Prometheus text (support/prometheus.h).
using testing::sample;

}  // namespace gw::itest
