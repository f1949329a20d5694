// Errors as values. A Code says what the caller should do next; the HTTP edge maps each code to a
// status in exactly one place (http/problem.cc). Plain value types, safe to copy between threads.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace gw {

enum class Code {
  kInvalidJson,
  kInvalidQuery,
  kMissingTenant,
  kUnauthorized,
  kTenantMismatch,
  kNotFound,
  kMethodNotAllowed,
  kHostnameConflict,
  kPreconditionFailed,
  kPayloadTooLarge,
  kUnsupportedMediaType,
  kValidationFailed,
  kRateLimited,
  kInvalidIdempotencyKey,
  kIdempotencyKeyReused,
  kBadRequest,
  kHeadersTooLarge,
  kUriTooLong,
  kNotImplemented,
  kVersionNotSupported,
  kRequestTimeout,
  kInternal,
  kUnavailable,
};

// The stable, machine-readable name of a code, e.g. "validation_failed".
const char* code_name(Code code);

struct FieldError {
  std::string field;
  std::string message;
  bool operator==(const FieldError&) const = default;
};

// What the answer to a kUnavailable says, whose detail is written for the log (a RocksDB status,
// a path), not for the client.
enum class Shown {
  kByMethod,    // that the service cannot take writes; for GET and HEAD, that it cannot read
  kCannotRead,  // that it cannot read: a write refused because its reads of the store failed,
                // which says nothing of whether writes would succeed
  kDetail,      // the detail, written for the client
};

struct Error {
  Code code;
  std::string detail;
  std::vector<FieldError> errors;  // every field problem found, for kValidationFailed
  Shown shown = Shown::kByMethod;  // for kUnavailable
};

inline Error make_error(Code code, std::string detail) {
  return Error{code, std::move(detail), {}, Shown::kByMethod};
}

// A value or an Error. Deliberately tiny: ok(), value(), error().
template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Error error) : v_(std::move(error)) {}  // NOLINT(google-explicit-constructor)
  bool ok() const { return v_.index() == 0; }
  T& value() { return std::get<0>(v_); }
  const T& value() const { return std::get<0>(v_); }
  Error& error() { return std::get<1>(v_); }
  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

// Collects field errors while validating; converts to one kValidationFailed Error.
// At most kMaxFieldErrors are kept, so a hostile body cannot make the reply huge, and at most
// kMaxPerField for one field, so that a long bad list does not hide every other field's problems:
// the items of a list are one field (`geo_policy.countries[0]` and `[1]` are both
// `geo_policy.countries`), and so is one member of every object of a list (the unknown members of
// a body count as one too; their caller keeps that count, see leave_out).
// The detail says when some were left out.
class FieldErrors {
 public:
  static constexpr size_t kMaxFieldErrors = 100;
  static constexpr size_t kMaxPerField = 10;
  void add(std::string field, std::string message) {
    size_t same = 0;
    for (const auto& e : list_) same += same_field(e.field, field) ? 1 : 0;
    if (list_.size() >= kMaxFieldErrors || same >= kMaxPerField) {
      left_out_ = true;
      return;
    }
    list_.push_back(FieldError{std::move(field), std::move(message)});
  }
  // A problem not listed, for a group of fields counted as one towards kMaxPerField (the
  // unknown members of a body): the detail says that some were left out.
  void leave_out() { left_out_ = true; }
  bool empty() const { return list_.empty(); }
  // Whether a problem of `field` is listed.
  bool has(std::string_view field) const {
    return std::any_of(list_.begin(), list_.end(),
                       [field](const FieldError& e) { return e.field == field; });
  }
  const std::vector<FieldError>& list() const { return list_; }
  Error to_error() const {
    std::string detail = "the request body breaks one or more field rules";
    if (left_out_) {
      detail +=
          " (more problems were found than are listed: at most 10 for a field and 100 in "
          "all)";
    }
    return Error{Code::kValidationFailed, std::move(detail), list_, Shown::kByMethod};
  }

 private:
  // Whether paths `a` and `b` name one field, their list indexes aside ("x[1].y" and "x[7].y").
  static bool same_field(std::string_view a, std::string_view b) {
    size_t i = 0, j = 0;
    while (i < a.size() && j < b.size()) {
      if (a[i] == '[' && b[j] == '[') {
        i = a.find(']', i);
        j = b.find(']', j);
        if (i == std::string_view::npos || j == std::string_view::npos) return false;
      } else if (a[i] != b[j]) {
        return false;
      }
      ++i;
      ++j;
    }
    return i == a.size() && j == b.size();
  }

  std::vector<FieldError> list_;
  bool left_out_ = false;
};

}  // namespace gw
