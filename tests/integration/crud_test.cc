// Create, get, update, delete for all three kinds: ETags, If-Match, soft delete.
#include <utility>

#include "integration/fixture.h"

namespace gw::itest::crud_test {
namespace {

using testing::json_with;
using testing::num;
using testing::str;
using testing::to_json;

bool is_quoted_etag(const std::string& etag) {
  return etag.size() >= 2 && etag.front() == '"' && etag.back() == '"';
}

TEST_CASE("create, get, put, delete work for every kind and carry ETags") {
  Server server;
  Api api(server, kTeamA);
  for (const Kind* kind : kKinds) {
    CAPTURE(kind->name);
    Response created = api.post(std::string(kind->path), kind->body(kTeamA, 1));
    INFO("create: ", created.status, " ", created.body);
    REQUIRE(created.status == 201);
    CHECK(created.header("Content-Type").value_or("").starts_with("application/json"));
    std::string etag = created.header("ETag").value_or("");
    CHECK(is_quoted_etag(etag));
    rapidjson::Document body = json(created);
    REQUIRE(body.IsObject());
    std::string id = str(body, kind->id_field);
    CHECK(id.starts_with(kind->id_prefix));
    CHECK(id.size() > kind->id_prefix.size());
    CHECK(str(body, "team_id") == kTeamA);
    CHECK(num(body, "created_at") >= unix_now() - 300);
    CHECK(num(body, "created_at") <= unix_now() + 5);
    CHECK(num(body, "updated_at") == num(body, "created_at"));
    CHECK(num(body, "deleted_at") == 0);

    Response got = api.get(item_path(*kind, id));
    REQUIRE(got.status == 200);
    CHECK(got.header("Content-Type").value_or("").starts_with("application/json"));
    CHECK(json(got) == body);
    CHECK(got.header("ETag").value_or("") == etag);

    std::string edited = json_with(kind->body(kTeamA, 1), kind->edit_field, kind->edit_value);
    Response updated = api.put(item_path(*kind, id), edited);
    INFO("put: ", updated.status, " ", updated.body);
    REQUIRE(updated.status == 200);
    rapidjson::Document after = json(updated);
    CHECK(to_json(field(after, kind->edit_field)) == kind->edit_value);
    CHECK(str(after, kind->id_field) == id);
    CHECK(num(after, "created_at") == num(body, "created_at"));
    CHECK(num(after, "updated_at") >= num(body, "updated_at"));
    std::string new_etag = updated.header("ETag").value_or("");
    CHECK(is_quoted_etag(new_etag));
    CHECK(new_etag != etag);
    Response reread = api.get(item_path(*kind, id));
    CHECK(json(reread) == after);
    CHECK(reread.header("ETag").value_or("") == new_etag);

    Response deleted = api.del(item_path(*kind, id));
    INFO("delete: ", deleted.status, " ", deleted.body);
    CHECK(deleted.status == 200);
    CHECK(deleted.header("Content-Type").value_or("").starts_with("application/json"));
    rapidjson::Document msg = json(deleted);
    REQUIRE(msg.IsObject());
    CHECK_FALSE(str(msg, "message").empty());
  }
}

// GET reads records through a cache (--read-cache-mb, projections/read_cache.h); a write drops
// what it holds of the record before the writer answers.
TEST_CASE("GET serves repeated reads from the read cache and shows every acknowledged write") {
  for (std::string mb : {"64", "0"}) {
    CAPTURE(mb);
    Server server({"--read-cache-mb", mb});
    Api api(server, kTeamA);
    const std::string id = create(api, kWebhook, 1);
    const std::string path = item_path(kWebhook, id);
    for (int n = 2; n <= 6; ++n) {
      Response before = api.get(path);
      REQUIRE(before.status == 200);
      CHECK(api.get(path).body == before.body);
      std::string workload = "\"w-" + std::to_string(n) + "\"";
      Response put = api.put(path, json_with(kWebhook.body(kTeamA, 1), "workload_id", workload));
      REQUIRE(put.status == 200);
      Response after = api.get(path);
      REQUIRE(after.status == 200);
      CHECK(after.body == put.body);
      CHECK(after.header("ETag") == put.header("ETag"));
      CHECK(to_json(field(json(after), "workload_id")) == workload);
    }
    // Another team's read of it is 404 whether or not the record is cached.
    CHECK(Api(server, kTeamB).get(path).status == 404);
    REQUIRE(api.del(path).status == 200);
    CHECK(api.get(path).status == 404);

    const std::string text = metrics(server);
    if (mb == "0") {
      CHECK_FALSE(sample(text, "gatewayd_read_cache_hits_total"));
    } else {
      // Misses: the first GET (a create does not fill the cache), the GET after each of the
      // five updates, team_b's (the cache answers only the record's own team) and the one after
      // the delete. Hits: every other GET.
      CHECK(sample(text, "gatewayd_read_cache_misses_total") == 8.0);
      CHECK(sample(text, "gatewayd_read_cache_hits_total") == 9.0);
      CHECK(sample(text, "gatewayd_read_cache_entries").has_value());
      CHECK(sample(text, "gatewayd_read_cache_bytes").has_value());
    }
  }
}

// /metrics needs no token. Its read cache samples moved when another team read a record (a miss
// that filled the cache, then hits), and not for a made-up id: another team's ids, deleted ones
// too, could be told from made-up ones, and the size of the record read off the bytes.
TEST_CASE("another team's GETs move the read cache's metrics as GETs of made-up ids do") {
  Server server;
  Api a(server, kTeamA);
  Api b(server, kTeamB);
  const std::string cached = item_path(kWebhook, create(a, kWebhook, 1));
  const std::string unread = item_path(kWebhook, create(a, kWebhook, 2));
  const std::string deleted = item_path(kWebhook, create(a, kWebhook, 3));
  REQUIRE(a.get(cached).status == 200);
  REQUIRE(a.get(deleted).status == 200);
  REQUIRE(a.del(deleted).status == 200);
  REQUIRE(a.get(deleted).status == 404);  // cached as deleted
  const std::string made_up = item_path(kWebhook, "whk_01KZZZZZZZZZZZZZZZZZZZZZZZ");
  // The samples' changes over two GETs of `path` by team_b.
  auto moved = [&](const std::string& path) {
    const std::string before = metrics(server);
    CHECK(b.get(path).status == 404);
    CHECK(b.get(path).status == 404);
    const std::string after = metrics(server);
    std::string out;
    for (const char* name : {"hits_total", "misses_total", "entries", "bytes"}) {
      const std::string series = std::string("gatewayd_read_cache_") + name;
      out +=
          std::string(name) + " +" +
          std::to_string(static_cast<int64_t>(*sample(after, series) - *sample(before, series))) +
          " ";
    }
    return out;
  };
  const std::string want = moved(made_up);
  CHECK(want == "hits_total +0 misses_total +2 entries +0 bytes +0 ");
  for (const std::string& path : {cached, unread, deleted}) {
    CAPTURE(path);
    CHECK(moved(path) == want);
  }
  // The owner still reads through the cache.
  CHECK(moved(made_up) == want);
  const std::string before = metrics(server);
  REQUIRE(a.get(cached).status == 200);
  CHECK(*sample(metrics(server), "gatewayd_read_cache_hits_total") ==
        *sample(before, "gatewayd_read_cache_hits_total") + 1);
}

TEST_CASE("a deleted record is gone: GET, PUT, verify and a second DELETE are 404") {
  Server server;
  Api api(server, kTeamA);
  for (const Kind* kind : kKinds) {
    CAPTURE(kind->name);
    std::string keep = create(api, *kind, 1);
    std::string id = create(api, *kind, 2);
    REQUIRE(api.del(item_path(*kind, id)).status == 200);
    check_problem(api.get(item_path(*kind, id)), 404, "not_found");
    check_problem(api.del(item_path(*kind, id)), 404, "not_found");
    check_problem(api.put(item_path(*kind, id), kind->body(kTeamA, 2)), 404, "not_found");
    check_problem(api.put(item_path(*kind, id), kind->body(kTeamA, 2), {{"If-Match", "*"}}), 404,
                  "not_found");
    if (kind == &kDomain) {
      check_problem(verify(api, id), 404, "not_found");
    }
    Response list = api.get(std::string(kind->path));
    REQUIRE(list.status == 200);
    rapidjson::Document l = json(list);
    CHECK(num(field(l, "pagination"), "total") == 1);
    REQUIRE(length(field(l, "data")) == 1);
    CHECK(str(at(field(l, "data"), 0), kind->id_field) == keep);
  }
}

// A new record of `kind` (create body 1): its item path and the ETag of its first version.
std::pair<std::string, std::string> create_versioned(Api& api, const Kind& kind) {
  Response created = api.post(std::string(kind.path), kind.body(kTeamA, 1));
  REQUIRE(created.status == 201);
  return {item_path(kind, str(json(created), kind.id_field)), created.header("ETag").value_or("")};
}

TEST_CASE("If-Match: the current ETag or * succeeds, a stale one is 412 and changes nothing") {
  Server server;
  Api api(server, kTeamA);
  for (const Kind* kind : kKinds) {
    CAPTURE(kind->name);
    const auto [path, v1] = create_versioned(api, *kind);
    std::string body = kind->body(kTeamA, 1);
    std::string edited = json_with(body, kind->edit_field, kind->edit_value);

    Response ok = api.put(path, edited, {{"If-Match", v1}});
    INFO("If-Match current: ", ok.status, " ", ok.body);
    REQUIRE(ok.status == 200);
    std::string v2 = ok.header("ETag").value_or("");
    CHECK(v2 != v1);

    Response stale = api.put(path, body, {{"If-Match", v1}});
    check_problem(stale, 412, "precondition_failed");
    Response unchanged = api.get(path);
    CHECK(json(unchanged) == json(ok));
    CHECK(unchanged.header("ETag").value_or("") == v2);

    check_problem(api.put(path, body, {{"If-Match", "\"no-such-etag\""}}), 412,
                  "precondition_failed");

    Response any = api.put(path, body, {{"If-Match", "*"}});
    CHECK(any.status == 200);
    Response listed =
        api.put(path, edited, {{"If-Match", "\"bogus\", " + any.header("ETag").value_or("")}});
    CHECK(listed.status == 200);
    // If-Match is a list: its lines are read as one (before: only the first line counted).
    const std::string now = listed.header("ETag").value_or("");
    Response lines = api.put(path, body, {{"If-Match", "\"bogus\""}, {"If-Match", now}});
    CHECK(lines.status == 200);
    check_problem(api.put(path, body, {{"If-Match", now}, {"If-Match", "*"}}), 412,
                  "precondition_failed");
  }
}

// `*` in a list, or a tag among words, was read as `*` or as the tag (200, the record replaced).
TEST_CASE("If-Match that is neither * alone nor a list of tags is 412 and changes nothing") {
  Server server;
  Api api(server, kTeamA);
  for (const Kind* kind : kKinds) {
    CAPTURE(kind->name);
    const auto [path, v1] = create_versioned(api, *kind);
    const std::string edited = json_with(kind->body(kTeamA, 1), kind->edit_field, kind->edit_value);
    for (const std::string& header : {"*, " + v1, v1 + ", *", "foo, " + v1, v1 + " bar"}) {
      CAPTURE(header);
      Response refused = api.put(path, edited, {{"If-Match", header}});
      check_problem(refused, 412, "precondition_failed");
      CHECK(str(json(refused), "detail").find("* alone or a list of quoted entity tags") !=
            std::string::npos);
      check_problem(api.del(path, {{"If-Match", header}}), 412, "precondition_failed");
    }
    Response now = api.get(path);
    REQUIRE(now.status == 200);
    CHECK(now.header("ETag").value_or("") == v1);
    CHECK(api.get(path + "/history").body.find(".updated") == std::string::npos);
  }
}

// DELETE and verify ignored If-Match: a stale one deleted the record (200) or opened a request.
TEST_CASE("If-Match on DELETE and verify: a stale one is 412 and changes nothing") {
  Server server;
  Api api(server, kTeamA);
  for (const Kind* kind : kKinds) {
    CAPTURE(kind->name);
    const auto [path, v1] = create_versioned(api, *kind);
    Response edited =
        api.put(path, json_with(kind->body(kTeamA, 1), kind->edit_field, kind->edit_value));
    REQUIRE(edited.status == 200);
    check_problem(api.del(path, {{"If-Match", v1}}), 412, "precondition_failed");
    CHECK(api.get(path).status == 200);
    if (kind->name == std::string_view("domain")) {
      check_problem(api.post(path + "/verify", "", {{"If-Match", v1}}), 412, "precondition_failed");
      CHECK(api.get(path + "/history").body.find("verification_requested") == std::string::npos);
    }
    CHECK(api.del(path, {{"If-Match", edited.header("ETag").value_or("")}}).status == 200);
    CHECK(api.get(path).status == 404);
  }
}

// If-None-Match was not read: a GET with the current ETag got the whole record again (200), and
// `If-None-Match: *` on a PUT, meant as "only if it does not exist yet", replaced the record.
TEST_CASE("If-None-Match: a GET of the current ETag is 304, a write it matches is 412") {
  Server server;
  Api api(server, kTeamA);
  for (const Kind* kind : kKinds) {
    CAPTURE(kind->name);
    const auto [path, v1] = create_versioned(api, *kind);
    Response full = api.get(path);
    REQUIRE(full.status == 200);
    // 304: the ETag, no body, the 200's Content-Length (RFC 9110 8.6); weak tags match too.
    for (const std::string& tag : {v1, "W/" + v1, "\"bogus\", " + v1, std::string("*")}) {
      CAPTURE(tag);
      Response same = api.get(path, {{"If-None-Match", tag}});
      CHECK(same.status == 304);
      CHECK(same.body.empty());
      CHECK(same.header("ETag") == v1);
      CHECK(same.header("Content-Length") == std::to_string(full.body.size()));
      CHECK_FALSE(same.header("Content-Type").has_value());
    }
    // The connection goes on after a 304 without a body: the next answer reads whole.
    Response after = api.get(path, {{"If-None-Match", "\"bogus\""}});
    CHECK(after.status == 200);
    CHECK(after.body == full.body);
    CHECK(after.new_connections == 0);
    check_problem(api.get(path, {{"If-None-Match", v1 + " x"}}), 412, "precondition_failed");

    const std::string edited = json_with(kind->body(kTeamA, 1), kind->edit_field, kind->edit_value);
    for (const std::string& tag : {std::string("*"), v1, "W/" + v1}) {
      CAPTURE(tag);
      Response refused = api.put(path, edited, {{"If-None-Match", tag}});
      check_problem(refused, 412, "precondition_failed");
      CHECK(str(json(refused), "detail").find("If-None-Match matches the current ETag " + v1) !=
            std::string::npos);
      check_problem(api.del(path, {{"If-None-Match", tag}}), 412, "precondition_failed");
    }
    CHECK(api.get(path).header("ETag") == v1);
    CHECK(api.get(path + "/history").body.find(".updated") == std::string::npos);
    if (kind->name == std::string_view("domain")) {
      check_problem(api.post(path + "/verify", "", {{"If-None-Match", "*"}}), 412,
                    "precondition_failed");
      CHECK(api.get(path + "/history").body.find("verification_requested") == std::string::npos);
    }
    // A tag of another version does not match: the write goes through, and a GET of the old
    // tag gets the new record.
    Response put = api.put(path, edited, {{"If-None-Match", "\"99\""}});
    REQUIRE(put.status == 200);
    Response changed = api.get(path, {{"If-None-Match", v1}});
    CHECK(changed.status == 200);
    CHECK(changed.header("ETag") == put.header("ETag"));
    // ?as_of compares with the ETag the record had then.
    const auto history = json(api.get(path + "/history"));
    const std::string created = std::to_string(num(at(field(history, "data"), 0), "seq"));
    CHECK(api.get(path + "?as_of=" + created, {{"If-None-Match", v1}}).status == 304);
  }
}

// A GET of one record served it whatever If-Match said, a malformed one too (helper 158), though
// RFC 9110 13.1.1 has every method evaluate it first.
TEST_CASE(
    "If-Match on a GET of one record: no match is 412, and it is checked before If-None-Match") {
  Server server;
  Api api(server, kTeamA);
  for (const Kind* kind : kKinds) {
    CAPTURE(kind->name);
    const auto [path, v1] = create_versioned(api, *kind);
    const std::string body = api.get(path).body;
    for (const std::string& tag : {v1, "\"9\", " + v1, std::string("*")}) {
      CAPTURE(tag);
      Response got = api.get(path, {{"If-Match", tag}});
      CHECK(got.status == 200);
      CHECK(got.body == body);
    }
    for (const std::string& tag : {std::string("\"9\""), "W/" + v1}) {
      CAPTURE(tag);
      Response refused = api.get(path, {{"If-Match", tag}});
      check_problem(refused, 412, "precondition_failed");
      CHECK(str(json(refused), "detail") == "If-Match does not match the current ETag " + v1);
      CHECK(api.send("HEAD", path, {{"If-Match", tag}}).status == 412);
    }
    check_problem(api.get(path, {{"If-Match", "garbage"}}), 412, "precondition_failed");
    // Both must hold: a failed If-Match is 412 even where If-None-Match would be 304.
    check_problem(api.get(path, {{"If-Match", "\"9\""}, {"If-None-Match", v1}}), 412,
                  "precondition_failed");
    CHECK(api.get(path, {{"If-Match", v1}, {"If-None-Match", v1}}).status == 304);
    // ?as_of compares with the ETag the record had then.
    const std::string edited = json_with(kind->body(kTeamA, 1), kind->edit_field, kind->edit_value);
    REQUIRE(api.put(path, edited).status == 200);
    const auto history = json(api.get(path + "/history"));
    const std::string created = std::to_string(num(at(field(history, "data"), 0), "seq"));
    CHECK(api.get(path + "?as_of=" + created, {{"If-Match", v1}}).status == 200);
    Response then = api.get(path + "?as_of=" + created, {{"If-Match", "\"2\""}});
    check_problem(then, 412, "precondition_failed");
    CHECK(str(json(then), "detail") == "If-Match does not match the ETag " + v1);
  }
}

// HEAD was 405 on every path, although every general-purpose server serves GET and HEAD (RFC 9110
// 9.1): a client asking whether a record exists, or for its ETag, had to read the whole of it.
TEST_CASE("HEAD on every GET path is that GET's answer without its body") {
  Server server;
  Api api(server, kTeamA);
  Api other(server, kTeamB);
  std::vector<std::string> paths = {"/healthz", "/readyz", "/openapi.json", "/v1/events"};
  std::string a_domain;
  for (const Kind* kind : kKinds) {
    const std::string id = create(api, *kind, 1);
    if (kind->name == std::string_view("domain")) a_domain = item_path(*kind, id);
    for (const std::string& p : {std::string(kind->path), std::string(kind->path) + "?per_page=1",
                                 item_path(*kind, id), item_path(*kind, id) + "/history"}) {
      paths.push_back(p);
    }
  }
  const size_t events = all_events(api).size();
  for (const std::string& path : paths) {
    CAPTURE(path);
    Response full = api.get(path);
    REQUIRE(full.status == 200);
    Response head = api.send("HEAD", path, {});
    CHECK(head.status == 200);
    CHECK(head.body.empty());
    CHECK(head.header("Content-Length") == std::to_string(full.body.size()));
    CHECK(head.header("Content-Type") == full.header("Content-Type"));
    CHECK(head.header("ETag") == full.header("ETag"));
    // The connection goes on: no body came that the next answer would be read from.
    CHECK(head.new_connections == 0);
    CHECK(api.get(path).body == full.body);
  }
  // Preconditions, refusals and another team's record answer as GET does, without a body.
  Response conditional =
      api.send("HEAD", a_domain, {{"If-None-Match", api.get(a_domain).header("ETag").value()}});
  CHECK(conditional.status == 304);
  CHECK(conditional.body.empty());
  Response hidden = other.send("HEAD", a_domain, {});
  CHECK(hidden.status == 404);
  CHECK(hidden.body.empty());
  CHECK(hidden.header("Content-Type").value_or("").starts_with("application/problem+json"));
  CHECK(api.send("HEAD", "/v1/domain?foo=bar", {}).status == 400);
  CHECK(api.send("HEAD", "/v1/domain/dom_nope", {}).status == 404);
  CHECK(api.send("HEAD", "/v1/nothing", {}).status == 404);
  // Verify has no GET, so no HEAD either.
  Response verify = api.send("HEAD", a_domain + "/verify", {});
  CHECK(verify.status == 405);
  CHECK(verify.header("Allow") == "POST");
  CHECK(all_events(api).size() == events);
  // Counted under the GET's route: the only 304 of a domain's get was the HEAD's.
  CHECK(sample(metrics(server),
               R"(gatewayd_http_requests_total{route="get",kind="domain",status="304"})") == 1);
}

TEST_CASE("response-only fields in a body are ignored, so GET-edit-PUT round trips") {
  Server server;
  Api api(server, kTeamA);
  for (const Kind* kind : kKinds) {
    CAPTURE(kind->name);
    std::string id = create(api, *kind, 1);
    Response got = api.get(item_path(*kind, id));
    REQUIRE(got.status == 200);
    std::string edited = json_with(got.body, kind->edit_field, kind->edit_value);
    edited = json_with(edited, "created_at", "1");
    edited = json_with(edited, "updated_at", "2");
    edited = json_with(edited, "deleted_at", "3");
    edited = json_with(edited, kind->id_field, R"("forged_id")");
    Response put = api.put(item_path(*kind, id), edited);
    INFO("put: ", put.status, " ", put.body);
    REQUIRE(put.status == 200);
    rapidjson::Document after = json(put);
    CHECK(str(after, kind->id_field) == id);
    CHECK(num(after, "created_at") == num(json(got), "created_at"));
    CHECK(num(after, "deleted_at") == 0);
    CHECK(to_json(field(after, kind->edit_field)) == kind->edit_value);
    Response created =
        api.post(std::string(kind->path), json_with(kind->body(kTeamA, 2), "created_at", "7"));
    CHECK(created.status == 201);
    CHECK(num(json(created), "created_at") != 7);
  }
}

}  // namespace
}  // namespace gw::itest::crud_test
