// Tenancy isolation: one team never sees, changes or learns of another team's records.
#include "integration/fixture.h"

namespace gw::itest::tenancy_test {
namespace {

using testing::json_with;
using testing::num;
using testing::str;
using testing::url_escape;

TEST_CASE("team B sees nothing of team A and gets 404 on A's ids") {
  Server server;
  Api a(server, kTeamA);
  Api b(server, kTeamB);
  for (const Kind* kind : kKinds) {
    CAPTURE(kind->name);
    Response created = a.post(std::string(kind->path), kind->body(kTeamA, 1));
    REQUIRE(created.status == 201);
    std::string id = str(json(created), kind->id_field);
    std::string path = item_path(*kind, id);

    Response list = b.get(std::string(kind->path));
    REQUIRE(list.status == 200);
    rapidjson::Document l = json(list);
    CHECK(length(field(l, "data")) == 0);
    CHECK(num(field(l, "pagination"), "total") == 0);

    check_problem(b.get(path), 404, "not_found");
    check_problem(b.put(path, kind->body(kTeamB, 1)), 404, "not_found");
    check_problem(b.put(path, kind->body(kTeamB, 1), {{"If-Match", "*"}}), 404, "not_found");
    check_problem(b.del(path), 404, "not_found");
    check_problem(b.get(path + "/history"), 404, "not_found");
    if (kind == &kDomain) check_problem(verify(b, id), 404, "not_found");

    // The 404 for another team's id is the same as for an id that never existed.
    Response unknown = b.get(item_path(*kind, std::string(kind->id_prefix) + "0000000000000000"));
    check_problem(unknown, 404, "not_found");
    CHECK(testing::str(json(unknown), "title") == testing::str(json(b.get(path)), "title"));

    Response still = a.get(path);
    CHECK(still.status == 200);
    CHECK(json(still) == json(created));
    CHECK(still.header("ETag") == created.header("ETag"));
  }
  Response filtered = b.get("/v1/domain?hostname=" + url_escape("d1.domains.example.com"));
  REQUIRE(filtered.status == 200);
  CHECK(num(field(json(filtered), "pagination"), "total") == 0);

  Response b_events = b.get("/v1/events?after=0");
  REQUIRE(b_events.status == 200);
  CHECK(length(field(json(b_events), "data")) == 0);
}

// The store keys a record by NUL + its id and its history by NUL + id + NUL + 8-byte version, so
// an id ending "%00" + a version reached a history entry: a PUT, DELETE or verify of "ID%00"
// answered 500, and a GET of "ID%00<version>" answered 500 when ID had that version, for any
// team, telling another team that ID existed and how far it had got. An id of any form gatewayd
// does not make now names no record: 404 before the store is read, for the owner too.
TEST_CASE(
    "an id holding %00 or of another form names no record, for any team, and changes nothing") {
  Server server;
  Api a(server, kTeamA);
  Api b(server, kTeamB);
  for (const Kind* kind : kKinds) {
    CAPTURE(kind->name);
    const std::string id = create(a, *kind, 1);
    REQUIRE_FALSE(id.empty());
    const std::string path = item_path(*kind, id);
    REQUIRE(
        a.put(path, json_with(kind->body(kTeamA, 1), kind->edit_field, kind->edit_value)).status ==
        200);
    const std::string before = a.get(path).body;
    const std::vector<std::string> events_before = all_events(a);
    const std::string seq = std::to_string(events_before.size());

    const std::string nul = "%00";
    std::vector<std::string> ids = {
        id + nul,
        id + nul + "%00%00%00%00%00%00%00%01",  // NUL + version 1: its first history entry
        id + nul + "%00%00%00%00%00%00%00%02",  // its second
        id + nul + "%00%00%00%00%00%00%00%03",  // one it does not have
        std::string(kind->id_prefix) + nul,
        id.substr(0, id.size() - 1),                          // one character short
        id + "0",                                             // one too many
        std::string(kind->id_prefix) + std::string(26, 'U'),  // not in Crockford's alphabet
        std::string(kind->id_prefix) + std::string(26, 'a'),  // lower case
    };
    for (Api* api : {&a, &b}) {
      for (const std::string& bad : ids) {
        CAPTURE(bad);
        const std::string p = std::string(kind->path) + "/" + bad;
        check_problem(api->get(p), 404, "not_found");
        check_problem(api->get(p + "?as_of=" + seq), 404, "not_found");
        check_problem(api->get(p + "/history"), 404, "not_found");
        check_problem(api->put(p, kind->body(kTeamA, 2)), 404, "not_found");
        check_problem(api->put(p, kind->body(kTeamA, 2), {{"If-Match", "*"}}), 404, "not_found");
        check_problem(api->del(p), 404, "not_found");
        check_problem(api->del(p, {{"If-Match", "\"1\""}}), 404, "not_found");
        if (kind == &kDomain) check_problem(api->post(p + "/verify", ""), 404, "not_found");
      }
    }
    CHECK(a.get(path).body == before);
    CHECK(all_events(a) == events_before);
    CHECK(all_events(b).empty());
  }
}

TEST_CASE("each team's list holds exactly its own records") {
  Server server;
  Api a(server, kTeamA);
  Api b(server, kTeamB);
  for (const Kind* kind : kKinds) {
    CAPTURE(kind->name);
    for (int i = 0; i < 3; ++i) create(a, *kind, i);
    for (int i = 10; i < 12; ++i) create(b, *kind, i);
    for (Api* api : {&a, &b}) {
      rapidjson::Document l = json(api->get(std::string(kind->path)));
      CHECK(num(field(l, "pagination"), "total") == (api == &a ? 3 : 2));
      for (const rapidjson::Value* item : items(field(l, "data")))
        CHECK(str(*item, "team_id") == api->team());
    }
  }
}

}  // namespace
}  // namespace gw::itest::tenancy_test
