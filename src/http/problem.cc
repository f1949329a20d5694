#include "http/problem.h"

#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "core/text.h"

namespace gw::http {

int status_of(Code code) {
  switch (code) {
    case Code::kInvalidJson:
    case Code::kInvalidQuery:
    case Code::kMissingTenant:
    case Code::kInvalidIdempotencyKey:
    case Code::kBadRequest:
      return 400;
    case Code::kUnauthorized: return 401;
    case Code::kTenantMismatch: return 403;
    case Code::kNotFound: return 404;
    case Code::kMethodNotAllowed: return 405;
    case Code::kHostnameConflict: return 409;
    case Code::kPreconditionFailed: return 412;
    case Code::kPayloadTooLarge: return 413;
    case Code::kUnsupportedMediaType: return 415;
    case Code::kValidationFailed:
    case Code::kIdempotencyKeyReused: return 422;
    case Code::kRateLimited: return 429;
    case Code::kHeadersTooLarge:
      return 431;
    case Code::kUriTooLong:
      return 414;
    case Code::kNotImplemented:
      return 501;
    case Code::kVersionNotSupported:
      return 505;
    case Code::kRequestTimeout:
      return 408;
    case Code::kInternal: return 500;
    case Code::kUnavailable: return 503;
  }
  return 500;
}

namespace {

constexpr size_t kMaxDetailBytes = 1024;
constexpr size_t kMaxFieldBytes = 128;

const char* title_of(Code code) {
  switch (code) {
    case Code::kInvalidJson: return "Invalid JSON";
    case Code::kInvalidQuery: return "Invalid query";
    case Code::kMissingTenant: return "Missing tenant";
    case Code::kUnauthorized: return "Unauthorized";
    case Code::kTenantMismatch: return "Tenant mismatch";
    case Code::kNotFound: return "Not found";
    case Code::kMethodNotAllowed: return "Method not allowed";
    case Code::kHostnameConflict: return "Hostname conflict";
    case Code::kPreconditionFailed: return "Precondition failed";
    case Code::kPayloadTooLarge: return "Payload too large";
    case Code::kUnsupportedMediaType: return "Unsupported media type";
    case Code::kValidationFailed: return "Validation failed";
    case Code::kRateLimited: return "Rate limited";
    case Code::kInvalidIdempotencyKey: return "Invalid Idempotency-Key";
    case Code::kIdempotencyKeyReused: return "Idempotency-Key reused";
    case Code::kBadRequest:
      return "Bad request";
    case Code::kHeadersTooLarge:
      return "Request headers too large";
    case Code::kUriTooLong:
      return "URI too long";
    case Code::kNotImplemented:
      return "Not implemented";
    case Code::kVersionNotSupported:
      return "HTTP version not supported";
    case Code::kRequestTimeout:
      return "Request timeout";
    case Code::kInternal: return "Internal error";
    case Code::kUnavailable: return "Service unavailable";
  }
  return "Internal error";
}

}  // namespace

void log_hidden_detail(const Error& error, std::string_view method, std::string_view path) {
  if (error.code != Code::kInternal && error.code != Code::kUnavailable) return;
  static std::mutex mu;
  static int64_t last_second = -1;
  static uint64_t left_out = 0;
  const int64_t second = std::chrono::duration_cast<std::chrono::seconds>(
                             std::chrono::steady_clock::now().time_since_epoch())
                             .count();
  std::lock_guard<std::mutex> lock(mu);
  if (second == last_second) {
    ++left_out;
    return;
  }
  last_second = second;
  std::string line = "gatewayd: ";
  // The method and path are the client's bytes: printable ASCII only, and a bounded length.
  for (char c : std::string(method) + " " + std::string(path.substr(0, 512))) {
    line.push_back(c >= ' ' && c < 127 ? c : '?');
  }
  line += ": ";
  line += code_name(error.code);
  line += ": ";
  line += error.detail;
  if (left_out > 0) line += " (" + std::to_string(left_out) + " more since the last such line)";
  left_out = 0;
  line += "\n";
  std::fputs(line.c_str(), stderr);
}

Reply shutting_down() {
  Reply r = problem(make_error(Code::kUnavailable, "shutting down"), kShuttingDown);
  r.close = true;
  return r;
}

Error body_too_large_error(size_t max_request_bytes) {
  return make_error(Code::kPayloadTooLarge,
                    "the request body exceeds " + std::to_string(max_request_bytes) + " bytes");
}

Reply body_too_large(size_t max_request_bytes) {
  Reply r = problem(body_too_large_error(max_request_bytes));
  r.close = true;
  return r;
}

Reply request_timeout(std::chrono::milliseconds idle) {
  const int64_t ms = idle.count();
  const std::string within =
      ms % 1000 == 0 ? std::to_string(ms / 1000) + " s" : std::to_string(ms) + " ms";
  Reply r = problem(make_error(Code::kRequestTimeout,
                               "no request came whole on this connection within " + within +
                                   " of the one before it (or of its opening); it is closed"));
  r.close = true;
  return r;
}

std::string_view unavailable_detail(const Error& error, std::string_view method) {
  switch (error.shown) {
    case Shown::kByMethod:
      break;
    case Shown::kCannotRead:
      return kCannotRead;
    case Shown::kDetail:
      return error.detail;
  }
  return method == "GET" || method == "HEAD" ? kCannotRead : kCannotWrite;
}

Reply problem(const Error& error, std::string_view unavailable) {
  std::string detail = error.detail;
  if (error.code == Code::kInternal) detail = "an internal error occurred";
  if (error.code == Code::kUnavailable && error.shown != Shown::kDetail) detail = unavailable;
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  w.StartObject();
  w.Key("type");
  w.String(std::string("urn:gatewayd:problem:") + code_name(error.code));
  w.Key("title");
  w.String(title_of(error.code));
  w.Key("status");
  w.Int(status_of(error.code));
  // Details and field names can echo client text (a path, a member name): valid UTF-8 and a
  // bounded size, whatever was sent.
  w.Key("detail");
  w.String(client_text(detail, kMaxDetailBytes));
  w.Key("code");
  w.String(code_name(error.code));
  w.Key("errors");
  w.StartArray();
  for (const auto& f : error.errors) {
    w.StartObject();
    w.Key("field");
    w.String(client_text(f.field, kMaxFieldBytes));
    w.Key("message");
    w.String(client_text(f.message, kMaxDetailBytes));
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  Reply r;
  r.status = status_of(error.code);
  r.content_type = "application/problem+json";
  r.body.assign(buf.GetString(), buf.GetSize());
  // RFC 9110 15.5.16: a 415 says which content codings a body may be in (gatewayd decodes none).
  if (error.code == Code::kUnsupportedMediaType)
    r.headers.emplace_back("Accept-Encoding", "identity");
  return r;
}

}  // namespace gw::http
