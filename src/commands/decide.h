// decide: the stateful rules of every command, as pure functions. A decision reads the current
// state only through `Lookups` (the read model as the single writer sees it, pending writes
// included) and takes ids and time as arguments; it does no I/O of its own.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "commands/parse.h"
#include "commands/records.h"
#include "core/error.h"

namespace gw {

// A record as stored: its value, its aggregate version (number of events so far) and the sequence
// number of the event that created it (the list order).
struct Stored {
  Record record;
  uint64_t version = 0;
  uint64_t create_seq = 0;
};

// A verified domain claim: team `team_id` proved `hostname` (and, for subtree, all names under it).
struct Claim {
  std::string team_id;
  std::string domain_id;
  std::string hostname;
  std::string scope;
};

// Read access to current state for decisions. Implementations see the writer's pending batch.
class Lookups {
 public:
  virtual ~Lookups() = default;
  // The record with this id, deleted ones included; nullopt if it never existed.
  virtual std::optional<Stored> load(const std::string& id) = 0;
  // Id of the live profile using `hostname` (any team).
  virtual std::optional<std::string> live_profile_by_hostname(const std::string& hostname) = 0;
  // Id of the team's live domain using `hostname`.
  virtual std::optional<std::string> live_domain_by_hostname(const std::string& team,
                                                             const std::string& hostname) = 0;
  // Verified claims equal to `hostname`, or subtree claims on one of its ancestors.
  virtual std::vector<Claim> claims_covering(const std::string& hostname) = 0;
  // Verified claims (any team, any scope) on names strictly under `hostname`.
  virtual std::vector<Claim> claims_under(const std::string& hostname) = 0;
  // Sequence number of the domain's open verification request (the latest one), if any.
  virtual std::optional<uint64_t> open_request(const std::string& domain_id) = 0;
  // Ids of the team's live domains strictly under `hostname`.
  virtual std::vector<std::string> team_domains_under(const std::string& team,
                                                      const std::string& hostname) = 0;
  // Ids of live domains whose verification was inherited from `parent_id`.
  virtual std::vector<std::string> inherited_from(const std::string& parent_id) = 0;
};

// One event to append: its type, the full record after it and, for a verification outcome, the
// sequence number of the request it answers. A decision's later changes (a domain inheriting or
// losing its verification) are written with the first change's sequence number there.
struct Change {
  std::string type;
  Record record;
  uint64_t caused_by = 0;
  // The record is new (a create, its id just made): nothing is stored under its id yet.
  bool created = false;
};

// What a command decided: the events to append (empty: nothing changes, e.g. verifying a
// verified domain) and the record to answer with.
struct Decision {
  std::vector<Change> changes;
  Record result;
};

struct Actor {
  std::string tenant;  // X-Tenant-ID, already checked against the token
  std::string name;    // token name, recorded on events
};

// The actor of the verifier's outcome events. No token may carry this name, or its events
// would pass for the verifier's.
inline constexpr std::string_view kVerifierActor = "verifier";

// Values a create may need, made by the caller (ids and unguessable values are not decided here).
struct Fresh {
  std::string id;
  int64_t now = 0;
  std::string verification_value;  // full CNAME target for a new domain
};

// The not_found error for record `id` of `kind`: unknown, deleted and another team's records all
// read the same.
Error record_not_found(Kind kind, const std::string& id);

// The ETag of a stored record version, quoted: "\"<version>\"".
std::string etag_of(uint64_t version);
// An If-Match header value against the stored `version` (RFC 9110: `*` alone, or a
// comma-separated list of entity tags, empty elements ignored; strong comparison, so a weak tag
// never matches). kMalformed is anything else, `*` in a list or a tag without quotes among them:
// such a header is refused (412), never read as `*` or as the tags that could be made out of it.
enum class IfMatch { kMatches, kDiffers, kMalformed };
IfMatch evaluate_if_match(std::string_view header, uint64_t version);
// An If-None-Match header value, read as If-Match is but with the weak comparison RFC 9110
// 13.1.2 asks for: `W/"3"` matches version 3 too.
IfMatch evaluate_if_none_match(std::string_view header, uint64_t version);

// The 412 of an If-Match or If-None-Match header (`header`, its name) that is neither `*` alone nor
// a list of quoted entity tags.
Error malformed_precondition(std::string_view header);
// The 412 of an If-Match header value that does not match `version` or is malformed, or nullopt
// if it matches. `tag_name` names the ETag compared in the detail ("current ETag" for a write or
// a GET of the record as it is, "ETag" for one as it was).
std::optional<Error> if_match_failure(std::string_view header, uint64_t version,
                                      std::string_view tag_name = "current ETag");

// The preconditions a write on one record was sent with (RFC 9110 13.1): the raw If-Match and
// If-None-Match headers, if sent. Either one that fails is 412 and changes nothing; a malformed
// one fails.
struct Preconditions {
  std::optional<std::string> if_match = std::nullopt;
  std::optional<std::string> if_none_match = std::nullopt;
};

// Precondition: `spec` passed parse_spec in Mode::kCreate.
Result<Decision> decide_create(const Spec& spec, const Actor& actor, const Fresh& fresh,
                               Lookups& lookups);
// `reserved`, here and below: the platform namespaces (parse.h), in which no domain is verified,
// directly or through a parent (default: none).
Result<Decision> decide_update(Kind kind, const std::string& id, const Spec& spec,
                               const Actor& actor, const Preconditions& pre, int64_t now,
                               Lookups& lookups, const PlatformNamespaces& reserved = {});
// DELETE and verify honour the preconditions as PUT does (412 when one fails).
Result<Decision> decide_delete(Kind kind, const std::string& id, const Actor& actor, int64_t now,
                               Lookups& lookups, const Preconditions& pre = {},
                               const PlatformNamespaces& reserved = {});
// A verify of a pending domain in a platform namespace (stored before it was reserved) is 422.
Result<Decision> decide_verify(const std::string& id, const Actor& actor, Lookups& lookups,
                               const Preconditions& pre = {},
                               const PlatformNamespaces& reserved = {});

// What a DNS check of a domain's ownership CNAME found: ok, or a failure with a machine-readable
// code (no_cname, wrong_value, nxdomain, servfail, timeout, unreachable) and a human detail.
struct CheckResult {
  bool ok = false;
  std::string code;
  std::string detail;
};

// The outcome of verification request `request_seq` of `domain_id`: exactly one event, either
// domain.verified (plus domain.verification_inherited for each of the team's pending domains under
// a subtree domain), domain.verification_failed (verification_error = "<code>: <detail>"; a
// hostname another team has verified fails with claimed_by_another_team), or
// domain.verification_superseded when the request is no longer the domain's open one, the domain
// was deleted or is verified already (the record is then unchanged). A domain in a platform
// namespace fails with reserved_for_platform (its request was made before a restart reserved
// it). A request names a domain
// that exists (both are written in one batch and domains are never erased), so an unknown id is
// kInternal.
Result<Decision> decide_verification_outcome(const std::string& domain_id, uint64_t request_seq,
                                             const CheckResult& result, int64_t now,
                                             Lookups& lookups,
                                             const PlatformNamespaces& reserved = {});
// What a decide_verification_outcome decision writes, as a metric label: "verified",
// "superseded", or the failure code of verification_error ("claimed_by_another_team", ...).
std::string verification_outcome_label(const Decision& decision);

// The event type of a record change, e.g. "domain.created".
std::string event_type(Kind kind, const char* verb);

}  // namespace gw
