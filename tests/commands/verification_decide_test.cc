// Verification outcomes, inheritance and revocation: given domains, claims and open requests,
// when an outcome (or a delete/update) is decided, then these events.
#include <doctest/doctest.h>

#include "commands/decide.h"
#include "commands/fake_lookups.h"

namespace gw {
namespace {

const Actor kOwner{"team_a", "ci"};

Domain domain(const std::string& id, const std::string& team, const std::string& hostname,
              const std::string& status = "pending", const std::string& scope = "subtree",
              const std::string& parent = "") {
  Domain d;
  d.meta = Meta{id, team, 10, 10, 0};
  d.hostname = hostname;
  d.scope = scope;
  d.status = status;
  d.verification_parent_id = parent;
  if (status == "verified") d.verified_at = 10;
  d.verification_hostname = "_gateway-verify." + hostname;
  d.verification_value = "gv-1.verify.platform.test";
  return d;
}

// A PUT body of team_a's domain `hostname` with `scope`.
DomainSpec scope_change(const std::string& hostname, const std::string& scope) {
  DomainSpec s;
  s.domain.meta.team_id = "team_a";
  s.domain.hostname = hostname;
  s.domain.scope = scope;
  return s;
}

std::vector<std::string> types(const Decision& d) {
  std::vector<std::string> out;
  for (const auto& c : d.changes) out.push_back(c.type);
  return out;
}

const CheckResult kOk{true, "", ""};

TEST_CASE("a successful check verifies the domain and answers the request") {
  testing::FakeLookups given;
  given.given(domain("dom_1", "team_a", "shop.example.com", "pending", "exact"));
  given.given_open_request("dom_1", 7);
  auto d = decide_verification_outcome("dom_1", 7, kOk, 500, given);
  REQUIRE(d.ok());
  CHECK(types(d.value()) == std::vector<std::string>{"domain.verified"});
  CHECK(d.value().changes[0].caused_by == 7);
  const auto& dom = std::get<Domain>(d.value().result);
  CHECK(dom.status == "verified");
  CHECK(dom.verified_at == 500);
  CHECK(dom.verification_error.empty());
  CHECK(verification_outcome_label(d.value()) == "verified");
}

TEST_CASE("a failed check keeps the domain pending and says why") {
  testing::FakeLookups given;
  Domain old = domain("dom_1", "team_a", "shop.example.com");
  given.given(old);
  given.given_open_request("dom_1", 7);
  auto d =
      decide_verification_outcome("dom_1", 7, {false, "wrong_value", "points to x"}, 500, given);
  REQUIRE(d.ok());
  CHECK(types(d.value()) == std::vector<std::string>{"domain.verification_failed"});
  const auto& dom = std::get<Domain>(d.value().result);
  CHECK(dom.status == "pending");
  CHECK(dom.verified_at == 0);
  CHECK(dom.verification_error == "wrong_value: points to x");
  CHECK(verification_outcome_label(d.value()) == "wrong_value");
}

TEST_CASE("a late outcome for a superseded request changes nothing but is answered") {
  SUBCASE("re-requested") {
    testing::FakeLookups given;
    Domain old = domain("dom_1", "team_a", "a.example.com");
    given.given(old);
    given.given_open_request("dom_1", 9);
    auto d = decide_verification_outcome("dom_1", 7, kOk, 500, given);
    REQUIRE(d.ok());
    CHECK(types(d.value()) == std::vector<std::string>{"domain.verification_superseded"});
    CHECK(std::get<Domain>(d.value().changes[0].record) == old);
    CHECK(verification_outcome_label(d.value()) == "superseded");
  }
  SUBCASE("deleted") {
    testing::FakeLookups given;
    Domain old = domain("dom_1", "team_a", "a.example.com");
    old.meta.deleted_at = 20;
    given.given(old);
    given.given_open_request("dom_1", 7);
    auto d = decide_verification_outcome("dom_1", 7, kOk, 500, given);
    CHECK(types(d.value()) == std::vector<std::string>{"domain.verification_superseded"});
    CHECK(std::get<Domain>(d.value().result) == old);
  }
  SUBCASE("verified meanwhile through a parent") {
    testing::FakeLookups given;
    given.given(domain("dom_1", "team_a", "a.example.com", "verified", "exact", "dom_p"));
    given.given_open_request("dom_1", 7);
    auto d = decide_verification_outcome("dom_1", 7, {false, "timeout", "x"}, 500, given);
    CHECK(types(d.value()) == std::vector<std::string>{"domain.verification_superseded"});
    CHECK(verification_outcome_label(d.value()) == "superseded");
  }
  SUBCASE("never existed: impossible, an internal error") {
    testing::FakeLookups given;
    auto d = decide_verification_outcome("dom_x", 7, kOk, 500, given);
    REQUIRE_FALSE(d.ok());
    CHECK(d.error().code == Code::kInternal);
  }
}

TEST_CASE("takeover guard: a name another team has verified can never verify") {
  testing::FakeLookups given;
  given.given(domain("dom_b", "team_b", "x.example.com"));
  given.given_open_request("dom_b", 7);
  given.given_claim(Claim{"team_a", "dom_a", "example.com", "subtree"});
  auto d = decide_verification_outcome("dom_b", 7, kOk, 500, given);
  REQUIRE(d.ok());
  CHECK(types(d.value()) == std::vector<std::string>{"domain.verification_failed"});
  CHECK(std::get<Domain>(d.value().result)
            .verification_error.starts_with("claimed_by_another_team: "));
  // The DNS answer was right; what was written is the guard's failure.
  CHECK(verification_outcome_label(d.value()) == "claimed_by_another_team");
}

TEST_CASE("a verified subtree domain passes verification to the team's pending domains under it") {
  testing::FakeLookups given;
  given.given(domain("dom_p", "team_a", "example.com"));
  given.given_open_request("dom_p", 7);
  given.given(domain("dom_c1", "team_a", "shop.example.com", "pending", "exact"));
  given.given(domain("dom_c2", "team_a", "a.b.example.com", "pending", "exact"));
  given.given(domain("dom_v", "team_a", "v.example.com", "verified", "exact"));
  given.given(domain("dom_other", "team_b", "z.example.com", "pending", "exact"));
  given.given(domain("dom_far", "team_a", "example.org", "pending", "subtree"));
  auto d = decide_verification_outcome("dom_p", 7, kOk, 500, given);
  REQUIRE(d.ok());
  CHECK(types(d.value()) ==
        std::vector<std::string>{"domain.verified", "domain.verification_inherited",
                                 "domain.verification_inherited"});
  for (size_t i = 1; i < d.value().changes.size(); ++i) {
    const auto& c = std::get<Domain>(d.value().changes[i].record);
    CHECK(c.status == "verified");
    CHECK(c.verification_parent_id == "dom_p");
    CHECK(c.verified_at == 500);
    CHECK(d.value().changes[i].caused_by == 0);
  }
  SUBCASE("an exact domain passes nothing down") {
    testing::FakeLookups exact;
    exact.given(domain("dom_p", "team_a", "example.com", "pending", "exact"));
    exact.given_open_request("dom_p", 7);
    exact.given(domain("dom_c1", "team_a", "shop.example.com", "pending", "exact"));
    CHECK(decide_verification_outcome("dom_p", 7, kOk, 500, exact).value().changes.size() == 1);
  }
}

TEST_CASE("deleting a parent revokes what inherited from it, or re-parents it") {
  testing::FakeLookups given;
  given.given(domain("dom_p", "team_a", "example.com", "verified", "subtree"));
  given.given(domain("dom_c", "team_a", "a.shop.example.com", "verified", "exact", "dom_p"));
  given.given(domain("dom_d", "team_a", "other.example.com", "verified", "exact", "dom_p"));
  given.given(domain("dom_s", "team_a", "shop.example.com", "verified", "subtree"));
  given.given_claim(Claim{"team_a", "dom_p", "example.com", "subtree"});
  given.given_claim(Claim{"team_a", "dom_s", "shop.example.com", "subtree"});
  auto d = decide_delete(Kind::kDomain, "dom_p", kOwner, 900, given);
  REQUIRE(d.ok());
  REQUIRE(d.value().changes.size() == 3);
  CHECK(d.value().changes[0].type == "domain.deleted");
  for (size_t i = 1; i < 3; ++i) {
    const auto& c = std::get<Domain>(d.value().changes[i].record);
    if (c.meta.id == "dom_c") {
      CHECK(d.value().changes[i].type == "domain.verification_inherited");
      CHECK(c.verification_parent_id == "dom_s");
      CHECK(c.status == "verified");
    } else {
      CHECK(c.meta.id == "dom_d");
      CHECK(d.value().changes[i].type == "domain.verification_revoked");
      CHECK(c.status == "pending");
      CHECK(c.verified_at == 0);
      CHECK(c.verification_parent_id.empty());
    }
  }
}

TEST_CASE("narrowing a verified domain to exact revokes its children; widening passes it down") {
  testing::FakeLookups given;
  given.given(domain("dom_p", "team_a", "example.com", "verified", "subtree"));
  given.given(domain("dom_c", "team_a", "a.example.com", "verified", "exact", "dom_p"));
  DomainSpec narrow = scope_change("example.com", "exact");
  auto d = decide_update(Kind::kDomain, "dom_p", Spec{narrow}, kOwner, {}, 900, given);
  REQUIRE(d.ok());
  CHECK(types(d.value()) ==
        std::vector<std::string>{"domain.updated", "domain.verification_revoked"});

  testing::FakeLookups exact;
  exact.given(domain("dom_p", "team_a", "example.com", "verified", "exact"));
  exact.given(domain("dom_c", "team_a", "a.example.com", "pending", "exact"));
  DomainSpec widen = scope_change("example.com", "subtree");
  auto w = decide_update(Kind::kDomain, "dom_p", Spec{widen}, kOwner, {}, 900, exact);
  REQUIRE(w.ok());
  CHECK(types(w.value()) ==
        std::vector<std::string>{"domain.updated", "domain.verification_inherited"});
}

// A domain stored before a restart reserved its namespace (another --platform-domain) kept its
// name, and verified: directly, with the request it had open, and through a parent outside the
// namespace, a team's claim inside the platform's own (helper 166).
TEST_CASE("no domain in a platform namespace is verified, directly or through a parent") {
  const PlatformNamespaces reserved{"plat.example.com", "run.plat.example.com"};
  SUBCASE("its verify is 422 on its hostname") {
    testing::FakeLookups given;
    given.given(domain("dom_r", "team_a", "plat.example.com"));
    auto d = decide_verify("dom_r", kOwner, given, {}, reserved);
    REQUIRE_FALSE(d.ok());
    CHECK(d.error().code == Code::kValidationFailed);
    REQUIRE(d.error().errors.size() == 1);
    CHECK(d.error().errors[0].field == "hostname");
    CHECK(d.error().errors[0].message ==
          "is reserved for platform-managed routes (plat.example.com, run.plat.example.com), so "
          "plat.example.com cannot be verified; this domain can only be deleted");
    // Outside the namespaces, and with none reserved, the verify is requested.
    CHECK(types(decide_verify("dom_r", kOwner, given).value()) ==
          std::vector<std::string>{"domain.verification_requested"});
    testing::FakeLookups outside;
    outside.given(domain("dom_o", "team_a", "example.com"));
    CHECK(decide_verify("dom_o", kOwner, outside, {}, reserved).ok());
  }
  SUBCASE("a request it had open fails with reserved_for_platform") {
    testing::FakeLookups given;
    given.given(domain("dom_r", "team_a", "app.run.plat.example.com", "pending", "exact"));
    given.given_open_request("dom_r", 7);
    auto d = decide_verification_outcome("dom_r", 7, kOk, 500, given, reserved);
    REQUIRE(d.ok());
    CHECK(types(d.value()) == std::vector<std::string>{"domain.verification_failed"});
    const auto& dom = std::get<Domain>(d.value().result);
    CHECK(dom.status == "pending");
    CHECK(dom.verification_error ==
          "reserved_for_platform: app.run.plat.example.com is reserved for platform-managed "
          "routes (plat.example.com, run.plat.example.com) since it was created");
    CHECK(verification_outcome_label(d.value()) == "reserved_for_platform");
  }
  SUBCASE("a parent outside the namespace passes nothing down into it") {
    testing::FakeLookups given;
    given.given(domain("dom_p", "team_a", "example.com"));
    given.given_open_request("dom_p", 7);
    given.given(domain("dom_r", "team_a", "app.plat.example.com", "pending", "exact"));
    given.given(domain("dom_c", "team_a", "shop.example.com", "pending", "exact"));
    auto d = decide_verification_outcome("dom_p", 7, kOk, 500, given, reserved);
    REQUIRE(d.ok());
    REQUIRE(types(d.value()) ==
            std::vector<std::string>{"domain.verified", "domain.verification_inherited"});
    CHECK(std::get<Domain>(d.value().changes[1].record).meta.id == "dom_c");
    // Widened to subtree later, the same.
    testing::FakeLookups exact;
    exact.given(domain("dom_p", "team_a", "example.com", "verified", "exact"));
    exact.given(domain("dom_r", "team_a", "app.plat.example.com", "pending", "exact"));
    auto w = decide_update(Kind::kDomain, "dom_p", Spec{scope_change("example.com", "subtree")},
                           kOwner, {}, 900, exact, reserved);
    REQUIRE(w.ok());
    CHECK(types(w.value()) == std::vector<std::string>{"domain.updated"});
  }
  SUBCASE("one that inherited before goes back to pending when its parent goes") {
    testing::FakeLookups given;
    given.given(domain("dom_p", "team_a", "example.com", "verified", "subtree"));
    given.given(domain("dom_r", "team_a", "app.plat.example.com", "verified", "exact", "dom_p"));
    given.given(domain("dom_s", "team_a", "plat.example.com", "verified", "subtree"));
    given.given_claim(Claim{"team_a", "dom_p", "example.com", "subtree"});
    given.given_claim(Claim{"team_a", "dom_s", "plat.example.com", "subtree"});
    auto d = decide_delete(Kind::kDomain, "dom_p", kOwner, 900, given, {}, reserved);
    REQUIRE(d.ok());
    REQUIRE(types(d.value()) ==
            std::vector<std::string>{"domain.deleted", "domain.verification_revoked"});
    const auto& c = std::get<Domain>(d.value().changes[1].record);
    CHECK(c.status == "pending");
    CHECK(c.verification_parent_id.empty());
  }
}

// A name is covered by the verified claims of one team at most. Before a subtree's verification
// and a widening to subtree checked the claims under the name, team_a's subtree became verified
// over team_b's verified names: neither team could then put a profile on them (each was covered by
// the other's claim), and team_a's pending domains under team_b's name never inherited, even after
// team_b deleted it.
TEST_CASE("a subtree never covers a name another team has verified") {
  const Claim b_equal{"team_b", "dom_bw", "w.example.com", "exact"};
  const Claim b_subtree{"team_b", "dom_bs", "s.example.com", "subtree"};
  SUBCASE("its verification fails, naming the other team's name") {
    testing::FakeLookups given;
    given.given(domain("dom_p", "team_a", "example.com"));
    given.given_open_request("dom_p", 7);
    given.given(domain("dom_ok", "team_a", "ok.example.com", "pending", "exact"));
    given.given_claim(b_subtree);
    auto d = decide_verification_outcome("dom_p", 7, kOk, 500, given);
    REQUIRE(d.ok());
    REQUIRE(types(d.value()) == std::vector<std::string>{"domain.verification_failed"});
    const auto& dom = std::get<Domain>(d.value().result);
    CHECK(dom.status == "pending");
    CHECK(dom.verification_error.starts_with("claimed_by_another_team: "));
    CHECK(dom.verification_error.find("s.example.com") != std::string::npos);
  }
  SUBCASE("an exact domain, which covers only itself, verifies") {
    testing::FakeLookups given;
    given.given(domain("dom_p", "team_a", "example.com", "pending", "exact"));
    given.given_open_request("dom_p", 7);
    given.given_claim(b_equal);
    auto d = decide_verification_outcome("dom_p", 7, kOk, 500, given);
    REQUIRE(d.ok());
    CHECK(types(d.value()) == std::vector<std::string>{"domain.verified"});
  }
  SUBCASE("the team's own claims under it are no obstacle") {
    testing::FakeLookups given;
    given.given(domain("dom_p", "team_a", "example.com"));
    given.given_open_request("dom_p", 7);
    given.given_claim(Claim{"team_a", "dom_aw", "w.example.com", "exact"});
    auto d = decide_verification_outcome("dom_p", 7, kOk, 500, given);
    REQUIRE(d.ok());
    CHECK(types(d.value()) == std::vector<std::string>{"domain.verified"});
  }
  SUBCASE("a verified exact domain cannot widen to subtree over it") {
    testing::FakeLookups given;
    given.given(domain("dom_p", "team_a", "example.com", "verified", "exact"));
    given.given(domain("dom_w", "team_a", "w.example.com", "pending", "exact"));
    given.given_claim(Claim{"team_a", "dom_p", "example.com", "exact"});
    given.given_claim(b_equal);
    DomainSpec widen = scope_change("example.com", "subtree");
    auto d = decide_update(Kind::kDomain, "dom_p", Spec{widen}, kOwner, {}, 900, given);
    REQUIRE_FALSE(d.ok());
    CHECK(d.error().code == Code::kHostnameConflict);
    CHECK(d.error().detail.find("w.example.com") != std::string::npos);
  }
}

// Data written before that rule may still hold such a state; inheritance keeps to the takeover
// guard there.
TEST_CASE("inheritance skips names another team has verified") {
  SUBCASE("when a parent is deleted, a child is not re-parented under another team's name") {
    testing::FakeLookups given;
    given.given(domain("dom_p", "team_a", "example.com", "verified", "subtree"));
    given.given(domain("dom_s", "team_a", "shop.example.com", "verified", "subtree"));
    given.given(domain("dom_c", "team_a", "a.shop.example.com", "verified", "exact", "dom_p"));
    given.given_claim(Claim{"team_a", "dom_p", "example.com", "subtree"});
    given.given_claim(Claim{"team_a", "dom_s", "shop.example.com", "subtree"});
    given.given_claim(Claim{"team_b", "dom_ba", "a.shop.example.com", "exact"});
    auto d = decide_delete(Kind::kDomain, "dom_p", kOwner, 900, given);
    REQUIRE(d.ok());
    REQUIRE(types(d.value()) ==
            std::vector<std::string>{"domain.deleted", "domain.verification_revoked"});
    CHECK(std::get<Domain>(d.value().changes[1].record).status == "pending");
  }
}

}  // namespace
}  // namespace gw
