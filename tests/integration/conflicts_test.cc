// 409 hostname_conflict: within a team, profiles across teams, and under concurrent creates.
#include <atomic>
#include <barrier>
#include <thread>

#include "integration/fixture.h"

namespace gw::itest::conflicts_test {
namespace {

using testing::num;
using testing::str;

TEST_CASE("a hostname is used once per team among live records of a kind") {
  Server server;
  Api a(server, kTeamA);
  struct Case {
    const Kind* kind;
    std::string (*body)(std::string_view, std::string_view);
  };
  for (const Case& c : {Case{&kProfile, profile_body}, Case{&kDomain, domain_body}}) {
    CAPTURE(c.kind->name);
    std::string path(c.kind->path);
    Response first = a.post(path, c.body(kTeamA, "dup.example.com"));
    REQUIRE(first.status == 201);
    check_problem(a.post(path, c.body(kTeamA, "dup.example.com")), 409, "hostname_conflict");
    check_problem(a.post(path, c.body(kTeamA, "DUP.Example.com.")), 409, "hostname_conflict");
    CHECK(num(field(json(a.get(path)), "pagination"), "total") == 1);
    REQUIRE(a.del(item_path(*c.kind, str(json(first), c.kind->id_field))).status == 200);
    Response again = a.post(path, c.body(kTeamA, "dup.example.com"));
    INFO(again.body);
    CHECK(again.status == 201);
  }
  // The two kinds do not conflict with each other.
  CHECK(a.post("/v1/domain", domain_body(kTeamA, "both.example.com")).status == 201);
  CHECK(a.post("/v1/gateway_security_profile", profile_body(kTeamA, "both.example.com")).status ==
        201);
}

TEST_CASE("profile hostnames are unique across teams; pending domains are not claims") {
  Server server;
  Api a(server, kTeamA);
  Api b(server, kTeamB);
  Response pa = a.post("/v1/gateway_security_profile", profile_body(kTeamA, "shared.example.com"));
  REQUIRE(pa.status == 201);
  // The detail says whose the profile is (it said neither before, helper 103), and names the
  // id of the team's own only.
  Response theirs =
      b.post("/v1/gateway_security_profile", profile_body(kTeamB, "shared.example.com"));
  check_problem(theirs, 409, "hostname_conflict");
  CHECK(str(json(theirs), "detail") ==
        "hostname shared.example.com has a gateway security profile of another team");
  Response ours =
      a.post("/v1/gateway_security_profile", profile_body(kTeamA, "shared.example.com"));
  check_problem(ours, 409, "hostname_conflict");
  CHECK(str(json(ours), "detail") ==
        "your team already has a gateway security profile for hostname shared.example.com: " +
            str(json(pa), "profile_id"));
  REQUIRE(a.del(item_path(kProfile, str(json(pa), "profile_id"))).status == 200);
  CHECK(b.post("/v1/gateway_security_profile", profile_body(kTeamB, "shared.example.com")).status ==
        201);

  CHECK(a.post("/v1/domain", domain_body(kTeamA, "pending.example.com")).status == 201);
  Response other = b.post("/v1/domain", domain_body(kTeamB, "pending.example.com"));
  INFO(other.body);
  CHECK(other.status == 201);
}

// Fires `threads` identical creates at once (released together by a barrier) and returns the
// statuses.
std::vector<long> race(const Server& server, std::string_view team, const std::string& path,
                       const std::string& body, int threads) {
  std::vector<long> statuses(static_cast<size_t>(threads), 0);
  std::barrier start(threads);
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i) {
    pool.emplace_back([&, i] {
      Api api(server, team);
      api.get(path);  // connect first, so the creates really start together
      start.arrive_and_wait();
      statuses[static_cast<size_t>(i)] = api.post(path, body).status;
    });
  }
  for (auto& t : pool) t.join();
  return statuses;
}

TEST_CASE("16 concurrent creates of one hostname give exactly one 201 and 409 for the rest") {
  Server server;
  constexpr int kThreads = 16;
  for (int round = 0; round < 3; ++round) {
    CAPTURE(round);
    std::string host = "race" + std::to_string(round) + ".example.com";
    struct Case {
      std::string path;
      std::string body;
    };
    for (const Case& c : {Case{"/v1/domain", domain_body(kTeamA, host)},
                          Case{"/v1/gateway_security_profile", profile_body(kTeamA, host)}}) {
      CAPTURE(c.path);
      std::vector<long> statuses = race(server, kTeamA, c.path, c.body, kThreads);
      int created = 0;
      int conflicts = 0;
      for (long s : statuses) {
        created += s == 201 ? 1 : 0;
        conflicts += s == 409 ? 1 : 0;
      }
      CHECK(created == 1);
      CHECK(conflicts == kThreads - 1);
      Api api(server, kTeamA);
      Response list = api.get(c.path + "?hostname=" + host);
      CHECK(num(field(json(list), "pagination"), "total") == 1);
    }
  }
}

TEST_CASE("concurrent profile creates of one hostname from two teams: one wins") {
  Server server;
  constexpr int kThreads = 16;
  std::string body_a = profile_body(kTeamA, "contested.example.com");
  std::string body_b = profile_body(kTeamB, "contested.example.com");
  std::vector<long> statuses(kThreads, 0);
  std::barrier start(kThreads);
  std::vector<std::thread> pool;
  for (int i = 0; i < kThreads; ++i) {
    pool.emplace_back([&, i] {
      std::string_view team = i % 2 == 0 ? kTeamA : kTeamB;
      Api api(server, team);
      api.get("/v1/gateway_security_profile");
      start.arrive_and_wait();
      statuses[static_cast<size_t>(i)] =
          api.post("/v1/gateway_security_profile", i % 2 == 0 ? body_a : body_b).status;
    });
  }
  for (auto& t : pool) t.join();
  int created = 0;
  for (long s : statuses) {
    CHECK((s == 201 || s == 409));
    created += s == 201 ? 1 : 0;
  }
  CHECK(created == 1);
  int64_t total = 0;
  for (std::string_view team : {kTeamA, kTeamB}) {
    Api api(server, team);
    total += num(field(json(api.get("/v1/gateway_security_profile")), "pagination"), "total");
  }
  CHECK(total == 1);
}

}  // namespace
}  // namespace gw::itest::conflicts_test
