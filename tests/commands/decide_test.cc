// Given stored state, when a command is decided, then these events (or this error).
#include <doctest/doctest.h>

#include "commands/decide.h"
#include "commands/fake_lookups.h"

namespace gw {
namespace {

const Actor kTeamA{"team_a", "ci"};
const Actor kTeamB{"team_b", "ci"};

Profile profile_spec(const std::string& team, const std::string& hostname) {
  Profile p;
  p.meta.team_id = team;
  p.hostname = hostname;
  return p;
}

DomainSpec domain_spec(const std::string& team, const std::string& hostname) {
  DomainSpec s;
  s.domain.meta.team_id = team;
  s.domain.hostname = hostname;
  return s;
}

Webhook webhook_spec(const std::string& team) {
  Webhook h;
  h.meta.team_id = team;
  h.workload_id = "wl-1";
  h.provider = "github";
  return h;
}

Fresh fresh(const std::string& id, int64_t now = 1000) {
  return Fresh{id, now, "gv-abc.verify.platform.test"};
}

Domain stored_domain(const std::string& id, const std::string& team, const std::string& hostname,
                     const std::string& status = "pending", const std::string& scope = "subtree") {
  Domain d;
  d.meta = Meta{id, team, 10, 10, 0};
  d.hostname = hostname;
  d.scope = scope;
  d.status = status;
  d.verification_hostname = "_gateway-verify." + hostname;
  d.verification_value = "gv-x.verify.platform.test";
  return d;
}

TEST_CASE("create profile: one created event with server fields set") {
  testing::FakeLookups given;
  auto d = decide_create(Spec{profile_spec("team_a", "shop.example.com")}, kTeamA,
                         fresh("gsp_1", 1234), given);
  REQUIRE(d.ok());
  REQUIRE(d.value().changes.size() == 1);
  CHECK(d.value().changes[0].type == "gateway_security_profile.created");
  CHECK(d.value().changes[0].created);  // nothing is stored under the new id yet
  const auto& p = std::get<Profile>(d.value().changes[0].record);
  CHECK(p.meta == Meta{"gsp_1", "team_a", 1234, 1234, 0});
  CHECK(p.waf_mode == "off");
  CHECK(p.waf_template == "workload_default");
}

TEST_CASE("create with a body team_id other than the caller's tenant is tenant_mismatch") {
  testing::FakeLookups given;
  auto d = decide_create(Spec{webhook_spec("team_b")}, kTeamA, fresh("whk_1"), given);
  REQUIRE_FALSE(d.ok());
  CHECK(d.error().code == Code::kTenantMismatch);
}

TEST_CASE("profile hostname is unique across teams among live profiles") {
  testing::FakeLookups given;
  Profile existing = profile_spec("team_b", "shop.example.com");
  existing.meta.id = "gsp_b";
  given.given(existing);
  auto d = decide_create(Spec{profile_spec("team_a", "shop.example.com")}, kTeamA,
                         fresh("gsp_a"), given);
  REQUIRE_FALSE(d.ok());
  CHECK(d.error().code == Code::kHostnameConflict);

  SUBCASE("a deleted profile frees the hostname") {
    existing.meta.deleted_at = 50;
    given.given(existing, 2);
    CHECK(decide_create(Spec{profile_spec("team_a", "shop.example.com")}, kTeamA, fresh("gsp_a"),
                        given)
              .ok());
  }
}

TEST_CASE("profile hostname covered by another team's verified subtree domain is a conflict") {
  testing::FakeLookups given;
  given.given_claim(Claim{"team_b", "dom_b", "example.com", "subtree"});
  auto d = decide_create(Spec{profile_spec("team_a", "api.example.com")}, kTeamA, fresh("gsp_a"),
                         given);
  REQUIRE_FALSE(d.ok());
  CHECK(d.error().code == Code::kHostnameConflict);
  // The owning team itself may.
  CHECK(decide_create(Spec{profile_spec("team_b", "api.example.com")}, kTeamB, fresh("gsp_b"),
                      given)
            .ok());
  // An exact claim covers only its own name.
  testing::FakeLookups exact;
  exact.given_claim(Claim{"team_b", "dom_b", "example.com", "exact"});
  CHECK(decide_create(Spec{profile_spec("team_a", "api.example.com")}, kTeamA, fresh("gsp_a"),
                      exact)
            .ok());
}

TEST_CASE("create domain: pending with a challenge, scope from the public suffix list") {
  testing::FakeLookups given;
  auto d = decide_create(Spec{domain_spec("team_a", "example.com")}, kTeamA, fresh("dom_1"), given);
  REQUIRE(d.ok());
  const auto& dom = std::get<Domain>(d.value().result);
  CHECK(d.value().changes[0].type == "domain.created");
  CHECK(dom.status == "pending");
  CHECK(dom.scope == "subtree");
  CHECK(dom.verification_hostname == "_gateway-verify.example.com");
  CHECK(dom.verification_value == "gv-abc.verify.platform.test");
  CHECK(dom.verified_at == 0);

  auto sub = decide_create(Spec{domain_spec("team_a", "shop.example.com")}, kTeamA,
                           fresh("dom_2"), given);
  REQUIRE(sub.ok());
  CHECK(std::get<Domain>(sub.value().result).scope == "exact");
}

TEST_CASE("create domain: same hostname twice in a team is a conflict, other teams may") {
  testing::FakeLookups given;
  given.given(stored_domain("dom_1", "team_a", "example.com"));
  auto again = decide_create(Spec{domain_spec("team_a", "example.com")}, kTeamA, fresh("dom_2"),
                             given);
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().code == Code::kHostnameConflict);
  CHECK(decide_create(Spec{domain_spec("team_b", "example.com")}, kTeamB, fresh("dom_3"), given)
            .ok());
}

TEST_CASE("takeover guard: names under another team's verified subtree cannot be created") {
  testing::FakeLookups given;
  given.given_claim(Claim{"team_b", "dom_b", "example.com", "subtree"});
  for (const char* host : {"example.com", "a.example.com", "x.y.example.com"}) {
    CAPTURE(host);
    auto d = decide_create(Spec{domain_spec("team_a", host)}, kTeamA, fresh("dom_a"), given);
    REQUIRE_FALSE(d.ok());
    CHECK(d.error().code == Code::kHostnameConflict);
  }
  CHECK(decide_create(Spec{domain_spec("team_a", "notexample.com")}, kTeamA, fresh("dom_a"), given)
            .ok());
}

TEST_CASE("a new domain under the team's own verified subtree inherits verification") {
  testing::FakeLookups given;
  given.given_claim(Claim{"team_a", "dom_parent", "example.com", "subtree"});
  auto d = decide_create(Spec{domain_spec("team_a", "shop.example.com")}, kTeamA,
                         fresh("dom_child", 777), given);
  REQUIRE(d.ok());
  const auto& dom = std::get<Domain>(d.value().result);
  CHECK(dom.status == "verified");
  CHECK(dom.verified_at == 777);
  CHECK(dom.verification_parent_id == "dom_parent");
}

TEST_CASE("update: not found for unknown, deleted and other teams' records") {
  testing::FakeLookups given;
  given.given(stored_domain("dom_b", "team_b", "b.example.com"));
  Domain deleted = stored_domain("dom_del", "team_a", "gone.example.com");
  deleted.meta.deleted_at = 99;
  given.given(deleted);
  for (const char* id : {"dom_missing", "dom_b", "dom_del"}) {
    CAPTURE(id);
    auto d = decide_update(Kind::kDomain, id, Spec{domain_spec("team_a", "b.example.com")}, kTeamA,
                           {}, 2000, given);
    REQUIRE_FALSE(d.ok());
    CHECK(d.error().code == Code::kNotFound);
  }
  // A profile id used on the domain path is not found either.
  Profile p = profile_spec("team_a", "p.example.com");
  p.meta.id = "gsp_1";
  given.given(p);
  auto wrong_kind = decide_update(Kind::kDomain, "gsp_1", Spec{domain_spec("team_a", "x.com")},
                                  kTeamA, {}, 2000, given);
  CHECK(wrong_kind.error().code == Code::kNotFound);
}

TEST_CASE("update domain: hostname cannot change, scope kept when omitted, If-Match honoured") {
  testing::FakeLookups given;
  given.given(stored_domain("dom_1", "team_a", "example.com"), 3);
  SUBCASE("hostname change") {
    auto d = decide_update(Kind::kDomain, "dom_1", Spec{domain_spec("team_a", "other.com")}, kTeamA,
                           {}, 2000, given);
    REQUIRE_FALSE(d.ok());
    CHECK(d.error().code == Code::kValidationFailed);
    CHECK(d.error().errors[0].field == "hostname");
  }
  SUBCASE("hostname change and server fields sent with other values: one 422 lists them all") {
    DomainSpec s = domain_spec("team_a", "other.com");
    s.status = "verified";
    s.verified_at = 5;
    auto d = decide_update(Kind::kDomain, "dom_1", Spec{s}, kTeamA, {}, 2000, given);
    REQUIRE_FALSE(d.ok());
    CHECK(d.error().code == Code::kValidationFailed);
    std::vector<std::string> fields;
    for (const auto& e : d.error().errors) fields.push_back(e.field);
    CHECK(fields == std::vector<std::string>{"hostname", "status", "verified_at"});
  }
  SUBCASE("stale If-Match on delete and verify") {
    auto del = decide_delete(Kind::kDomain, "dom_1", kTeamA, 2000, given, {.if_match = "\"2\""});
    REQUIRE_FALSE(del.ok());
    CHECK(del.error().code == Code::kPreconditionFailed);
    auto verify = decide_verify("dom_1", kTeamA, given, {.if_match = "\"2\""});
    REQUIRE_FALSE(verify.ok());
    CHECK(verify.error().code == Code::kPreconditionFailed);
    CHECK(decide_delete(Kind::kDomain, "dom_1", kTeamA, 2000, given, {.if_match = "\"3\""}).ok());
  }
  SUBCASE("stale If-Match") {
    auto d = decide_update(Kind::kDomain, "dom_1", Spec{domain_spec("team_a", "example.com")},
                           kTeamA, {.if_match = "\"2\""}, 2000, given);
    REQUIRE_FALSE(d.ok());
    CHECK(d.error().code == Code::kPreconditionFailed);
  }
  SUBCASE("matching If-Match, scope omitted") {
    DomainSpec s = domain_spec("team_a", "example.com");
    s.domain.redirect_to = "https://www.example.com";
    auto d =
        decide_update(Kind::kDomain, "dom_1", Spec{s}, kTeamA, {.if_match = "\"3\""}, 2000, given);
    REQUIRE(d.ok());
    const auto& dom = std::get<Domain>(d.value().result);
    CHECK(d.value().changes[0].type == "domain.updated");
    CHECK(dom.scope == "subtree");
    CHECK(dom.redirect_to == "https://www.example.com");
    CHECK(dom.meta.created_at == 10);
    CHECK(dom.meta.updated_at == 2000);
    CHECK(dom.verification_value == "gv-x.verify.platform.test");
  }
}

TEST_CASE("update profile: full replacement keeps id and created_at; new hostname checked") {
  testing::FakeLookups given;
  Profile old = profile_spec("team_a", "a.example.com");
  old.meta = Meta{"gsp_1", "team_a", 10, 10, 0};
  old.cors_origins = "https://a.example.com";
  given.given(old);
  Profile other = profile_spec("team_b", "b.example.com");
  other.meta = Meta{"gsp_2", "team_b", 10, 10, 0};
  given.given(other);

  Profile next = profile_spec("team_a", "a.example.com");
  next.waf_mode = "block";
  auto d = decide_update(Kind::kProfile, "gsp_1", Spec{next}, kTeamA, {}, 50, given);
  REQUIRE(d.ok());
  const auto& p = std::get<Profile>(d.value().result);
  CHECK(p.meta == Meta{"gsp_1", "team_a", 10, 50, 0});
  CHECK(p.waf_mode == "block");
  CHECK(p.cors_origins.empty());

  next.hostname = "b.example.com";
  auto taken = decide_update(Kind::kProfile, "gsp_1", Spec{next}, kTeamA, {}, 50, given);
  REQUIRE_FALSE(taken.ok());
  CHECK(taken.error().code == Code::kHostnameConflict);
}

// A profile created before another team verified a domain over its hostname stayed editable,
// although a profile may not be covered by another team's verified domain.
TEST_CASE("a profile another team's verified domain came to cover can be deleted, not changed") {
  testing::FakeLookups given;
  Profile old = profile_spec("team_a", "shop.example.com");
  old.meta = Meta{"gsp_1", "team_a", 10, 10, 0};
  given.given(old);
  given.given_claim(Claim{"team_b", "dom_b", "example.com", "subtree"});
  Profile next = profile_spec("team_a", "shop.example.com");
  next.waf_mode = "block";
  auto d = decide_update(Kind::kProfile, "gsp_1", Spec{next}, kTeamA, {}, 50, given);
  REQUIRE_FALSE(d.ok());
  CHECK(d.error().code == Code::kHostnameConflict);
  CHECK(d.error().detail ==
        "hostname shop.example.com is covered by a domain another team has verified since this "
        "profile was created; the profile can be deleted or moved to another hostname, not "
        "changed on this one");
  CHECK(decide_delete(Kind::kProfile, "gsp_1", kTeamA, 60, given).ok());
  // Moved to a hostname it may hold, it is changed like any profile (the covered name is freed).
  Profile moved = next;
  moved.hostname = "shop.elsewhere.net";
  auto d_moved = decide_update(Kind::kProfile, "gsp_1", Spec{moved}, kTeamA, {}, 50, given);
  REQUIRE(d_moved.ok());
  CHECK(std::get<Profile>(d_moved.value().result).hostname == "shop.elsewhere.net");
  CHECK(std::get<Profile>(d_moved.value().result).waf_mode == "block");
  // Moved under the other team's claim, it is refused as a create would be.
  moved.hostname = "other.example.com";
  auto d_covered = decide_update(Kind::kProfile, "gsp_1", Spec{moved}, kTeamA, {}, 50, given);
  REQUIRE_FALSE(d_covered.ok());
  CHECK(d_covered.error().code == Code::kHostnameConflict);

  // The team's own claim over it changes nothing.
  testing::FakeLookups own;
  own.given(old);
  own.given_claim(Claim{"team_a", "dom_a", "example.com", "subtree"});
  CHECK(decide_update(Kind::kProfile, "gsp_1", Spec{next}, kTeamA, {}, 50, own).ok());
}

TEST_CASE("delete: soft delete event; deleting again is not found") {
  testing::FakeLookups given;
  given.given(webhook_spec("team_a"));
  Webhook h = webhook_spec("team_a");
  h.meta = Meta{"whk_1", "team_a", 10, 10, 0};
  given.given(h);
  auto d = decide_delete(Kind::kWebhook, "whk_1", kTeamA, 500, given);
  REQUIRE(d.ok());
  CHECK(d.value().changes[0].type == "webhook.deleted");
  CHECK(meta_of(d.value().result).deleted_at == 500);
  given.given(d.value().result, 2);
  auto again = decide_delete(Kind::kWebhook, "whk_1", kTeamA, 600, given);
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().code == Code::kNotFound);
  auto other = decide_delete(Kind::kWebhook, "whk_1", kTeamB, 600, given);
  CHECK(other.error().code == Code::kNotFound);
}

TEST_CASE("verify: pending domain appends verification_requested; verified is a no-op") {
  testing::FakeLookups given;
  given.given(stored_domain("dom_p", "team_a", "p.example.com"));
  given.given(stored_domain("dom_v", "team_a", "v.example.com", "verified"));
  auto p = decide_verify("dom_p", kTeamA, given);
  REQUIRE(p.ok());
  REQUIRE(p.value().changes.size() == 1);
  CHECK(p.value().changes[0].type == "domain.verification_requested");
  auto v = decide_verify("dom_v", kTeamA, given);
  REQUIRE(v.ok());
  CHECK(v.value().changes.empty());
  CHECK(decide_verify("dom_p", kTeamB, given).error().code == Code::kNotFound);
}

TEST_CASE("If-Match: list of tags, star, weak tags never match") {
  // Against version 3. A comma inside quotes belongs to the tag; empty list elements are skipped.
  const std::pair<const char*, IfMatch> cases[] = {
      {"\"3\"", IfMatch::kMatches},
      {"\"1\", \"3\"", IfMatch::kMatches},
      {"\"1\",\"3\"", IfMatch::kMatches},
      {"*", IfMatch::kMatches},
      {" * ", IfMatch::kMatches},
      {"\"2\"", IfMatch::kDiffers},
      {"W/\"3\"", IfMatch::kDiffers},
      {"W/\"3\", \"4\"", IfMatch::kDiffers},
      {"W/\"3\", \"3\"", IfMatch::kMatches},
      {"\"3,4\"", IfMatch::kDiffers},
      {"\"a,b\", \"3\"", IfMatch::kMatches},
      {", \"3\" ,, ", IfMatch::kMatches},
      {"\"\"", IfMatch::kDiffers},
  };
  for (const auto& [header, expected] : cases) {
    INFO("If-Match: [", header, "]");
    CHECK(evaluate_if_match(header, 3) == expected);
  }
}

TEST_CASE("If-Match: anything but * alone or a list of tags is malformed, never a match") {
  for (const char* header :
       {"",        " ",           ",",      " , ,",   "*, \"3\"", "\"3\", *",    "**",
        "3",       "\"3\" \"4\"", "\"3\"x", "\"3",    "3\"",      "\"3\", 4",    "foo, \"3\"",
        "w/\"3\"", "W/3",         "W/",     "\"3 \"", "\"\t3\"",  "\"3\"; \"4\""}) {
    INFO("If-Match: [", header, "]");
    CHECK(evaluate_if_match(header, 3) == IfMatch::kMalformed);
  }
}

TEST_CASE(
    "update, delete and verify refuse a malformed If-Match with 412, saying what it must be") {
  testing::FakeLookups given;
  given.given(stored_domain("dom_1", "team_a", "example.com"), 3);
  // `*` in a list, or a tag among words, was read as `*` or as the tag before.
  const std::string star_in_list = "*, \"7\"";
  const std::string word_and_tag = "\"3\", 3";
  auto updated = decide_update(Kind::kDomain, "dom_1", Spec{domain_spec("team_a", "example.com")},
                               kTeamA, {.if_match = star_in_list}, 2000, given);
  REQUIRE_FALSE(updated.ok());
  CHECK(updated.error().code == Code::kPreconditionFailed);
  CHECK(updated.error().detail ==
        "If-Match must be * alone or a list of quoted entity tags, such as \"3\", \"4\"");
  auto deleted =
      decide_delete(Kind::kDomain, "dom_1", kTeamA, 2000, given, {.if_match = word_and_tag});
  REQUIRE_FALSE(deleted.ok());
  CHECK(deleted.error().code == Code::kPreconditionFailed);
  auto verify = decide_verify("dom_1", kTeamA, given, {.if_match = star_in_list});
  REQUIRE_FALSE(verify.ok());
  CHECK(verify.error().code == Code::kPreconditionFailed);
  CHECK(decide_delete(Kind::kDomain, "dom_1", kTeamA, 2000, given, {.if_match = "\"3\""}).ok());
}

// RFC 9110 13.1.2: If-None-Match compares weakly, so W/"3" matches version 3; * matches any.
TEST_CASE("If-None-Match: a weak or strong tag of the version, or *, matches") {
  const std::pair<const char*, IfMatch> cases[] = {
      {"\"3\"", IfMatch::kMatches},
      {"W/\"3\"", IfMatch::kMatches},
      {"\"1\", W/\"3\"", IfMatch::kMatches},
      {"*", IfMatch::kMatches},
      {"\"2\"", IfMatch::kDiffers},
      {"W/\"2\", \"4\"", IfMatch::kDiffers},
      {"*, \"3\"", IfMatch::kMalformed},
      {"3", IfMatch::kMalformed},
      {"", IfMatch::kMalformed},
  };
  for (const auto& [header, expected] : cases) {
    INFO("If-None-Match: [", header, "]");
    CHECK(evaluate_if_none_match(header, 3) == expected);
  }
}

// Before, If-None-Match was not read: `If-None-Match: *` on a PUT (meant as "only if it does not
// exist yet") changed the record.
TEST_CASE("update, delete and verify fail with 412 when If-None-Match matches or is malformed") {
  testing::FakeLookups given;
  given.given(stored_domain("dom_1", "team_a", "example.com"), 3);
  auto updated = decide_update(Kind::kDomain, "dom_1", Spec{domain_spec("team_a", "example.com")},
                               kTeamA, {std::nullopt, "*"}, 2000, given);
  REQUIRE_FALSE(updated.ok());
  CHECK(updated.error().code == Code::kPreconditionFailed);
  CHECK(updated.error().detail ==
        "If-None-Match matches the current ETag \"3\" (the record exists; * matches any version)");
  auto deleted =
      decide_delete(Kind::kDomain, "dom_1", kTeamA, 2000, given, {std::nullopt, "W/\"3\""});
  REQUIRE_FALSE(deleted.ok());
  CHECK(deleted.error().code == Code::kPreconditionFailed);
  auto verify = decide_verify("dom_1", kTeamA, given, {std::nullopt, "3"});
  REQUIRE_FALSE(verify.ok());
  CHECK(verify.error().detail ==
        "If-None-Match must be * alone or a list of quoted entity tags, such as \"3\", W/\"4\"");
  // If-Match is checked first (RFC 9110 13.2.2), and both must hold.
  auto both = decide_delete(Kind::kDomain, "dom_1", kTeamA, 2000, given, {"\"2\"", "\"3\""});
  REQUIRE_FALSE(both.ok());
  CHECK(both.error().detail == "If-Match does not match the current ETag \"3\"");
  CHECK(decide_delete(Kind::kDomain, "dom_1", kTeamA, 2000, given, {"\"3\"", "\"2\""}).ok());
  CHECK(decide_update(Kind::kDomain, "dom_1", Spec{domain_spec("team_a", "example.com")}, kTeamA,
                      {std::nullopt, "\"2\", W/\"4\""}, 2000, given)
            .ok());
}

}  // namespace
}  // namespace gw
