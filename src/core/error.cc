#include "core/error.h"

namespace gw {

const char* code_name(Code code) {
  switch (code) {
    case Code::kInvalidJson: return "invalid_json";
    case Code::kInvalidQuery: return "invalid_query";
    case Code::kMissingTenant: return "missing_tenant";
    case Code::kUnauthorized: return "unauthorized";
    case Code::kTenantMismatch: return "tenant_mismatch";
    case Code::kNotFound: return "not_found";
    case Code::kMethodNotAllowed: return "method_not_allowed";
    case Code::kHostnameConflict: return "hostname_conflict";
    case Code::kPreconditionFailed: return "precondition_failed";
    case Code::kPayloadTooLarge: return "payload_too_large";
    case Code::kUnsupportedMediaType: return "unsupported_media_type";
    case Code::kValidationFailed: return "validation_failed";
    case Code::kRateLimited: return "rate_limited";
    case Code::kInvalidIdempotencyKey: return "invalid_idempotency_key";
    case Code::kIdempotencyKeyReused: return "idempotency_key_reused";
    case Code::kBadRequest:
      return "bad_request";
    case Code::kHeadersTooLarge:
      return "headers_too_large";
    case Code::kUriTooLong:
      return "uri_too_long";
    case Code::kNotImplemented:
      return "not_implemented";
    case Code::kVersionNotSupported:
      return "http_version_not_supported";
    case Code::kRequestTimeout:
      return "request_timeout";
    case Code::kInternal: return "internal";
    case Code::kUnavailable: return "unavailable";
  }
  return "internal";
}

}  // namespace gw
