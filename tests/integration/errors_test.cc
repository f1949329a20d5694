// Error statuses of the edge: 400 invalid_json, 404 unknown paths, 405 with Allow, 413, 415, 429.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "core/text.h"
#include "integration/fixture.h"

namespace gw::itest::errors_test {
namespace {

using testing::num;
using testing::str;

TEST_CASE("a body that is not a JSON object is 400 invalid_json on POST and PUT") {
  Server server;
  Api api(server, kTeamA);
  const std::string bodies[] = {"{",     "",        "[]",          "null",          "\"text\"",
                                "42",    "{}{}",    "{\"a\":}",    "{'a': 1}",      "{\"a\":1,}",
                                "{\"hostname\": \"\xC3\x28\"}"};
  for (const Kind* kind : kKinds) {
    CAPTURE(kind->name);
    std::string id = create(api, *kind, 1);
    for (const std::string& body : bodies) {
      CAPTURE(body);
      check_problem(api.post(std::string(kind->path), body), 400, "invalid_json");
      check_problem(api.put(item_path(*kind, id), body), 400, "invalid_json");
    }
    // A valid body, then a NUL byte and more: RapidJSON's stream took the NUL for the end, and
    // the create was applied (helper 36).
    for (const std::string& tail : {std::string(1, '\0'), std::string("\0{\"not\":\"json", 13)}) {
      CAPTURE(tail.size());
      check_problem(api.post(std::string(kind->path), kind->body(kTeamA, 2) + tail), 400,
                    "invalid_json");
      check_problem(api.put(item_path(*kind, id), kind->body(kTeamA, 1) + tail), 400,
                    "invalid_json");
    }
    CHECK(total(api, *kind) == 1);
  }
}

// A body starting with a lone 0xBF, or any other part of a byte order mark, was read as if those
// bytes were not there: invalid UTF-8, yet created or updated (helper 71).
TEST_CASE("a byte order mark is skipped only whole at the start of a body; a part of one is 400") {
  Server server;
  Api api(server, kTeamA);
  const std::string mark = "\xEF\xBB\xBF";
  for (const Kind* kind : kKinds) {
    CAPTURE(kind->name);
    Response created = api.post(std::string(kind->path), mark + kind->body(kTeamA, 1));
    REQUIRE(created.status == 201);
    const std::string path = item_path(*kind, str(json(created), kind->id_field));
    CHECK(api.put(path, mark + kind->body(kTeamA, 1)).status == 200);
    const size_t events = all_events(api).size();
    for (const std::string& start :
         {std::string("\xBF"), std::string("\xEF"), std::string("\xBB\xBF"),
          std::string("\xEF\xBB"), mark + mark, " " + mark}) {
      CAPTURE(start.size());
      check_problem(api.post(std::string(kind->path), start + kind->body(kTeamA, 2)), 400,
                    "invalid_json");
      check_problem(api.put(path, start + kind->body(kTeamA, 1)), 400, "invalid_json");
    }
    CHECK(all_events(api).size() == events);
    CHECK(total(api, *kind) == 1);
  }
}

TEST_CASE("POST and PUT bodies without Content-Type: application/json are 415") {
  Server server;
  Api api(server, kTeamA);
  for (const Kind* kind : kKinds) {
    CAPTURE(kind->name);
    std::string id = create(api, *kind, 1);
    std::string body = kind->body(kTeamA, 2);
    const std::optional<std::string> types[] = {std::nullopt, "text/plain",
                                                "application/x-www-form-urlencoded",
                                                "application/jsonp", "application/xml",
                                                "not-a-media-type"};
    for (const auto& type : types) {
      CAPTURE(type.value_or("<none>"));
      Headers h;
      if (type) h.emplace_back("Content-Type", *type);
      check_problem(api.send("POST", std::string(kind->path), h, body), 415,
                    "unsupported_media_type");
      check_problem(api.send("PUT", item_path(*kind, id), h, body), 415, "unsupported_media_type");
    }
    CHECK(total(api, *kind) == 1);
  }
}

// gatewayd decodes no content coding, and read a body said to be coded as JSON all the same:
// gzip's bytes were 400 invalid_json, and plain JSON labelled gzip was stored (helper 170).
TEST_CASE("a body in a content coding is 415 with Accept-Encoding: identity; identity is read") {
  Server server;
  Api api(server, kTeamA);
  for (const Kind* kind : kKinds) {
    CAPTURE(kind->name);
    std::string id = create(api, *kind, 1);
    std::string body = kind->body(kTeamA, 2);
    for (const char* coding : {"gzip", "br", "identity, gzip", "GZIP"}) {
      CAPTURE(coding);
      const Headers h = {{"Content-Type", "application/json"}, {"Content-Encoding", coding}};
      for (Response r : {api.send("POST", std::string(kind->path), h, body),
                         api.send("PUT", item_path(*kind, id), h, body)}) {
        check_problem(r, 415, "unsupported_media_type");
        CHECK(str(json(r), "detail") ==
              "the body must be sent without a content coding (Content-Encoding: " +
                  std::string(coding) + "): gatewayd decodes none");
        CHECK(r.header("Accept-Encoding") == "identity");
      }
    }
    CHECK(total(api, *kind) == 1);
    // identity, or a list of nothing but blanks and empty elements, names no coding.
    int n = 3;
    for (const char* none : {"identity", "Identity, ", " , ,"}) {
      CAPTURE(none);
      const Headers h = {{"Content-Type", "application/json"}, {"Content-Encoding", none}};
      CHECK(api.send("POST", std::string(kind->path), h, kind->body(kTeamA, n++)).status == 201);
      CHECK(api.send("DELETE", item_path(*kind, create(api, *kind, n++)), h, "{}").status == 200);
    }
    // A body sent to DELETE, which reads none, is checked as any other.
    const Headers gzip = {{"Content-Type", "application/json"}, {"Content-Encoding", "gzip"}};
    check_problem(api.send("DELETE", item_path(*kind, id), gzip, "{}"), 415,
                  "unsupported_media_type");
    CHECK(api.get(item_path(*kind, id)).status == 200);
  }
  // So is a repeat of a keyed create, answered before the body's other checks.
  const std::string keyed = webhook_body(kTeamA, "keyed");
  REQUIRE(api.post("/v1/webhook", keyed, {{"Idempotency-Key", "coded"}}).status == 201);
  check_problem(api.send("POST", "/v1/webhook",
                         {{"Content-Type", "application/json"},
                          {"Content-Encoding", "gzip"},
                          {"Idempotency-Key", "coded"}},
                         keyed),
                415, "unsupported_media_type");
  // A 415 for the media type says the same of codings.
  Response plain =
      api.send("POST", "/v1/webhook", {{"Content-Type", "text/plain"}}, webhook_body(kTeamA, "w"));
  CHECK(plain.header("Accept-Encoding") == "identity");
}

TEST_CASE("verify reads no body: one sent anyway must be application/json and {}") {
  Server server;
  Api api(server, kTeamA);
  const std::string id = create(api, kDomain, 1);
  const std::string path = item_path(kDomain, id) + "/verify";
  const size_t events_before = all_events(api).size();
  // Refused, each appending nothing: the checks and codes of every other body.
  check_problem(api.send("POST", path, {{"Content-Type", "text/plain"}}, std::string("garbage")),
                415, "unsupported_media_type");
  check_problem(api.send("POST", path, {}, std::string("{}")), 415, "unsupported_media_type");
  check_problem(api.post(path, "garbage"), 400, "invalid_json");
  check_problem(api.post(path, "[]"), 400, "invalid_json");
  Response fields = api.post(path, R"({"hostname":"other.example.com","x":1})");
  check_problem(fields, 422, "validation_failed");
  CHECK(error_fields(fields) == std::vector<std::string>{"hostname", "x"});
  CHECK(all_events(api).size() == events_before);
  // Accepted: no body (with or without a Content-Type), or an empty object.
  CHECK(verify(api, id).status == 200);
  CHECK(api.send("POST", path, {{"Content-Type", "text/plain"}}, std::string()).status == 200);
  CHECK(api.post(path, " { } ").status == 200);
  const std::vector<std::string> events = all_events(api);
  REQUIRE(events.size() > events_before);
  CHECK(events[events_before].find("domain.verification_requested") != std::string::npos);
}

// DELETE ignored any body before, so `{"force":true}` deleted as if it had been read (helper 103).
TEST_CASE("DELETE reads no body: one sent anyway must be application/json and {}") {
  Server server;
  Api api(server, kTeamA);
  for (const Kind* kind : kKinds) {
    CAPTURE(kind->name);
    const std::string path = item_path(*kind, create(api, *kind, 1));
    const size_t events_before = all_events(api).size();
    check_problem(api.send("DELETE", path, {{"Content-Type", "text/plain"}},
                           std::string(R"({"force":true})")),
                  415, "unsupported_media_type");
    check_problem(api.send("DELETE", path, {}, std::string("{}")), 415, "unsupported_media_type");
    const Headers json{{"Content-Type", "application/json"}};
    check_problem(api.send("DELETE", path, json, std::string("garbage")), 400, "invalid_json");
    check_problem(api.send("DELETE", path, json, std::string("[]")), 400, "invalid_json");
    Response fields = api.send("DELETE", path, json, std::string(R"({"force":true})"));
    check_problem(fields, 422, "validation_failed");
    CHECK(error_fields(fields) == std::vector<std::string>{"force"});
    CHECK(fields.body.find("DELETE takes no fields; send no body or {}") != std::string::npos);
    CHECK(all_events(api).size() == events_before);
    CHECK(api.get(path).status == 200);
    // Accepted: an empty object (no body is every other test's DELETE).
    CHECK(api.send("DELETE", path, json, std::string(" { } ")).status == 200);
    CHECK(api.get(path).status == 404);
  }
}

TEST_CASE("unknown paths and unknown ids are 404 not_found") {
  Server server;
  Api api(server, kTeamA);
  std::string domain_id = create(api, kDomain, 1);
  std::string webhook_id = create(api, kWebhook, 1);
  const std::string paths[] = {"/",
                               "/v1",
                               "/v1/nope",
                               "/v2/domain",
                               "/v1/domains",
                               "/v1/domain/" + domain_id + "/extra",
                               "/v1/webhook/" + webhook_id + "/verify",
                               "/v1/webhook/" + domain_id,
                               "/v1/gateway_security_profile/" + webhook_id,
                               "/v1/domain/dom_00000000000000000000000000",
                               "/v1/domain/" + domain_id + "x",
                               // An escaped slash is part of a segment, not a separator.
                               "/v1/webhook/" + webhook_id + "%2Fhistory",
                               "/v1/domain/" + domain_id + "%2fhistory",
                               "/v1%2Fwebhook"};
  for (const std::string& path : paths) {
    CAPTURE(path);
    check_problem(api.get(path), 404, "not_found");
  }
}

TEST_CASE("a request target in absolute form is served as its path (RFC 9112 3.2.2)") {
  Server server;
  Api api(server, kTeamA);
  const std::string id = create(api, kWebhook, 1);
  const Headers auth = {{"Authorization", "Bearer " + server.token(kTeamA)},
                        {"X-Tenant-ID", std::string(kTeamA)}};
  HttpClient http;
  const std::string item = item_path(kWebhook, id);
  Response origin = api.get(item);
  REQUIRE(origin.status == 200);
  for (const std::string& authority : {server.url(), std::string("HTTP://gateway.example")}) {
    CAPTURE(authority);
    Response absolute = http.request("GET", server.url() + item, auth, std::nullopt,
                                     authority + item + "?as_of=" + std::to_string(1 << 20));
    // The query still counts: as_of beyond the log's end is refused as from the origin form.
    check_problem(absolute, 400, "invalid_query");
    absolute = http.request("GET", server.url() + item, auth, std::nullopt, authority + item);
    CHECK(absolute.status == 200);
    CHECK(absolute.body == origin.body);
    Headers json_auth = auth;
    json_auth.emplace_back("Content-Type", "application/json");
    Response created = http.request("POST", server.url() + "/v1/webhook", json_auth,
                                    kWebhook.body(kTeamA, 2), authority + "/v1/webhook");
    CHECK(created.status == 201);
    // No path at all is the root, where nothing is served.
    check_problem(http.request("GET", server.url(), auth, std::nullopt, authority), 404,
                  "not_found");
  }
  // Another scheme names no path of gatewayd's.
  check_problem(
      http.request("GET", server.url() + item, auth, std::nullopt, "ftp://gateway.example" + item),
      404, "not_found");
  // An http URI with no host, or with a port that is not a number, was served (helper 127).
  for (const std::string bad_authority : {"http://", "http://:80", "http://h:abc"}) {
    CAPTURE(bad_authority);
    Response refused =
        http.request("GET", server.url() + item, auth, std::nullopt, bad_authority + item);
    check_problem(refused, 400, "bad_request");
    CHECK(str(json(refused), "detail") == "the request target's host is not a valid host");
  }
  CHECK(total(api, kWebhook) == 3);
}

TEST_CASE("a known path with the wrong method is 405 with Allow") {
  Server server;
  Api api(server, kTeamA);
  std::string domain_id = create(api, kDomain, 1);
  std::string profile_id = create(api, kProfile, 1);
  std::string webhook_id = create(api, kWebhook, 1);
  struct Case {
    std::string method;
    std::string path;
    std::vector<std::string> allow;
  };
  const Case cases[] = {
      {"PATCH", "/v1/domain", {"GET", "HEAD", "POST"}},
      {"DELETE", "/v1/webhook", {"GET", "HEAD", "POST"}},
      {"PUT", "/v1/gateway_security_profile", {"GET", "HEAD", "POST"}},
      {"POST", "/v1/domain/" + domain_id, {"GET", "HEAD", "PUT", "DELETE"}},
      {"PATCH", "/v1/webhook/" + webhook_id, {"GET", "HEAD", "PUT", "DELETE"}},
      {"POST", "/v1/gateway_security_profile/" + profile_id, {"GET", "HEAD", "PUT", "DELETE"}},
      {"POST", "/v1/domain/" + domain_id + "/history", {"GET", "HEAD"}},
      {"POST", "/healthz", {"GET", "HEAD"}},
      {"GET", "/v1/domain/" + domain_id + "/verify", {"POST"}},
      {"DELETE", "/v1/domain/" + domain_id + "/verify", {"POST"}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.method);
    CAPTURE(c.path);
    Response r = api.send(c.method, c.path, {});
    check_problem(r, 405, "method_not_allowed");
    std::vector<std::string> allow = split_list(r.header("Allow").value_or(""));
    CAPTURE(r.header("Allow").value_or("<none>"));
    for (const std::string& m : c.allow) {
      CHECK(std::find(allow.begin(), allow.end(), m) != allow.end());
    }
    CHECK(std::find(allow.begin(), allow.end(), c.method) == allow.end());
  }
  CHECK(api.get("/v1/domain/" + domain_id).status == 200);
}

TEST_CASE("a body over --max-request-bytes is 413 and the connection is closed") {
  constexpr size_t kMax = 2048;
  Server server({"--max-request-bytes", std::to_string(kMax)});
  Api api(server, kTeamA);
  for (const Kind* kind : kKinds) {
    CAPTURE(kind->name);
    std::string id = create(api, *kind, 1);
    std::string at_limit = padded(kind->body(kTeamA, 2), kMax);
    Response ok = api.post(std::string(kind->path), at_limit);
    INFO(ok.status, " ", ok.body);
    CHECK(ok.status == 201);

    for (size_t size : {kMax + 1, 4 * kMax, 64 * kMax, size_t{2} << 20}) {
      CAPTURE(size);
      Response big = api.post(std::string(kind->path), padded(kind->body(kTeamA, 3), size));
      check_problem(big, 413, "payload_too_large");
      Response next = api.get(item_path(*kind, id));
      CHECK(next.status == 200);
      CHECK(next.new_connections == 1);
      check_problem(api.put(item_path(*kind, id), padded(kind->body(kTeamA, 1), size)), 413,
                    "payload_too_large");
    }
    CHECK(total(api, *kind) == 2);
  }
}

// Sends GETs as team `api` until one is 429 or `limit` requests were sent; returns the statuses.
std::vector<long> burst(Api& api, int limit) {
  std::vector<long> statuses;
  for (int i = 0; i < limit; ++i) {
    Response r = api.get("/v1/webhook");
    statuses.push_back(r.status);
    if (r.status == 429) {
      check_problem(r, 429, "rate_limited");
      std::string retry = r.header("Retry-After").value_or("");
      CAPTURE(retry);
      REQUIRE_FALSE(retry.empty());
      CHECK(std::all_of(retry.begin(), retry.end(), [](char c) { return c >= '0' && c <= '9'; }));
      CHECK(std::stol(retry) >= 1);
      break;
    }
  }
  return statuses;
}

TEST_CASE("--rate-limit N: per-tenant burst of N, then 429 with Retry-After") {
  Server server({"--rate-limit", "5"});
  Api a(server, kTeamA);
  Api b(server, kTeamB);
  std::vector<long> statuses = burst(a, 12);
  REQUIRE(statuses.size() >= 6);
  for (size_t i = 0; i < 5; ++i) CHECK(statuses[i] == 200);
  CHECK(statuses.back() == 429);
  CHECK(b.get("/v1/webhook").status == 200);
  // Writes take from the same bucket. It refills one token every 200 ms, and the requests since
  // the 429 took some of that time (on a loaded machine, enough for a token): POSTs are sent until
  // one is refused, which is at once or one token later.
  Response post;
  for (int i = 0; i < 3; ++i) {
    post = a.post("/v1/webhook", webhook_body(kTeamA, "wl"));
    if (post.status != 201) break;
  }
  check_problem(post, 429, "rate_limited");

  std::this_thread::sleep_for(std::chrono::milliseconds(1300));
  CHECK(a.get("/v1/webhook").status == 200);
  CHECK(total(b, kWebhook) == 0);
}

TEST_CASE("GATEWAY_RATE_LIMIT sets the limit; without it there is none") {
  Server limited({}, {"GATEWAY_RATE_LIMIT=3"});
  Api a(limited, kTeamA);
  std::vector<long> statuses = burst(a, 10);
  CHECK(statuses.back() == 429);
  CHECK(statuses.size() <= 5);

  Server unlimited;
  Api u(unlimited, kTeamA);
  for (int i = 0; i < 60; ++i) REQUIRE(u.get("/v1/webhook").status == 200);
}

}  // namespace
}  // namespace gw::itest::errors_test

namespace gw::itest::errors_test {
namespace {

TEST_CASE("deeply nested JSON is parsed without recursion and refused by the field rules") {
  Server server;
  Api api(server, kTeamA);
  constexpr int kDepth = 200000;
  const std::string nested = std::string(kDepth, '[') + std::string(kDepth, ']');
  // As the whole body: valid JSON, but not an object.
  check_problem(api.post("/v1/gateway_security_profile", nested), 400, "invalid_json");
  // Inside waf_overrides: the depth rule refuses it, naming the field.
  std::string body = profile_body(kTeamA, "deep.example.com");
  body.pop_back();
  body += R"(,"waf_overrides":{"a":)" + nested + "}}";
  Response r = api.post("/v1/gateway_security_profile", body);
  check_problem(r, 422, "validation_failed");
  CHECK(r.body.find("waf_overrides") != std::string::npos);
  CHECK(api.get("/healthz").status == 200);
}

// Each of these was served back as bytes that are not UTF-8 (an escaped low surrogate without its
// high half was stored, an undecodable path or member name was echoed) or echoed at any size.
// Every body RapidJSON refused got "not valid UTF-8 JSON (at byte N)", a number beyond a double's
// range (1e400, valid by JSON's grammar) too; the detail now says what is wrong.
TEST_CASE("the invalid_json detail says what is wrong and where") {
  Server server;
  Api api(server, kTeamA);
  const std::string kNumberRefused =
      "the body has a number beyond the range of a double, or with an exponent over 308 plus its "
      "fraction's digits (at byte 5)";
  const std::pair<std::string, std::string> cases[] = {
      {R"({"a":1e400})", kNumberRefused},
      {R"({"a":-1e400})", kNumberRefused},
      {R"({"a":0e309})", kNumberRefused},
      {R"({"a":1,})",
       "the body is not valid UTF-8 JSON: missing a name for object member (at "
       "byte 7)"},
      {"{\"a\":\"\xff\"}",
       "the body is not valid UTF-8 JSON: invalid encoding in string (at "
       "byte 6)"},
      {R"({"a":"\ud800"})",
       "the body is not valid UTF-8 JSON: the surrogate pair in string is "
       "invalid (at byte 6)"},
      // An escaped low surrogate without its high half, which RapidJSON takes: the place of its
      // escape, as for a high one without its low half (it had no place, helper 134).
      {R"({"a":"\udc00"})",
       "the body is not valid UTF-8 JSON: an unpaired \\uDC00-\\uDFFF escape (at byte 6)"},
      {R"({"a":"x\ud83d\ude00\uDFFF"})",
       "the body is not valid UTF-8 JSON: an unpaired \\uDC00-\\uDFFF escape (at byte 19)"},
      {"{", "the body is not valid UTF-8 JSON: missing a name for object member (at byte 1)"},
      // A control character as is, and a real bad escape (helper 52: both said "invalid escape").
      {"{\"a\":\"a\tb\"}",
       "the body is not valid UTF-8 JSON: a control character (U+0009) in a string must be "
       "escaped (at byte 7)"},
      {"{\"a\":\"\x1f\"}",
       "the body is not valid UTF-8 JSON: a control character (U+001f) in a string must be "
       "escaped (at byte 6)"},
      // A NUL as is: RapidJSON reads it as the end of the text ("missing a closing quotation
      // mark"; helper 86).
      {std::string("{\"a\":\"a\0b\"}", 10),
       "the body is not valid UTF-8 JSON: a control character (U+0000) in a string must be "
       "escaped (at byte 7)"},
      {R"({"a":"a\xb"})",
       "the body is not valid UTF-8 JSON: invalid escape character in string (at byte 7)"},
      {std::string("{\"a\":1} \0x", 10),
       "the body is not valid UTF-8 JSON: the document root must not be followed by other values "
       "(at byte 8)"},
  };
  for (const auto& [body, detail] : cases) {
    CAPTURE(body);
    Response r = api.post("/v1/webhook", body);
    check_problem(r, 400, "invalid_json");
    CHECK(str(json(r), "detail") == detail);
  }
  CHECK(total(api, kWebhook) == 0);
}

TEST_CASE("bodies and errors stay UTF-8 and errors stay small") {
  Server server;
  Api api(server, kTeamA);
  auto valid_utf8 = [](const std::string& s) { return client_text(s, s.size() + 3) == s; };
  for (const std::string escape : {"\\udc00", "\\uDFFF", "a\\udc00", "\\ud800\\u0041"}) {
    CAPTURE(escape);
    std::string body = webhook_body(kTeamA, "w");
    body.replace(body.find("\"w\""), 3, "\"" + escape + "\"");
    check_problem(api.post("/v1/webhook", body), 400, "invalid_json");
  }
  // A paired surrogate escape is a character like any other.
  std::string paired = webhook_body(kTeamA, "w");
  paired.replace(paired.find("\"w\""), 3, "\"\\ud83d\\ude00\"");
  Response created = api.post("/v1/webhook", paired);
  CHECK(created.status == 201);
  CHECK(created.body.find("\xF0\x9F\x98\x80") != std::string::npos);

  // An unknown member named with 100000 bytes: the error names it, cut short.
  std::string body = webhook_body(kTeamA, "w2");
  body.insert(1, "\"" + std::string(100000, 'n') + "\":1,");
  Response r = api.post("/v1/webhook", body);
  check_problem(r, 422, "validation_failed");
  CHECK(r.body.size() < 2000);
  Response path = api.get("/v1/nope%ff%c3");
  check_problem(path, 404, "not_found");
  CHECK(valid_utf8(path.body));
}

TEST_CASE("waf_overrides numbers keep their value") {
  Server server;
  Api api(server, kTeamA);
  std::string body = profile_body(kTeamA, "numbers.example.com");
  body.pop_back();
  body += R"(,"waf_overrides":{"big":100000000000000000000000,"long":)"
          R"(123456789012345678901234567890}})";
  Response r = api.post("/v1/gateway_security_profile", body);
  REQUIRE(r.status == 201);
  auto doc = json(r);
  const auto& overrides = field(doc, "waf_overrides");
  CHECK(field(overrides, "big").GetDouble() == 1e23);
  CHECK(field(overrides, "long").GetDouble() == 1.2345678901234568e29);
}

// RapidJSON's full-precision parse read out of bounds on a fraction with leading zeros (a
// segmentation fault of gatewayd, from one request of any tenant) and passed zero to clz on a
// zero with an exponent (0e100 read back as -1.997919072202235e146).
TEST_CASE("numbers with leading fraction zeros or a zero with an exponent keep their value") {
  Server server;
  Api api(server, kTeamA);
  std::string body = profile_body(kTeamA, "zeros.example.com");
  body.pop_back();
  body += R"(,"waf_overrides":{"tiny":0.)" + std::string(400, '0') +
          R"(1,"small":0.00000000000000000000001,"digits":0.012345678901234567890,)"
          R"("zero":0e100,"negative_zero":-0.0e-30}})";
  Response r = api.post("/v1/gateway_security_profile", body);
  INFO(r.body);
  REQUIRE(r.status == 201);
  rapidjson::Document doc;  // read back at full precision too, to compare with exact literals
  doc.Parse<rapidjson::kParseFullPrecisionFlag>(r.body.c_str(), r.body.size());
  REQUIRE_FALSE(doc.HasParseError());
  const auto& overrides = field(doc, "waf_overrides");
  CHECK(field(overrides, "tiny").GetDouble() == 0.0);  // below the smallest double
  CHECK(field(overrides, "small").GetDouble() == 1e-23);
  CHECK(field(overrides, "digits").GetDouble() == 0.012345678901234568);
  CHECK(field(overrides, "zero").GetDouble() == 0.0);
  CHECK(field(overrides, "negative_zero").GetDouble() == 0.0);
  CHECK(std::signbit(field(overrides, "negative_zero").GetDouble()));
  CHECK(api.get("/healthz").status == 200);
}

// Found by fuzzing: such a number followed by text that makes the body invalid (`-`, `+`, `.`)
// was not rewritten, and the parser read out of bounds working out its value before it refused
// the body: one request of any tenant crashed gatewayd.
TEST_CASE("an invalid body with such a number at the front of a bad token is a 400") {
  Server server;
  Api api(server, kTeamA);
  for (const std::string& bad : {"0." + std::string(400, '0') + "1-", std::string("0e100-"),
                                 "9." + std::string(800, '0') + "1+"}) {
    std::string body = profile_body(kTeamA, "bad.example.com");
    body.pop_back();
    body += R"(,"waf_overrides":{"a":)" + bad + "}}";
    check_problem(api.post("/v1/gateway_security_profile", body), 400, "invalid_json");
  }
  CHECK(api.get("/healthz").status == 200);
}

}  // namespace
}  // namespace gw::itest::errors_test
