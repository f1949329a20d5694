// Request bodies to validated specs. Every field rule of CONTRACT.md section 3 is checked here and
// every problem found is reported (not only the first). Pure and thread-safe; runs on the HTTP
// worker threads so the single writer thread only does the stateful part of a command.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <variant>

#include <rapidjson/document.h>

#include "commands/fields.h"
#include "commands/records.h"
#include "core/error.h"

namespace gw {

// The two namespaces reserved for platform-managed routes (--platform-domain and
// --platform-run-domain; an empty one reserves nothing). No team's record may take a name equal to
// or under either (parse refuses it), and no team's domain there is verified, directly or
// through a parent (decide.h): one stored before its namespace was reserved keeps its name.
struct PlatformNamespaces {
  std::string domain;
  std::string run_domain;
  bool covers(std::string_view hostname) const;
  // "is reserved for platform-managed routes (D, R)", a field problem's message.
  std::string problem() const;
};

// Settings that field rules depend on.
struct FieldPolicy {
  PlatformNamespaces platform{"platform.test", "run.platform.test"};
  // Checks a non-empty waf_custom_directives: its problem, or an error that makes parse_spec fail
  // with it (kUnavailable: the check could not run). Unset: fields::waf_directives in this
  // process. gatewayd runs that function in a process of its own (src/sandbox/).
  std::function<Result<fields::Problem>(std::string_view)> check_waf_directives;
};

// A domain body: the user's fields in `domain`, plus the server-controlled fields the client sent
// back (allowed only with their current value, so a GET-edit-PUT round trip works).
struct DomainSpec {
  Domain domain;  // scope empty = not given
  std::optional<std::string> status, verification_hostname, verification_value,
      verification_parent_id, verification_error;
  std::optional<int64_t> verified_at;
};

using Spec = std::variant<Profile, DomainSpec, Webhook>;

enum class Mode { kCreate, kUpdate };

// The stored domain a body updates, for the rules that need it (check_domain_update): nullopt
// when there is none (unknown, deleted, another team's).
using StoredDomain = std::function<std::optional<Domain>()>;

// Parses and validates a create/update body of `kind`. `body` is any JSON value; a non-object is
// kInvalidJson. Field problems are one kValidationFailed error listing all of them. On create,
// domain server fields may be sent only with a new domain's starting values (pending, empty, 0);
// on update they are compared with the stored record by decide_update, and, for a body that breaks
// other rules, here too if `stored` is given (it is called then only), so that one 422 lists them
// all.
Result<Spec> parse_spec(Kind kind, Mode mode, const rapidjson::Value& body,
                        const FieldPolicy& policy, const StoredDomain& stored = nullptr);

// Whether parse_spec of a profile `body` may call policy.check_waf_directives: `body` has a
// waf_custom_directives member that is a non-empty string. A superset of the calls (the text may
// fail an earlier rule), so that a caller can move the work to a thread that may wait for it.
bool sends_waf_directives(const rapidjson::Value& body);

// The rules of a domain update that need the stored record `current`: the hostname cannot change,
// and the server-controlled fields may be sent only with their current value. A field that already
// has a problem in `errors` is not checked again.
void check_domain_update(const DomainSpec& s, const Domain& current, FieldErrors& errors);

// What is wrong with `status` as a status of `kind` ("must be one of ..."), or nothing. Profiles
// have no status: every value is wrong.
std::optional<std::string> status_problem(Kind kind, std::string_view status);

// Tenant ids (X-Tenant-ID, token tenants): 1..128 bytes of [A-Za-z0-9_.-], starting alphanumeric.
bool valid_tenant_id(std::string_view tenant);
// That rule, as the errors that refuse a tenant id give it ("must be " and this).
inline constexpr std::string_view kTenantIdRule =
    "1-128 characters of A-Z a-z 0-9 _ . -, starting with a letter or digit";

}  // namespace gw
