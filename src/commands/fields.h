// Field rules of CONTRACT.md section 3, one pure function per rule. Each returns std::nullopt when
// the value is acceptable, or a short human-readable message ("must be ...") saying why not.
// Stateless and thread-safe (waf_directives serialises its libmodsecurity parse on a process-wide
// lock). None of them recurses on untrusted input (JSON walks use explicit stacks), so any nesting
// that RapidJSON's iterative parser accepted is safe to pass in.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <rapidjson/document.h>

namespace gw::fields {

using Problem = std::optional<std::string>;

// The rules for JSON members with parts (geo_policy, waf_rule_exclusions) report every problem
// they find: `path` is where, below the member (".mode", "[2].path_prefix", empty for the member
// as a whole), and `message` why. Empty when the value is acceptable.
struct SubProblem {
  std::string path;
  std::string message;
};
using Problems = std::vector<SubProblem>;

// Hostname: lower-cased, one trailing dot dropped, 2+ labels, LDH labels of 1-63 bytes (no leading
// or trailing hyphen), 253 bytes max, `xn--` labels allowed if they are A-labels (valid Punycode
// of a name IDNA2008 allows), no IP literals, no wildcards.
// On success *normalized holds the canonical form.
Problem hostname(std::string_view in, std::string* normalized);

// True when `name` equals `zone` or lies under it (both already normalized).
bool is_at_or_under(std::string_view name, std::string_view zone);

// The three CORS lists: items separated by commas, blanks around an item allowed, no empty item
// (",," or a trailing comma) and no repeated item. Empty string is accepted (nothing configured).
// At most 4096 bytes each. Each bad item is a problem of its own, whose message quotes it (path
// empty); empty items are one problem.
//
// `*` alone, or a comma list of `scheme://host[:port]` origins (scheme http or https, host a
// lower-case hostname without trailing dot, an IPv4 literal or `localhost`, port 1-65535 without
// leading zeros, no path, not even "/", no query or userinfo), as browsers send them in `Origin`.
Problems cors_origins(std::string_view in);
// Comma list of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS (upper case; no duplicates). Empty ok.
Problems cors_methods(std::string_view in);
// Comma list of RFC 9110 tokens (repeats compared case-insensitively). Empty ok. At most 4096
// bytes.
Problems cors_headers(std::string_view in);

// null, or {"mode": "allow"|"block", "countries": [1..250 distinct ISO 3166-1 alpha-2 codes]}
// (assigned codes only, upper case). No other members.
Problems geo_policy(const rapidjson::Value& v);

// A JSON object of depth at most 8 (the object itself is depth 1) with at most 256 members in all
// (counting members of nested objects too), no member twice in one object. null is accepted
// (= none). Each of the three problems is reported once (path empty).
Problems waf_overrides(const rapidjson::Value& v);

// null, or an array of at most 256 {"path_prefix": "/...", "remove_rule_ids": [int...]} objects:
// path_prefix a string starting with '/' (at most 1024 bytes, no control characters or spaces),
// 1..256 ids each, each an integer in 1..99999999. No other members.
Problems waf_rule_exclusions(const rapidjson::Value& v);

// WAF custom directives (at most 65536 bytes). Must parse as ModSecurity directives with
// libmodsecurity (the engine's own message is returned on failure), and must stay inside the
// tenant's own rules: no Include, SecRemoteRules*, SecRuleEngine, SecAuditLog*, Sec*Dir,
// file operators (@*FromFile, @inspectFile), exec action, ctl:ruleEngine; every SecRule/SecAction
// needs an `id` in 1..99999, unique within the text (chained rules carry the id on the first link).
// Empty text is accepted. The full tenant policy (an allow-list of directives and actions, and the
// syntax kept unambiguous for the engine's lexer) is described at the top of waf_scan.h.
// Costs about 3 ms per 100 rules, under a lock shared by all callers. It runs libmodsecurity's
// parser on the text: gatewayd calls it in sandbox workers (src/sandbox/waf_check.h).
Problem waf_directives(std::string_view text);

// The Public Suffix List (libpsl's built-in copy) says `hostname` is a registrable domain (public
// suffix + one label). `hostname` is normalized.
bool is_registrable_domain(std::string_view hostname);

// The Public Suffix List, ICANN and private sections, lists `hostname` itself as a public suffix
// (`co.uk`, `github.io`): a name nobody owns as a whole. Only explicit rules count, so a name
// under a top-level domain the list does not know (`.test`) is not one. `hostname` is normalized.
bool is_public_suffix(std::string_view hostname);

// Opaque identifier strings supplied by clients (team ids, workload ids, external ids):
// 1..max_bytes bytes, valid UTF-8 already guaranteed by the parser, no control characters (C0, DEL
// or C1).
Problem opaque_id(std::string_view in, size_t max_bytes);

// A redirect target: empty, a hostname, or an absolute http(s) URL (lower-case scheme, optional
// port 1-65535, no userinfo) whose host is a hostname. No blanks, backslashes or control
// characters. At most 2048 bytes. When it is one, `back_to` (if given) gets the hostname,
// normalised, that a request to the target reaches: its host, unless the URL names a port other
// than its scheme's default; empty then, and for an empty target.
Problem redirect_to(std::string_view in, std::string* back_to = nullptr);

}  // namespace gw::fields
