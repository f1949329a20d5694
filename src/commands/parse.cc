#include "commands/parse.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <limits>
#include <string_view>
#include <type_traits>
#include <unordered_set>
#include <vector>

#include "commands/challenge.h"
#include "commands/fields.h"

namespace gw {

namespace {

enum class Type { kString, kBool, kInt, kObject, kArray };

struct FieldDef {
  const char* name;
  Type type;
  bool required;
  bool nullable;  // null accepted and means "not given"
};

const char* type_word(Type t) {
  switch (t) {
    case Type::kString: return "a string";
    case Type::kBool: return "a boolean";
    case Type::kInt: return "an integer";
    case Type::kObject: return "an object";
    case Type::kArray: return "an array";
  }
  return "";
}

// A whole number beyond int64's range, which RapidJSON holds as a uint64 or a double: still an
// integer, too large for every integer field, so the field's own range message says why.
bool is_huge_integer(const rapidjson::Value& v) {
  if (v.IsInt64()) return false;
  if (v.IsUint64()) return true;
  if (!v.IsDouble()) return false;
  const double d = v.GetDouble();
  return std::isfinite(d) && std::fabs(d) >= 0x1p63 && std::trunc(d) == d;
}

bool has_type(const rapidjson::Value& v, Type t) {
  switch (t) {
    case Type::kString: return v.IsString();
    case Type::kBool: return v.IsBool();
    case Type::kInt:
      return v.IsInt64() || is_huge_integer(v);
    case Type::kObject: return v.IsObject();
    case Type::kArray: return v.IsArray();
  }
  return false;
}

// Response-only members: ignored when sent, so GET-edit-PUT works. Which one `name` is (0..3),
// or -1 for any other member.
int response_only(Kind kind, std::string_view name) {
  const std::array<std::string_view, 4> names = {id_field(kind), "created_at", "updated_at",
                                                 "deleted_at"};
  auto it = std::find(names.begin(), names.end(), name);
  return it == names.end() ? -1 : static_cast<int>(it - names.begin());
}

bool failed(const fields::Problems& p) { return !p.empty(); }

// Walks the body once: reports unknown members, wrong types and missing required members, and
// gives typed access to the members that passed.
class BodyReader {
 public:
  template <size_t N>
  BodyReader(Kind kind, const rapidjson::Value& body, const std::array<FieldDef, N>& defs,
             FieldErrors& errors)
      : body_(body), errors_(errors) {
    // How often each member was seen: a member given three times is one problem, listed once
    // (it had an entry for each time after the first).
    std::array<int, N> seen{};
    std::array<int, 4> ignored{};  // the response-only members seen
    std::unordered_set<std::string_view> unknown;  // a set: a body may hold 100,000 of them
    for (auto it = body.MemberBegin(); it != body.MemberEnd(); ++it) {
      std::string_view name(it->name.GetString(), it->name.GetStringLength());
      if (int i = response_only(kind, name); i >= 0) {
        // Ignored, but not when ambiguous: a member given twice is 422 whatever it is.
        if (++ignored[i] == 2) errors_.add(std::string(name), "is given more than once");
        continue;
      }
      const FieldDef* def = nullptr;
      bool again = false;
      for (size_t i = 0; i < N; ++i) {
        if (name == defs[i].name) {
          def = &defs[i];
          again = ++seen[i] > 1;
          if (seen[i] == 2) {
            errors_.add(defs[i].name, "is given more than once");
            bad_.push_back(defs[i].name);
          }
        }
      }
      if (def == nullptr) {
        // The unknown members count as one field towards the cap of 10: 100 of them filled the
        // entries and hid the other fields' problems (helper 134).
        if (!unknown.insert(name).second) continue;
        if (unknown.size() <= FieldErrors::kMaxPerField) {
          errors_.add(std::string(name), "unknown field");
        } else {
          errors_.leave_out();
        }
        continue;
      }
      // Its copies are that one problem: a type error for each copy listed it again (helper 159).
      if (again) continue;
      if (it->value.IsNull() && def->nullable) continue;
      if (!has_type(it->value, def->type)) {
        errors_.add(def->name, std::string("must be ") + type_word(def->type));
        bad_.push_back(def->name);
      }
    }
    for (const auto& d : defs) {
      if (!d.required) continue;
      auto it = body.FindMember(d.name);
      // A null where null is not allowed has its type error already: one message per field.
      if (it == body.MemberEnd() || (it->value.IsNull() && d.nullable)) {
        errors_.add(d.name, "is required");
      }
    }
  }

  // The member if present, non-null and of its declared type.
  const rapidjson::Value* get(const char* name) const {
    auto it = body_.FindMember(name);
    if (it == body_.MemberEnd() || it->value.IsNull()) return nullptr;
    for (const char* b : bad_) {
      if (std::string_view(b) == name) return nullptr;
    }
    return &it->value;
  }
  std::optional<std::string> str(const char* name) const {
    const auto* v = get(name);
    if (v == nullptr) return std::nullopt;
    return std::string(v->GetString(), v->GetStringLength());
  }
  std::optional<bool> boolean(const char* name) const {
    const auto* v = get(name);
    if (v == nullptr) return std::nullopt;
    return v->GetBool();
  }
  std::optional<int64_t> integer(const char* name) const {
    const auto* v = get(name);
    if (v == nullptr) return std::nullopt;
    if (v->IsInt64()) return v->GetInt64();
    // is_huge_integer: out of every field's range either way.
    const bool negative = v->IsDouble() && v->GetDouble() < 0;
    return negative ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max();
  }

  void check(const char* name, const fields::Problem& problem) {
    if (problem) errors_.add(name, *problem);
  }
  void check(const char* name, const fields::Problems& problems) {
    for (const auto& p : problems) errors_.add(name + p.path, p.message);
  }

  // Runs `rule` on the JSON member when present; stores its canonical text in *out only when the
  // rule passed: serializing recurses, and the rules are what bound the nesting depth.
  template <typename Rule>
  void json_field(const char* name, std::string* out, Rule rule) {
    if (const auto* v = get(name)) {
      auto problem = rule(*v);
      check(name, problem);
      if (failed(problem)) return;
      *out = canonical_json(*v);
    }
  }

  // Runs `rule` on the string member when present; stores it in *out.
  template <typename Rule>
  void string_field(const char* name, std::string* out, Rule rule) {
    if (auto s = str(name)) {
      check(name, rule(*s));
      *out = std::move(*s);
    }
  }

 private:
  const rapidjson::Value& body_;
  FieldErrors& errors_;
  std::vector<const char*> bad_;
};

template <size_t N>
fields::Problem one_of(std::string_view value, const std::array<const char*, N>& allowed) {
  std::string list;
  for (const char* a : allowed) {
    if (value == a) return std::nullopt;
    if (!list.empty()) list += ", ";
    list += a;
  }
  return "must be one of " + list;
}

constexpr std::array<const char*, 3> kWafModes{"off", "monitor", "block"};
constexpr std::array<const char*, 7> kWafTemplates{
    "platform_default", "workload_default", "api_strict", "nextjs", "django", "wordpress",
    "custom"};
constexpr std::array<const char*, 2> kScopes{"exact", "subtree"};
constexpr std::array<const char*, 2> kDomainStatuses{"pending", "verified"};
constexpr std::array<const char*, 2> kProviders{"github", "gitlab"};
constexpr std::array<const char*, 2> kWebhookStatuses{"active", "inactive"};

}  // namespace

fields::Problem status_problem(Kind kind, std::string_view status) {
  switch (kind) {
    case Kind::kDomain: return one_of(status, kDomainStatuses);
    case Kind::kWebhook: return one_of(status, kWebhookStatuses);
    default: return std::string("is not a field of this kind");
  }
}

namespace {

constexpr size_t kWorkloadIdMax = 128;
constexpr size_t kExternalIdMax = 256;
constexpr size_t kDirectivesMax = 65536;
constexpr int64_t kMaxBodyBytesMax = 2147483647;

void read_team(BodyReader& r, Meta* meta) {
  if (auto team = r.str("team_id")) {
    if (!valid_tenant_id(*team)) {
      r.check("team_id", "must be " + std::string(kTenantIdRule));
    }
    meta->team_id = std::move(*team);
  }
}

}  // namespace

bool PlatformNamespaces::covers(std::string_view hostname) const {
  return fields::is_at_or_under(hostname, domain) || fields::is_at_or_under(hostname, run_domain);
}

std::string PlatformNamespaces::problem() const {
  return "is reserved for platform-managed routes (" + domain + ", " + run_domain + ")";
}

namespace {

// True when the body has a valid hostname (then normalized into `out`).
bool read_hostname(BodyReader& r, std::string* out) {
  if (auto h = r.str("hostname")) {
    std::string normalized;
    auto problem = fields::hostname(*h, &normalized);
    r.check("hostname", problem);
    *out = problem ? *h : normalized;
    return !problem;
  }
  return false;
}

// True (and the field's problem noted) for a hostname equal to or under either platform
// namespace.
bool reserved_for_platform(BodyReader& r, const std::string& hostname, const FieldPolicy& policy) {
  if (!policy.platform.covers(hostname)) return false;
  r.check("hostname", policy.platform.problem());
  return true;
}

Result<Spec> parse_profile(const rapidjson::Value& body, const FieldPolicy& policy) {
  static constexpr std::array<FieldDef, 16> kDefs{{
      {"team_id", Type::kString, true, false},
      {"hostname", Type::kString, true, false},
      {"enabled", Type::kBool, true, false},
      {"force_https", Type::kBool, true, false},
      {"hsts_enabled", Type::kBool, true, false},
      {"cors_enabled", Type::kBool, true, false},
      {"cors_headers", Type::kString, false, true},
      {"cors_methods", Type::kString, false, true},
      {"cors_origins", Type::kString, false, true},
      {"max_body_bytes", Type::kInt, false, true},
      {"geo_policy", Type::kObject, false, true},
      {"waf_mode", Type::kString, true, false},
      {"waf_template", Type::kString, true, false},
      {"waf_custom_directives", Type::kString, false, true},
      {"waf_overrides", Type::kObject, false, true},
      {"waf_rule_exclusions", Type::kArray, false, true},
  }};
  FieldErrors errors;
  BodyReader r(Kind::kProfile, body, kDefs, errors);
  Profile p;
  read_team(r, &p.meta);
  // A platform route's settings are the platform's: gatewayd cannot tell which team a route
  // serves, so a team's profile there would set another team's traffic (CORS, WAF off).
  if (read_hostname(r, &p.hostname)) reserved_for_platform(r, p.hostname, policy);
  p.enabled = r.boolean("enabled").value_or(true);
  p.force_https = r.boolean("force_https").value_or(true);
  p.hsts_enabled = r.boolean("hsts_enabled").value_or(true);
  p.cors_enabled = r.boolean("cors_enabled").value_or(true);
  r.string_field("cors_headers", &p.cors_headers, fields::cors_headers);
  r.string_field("cors_methods", &p.cors_methods, fields::cors_methods);
  r.string_field("cors_origins", &p.cors_origins, fields::cors_origins);
  if (auto n = r.integer("max_body_bytes")) {
    if (*n < 0 || *n > kMaxBodyBytesMax) r.check("max_body_bytes", "must be 0..2147483647");
    p.max_body_bytes = *n;
  }
  r.json_field("geo_policy", &p.geo_policy, fields::geo_policy);
  r.string_field("waf_mode", &p.waf_mode,
                 [](std::string_view v) { return one_of(v, kWafModes); });
  r.string_field("waf_template", &p.waf_template,
                 [](std::string_view v) { return one_of(v, kWafTemplates); });
  if (auto d = r.str("waf_custom_directives")) {
    if (d->size() > kDirectivesMax) {
      r.check("waf_custom_directives", "must be at most 65536 bytes");
    } else if (!d->empty() && r.str("waf_template") && p.waf_template != "custom") {
      // Not when waf_template has a problem of its own (given twice, not a string): it reads as
      // absent then, and this would be a second, false entry.
      r.check("waf_custom_directives", "must be empty unless waf_template is custom");
    } else if (!policy.check_waf_directives || d->empty()) {
      r.check("waf_custom_directives", fields::waf_directives(*d));
    } else {
      auto checked = policy.check_waf_directives(*d);
      if (!checked.ok()) return checked.error();
      r.check("waf_custom_directives", checked.value());
    }
    p.waf_custom_directives = std::move(*d);
  }
  r.json_field("waf_overrides", &p.waf_overrides, fields::waf_overrides);
  r.json_field("waf_rule_exclusions", &p.waf_rule_exclusions, fields::waf_rule_exclusions);
  if (!errors.empty()) return errors.to_error();
  return Spec{std::move(p)};
}

Result<Spec> parse_domain(const rapidjson::Value& body, Mode mode, const FieldPolicy& policy,
                          const StoredDomain& stored) {
  static constexpr std::array<FieldDef, 11> kDefs{{
      {"team_id", Type::kString, true, false},
      {"hostname", Type::kString, true, false},
      {"redirect_to", Type::kString, false, true},
      {"scope", Type::kString, false, true},
      {"workload_id", Type::kString, false, true},
      {"status", Type::kString, false, true},
      {"verification_hostname", Type::kString, false, true},
      {"verification_value", Type::kString, false, true},
      {"verification_parent_id", Type::kString, false, true},
      {"verified_at", Type::kInt, false, true},
      {"verification_error", Type::kString, false, true},
  }};
  FieldErrors errors;
  BodyReader r(Kind::kDomain, body, kDefs, errors);
  DomainSpec s;
  Domain& d = s.domain;
  read_team(r, &d.meta);
  const bool valid_hostname =
      read_hostname(r, &d.hostname) && !reserved_for_platform(r, d.hostname, policy);
  // A hostname a domain may have: valid_hostname, and not refused below for a domain alone.
  bool domain_hostname = valid_hostname;
  if (valid_hostname && fields::is_public_suffix(d.hostname)) {
    // A claim on a whole suffix would hold (takeover guard) every name under it.
    r.check("hostname", "is a public suffix (Public Suffix List); add a domain under it instead");
    domain_hostname = false;
  } else if (valid_hostname && d.hostname.size() > kMaxDomainHostnameBytes) {
    r.check("hostname", "must be at most " + std::to_string(kMaxDomainHostnameBytes) +
                            " bytes for a domain, so that its verification_hostname (" +
                            std::string(kVerificationLabel) + "<hostname>) is a DNS name");
    domain_hostname = false;
  }
  std::string back_to;
  r.string_field("redirect_to", &d.redirect_to,
                 [&back_to](std::string_view v) { return fields::redirect_to(v, &back_to); });
  // Every request to the domain is redirected, so a target on its own hostname redirects for ever.
  if (valid_hostname && back_to == d.hostname) {
    r.check("redirect_to",
            "must not lead back to the domain's own hostname " + d.hostname + " (a redirect loop)");
  }
  r.string_field("scope", &d.scope, [](std::string_view v) { return one_of(v, kScopes); });
  if (auto w = r.str("workload_id"); w && !w->empty()) {
    r.check("workload_id", fields::opaque_id(*w, kWorkloadIdMax));
    d.workload_id = std::move(*w);
  }
  s.status = r.str("status");
  if (s.status && mode == Mode::kUpdate) r.check("status", one_of(*s.status, kDomainStatuses));
  s.verification_hostname = r.str("verification_hostname");
  s.verification_value = r.str("verification_value");
  s.verification_parent_id = r.str("verification_parent_id");
  s.verification_error = r.str("verification_error");
  s.verified_at = r.integer("verified_at");
  if (mode == Mode::kCreate) {
    // Each message names the value the new domain will have, as an update's names the value now.
    auto set_by_server = [](const std::string& starting_value) {
      return "is set by the server: a new domain starts with " + starting_value;
    };
    // The verification_hostname a new domain gets follows from its hostname, so it may be sent as
    // well as left out (as a record's other server fields may be sent with the values they will
    // have); checked against a hostname refused, it would only repeat that refusal.
    if (s.verification_hostname && !s.verification_hostname->empty() && domain_hostname) {
      const std::string starting = verification_hostname(d.hostname);
      if (*s.verification_hostname != starting) {
        r.check("verification_hostname", set_by_server("\"" + starting + "\" for this hostname"));
      }
    }
    // A new domain under a subtree its team has verified starts verified through it (decide.cc's
    // create_domain), which the body alone cannot tell; the messages say both.
    constexpr const char* kUnderVerified = " under a subtree domain your team has verified";
    const std::pair<const char*, std::string> echoes[] = {
        {"verification_value",
         "a random value (\"gv-\" and 32 hex digits, a dot and the verification domain)"},
        {"verification_parent_id",
         std::string("\"\" (empty), or the id of that domain") + kUnderVerified},
        {"verification_error", "\"\" (empty)"}};
    const std::optional<std::string>* sent[] = {&s.verification_value, &s.verification_parent_id,
                                                &s.verification_error};
    for (size_t i = 0; i < std::size(echoes); ++i) {
      if (*sent[i] && !(*sent[i])->empty())
        r.check(echoes[i].first, set_by_server(echoes[i].second));
    }
    if (s.status && *s.status != "pending") {
      r.check("status",
              set_by_server(std::string("\"pending\", or \"verified\"") + kUnderVerified));
    }
    if (s.verified_at && *s.verified_at != 0) {
      r.check("verified_at",
              set_by_server(std::string("0, or the time of its create") + kUnderVerified));
    }
  }
  // The rules that need the stored record, so that one 422 lists every problem; the writer checks
  // them again against the record it updates (a body that breaks no other rule is checked there
  // only, and its record is not read here).
  if (!errors.empty() && mode == Mode::kUpdate && stored) {
    if (auto current = stored()) check_domain_update(s, *current, errors);
  }
  if (!errors.empty()) return errors.to_error();
  return Spec{std::move(s)};
}

Result<Spec> parse_webhook(const rapidjson::Value& body) {
  static constexpr std::array<FieldDef, 5> kDefs{{
      {"team_id", Type::kString, true, false},
      {"workload_id", Type::kString, true, false},
      {"provider", Type::kString, true, false},
      {"status", Type::kString, true, false},
      {"external_id", Type::kString, false, true},
  }};
  FieldErrors errors;
  BodyReader r(Kind::kWebhook, body, kDefs, errors);
  Webhook h;
  read_team(r, &h.meta);
  r.string_field("workload_id", &h.workload_id,
                 [](std::string_view v) { return fields::opaque_id(v, kWorkloadIdMax); });
  r.string_field("provider", &h.provider, [](std::string_view v) { return one_of(v, kProviders); });
  r.string_field("status", &h.status,
                 [](std::string_view v) { return one_of(v, kWebhookStatuses); });
  if (auto e = r.str("external_id"); e && !e->empty()) {
    r.check("external_id", fields::opaque_id(*e, kExternalIdMax));
    h.external_id = std::move(*e);
  }
  if (!errors.empty()) return errors.to_error();
  return Spec{std::move(h)};
}

}  // namespace

bool valid_tenant_id(std::string_view tenant) {
  if (tenant.empty() || tenant.size() > 128) return false;
  if (std::isalnum(static_cast<unsigned char>(tenant[0])) == 0) return false;
  for (char c : tenant) {
    auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) == 0 && c != '_' && c != '.' && c != '-') return false;
  }
  return true;
}

bool sends_waf_directives(const rapidjson::Value& body) {
  if (!body.IsObject()) return false;
  for (const auto& m : body.GetObject()) {
    if (std::string_view(m.name.GetString(), m.name.GetStringLength()) == "waf_custom_directives" &&
        m.value.IsString() && m.value.GetStringLength() > 0) {
      return true;
    }
  }
  return false;
}

Result<Spec> parse_spec(Kind kind, Mode mode, const rapidjson::Value& body,
                        const FieldPolicy& policy, const StoredDomain& stored) {
  if (!body.IsObject())
    return make_error(Code::kInvalidJson, "the request body must be a JSON object");
  switch (kind) {
    case Kind::kProfile: return parse_profile(body, policy);
    case Kind::kDomain:
      return parse_domain(body, mode, policy, stored);
    case Kind::kWebhook: return parse_webhook(body);
  }
  return make_error(Code::kInternal, "unknown kind");
}

void check_domain_update(const DomainSpec& s, const Domain& current, FieldErrors& errors) {
  auto check = [&errors](const char* name, bool broken, const char* why) {
    if (broken && !errors.has(name)) errors.add(name, why);
  };
  check("hostname", s.domain.hostname != current.hostname, "cannot change after create");
  // A body read before the verifier's outcome (or another change) holds the values of then: the
  // message names the value now, so that a GET-edit-PUT that raced a change says what happened.
  auto same = [&errors](const char* name, const auto& sent, const auto& held) {
    if (!sent || *sent == held || errors.has(name)) return;
    std::string now;
    if constexpr (std::is_same_v<std::decay_t<decltype(held)>, std::string>) {
      now = "\"" + held + "\"";
    } else {
      now = std::to_string(held);
    }
    errors.add(name, "is set by the server and cannot be changed: it is " + now +
                         " now (a body read before the domain last changed holds an older "
                         "value: read it again, or leave the field out)");
  };
  same("status", s.status, current.status);
  same("verification_hostname", s.verification_hostname, current.verification_hostname);
  same("verification_value", s.verification_value, current.verification_value);
  same("verification_parent_id", s.verification_parent_id, current.verification_parent_id);
  same("verification_error", s.verification_error, current.verification_error);
  same("verified_at", s.verified_at, current.verified_at);
}

}  // namespace gw
