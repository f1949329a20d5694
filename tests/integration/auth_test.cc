// Authentication and tenant binding: 401 before 400 before 403; the tokens file is re-read.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

#include "core/hex.h"
#include "integration/fixture.h"

namespace gw::itest::auth_test {
namespace {

using testing::json_with;
using testing::read_file;
using testing::str;

// RFC 6750 3.1: a bearer token sent and refused is `error="invalid_token"`; a request that sent
// none (no Authorization, another scheme, `Bearer` alone) gets the bare challenge (every 401
// said `Bearer` alone before).
TEST_CASE("requests without a valid bearer token are 401 with WWW-Authenticate: Bearer") {
  Server server;
  HttpClient http;
  const std::string good = server.token(kTeamA);
  const std::string bare = "Bearer";
  const std::string invalid = R"(Bearer error="invalid_token")";
  const std::pair<std::optional<std::string>, std::string> auth_values[] = {
      {std::nullopt, bare},
      {"", bare},
      {"Basic dGVhbV9hOnNlY3JldA==", bare},
      {"Bearer", bare},
      {"Bearer ", bare},
      {"Bearer  ", bare},
      {good, bare},
      {"Token " + good, bare},
      {"Bearer not-a-real-token", invalid},
      {"Bearer " + good + "x", invalid},
      {"Bearer " + good.substr(1), invalid},
      {"bearer " + good + "x", invalid},
      {"Bearer " + good + " x", invalid},
      {"Bearer " + std::string(600, 'a'), invalid}};
  for (const auto& [auth, challenge] : auth_values) {
    CAPTURE(auth.value_or("<none>"));
    for (const Kind* kind : kKinds) {
      Headers h = {{"X-Tenant-ID", std::string(kTeamA)}};
      if (auth) h.emplace_back("Authorization", *auth);
      Response list = http.request("GET", server.url() + std::string(kind->path), h);
      check_problem(list, 401, "unauthorized");
      CHECK(list.header("WWW-Authenticate").value_or("") == challenge);

      h.emplace_back("Content-Type", "application/json");
      Response post = http.request("POST", server.url() + std::string(kind->path), h,
                                   kind->body(kTeamA, 1));
      check_problem(post, 401, "unauthorized");
      CHECK(post.header("WWW-Authenticate").value_or("") == challenge);
    }
  }
  Api api(server, kTeamA);
  for (const Kind* kind : kKinds) {
    Response list = api.get(std::string(kind->path));
    REQUIRE(list.status == 200);
    CHECK(num(field(json(list), "pagination"), "total") == 0);
  }
}

TEST_CASE("item paths need a token too, and 401 comes before the tenant check") {
  Server server;
  Api api(server, kTeamA);
  std::string id = create(api, kDomain, 1);
  HttpClient http;
  for (const std::string method : {"GET", "PUT", "DELETE"}) {
    CAPTURE(method);
    Response r = http.request(method, server.url() + item_path(kDomain, id), {});
    check_problem(r, 401, "unauthorized");
  }
  check_problem(http.request("POST", server.url() + item_path(kDomain, id) + "/verify", {}, ""),
                401, "unauthorized");
  Response no_tenant_no_token = http.request("GET", server.url() + "/v1/webhook", {});
  check_problem(no_tenant_no_token, 401, "unauthorized");
  CHECK(api.get(item_path(kDomain, id)).status == 200);
}

TEST_CASE("the Bearer scheme name is case-insensitive") {
  Server server;
  HttpClient http;
  Response r = http.request("GET", server.url() + "/v1/webhook",
                            {{"Authorization", "bearer " + server.token(kTeamA)},
                             {"X-Tenant-ID", std::string(kTeamA)}});
  INFO(r.body);
  CHECK(r.status == 200);
}

TEST_CASE("a valid token without X-Tenant-ID is 400 missing_tenant") {
  Server server;
  HttpClient http;
  for (const Kind* kind : kKinds) {
    CAPTURE(kind->name);
    Headers h = {{"Authorization", "Bearer " + server.token(kTeamA)}};
    check_problem(http.request("GET", server.url() + std::string(kind->path), h), 400,
                  "missing_tenant");
    h.emplace_back("X-Tenant-ID", "");
    check_problem(http.request("GET", server.url() + std::string(kind->path), h), 400,
                  "missing_tenant");
  }
}

TEST_CASE("X-Tenant-ID other than the token's tenant is 403 tenant_mismatch") {
  Server server;
  Api a_as_b(server, server.token(kTeamA), std::string(kTeamB));
  for (const Kind* kind : kKinds) {
    CAPTURE(kind->name);
    check_problem(a_as_b.get(std::string(kind->path)), 403, "tenant_mismatch");
    check_problem(a_as_b.post(std::string(kind->path), kind->body(kTeamB, 1)), 403,
                  "tenant_mismatch");
  }
  Api b(server, kTeamB);
  for (const Kind* kind : kKinds) {
    CHECK(num(field(json(b.get(std::string(kind->path))), "pagination"), "total") == 0);
  }
}

TEST_CASE("body team_id other than X-Tenant-ID is 403 on create and update") {
  Server server;
  Api api(server, kTeamA);
  for (const Kind* kind : kKinds) {
    CAPTURE(kind->name);
    check_problem(api.post(std::string(kind->path), kind->body(kTeamB, 1)), 403, "tenant_mismatch");
    Response created = api.post(std::string(kind->path), kind->body(kTeamA, 1));
    REQUIRE(created.status == 201);
    std::string path = item_path(*kind, str(json(created), kind->id_field));
    check_problem(api.put(path, kind->body(kTeamB, 1)), 403, "tenant_mismatch");
    Response after = api.get(path);
    CHECK(json(after) == json(created));
    CHECK(after.header("ETag") == created.header("ETag"));
    Response list = api.get(std::string(kind->path));
    CHECK(num(field(json(list), "pagination"), "total") == 1);
  }
}

TEST_CASE("a token created while the server runs works at once; its name is the event actor") {
  Server server;
  std::string late = server.new_token(kTeamA, "late-token");
  Api api(server, late, std::string(kTeamA));
  Response r = api.post("/v1/webhook", webhook_body(kTeamA, "wl-late"));
  INFO(r.status, " ", r.body);
  REQUIRE(r.status == 201);
  std::string id = str(json(r), "webhook_id");

  Response events = api.get("/v1/events?after=0");
  REQUIRE(events.status == 200);
  rapidjson::Document e = json(events);
  REQUIRE(length(field(e, "data")) >= 1);
  const rapidjson::Value& last =
      at(field(e, "data"), static_cast<size_t>(length(field(e, "data")) - 1));
  CHECK(str(last, "aggregate_id") == id);
  CHECK(str(last, "actor") == "late-token");

  std::string other_team = server.new_token("team_c", "c-token");
  Api c(server, other_team, "team_c");
  Response cr = c.post("/v1/webhook", webhook_body("team_c", "wl-c"));
  INFO(cr.body);
  CHECK(cr.status == 201);
  check_problem(Api(server, other_team, std::string(kTeamA)).get("/v1/webhook"), 403,
                "tenant_mismatch");
  // The older tokens still work after the file changed.
  CHECK(Api(server, kTeamA).get("/v1/webhook").status == 200);
}

// A tokens file whose last line has no newline (edited by hand): the new token's line joined it
// and the new token was refused with 401.
TEST_CASE("gatewayctl token create starts a new line after a file without a final newline") {
  Server server;
  std::ostringstream read;
  read << std::ifstream(server.tokens_file()).rdbuf();
  std::string text = read.str();
  REQUIRE(text.ends_with('\n'));
  text.pop_back();
  std::ofstream(server.tokens_file(), std::ios::trunc) << text;
  std::string token = server.new_token(kTeamA, "after-edit");
  CHECK(Api(server, token, std::string(kTeamA)).get("/v1/webhook").status == 200);
  CHECK(Api(server, kTeamA).get("/v1/webhook").status == 200);
}

// The verifier's outcome events carry the actor `verifier`; a token of that name made events
// that passed for the verifier's. gatewayctl refuses the name, and gatewayd ignores a line that
// carries it. Lines it cannot use were skipped without a word; gatewayd now says which and why.
TEST_CASE("the tokens file: the name verifier is reserved, and lines gatewayd ignores are named") {
  Server server;
  try {
    server.new_token(kTeamA, "verifier");
    FAIL("gatewayctl token create --name verifier succeeded");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()).find("verifier is reserved") != std::string::npos);
  }
  std::string spoof = server.new_token(kTeamA, "spoof");
  std::string kept = server.new_token(kTeamA, "kept");
  std::ostringstream read;
  read << std::ifstream(server.tokens_file()).rdbuf();
  std::string text = read.str();
  size_t at = text.find(" team_a spoof\n");
  REQUIRE(at != std::string::npos);
  text.replace(at, std::string_view(" team_a spoof\n").size(), " team_a verifier\n");
  // Lines 1-4 are team_a-token, team_b-token, the spoof and kept; then three broken ones.
  text += "0123 team_a short-digest\n" + std::string(64, 'a') + " team_a\n" + std::string(64, 'b') +
          " team_a name extra-field\n";
  std::ofstream(server.tokens_file(), std::ios::trunc) << text;

  check_problem(Api(server, spoof, std::string(kTeamA)).get("/v1/webhook"), 401, "unauthorized");
  CHECK(Api(server, kept, std::string(kTeamA)).get("/v1/webhook").status == 200);
  CHECK(Api(server, kTeamA).get("/v1/webhook").status == 200);
  // The last line of that reading: the earlier ones are in the output once it is.
  REQUIRE(server.wait_for_line(" line 7 ignored: ").has_value());
  std::string out = server.output();
  INFO(out);
  const std::string file = server.tokens_file();
  CHECK(out.find(file + " line 3 ignored: the name verifier is reserved") != std::string::npos);
  CHECK(out.find(file + " line 5 ignored: the first field is not a SHA-256 digest") !=
        std::string::npos);
  CHECK(out.find(file + " line 6 ignored: expected three fields") != std::string::npos);
  CHECK(out.find(file + " line 7 ignored: expected three fields") != std::string::npos);
  CHECK(out.find(" line 4 ") == std::string::npos);
  CHECK(out.find(std::string(64, 'a')) == std::string::npos);  // no line is echoed
}

// A bad --tenant or --name exited 1 with "the request body breaks one or more field rules", a
// failure's exit code and an HTTP API's words for what is a usage error of the command.
TEST_CASE("gatewayctl token create: a bad --tenant or --name is a usage error, exit 2") {
  Server server;
  struct Row {
    std::string tenant, name, message;
  };
  const std::vector<Row> rows{
      {"bad team!", "ok",
       "gatewayctl: --tenant must be 1-128 characters of A-Z a-z 0-9 _ . -, starting with a letter "
       "or digit\n"},
      // The message gave the characters only, which `_x` has (helper 116).
      {"_x", "ok",
       "gatewayctl: --tenant must be 1-128 characters of A-Z a-z 0-9 _ . -, starting with a letter "
       "or digit\n"},
      {"team_a", "a\tb", "gatewayctl: --name must be 1-64 characters of A-Z a-z 0-9 _ . -\n"},
      {"team_a", "verifier", "gatewayctl: --name verifier is reserved, in any case"},
      // `Verifier` was taken, and its events passed for the verifier's at a glance (helper 103).
      {"team_a", "Verifier", "gatewayctl: --name verifier is reserved, in any case"},
      {"team_a", "VERIFIER", "gatewayctl: --name verifier is reserved, in any case"},
  };
  std::ostringstream before;
  before << std::ifstream(server.tokens_file()).rdbuf();
  for (const auto& row : rows) {
    CAPTURE(row.tenant);
    CAPTURE(row.name);
    testing::CommandResult r =
        testing::run_command({GATEWAYCTL_PATH, "token", "create", "--tokens-file",
                              server.tokens_file(), "--tenant", row.tenant, "--name", row.name},
                             testing::ChildEnv{{"GATEWAY_"}, {}});
    CHECK(r.status.exited);
    CHECK(r.status.code == 2);
    CHECK(r.out.empty());
    CHECK(r.err.starts_with(row.message));
    CHECK(r.err.find("request body") == std::string::npos);
  }
  std::ostringstream after;
  after << std::ifstream(server.tokens_file()).rdbuf();
  CHECK(after.str() == before.str());  // nothing appended
}

// Whoever may write the tokens file can add a token for any tenant. gatewayctl appended to such a
// file, and gatewayd took every token in it.
TEST_CASE("a tokens file group or others may write: no token from it is accepted, none is added") {
  Server server;
  const std::string file = server.tokens_file();
  std::string before_token = server.new_token(kTeamA, "before");
  REQUIRE(Api(server, before_token, std::string(kTeamA)).get("/v1/webhook").status == 200);
  for (mode_t mode : {0620, 0602}) {
    CAPTURE(mode);
    REQUIRE(::chmod(file.c_str(), mode) == 0);
    testing::CommandResult r = testing::run_command(
        {GATEWAYCTL_PATH, "token", "create", "--tokens-file", file, "--tenant", "team_a"},
        testing::ChildEnv{{"GATEWAY_"}, {}});
    CHECK(r.status.exited);
    CHECK(r.status.code == 1);
    CHECK(r.out.empty());
    CHECK(r.err == "gatewayctl: " + file +
                       " may be written by group or others, who could add a token for any "
                       "tenant (chmod go-w " +
                       file + ")\n");
    // The token made before the file was opened up is refused too: anyone could have added it.
    // (The file is looked at again at most every 250 ms while known tokens come.)
    Response refused = Api(server, before_token, std::string(kTeamA)).get("/v1/webhook");
    for (int i = 0; i < 40 && refused.status == 200; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      refused = Api(server, before_token, std::string(kTeamA)).get("/v1/webhook");
    }
    check_problem(refused, 401, "unauthorized");
    CHECK(server.wait_for_line("gatewayd: no token accepted: " + file + " may be written by")
              .has_value());
  }
  // Closed again, the file is read again (a chmod changes no modification time).
  REQUIRE(::chmod(file.c_str(), 0640) == 0);
  CHECK(Api(server, before_token, std::string(kTeamA)).get("/v1/webhook").status == 200);
  CHECK(Api(server, kTeamA).get("/v1/webhook").status == 200);
  // An existing file keeps its mode; a new line is added as before.
  std::string added = server.new_token(kTeamA, "added");
  CHECK(Api(server, added, std::string(kTeamA)).get("/v1/webhook").status == 200);
  struct stat st {};
  REQUIRE(::stat(file.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0640);
}

// The status of GET /v1/webhook with `token` once it is `want`, polling for up to 2 s (the file is
// looked at again at most every 250 ms while known tokens come).
int status_once(Server& server, const std::string& token, int want) {
  int status = 0;
  for (int i = 0; i < 40; ++i) {
    status = Api(server, token, std::string(kTeamA)).get("/v1/webhook").status;
    if (status == want) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return status;
}

// Found by an audit: an edit in place that kept the size and put the modification time back was
// never seen (a revoked token kept working); a file owned by another user was trusted; a path that
// is no regular file held no token without a word; two lines with one digest and different
// tenants were taken silently (the last won); an upper-case digest was refused.
TEST_CASE("the tokens file: edits in place, owner, a directory, conflicting and upper-case lines") {
  Server server;
  const std::string file = server.tokens_file();
  const std::string victim = server.new_token(kTeamA, "victim");
  REQUIRE(status_once(server, victim, 200) == 200);

  SUBCASE("an edit in place with the modification time put back revokes") {
    struct stat before {};
    REQUIRE(::stat(file.c_str(), &before) == 0);
    std::string text = read_file(file);
    const size_t end = text.find(" team_a victim\n");
    REQUIRE(end != std::string::npos);
    const size_t start = text.rfind('\n', end) + 1;  // npos + 1 == 0 for the first line
    REQUIRE(end - start == 64);
    {
      std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(static_cast<std::streamoff>(start));
      f << std::string(64, '0');
    }
    const struct timespec times[2] = {before.st_atim, before.st_mtim};
    REQUIRE(::utimensat(AT_FDCWD, file.c_str(), times, 0) == 0);
    struct stat after {};
    REQUIRE(::stat(file.c_str(), &after) == 0);
    REQUIRE(after.st_size == before.st_size);
    REQUIRE(after.st_mtim.tv_nsec == before.st_mtim.tv_nsec);
    CHECK(status_once(server, victim, 401) == 401);
    CHECK(Api(server, kTeamA).get("/v1/webhook").status == 200);
  }
  SUBCASE("a file owned by another user than root or gatewayd's holds no token") {
    REQUIRE(::chown(file.c_str(), 65534, 65534) == 0);
    CHECK(status_once(server, victim, 401) == 401);
    CHECK(server
              .wait_for_line("gatewayd: no token accepted: " + file +
                             " is owned by user 65534, who could add a token for any tenant")
              .has_value());
    REQUIRE(::chown(file.c_str(), 0, 0) == 0);
    CHECK(status_once(server, victim, 200) == 200);
  }
  SUBCASE("a directory in the file's place holds no token and says so") {
    REQUIRE(::rename(file.c_str(), (file + ".away").c_str()) == 0);
    REQUIRE(::mkdir(file.c_str(), 0700) == 0);
    CHECK(status_once(server, victim, 401) == 401);
    CHECK(server.wait_for_line("gatewayd: no token accepted: " + file + " is not a regular file")
              .has_value());
    REQUIRE(::rmdir(file.c_str()) == 0);
    REQUIRE(::rename((file + ".away").c_str(), file.c_str()) == 0);
    CHECK(status_once(server, victim, 200) == 200);
    CHECK(server.wait_for_line("gatewayd: tokens accepted again: " + file + " read, ").has_value());
  }
  SUBCASE("one digest on two lines with different tenants: neither is accepted") {
    const std::string original = read_file(file);
    const size_t end = original.find(" team_a victim\n");
    REQUIRE(end != std::string::npos);
    const size_t start = original.rfind('\n', end) + 1;
    const std::string digest = original.substr(start, 64);
    std::ofstream(file, std::ios::app) << digest << " team_b victim\n";
    CHECK(status_once(server, victim, 401) == 401);
    CHECK(
        server.wait_for_line(" with another tenant or name; neither line is accepted").has_value());
    CHECK(Api(server, kTeamA).get("/v1/webhook").status == 200);  // the other lines still count
    // The same line twice is no conflict.
    std::ofstream(file, std::ios::trunc) << original << digest << " team_a victim\n";
    CHECK(status_once(server, victim, 200) == 200);
  }
  SUBCASE("a digest in upper-case hex is accepted") {
    std::string text = read_file(file);
    const size_t end = text.find(" team_a victim\n");
    REQUIRE(end != std::string::npos);
    const size_t start = text.rfind('\n', end) + 1;
    const size_t line_end = end + std::string_view(" team_a victim\n").size();
    // Revoked first, so that the token is unknown when the upper-case line comes.
    std::ofstream(file, std::ios::trunc) << text.substr(0, start) + text.substr(line_end);
    REQUIRE(status_once(server, victim, 401) == 401);
    for (size_t i = start; i < end; ++i) {
      text[i] = static_cast<char>(std::toupper(static_cast<unsigned char>(text[i])));
    }
    std::ofstream(file, std::ios::trunc) << text;
    // Accepted at once: an unknown token makes gatewayd look at the file, which has changed.
    CHECK(Api(server, victim, std::string(kTeamA)).get("/v1/webhook").status == 200);
    CHECK(server.output().find(" ignored: ") == std::string::npos);
  }
}

// The digest line of `token` in the tokens file's text `text`, as gatewayctl writes it.
bool holds_token(const std::string& text, const std::string& token) {
  return text.find(sha256_hex(token) + " ") != std::string::npos;
}

// Whether a revoke's scratch file (`FILE.revoke-PID`) is left beside the tokens file `file`.
bool revoke_scratch_left(const std::string& file) {
  const std::string prefix = std::filesystem::path(file).filename().string() + ".revoke-";
  for (const auto& e :
       std::filesystem::directory_iterator(std::filesystem::path(file).parent_path())) {
    if (e.path().filename().string().starts_with(prefix)) return true;
  }
  return false;
}

// Renames the token of `team` named `from` to `to` in the tokens file, as a hand edit does.
void rename_by_hand(const std::string& file, std::string_view team, const std::string& from,
                    const std::string& to) {
  std::string text = read_file(file);
  const std::string line_end = " " + std::string(team) + " " + from + "\n";
  const size_t at = text.find(line_end);
  REQUIRE(at != std::string::npos);
  text.replace(at, line_end.size(), " " + std::string(team) + " " + to + "\n");
  std::ofstream(file, std::ios::trunc) << text;
}

testing::CommandResult revoke(const Server& server, const std::string& tenant,
                              const std::string& name) {
  return testing::run_command({GATEWAYCTL_PATH, "token", "revoke", "--tokens-file",
                               server.tokens_file(), "--tenant", tenant, "--name", name},
                              testing::ChildEnv{{"GATEWAY_"}, {}});
}

// Revoking was left to `sed -i`, which two revokes at once, or a revoke beside `token create`,
// undid each other with (helper 74: 8 of 30 revoked tokens still accepted).
TEST_CASE("gatewayctl token revoke: the tokens of a tenant and name go, every other line stays") {
  Server server;
  const std::string file = server.tokens_file();
  const std::string ci1 = server.new_token(kTeamA, "ci");
  const std::string ci2 = server.new_token(kTeamA, "ci2");
  // A second token of the name, as a hand edit makes one (gatewayctl refuses it).
  rename_by_hand(file, kTeamA, "ci2", "ci");
  const std::string other = server.new_token(kTeamA, "other");
  const std::string team_b_ci = server.new_token(kTeamB, "ci");
  std::ofstream(file, std::ios::app) << "# a comment team_a ci\nnot a token line\n";
  REQUIRE(::chmod(file.c_str(), 0640) == 0);
  for (const std::string& token : {ci1, ci2}) REQUIRE(status_once(server, token, 200) == 200);
  const std::string before = read_file(file);

  testing::CommandResult r = revoke(server, std::string(kTeamA), "ci");
  INFO(r.err);
  CHECK(r.status.success());
  CHECK(r.out == "revoked 2 tokens of tenant team_a named ci\n");
  const std::string after = read_file(file);
  CHECK_FALSE(holds_token(after, ci1));
  CHECK_FALSE(holds_token(after, ci2));
  // Every other line as it was, in its place.
  std::string expected;
  std::istringstream lines(before);
  for (std::string line; std::getline(lines, line);) {
    if (line.ends_with(" team_a ci") && !line.starts_with('#')) continue;
    expected += line + "\n";
  }
  CHECK(after == expected);
  struct stat st {};
  REQUIRE(::stat(file.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0640);
  CHECK(status_once(server, ci1, 401) == 401);
  CHECK(status_once(server, ci2, 401) == 401);
  CHECK(Api(server, other, std::string(kTeamA)).get("/v1/webhook").status == 200);
  CHECK(Api(server, team_b_ci, std::string(kTeamB)).get("/v1/webhook").status == 200);

  // None left: exit 1, and the file is not written.
  testing::CommandResult again = revoke(server, std::string(kTeamA), "ci");
  CHECK(again.status.code == 1);
  CHECK(again.out.empty());
  CHECK(again.err == "gatewayctl: no token of tenant team_a named ci in " + file + "\n");
  CHECK(read_file(file) == after);
  // A name is required (all of a tenant's tokens are not revoked by leaving it out), and a bad
  // one is a usage error.
  CHECK(revoke(server, std::string(kTeamA), "").status.code == 2);
  testing::CommandResult bad = revoke(server, "team a", "ci");
  CHECK(bad.status.code == 2);
  CHECK(bad.err ==
        "gatewayctl: --tenant must be 1-128 characters of A-Z a-z 0-9 _ . -, starting with a "
        "letter or digit\n");
  CHECK(read_file(file) == after);
  CHECK_FALSE(revoke_scratch_left(file));
}

// A revoke took a damaged line that named the tenant and name as a token, and counted it; and of
// a token on two lines that disagree, which gatewayd accepts from neither, it took only the line
// it was asked for, so the token began to work for the other line's tenant (helper 75).
// gatewayctl refuses `Verifier` now (helper 103); a token an earlier release made with that name
// still works, and can be revoked (helper 106 saw gatewayd ignore such lines, and revoke refuse
// the name).
TEST_CASE("a token named Verifier from an earlier release still works and can be revoked") {
  Server server;
  const std::string file = server.tokens_file();
  const std::string token = server.new_token(kTeamA, "legacy");
  rename_by_hand(file, kTeamA, "legacy", "Verifier");
  REQUIRE(status_once(server, token, 200) == 200);
  testing::CommandResult r = revoke(server, std::string(kTeamA), "Verifier");
  INFO(r.err);
  CHECK(r.status.success());
  CHECK(r.out == "revoked 1 token of tenant team_a named Verifier\n");
  CHECK(status_once(server, token, 401) == 401);
}

// A tokens file token create made was synced, its directory's entry for it not: after a power
// loss a printed token's file could be gone (helper 104, from a trace).
TEST_CASE(
    "gatewayctl token create syncs the directory of a tokens file it makes before it prints") {
  testing::TempDir dir;
  Traced t = run_traced({GATEWAYCTL_PATH, "token", "create", "--tokens-file", dir.file("tokens"),
                         "--tenant", "team_a", "--name", "ci"});
  INFO(t.result.err);
  REQUIRE(t.result.status.success());
  const size_t printed = first_line(t.lines, " write(1, \"gw_");
  REQUIRE(printed < t.lines.size());
  CHECK(dir_sync(t.lines, dir.path()) < printed);

  // Named through a symlink, the file is made where the link points, and that directory is the
  // one synced (the link's was: helper 175).
  std::filesystem::create_directories(dir.file("sub/deeper"));
  std::filesystem::create_symlink("sub/deeper/tokens", dir.file("link"));
  Traced linked = run_traced({GATEWAYCTL_PATH, "token", "create", "--tokens-file", dir.file("link"),
                              "--tenant", "team_a", "--name", "ci"});
  INFO(linked.result.err);
  REQUIRE(linked.result.status.success());
  REQUIRE(std::filesystem::exists(dir.file("sub/deeper/tokens")));
  const size_t linked_printed = first_line(linked.lines, " write(1, \"gw_");
  REQUIRE(linked_printed < linked.lines.size());
  CHECK(dir_sync(linked.lines, dir.file("sub/deeper")) < linked_printed);
}

// A token create whose token could not be printed (stdout on a full disk or closed) exited 0 with
// nothing on stderr: the token was lost, and its line in the file kept the name from being used
// again. Now it exits 1 and says how to take the line away; with stdout closed it writes nothing. A
// revoke whose report could not be written exited 0 as well.
TEST_CASE("gatewayctl token create and revoke exit 1 when stdout cannot take what they print") {
  Server server;
  const std::string file = server.tokens_file();
  const std::string create = std::string(GATEWAYCTL_PATH) + " token create --tokens-file " + file +
                             " --tenant team_a --name lost";
  const std::string before = read_file(file);
  testing::CommandResult closed =
      testing::run_command({GATEWAYCTL_PATH, "token", "create", "--tokens-file", file, "--tenant",
                            "team_a", "--name", "lost"},
                           testing::ChildEnv{{"GATEWAY_"}, {}, 0, 0, {}, {STDOUT_FILENO}});
  CHECK(closed.status.code == 1);
  CHECK(closed.err ==
        "gatewayctl: token create: stdout is closed, so the token could not be printed; nothing "
        "written\n");
  CHECK(read_file(file) == before);

  testing::CommandResult full = testing::run_command({"/bin/sh", "-c", create + " > /dev/full"},
                                                     testing::ChildEnv{{"GATEWAY_"}, {}});
  CHECK(full.status.code == 1);
  const std::string revoke_hint = "take it away with gatewayctl token revoke --tokens-file " +
                                  file + " --tenant team_a --name lost\n";
  CHECK(full.err ==
        "gatewayctl: token create: cannot print the token: No space left on device; "
        "its line stays in " +
            file + ", and no one has the token: " + revoke_hint);
  CHECK(read_file(file).find(" team_a lost\n") != std::string::npos);

  // The command the message gives frees the name; its report on a full disk is an exit 1 too.
  testing::CommandResult revoked =
      testing::run_command({"/bin/sh", "-c",
                            std::string(GATEWAYCTL_PATH) + " token revoke --tokens-file " + file +
                                " --tenant team_a --name lost > /dev/full"},
                           testing::ChildEnv{{"GATEWAY_"}, {}});
  CHECK(revoked.status.code == 1);
  CHECK(revoked.err ==
        "gatewayctl: token revoke: cannot write its report: No space left on device; the tokens "
        "are revoked all the same\n");
  CHECK(read_file(file) == before);
}

// A second token of a tenant's name was made, and events written with either carried the same
// actor: no audit could tell who made a change (helper 103). Another tenant may use the name.
TEST_CASE("gatewayctl token create: a name a token of the tenant has is refused, exit 1") {
  Server server;
  const std::string file = server.tokens_file();
  const std::string first = server.new_token(kTeamA, "ci");
  const std::string before = read_file(file);
  for (const char* name : std::initializer_list<const char*>{"ci", nullptr}) {
    std::vector<std::string> args{GATEWAYCTL_PATH, "token", "create", "--tokens-file", file,
                                  "--tenant",      "team_a"};
    if (name == nullptr) {
      // The default name, `default`, once taken.
      REQUIRE(testing::run_command(args, testing::ChildEnv{{"GATEWAY_"}, {}}).status.success());
    } else {
      args.insert(args.end(), {"--name", name});
    }
    const std::string taken = read_file(file);
    testing::CommandResult r = testing::run_command(args, testing::ChildEnv{{"GATEWAY_"}, {}});
    const std::string shown = name == nullptr ? "default" : name;
    CHECK(r.status.exited);
    CHECK(r.status.code == 1);
    CHECK(r.out.empty());
    CHECK(r.err == "gatewayctl: tenant team_a has a token named " + shown + " in " + file +
                       " already: give another --name (a name is the actor of its token's "
                       "events), or revoke that token first\n");
    CHECK(read_file(file) == taken);
  }
  // Names are per tenant; after a revoke the name is free again.
  CHECK(
      Api(server, server.new_token(kTeamB, "ci"), std::string(kTeamB)).get("/v1/webhook").status ==
      200);
  REQUIRE(revoke(server, std::string(kTeamA), "ci").status.success());
  const std::string again = server.new_token(kTeamA, "ci");
  CHECK(again != first);
  CHECK(Api(server, again, std::string(kTeamA)).get("/v1/webhook").status == 200);
  CHECK(read_file(file).find(before) == std::string::npos);  // the first ci line is gone
}

TEST_CASE("gatewayctl token revoke takes every line of a token it revokes and no damaged line") {
  Server server;
  const std::string file = server.tokens_file();
  const std::string ci = server.new_token(kTeamA, "ci");
  const std::string digest = sha256_hex(ci);
  std::ofstream(file, std::ios::app) << digest << " team_b admin\n"
                                     << digest << " team_a ci\n"
                                     << "notahex team_a ci\n"
                                     << "  # team_a ci\n"
                                     << "# " << digest << " team_a ci\n";
  REQUIRE(status_once(server, ci, 401) == 401);  // two lines disagree: from neither
  CHECK(Api(server, ci, std::string(kTeamB)).get("/v1/webhook").status == 401);
  const std::string before = read_file(file);

  testing::CommandResult r = revoke(server, std::string(kTeamA), "ci");
  INFO(r.err);
  CHECK(r.status.success());
  CHECK(r.out == "revoked 1 token of tenant team_a named ci\n");
  std::string expected;
  std::istringstream lines(before);
  for (std::string line; std::getline(lines, line);) {
    if (!line.starts_with(digest)) expected += line + "\n";
  }
  CHECK(read_file(file) == expected);
  CHECK(read_file(file).find("notahex team_a ci\n  # team_a ci\n# " + digest) != std::string::npos);
  // Refused for every tenant still, now that no line disagrees.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(Api(server, ci, std::string(kTeamB)).get("/v1/webhook").status == 401);
  CHECK(Api(server, ci, std::string(kTeamA)).get("/v1/webhook").status == 401);
  // Damaged lines alone are no token to revoke.
  testing::CommandResult none = revoke(server, std::string(kTeamA), "ci");
  CHECK(none.status.code == 1);
  CHECK(read_file(file) == expected);
}

// gatewayctl was killed by SIGXFSZ at the file size limit (`ulimit -f`), before it could take back
// what it wrote: a create left part of a line in the file, a revoke its scratch file (helper 75).
TEST_CASE("at the file size limit, token create and revoke exit 1 and leave the file as it was") {
  Server server;
  const std::string file = server.tokens_file();
  server.new_token(kTeamA, "gone");
  const std::string before = read_file(file);
  const std::string limit = "--fsize=" + std::to_string(before.size() + 20);
  testing::CommandResult created =
      testing::run_command({"/usr/bin/prlimit", limit, GATEWAYCTL_PATH, "token", "create",
                            "--tokens-file", file, "--tenant", "team_a", "--name", "late"},
                           testing::ChildEnv{{"GATEWAY_"}, {}});
  CHECK(created.status.exited);
  CHECK(created.status.code == 1);
  CHECK(created.err == "gatewayctl: cannot write " + file + ": File too large\n");
  CHECK(read_file(file) == before);
  testing::CommandResult revoked =
      testing::run_command({"/usr/bin/prlimit", "--fsize=10", GATEWAYCTL_PATH, "token", "revoke",
                            "--tokens-file", file, "--tenant", "team_a", "--name", "gone"},
                           testing::ChildEnv{{"GATEWAY_"}, {}});
  CHECK(revoked.status.exited);
  CHECK(revoked.status.code == 1);
  CHECK(revoked.err ==
        "gatewayctl: cannot write " + file + ": File too large; no token was revoked\n");
  CHECK(read_file(file) == before);
  CHECK_FALSE(revoke_scratch_left(file));
}

// A FIFO in the file's place held a revoke's open until a writer came: for good.
TEST_CASE("gatewayctl token revoke of a FIFO says it is no regular file") {
  testing::TempDir dir;
  const std::string fifo = dir.file("tokens");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  testing::CommandResult r =
      testing::run_command({GATEWAYCTL_PATH, "token", "revoke", "--tokens-file", fifo, "--tenant",
                            "team_a", "--name", "x"},
                           testing::ChildEnv{{"GATEWAY_"}, {}}, std::chrono::seconds(10));
  CHECK_FALSE(r.status.timed_out);
  CHECK(r.status.code == 1);
  CHECK(r.err == "gatewayctl: " + fifo + " is not a regular file\n");
}

// A tokens file given by a symlink (a path kept stable across deployments, say) stays one: the
// file it leads to is the one replaced.
TEST_CASE("gatewayctl token revoke through a symlink replaces the file it leads to") {
  Server server;
  const std::string file = server.tokens_file();
  const std::string link = server.data_dir() + "/tokens-link";
  REQUIRE(::symlink(file.c_str(), link.c_str()) == 0);
  const std::string gone = server.new_token(kTeamA, "gone");
  testing::CommandResult r =
      testing::run_command({GATEWAYCTL_PATH, "token", "revoke", "--tokens-file", link, "--tenant",
                            "team_a", "--name", "gone"},
                           testing::ChildEnv{{"GATEWAY_"}, {}});
  INFO(r.err);
  CHECK(r.status.success());
  struct stat st {};
  REQUIRE(::lstat(link.c_str(), &st) == 0);
  CHECK(S_ISLNK(st.st_mode));
  CHECK_FALSE(holds_token(read_file(file), gone));
  CHECK(status_once(server, gone, 401) == 401);
  CHECK(Api(server, kTeamA).get("/v1/webhook").status == 200);
}

// Whether a process waits for a lock on the file of inode `inode` (a blocked lock of /proc/locks
// is listed after "->").
bool lock_waited_for(ino_t inode) {
  std::ifstream locks("/proc/locks");
  const std::string at = ":" + std::to_string(inode) + " ";
  for (std::string line; std::getline(locks, line);) {
    if (line.find("-> FLOCK") != std::string::npos && line.find(at) != std::string::npos) {
      return true;
    }
  }
  return false;
}

// gatewayctl locked the file it had opened and appended to it, without looking whether the path
// still named it: a revoke's rename (as `sed -i`'s) while it waited for the lock sent its line
// into the file replaced, and it printed a token that was never accepted (helper 74: 10 of 90).
TEST_CASE(
    "a token create that waited for the lock while the file was replaced writes the new one") {
  Server server;
  const std::string file = server.tokens_file();
  const int held = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(held >= 0);
  REQUIRE(::flock(held, LOCK_EX) == 0);
  struct stat st {};
  REQUIRE(::fstat(held, &st) == 0);
  testing::ChildProcess create;
  create.spawn({GATEWAYCTL_PATH, "token", "create", "--tokens-file", file, "--tenant", "team_a",
                "--name", "waited"},
               testing::ChildEnv{{"GATEWAY_"}, {}});
  bool waits = false;
  for (int i = 0; i < 500 && !(waits = lock_waited_for(st.st_ino)); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  REQUIRE(waits);
  // Replaced as a revoke replaces it: a copy renamed over it.
  const std::string copy = file + ".copy";
  std::ofstream(copy) << read_file(file);
  REQUIRE(::chmod(copy.c_str(), 0600) == 0);
  REQUIRE(::rename(copy.c_str(), file.c_str()) == 0);
  ::close(held);
  testing::ExitStatus done = create.wait(std::chrono::seconds(10));
  REQUIRE(done.success());
  const std::string token = testing::trim(create.output());
  REQUIRE(token.starts_with("gw_"));
  CHECK(holds_token(read_file(file), token));
  CHECK(Api(server, token, std::string(kTeamA)).get("/v1/webhook").status == 200);
}

// Creates and revokes at once on one file: each takes the lock in turn, and none undoes another.
TEST_CASE("token creates and revokes at once: every token made is kept, every one revoked goes") {
  Server server;
  const std::string file = server.tokens_file();
  std::vector<std::string> revoked_tokens;
  for (int i = 0; i < 6; ++i) {
    revoked_tokens.push_back(server.new_token(kTeamA, "old" + std::to_string(i)));
  }
  std::vector<std::unique_ptr<testing::ChildProcess>> runs;
  for (int i = 0; i < 12; ++i) {
    auto run = std::make_unique<testing::ChildProcess>();
    if (i % 2 == 0) {
      run->spawn({GATEWAYCTL_PATH, "token", "create", "--tokens-file", file, "--tenant", "team_a",
                  "--name", "new" + std::to_string(i)},
                 testing::ChildEnv{{"GATEWAY_"}, {}});
    } else {
      run->spawn({GATEWAYCTL_PATH, "token", "revoke", "--tokens-file", file, "--tenant", "team_a",
                  "--name", "old" + std::to_string(i / 2)},
                 testing::ChildEnv{{"GATEWAY_"}, {}});
    }
    runs.push_back(std::move(run));
  }
  std::vector<std::string> made;
  for (size_t i = 0; i < runs.size(); ++i) {
    CAPTURE(i);
    CHECK(runs[i]->wait(std::chrono::seconds(30)).success());
    if (i % 2 == 0) made.push_back(testing::trim(runs[i]->output()));
  }
  const std::string text = read_file(file);
  for (const std::string& token : made) {
    CHECK(holds_token(text, token));
    CHECK(Api(server, token, std::string(kTeamA)).get("/v1/webhook").status == 200);
  }
  for (const std::string& token : revoked_tokens) CHECK_FALSE(holds_token(text, token));
  CHECK(status_once(server, revoked_tokens[0], 401) == 401);
  CHECK(Api(server, kTeamA).get("/v1/webhook").status == 200);  // the fixture's token stays
}

// A restore that left the tokens file behind, or a mistyped --tokens-file, was 401 for every
// request and not a line on stderr.
TEST_CASE("a missing tokens file is said once; a token made in it later is accepted") {
  testing::TempDir elsewhere;
  const std::string file = elsewhere.file("tokens");
  Server server({"--tokens-file", file});
  const std::string said = "gatewayd: no token accepted: " + file +
                           ": No such file or directory (gatewayctl token create --tokens-file " +
                           file + " makes it)";
  REQUIRE(server.wait_for_line(said));
  // The fixture's tokens are in the data dir's file, which --tokens-file replaced.
  CHECK(Api(server, kTeamA).get("/v1/webhook").status == 401);
  CHECK(Api(server, kTeamA).get("/v1/webhook").status == 401);
  const std::string late =
      testing::create_token(GATEWAYCTL_PATH, file, std::string(kTeamA), "after-restore");
  CHECK(Api(server, late, std::string(kTeamA)).get("/v1/webhook").status == 200);
  // The operator who read the line above learns that it is over (helper 123: nothing said so).
  CHECK(server.wait_for_line("gatewayd: tokens accepted again: " + file + " read, 1 token"));
  const std::string out = server.output();
  CHECK(out.find(said) == out.rfind(said));  // once, however many requests looked
}

// X-Tenant-ID and Idempotency-Key kept a trailing blank before (403, a new key); Authorization and
// If-Match were already trimmed where they are parsed, and stay so.
TEST_CASE("blanks around header values are not part of them (RFC 9110 5.5)") {
  Server server;
  HttpClient http;
  const std::string tenant(kTeamA);
  Response created =
      http.request("POST", server.url() + "/v1/webhook",
                   {{"Authorization", "Bearer " + server.token(kTeamA) + " \t"},
                    {"X-Tenant-ID", tenant + " \t"},
                    {"Content-Type", "application/json"},
                    {"Idempotency-Key", "key-1 "}},
                   webhook_body(kTeamA, "w-blanks"));
  INFO(created.body);
  REQUIRE(created.status == 201);
  const std::string id = json(created)["webhook_id"].GetString();
  const std::string etag = created.header("ETag").value_or("");
  REQUIRE(!etag.empty());
  // The same key without the blank replays the first answer.
  Response again = http.request("POST", server.url() + "/v1/webhook",
                                {{"Authorization", "Bearer " + server.token(kTeamA)},
                                 {"X-Tenant-ID", tenant},
                                 {"Content-Type", "application/json"},
                                 {"Idempotency-Key", "key-1"}},
                                webhook_body(kTeamA, "w-blanks"));
  CHECK(again.status == 201);
  CHECK(json(again)["webhook_id"].GetString() == id);
  Response got = http.request(
      "GET", server.url() + "/v1/webhook/" + id,
      {{"Authorization", "Bearer " + server.token(kTeamA) + " "}, {"X-Tenant-ID", tenant + " "}});
  CHECK(got.status == 200);
  Response removed = http.request("DELETE", server.url() + "/v1/webhook/" + id,
                                  {{"Authorization", "Bearer " + server.token(kTeamA)},
                                   {"X-Tenant-ID", tenant},
                                   {"If-Match", etag + "\t"}});
  INFO(removed.body);
  CHECK(removed.status == 200);
}

}  // namespace
}  // namespace gw::itest::auth_test
