// The REST API: routing, authentication, tenancy, rate limiting, request validation and replies,
// over the Service (writes) and the ReadModel (reads). Transport-free: the Pistache adapter in
// server.cc feeds it Requests. Thread-safe: handle() is called concurrently from every HTTP worker
// thread; replies to writes are sent from the writer thread once the write is durable.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "commands/parse.h"
#include "core/fair_pool.h"
#include "http/metrics.h"
#include "http/rate_limiter.h"
#include "http/request.h"
#include "http/tokens.h"
#include "projections/read_model.h"
#include "service/service.h"

namespace gw::http {

struct ApiConfig {
  size_t max_request_bytes = 1 << 20;
  FieldPolicy policy;
  // Threads that read profile bodies with WAF directives, whose check (policy's
  // check_waf_directives, the sandbox) may take seconds: off the HTTP threads.
  int waf_check_threads = 2;
};

// How many profile writes with WAF directives one tenant may have waiting for a check thread;
// one more is 429.
constexpr size_t kMaxWafChecksWaiting = 16;

// The most records a list page holds (`per_page`).
constexpr uint64_t kMaxPerPage = 100;
// The largest sequence number or version a query takes (`after`, `after_version`, `as_of`): the
// OpenAPI document has them as int64, which is what clients generated from it hold.
constexpr uint64_t kMaxQuerySeq = INT64_MAX;

// One method on one path template of the router's table, e.g. POST /v1/domain/{id}/verify.
// `{id}` stands for any one non-empty path segment; every other segment is literal.
struct RouteSpec {
  std::string method;
  std::string path;
  Route route;
  std::optional<Kind> kind;
  bool protected_route;  // needs the bearer token and X-Tenant-ID
};

// The table the router matches requests against, in order (methods of one path in Allow order).
const std::vector<RouteSpec>& served_routes();

class Api {
 public:
  Api(ApiConfig config, Service& service, const ReadModel& reads, TokenStore& tokens,
      RateLimiter& limiter, Metrics& metrics, std::function<bool()> writable);

  void handle(Request request, Respond respond);
  // Answers 503 (shutting down) to the profile writes still waiting for a check thread, and waits
  // for those being checked, whose answers go out as usual. Server::shutdown calls it once the
  // drain ends, while connections are still open; handle() answers later ones 503 as well.
  void stop();
  // Counts in the metrics an answer the server gave without handing the request over (shutting
  // down, a refused Content-Length), under the route `method` and `path` name, as handle() counts
  // its own; it took no time to speak of (it is answered as soon as it is read).
  void count_early_answer(const std::string& method, const std::string& path, int status);

 private:
  struct Caller {
    std::string tenant;
    std::string token_name;
  };
  struct Context;
  std::optional<Error> authenticate(const Request& request, Caller* caller);
  void list(Context& ctx, Kind kind);
  void create(const std::shared_ptr<Context>& ctx, Kind kind);
  void get(Context& ctx, Kind kind, const std::string& id);
  void update(const std::shared_ptr<Context>& ctx, Kind kind, const std::string& id);
  void remove(const std::shared_ptr<Context>& ctx, Kind kind, const std::string& id);
  void verify(const std::shared_ptr<Context>& ctx, const std::string& id);
  // Completion of a write: the record with its ETag (and Location on 201), or the problem.
  static Done write_reply(const std::shared_ptr<Context>& ctx, Kind kind, int status);
  void history(Context& ctx, Kind kind, const std::string& id);
  void events(Context& ctx);
  // The body as a Spec, or nullopt once ctx has failed. `id`: the record an update is for.
  // With `deferred` given, a profile body with WAF directives is not read but left for a check
  // thread: nullopt, ctx not failed, and *deferred set.
  std::optional<Spec> read_spec(Context& ctx, Kind kind, Mode mode, std::string_view id,
                                bool* deferred);
  // Reads the body as a Spec and hands it to `then(ctx, spec, id)`, or answers the problem; on a
  // check thread if its WAF directives need the sandbox (check_later).
  template <typename Then>
  void with_spec(const std::shared_ptr<Context>& ctx, Kind kind, Mode mode, std::string_view id,
                 Then then);
  // For a body read_spec deferred: reads it on a check thread and hands it to `then` there (`then`
  // is kept until then, so it holds nothing of the caller's by reference), or answers 429 when
  // the tenant has kMaxWafChecksWaiting waiting already.
  template <typename Then>
  void check_later(const std::shared_ptr<Context>& ctx, Kind kind, Mode mode, std::string_view id,
                   Then then);

  ApiConfig config_;
  Service& service_;
  const ReadModel& reads_;
  TokenStore& tokens_;
  RateLimiter& limiter_;
  Metrics& metrics_;
  // False once writing stopped after a failed write (Writer::writable): only a restart recovers,
  // so /healthz fails too, not only /readyz, and a supervisor that watches it restarts gatewayd.
  std::function<bool()> writable_;
  // Last: destroyed first, running what waits while everything its jobs use is still there.
  FairPool waf_checks_;
};

}  // namespace gw::http
