// The audit log over HTTP: /v1/events and /v1/{kind}/{id}/history; rejected requests append
// nothing.
#include "integration/fixture.h"

namespace gw::itest::events_test {
namespace {

using testing::json_with;
using testing::num;
using testing::str;

// The tenant's events after `after` (at most 1000).
rapidjson::Document events(Api& api, int64_t after) {
  Response r = api.get("/v1/events?after=" + std::to_string(after) + "&limit=1000");
  INFO(r.status, " ", r.body);
  CHECK(r.status == 200);
  rapidjson::Document d = json(r);
  if (!d.IsObject() || !d.HasMember("data") || !field(d, "data").IsArray()) {
    FAIL_CHECK("not an events response");
    d.Parse(R"({"data": [], "next_after": -1})");
  }
  return d;
}

TEST_CASE("create, update, delete and verify each append one event with the full record") {
  Server server;
  Api api(server, kTeamA);
  int64_t start = num(events(api, 0), "next_after", 0);
  for (const Kind* kind : kKinds) {
    CAPTURE(kind->name);
    Response created = api.post(std::string(kind->path), kind->body(kTeamA, 1));
    REQUIRE(created.status == 201);
    std::string id = str(json(created), kind->id_field);
    Response updated = api.put(
        item_path(*kind, id), json_with(kind->body(kTeamA, 1), kind->edit_field, kind->edit_value));
    REQUIRE(updated.status == 200);
    bool is_domain = kind == &kDomain;
    if (is_domain) REQUIRE(verify(api, id).status == 200);
    REQUIRE(api.del(item_path(*kind, id)).status == 200);

    rapidjson::Document log = events(api, start);
    std::vector<std::string> types;
    const rapidjson::Value* create_event = nullptr;
    const rapidjson::Value* update_event = nullptr;
    for (const rapidjson::Value* ev : items(field(log, "data"))) {
      const rapidjson::Value& e = *ev;
      if (str(e, "aggregate_id") != id) continue;
      types.push_back(str(e, "type"));
      if (types.back().ends_with(".created")) create_event = &e;
      if (types.back().ends_with(".updated")) update_event = &e;
      CHECK(str(e, "tenant") == kTeamA);
      // Requests carry the token's name; the verifier's outcomes carry its own.
      const bool outcome = str(e, "type") != "domain.verification_requested" &&
                           str(e, "type").starts_with("domain.verif");
      CHECK(str(e, "actor") == (outcome ? "verifier" : "team_a-token"));
      CHECK(str(e, "aggregate_kind") == kind->name);
      CHECK_FALSE(str(e, "event_id").empty());
      CHECK(num(e, "time") >= unix_now() - 300);
      CHECK(num(e, "schema_version") >= 1);
      CHECK(str(e, "hash").size() == 64);
    }
    std::string k(kind->name);
    std::vector<std::string> expected = {k + ".created", k + ".updated"};
    if (is_domain) expected.push_back("domain.verification_requested");
    expected.push_back(k + ".deleted");
    // The verifier's outcome (failed: no DNS here) lands at some point after the verify request;
    // its timing is not the request's to decide, so it is left out of the comparison.
    std::vector<std::string> ours;
    for (const auto& t : types) {
      bool outcome = t.starts_with("domain.verif") && t != "domain.verification_requested";
      if (!outcome) ours.push_back(t);
    }
    CHECK(ours == expected);
    REQUIRE(create_event != nullptr);
    REQUIRE(update_event != nullptr);
    CHECK(field(*create_event, "data") == json(created));
    CHECK(field(*update_event, "data") == json(updated));
    CHECK(num(*create_event, "aggregate_version") < num(*update_event, "aggregate_version"));
    start = num(log, "next_after");
  }
}

TEST_CASE("events: sequence order, hash chain, next_after and limit") {
  Server server;
  Api api(server, kTeamA);
  // An empty log has no last event to name: "(0)" read as an event 0.
  Response before_any = api.get("/v1/events?after=1");
  check_problem(before_any, 400, "invalid_query");
  CHECK(before_any.body.find("after must not be beyond the log's end (it has no events yet)") !=
        std::string::npos);
  for (int i = 0; i < 5; ++i) create(api, kWebhook, i);
  rapidjson::Document log = events(api, 0);
  const rapidjson::Value& data = field(log, "data");
  REQUIRE(length(data) == 5);
  for (size_t i = 1; i < 5; ++i) {
    const rapidjson::Value& prev = at(data, i - 1);
    const rapidjson::Value& cur = at(data, i);
    CHECK(num(cur, "seq") > num(prev, "seq"));
    if (num(cur, "seq") == num(prev, "seq") + 1) CHECK(str(cur, "prev_hash") == str(prev, "hash"));
  }
  CHECK(num(log, "next_after") == num(at(data, 4), "seq"));

  Response two = api.get("/v1/events?after=0&limit=2");
  REQUIRE(two.status == 200);
  rapidjson::Document t = json(two);
  REQUIRE(length(field(t, "data")) == 2);
  CHECK(num(t, "next_after") == num(at(data, 1), "seq"));
  rapidjson::Document rest = events(api, num(t, "next_after"));
  CHECK(length(field(rest, "data")) == 3);
  CHECK(length(field(events(api, num(log, "next_after")), "data")) == 0);
  // An `after` beyond the log's end is a checkpoint from another log, or from this one before a
  // restore of an older backup: it was an empty page, and the tailer skipped every event up to it
  // without a word. As `as_of`, it is 400 naming the end; the largest SEQ a query takes (the
  // OpenAPI document's int64) too.
  const std::string end = std::to_string(num(at(data, 4), "seq"));
  for (const std::string& beyond :
       {std::to_string(num(at(data, 4), "seq") + 1), std::string("9223372036854775807")}) {
    CAPTURE(beyond);
    Response r = api.get("/v1/events?after=" + beyond);
    check_problem(r, 400, "invalid_query");
    CHECK(r.body.find("after must not be beyond the log's end (its last event is " + end + ")") !=
          std::string::npos);
  }
  // Another team's events after the end are no page of this team's: still 200.
  create(api, kWebhook, 5);
  Api b(server, kTeamB);
  Response others = b.get("/v1/events?after=" + end);
  REQUIRE(others.status == 200);
  CHECK(length(field(json(others), "data")) == 0);
  CHECK(others.body.find("\"next_after\":" + end + "}") != std::string::npos);

  for (const std::string q :
       {"?limit=0", "?limit=1001", "?after=-1", "?after=x", "?limit=abc",
        "?after=9223372036854775808", "?after=18446744073709551615", "?limit=5&limit=5"}) {
    CAPTURE(q);
    check_problem(api.get(std::string("/v1/events") + q), 400, "invalid_query");
  }
}

TEST_CASE("a rejected request appends no event and changes nothing") {
  Server server({"--max-request-bytes", "4096"});
  Api a(server, kTeamA);
  Api b(server, kTeamB);
  Response domain = a.post("/v1/domain", domain_body(kTeamA, "taken.example.com"));
  Response profile =
      a.post("/v1/gateway_security_profile", profile_body(kTeamA, "taken.example.com"));
  Response webhook = a.post("/v1/webhook", webhook_body(kTeamA, "wl"));
  REQUIRE(domain.status == 201);
  REQUIRE(profile.status == 201);
  REQUIRE(webhook.status == 201);
  std::string domain_path = item_path(kDomain, str(json(domain), "domain_id"));
  std::string profile_path = item_path(kProfile, str(json(profile), "profile_id"));
  std::string webhook_path = item_path(kWebhook, str(json(webhook), "webhook_id"));
  int64_t a_mark = num(events(a, 0), "next_after");

  HttpClient anon;
  CHECK(anon.request("POST", server.url() + "/v1/webhook", {{"Content-Type", "application/json"}},
                     webhook_body(kTeamA, "x")).status == 401);
  CHECK(a.post("/v1/domain", "{").status == 400);
  CHECK(a.post("/v1/domain", domain_body(kTeamB, "b.example.com")).status == 403);
  CHECK(a.post("/v1/domain", domain_body(kTeamA, "taken.example.com")).status == 409);
  CHECK(b.post("/v1/gateway_security_profile", profile_body(kTeamB, "taken.example.com")).status ==
        409);
  CHECK(a.post("/v1/domain", domain_body(kTeamA, "platform.test")).status == 422);
  CHECK(a.post("/v1/webhook", R"({"team_id":"team_a"})").status == 422);
  CHECK(a.send("POST", "/v1/webhook", {}, webhook_body(kTeamA, "y")).status == 415);
  CHECK(a.post("/v1/webhook", std::string(5000, ' ') + webhook_body(kTeamA, "z")).status == 413);
  CHECK(a.put(domain_path, domain_body(kTeamA, "moved.example.com")).status == 422);
  CHECK(a.put(webhook_path, webhook_body(kTeamA, "wl2"), {{"If-Match", "\"stale\""}}).status ==
        412);
  CHECK(a.put(profile_path, json_with(profile_body(kTeamA, "taken.example.com"), "waf_mode", "1"))
            .status == 422);
  CHECK(a.send("PATCH", webhook_path, {{"Content-Type", "application/json"}}, "{}").status == 405);
  CHECK(b.del(webhook_path).status == 404);
  CHECK(b.put(webhook_path, webhook_body(kTeamB, "wl")).status == 404);
  CHECK(verify(b, str(json(domain), "domain_id")).status == 404);

  CHECK(length(field(events(a, a_mark), "data")) == 0);
  CHECK(length(field(events(b, 0), "data")) == 0);
  const std::pair<const std::string*, const Response*> records[] = {
      {&domain_path, &domain}, {&profile_path, &profile}, {&webhook_path, &webhook}};
  for (const auto& [path, before] : records) {
    CAPTURE(*path);
    Response now = a.get(*path);
    CHECK(json(now) == json(*before));
    CHECK(now.header("ETag") == before->header("ETag"));
  }
}

TEST_CASE("history lists one record's events oldest first, also after delete") {
  Server server;
  Api a(server, kTeamA);
  Api b(server, kTeamB);
  for (const Kind* kind : kKinds) {
    CAPTURE(kind->name);
    std::string id = create(a, *kind, 1);
    create(a, *kind, 2);
    std::string path = item_path(*kind, id);
    REQUIRE(
        a.put(path, json_with(kind->body(kTeamA, 1), kind->edit_field, kind->edit_value)).status ==
        200);
    REQUIRE(a.del(path).status == 200);
    Response h = a.get(path + "/history");
    INFO(h.status, " ", h.body);
    REQUIRE(h.status == 200);
    rapidjson::Document d = json(h);
    const rapidjson::Value& list =
        d.IsArray() ? static_cast<const rapidjson::Value&>(d) : field(d, "data");
    REQUIRE(list.IsArray());
    std::vector<std::string> types;
    for (const rapidjson::Value* e : items(list)) {
      CHECK(str(*e, "aggregate_id") == id);
      types.push_back(str(*e, "type"));
    }
    std::string k(kind->name);
    CHECK(types == std::vector<std::string>{k + ".created", k + ".updated", k + ".deleted"});
    check_problem(b.get(path + "/history"), 404, "not_found");
  }
}

// The aggregate versions of a history page, and its next_after_version (0 for null, -2 when the
// member is missing or neither null nor a number).
struct HistoryPage {
  std::vector<int64_t> versions;
  int64_t next = -2;
  size_t body_bytes = 0;
};

HistoryPage history_page(Api& api, const std::string& path, const std::string& query) {
  Response r = api.get(path + "/history" + query);
  INFO(query, " ", r.status, " ", r.body.substr(0, 300));
  CHECK(r.status == 200);
  rapidjson::Document d = json(r);
  HistoryPage page;
  page.body_bytes = r.body.size();
  for (const rapidjson::Value* e : items(field(d, "data"))) {
    page.versions.push_back(num(*e, "aggregate_version"));
  }
  const rapidjson::Value& next = field(d, "next_after_version");
  if (next.IsNull() && d.IsObject() && d.HasMember("next_after_version")) page.next = 0;
  if (next.IsInt64()) page.next = next.GetInt64();
  return page;
}

TEST_CASE("history pages with after_version and limit; next_after_version is null at the end") {
  Server server;
  Api a(server, kTeamA);
  Api b(server, kTeamB);
  std::string id = create(a, kWebhook, 1);
  std::string path = item_path(kWebhook, id);
  for (int i = 0; i < 4; ++i) {
    REQUIRE(a.put(path, json_with(kWebhook.body(kTeamA, 1), "status",
                                  i % 2 == 0 ? R"("inactive")" : R"("active")"))
                .status == 200);
  }
  using V = std::vector<int64_t>;
  struct Row {
    std::string query;
    V versions;
    int64_t next;
  };
  for (const Row& row : std::vector<Row>{
           {"", {1, 2, 3, 4, 5}, 0},
           {"?limit=2", {1, 2}, 2},
           {"?after_version=2&limit=2", {3, 4}, 4},
           {"?after_version=3&limit=2", {4, 5}, 0},  // exactly the rest: nothing is left
           {"?after_version=4&limit=2", {5}, 0},
           {"?after_version=1", {2, 3, 4, 5}, 0},
           {"?after_version=5", {}, 0},
           {"?after_version=9223372036854775807", {}, 0},
           {"?limit=1000", {1, 2, 3, 4, 5}, 0},
       }) {
    CAPTURE(row.query);
    HistoryPage page = history_page(a, path, row.query);
    CHECK(page.versions == row.versions);
    CHECK(page.next == row.next);
  }
  for (const char* bad : {"?limit=0", "?limit=1001", "?after_version=-1",
                          "?after_version=9223372036854775808", "?after_version=x"}) {
    CAPTURE(bad);
    check_problem(a.get(path + "/history" + bad), 400, "invalid_query");
  }
  check_problem(a.get(path + "/history?after=1"), 400, "invalid_query");
  check_problem(b.get(path + "/history?limit=1"), 404, "not_found");
}

// A profile body of about 600 KB: 180 WAF rule exclusions of a 1000-byte path and 256 rule ids.
std::string large_profile_body(std::string_view hostname, int variant) {
  std::string exclusions = "[";
  for (int i = 0; i < 180; ++i) {
    if (i > 0) exclusions += ",";
    exclusions += R"({"path_prefix":"/)" + std::to_string(i) + "-" + std::string(1000, 'a') +
                  R"(","remove_rule_ids":[)";
    for (int j = 0; j < 256; ++j) {
      if (j > 0) exclusions += ",";
      exclusions += std::to_string(10000000 + j);
    }
    exclusions += "]}";
  }
  exclusions += "]";
  std::string body = json_with(profile_body(kTeamA, hostname), "waf_rule_exclusions", exclusions);
  return json_with(body, "max_body_bytes", std::to_string(1000 + variant));
}

TEST_CASE("history and event pages stop before 4 MiB of events; the next page goes on") {
  constexpr size_t kPageBytes = size_t{4} << 20;
  Server server;
  Api a(server, kTeamA);
  int64_t start = num(events(a, 0), "next_after", 0);
  Response created =
      a.post("/v1/gateway_security_profile", large_profile_body("big.example.com", 0));
  INFO(created.status, " ", created.body.substr(0, 300));
  REQUIRE(created.status == 201);
  REQUIRE(created.body.size() > 550000);
  std::string path = item_path(kProfile, str(json(created), "profile_id"));
  constexpr int kVersions = 8;  // about 4.8 MB of events
  for (int v = 2; v <= kVersions; ++v) {
    REQUIRE(a.put(path, large_profile_body("big.example.com", v)).status == 200);
  }
  std::vector<int64_t> all;
  for (int64_t v = 1; v <= kVersions; ++v) all.push_back(v);

  SUBCASE("history") {
    HistoryPage first = history_page(a, path, "");
    CHECK(first.body_bytes <= kPageBytes + 1024);
    REQUIRE_FALSE(first.versions.empty());
    CHECK(first.versions.size() < all.size());
    CHECK(first.next == first.versions.back());
    std::vector<int64_t> seen = first.versions;
    int64_t next = first.next;
    for (int pages = 0; next > 0 && pages < kVersions; ++pages) {
      HistoryPage page = history_page(a, path, "?after_version=" + std::to_string(next));
      CHECK(page.body_bytes <= kPageBytes + 1024);
      REQUIRE_FALSE(page.versions.empty());
      seen.insert(seen.end(), page.versions.begin(), page.versions.end());
      next = page.next;
    }
    CHECK(seen == all);
    CHECK(next == 0);
  }
  SUBCASE("events") {
    std::vector<int64_t> seen;
    int64_t after = start;
    int calls = 0;
    for (; calls < kVersions + 1; ++calls) {
      Response r = a.get("/v1/events?after=" + std::to_string(after) + "&limit=1000");
      REQUIRE(r.status == 200);
      CHECK(r.body.size() <= kPageBytes + 1024);
      rapidjson::Document d = json(r);
      if (length(field(d, "data")) == 0) break;
      for (const rapidjson::Value* e : items(field(d, "data"))) {
        seen.push_back(num(*e, "aggregate_version"));
        after = num(*e, "seq");
      }
      CHECK(num(d, "next_after") == after);
    }
    CHECK(seen == all);
    CHECK(calls >= 2);  // the first page could not hold them all
  }
}

}  // namespace
}  // namespace gw::itest::events_test
