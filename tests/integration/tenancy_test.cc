// Tenancy isolation: one team never sees, changes or learns of another team's records.
#include "integration/fixture.h"

namespace gw::itest::tenancy_test {
namespace {

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
