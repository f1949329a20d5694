// Encode/decode round trips of every record kind, and upcasting of schema 1 domains.
#include <doctest/doctest.h>

#include <rapidjson/document.h>

#include "commands/records.h"

namespace gw {
namespace {

Record parse_back(Kind kind, const std::string& json, int schema = 2) {
  rapidjson::Document doc;
  doc.Parse(json.c_str());
  REQUIRE_FALSE(doc.HasParseError());
  auto r = record_from_json(kind, doc, schema);
  REQUIRE(r.ok());
  return r.value();
}

TEST_CASE("every record kind survives to_json and back unchanged") {
  Profile p;
  p.meta = Meta{"gsp_1", "team_a", 1, 2, 0};
  p.hostname = "shop.example.com";
  p.enabled = false;
  p.cors_origins = "https://a.example.com";
  p.max_body_bytes = 1024;
  p.geo_policy = R"({"mode":"allow","countries":["US","DE"]})";
  p.waf_template = "custom";
  p.waf_custom_directives = "SecRule ARGS \"@rx x\" \"id:1,deny\"";
  p.waf_overrides = R"({"a":{"b":[1,2]}})";
  p.waf_rule_exclusions = R"([{"path_prefix":"/x","remove_rule_ids":[1]}])";
  Domain d;
  d.meta = Meta{"dom_1", "team_a", 1, 2, 3};
  d.hostname = "example.com";
  d.scope = "subtree";
  d.status = "verified";
  d.verified_at = 9;
  d.verification_parent_id = "dom_0";
  Webhook h;
  h.meta = Meta{"whk_1", "team_a", 1, 2, 0};
  h.workload_id = "wl";
  h.provider = "gitlab";
  h.status = "inactive";
  h.external_id = "42";
  for (const Record& r : {Record{p}, Record{d}, Record{h}}) {
    std::string json = to_json(r);
    CAPTURE(json);
    Record back = parse_back(kind_of(r), json);
    CHECK(back == r);
    CHECK(to_json(back) == json);  // byte-identical: the hash chain depends on it
  }
}

TEST_CASE("JSON-typed profile fields are null when unset") {
  Profile p;
  p.meta = Meta{"gsp_1", "team_a", 1, 1, 0};
  p.hostname = "a.example.com";
  std::string json = to_json(p);
  CHECK(json.find(R"("geo_policy":null)") != std::string::npos);
  CHECK(json.find(R"("waf_overrides":null)") != std::string::npos);
  CHECK(json.find(R"("waf_rule_exclusions":null)") != std::string::npos);
  CHECK(json.rfind(R"({"profile_id":"gsp_1","team_id":"team_a",)", 0) == 0);
}

TEST_CASE("schema 1 domains, written before scope existed, replay as subtree") {
  const char* v1 =
      R"({"domain_id":"dom_1","team_id":"t","hostname":"shop.example.com","redirect_to":"",)"
      R"("status":"pending","verification_hostname":"_gateway-verify.shop.example.com",)"
      R"("verification_value":"v","verification_parent_id":"","verified_at":0,"workload_id":"",)"
      R"("created_at":1,"updated_at":1,"deleted_at":0})";
  auto d = std::get<Domain>(parse_back(Kind::kDomain, v1, 1));
  CHECK(d.scope == "subtree");
  CHECK(d.verification_error.empty());
  rapidjson::Document doc;
  doc.Parse(v1);
  CHECK_FALSE(record_from_json(Kind::kDomain, doc, 2).ok());  // schema 2 must carry scope
}

TEST_CASE("ids: kind by prefix") {
  CHECK(kind_of_id("gsp_01ABC") == Kind::kProfile);
  CHECK(kind_of_id("dom_01ABC") == Kind::kDomain);
  CHECK(kind_of_id("whk_01ABC") == Kind::kWebhook);
  CHECK_FALSE(kind_of_id("dom_").has_value());
  CHECK_FALSE(kind_of_id("xyz_1").has_value());
  CHECK_FALSE(kind_of_id("dom1").has_value());
  CHECK_FALSE(kind_of_id(std::string_view("dom_1\0", 6)).has_value());  // NUL: the keys' separator
}

TEST_CASE("ids: the form gatewayd makes") {
  const std::string ulid = "01ARZ3NDEKTSV4RRFFQ69G5FAV";
  CHECK(is_record_id(Kind::kProfile, "gsp_" + ulid));
  CHECK(is_record_id(Kind::kDomain, "dom_" + ulid));
  CHECK(is_record_id(Kind::kWebhook, "whk_" + ulid));
  CHECK(is_record_id(Kind::kWebhook, "whk_" + std::string(26, 'Z')));
  CHECK_FALSE(is_record_id(Kind::kDomain, "gsp_" + ulid));        // another kind's
  CHECK_FALSE(is_record_id(Kind::kDomain, "dom_" + ulid + "0"));  // too long
  CHECK_FALSE(is_record_id(Kind::kDomain, "dom_" + ulid.substr(1)));
  CHECK_FALSE(is_record_id(Kind::kDomain, "dom-" + ulid));
  for (char c : {'I', 'L', 'O', 'U', 'a', '\0', '/', '_'}) {
    std::string id = "dom_" + ulid;
    id[10] = c;
    CAPTURE(static_cast<int>(c));
    CHECK_FALSE(is_record_id(Kind::kDomain, id));
  }
}

}  // namespace
}  // namespace gw
