// Table tests of request body parsing: required fields, types, unknown fields, defaults, and that
// every problem is reported at once.
#include <doctest/doctest.h>

#include <rapidjson/document.h>

#include <map>
#include <string>
#include <vector>

#include "commands/parse.h"

namespace gw {
namespace {

Result<Spec> parse(Kind kind, const char* json) {
  rapidjson::Document doc;
  doc.Parse(json);
  REQUIRE_FALSE(doc.HasParseError());
  return parse_spec(kind, Mode::kCreate, doc, FieldPolicy{});
}

// Field names of the errors, joined: "a,b,c".
std::string fields_of(const Result<Spec>& r) {
  std::string out;
  for (const auto& e : r.error().errors) out += (out.empty() ? "" : ",") + e.field;
  return out;
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
  return out;
}

constexpr const char* kProfile =
    R"({"team_id":"team_a","hostname":"Shop.Example.COM.","enabled":true,"force_https":true,)"
    R"("hsts_enabled":true,"cors_enabled":false,"waf_mode":"monitor","waf_template":"nextjs"})";

TEST_CASE("a minimal profile parses, hostname normalized, defaults applied") {
  auto r = parse(Kind::kProfile, kProfile);
  REQUIRE(r.ok());
  const auto& p = std::get<Profile>(r.value());
  CHECK(p.hostname == "shop.example.com");
  CHECK(p.max_body_bytes == 0);
  CHECK(p.geo_policy.empty());
  CHECK(p.cors_enabled == false);
}

TEST_CASE("a policy's WAF check replaces the one in this process, and can fail the parse") {
  rapidjson::Document doc;
  doc.Parse(
      R"({"team_id":"team_a","hostname":"a.example.com","enabled":true,)"
      R"("force_https":true,"hsts_enabled":true,"cors_enabled":false,"waf_mode":"block",)"
      R"("waf_template":"custom","waf_custom_directives":"SecRule ARGS \"@rx a\" \"id:1\""})");
  REQUIRE_FALSE(doc.HasParseError());
  std::vector<std::string> seen;
  FieldPolicy policy;
  policy.check_waf_directives = [&](std::string_view text) -> Result<fields::Problem> {
    seen.emplace_back(text);
    if (seen.size() == 1) return fields::Problem("refused by the check");
    return make_error(Code::kUnavailable, "cannot be checked right now");
  };
  auto refused = parse_spec(Kind::kProfile, Mode::kCreate, doc, policy);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == Code::kValidationFailed);
  REQUIRE(refused.error().errors.size() == 1);
  CHECK(refused.error().errors[0].field == "waf_custom_directives");
  CHECK(refused.error().errors[0].message == "refused by the check");
  auto unavailable = parse_spec(Kind::kProfile, Mode::kCreate, doc, policy);
  REQUIRE_FALSE(unavailable.ok());
  CHECK(unavailable.error().code == Code::kUnavailable);
  CHECK(seen == std::vector<std::string>(2, R"(SecRule ARGS "@rx a" "id:1")"));
  // Empty directives need no check.
  doc["waf_custom_directives"].SetString("");
  CHECK(parse_spec(Kind::kProfile, Mode::kCreate, doc, policy).ok());
  CHECK(seen.size() == 2);
}

// gatewayd reads the bodies that may need the WAF check on threads that may wait for it; one that
// needs it and is not seen as such would hold its HTTP thread.
TEST_CASE("sends_waf_directives is true for every body whose parse calls the WAF check") {
  const std::string head =
      R"({"team_id":"team_a","hostname":"a.example.com","enabled":true,"force_https":true,)"
      R"("hsts_enabled":true,"cors_enabled":false,"waf_mode":"block",)";
  struct Case {
    std::string rest;  // the body after `head`
    bool sends;
  };
  const Case cases[] = {
      {R"("waf_template":"custom","waf_custom_directives":"SecRule ARGS \"@rx a\" \"id:1\""})",
       true},
      // Escapes in the member's name are the same name.
      {R"("waf_template":"custom","waf_custom\u005fdirectives":"SecAction \"id:1,pass\""})", true},
      // Given twice: refused by the parse, before or after a check.
      {R"("waf_template":"custom","waf_custom_directives":"","waf_custom_directives":"x"})", true},
      // Not checked, yet seen: the template is not custom.
      {R"("waf_template":"nextjs","waf_custom_directives":"SecAction \"id:1,pass\""})", true},
      {R"("waf_template":"custom","waf_custom_directives":""})", false},
      {R"("waf_template":"custom","waf_custom_directives":null})", false},
      {R"("waf_template":"custom","waf_custom_directives":["x"]})", false},
      {R"("waf_template":"custom"})", false},
  };
  for (const Case& c : cases) {
    CAPTURE(c.rest);
    rapidjson::Document doc;
    doc.Parse(head + c.rest);
    REQUIRE_FALSE(doc.HasParseError());
    bool checked = false;
    FieldPolicy policy;
    policy.check_waf_directives = [&](std::string_view) -> Result<fields::Problem> {
      checked = true;
      return fields::Problem();
    };
    (void)parse_spec(Kind::kProfile, Mode::kCreate, doc, policy);
    (void)parse_spec(Kind::kProfile, Mode::kUpdate, doc, policy);
    CHECK(sends_waf_directives(doc) == c.sends);
    if (checked) CHECK(sends_waf_directives(doc));
  }
  rapidjson::Document array;
  array.Parse(R"(["waf_custom_directives"])");
  CHECK_FALSE(sends_waf_directives(array));
}

TEST_CASE("profile rejections name every bad field") {
  struct Row {
    std::string body;
    std::vector<std::string> fields;
  };
  const Row rows[] = {
      {R"({})",
       {"team_id", "hostname", "enabled", "force_https", "hsts_enabled", "cors_enabled",
        "waf_mode", "waf_template"}},
      {R"({"team_id":"team_a","hostname":"a.example.com","enabled":"yes","force_https":1,)"
       R"("hsts_enabled":true,"cors_enabled":true,"waf_mode":"loud","waf_template":"x"})",
       {"enabled", "force_https", "waf_mode", "waf_template"}},
      {R"({"team_id":"team_a","hostname":"a.example.com","enabled":true,"force_https":true,)"
       R"("hsts_enabled":true,"cors_enabled":true,"waf_mode":"off","waf_template":"nextjs",)"
       R"("surprise":1,"max_body_bytes":-1})",
       {"surprise", "max_body_bytes"}},
      {R"({"team_id":"team_a","hostname":"a.example.com","enabled":true,"force_https":true,)"
       R"("hsts_enabled":true,"cors_enabled":true,"waf_mode":"off","waf_template":"nextjs",)"
       R"("waf_custom_directives":"SecRule ARGS \"@rx a\" \"id:1,deny\""})",
       {"waf_custom_directives"}},
      {R"({"team_id":"team_a","hostname":"a.example.com","enabled":true,"force_https":true,)"
       R"("hsts_enabled":true,"cors_enabled":true,"waf_mode":"off","waf_template":"nextjs",)"
       R"("max_body_bytes":2147483648,"geo_policy":[],"waf_overrides":"x"})",
       {"geo_policy", "waf_overrides", "max_body_bytes"}},  // type errors first, then rules
      {R"({"team_id":"team a","hostname":"-bad-.com","enabled":true,"force_https":true,)"
       R"("hsts_enabled":true,"cors_enabled":true,"waf_mode":"off","waf_template":"nextjs"})",
       {"team_id", "hostname"}},
      {R"({"team_id":"team_a","hostname":"a.example.com","enabled":true,"force_https":true,)"
       R"("hsts_enabled":true,"cors_enabled":true,"waf_mode":"off","waf_template":"nextjs",)"
       R"("max_body_bytes":1.5})",
       {"max_body_bytes"}},
      // One message per problem: a null required field was also "is required", an overlong CORS
      // list had its length reported twice, and geo_policy stopped at its first problem.
      {R"({"team_id":"team_a","hostname":null,"enabled":true,"force_https":true,)"
       R"("hsts_enabled":true,"cors_enabled":true,"waf_mode":"off","waf_template":"nextjs",)"
       R"("cors_methods":")" + std::string(4097, 'x') + R"(",)"
       R"("geo_policy":{"mode":"x","countries":["ZZ","US","US"]}})",
       {"hostname", "cors_methods", "geo_policy.mode", "geo_policy.countries[0]",
        "geo_policy.countries[2]"}},
      // Every bad item of a CORS list, and each problem of waf_overrides (only the first before).
      {R"({"team_id":"team_a","hostname":"a.example.com","enabled":true,"force_https":true,)"
       R"("hsts_enabled":true,"cors_enabled":true,"waf_mode":"off","waf_template":"nextjs",)"
       R"("cors_origins":"ftp://a.com,https://A.com","cors_methods":"get,TRACE",)"
       R"("waf_overrides":{"a":{"b":{"c":{"d":{"e":{"f":{"g":{"h":{"i":1}}}}}}}},)"
       R"("x":{"y":1,"y":2}}})",
       {"cors_methods", "cors_methods", "cors_origins", "cors_origins", "waf_overrides",
        "waf_overrides"}},
  };
  for (const auto& row : rows) {
    CAPTURE(row.body);
    auto r = parse(Kind::kProfile, row.body.c_str());
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == Code::kValidationFailed);
    CHECK(fields_of(r) == join(row.fields));
  }
}

// The message gave the characters only, which `_x` has: it says where a tenant id starts too
// (helper 116).
TEST_CASE("a team_id that starts with another character is refused with the whole rule") {
  for (const char* team : {"_x", "-x", ".x", "team a", ""}) {
    CAPTURE(team);
    const std::string body = std::string(R"({"team_id":")") + team +
                             R"(","workload_id":"w","provider":"github","external_id":"e",)"
                             R"("status":"active"})";
    auto r = parse(Kind::kWebhook, body.c_str());
    REQUIRE_FALSE(r.ok());
    REQUIRE(r.error().errors.size() == 1);
    CHECK(r.error().errors[0].field == "team_id");
    CHECK(r.error().errors[0].message ==
          "must be 1-128 characters of A-Z a-z 0-9 _ . -, starting with a letter or digit");
  }
}

// A whole number beyond int64 was "must be an integer", although it is one.
// One long bad list filled the 100 entries alone, so the other fields' problems never showed,
// and nothing said that the list was cut.
TEST_CASE("a long bad list does not hide other fields' problems, and a cut list says so") {
  std::string headers, methods;
  // Distinct items: a bad item given again is no second entry.
  for (int i = 0; i < 400; ++i) headers += (i ? "," : "") + std::string("a b") + std::to_string(i);
  for (int i = 0; i < 500; ++i) methods += (i ? "," : "") + std::string("g") + std::to_string(i);
  const std::string body =
      R"({"team_id":"team_a","hostname":"bad host","enabled":true,"force_https":true,)"
      R"("hsts_enabled":true,"cors_enabled":true,"waf_mode":"loud","waf_template":"nextjs",)"
      R"("cors_headers":")" +
      headers + R"(","cors_methods":")" + methods + R"("})";
  auto r = parse(Kind::kProfile, body.c_str());
  REQUIRE_FALSE(r.ok());
  std::map<std::string, int> by_field;
  for (const auto& e : r.error().errors) ++by_field[e.field];
  CHECK(by_field["cors_headers"] == 10);
  CHECK(by_field["cors_methods"] == 10);
  CHECK(by_field["hostname"] == 1);
  CHECK(by_field["waf_mode"] == 1);
  CHECK(r.error().detail ==
        "the request body breaks one or more field rules (more problems were found than are "
        "listed: at most 10 for a field and 100 in all)");
  // Under the limits the detail is the plain one.
  auto few = parse(Kind::kProfile, R"({"team_id":"team_a","hostname":"bad host"})");
  REQUIRE_FALSE(few.ok());
  CHECK(few.error().detail == "the request body breaks one or more field rules");
}

// Each unknown member was a field of its own towards the caps: 100 of them filled the entries
// and hid a bad `provider` (helper 134). They now count together, as the items of a list do.
TEST_CASE("unknown members count as one field towards the cap of 10") {
  std::string body = R"({"team_id":"team_a","workload_id":"w","provider":"x","status":"active")";
  for (int i = 0; i < 150; ++i) body += R"(,"junk)" + std::to_string(i) + R"(":1)";
  body += "}";
  auto r = parse(Kind::kWebhook, body.c_str());
  REQUIRE_FALSE(r.ok());
  size_t unknown = 0;
  bool provider = false;
  for (const auto& e : r.error().errors) {
    unknown += e.message == "unknown field" ? 1 : 0;
    provider = provider || e.field == "provider";
  }
  CHECK(unknown == 10);
  CHECK(provider);
  CHECK(r.error().errors.front().field == "junk0");
  CHECK(
      r.error().detail.ends_with("(more problems were found than are listed: at most 10 for a "
                                 "field and 100 in all)"));
}

// The cap of 10 for one field counted each item of a list as a field of its own
// (`geo_policy.countries[0]`, `[1]` ...): 120 bad countries filled the 100 entries and hid the
// other fields' problems (helper 52).
TEST_CASE("the items of a list count as one field towards the cap of 10") {
  std::string countries, ids, exclusions;
  for (int i = 0; i < 120; ++i) countries += (i ? "," : "") + std::string(R"("xx")");
  for (int i = 0; i < 200; ++i) ids += (i ? "," : "") + std::string("0");
  for (int i = 0; i < 5; ++i) {
    exclusions +=
        (i ? "," : "") + std::string(R"({"path_prefix":"nope","remove_rule_ids":[)") + ids + "]}";
  }
  const std::string body =
      R"({"team_id":"team_a","hostname":"a.example.com","enabled":true,"force_https":true,)"
      R"("hsts_enabled":true,"cors_enabled":true,"waf_mode":"off","waf_template":"nextjs",)"
      R"("cors_origins":"ftp://x","geo_policy":{"mode":"allow","countries":[)" +
      countries + R"(]},"waf_rule_exclusions":[)" + exclusions + "]}";
  auto r = parse(Kind::kProfile, body.c_str());
  REQUIRE_FALSE(r.ok());
  std::map<std::string, int> by_field;
  for (const auto& e : r.error().errors) {
    std::string field;
    for (size_t i = 0; i < e.field.size(); ++i) {
      if (e.field[i] == '[') {
        i = e.field.find(']', i);
      } else {
        field += e.field[i];
      }
    }
    ++by_field[field];
  }
  CAPTURE(r.error().errors.size());
  CHECK(by_field["geo_policy.countries"] == 10);
  CHECK(by_field["waf_rule_exclusions.remove_rule_ids"] == 10);
  CHECK(by_field["waf_rule_exclusions.path_prefix"] == 5);
  CHECK(by_field["cors_origins"] == 1);
  CHECK(r.error().errors.size() == 26);
  CHECK(r.error().detail.ends_with("at most 10 for a field and 100 in all)"));
}

TEST_CASE("an integer field says its range for whole numbers beyond 64 bits") {
  const std::string head =
      R"({"team_id":"team_a","hostname":"a.example.com","enabled":true,"force_https":true,)"
      R"("hsts_enabled":true,"cors_enabled":true,"waf_mode":"off","waf_template":"nextjs",)";
  struct Row {
    const char* number;
    const char* message;
  };
  const Row rows[] = {
      {"9223372036854775807", "must be 0..2147483647"},
      {"9223372036854775808", "must be 0..2147483647"},
      {"18446744073709551616", "must be 0..2147483647"},
      {"-9223372036854775809", "must be 0..2147483647"},
      {"1e300", "must be 0..2147483647"},
      {"1.5", "must be an integer"},
      {"1e3", "must be an integer"},
      {"9223372036854775808.5", "must be 0..2147483647"},  // rounds to a whole double
  };
  for (const auto& row : rows) {
    CAPTURE(row.number);
    const std::string body = head + R"("max_body_bytes":)" + row.number + "}";
    auto r = parse(Kind::kProfile, body.c_str());
    REQUIRE_FALSE(r.ok());
    REQUIRE(r.error().errors.size() == 1);
    CHECK(r.error().errors[0].field == "max_body_bytes");
    CHECK(r.error().errors[0].message == row.message);
  }
}

TEST_CASE("response-only fields are ignored and nulls mean not given") {
  auto r = parse(Kind::kWebhook,
                 R"({"webhook_id":"whk_x","created_at":1,"updated_at":2,"deleted_at":0,)"
                 R"("team_id":"team_a","workload_id":"wl","provider":"gitlab","status":"active",)"
                 R"("external_id":null})");
  REQUIRE(r.ok());
  CHECK(std::get<Webhook>(r.value()).external_id.empty());
}

TEST_CASE("a member given twice is refused, a response-only one too") {
  struct Row {
    Kind kind;
    std::string body;
    std::vector<std::string> fields;
  };
  const std::string webhook = R"("team_id":"team_a","workload_id":"wl","provider":"gitlab")";
  const Row rows[] = {
      {Kind::kWebhook, "{" + webhook + R"(,"status":"active","status":"inactive"})", {"status"}},
      // Response-only members are ignored, which made a repeated one pass (was 201).
      {Kind::kWebhook,
       "{" + webhook + R"(,"status":"active","webhook_id":"a","webhook_id":"b",)" +
           R"("created_at":1,"created_at":2,"created_at":3})",
       {"webhook_id", "created_at"}},
      // A problem found again is listed once (a member given three times had two entries).
      {Kind::kWebhook,
       "{" + webhook + R"(,"status":"active","status":"a","status":"b"})",
       {"status"}},
      {Kind::kWebhook,
       "{" + webhook + R"(,"status":"active","updated_at":1,"updated_at":1})",
       {"updated_at"}},
      {Kind::kProfile,
       std::string(kProfile).insert(1, R"("profile_id":"x","deleted_at":0,"profile_id":"y",)"),
       {"profile_id"}},
  };
  for (const auto& row : rows) {
    CAPTURE(row.body);
    auto r = parse(row.kind, row.body.c_str());
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == Code::kValidationFailed);
    CHECK(fields_of(r) == join(row.fields));
    for (const auto& e : r.error().errors) CHECK(e.message == "is given more than once");
  }
  SUBCASE("an unknown member given again is listed once") {
    auto r =
        parse(Kind::kWebhook, ("{" + webhook + R"(,"status":"active","x":1,"x":2,"x":3})").c_str());
    REQUIRE_FALSE(r.ok());
    CHECK(fields_of(r) == "x");
    REQUIRE(r.error().errors.size() == 1);
    CHECK(r.error().errors[0].message == "unknown field");
  }
  // Each copy after the first had a type error of its own: `"status":1` three times was four
  // entries, three of them "must be a string" (helper 159).
  SUBCASE("a member of the wrong type given again: its type error once, and its repeat once") {
    auto r =
        parse(Kind::kWebhook, ("{" + webhook + R"(,"status":1,"status":1,"status":1})").c_str());
    REQUIRE_FALSE(r.ok());
    REQUIRE(r.error().errors.size() == 2);
    CHECK(r.error().errors[0].field == "status");
    CHECK(r.error().errors[0].message == "must be a string");
    CHECK(r.error().errors[1].field == "status");
    CHECK(r.error().errors[1].message == "is given more than once");
  }
  // waf_template given twice was read as no template, so directives given with it had a second,
  // false entry: "must be empty unless waf_template is custom" (helper 176).
  SUBCASE("a waf_template given twice is that problem alone, not also the directives'") {
    auto r = parse(Kind::kProfile,
                   std::string(kProfile)
                       .insert(1, R"("waf_template":"custom",)"
                                  R"("waf_custom_directives":"SecRule ARGS \"@rx a\" \"id:1\"",)")
                       .c_str());
    REQUIRE_FALSE(r.ok());
    REQUIRE(r.error().errors.size() == 1);
    CHECK(r.error().errors[0].field == "waf_template");
    CHECK(r.error().errors[0].message == "is given more than once");
  }
  // Items are quoted by their first 64 bytes: two items alike that far are two problems still
  // (a review found the first version of the change above listing them as one).
  SUBCASE("distinct bad list items quoted alike are an entry each") {
    const std::string a = "ftp://" + std::string(70, 'a');
    auto p = parse(Kind::kProfile,
                   std::string(kProfile)
                       .insert(1, R"("cors_origins":")" + a + "1.com," + a + R"(2.com",)")
                       .c_str());
    REQUIRE_FALSE(p.ok());
    REQUIRE(p.error().errors.size() == 2);
    CHECK(p.error().errors[0].message == p.error().errors[1].message);
  }
}

TEST_CASE("webhook rules") {
  struct Row {
    const char* body;
    std::vector<std::string> fields;
  };
  const Row rows[] = {
      {R"({"team_id":"t","workload_id":"w","provider":"bitbucket","status":"paused"})",
       {"provider", "status"}},
      {R"({"team_id":"t","workload_id":"","provider":"github","status":"active"})",
       {"workload_id"}},
      {R"({"team_id":"t","provider":"github","status":"active","profile_id":"x"})",
       {"profile_id", "workload_id"}},
  };
  for (const auto& row : rows) {
    CAPTURE(row.body);
    auto r = parse(Kind::kWebhook, row.body);
    REQUIRE_FALSE(r.ok());
    CHECK(fields_of(r) == join(row.fields));
  }
  std::string long_id(129, 'w');
  std::string body = R"({"team_id":"t","provider":"github","status":"active","workload_id":")" +
                     long_id + "\"}";
  CHECK_FALSE(parse(Kind::kWebhook, body.c_str()).ok());
}

TEST_CASE("domain rules: reserved namespaces, scope enum, echoed server fields kept for decide") {
  CHECK(fields_of(parse(Kind::kDomain, R"({"team_id":"t","hostname":"app.platform.test"})")) ==
        "hostname");
  CHECK(fields_of(parse(Kind::kDomain, R"({"team_id":"t","hostname":"run.platform.test"})")) ==
        "hostname");
  CHECK(parse(Kind::kDomain, R"({"team_id":"t","hostname":"platformxtest.com"})").ok());
  // Public suffixes, ICANN and private, are nobody's to claim; names under them are.
  for (const std::string host : {"co.uk", "CO.UK.", "github.io", "com", "x.kawasaki.jp"}) {
    CAPTURE(host);
    auto bad = parse(Kind::kDomain,
                     (std::string(R"({"team_id":"t","hostname":")") + host + "\"}").c_str());
    CHECK(fields_of(bad) == "hostname");
  }
  for (const std::string host : {"shop.co.uk", "me.github.io", "city.kawasaki.jp", "a.test"}) {
    CAPTURE(host);
    CHECK(parse(Kind::kDomain,
                (std::string(R"({"team_id":"t","hostname":")") + host + "\"}").c_str())
              .ok());
  }
  // A domain's verification_hostname (_gateway-verify.<hostname>) must be a DNS name too: a
  // 239-byte hostname was accepted and could only ever fail to verify, blaming the DNS server.
  const std::string label63(63, 'a');
  const std::string host237 =
      label63 + "." + label63 + "." + label63 + "." + std::string(41, 'b') + ".com";
  REQUIRE(host237.size() == 237);
  CHECK(parse(Kind::kDomain, (R"({"team_id":"t","hostname":")" + host237 + "\"}").c_str()).ok());
  auto too_long =
      parse(Kind::kDomain, (R"({"team_id":"t","hostname":"x.)" + host237 + "\"}").c_str());
  CHECK(fields_of(too_long) == "hostname");
  CHECK(too_long.error().errors.at(0).message.find("at most 237 bytes") != std::string::npos);
  CHECK(fields_of(parse(Kind::kDomain, R"({"team_id":"t","hostname":"a.com","scope":"all"})")) ==
        "scope");
  auto r = parse(Kind::kDomain, R"({"team_id":"t","hostname":"a.com","status":"pending",)"
                                R"("verified_at":0,"verification_value":""})");
  REQUIRE(r.ok());
  const auto& s = std::get<DomainSpec>(r.value());
  CHECK(s.status == "pending");
  CHECK(s.verified_at == 0);
  CHECK(s.verification_value == "");
  CHECK_FALSE(s.verification_hostname.has_value());
}

// Every request to a domain is redirected: a target on its own hostname loops (was accepted).
TEST_CASE("a domain's redirect_to must not lead back to its own hostname") {
  auto with_target = [](const std::string& target) {
    return parse(
        Kind::kDomain,
        (R"({"team_id":"t","hostname":"Loop.Example.org.","redirect_to":")" + target + "\"}")
            .c_str());
  };
  for (const std::string loop :
       {"loop.example.org", "LOOP.example.org.", "https://loop.example.org/start?x=1",
        "http://Loop.Example.Org", "https://loop.example.org:443/", "http://loop.example.org:80"}) {
    CAPTURE(loop);
    auto r = with_target(loop);
    REQUIRE_FALSE(r.ok());
    CHECK(fields_of(r) == "redirect_to");
    CHECK(r.error().errors.at(0).message ==
          "must not lead back to the domain's own hostname loop.example.org (a redirect loop)");
  }
  for (const std::string other :
       {"www.loop.example.org", "example.org", "https://loop.example.org:8443/",
        "http://loop.example.org:443/", "https://loop.example.net/"}) {
    CAPTURE(other);
    CHECK(with_target(other).ok());
  }
}

TEST_CASE("create: domain server fields only with a new domain's starting values, all reported") {
  auto r = parse(Kind::kDomain, R"({"team_id":"t","hostname":"a.com","status":"verified",)"
                                R"("scope":"wide","verified_at":5,"verification_value":"x"})");
  REQUIRE_FALSE(r.ok());
  CHECK(fields_of(r) == "scope,verification_value,status,verified_at");
  // Each names the value the domain will have (only "is set by the server and cannot be
  // changed" before, unlike an update's, which names the value now).
  const auto& errors = r.error().errors;
  // The value is random (it said "" before, which no new domain has).
  CHECK(errors.at(1).message ==
        "is set by the server: a new domain starts with a random value "
        R"(("gv-" and 32 hex digits, a dot and the verification domain))");
  CHECK(errors.at(2).message ==
        R"(is set by the server: a new domain starts with "pending", or "verified" under a )"
        "subtree domain your team has verified");
  CHECK(errors.at(3).message ==
        "is set by the server: a new domain starts with 0, or the time "
        "of its create under a subtree domain your team has verified");
  auto echoes = parse(Kind::kDomain, R"({"team_id":"t","hostname":"a.com",)"
                                     R"("verification_parent_id":"d","verification_error":"e"})");
  REQUIRE_FALSE(echoes.ok());
  CHECK(fields_of(echoes) == "verification_parent_id,verification_error");
  CHECK(echoes.error().errors.at(0).message ==
        R"(is set by the server: a new domain starts with "" (empty), or the id of that domain )"
        "under a subtree domain your team has verified");
  CHECK(echoes.error().errors.at(1).message ==
        R"(is set by the server: a new domain starts with "" (empty))");
}

TEST_CASE("create: verification_hostname may be sent with the one the hostname gives") {
  auto sent = [](const char* hostname, const char* verification_hostname) {
    return parse(Kind::kDomain, (std::string(R"({"team_id":"t","hostname":")") + hostname +
                                 R"(","verification_hostname":")" + verification_hostname + "\"}")
                                    .c_str());
  };
  CHECK(sent("Shop.Example.com.", "_gateway-verify.shop.example.com").ok());
  CHECK(sent("shop.example.com", "").ok());
  auto other = sent("shop.example.com", "_gateway-verify.example.com");
  REQUIRE_FALSE(other.ok());
  CHECK(fields_of(other) == "verification_hostname");
  CHECK(other.error().errors.at(0).message ==
        "is set by the server: a new domain starts with "
        R"("_gateway-verify.shop.example.com" for this hostname)");
  CHECK(fields_of(sent("shop.example.com", "_GATEWAY-VERIFY.shop.example.com")) ==
        "verification_hostname");
  // A hostname refused is reported once, not again through the name that follows from it.
  CHECK(fields_of(sent("a..com", "_gateway-verify.a.com")) == "hostname");
  // So is one refused as a whole public suffix or as too long for its verification_hostname
  // (both were reported twice, the second time with a name no domain could have).
  CHECK(fields_of(sent("co.uk", "_gateway-verify.other.example.com")) == "hostname");
  const std::string label63(63, 'a');
  const std::string host238 =
      "x." + label63 + "." + label63 + "." + label63 + "." + std::string(41, 'b') + ".com";
  CHECK(fields_of(sent(host238.c_str(), "_gateway-verify.example.com")) == "hostname");
}

TEST_CASE("update: server fields are kept for decide to compare with the stored record") {
  rapidjson::Document doc;
  doc.Parse(R"({"team_id":"t","hostname":"a.com","status":"verified","verified_at":5})");
  auto r = parse_spec(Kind::kDomain, Mode::kUpdate, doc, FieldPolicy{});
  REQUIRE(r.ok());
  CHECK(std::get<DomainSpec>(r.value()).status == "verified");
  doc.Parse(R"({"team_id":"t","hostname":"a.com","status":"done"})");
  CHECK(fields_of(parse_spec(Kind::kDomain, Mode::kUpdate, doc, FieldPolicy{})) == "status");
}

TEST_CASE("update: a body that breaks a rule is checked against the stored domain too") {
  Domain stored;
  stored.hostname = "a.com";
  stored.status = "pending";
  int reads = 0;
  const StoredDomain read = [&]() -> std::optional<Domain> {
    ++reads;
    return stored;
  };
  rapidjson::Document doc;
  doc.Parse(R"({"team_id":"t","hostname":"b.com","status":"verified","scope":"wide"})");
  CHECK(fields_of(parse_spec(Kind::kDomain, Mode::kUpdate, doc, FieldPolicy{}, read)) ==
        "scope,hostname,status");
  CHECK(reads == 1);
  // A field with a problem of its own is not checked again.
  doc.Parse(R"({"team_id":"t","hostname":"b.com","status":"done","scope":"wide"})");
  CHECK(fields_of(parse_spec(Kind::kDomain, Mode::kUpdate, doc, FieldPolicy{}, read)) ==
        "scope,status,hostname");
  // A body without other problems is left to the writer, which reads the record it updates;
  // so are creates, and an update with no stored domain lists the body's problems alone.
  doc.Parse(R"({"team_id":"t","hostname":"b.com","status":"verified"})");
  CHECK(parse_spec(Kind::kDomain, Mode::kUpdate, doc, FieldPolicy{}, read).ok());
  doc.Parse(R"({"team_id":"t","hostname":"b.com","scope":"wide"})");
  CHECK(fields_of(parse_spec(Kind::kDomain, Mode::kCreate, doc, FieldPolicy{}, read)) == "scope");
  CHECK(reads == 2);
  CHECK(fields_of(parse_spec(Kind::kDomain, Mode::kUpdate, doc, FieldPolicy{},
                             [] { return std::optional<Domain>(); })) == "scope");
}

TEST_CASE("a body that is not an object is invalid_json") {
  rapidjson::Document doc;
  doc.Parse("[1,2]");
  auto r = parse_spec(Kind::kDomain, Mode::kCreate, doc, FieldPolicy{});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == Code::kInvalidJson);
}

TEST_CASE("tenant ids") {
  for (const char* ok : {"team_a", "T1", "a.b-c_d", "0"}) CHECK(valid_tenant_id(ok));
  for (const char* bad : {"", "_a", "a b", "a/b", "a\tb", "é"}) CHECK_FALSE(valid_tenant_id(bad));
  CHECK_FALSE(valid_tenant_id(std::string(129, 'a')));
}

}  // namespace
}  // namespace gw

namespace gw {
namespace {

TEST_CASE("JSON-typed fields nested far beyond their depth limit are refused without recursion") {
  const std::string nested = std::string(100000, '[') + std::string(100000, ']');
  for (const char* field : {"geo_policy", "waf_overrides", "waf_rule_exclusions"}) {
    CAPTURE(field);
    std::string inner = std::string(field) == "waf_rule_exclusions"
                            ? "[" + nested + "]"
                            : std::string(R"({"a":)") + nested + "}";
    std::string body =
        R"({"team_id":"t","hostname":"a.example.com","enabled":true,"force_https":true,)"
        R"("hsts_enabled":true,"cors_enabled":true,"waf_mode":"off","waf_template":"nextjs",")" +
        std::string(field) + "\":" + inner + "}";
    rapidjson::Document doc;
    doc.Parse<rapidjson::kParseIterativeFlag>(body.c_str());
    REQUIRE_FALSE(doc.HasParseError());
    auto r = parse_spec(Kind::kProfile, Mode::kCreate, doc, FieldPolicy{});
    REQUIRE_FALSE(r.ok());
    // An exclusion that is not an object is reported at its index; geo_policy's unknown member
    // "a" and its two missing ones each have an entry.
    const std::string want = std::string(field) == "waf_rule_exclusions" ? "waf_rule_exclusions[0]"
                             : std::string(field) == "geo_policy"
                                 ? "geo_policy,geo_policy,geo_policy"
                                 : field;
    CHECK(fields_of(r) == want);
  }
}

}  // namespace
}  // namespace gw
