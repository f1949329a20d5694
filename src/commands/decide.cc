#include "commands/decide.h"

#include <algorithm>
#include <charconv>

#include "commands/fields.h"
#include "commands/challenge.h"
#include "core/text.h"

namespace gw {

namespace {

Error team_mismatch() {
  return make_error(Code::kTenantMismatch, "team_id in the body must equal the X-Tenant-ID header");
}

const std::string& spec_team(const Spec& spec) {
  return std::visit(
      [](const auto& s) -> const std::string& {
        if constexpr (std::is_same_v<std::decay_t<decltype(s)>, DomainSpec>) {
          return s.domain.meta.team_id;
        } else {
          return s.meta.team_id;
        }
      },
      spec);
}

// The record a spec describes (user fields only; server fields are filled in by the decision).
Record record_of(const Spec& spec) {
  return std::visit(
      [](const auto& s) -> Record {
        if constexpr (std::is_same_v<std::decay_t<decltype(s)>, DomainSpec>) {
          return s.domain;
        } else {
          return s;
        }
      },
      spec);
}

// The live record `id` of `kind` owned by the actor's team, or not_found: another team's record,
// a deleted one and one that never existed are indistinguishable to the caller.
Result<Stored> load_own(Kind kind, const std::string& id, const Actor& actor, Lookups& lookups) {
  auto stored = lookups.load(id);
  if (!stored || kind_of(stored->record) != kind) return record_not_found(kind, id);
  const Meta& m = meta_of(stored->record);
  if (m.team_id != actor.tenant || m.deleted_at != 0) return record_not_found(kind, id);
  return std::move(*stored);
}

// 412 unless the preconditions sent, if any, hold for the stored version: If-Match matches its
// ETag, If-None-Match does not (RFC 9110 13.2.2: If-Match first).
std::optional<Error> check_preconditions(const Preconditions& pre, uint64_t version) {
  auto failed = [](std::string detail) {
    return make_error(Code::kPreconditionFailed, std::move(detail));
  };
  if (pre.if_match) {
    if (auto e = if_match_failure(*pre.if_match, version)) return e;
  }
  if (pre.if_none_match) {
    switch (evaluate_if_none_match(*pre.if_none_match, version)) {
      case IfMatch::kDiffers:
        break;
      case IfMatch::kMatches:
        return failed("If-None-Match matches the current ETag " + etag_of(version) +
                      " (the record exists; * matches any version)");
      case IfMatch::kMalformed:
        return malformed_precondition("If-None-Match");
    }
  }
  return std::nullopt;
}

std::optional<Claim> other_team_claim(const std::string& hostname, const std::string& team,
                                      Lookups& lookups) {
  for (auto& c : lookups.claims_covering(hostname)) {
    if (c.team_id != team) return std::move(c);
  }
  return std::nullopt;
}

// Another team's verified claim on a name strictly under `hostname`: a subtree claim on
// `hostname` would cover it, and a name is covered by the claims of one team at most.
std::optional<Claim> other_team_claim_under(const std::string& hostname, const std::string& team,
                                            Lookups& lookups) {
  for (auto& c : lookups.claims_under(hostname)) {
    if (c.team_id != team) return std::move(c);
  }
  return std::nullopt;
}

Error claimed(const std::string& hostname) {
  return make_error(Code::kHostnameConflict,
                    "hostname " + hostname + " is covered by a domain another team has verified");
}

// A profile's hostname is unique among live profiles of all teams and not covered by another
// team's verified domain. `self` is the profile being updated (empty on create).
std::optional<Error> check_profile_hostname(const std::string& hostname, const std::string& team,
                                            const std::string& self, Lookups& lookups) {
  auto holder = lookups.live_profile_by_hostname(hostname);
  if (holder && *holder != self) {
    // Whose it is tells the client where to look (it said neither, where a domain's 409 says
    // "your team"); another team's profile is not named.
    auto held = lookups.load(*holder);
    if (held && meta_of(held->record).team_id == team) {
      return make_error(Code::kHostnameConflict,
                        "your team already has a gateway security "
                        "profile for hostname " +
                            hostname + ": " + *holder);
    }
    return make_error(Code::kHostnameConflict,
                      "hostname " + hostname + " has a gateway security profile of another team");
  }
  if (other_team_claim(hostname, team, lookups)) return claimed(hostname);
  return std::nullopt;
}

Change domain_change(const char* verb, Domain d, uint64_t caused_by = 0) {
  return Change{event_type(Kind::kDomain, verb), Record{std::move(d)}, caused_by};
}

// The team's pending domains under `parent` (a verified subtree domain) become verified through it,
// except those another team's verified domain covers (the takeover guard holds for inheritance as
// for a verify) and those in a platform namespace (stored before it was reserved; helper 166 saw
// them verified through a parent outside it): they stay pending.
void inherit_children(const Domain& parent, int64_t now, Lookups& lookups,
                      const PlatformNamespaces& reserved, std::vector<Change>* out) {
  for (const auto& id : lookups.team_domains_under(parent.meta.team_id, parent.hostname)) {
    auto child = lookups.load(id);
    if (!child) continue;
    auto* c = std::get_if<Domain>(&child->record);
    if (c == nullptr || c->meta.deleted_at != 0 || c->status != "pending") continue;
    if (reserved.covers(c->hostname)) continue;
    if (other_team_claim(c->hostname, c->meta.team_id, lookups)) continue;
    c->status = "verified";
    c->verified_at = now;
    c->verification_parent_id = parent.meta.id;
    c->verification_error.clear();
    c->meta.updated_at = now;
    out->push_back(domain_change("verification_inherited", std::move(*c)));
  }
}

// Domains that inherited their verification from `parent` lose it: they inherit from another of
// the team's directly verified subtree domains covering them if there is one, no other team's
// verified domain covers them and they are not in a platform namespace, else they go back to
// pending.
void revoke_children(const Domain& parent, int64_t now, Lookups& lookups,
                     const PlatformNamespaces& reserved, std::vector<Change>* out) {
  for (const auto& id : lookups.inherited_from(parent.meta.id)) {
    auto child = lookups.load(id);
    if (!child) continue;
    auto* c = std::get_if<Domain>(&child->record);
    if (c == nullptr || c->meta.deleted_at != 0) continue;
    // One pass over the claims covering the child: another subtree of its team to inherit from,
    // and whether another team's claim rules that out.
    std::optional<Claim> other;
    bool foreign = false;
    for (auto& claim : lookups.claims_covering(c->hostname)) {
      if (claim.team_id != c->meta.team_id) {
        foreign = true;
      } else if (!other && claim.scope == "subtree" && claim.domain_id != parent.meta.id &&
                 claim.hostname != c->hostname) {
        other = std::move(claim);
      }
    }
    c->meta.updated_at = now;
    if (other && !foreign && !reserved.covers(c->hostname)) {
      c->verification_parent_id = other->domain_id;
      out->push_back(domain_change("verification_inherited", std::move(*c)));
    } else {
      c->status = "pending";
      c->verified_at = 0;
      c->verification_parent_id.clear();
      out->push_back(domain_change("verification_revoked", std::move(*c)));
    }
  }
}

Result<Decision> create_domain(const DomainSpec& s, const Actor& actor, const Fresh& fresh,
                               Lookups& lookups) {
  Domain d = s.domain;
  if (d.scope.empty()) d.scope = fields::is_registrable_domain(d.hostname) ? "subtree" : "exact";
  d.status = "pending";
  d.verification_hostname = verification_hostname(d.hostname);
  d.verification_value = fresh.verification_value;
  if (lookups.live_domain_by_hostname(actor.tenant, d.hostname)) {
    return make_error(Code::kHostnameConflict,
                      "your team already has a domain with hostname " + d.hostname);
  }
  std::optional<Claim> inherited;
  for (auto& c : lookups.claims_covering(d.hostname)) {
    if (c.team_id != actor.tenant) return claimed(d.hostname);
    if (c.scope == "subtree" && c.hostname != d.hostname && !inherited) inherited = std::move(c);
  }
  if (inherited) {
    d.status = "verified";
    d.verified_at = fresh.now;
    d.verification_parent_id = inherited->domain_id;
  }
  d.meta.id = fresh.id;
  d.meta.created_at = d.meta.updated_at = fresh.now;
  Record r = std::move(d);
  return Decision{{Change{event_type(Kind::kDomain, "created"), r, 0, true}}, std::move(r)};
}

Result<Decision> update_domain(const DomainSpec& s, Domain current, int64_t now, Lookups& lookups,
                               const PlatformNamespaces& reserved) {
  FieldErrors errors;
  check_domain_update(s, current, errors);
  if (!errors.empty()) return errors.to_error();
  current.redirect_to = s.domain.redirect_to;
  current.workload_id = s.domain.workload_id;
  const std::string old_scope = current.scope;
  if (!s.domain.scope.empty()) current.scope = s.domain.scope;
  current.meta.updated_at = now;
  Decision d{{domain_change("updated", current)}, current};
  // A directly verified domain that widens to subtree passes its verification down; one that
  // narrows to exact takes it back.
  if (current.status == "verified" && current.verification_parent_id.empty() &&
      old_scope != current.scope) {
    if (current.scope == "subtree") {
      if (auto c = other_team_claim_under(current.hostname, current.meta.team_id, lookups)) {
        return make_error(Code::kHostnameConflict, "scope subtree would cover " + c->hostname +
                                                       ", which another team has verified");
      }
      inherit_children(current, now, lookups, reserved, &d.changes);
    } else {
      revoke_children(current, now, lookups, reserved, &d.changes);
    }
  }
  return d;
}

}  // namespace

Error record_not_found(Kind kind, const std::string& id) {
  return make_error(Code::kNotFound, std::string(kind_name(kind)) + " " + id + " not found");
}

std::string event_type(Kind kind, const char* verb) {
  return std::string(kind_name(kind)) + "." + verb;
}

std::string etag_of(uint64_t version) { return "\"" + std::to_string(version) + "\""; }

namespace {

// A precondition's list against `version`; with `weak`, a weak tag matches as a strong one does.
IfMatch evaluate_tags(std::string_view header, uint64_t version, bool weak_comparison) {
  std::string_view rest = trim_blanks(header);
  if (rest == "*") return IfMatch::kMatches;
  const std::string want = etag_of(version);
  bool tags = false;
  bool matched = false;
  for (; !rest.empty(); rest = trim_blanks(rest)) {
    if (rest.front() == ',') {  // an empty list element
      rest.remove_prefix(1);
      continue;
    }
    const bool weak = rest.starts_with("W/");
    if (weak) rest.remove_prefix(2);
    const size_t close = rest.starts_with('"') ? rest.find('"', 1) : std::string_view::npos;
    if (close == std::string_view::npos) return IfMatch::kMalformed;
    const std::string_view tag = rest.substr(0, close + 1);
    // etagc is %x21 / %x23-7E / obs-text: no blank or control character.
    if (std::any_of(tag.begin(), tag.end(),
                    [](char c) { return static_cast<unsigned char>(c) < 0x21 || c == 0x7f; })) {
      return IfMatch::kMalformed;
    }
    tags = true;
    if ((!weak || weak_comparison) && tag == want) matched = true;
    rest = trim_blanks(rest.substr(close + 1));
    if (!rest.empty() && rest.front() != ',') return IfMatch::kMalformed;
  }
  if (!tags) return IfMatch::kMalformed;
  return matched ? IfMatch::kMatches : IfMatch::kDiffers;
}

}  // namespace

Error malformed_precondition(std::string_view header) {
  // If-None-Match compares weakly: its example shows a weak tag.
  const char* example = header == "If-None-Match" ? "\"3\", W/\"4\"" : "\"3\", \"4\"";
  return make_error(
      Code::kPreconditionFailed,
      std::string(header) + " must be * alone or a list of quoted entity tags, such as " + example);
}

IfMatch evaluate_if_match(std::string_view header, uint64_t version) {
  return evaluate_tags(header, version, /*weak_comparison=*/false);
}

std::optional<Error> if_match_failure(std::string_view header, uint64_t version,
                                      std::string_view tag_name) {
  switch (evaluate_if_match(header, version)) {
    case IfMatch::kMatches:
      return std::nullopt;
    case IfMatch::kDiffers:
      return make_error(
          Code::kPreconditionFailed,
          "If-Match does not match the " + std::string(tag_name) + " " + etag_of(version));
    case IfMatch::kMalformed:
      return malformed_precondition("If-Match");
  }
  return std::nullopt;
}

IfMatch evaluate_if_none_match(std::string_view header, uint64_t version) {
  return evaluate_tags(header, version, /*weak_comparison=*/true);
}

Result<Decision> decide_create(const Spec& spec, const Actor& actor, const Fresh& fresh,
                               Lookups& lookups) {
  if (spec_team(spec) != actor.tenant) return team_mismatch();
  if (const auto* ds = std::get_if<DomainSpec>(&spec)) {
    return create_domain(*ds, actor, fresh, lookups);
  }
  Record r = record_of(spec);
  if (const auto* p = std::get_if<Profile>(&r)) {
    if (auto e = check_profile_hostname(p->hostname, actor.tenant, "", lookups)) {
      return std::move(*e);
    }
  }
  Meta& m = meta_of(r);
  m.id = fresh.id;
  m.created_at = m.updated_at = fresh.now;
  m.deleted_at = 0;
  return Decision{{Change{event_type(kind_of(r), "created"), r, 0, true}}, std::move(r)};
}

Result<Decision> decide_update(Kind kind, const std::string& id, const Spec& spec,
                               const Actor& actor, const Preconditions& pre, int64_t now,
                               Lookups& lookups, const PlatformNamespaces& reserved) {
  auto loaded = load_own(kind, id, actor, lookups);
  if (!loaded.ok()) return std::move(loaded.error());
  Stored& stored = loaded.value();
  if (spec_team(spec) != actor.tenant) return team_mismatch();
  if (auto e = check_preconditions(pre, stored.version)) return std::move(*e);
  if (const auto* ds = std::get_if<DomainSpec>(&spec)) {
    return update_domain(*ds, std::get<Domain>(stored.record), now, lookups, reserved);
  }
  const Meta old_meta = meta_of(stored.record);
  Record r = record_of(spec);
  if (auto* p = std::get_if<Profile>(&r)) {
    const auto& old = std::get<Profile>(stored.record);
    if (p->hostname != old.hostname) {
      if (auto e = check_profile_hostname(p->hostname, actor.tenant, id, lookups)) {
        return std::move(*e);
      }
    } else if (other_team_claim(p->hostname, actor.tenant, lookups)) {
      // Created before another team verified a domain over it: the profile may not be covered,
      // so it is not changed any more on that name; its team can delete it, or move it to a
      // hostname it may hold (checked above, as a create's), which frees the covered name.
      return make_error(Code::kHostnameConflict,
                        "hostname " + p->hostname +
                            " is covered by a domain another team has verified since this "
                            "profile was created; the profile can be deleted or moved to another "
                            "hostname, not changed on this one");
    }
  }
  Meta& m = meta_of(r);
  m = old_meta;
  m.updated_at = now;
  return Decision{{Change{event_type(kind, "updated"), r}}, std::move(r)};
}

Result<Decision> decide_delete(Kind kind, const std::string& id, const Actor& actor, int64_t now,
                               Lookups& lookups, const Preconditions& pre,
                               const PlatformNamespaces& reserved) {
  auto loaded = load_own(kind, id, actor, lookups);
  if (!loaded.ok()) return std::move(loaded.error());
  if (auto e = check_preconditions(pre, loaded.value().version)) return std::move(*e);
  Record r = std::move(loaded.value().record);
  Meta& m = meta_of(r);
  m.deleted_at = now;
  m.updated_at = now;
  Decision d{{Change{event_type(kind, "deleted"), r}}, r};
  if (const auto* dom = std::get_if<Domain>(&r)) {
    revoke_children(*dom, now, lookups, reserved, &d.changes);
  }
  return d;
}

Result<Decision> decide_verify(const std::string& id, const Actor& actor, Lookups& lookups,
                               const Preconditions& pre, const PlatformNamespaces& reserved) {
  auto loaded = load_own(Kind::kDomain, id, actor, lookups);
  if (!loaded.ok()) return std::move(loaded.error());
  if (auto e = check_preconditions(pre, loaded.value().version)) return std::move(*e);
  Record r = std::move(loaded.value().record);
  const Domain& d = std::get<Domain>(r);
  if (d.status == "verified") return Decision{{}, std::move(r)};
  // Stored before its namespace was reserved: it keeps its name, but no team may own it now.
  if (reserved.covers(d.hostname)) {
    FieldErrors errors;
    errors.add("hostname", reserved.problem() + ", so " + d.hostname +
                               " cannot be verified; this domain can only be deleted");
    return errors.to_error();
  }
  return Decision{{Change{event_type(Kind::kDomain, "verification_requested"), r}}, std::move(r)};
}

Result<Decision> decide_verification_outcome(const std::string& domain_id, uint64_t request_seq,
                                             const CheckResult& result, int64_t now,
                                             Lookups& lookups, const PlatformNamespaces& reserved) {
  auto stored = lookups.load(domain_id);
  if (!stored || kind_of(stored->record) != Kind::kDomain) {
    return make_error(Code::kInternal, "verification request for unknown domain " + domain_id);
  }
  Domain d = std::get<Domain>(stored->record);
  if (d.meta.deleted_at != 0 || lookups.open_request(domain_id) != request_seq ||
      d.status == "verified") {
    return Decision{{domain_change("verification_superseded", d, request_seq)}, d};
  }
  CheckResult outcome = result;
  if (outcome.ok && reserved.covers(d.hostname)) {
    // Requested before a restart reserved its namespace (decide_verify refuses it since).
    outcome = CheckResult{false, "reserved_for_platform",
                          d.hostname + " " + reserved.problem() + " since it was created"};
  } else if (outcome.ok && other_team_claim(d.hostname, d.meta.team_id, lookups)) {
    outcome = CheckResult{false, "claimed_by_another_team",
                          "another team has verified " + d.hostname + " or a domain above it"};
  } else if (outcome.ok && d.scope == "subtree") {
    if (auto c = other_team_claim_under(d.hostname, d.meta.team_id, lookups)) {
      outcome = CheckResult{false, "claimed_by_another_team",
                            "another team has verified " + c->hostname + ", under " + d.hostname +
                                " (scope exact would leave it out)"};
    }
  }
  d.meta.updated_at = now;
  if (!outcome.ok) {
    d.verification_error = outcome.code + ": " + outcome.detail;
    return Decision{{domain_change("verification_failed", d, request_seq)}, d};
  }
  d.status = "verified";
  d.verified_at = now;
  d.verification_error.clear();
  d.verification_parent_id.clear();
  Decision decision{{domain_change("verified", d, request_seq)}, d};
  if (d.scope == "subtree") inherit_children(d, now, lookups, reserved, &decision.changes);
  return decision;
}

std::string verification_outcome_label(const Decision& decision) {
  if (decision.changes.empty()) return "";
  const Change& first = decision.changes.front();
  if (first.type == event_type(Kind::kDomain, "verified")) return "verified";
  if (first.type == event_type(Kind::kDomain, "verification_superseded")) return "superseded";
  const auto* d = std::get_if<Domain>(&first.record);
  if (d == nullptr) return "";
  return d->verification_error.substr(0, d->verification_error.find(':'));
}

}  // namespace gw
