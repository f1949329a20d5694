// Webhooks: defaults, field rules, PUT as full replacement.
#include "integration/fixture.h"

namespace gw::itest::webhooks_test {
namespace {

using testing::json_with;
using testing::json_quote;
using testing::str;

const std::string kPath = "/v1/webhook";

TEST_CASE("webhook create stores its fields; external_id defaults to empty") {
  Server server;
  Api api(server, kTeamA);
  Response r = api.post(kPath, webhook_body(kTeamA, "wl-1"));
  INFO(r.body);
  REQUIRE(r.status == 201);
  rapidjson::Document w = json(r);
  CHECK(str(w, "webhook_id").starts_with("whk_"));
  CHECK(str(w, "team_id") == kTeamA);
  CHECK(str(w, "workload_id") == "wl-1");
  CHECK(str(w, "provider") == "github");
  CHECK(str(w, "status") == "active");
  CHECK(field(w, "external_id").IsString());
  CHECK(str(w, "external_id") == "");

  std::string gitlab = json_with(webhook_body(kTeamA, "wl-2"), "provider", R"("gitlab")");
  gitlab = json_with(gitlab, "status", R"("inactive")");
  gitlab = json_with(gitlab, "external_id", R"("hook-98765")");
  Response g = api.post(kPath, gitlab);
  INFO(g.body);
  REQUIRE(g.status == 201);
  CHECK(str(json(g), "provider") == "gitlab");
  CHECK(str(json(g), "status") == "inactive");
  CHECK(str(json(g), "external_id") == "hook-98765");
}

TEST_CASE("webhook 422 lists every missing and every bad field") {
  Server server;
  Api api(server, kTeamA);
  Response missing = api.post(kPath, R"({"team_id": "team_a"})");
  check_problem(missing, 422, "validation_failed");
  for (const std::string f : {"workload_id", "provider", "status"}) {
    CAPTURE(f);
    CHECK(has_field(error_fields(missing), f));
  }
  Response bad =
      api.post(kPath, R"({"team_id": "team_a", "workload_id": "", "provider": "bitbucket",
                                     "status": "paused", "external_id": 5, "secret": "s3cr3t"})");
  check_problem(bad, 422, "validation_failed");
  for (const std::string f : {"workload_id", "provider", "status", "external_id", "secret"}) {
    CAPTURE(f);
    CHECK(has_field(error_fields(bad), f));
  }
  CHECK(num(field(json(api.get(kPath)), "pagination"), "total") == 0);
}

TEST_CASE("webhook workload_id is 1..128 bytes; provider and status are exact enums") {
  Server server;
  Api api(server, kTeamA);
  CHECK(api.post(kPath, webhook_body(kTeamA, std::string(128, 'w'))).status == 201);
  Response long_id = api.post(kPath, webhook_body(kTeamA, std::string(129, 'w')));
  check_problem(long_id, 422, "validation_failed");
  CHECK(has_field(error_fields(long_id), "workload_id"));
  for (const std::string provider : {"GitHub", "bitbucket", ""}) {
    CAPTURE(provider);
    Response r =
        api.post(kPath, json_with(webhook_body(kTeamA, "wl"), "provider", json_quote(provider)));
    check_problem(r, 422, "validation_failed");
    CHECK(has_field(error_fields(r), "provider"));
  }
  for (const std::string status : {"ACTIVE", "disabled"}) {
    CAPTURE(status);
    Response r =
        api.post(kPath, json_with(webhook_body(kTeamA, "wl"), "status", json_quote(status)));
    check_problem(r, 422, "validation_failed");
    CHECK(has_field(error_fields(r), "status"));
  }
}

TEST_CASE("webhook PUT replaces the record; omitted external_id goes back to empty") {
  Server server;
  Api api(server, kTeamA);
  Response r = api.post(kPath, json_with(webhook_body(kTeamA, "wl-1"), "external_id", R"("42")"));
  REQUIRE(r.status == 201);
  std::string path = kPath + "/" + str(json(r), "webhook_id");
  std::string body = json_with(webhook_body(kTeamA, "wl-9"), "provider", R"("gitlab")");
  body = json_with(body, "status", R"("inactive")");
  Response put = api.put(path, body);
  INFO(put.body);
  REQUIRE(put.status == 200);
  rapidjson::Document w = json(put);
  CHECK(str(w, "workload_id") == "wl-9");
  CHECK(str(w, "provider") == "gitlab");
  CHECK(str(w, "status") == "inactive");
  CHECK(str(w, "external_id") == "");
  Response bad = api.put(path, json_with(body, "status", R"("paused")"));
  check_problem(bad, 422, "validation_failed");
  CHECK(json(api.get(path)) == w);
}

// Two decisions of the README ("Records and field rules", "Uniqueness"): a PUT that gives every
// field its current value is an update like any other, and webhooks have no uniqueness rule.
TEST_CASE("a webhook PUT of the current body is an update; one workload may have two webhooks") {
  Server server;
  Api api(server, kTeamA);
  const std::string body = webhook_body(kTeamA, "wl-1");
  Response first = api.post(kPath, body);
  REQUIRE(first.status == 201);
  const std::string path = kPath + "/" + str(json(first), "webhook_id");
  Response put = api.put(path, body);
  INFO(put.body);
  REQUIRE(put.status == 200);
  CHECK(put.header("ETag") == "\"2\"");
  rapidjson::Document history = json(api.get(path + "/history"));
  REQUIRE(field(history, "data").Size() == 2);
  CHECK(str(at(field(history, "data"), 1), "type") == "webhook.updated");

  Response second = api.post(kPath, body);
  INFO(second.body);
  REQUIRE(second.status == 201);
  CHECK(str(json(second), "webhook_id") != str(json(first), "webhook_id"));
  CHECK(num(field(json(api.get(kPath + "?workload_id=wl-1")), "pagination"), "total") == 2);
}

}  // namespace
}  // namespace gw::itest::webhooks_test
