#include "http/api.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <optional>
#include <string_view>
#include <variant>

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

#include "commands/fields.h"
#include "core/clock.h"
#include "core/flags.h"
#include "core/hex.h"
#include "core/json_numbers.h"
#include "core/text.h"
#include "http/openapi.h"
#include "http/problem.h"
#include "projections/apply.h"

namespace gw::http {

namespace {

using Clock = std::chrono::steady_clock;

Reply json_reply(int status, std::string body) {
  Reply r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

Reply record_reply(int status, Kind kind, Written w) {
  Reply r;
  r.status = status;
  r.headers.reserve(3);
  r.headers.emplace_back("ETag", etag_of(w.version));
  if (w.replayed) r.headers.emplace_back("Idempotency-Replayed", "true");
  if (status == 201) {
    // The new id sits at a fixed place in the record JSON: {"<id_field>":"<id>", ...}.
    const std::string key = std::string("{\"") + id_field(kind) + "\":\"";
    if (w.json.compare(0, key.size(), key) == 0) {
      size_t end = w.json.find('"', key.size());
      r.headers.emplace_back("Location", std::string("/v1/") + kind_name(kind) + "/" +
                                             w.json.substr(key.size(), end - key.size()));
    }
  }
  r.body = std::move(w.json);
  return r;
}

Preconditions preconditions(const Request& request) {
  return Preconditions{request.if_match, request.if_none_match};
}

// JSON texts joined with commas (the inside of an array).
std::string join(const std::vector<std::string>& items) {
  size_t size = items.size();
  for (const auto& i : items) size += i.size();
  std::string out;
  out.reserve(size);
  for (const auto& i : items) {
    if (!out.empty()) out.push_back(',');
    out += i;
  }
  return out;
}

// Where a JSON text that RapidJSON accepted escapes a low surrogate (\uDC00-\uDFFF) that does not
// follow a high one: the offset of the escape's backslash, as RapidJSON gives for a high one
// without its low half; nullopt if none does. RapidJSON refuses an unpaired high surrogate but
// stores an unpaired low one as the three bytes of its code point, which is not UTF-8 (and would
// be served as it is). In valid JSON a backslash occurs only in strings, so escapes can be read
// without tracking them.
std::optional<size_t> unpaired_low_surrogate(std::string_view json) {
  auto hex4 = [&](size_t at, unsigned* out) {
    if (at + 4 > json.size()) return false;
    const char* first = json.data() + at;
    auto r = std::from_chars(first, first + 4, *out, 16);
    return r.ec == std::errc() && r.ptr == first + 4;
  };
  if (json.find('\\') == std::string_view::npos) return std::nullopt;
  bool after_high = false;  // the previous character was a \uD800-\uDBFF escape
  for (size_t i = 0; i < json.size(); ++i) {
    if (json[i] != '\\' || i + 1 == json.size()) {
      after_high = false;
      continue;
    }
    unsigned code = 0;
    if (json[i + 1] == 'u' && hex4(i + 2, &code)) {
      if (code >= 0xDC00 && code <= 0xDFFF && !after_high) return i;
      after_high = code >= 0xD800 && code <= 0xDBFF;
      i += 5;
    } else {
      after_high = false;
      ++i;  // a one-character escape, \\ included
    }
  }
  return std::nullopt;
}

// The invalid_json detail of a body RapidJSON refused: what is wrong, and where. A number beyond
// a double's range (1e400) is JSON by its grammar; it cannot be kept, so it is refused as well, and
// so is one RapidJSON's check of the text refuses whatever its value (0e309: an exponent over 308
// plus the digits of its fraction). RapidJSON calls a control character written as is in a
// string (which must be escaped) an invalid escape, as it calls `\x`, and a NUL the text's end
// ("missing a closing quotation mark"); the detail tells them apart.
std::string json_error_detail(rapidjson::ParseErrorCode code, size_t offset,
                              std::string_view body) {
  const std::string at = " (at byte " + std::to_string(offset) + ")";
  const bool control = offset < body.size() && static_cast<unsigned char>(body[offset]) < 0x20;
  if (control &&
      (code == rapidjson::kParseErrorStringEscapeInvalid ||
       (code == rapidjson::kParseErrorStringMissQuotationMark && body[offset] == '\0'))) {
    return "the body is not valid UTF-8 JSON: a control character (U+00" +
           to_hex(body.substr(offset, 1)) + ") in a string must be escaped" + at;
  }
  if (code == rapidjson::kParseErrorNumberTooBig) {
    return "the body has a number beyond the range of a double, or with an exponent over 308 "
           "plus its fraction's digits" +
           at;
  }
  // RapidJSON's English messages are sentences: "Invalid encoding in string."
  std::string why = rapidjson::GetParseError_En(code);
  if (why.ends_with('.')) why.pop_back();
  if (!why.empty()) why[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(why[0])));
  return "the body is not valid UTF-8 JSON: " + why + at;
}

// "application/json", optionally with charset=utf-8 (the only parameter meaningful for JSON).
bool is_json_media_type(std::string_view ct) {
  for (bool first = true;; first = false) {
    const size_t semi = ct.find(';');
    const std::string part = ascii_lower(trim_blanks(ct.substr(0, semi)));
    if (first ? part != "application/json"
              : !part.empty() && part != "charset=utf-8" && part != "charset=\"utf-8\"") {
      return false;
    }
    if (semi == std::string_view::npos) return true;
    ct.remove_prefix(semi + 1);
  }
}

// Whether a Content-Encoding list names a coding: anything but `identity` (any case), blanks and
// empty elements (RFC 9110 5.6.1).
bool names_a_coding(std::string_view list) {
  while (!list.empty()) {
    const size_t comma = list.find(',');
    std::string_view coding = trim_blanks(list.substr(0, comma));
    if (!coding.empty() && !ascii_iequals(coding, "identity")) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

// The media type check of a request body (415), its content coding first: a body said to be
// coded was read as JSON all the same (gzip's bytes were 400 invalid_json, plain JSON labelled
// gzip was stored; helper 170), and gatewayd decodes none (RFC 9110 8.4, 15.5.16).
std::optional<Error> media_type_problem(const Request& request) {
  if (request.content_encoding && names_a_coding(*request.content_encoding)) {
    return make_error(Code::kUnsupportedMediaType,
                      "the body must be sent without a content coding (Content-Encoding: " +
                          *request.content_encoding + "): gatewayd decodes none");
  }
  if (!request.content_type || !is_json_media_type(*request.content_type)) {
    return make_error(Code::kUnsupportedMediaType, "the body must be sent as application/json");
  }
  return std::nullopt;
}

// The media type (415) and JSON (400) checks of a request body, parsing it into `doc`.
std::optional<Error> parse_json_body(const Request& request, rapidjson::Document& doc) {
  if (auto problem = media_type_problem(request)) return problem;
  // Numbers read exactly: one kept in waf_overrides reads back as the nearest double
  // (core/json_numbers.h).
  // Bytes under 0x80 are valid UTF-8 each; only a body with others needs the parser's check.
  const rapidjson::ParseResult parsed =
      is_ascii(request.body)
          ? parse_exact<rapidjson::kParseIterativeFlag>(doc, request.body)
          : parse_exact<rapidjson::kParseIterativeFlag | rapidjson::kParseValidateEncodingFlag>(
                doc, request.body);
  if (parsed.IsError()) {
    return make_error(Code::kInvalidJson,
                      json_error_detail(parsed.Code(), parsed.Offset(), request.body));
  }
  if (auto at = unpaired_low_surrogate(request.body)) {
    return make_error(
        Code::kInvalidJson,
        "the body is not valid UTF-8 JSON: an unpaired \\uDC00-\\uDFFF escape (at byte " +
            std::to_string(*at) + ")");
  }
  return std::nullopt;
}

// The check of a body sent to an action that reads none (verify, DELETE): it gets the checks of
// every other body and may only be an empty object, so that a client that sends fields learns
// that none is read. `action` names the action in the message.
std::optional<Error> refuse_fields(const Request& request, std::string_view action) {
  if (request.body.empty()) return std::nullopt;
  char buffer[1 << 10];
  rapidjson::MemoryPoolAllocator<> pool(buffer, sizeof buffer);
  rapidjson::Document doc(&pool);
  if (auto refused = parse_json_body(request, doc)) return refused;
  if (!doc.IsObject())
    return make_error(Code::kInvalidJson, "the request body must be a JSON object");
  if (doc.MemberCount() == 0) return std::nullopt;
  FieldErrors errors;
  for (const auto& m : doc.GetObject()) {
    errors.add(std::string(m.name.GetString(), m.name.GetStringLength()),
               std::string(action) + " takes no fields; send no body or {}");
  }
  return errors.to_error();
}

struct Target {
  Route route = Route::kUnmatched;
  std::optional<Kind> kind;
  std::string id;
  std::vector<std::string_view> allowed;  // methods, for 405 (pointing into served_routes())
  bool known_path = false;
  bool protected_route = true;
};

std::vector<std::string_view> split_path(std::string_view path) {
  std::vector<std::string_view> out;
  out.reserve(8);
  if (path.empty() || path[0] != '/') return out;
  path.remove_prefix(1);
  while (true) {
    size_t slash = path.find('/');
    out.push_back(path.substr(0, slash));
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  return out;
}

constexpr std::string_view kIdSegment = "{id}";

// A route of the table with its path template split into segments once.
struct CompiledRoute {
  const RouteSpec* spec;
  std::vector<std::string> segments;
};

const std::vector<CompiledRoute>& compiled_routes() {
  static const std::vector<CompiledRoute> table = [] {
    std::vector<CompiledRoute> out;
    for (const RouteSpec& spec : served_routes()) {
      std::vector<std::string> segments;
      for (auto s : split_path(spec.path)) segments.emplace_back(s);
      out.push_back({&spec, std::move(segments)});
    }
    return out;
  }();
  return table;
}

// True when the path's segments fit the template's; *id is the `{id}` segment.
bool matches(const std::vector<std::string>& tmpl, const std::vector<std::string_view>& seg,
             std::string_view* id) {
  if (tmpl.size() != seg.size()) return false;
  for (size_t i = 0; i < seg.size(); ++i) {
    if (tmpl[i] == kIdSegment) {
      if (seg[i].empty()) return false;
      *id = seg[i];
    } else if (tmpl[i] != seg[i]) {
      return false;
    }
  }
  return true;
}

Target route(const std::string& method, const std::string& path) {
  Target t;
  const auto seg = split_path(path);
  for (const CompiledRoute& c : compiled_routes()) {
    std::string_view id;
    if (!matches(c.segments, seg, &id)) continue;
    if (!t.known_path) {
      // The methods of one path share its template, its kind and whether it is protected.
      t.known_path = true;
      t.kind = c.spec->kind;
      t.id = id;
      t.protected_route = c.spec->protected_route;
      t.allowed.reserve(5);
    }
    t.allowed.push_back(c.spec->method);
    if (c.spec->method == method) t.route = c.spec->route;
    // Every GET answers HEAD too (RFC 9110 9.3.2): the same answer, whose body the transport
    // leaves out. It is counted under the GET's route.
    if (c.spec->method == "GET") {
      t.allowed.push_back("HEAD");
      if (method == "HEAD") t.route = c.spec->route;
    }
  }
  return t;
}

// 400 invalid_query if the query parameter `name`'s sequence number `seq` lies beyond the log's
// last event; an error reading that.
std::optional<Error> beyond_the_log(const ReadModel& reads, std::string_view name, uint64_t seq) {
  auto last = reads.last_seq();
  if (!last.ok()) return std::move(last.error());
  if (seq <= last.value()) return std::nullopt;
  return make_error(Code::kInvalidQuery, std::string(name) + " must not be beyond the log's end (" +
                                             the_logs_end(last.value()) + ")");
}

}  // namespace

const std::vector<RouteSpec>& served_routes() {
  static const std::vector<RouteSpec> table = [] {
    std::vector<RouteSpec> r;
    for (auto [path, route] : {std::pair{"/healthz", Route::kHealthz},
                               {"/readyz", Route::kReadyz},
                               {"/metrics", Route::kMetrics},
                               {"/openapi.json", Route::kOpenapi}}) {
      r.push_back({"GET", path, route, std::nullopt, false});
    }
    r.push_back({"GET", "/v1/events", Route::kEvents, std::nullopt, true});
    for (Kind k : {Kind::kProfile, Kind::kDomain, Kind::kWebhook}) {
      const std::string base = std::string("/v1/") + kind_name(k);
      auto add = [&r, k](const char* method, const std::string& path, Route route) {
        r.push_back({method, path, route, k, true});
      };
      add("GET", base, Route::kList);
      add("POST", base, Route::kCreate);
      add("GET", base + "/{id}", Route::kGet);
      add("PUT", base + "/{id}", Route::kUpdate);
      add("DELETE", base + "/{id}", Route::kDelete);
      if (k == Kind::kDomain) add("POST", base + "/{id}/verify", Route::kVerify);
      add("GET", base + "/{id}/history", Route::kHistory);
    }
    return r;
  }();
  return table;
}

// Per-request state; shared with the writer thread's completion when the request is a write.
struct Api::Context {
  Request request;
  Caller caller;
  Respond respond;
  Metrics* metrics;
  Route route;
  int kind_index;
  Clock::time_point start;

  void reply(Reply r) {
    double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    metrics->record(route, kind_index, r.status, seconds);
    respond(std::move(r));
  }
  void fail(const Error& e) {
    log_hidden_detail(e, request.method, request.path);
    reply(problem(e, unavailable_detail(e, request.method)));
  }
  // Query parameters other than `allowed` (and filters accepted by `filter_ok`) are refused, and
  // so is one given twice (`?status=a&status=b`): which one counts would be a guess. Each
  // parameter is compared with those before it, which stops at the first repeat, and only known
  // names get that far: a few of them.
  bool check_query(std::initializer_list<std::string_view> allowed,
                   const std::function<bool(std::string_view)>& filter_ok = nullptr) {
    const auto& query = request.query;
    for (size_t i = 0; i < query.size(); ++i) {
      const std::string& name = query[i].first;
      bool ok = false;
      for (auto a : allowed) ok = ok || name == a;
      if (!ok && filter_ok) ok = filter_ok(name);
      if (!ok) {
        fail(make_error(Code::kInvalidQuery, "unknown query parameter \"" + name + "\""));
        return false;
      }
      for (size_t j = 0; j < i; ++j) {
        if (query[j].first == name) {
          fail(make_error(Code::kInvalidQuery,
                          "query parameter \"" + name + "\" is given more than once"));
          return false;
        }
      }
      // Decoded, a value could hold any byte (`%00`, `%FF`); no field holds such a value, so a
      // filter on one matched nothing and said nothing.
      if (!is_plain_text(query[i].second)) {
        fail(make_error(Code::kInvalidQuery, "query parameter \"" + name +
                                                 "\" must be UTF-8 text without control "
                                                 "characters"));
        return false;
      }
    }
    return true;
  }
  // Reads integer query parameter `name` in [min, max] into *out (left as is when absent).
  // False after answering 400 invalid_query.
  bool int_param(std::string_view name, uint64_t min, uint64_t max, uint64_t* out) {
    auto p = param(name);
    if (!p) return true;
    auto v = parse_uint(*p, min, max);
    if (!v) {
      fail(make_error(Code::kInvalidQuery, std::string(name) + " must be an integer " +
                                               std::to_string(min) + ".." + std::to_string(max)));
      return false;
    }
    *out = *v;
    return true;
  }
  std::optional<std::string> param(std::string_view name) const {
    for (const auto& [n, v] : request.query) {
      if (n == name) return v;
    }
    return std::nullopt;
  }
  Actor actor() const { return Actor{caller.tenant, caller.token_name}; }
};

Api::Api(ApiConfig config, Service& service, const ReadModel& reads, TokenStore& tokens,
         RateLimiter& limiter, Metrics& metrics, std::function<bool()> writable)
    : config_(std::move(config)),
      service_(service),
      reads_(reads),
      tokens_(tokens),
      limiter_(limiter),
      metrics_(metrics),
      writable_(std::move(writable)),
      waf_checks_("gw-waf-check", std::max(1, config_.waf_check_threads), kMaxWafChecksWaiting) {
  metrics_.add_section([this] {
    const FairPool::Counts c = waf_checks_.counts();
    return "# HELP gatewayd_waf_checks_running Profile writes whose WAF directives are being "
           "checked.\n# TYPE gatewayd_waf_checks_running gauge\ngatewayd_waf_checks_running " +
           std::to_string(c.running) +
           "\n# HELP gatewayd_waf_checks_waiting Profile writes whose WAF directives wait for a "
           "check thread.\n# TYPE gatewayd_waf_checks_waiting gauge\ngatewayd_waf_checks_waiting " +
           std::to_string(c.waiting) +
           "\n# HELP gatewayd_waf_checks_refused_total Profile writes refused (429) because their "
           "tenant had " +
           std::to_string(kMaxWafChecksWaiting) +
           " waiting already.\n# TYPE gatewayd_waf_checks_refused_total "
           "counter\ngatewayd_waf_checks_refused_total " +
           std::to_string(c.refused) + "\n";
  });
}

void Api::stop() { waf_checks_.stop(); }

std::optional<Error> Api::authenticate(const Request& request, Caller* caller) {
  std::optional<std::string_view> token;
  if (request.authorization) token = bearer_token(*request.authorization);
  std::optional<TokenInfo> info;
  if (token) info = tokens_.find(*token);
  if (!info) return make_error(Code::kUnauthorized, "a valid bearer token is required");
  if (!request.tenant || request.tenant->empty()) {
    return make_error(Code::kMissingTenant, "the X-Tenant-ID header is required");
  }
  if (*request.tenant != info->tenant) {
    return make_error(Code::kTenantMismatch, "X-Tenant-ID does not match the token's tenant");
  }
  caller->tenant = info->tenant;
  caller->token_name = info->name;
  return std::nullopt;
}

void Api::count_early_answer(const std::string& method, const std::string& path, int status) {
  const Target t = route(method, path);
  metrics_.record(t.route, t.kind ? static_cast<int>(*t.kind) : 0, status, 0);
}

void Api::handle(Request req, Respond respond) {
  Target t = route(req.method, req.path);
  auto ctx = std::make_shared<Context>(Context{std::move(req), {}, std::move(respond), &metrics_,
                                               t.route, t.kind ? static_cast<int>(*t.kind) : 0,
                                               Clock::now()});
  const Request& request = ctx->request;
  if (!t.known_path) {
    ctx->fail(make_error(Code::kNotFound, "no resource at " + request.path));
    return;
  }
  if (t.route == Route::kUnmatched) {
    Reply r = problem(make_error(Code::kMethodNotAllowed, request.method + " is not allowed here"));
    std::string allow;
    for (auto m : t.allowed) {
      if (!allow.empty()) allow += ", ";
      allow += m;
    }
    r.headers.emplace_back("Allow", allow);
    ctx->reply(std::move(r));
    return;
  }
  if (request.body.size() > config_.max_request_bytes) {
    ctx->reply(body_too_large(config_.max_request_bytes));
    return;
  }
  if (!t.protected_route) {
    if (!ctx->check_query({})) return;
    if (t.route == Route::kMetrics) {
      Reply r = json_reply(200, metrics_.render());
      r.content_type = "text/plain; version=0.0.4";
      ctx->reply(std::move(r));
    } else if (t.route == Route::kOpenapi) {
      ctx->reply(json_reply(200, std::string(openapi_json())));
    } else if ((t.route == Route::kReadyz || t.route == Route::kHealthz) && !writable_()) {
      ctx->reply(problem(make_error(Code::kUnavailable, "writes stopped"), kWritesStopped));
    } else {
      ctx->reply(json_reply(200, "{\"status\":\"ok\"}"));
    }
    return;
  }
  if (auto e = authenticate(request, &ctx->caller)) {
    Reply r = problem(*e);
    if (e->code == Code::kUnauthorized) {
      // RFC 6750 3.1: an error code for a token sent and refused, none for a request without one.
      const bool sent = request.authorization && sends_bearer_token(*request.authorization);
      r.headers.emplace_back("WWW-Authenticate",
                             sent ? R"(Bearer error="invalid_token")" : "Bearer");
    }
    ctx->reply(std::move(r));
    return;
  }
  if (int64_t wait = limiter_.admit(ctx->caller.tenant, steady_millis()); wait > 0) {
    Reply r = problem(make_error(Code::kRateLimited, "too many requests for this tenant"));
    r.headers.emplace_back("Retry-After", std::to_string(wait));
    ctx->reply(std::move(r));
    return;
  }
  // An id not of the form gatewayd makes names no record (a `%00` in it would otherwise reach
  // the store's NUL-separated keys).
  if (t.kind && !t.id.empty() && !is_record_id(*t.kind, t.id)) {
    return ctx->fail(record_not_found(*t.kind, t.id));
  }
  switch (t.route) {
    case Route::kList: return list(*ctx, *t.kind);
    case Route::kCreate: return create(ctx, *t.kind);
    case Route::kGet: return get(*ctx, *t.kind, t.id);
    case Route::kUpdate: return update(ctx, *t.kind, t.id);
    case Route::kDelete: return remove(ctx, *t.kind, t.id);
    case Route::kVerify: return verify(ctx, t.id);
    case Route::kHistory: return history(*ctx, *t.kind, t.id);
    case Route::kEvents: return events(*ctx);
    default: ctx->fail(make_error(Code::kInternal, "unrouted"));
  }
}

void Api::list(Context& ctx, Kind kind) {
  if (!ctx.check_query({"page", "per_page"}, [kind](std::string_view name) {
        return ReadModel::filterable(kind, name);
      })) {
    return;
  }
  uint64_t page = 1, per_page = 20;
  if (!ctx.int_param("page", 1, 1000000000, &page) ||
      !ctx.int_param("per_page", 1, kMaxPerPage, &per_page)) {
    return;
  }
  std::vector<ReadModel::Filter> filters;
  for (const auto& [name, value] : ctx.request.query) {
    if (name == "page" || name == "per_page") continue;
    if (name == "hostname") {
      // Hostnames are stored normalized; a filter value that is no hostname matches nothing.
      std::string normalized;
      filters.push_back({name, fields::hostname(value, &normalized) ? value : normalized});
    } else if (name == "status") {
      // A status outside the kind's set is a typo, not a filter that matches nothing.
      if (auto problem = status_problem(kind, value)) {
        return ctx.fail(make_error(Code::kInvalidQuery, "status " + *problem));
      }
      filters.push_back({name, value});
    } else {
      filters.push_back({name, value});
    }
  }
  auto result = reads_.list(kind, ctx.caller.tenant, filters, page, per_page);
  if (!result.ok()) return ctx.fail(result.error());
  std::string body = "{\"data\":[" + join(result.value().items) +
                     "],\"pagination\":{\"page\":" + std::to_string(page) +
                     ",\"per_page\":" + std::to_string(per_page) +
                     ",\"total\":" + std::to_string(result.value().total) + "}}";
  ctx.reply(json_reply(200, std::move(body)));
}

std::optional<Spec> Api::read_spec(Context& ctx, Kind kind, Mode mode, std::string_view id,
                                   bool* deferred) {
  // A usual body's DOM fits this buffer, so parsing it takes no 64 KiB chunk from the heap (an
  // allocation and a free per request, 4% of an HTTP thread's time in a PUT profile).
  char buffer[8 << 10];
  rapidjson::MemoryPoolAllocator<> pool(buffer, sizeof buffer);
  rapidjson::Document doc(&pool);
  if (auto refused = parse_json_body(ctx.request, doc)) {
    ctx.fail(std::move(*refused));
    return std::nullopt;
  }
  if (deferred != nullptr && kind == Kind::kProfile && config_.policy.check_waf_directives &&
      sends_waf_directives(doc)) {
    *deferred = true;
    return std::nullopt;
  }
  // A domain update's body that breaks a field rule is checked against the stored domain as well
  // (its hostname, its server-set fields), so that one 422 lists every problem. The caller's own
  // live domains only: for any other id the 404 comes once the body is right.
  // A failed read is the answer (503), not a 422 short of the checks it would have made.
  StoredDomain stored;
  std::optional<Error> unread;
  if (kind == Kind::kDomain && mode == Mode::kUpdate) {
    stored = [this, &ctx, id, &unread]() -> std::optional<Domain> {
      auto found = reads_.get(Kind::kDomain, ctx.caller.tenant, id);
      if (!found.ok()) unread = std::move(found.error());
      if (!found.ok() || !found.value()) return std::nullopt;
      auto record = parse_stored_record(Kind::kDomain, id, found.value()->json);
      auto* domain = record.ok() ? std::get_if<Domain>(&record.value()) : nullptr;
      return domain != nullptr ? std::optional<Domain>(std::move(*domain)) : std::nullopt;
    };
  }
  auto spec = parse_spec(kind, mode, doc, config_.policy, stored);
  if (unread) {
    unread->shown = Shown::kCannotRead;
    ctx.fail(*unread);
    return std::nullopt;
  }
  if (!spec.ok()) {
    ctx.fail(spec.error());
    return std::nullopt;
  }
  return std::move(spec.value());
}

// A profile body's WAF directives are checked in the sandbox, which may take up to its time limit
// (10 s; 15 s more if its zygote stopped answering). Checked on an HTTP thread, that would hold
// every connection the thread serves, every tenant's, so such a body is read on a check thread,
// where tenants take turns and each may have kMaxWafChecksWaiting waiting.
template <typename Then>
void Api::with_spec(const std::shared_ptr<Context>& ctx, Kind kind, Mode mode, std::string_view id,
                    Then then) {
  bool deferred = false;
  auto spec = read_spec(*ctx, kind, mode, id, &deferred);
  if (spec) return then(ctx, std::move(*spec), id);
  if (deferred) check_later(ctx, kind, mode, id, std::move(then));
}

template <typename Then>
void Api::check_later(const std::shared_ptr<Context>& ctx, Kind kind, Mode mode,
                      std::string_view id, Then then) {
  auto job = [this, ctx, kind, mode, id = std::string(id),
              then = std::move(then)](bool run) mutable {
    try {
      if (!run) return ctx->reply(shutting_down());
      if (auto read = read_spec(*ctx, kind, mode, id, nullptr)) then(ctx, std::move(*read), id);
    } catch (const std::exception&) {
      ctx->fail(make_error(Code::kInternal, "unexpected exception"));
    }
  };
  if (!waf_checks_.post(ctx->caller.tenant, std::move(job))) {
    Reply r =
        problem(make_error(Code::kRateLimited,
                           "too many profile writes with WAF directives waiting to be checked "
                           "for this tenant (" +
                               std::to_string(kMaxWafChecksWaiting) + ")"));
    r.headers.emplace_back("Retry-After", "1");
    ctx->reply(std::move(r));
  }
}

Done Api::write_reply(const std::shared_ptr<Context>& ctx, Kind kind, int status) {
  return [ctx, kind, status](Result<Written> r) {
    if (!r.ok()) return ctx->fail(r.error());
    ctx->reply(record_reply(status, kind, std::move(r.value())));
  };
}

void Api::create(const std::shared_ptr<Context>& ctx, Kind kind) {
  if (!ctx->check_query({})) return;
  std::optional<IdempotencyKey> idempotency;
  if (const auto& key = ctx->request.idempotency_key) {
    if (!valid_idempotency_key(*key)) {
      return ctx->fail(make_error(Code::kInvalidIdempotencyKey,
                                  "Idempotency-Key must be 1 to 255 visible ASCII characters"));
    }
    idempotency = IdempotencyKey{ctx->caller.tenant, *key,
                                 request_fingerprint(ctx->request.method, ctx->request.path,
                                                     ctx->request.body)};
  }
  // A repeat whose answer is kept under its Idempotency-Key gets that answer at once, before its
  // body is read: its body passed the field rules when it was first sent, and a retry must not
  // be refused by rules that changed since (helper 158: a restart with another
  // --platform-domain, which reserved the hostname created, made the retry 422 while the create
  // stood), nor wait for a WAF check thread again or be refused because too many wait, nor be
  // refused because writes have stopped (the writer would answer 503 without looking). Its
  // media type is the request's own, not part of what the key keeps: checked first (a review
  // found a repeat sent as text/plain answered 201).
  if (idempotency) {
    if (auto problem = media_type_problem(ctx->request)) return ctx->fail(*problem);
    if (auto kept = service_.written_replay(*idempotency)) {
      return write_reply(ctx, kind, 201)(std::move(*kept));
    }
  }
  bool deferred = false;
  auto spec = read_spec(*ctx, kind, Mode::kCreate, {}, &deferred);
  if (!spec && !deferred) return;
  auto then = [this, kind, idempotency = std::move(idempotency)](const std::shared_ptr<Context>& c,
                                                                 Spec s, std::string_view) mutable {
    service_.create(std::move(s), c->actor(), std::move(idempotency), write_reply(c, kind, 201));
  };
  if (spec) return then(ctx, std::move(*spec), {});
  check_later(ctx, kind, Mode::kCreate, {}, std::move(then));
}

void Api::get(Context& ctx, Kind kind, const std::string& id) {
  if (!ctx.check_query({"as_of"})) return;
  uint64_t as_of = 0;  // 0: as it is now
  if (!ctx.int_param("as_of", 1, kMaxQuerySeq, &as_of)) return;
  // A point in the future would give an answer that later writes could change.
  if (as_of != 0) {
    if (auto beyond = beyond_the_log(reads_, "as_of", as_of)) return ctx.fail(*beyond);
  }
  auto found = as_of != 0 ? reads_.get_as_of(kind, ctx.caller.tenant, id, as_of)
                          : reads_.get(kind, ctx.caller.tenant, id);
  if (!found.ok()) return ctx.fail(found.error());
  if (!found.value()) return ctx.fail(record_not_found(kind, id));
  const uint64_t version = found.value()->version;
  int status = 200;
  // RFC 9110 13.1.1: If-Match is evaluated before any method is performed, GET included, and
  // first (13.2.2); the record was served whatever it said, a malformed one too (helper 158).
  if (ctx.request.if_match) {
    if (auto e = if_match_failure(*ctx.request.if_match, version,
                                  as_of != 0 ? "ETag" : "current ETag")) {
      return ctx.fail(*e);
    }
  }
  if (ctx.request.if_none_match) {
    // RFC 9110 13.1.2: a GET whose If-None-Match matches the current tag is 304, with the ETag
    // and no body (the Content-Length is the 200's, as 8.6 allows). A malformed one fails closed,
    // as a write's does.
    switch (evaluate_if_none_match(*ctx.request.if_none_match, version)) {
      case IfMatch::kMatches:
        status = 304;
        break;
      case IfMatch::kDiffers:
        break;
      case IfMatch::kMalformed:
        return ctx.fail(malformed_precondition("If-None-Match"));
    }
  }
  ctx.reply(record_reply(status, kind, Written{std::move(found.value()->json), version}));
}

void Api::update(const std::shared_ptr<Context>& ctx, Kind kind, const std::string& id) {
  if (!ctx->check_query({})) return;
  with_spec(ctx, kind, Mode::kUpdate, id,
            [this, kind](const std::shared_ptr<Context>& c, Spec spec, std::string_view at) {
              service_.update(kind, std::string(at), std::move(spec), c->actor(),
                              preconditions(c->request), write_reply(c, kind, 200));
            });
}

void Api::remove(const std::shared_ptr<Context>& ctx, Kind kind, const std::string& id) {
  if (!ctx->check_query({})) return;
  if (auto refused = refuse_fields(ctx->request, "DELETE")) return ctx->fail(std::move(*refused));
  service_.remove(
      kind, id, ctx->actor(),
      [ctx, kind, id](Result<Written> r) {
        if (!r.ok()) return ctx->fail(r.error());
        ctx->reply(json_reply(200, std::string("{\"message\":\"") + kind_name(kind) + " " + id +
                                       " deleted\"}"));
      },
      preconditions(ctx->request));
}

void Api::verify(const std::shared_ptr<Context>& ctx, const std::string& id) {
  if (!ctx->check_query({})) return;
  if (auto refused = refuse_fields(ctx->request, "verify")) return ctx->fail(std::move(*refused));
  service_.verify(id, ctx->actor(), write_reply(ctx, Kind::kDomain, 200),
                  preconditions(ctx->request));
}

void Api::history(Context& ctx, Kind kind, const std::string& id) {
  if (!ctx.check_query({"after_version", "limit"})) return;
  // No count limit by default: a page ends at the history's end or at ReadModel::kMaxPageBytes.
  uint64_t after_version = 0, limit = UINT64_MAX;
  if (!ctx.int_param("after_version", 0, kMaxQuerySeq, &after_version) ||
      !ctx.int_param("limit", 1, 1000, &limit)) {
    return;
  }
  auto found = reads_.history(kind, ctx.caller.tenant, id, after_version, limit);
  if (!found.ok()) return ctx.fail(found.error());
  if (!found.value()) return ctx.fail(record_not_found(kind, id));
  const auto& page = *found.value();
  std::string body = "{\"data\":[" + join(page.events) + "],\"next_after_version\":" +
                     (page.next_after_version == 0 ? std::string("null")
                                                   : std::to_string(page.next_after_version)) +
                     "}";
  ctx.reply(json_reply(200, std::move(body)));
}

void Api::events(Context& ctx) {
  if (!ctx.check_query({"after", "limit"})) return;
  uint64_t after = 0, limit = 100;
  if (!ctx.int_param("after", 0, kMaxQuerySeq, &after) ||
      !ctx.int_param("limit", 1, 1000, &limit)) {
    return;
  }
  auto result = reads_.tenant_events(ctx.caller.tenant, after, limit);
  if (!result.ok()) return ctx.fail(result.error());
  if (result.value().events.empty() && after != 0) {
    // Every `after` a tailer was given is at most the log's end. One beyond it is a checkpoint from
    // another log, or from this one before an older backup was restored, and an empty page would
    // have the tailer skip every event up to it without a word (as for `as_of`). The end only
    // grows, so an `after` beyond the end read after the page was beyond it at the page's read.
    if (auto beyond = beyond_the_log(reads_, "after", after)) return ctx.fail(*beyond);
  }
  std::string body = "{\"data\":[" + join(result.value().events) +
                     "],\"next_after\":" + std::to_string(result.value().next_after) + "}";
  ctx.reply(json_reply(200, std::move(body)));
}

}  // namespace gw::http
