// Reading a record as it was at any point of the log (?as_of=SEQ), and Idempotency-Key on creates.
#include <atomic>
#include <set>
#include <thread>

#include "integration/fixture.h"

namespace gw::itest::audit_test {
namespace {

using testing::json_with;

// The sequence numbers of a record's events, oldest first (from its history).
std::vector<int64_t> event_seqs(Api& api, const Kind& kind, const std::string& id) {
  Response r = api.get(item_path(kind, id) + "/history");
  REQUIRE(r.status == 200);
  std::vector<int64_t> out;
  const rapidjson::Document history = json(r);  // outlives the loop (a temporary would not)
  for (const rapidjson::Value* e : items(field(history, "data"))) out.push_back(num(*e, "seq"));
  return out;
}

// The sequence number of the tenant's last event (0 when it has none).
int64_t last_seq(Api& api) {
  const std::vector<std::string> events = all_events(api);
  if (events.empty()) return 0;
  rapidjson::Document last;
  last.Parse(events.back().c_str());
  return num(last, "seq");
}

std::string as_of(const Kind& kind, const std::string& id, int64_t seq) {
  return item_path(kind, id) + "?as_of=" + std::to_string(seq);
}

TEST_CASE("as_of returns each record as it was after any event, and 404 before or after its life") {
  Server server;
  Api api(server, kTeamA);
  REQUIRE(api.post("/v1/webhook", webhook_body(kTeamA, "first")).status == 201);  // seq 1
  for (const Kind* kind : kKinds) {
    CAPTURE(kind->name);
    Response created = api.post(std::string(kind->path), kind->body(kTeamA, 7));
    REQUIRE(created.status == 201);
    const std::string id = str(json(created), kind->id_field);
    Response other = api.post(std::string(kind->path), kind->body(kTeamA, 8));  // interleaved
    REQUIRE(other.status == 201);
    Response updated = api.put(
        item_path(*kind, id), json_with(kind->body(kTeamA, 7), kind->edit_field, kind->edit_value));
    REQUIRE(updated.status == 200);
    REQUIRE(api.del(item_path(*kind, id)).status == 200);
    std::vector<int64_t> seqs = event_seqs(api, *kind, id);
    REQUIRE(seqs.size() == 3);

    CHECK(api.get(as_of(*kind, id, seqs[0] - 1)).status == 404);  // not yet created
    Response first = api.get(as_of(*kind, id, seqs[0]));
    REQUIRE(first.status == 200);
    CHECK(first.body == created.body);
    CHECK(first.header("ETag") == created.header("ETag"));
    // Between its own events (another record's create came next) it is unchanged.
    CHECK(api.get(as_of(*kind, id, seqs[1] - 1)).body == created.body);
    Response second = api.get(as_of(*kind, id, seqs[1]));
    CHECK(second.body == updated.body);
    CHECK(second.header("ETag") == updated.header("ETag"));
    check_problem(api.get(as_of(*kind, id, seqs[2])), 404, "not_found");  // deleted by then
    check_problem(api.get(item_path(*kind, id)), 404, "not_found");
  }
}

TEST_CASE("as_of is tenant-scoped and must name an event of the log") {
  Server server;
  Api a(server, kTeamA);
  Api b(server, kTeamB);
  Response created = a.post("/v1/webhook", webhook_body(kTeamA, "w1"));
  REQUIRE(created.status == 201);
  const std::string id = str(json(created), "webhook_id");
  const int64_t last = last_seq(a);
  check_problem(b.get(as_of(kWebhook, id, last)), 404, "not_found");
  check_problem(a.get(as_of(kProfile, id, last)), 404, "not_found");  // wrong kind for the id
  check_problem(a.get(as_of(kWebhook, id, last + 1)), 400, "invalid_query");
  for (const char* bad : {"0", "-1", "abc", "", "1.5", "99999999999999999999999"}) {
    CAPTURE(bad);
    check_problem(a.get(item_path(kWebhook, id) + "?as_of=" + bad), 400, "invalid_query");
  }
  check_problem(a.get("/v1/webhook?as_of=1"), 400, "invalid_query");  // not a list parameter
  // Past the OpenAPI document's int64: out of range, not merely a point in the future.
  Response huge = a.get(item_path(kWebhook, id) + "?as_of=9223372036854775808");
  check_problem(huge, 400, "invalid_query");
  CHECK(huge.body.find("as_of must be an integer 1..9223372036854775807") != std::string::npos);
}

TEST_CASE("a verified domain read as of its verification request is still pending") {
  Server server;
  Api api(server, kTeamA);
  Response created = api.post("/v1/domain", domain_body(kTeamA, "asof.example.com"));
  REQUIRE(created.status == 201);
  const std::string id = str(json(created), "domain_id");
  REQUIRE(verify(api, id).status == 200);
  // The closed DNS port answers the request with a failure outcome.
  for (int i = 0; i < 100 && event_seqs(api, kDomain, id).size() < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::vector<int64_t> seqs = event_seqs(api, kDomain, id);
  REQUIRE(seqs.size() == 3);
  Response requested = api.get(as_of(kDomain, id, seqs[1]));
  REQUIRE(requested.status == 200);
  CHECK(str(json(requested), "verification_error").empty());
  Response failed = api.get(as_of(kDomain, id, seqs[2]));
  CHECK_FALSE(str(json(failed), "verification_error").empty());
  CHECK(failed.body == api.get(item_path(kDomain, id)).body);
}

TEST_CASE("Idempotency-Key: a repeat gets the first answer and appends nothing") {
  Server server;
  Api api(server, kTeamA);
  const Headers key{{"Idempotency-Key", "order-42"}};
  const std::string body = profile_body(kTeamA, "idem.example.com");
  Response first = api.post("/v1/gateway_security_profile", body, key);
  REQUIRE(first.status == 201);
  CHECK_FALSE(first.header("Idempotency-Replayed").has_value());
  const int64_t after_first = last_seq(api);

  Response again = api.post("/v1/gateway_security_profile", body, key);
  CHECK(again.status == 201);
  CHECK(again.body == first.body);
  CHECK(again.header("ETag") == first.header("ETag"));
  CHECK(again.header("Location") == first.header("Location"));
  CHECK(again.header("Idempotency-Replayed") == "true");
  CHECK(last_seq(api) == after_first);
  // The media type is the request's own, not kept with the key: a repeat sent as text/plain is
  // 415, as any create is (a review found it answered 201 once the kept answer came first).
  check_problem(api.send("POST", "/v1/gateway_security_profile",
                         {{"Idempotency-Key", "order-42"}, {"Content-Type", "text/plain"}}, body),
                415, "unsupported_media_type");

  // Even after the record changed, the repeat gets the first answer, not the current record.
  const std::string id = str(json(first), kProfile.id_field);
  REQUIRE(api.put(item_path(kProfile, id), json_with(body, "waf_mode", R"("block")")).status ==
          200);
  CHECK(api.post("/v1/gateway_security_profile", body, key).body == first.body);

  SUBCASE("the same key with another body or path is refused and changes nothing") {
    const int64_t before = last_seq(api);
    check_problem(
        api.post("/v1/gateway_security_profile", profile_body(kTeamA, "other.example.com"), key),
        422, "idempotency_key_reused");
    check_problem(api.post("/v1/webhook", webhook_body(kTeamA, "w"), key), 422,
                  "idempotency_key_reused");
    // Byte for byte: the same JSON with other whitespace is another request.
    check_problem(api.post("/v1/gateway_security_profile", body + " ", key), 422,
                  "idempotency_key_reused");
    // The kept key is checked before the stateful rules (README, check order): another team's
    // `team_id` with it is the key's 422, not the body's 403.
    check_problem(
        api.post("/v1/gateway_security_profile", profile_body(kTeamB, "idem.example.com"), key),
        422, "idempotency_key_reused");
    CHECK(last_seq(api) == before);
  }
  SUBCASE("keys belong to one tenant") {
    Api b(server, kTeamB);
    Response theirs = b.post("/v1/webhook", webhook_body(kTeamB, "w"), key);
    CHECK(theirs.status == 201);
    CHECK_FALSE(theirs.header("Idempotency-Replayed").has_value());
  }
  SUBCASE("keys are the tenant's, shared by all its tokens") {
    Api ci(server, server.new_token(kTeamA, "ci"), std::string(kTeamA));
    Response replayed = ci.post("/v1/gateway_security_profile", body, key);
    CHECK(replayed.status == 201);
    CHECK(replayed.body == first.body);
    CHECK(replayed.header("Idempotency-Replayed") == "true");
  }
  // The field rules came before the kept answer: a restart whose --platform-domain reserved the
  // hostname the create had taken made its retry 422, and the client took the create for failed
  // (helper 158).
  SUBCASE("a repeat gets its answer even where the field rules refuse its body now") {
    REQUIRE(server.stop().success());
    server.restart_with({"--platform-domain", "example.com"});
    Response reserved =
        api.post("/v1/gateway_security_profile", profile_body(kTeamA, "new.example.com"));
    check_problem(reserved, 422, "validation_failed");
    Response replayed = api.post("/v1/gateway_security_profile", body, key);
    CHECK(replayed.status == 201);
    CHECK(replayed.body == first.body);
    CHECK(replayed.header("Idempotency-Replayed") == "true");
    CHECK(last_seq(api) == after_first + 1);  // only the PUT above
    // Another request under the key is refused for its body first, as before.
    check_problem(api.post("/v1/gateway_security_profile", body + " ", key), 422,
                  "validation_failed");
  }
  SUBCASE("keys survive a restart") {
    REQUIRE(server.stop().success());
    server.restart();
    Response after_restart = api.post("/v1/gateway_security_profile", body, key);
    CHECK(after_restart.status == 201);
    CHECK(after_restart.body == first.body);
    CHECK(after_restart.header("Idempotency-Replayed") == "true");
    CHECK(last_seq(api) == after_first + 1);  // only the PUT above
  }
}

TEST_CASE("Idempotency-Key: concurrent repeats create exactly one record") {
  Server server;
  const std::string body = webhook_body(kTeamA, "concurrent");
  std::vector<std::thread> threads;
  std::vector<Response> answers(16);
  for (size_t t = 0; t < answers.size(); ++t) {
    threads.emplace_back([&, t] {
      Api api(server, kTeamA);
      answers[t] = api.post("/v1/webhook", body, {{"Idempotency-Key", "same"}});
    });
  }
  for (auto& t : threads) t.join();
  std::set<std::string> bodies;
  int replayed = 0;
  for (const Response& r : answers) {
    CHECK(r.status == 201);
    bodies.insert(r.body);
    replayed += r.header("Idempotency-Replayed") == "true" ? 1 : 0;
  }
  CHECK(bodies.size() == 1);
  CHECK(replayed == 15);
  Api api(server, kTeamA);
  CHECK(num(field(json(api.get("/v1/webhook")), "pagination"), "total") == 1);
}

TEST_CASE("Idempotency-Key: malformed keys are 400, failed requests keep nothing") {
  Server server;
  Api api(server, kTeamA);
  for (std::string bad : {std::string(""), std::string(256, 'k'), std::string("has space"),
                          std::string("tab\there"), std::string("caf\xc3\xa9")}) {
    CAPTURE(bad);
    check_problem(api.post("/v1/webhook", webhook_body(kTeamA, "w"), {{"Idempotency-Key", bad}}),
                  400, "invalid_idempotency_key");
  }
  CHECK(api.post("/v1/webhook", webhook_body(kTeamA, "w"),
                 {{"Idempotency-Key", std::string(255, 'k')}})
            .status == 201);

  // A conflict keeps nothing under the key: the corrected request may reuse it.
  REQUIRE(
      api.post("/v1/gateway_security_profile", profile_body(kTeamA, "taken.example.com")).status ==
      201);
  const Headers key{{"Idempotency-Key", "retry-me"}};
  check_problem(
      api.post("/v1/gateway_security_profile", profile_body(kTeamA, "taken.example.com"), key), 409,
      "hostname_conflict");
  check_problem(api.post("/v1/gateway_security_profile", "{\"team_id\": 5}", key), 422,
                "validation_failed");
  Response fixed =
      api.post("/v1/gateway_security_profile", profile_body(kTeamA, "free.example.com"), key);
  CHECK(fixed.status == 201);
  CHECK_FALSE(fixed.header("Idempotency-Replayed").has_value());
}

}  // namespace
}  // namespace gw::itest::audit_test
