// gatewayctl's audit and recovery commands against a real gatewayd: events, rebuild, replay,
// check (also on tampered copies of a data dir), backup while the server takes writes, and a
// schema-1 log served with scope subtree.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include "integration/fixture.h"
#include "store/store.h"
#include "support/event_log.h"

namespace gw::itest::admin_test {
namespace {

namespace fs = std::filesystem;

constexpr const char* kGatewayd = GATEWAYD_PATH;
constexpr const char* kGatewayctl = GATEWAYCTL_PATH;
constexpr std::string_view kClosedDns = "GATEWAY_DNS_SERVERS=127.0.0.1:1";

testing::CommandResult ctl(const std::vector<std::string>& args) {
  // Built by appending: GCC 12 at -O3 reports a false -Wnull-dereference on an insert at begin().
  std::vector<std::string> argv{kGatewayctl};
  argv.insert(argv.end(), args.begin(), args.end());
  return testing::run_command(argv, {}, std::chrono::seconds(120));
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// The global sequence number of the last event, from both teams' feeds (every event belongs to
// one).
int64_t last_seq(Api& a, Api& b) {
  int64_t last = 0;
  for (Api* api : {&a, &b}) {
    Response r = api->get("/v1/events?after=0&limit=1000");
    REQUIRE(r.status == 200);
    last = std::max(last, num(json(r), "next_after"));
  }
  return last;
}

// Every live record of every kind as the API lists it, per team, re-serialized.
std::vector<std::string> all_listed(Api& a, Api& b) {
  std::vector<std::string> out;
  for (Api* api : {&a, &b}) {
    for (const Kind* kind : kKinds) {
      Response r = api->get(std::string(kind->path) + "?per_page=100");
      REQUIRE(r.status == 200);
      const rapidjson::Document page = json(r);
      for (const auto* item : items(field(page, "data"))) out.push_back(testing::to_json(*item));
    }
  }
  return out;
}

// Creates, edits and deletes a few records of each kind for team `n`.
std::vector<std::string> churn(Api& api, int n) {
  std::vector<std::string> paths;
  for (const Kind* kind : kKinds) {
    for (int i = 0; i < 3; ++i) {
      std::string id = create(api, *kind, n * 10 + i);
      paths.push_back(item_path(*kind, id));
    }
    const std::string edited =
        testing::json_with(kind->body(api.team(), n * 10), kind->edit_field, kind->edit_value);
    CHECK(api.put(paths[paths.size() - 3], edited).status == 200);
    CHECK(api.del(paths[paths.size() - 2]).status == 200);
  }
  return paths;
}

// The answers a client sees: each record (status, ETag, body), its history, and the lists.
std::vector<std::string> answers(Api& api, const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  for (const auto& path : paths) {
    Response r = api.get(path);
    out.push_back(path + " " + std::to_string(r.status) + " " + r.header("ETag").value_or("") +
                  " " + r.body);
    out.push_back(api.get(path + "/history").body);
  }
  for (const Kind* kind : kKinds)
    out.push_back(api.get(std::string(kind->path) + "?per_page=100").body);
  return out;
}

// Creates `n` webhooks (workload ids wl-0, wl-1, ...) as the api's team.
void create_webhooks(Api& api, int n) {
  for (int i = 0; i < n; ++i) {
    REQUIRE(api.post("/v1/webhook", webhook_body(api.team(), "wl-" + std::to_string(i))).status ==
            201);
  }
}

// gatewayd started on `dir` (with `server`'s tokens), which must refuse it: exit 1.
testing::CommandResult start_refused(const Server& server, const std::string& dir) {
  testing::CommandResult run =
      testing::run_command({kGatewayd, "--listen", "127.0.0.1:0", "--data-dir", dir,
                            "--tokens-file", server.tokens_file()},
                           testing::ChildEnv{{"GATEWAY_"}, {}}, std::chrono::seconds(10));
  CAPTURE(run.err);
  CHECK(run.status.describe() == "exit 1");
  return run;
}

// Copies a stopped server's data dir and edits one key of `cf` in the copy.
void tamper(const std::string& from, const std::string& to, Cf cf, const std::string& key,
            const std::function<void(std::string*)>& edit) {
  fs::copy(from, to, fs::copy_options::recursive);
  auto store = Store::open(to);
  REQUIRE(store.ok());
  auto value = store.value()->get(cf, key);
  REQUIRE(value.ok());
  REQUIRE(value.value().has_value());
  std::string changed = *value.value();
  edit(&changed);
  REQUIRE(changed != *value.value());
  REQUIRE(
      store.value()->db()->Put(rocksdb::WriteOptions(), store.value()->cf(cf), key, changed).ok());
}

TEST_CASE("events prints the log as NDJSON, the same events /v1/events serves") {
  Server server;
  Api a(server, kTeamA);
  Api b(server, kTeamB);
  churn(a, 1);
  churn(b, 2);
  std::map<int64_t, std::string> served;
  for (Api* api : {&a, &b}) {
    Response r = api->get("/v1/events?limit=1000");
    REQUIRE(r.status == 200);
    const rapidjson::Document feed = json(r);
    for (const auto* e : items(field(feed, "data"))) served[num(*e, "seq")] = testing::to_json(*e);
  }
  auto all = ctl({"events", "--data-dir", server.data_dir()});
  INFO(all.err);
  REQUIRE(all.status.success());
  const auto lines = lines_of(all.out);
  REQUIRE(lines.size() == served.size());
  int64_t seq = 0;
  for (const auto& line : lines) {
    CHECK(num(testing::parse_json(line), "seq") == ++seq);
    CHECK(line == served[seq]);
  }
  auto tail = ctl({"events", "--data-dir", server.data_dir(), "--after", std::to_string(seq - 2)});
  REQUIRE(tail.status.success());
  CHECK(lines_of(tail.out) == std::vector<std::string>{served[seq - 1], served[seq]});
  CHECK(ctl({"events", "--data-dir", server.data_dir(), "--after", "-3"}).status.code == 2);
  // A flag given twice is a usage error: the last one was taken, here the data dir.
  auto twice =
      ctl({"events", "--data-dir", server.data_dir() + "/absent", "--data-dir", server.data_dir()});
  CHECK(twice.status.code == 2);
  CHECK(twice.err.find("gatewayctl: --data-dir is given more than once") != std::string::npos);
  // A command it does not know is named (only the usage was printed).
  auto unknown = ctl({"evnets", "--data-dir", server.data_dir()});
  CHECK(unknown.status.code == 2);
  CHECK(unknown.err.starts_with("gatewayctl: unknown command evnets\nusage:\n"));
  CHECK(ctl({"token", "list"}).err.starts_with("gatewayctl: unknown command token list\n"));
  CHECK(twice.out.empty());
  // A required flag given empty is named as such, not as left out (helper 56).
  auto left_out = ctl({"events"});
  CHECK(left_out.status.code == 2);
  CHECK(left_out.err.starts_with("gatewayctl: --data-dir is required\n"));
  // The data dir may come from GATEWAY_DATA_DIR, as gatewayd's does; the flag wins.
  testing::ChildEnv from_env;
  from_env.add.push_back("GATEWAY_DATA_DIR=" + server.data_dir());
  auto by_env = testing::run_command({kGatewayctl, "events"}, from_env);
  CHECK(by_env.status.success());
  CHECK(by_env.out == all.out);
  auto flag_wins = testing::run_command(
      {kGatewayctl, "events", "--data-dir", server.data_dir() + "/absent"}, from_env);
  CHECK(flag_wins.status.code == 1);
  CHECK(flag_wins.out.empty());
  auto empty = ctl({"events", "--data-dir", ""});
  CHECK(empty.status.code == 2);
  CHECK(empty.err.starts_with("gatewayctl: --data-dir must not be empty\n"));
  // The last event: nothing after it, exit 0. Past it (sequence numbers go up to 2^64 - 1) is a
  // checkpoint from another log, or from this one before an older backup was restored: writing
  // nothing and exiting 0, the command had the auditor skip every event up to it.
  const std::string last = std::to_string(seq);
  auto none = ctl({"events", "--data-dir", server.data_dir(), "--after", last});
  CHECK(none.status.success());
  CHECK(none.out.empty());
  for (const std::string& after : {std::to_string(seq + 1), std::string("9223372036854775808"),
                                   std::string("18446744073709551615")}) {
    CAPTURE(after);
    auto past = ctl({"events", "--data-dir", server.data_dir(), "--after", after});
    CHECK(past.status.code == 1);
    CHECK(past.out.empty());
    CHECK(past.err == "gatewayctl: events: --after " + after +
                          " is past the end of the log (its last event is " + last + ")\n");
  }
  auto beyond = ctl({"events", "--data-dir", server.data_dir(), "--after", "18446744073709551616"});
  CHECK(beyond.status.code == 2);
  CHECK(beyond.err.find("--after must be a whole number from 0 to 18446744073709551615") !=
        std::string::npos);
}

// Killed by SIGPIPE when its reader went away (`| head`), gatewayctl left its scratch directory
// (the RocksDB secondary's LOG) in the temp directory, one more per run.
TEST_CASE("events and replay into a pipe its reader closed exit 1 quietly, scratch removed") {
  Server server;
  Api a(server, kTeamA);
  // Each record over 300 bytes: the events and the records are each well over the 64 KiB a pipe
  // holds, so a write fails once the reader has gone, whenever it goes.
  for (int i = 0; i < 300; ++i)
    REQUIRE(a.post("/v1/webhook", webhook_body(kTeamA, std::string(128, 'w'))).status == 201);
  const std::string tmp = server.data_dir() + "-tmp";
  std::filesystem::create_directories(tmp);
  auto piped = testing::run_command({"/bin/sh", "-c",
                                     "{ TMPDIR=" + tmp + " " + kGatewayctl + " events --data-dir " +
                                         server.data_dir() + "; echo exit $? >&2; } | head -c 10"},
                                    {}, std::chrono::seconds(60));
  INFO(piped.out, piped.err);
  CHECK(piped.out.starts_with("{\"seq\":1,"));
  // Exit 1 as for any failed write, but nothing on stderr: the reader only went away (a line
  // saying "Broken pipe" was noise in an ordinary pipeline, helper 78).
  CHECK(piped.err == "exit 1\n");
  CHECK(std::filesystem::is_empty(tmp));
  // So for a replay written into its stdout.
  auto replayed = testing::run_command(
      {"/bin/sh", "-c",
       "{ " + std::string(kGatewayctl) + " replay --data-dir " + server.data_dir() +
           " --until-seq 300 --out /dev/stdout; echo exit $? >&2; } | head -c 10"},
      {}, std::chrono::seconds(60));
  INFO(replayed.err);
  CHECK(replayed.out == "{\"until_se");
  CHECK(replayed.err == "exit 1\n");
  // Any other failed write is told, a report's too (check exited 0 with its report lost).
  for (const auto& [command, told] :
       {std::pair<std::string, std::string>{"events", "cannot write the events"},
        {"check", "cannot write its report"}}) {
    CAPTURE(command);
    auto full = testing::run_command({"/bin/sh", "-c",
                                      std::string(kGatewayctl) + " " + command + " --data-dir " +
                                          server.data_dir() + " > /dev/full"},
                                     {}, std::chrono::seconds(60));
    CHECK(full.status.code == 1);
    CHECK(full.err == "gatewayctl: " + command + ": " + told + ": No space left on device\n");
  }
  std::filesystem::remove_all(tmp);
}

// A server on which both teams churned records, and the answers their clients saw then.
struct Churned {
  Server server;
  Api a{server, kTeamA};
  Api b{server, kTeamB};
  const std::vector<std::string> paths_a = churn(a, 1);
  const std::vector<std::string> paths_b = churn(b, 2);
  const std::vector<std::string> before_a = answers(a, paths_a);
  const std::vector<std::string> before_b = answers(b, paths_b);
  // The clients see the same answers now.
  void check_answers() {
    CHECK(answers(a, paths_a) == before_a);
    CHECK(answers(b, paths_b) == before_b);
  }
};

// Started on a data dir a newer release had written, a release before the data format mark rebuilt
// the read model in its own layout, served what it made of the log, and sent the Kafka mirror's
// events again from the first (helper 119). A dir marked with a newer format stops gatewayd and
// every gatewayctl command that opens it, before anything in it changes.
TEST_CASE("a data dir of a newer data format stops gatewayd and gatewayctl, and nothing changes") {
  Server server;
  Api api(server, kTeamA);
  create_webhooks(api, 3);
  REQUIRE(server.stop().success());
  const std::string dir = server.data_dir();
  const std::string mark = dir + "/GATEWAYD-FORMAT";
  CHECK(testing::read_file(mark) == "1\n");
  std::ofstream(mark, std::ios::trunc) << "2\n";
  const auto before = testing::dir_state(dir);
  const std::string newer =
      ": it holds data of format 2 (GATEWAYD-FORMAT), which a newer gatewayd wrote; this one reads "
      "formats up to 1. Run that gatewayd, or restore the backup taken before the upgrade\n";
  const testing::CommandResult run = start_refused(server, dir);
  CAPTURE(run.err);
  CHECK(run.err.ends_with("gatewayd: cannot open " + dir + newer));
  testing::TempDir parent;
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"check"},
        {"events"},
        {"waf-check"},
        {"replay", "--until-seq", "1", "--out", parent.path() + "/replay.json"},
        {"backup", "--out", parent.path() + "/copy"},
        {"rebuild"}}) {
    std::vector<std::string> argv = args;
    argv.insert(argv.begin() + 1, {"--data-dir", dir});
    auto refused = ctl(argv);
    CAPTURE(args[0]);
    CAPTURE(refused.err);
    CHECK(refused.status.describe() == "exit 1");
    const std::string opened =
        args[0] == "rebuild" ? "cannot open " + dir + " for writing" : "cannot read " + dir;
    CHECK(refused.err == "gatewayctl: " + args[0] + ": " + opened + newer);
  }
  CHECK(testing::dir_state(dir) == before);
  CHECK_FALSE(fs::exists(parent.path() + "/replay.json"));
  CHECK_FALSE(fs::exists(parent.path() + "/copy"));
  // Marked with its own format again, it is all there.
  std::ofstream(mark, std::ios::trunc) << "1\n";
  server.restart();
  CHECK(num(field(json(api.get("/v1/webhook")), "pagination"), "total") == 3);
}

// An upgrade's first start rebuilt a read model of an older layout without a word, and check on
// such a dir named its first key as if it were damage (helper 119).
TEST_CASE("a read model of another layout: check says so, and gatewayd's start rebuilds it") {
  Churned fx;
  Server& server = fx.server;
  REQUIRE(server.stop().success());
  const std::string data = server.data_dir();
  {
    auto store = Store::open(data);
    REQUIRE(store.ok());
    auto* cf = store.value()->cf(Cf::kProjections);
    const std::string checkpoint(
        "m\0checkpoint\0"
        "3",
        14);  // keys::checkpoint(), layout 3
    auto at = store.value()->get(Cf::kProjections, checkpoint);
    REQUIRE(at.ok());
    REQUIRE(at.value().has_value());
    REQUIRE(store.value()->db()->Delete(rocksdb::WriteOptions(), cf, checkpoint).ok());
    REQUIRE(store.value()
                ->db()
                ->Put(rocksdb::WriteOptions(), cf,
                      std::string("m\0checkpoint\0"
                                  "2",
                                  14),
                      *at.value())
                .ok());
  }
  auto stale = ctl({"check", "--data-dir", data});
  CHECK(stale.status.describe() == "exit 1");
  CHECK(stale.out ==
        "check: FAIL: projections: the read model is of layout 2, not this release's 3: gatewayd "
        "rebuilds it when it starts, as gatewayctl rebuild does\n");
  server.restart();
  CHECK(server.wait_for_line(
      "gatewayd: the read model was of layout 2, not this release's 3: rebuilt from the log's 30 "
      "events"));
  fx.check_answers();
  REQUIRE(server.stop().success());
  CHECK(ctl({"check", "--data-dir", data}).status.success());
  // The next start has nothing of the kind to say (it printed what it had to before it listened).
  server.restart();
  fx.check_answers();
  CHECK(server.output().find("the read model was of layout") == std::string::npos);
}

TEST_CASE("rebuild replays the log into the same API answers, and only with the server stopped") {
  Churned fx;
  Server& server = fx.server;
  auto refused = ctl({"rebuild", "--data-dir", server.data_dir()});
  CHECK(refused.status.code == 1);
  CHECK(refused.err.find("stop gatewayd first") != std::string::npos);

  REQUIRE(server.stop().success());
  auto rebuilt = ctl({"rebuild", "--data-dir", server.data_dir()});
  INFO(rebuilt.out, rebuilt.err);
  REQUIRE(rebuilt.status.success());
  CHECK(rebuilt.out.find("rebuild: 30 events replayed in ") != std::string::npos);
  CHECK(rebuilt.out.find(" events/s, folded in memory)\n") != std::string::npos);  // auto, here
  CHECK(rebuilt.out.find("live gateway_security_profile=4 domain=4 webhook=4 deleted=6") !=
        std::string::npos);
  server.restart();
  fx.check_answers();
  CHECK(ctl({"check", "--data-dir", server.data_dir()}).status.success());
}

// rebuild dropped the read model before it wrote the new one's table files, so a full disk left
// none (helper 81); gatewayd replayed the log at its next start.
TEST_CASE("a rebuild whose table files cannot be written leaves the read model as it was") {
  Server server;
  Api a(server, kTeamA);
  create_webhooks(a, 1000);
  REQUIRE(server.stop().success());
  // 20 KB: the database opens (its OPTIONS file is about 15 KB), the records' table file does not
  // fit.
  testing::ChildEnv full_disk{{}, {}, 20 << 10};
  for (const std::string place : {"memory", "disk"}) {
    CAPTURE(place);
    auto rebuilt = testing::run_command(
        {kGatewayctl, "rebuild", "--data-dir", server.data_dir(), "--fold", place}, full_disk,
        std::chrono::seconds(60));
    INFO(rebuilt.out, rebuilt.err);
    CHECK(rebuilt.status.describe() == "exit 1");
    CHECK(rebuilt.err.find("rebuild.tmp/") != std::string::npos);
    CHECK(rebuilt.err.find("File too large") != std::string::npos);
    CHECK_FALSE(fs::exists(server.data_dir() + "/rebuild.tmp"));
    auto checked = ctl({"check", "--data-dir", server.data_dir()});
    INFO(checked.out);
    CHECK(checked.out.starts_with("check: OK: 1000 events"));
  }
}

// A rebuild stopped by Ctrl-C (SIGINT) while it writes the new read model's table files removes
// them and its fold on disk (admin/interrupt_cleanup.h) and ends by that signal; the data dir
// stays usable: gatewayd starts on it (replaying the log if the old read model was dropped
// already) and answers as before.
TEST_CASE("a rebuild interrupted while it writes leaves no rebuild.tmp or fold.tmp") {
  Server server;
  Api a(server, kTeamA);
  create_webhooks(a, 999);
  Response made = a.post("/v1/webhook", webhook_body(kTeamA, "last"));
  REQUIRE(made.status == 201);
  const std::string path = item_path(kWebhook, str(json(made), "webhook_id"));
  REQUIRE(server.stop().success());
  const std::string data = server.data_dir();
  // The table files are written for a few milliseconds: the child is stopped (SIGSTOP) as soon
  // as their directory is seen, interrupted, then let go. A rebuild that ended before it was
  // seen is tried again.
  bool caught = false;
  for (int attempt = 0; attempt < 5 && !caught; ++attempt) {
    testing::ChildProcess child;
    child.spawn({kGatewayctl, "rebuild", "--data-dir", data, "--fold", "disk"});
    while (child.running() && !fs::exists(data + "/rebuild.tmp")) {
    }
    if (!child.running()) continue;
    REQUIRE(::kill(child.pid(), SIGSTOP) == 0);
    caught = fs::exists(data + "/rebuild.tmp") && fs::exists(data + "/fold.tmp");
    REQUIRE(::kill(child.pid(), caught ? SIGINT : SIGCONT) == 0);
    if (caught) REQUIRE(::kill(child.pid(), SIGCONT) == 0);
    const testing::ExitStatus status = child.wait(std::chrono::seconds(30));
    INFO(child.output());
    if (caught) CHECK(status.signal == SIGINT);
  }
  REQUIRE(caught);
  CHECK_FALSE(fs::exists(data + "/rebuild.tmp"));
  CHECK_FALSE(fs::exists(data + "/fold.tmp"));
  server.restart();
  Response got = a.get(path);
  CHECK(got.status == 200);
  CHECK(got.body == made.body);
  CHECK(num(field(json(a.get("/v1/webhook?per_page=1")), "pagination"), "total") == 1000);
  REQUIRE(server.stop().success());
  auto checked = ctl({"check", "--data-dir", data});
  INFO(checked.out, checked.err);
  CHECK(checked.out.starts_with("check: OK: 1000 events"));
}

// A log too large for the memory there is is folded on disk (projections/fold.h); --fold disk
// makes any log take that path.
// The new read model's table files go in after the old one is dropped; a failure there (an
// injected EIO on the first table file's link into the data dir) left an empty read model that
// only `check` told of, and the message said nothing of it.
TEST_CASE("a rebuild that fails once the old read model is dropped says so, and a start mends it") {
  Server server;
  Api api(server, kTeamA);
  for (int i = 0; i < 3; ++i) {
    REQUIRE(api.post("/v1/webhook", webhook_body(kTeamA, "wl" + std::to_string(i))).status == 201);
  }
  REQUIRE(server.stop().success());
  auto failed = testing::run_command(
      {"/usr/bin/strace", "-f", "-qq", "-o", "/dev/null", "-e", "trace=link", "-e",
       "inject=link:error=EIO:when=1", kGatewayctl, "rebuild", "--data-dir", server.data_dir()},
      testing::ChildEnv{{"GATEWAY_"}, traced_env()}, std::chrono::seconds(60));
  CHECK(failed.status.code == 1);
  CHECK(failed.err.find("Input/output error; the old read model was dropped before this failure: "
                        "run gatewayctl rebuild again, or start gatewayd, which builds it from "
                        "the log") != std::string::npos);
  CHECK(ctl({"check", "--data-dir", server.data_dir()}).status.code == 1);
  server.restart();
  CHECK(num(field(json(Api(server, kTeamA).get("/v1/webhook")), "pagination"), "total") == 3);
  REQUIRE(server.stop().success());
  CHECK(ctl({"check", "--data-dir", server.data_dir()}).status.code == 0);
}

TEST_CASE("rebuild, check, replay and gatewayd's start fold the log on disk as in memory") {
  Churned fx;
  Server& server = fx.server;
  REQUIRE(server.stop().success());
  const std::string data = server.data_dir();

  auto bad = ctl({"check", "--data-dir", data, "--fold", "Disk"});
  CHECK(bad.status.code == 2);
  CHECK(bad.err == "gatewayctl: --fold must be auto, memory or disk\n");

  auto rebuilt = ctl({"rebuild", "--data-dir", data, "--fold", "disk"});
  INFO(rebuilt.out, rebuilt.err);
  REQUIRE(rebuilt.status.success());
  CHECK(rebuilt.err ==
        "gatewayctl: the log's 30 events are folded on disk in " + data + "/fold.tmp: as asked\n");
  CHECK(rebuilt.out.find(" events/s, folded on disk)\n") != std::string::npos);
  CHECK(rebuilt.out.find("live gateway_security_profile=4 domain=4 webhook=4 deleted=6") !=
        std::string::npos);
  CHECK_FALSE(fs::exists(data + "/fold.tmp"));
  auto in_memory = ctl({"rebuild", "--data-dir", data, "--fold", "memory"});
  CHECK(in_memory.err.empty());
  CHECK(in_memory.out.find(" events/s, folded in memory)\n") != std::string::npos);

  // check and replay: the same output either way; the fold on disk goes under $TMPDIR.
  auto checked_memory = ctl({"check", "--data-dir", data, "--fold", "memory"});
  auto checked_disk = ctl({"check", "--data-dir", data, "--fold", "disk"});
  CHECK(checked_memory.status.success());
  CHECK(checked_disk.status.success());
  CHECK(checked_disk.out == checked_memory.out);
  CHECK(checked_disk.err.starts_with("gatewayctl: the log's 30 events are folded on disk in " +
                                     fs::temp_directory_path().string() + "/gatewayctl-"));
  testing::TempDir out;
  for (const std::string until : {"0", "7", "30"}) {
    CAPTURE(until);
    auto r1 = ctl({"replay", "--data-dir", data, "--until-seq", until, "--out", out.file("memory"),
                   "--fold", "memory"});
    auto r2 = ctl({"replay", "--data-dir", data, "--until-seq", until, "--out", out.file("disk"),
                   "--fold", "disk"});
    REQUIRE(r1.status.success());
    REQUIRE(r2.status.success());
    std::ostringstream on_disk;
    std::ostringstream in_memory_text;
    on_disk << std::ifstream(out.file("disk")).rdbuf();
    in_memory_text << std::ifstream(out.file("memory")).rdbuf();
    CHECK(on_disk.str() == in_memory_text.str());
    if (until == "30") CHECK(on_disk.str().find("\"webhook_id\"") != std::string::npos);
  }

  // Records written to stderr: the note goes to stdout with the summary (helper 81: it ran into
  // the JSON).
  auto to_stderr = ctl({"replay", "--data-dir", data, "--until-seq", "30", "--out", "/dev/stderr",
                        "--fold", "disk"});
  REQUIRE(to_stderr.status.success());
  CHECK_FALSE(testing::parse_json(to_stderr.err).HasParseError());
  CHECK(to_stderr.out.starts_with("gatewayctl: the log's 30 events are folded on disk in "));
  CHECK(to_stderr.out.find("\nreplay: ") != std::string::npos);

  // gatewayd with no read model (as after an upgrade to a new layout) rebuilds it on disk.
  {
    auto store = Store::open(data);
    REQUIRE(store.ok());
    REQUIRE(store.value()->reset_projections().ok());
  }
  server.restart_with({"--fold", "disk"});
  CHECK(
      server.wait_for_line("gatewayd: no read model to start with: the log's 30 events are "
                           "folded on disk in " +
                           data + "/fold.tmp: as asked"));
  fx.check_answers();
  CHECK_FALSE(fs::exists(data + "/fold.tmp"));
  REQUIRE(server.stop().success());
  CHECK(ctl({"check", "--data-dir", data}).status.success());

  // What a rebuild killed half way left goes at the next start, read model or not.
  for (const char* left : {"/fold.tmp/000001.log", "/rebuild.tmp/part1-1.sst"}) {
    fs::create_directories(fs::path(data + left).parent_path());
    std::ofstream(data + left) << "left";
  }
  server.restart();
  CHECK(fx.a.get(fx.paths_a[0]).status == 200);
  CHECK_FALSE(fs::exists(data + "/fold.tmp"));
  CHECK_FALSE(fs::exists(data + "/rebuild.tmp"));
}

// `count` members "r0", "r1", ... of pseudo-random doubles over many magnitudes, each written
// with 17 digits, a comma before each.
std::string random_doubles(int count) {
  std::mt19937_64 random(20261128);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::string out;
  for (int i = 0; i < count; ++i) {
    char number[40];
    std::snprintf(number, sizeof number, "%.17g", unit(random) * std::pow(10.0, i % 40 - 20));
    out += ",\"r" + std::to_string(i) + "\":" + number;
  }
  return out;
}

// RapidJSON's default reading of a number is off by up to a few units in the last place; the
// records and events gatewayd read back were parsed that way, so a number stored as
// 0.30000000000000007 came back as 0.3000000000000001: in `as_of` reads, in the event of a delete
// (which starts from the stored record), after a rebuild, and `check` failed on an untouched log.
TEST_CASE("numbers of waf_overrides read back as stored: as_of, a delete's event, rebuild, check") {
  Server server;
  Api a(server, kTeamA);
  Api b(server, kTeamB);
  // Doubles whose shortest text RapidJSON's default reading gets wrong, and some that it reads
  // right, between them.
  const std::string overrides =
      R"({"a":0.30000000000000004,"b":2.2250738585072014e-308,"c":9007199254740993.0,)"
      R"("d":0.1,"e":1.7976931348623157e308,"f":5e-324,"g":123456.78901234567,)"
      R"("h":0.000123456789012345678,"i":-4.35e-5)" +
      random_doubles(64) + "}";
  auto body_with_overrides = [&](const std::string& hostname) {
    std::string body = profile_body(kTeamA, hostname);
    body.pop_back();
    return body + R"(,"waf_overrides":)" + overrides + "}";
  };
  Response kept = a.post("/v1/gateway_security_profile", body_with_overrides("kept.example.com"));
  REQUIRE(kept.status == 201);
  Response gone = a.post("/v1/gateway_security_profile", body_with_overrides("gone.example.com"));
  REQUIRE(gone.status == 201);
  const std::string kept_path = item_path(kProfile, str(json(kept), kProfile.id_field));
  const std::string gone_path = item_path(kProfile, str(json(gone), kProfile.id_field));
  // Compared as text: a test's own parse of two texts could give one double.
  auto overrides_in = [](const std::string& text) {
    std::vector<std::string> out;
    const std::string member = R"("waf_overrides":{)";
    for (size_t at = text.find(member); at != std::string::npos; at = text.find(member, at + 1)) {
      out.push_back(text.substr(at, text.find('}', at) + 1 - at));
    }
    return out;
  };
  const std::vector<std::string> stored = overrides_in(kept.body);
  REQUIRE(stored.size() == 1);

  const int64_t seq = last_seq(a, b);
  Response then = a.get(kept_path + "?as_of=" + std::to_string(seq));
  REQUIRE(then.status == 200);
  CHECK(then.body == kept.body);

  REQUIRE(a.del(gone_path).status == 200);
  Response history = a.get(gone_path + "/history");
  REQUIRE(history.status == 200);
  CHECK(overrides_in(history.body) == std::vector<std::string>{stored[0], stored[0]});

  REQUIRE(server.stop().success());
  auto check = ctl({"check", "--data-dir", server.data_dir()});
  INFO(check.out, check.err);
  CHECK(check.status.success());
  REQUIRE(ctl({"rebuild", "--data-dir", server.data_dir()}).status.success());
  server.restart();
  Response rebuilt = a.get(kept_path);
  REQUIRE(rebuilt.status == 200);
  CHECK(rebuilt.body == kept.body);
}

TEST_CASE("replay --until-seq gives the records as the API showed them at that point") {
  Server server;
  Api a(server, kTeamA);
  Api b(server, kTeamB);
  std::vector<std::pair<int64_t, std::vector<std::string>>> seen;
  seen.emplace_back(0, all_listed(a, b));
  std::vector<std::string> paths;
  for (int step = 0; step < 4; ++step) {
    Api& api = step % 2 == 0 ? a : b;
    for (const Kind* kind : kKinds) paths.push_back(item_path(*kind, create(api, *kind, step)));
    if (step >= 2) {
      const Kind& kind = *kKinds[step % 3];
      CHECK(
          api.put(paths[paths.size() - 3 + step % 3],
                  testing::json_with(kind.body(api.team(), step), kind.edit_field, kind.edit_value))
              .status == 200);
      CHECK(api.del(paths[paths.size() - 9 + step % 3]).status == 200);  // this team's, 2 steps ago
    }
    seen.emplace_back(last_seq(a, b), all_listed(a, b));
  }
  testing::TempDir out_dir;
  for (const auto& [seq, listed] : seen) {
    CAPTURE(seq);
    const std::string out = out_dir.file("replay-" + std::to_string(seq) + ".json");
    auto r = ctl({"replay", "--data-dir", server.data_dir(), "--until-seq", std::to_string(seq),
                  "--out", out});
    INFO(r.err);
    REQUIRE(r.status.success());
    // Every tenant's records: readable by its owner only (it was 0644 under the usual umask).
    struct stat file {};
    REQUIRE(::stat(out.c_str(), &file) == 0);
    CHECK((file.st_mode & 0777) == 0600);
    std::ifstream in(out);
    std::stringstream text;
    text << in.rdbuf();
    auto doc = testing::parse_json(text.str());
    CHECK(num(doc, "until_seq") == seq);
    // The API lists per team and kind, oldest first; the replay lists by creation across all.
    std::vector<std::string> replayed;
    for (std::string_view team : {kTeamA, kTeamB}) {
      for (const Kind* kind : kKinds) {
        for (const auto* rec : items(field(doc, "records"))) {
          if (str(*rec, "team_id") == team && rec->HasMember(std::string(kind->id_field))) {
            replayed.push_back(testing::to_json(*rec));
          }
        }
      }
    }
    CHECK(replayed == listed);
  }
  const int64_t end = seen.back().first;
  auto past = ctl({"replay", "--data-dir", server.data_dir(), "--until-seq",
                   std::to_string(end + 1), "--out", out_dir.file("past.json")});
  CHECK(past.status.code == 1);
  CHECK(past.err.find("past the end of the log (its last event is " + std::to_string(end) + ")") !=
        std::string::npos);
  CHECK_FALSE(fs::exists(out_dir.file("past.json")));
  auto negative = ctl({"replay", "--data-dir", server.data_dir(), "--until-seq", "-1", "--out",
                       out_dir.file("negative.json")});
  CHECK(negative.status.code == 2);  // a usage error
  CHECK(negative.err.find("--until-seq must be a whole number from 0 to 18446744073709551615") !=
        std::string::npos);
  // A number past 2^63 is a sequence number too: past the end here, not a usage error.
  auto far = ctl({"replay", "--data-dir", server.data_dir(), "--until-seq", "18446744073709551615",
                  "--out", out_dir.file("far.json")});
  CHECK(far.status.code == 1);
  CHECK(far.err.find("past the end of the log") != std::string::npos);
  // A FILE that cannot be replaced (a directory): exit 1, and no temporary file is left next to it.
  const std::string dir_out = out_dir.file("a-directory");
  fs::create_directory(dir_out);
  auto into_dir =
      ctl({"replay", "--data-dir", server.data_dir(), "--until-seq", "1", "--out", dir_out});
  CHECK(into_dir.status.code == 1);
  CHECK(into_dir.err.find("cannot write " + dir_out) != std::string::npos);
  std::vector<std::string> left;
  for (const auto& entry : fs::directory_iterator(out_dir.path())) {
    left.push_back(entry.path().filename().string());
  }
  std::sort(left.begin(), left.end());
  INFO(left.size());
  std::vector<std::string> expected = {"a-directory"};
  for (const auto& [seq, listed] : seen)
    expected.push_back("replay-" + std::to_string(seq) + ".json");
  std::sort(expected.begin(), expected.end());
  CHECK(left == expected);

  // `--out` through a symlink replaces the file it points to, not the link; `--out` naming a
  // device or pipe (`/dev/stdout`) writes into it. A rename put a regular file in the link's place
  // (as root, `--out /dev/stdout` replaced /dev/stdout itself), and nothing reached the pipe.
  const std::string target = out_dir.file("target.json");
  { std::ofstream(target) << "old"; }
  const std::string link = out_dir.file("link.json");
  fs::create_symlink(target, link);
  auto via_link =
      ctl({"replay", "--data-dir", server.data_dir(), "--until-seq", "1", "--out", link});
  CHECK(via_link.status.code == 0);
  CHECK(fs::is_symlink(link));
  std::ostringstream replaced;
  replaced << std::ifstream(target).rdbuf();
  CHECK(replaced.str().starts_with("{\"until_seq\":1,"));
  // A link whose file does not exist yet (a relative one, into a directory of its own, through a
  // second link) gets that file, and the links stay; one to a directory is refused like the
  // directory. Both links were replaced by a regular file (helper 56).
  fs::create_directory(out_dir.file("sub"));
  const std::string first = out_dir.file("first.json");
  fs::create_symlink("second.json", first);
  fs::create_symlink("sub/new.json", out_dir.file("second.json"));
  auto dangling =
      ctl({"replay", "--data-dir", server.data_dir(), "--until-seq", "1", "--out", first});
  INFO(dangling.err);
  CHECK(dangling.status.code == 0);
  CHECK(fs::is_symlink(first));
  CHECK(fs::is_symlink(out_dir.file("second.json")));
  std::ostringstream created;
  created << std::ifstream(out_dir.file("sub/new.json")).rdbuf();
  CHECK(created.str().starts_with("{\"until_seq\":1,"));
  CHECK(fs::status(out_dir.file("sub/new.json")).permissions() ==
        (fs::perms::owner_read | fs::perms::owner_write));
  CHECK(dangling.out.find("written to " + fs::canonical(out_dir.file("sub")).string() +
                          "/new.json") != std::string::npos);
  const std::string to_dir = out_dir.file("dir-link");
  fs::create_symlink(dir_out, to_dir);
  auto via_dir_link =
      ctl({"replay", "--data-dir", server.data_dir(), "--until-seq", "1", "--out", to_dir});
  CHECK(via_dir_link.status.code == 1);
  CHECK(via_dir_link.err.find("is a directory") != std::string::npos);
  CHECK(fs::is_symlink(to_dir));
  CHECK(fs::is_empty(dir_out));
  const std::string to_stdout = out_dir.file("stdout");
  fs::create_symlink("/proc/self/fd/1", to_stdout);
  auto piped =
      ctl({"replay", "--data-dir", server.data_dir(), "--until-seq", "1", "--out", to_stdout});
  INFO(piped.err);
  CHECK(piped.status.code == 0);
  CHECK(fs::is_symlink(to_stdout));
  CHECK(piped.out.starts_with("{\"until_seq\":1,"));
  CHECK(piped.err.starts_with("replay: 1 record live after event 1 written to " + to_stdout));
  // Into stdout redirected to a regular file (`>> log`), the records go where the descriptor
  // writes, after what the file held, and the summary to stderr. /dev/stdout opened by name is
  // that file: it was replaced (a new file of mode 0600, "kept" gone) and the summary went into
  // the file it replaced (helper 62).
  const std::string log = out_dir.file("log");
  { std::ofstream(log) << "kept\n"; }
  fs::permissions(log, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  auto inode_of = [](const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
  };
  const ino_t inode = inode_of(log);
  REQUIRE(inode != 0);
  auto appended =
      testing::run_command({"/bin/sh", "-c",
                            std::string("exec ") + kGatewayctl + " replay --data-dir " +
                                server.data_dir() + " --until-seq 1 --out /dev/stdout >> " + log},
                           {}, std::chrono::seconds(120));
  INFO(appended.err);
  CHECK(appended.status.code == 0);
  std::ostringstream logged;
  logged << std::ifstream(log).rdbuf();
  CHECK(logged.str().starts_with("kept\n{\"until_seq\":1,"));
  CHECK(inode_of(log) == inode);
  CHECK(fs::status(log).permissions() ==
        (fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read));
  CHECK(appended.err.starts_with("replay: 1 record live after event 1 written to /dev/stdout"));
}

// The WAF policy applies to writes: a profile stored under an earlier release's policy keeps its
// text (replay never re-checks it). waf-check finds the live ones this release refuses; here an
// edited copy of a log stands for such a profile (one that reads the gateway's environment).
TEST_CASE("waf-check lists the live profiles whose directives this release's policy refuses") {
  Server server;
  Api a(server, kTeamA);
  Api b(server, kTeamB);
  auto custom = [](Api& api, const std::string& host, std::string_view directives) {
    const std::string body =
        testing::json_with(profile_body(api.team(), host), "waf_template", R"("custom")");
    Response r = api.post("/v1/gateway_security_profile",
                          testing::json_with(body, "waf_custom_directives", directives));
    INFO(r.body);
    REQUIRE(r.status == 201);
    return str(json(r), "profile_id");
  };
  custom(a, "kept.example.com", R"("SecRule ARGS \"@rx a\" \"id:1,phase:1,deny\"")");
  const std::string old =
      custom(b, "old.example.com", R"("SecRule ARGS \"@rx b\" \"id:2,phase:1,deny\"")");
  const std::string gone =
      custom(a, "gone.example.com", R"("SecRule ARGS \"@rx c\" \"id:3,phase:1,deny\"")");
  REQUIRE(a.del("/v1/gateway_security_profile/" + gone).status == 200);
  REQUIRE(
      a.post("/v1/gateway_security_profile", profile_body(kTeamA, "plain.example.com")).status ==
      201);
  // While gatewayd runs.
  auto clean = ctl({"waf-check", "--data-dir", server.data_dir()});
  INFO(clean.out, clean.err);
  CHECK(clean.status.success());
  CHECK(
      clean.out.starts_with("waf-check: OK: 0 of 2 profiles with waf_custom_directives refused "
                            "by this release's policy (3 live profiles, events 1.."));
  const int64_t created_seq = num(
      at(field(json(b.get("/v1/gateway_security_profile/" + old + "/history")), "data"), 0), "seq");
  REQUIRE(server.stop().success());
  testing::TempDir copies;
  const std::string copy = copies.file("old-policy");
  tamper(server.data_dir(), copy, Cf::kEvents, encode_u64(static_cast<uint64_t>(created_seq)),
         [](std::string* e) {
           const size_t at = e->find(R"(ARGS \"@rx b)");
           REQUIRE(at != std::string::npos);
           e->replace(at, 4, "REQUEST_LINEENV:GW_SECRET");
         });
  auto found = ctl({"waf-check", "--data-dir", copy});
  INFO(found.out, found.err);
  CHECK(found.status.code == 1);
  const std::vector<std::string> lines = lines_of(found.out);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0].starts_with("waf-check: REFUSED: " + old +
                             " (team team_b, hostname old.example.com): "));
  CHECK(lines[0].find("unknown variable 'REQUEST_LINEENV'") != std::string::npos);
  CHECK(
      lines[1].starts_with("waf-check: FAIL: 1 of 2 profiles with waf_custom_directives "
                           "refused by this release's policy (3 live profiles, events 1.."));
  CHECK(ctl({"waf-check"}).status.code == 2);  // --data-dir is required
}

TEST_CASE("check passes on a live store and fails on a copy with a changed event or projection") {
  Server server;
  Api a(server, kTeamA);
  Api b(server, kTeamB);
  churn(a, 1);
  churn(b, 2);
  Response created = a.post("/v1/domain", domain_body(kTeamA, "tamper.example.com"));
  REQUIRE(created.status == 201);
  const std::string id = str(json(created), "domain_id");
  REQUIRE(verify(a, id).status == 200);  // the verifier appends its outcome meanwhile
  auto live = ctl({"check", "--data-dir", server.data_dir()});
  INFO(live.out, live.err);
  CHECK(live.status.success());
  CHECK(live.out.starts_with("check: OK: "));

  const int64_t created_seq =
      num(at(field(json(a.get("/v1/domain/" + id + "/history")), "data"), 0), "seq");
  REQUIRE(created_seq > 0);
  REQUIRE(server.stop().success());
  testing::TempDir copies;
  SUBCASE("an event") {
    const std::string copy = copies.file("event");
    tamper(server.data_dir(), copy, Cf::kEvents, encode_u64(static_cast<uint64_t>(created_seq)),
           [](std::string* e) { (*e)[e->find("tamper.example") + 8] = 'b'; });
    auto r = ctl({"check", "--data-dir", copy});
    CHECK(r.status.code == 1);
    CHECK(r.out == "check: FAIL: event " + std::to_string(created_seq) +
                       ": hash does not match its content\n");
  }
  SUBCASE("a projection") {
    const std::string copy = copies.file("projection");
    tamper(server.data_dir(), copy, Cf::kProjections, std::string("r\0", 2) + id,
           [](std::string* v) { (*v)[v->find("tamper.example") + 8] = 'b'; });
    auto r = ctl({"check", "--data-dir", copy});
    CHECK(r.status.code == 1);
    CHECK(r.out.starts_with("check: FAIL: projections: r/" + id + " differs: "));
  }
  CHECK(ctl({"check", "--data-dir", server.data_dir()}).status.success());
}

// The table files of a stopped server's data dir that hold column family `family`.
std::vector<std::string> table_files_of(const std::string& data_dir, const std::string& family) {
  std::vector<std::string> tables;
  auto store = Store::open(data_dir);
  REQUIRE(store.ok());
  std::vector<rocksdb::LiveFileMetaData> files;
  store.value()->db()->GetLiveFilesMetaData(&files);
  for (const auto& file : files) {
    if (file.column_family_name == family) tables.push_back(file.db_path + file.name);
  }
  return tables;
}

// Damages the first data block of each table file of column family `family` in a stopped
// server's data dir; check must then fail, unable to read the store.
void damage_tables_then_check(const std::string& data_dir, const std::string& family) {
  const std::vector<std::string> tables = table_files_of(data_dir, family);
  REQUIRE_FALSE(tables.empty());
  for (const auto& table : tables) {
    std::fstream f(table, std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(100);  // inside the first data block
    f.write("\xff\xff\xff\xff\xff\xff\xff\xff", 8);
    REQUIRE(f.good());
  }
  auto r = ctl({"check", "--data-dir", data_dir});
  INFO(r.out, r.err);
  CHECK(r.status.code == 1);
  CHECK(
      r.out.starts_with("check: FAIL: cannot read the store: Corruption: block checksum mismatch"));
  CHECK(r.err.empty());
}

// A block of the read model that cannot be read (its checksum fails). check took the end of
// what it could read for the end of the read model and reported a replay's key as missing, and
// a GET that read the block was 503 "the service cannot accept writes right now".
TEST_CASE(
    "a corrupt block of the read model: check cannot read the store, a GET says it cannot read") {
  Server server({"--read-cache-mb", "0"});
  Api a(server, kTeamA);
  create_webhooks(a, 300);
  REQUIRE(server.stop().success());
  // rebuild writes the read model into table files (a clean stop leaves it in the log).
  REQUIRE(ctl({"rebuild", "--data-dir", server.data_dir()}).status.success());
  // The projections' table files, as the database lists them (a rebuild's files name no column
  // family of their own: they are written before the new one is made).
  damage_tables_then_check(server.data_dir(), "projections");

  server.restart();
  for (const std::string path : {"/v1/webhook", "/v1/webhook?status=active"}) {
    CAPTURE(path);
    Response got = a.get(path);
    check_problem(got, 503, "unavailable");
    CHECK(str(json(got), "detail") == "the service cannot read its data right now");
  }
  // The reason is the operator's, on stderr (at most a line a second).
  CHECK(server
            .wait_for_line(
                "gatewayd: GET /v1/webhook: unavailable: Corruption: block checksum mismatch")
            .has_value());
  // Requests that meet it for more than a second: one line a second, counting the rest.
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(2500);
  while (std::chrono::steady_clock::now() < until) REQUIRE(a.get("/v1/webhook").status == 503);
  CHECK(server.wait_for_line(" more since the last such line)").has_value());
}

// check read the log and the read model, not the default column family, which keeps the
// Idempotency-Key answers: with a block of it damaged, check passed, while backup failed on it
// and gatewayd answered a repeat of such a key 503 (helper 160).
TEST_CASE("a corrupt block of the kept Idempotency-Key answers: check cannot read the store") {
  Server server;
  Api a(server, kTeamA);
  for (int i = 0; i < 20; ++i) {
    const std::string n = std::to_string(i);
    REQUIRE(a.post("/v1/webhook", webhook_body(kTeamA, "wl-" + n), {{"Idempotency-Key", "k" + n}})
                .status == 201);
  }
  REQUIRE(server.stop().success());  // a clean stop flushes them into a table file
  CHECK(ctl({"check", "--data-dir", server.data_dir()}).status.success());
  damage_tables_then_check(server.data_dir(), "default");
}

// Deletes the last `n` of the `events` events of the log of a stopped server's data dir, as
// something other than a crash would (an edit), leaving the read model as it was.
void cut_log(const std::string& dir, uint64_t events, uint64_t n) {
  auto store = Store::open(dir);
  REQUIRE(store.ok());
  auto it = store.value()->iterate(Cf::kEvents);
  it->SeekToLast();
  REQUIRE(it->Valid());
  REQUIRE(decode_u64(std::string_view(it->key().data(), it->key().size())) == events);
  for (uint64_t seq = events - n + 1; seq <= events; ++seq) {
    REQUIRE(store.value()
                ->db()
                ->Delete(rocksdb::WriteOptions(), store.value()->cf(Cf::kEvents), encode_u64(seq))
                .ok());
  }
}

// Events go with their projections in one synced batch, so no crash leaves the read model ahead
// of the log; a log cut short by something else (a copy that stopped, a truncate, an edit) does.
// gatewayd went on: the writer gave new events the lost ones' sequence numbers, lists served the
// lost records, and /v1/events and their history answered 500; check named a key (helper 160).
TEST_CASE("a log that lost events its read model saw: gatewayd refuses it, rebuild goes on") {
  Server server;
  Api a(server, kTeamA);
  create_webhooks(a, 10);
  REQUIRE(server.stop().success());
  const std::string dir = server.data_dir();
  cut_log(dir, 10, 3);
  const std::string why =
      "the read model has applied the log up to event 10, but the log ends at event 7: events it "
      "acknowledged are gone from the log, which something other than a crash cut short or "
      "damaged (a copy that stopped, a truncate, an edit). Restore a backup (gatewayctl backup); "
      "or, to go on without them, run gatewayctl rebuild, which makes the read model again from "
      "the log as it is";
  auto checked = ctl({"check", "--data-dir", dir});
  CHECK(checked.status.describe() == "exit 1");
  CHECK(checked.out == "check: FAIL: projections: " + why + "\n");
  const std::string events_before = ctl({"events", "--data-dir", dir}).out;
  REQUIRE(!events_before.empty());
  const testing::CommandResult run = start_refused(server, dir);
  CAPTURE(run.err);
  CHECK(run.err.ends_with("gatewayd: cannot open " + dir + ": " + why + "\n"));
  // Refused before the read model was caught up or anything appended.
  CHECK(ctl({"events", "--data-dir", dir}).out == events_before);
  CHECK(ctl({"check", "--data-dir", dir}).out == checked.out);

  auto rebuilt = ctl({"rebuild", "--data-dir", dir});
  INFO(rebuilt.out, rebuilt.err);
  REQUIRE(rebuilt.status.success());
  CHECK(ctl({"check", "--data-dir", dir}).status.success());
  server.restart();
  CHECK(num(field(json(a.get("/v1/webhook")), "pagination"), "total") == 7);
  Response feed = a.get("/v1/events?after=0");
  REQUIRE(feed.status == 200);
  CHECK(items(field(json(feed), "data")).size() == 7);
}

// An Idempotency-Key answer is kept in the batch of its create's event, so after a cut log took
// the event the answer stayed (the default column family is not rebuilt), and a repeat of the
// create got 201 for a record that was gone (helper 162). A read model made from the log drops
// such answers: `gatewayctl rebuild`'s, and gatewayd's at a start that finds none (a rebuild
// killed after it dropped the old one; helper 168).
struct KeyedCreate {
  std::string path, body, key, id;
};

// Keyed creates of each kind, one of them deleted, then the log's last two events (a profile's
// and a webhook's creates) cut away; and a kept answer that cannot be read. Returns the creates.
std::vector<KeyedCreate> keyed_creates_then_cut(Server& server) {
  Api a(server, kTeamA);
  std::vector<KeyedCreate> made = {
      {"/v1/webhook", webhook_body(kTeamA, "keyed-0"), "k0", ""},
      {"/v1/domain", domain_body(kTeamA, "keyed.example.com"), "k1", ""},
      {"/v1/webhook", webhook_body(kTeamA, "keyed-2"), "k2", ""},
      {"/v1/gateway_security_profile", profile_body(kTeamA, "keyed.example.org"), "k3", ""},
      {"/v1/webhook", webhook_body(kTeamA, "keyed-4"), "k4", ""},
  };
  for (auto& c : made) {
    Response r = a.post(c.path, c.body, {{"Idempotency-Key", c.key}});
    REQUIRE(r.status == 201);
    rapidjson::Document d = json(r);
    for (const char* member : {"webhook_id", "domain_id", "profile_id"}) {
      if (d.HasMember(member)) c.id = str(d, member);
    }
    REQUIRE(!c.id.empty());
    // Deleted, its create stays in the log: its answer stays.
    if (c.key == "k1") REQUIRE(a.del("/v1/domain/" + c.id).status == 200);
  }
  REQUIRE(server.stop().success());
  cut_log(server.data_dir(), 6, 2);
  auto store = Store::open(server.data_dir());
  REQUIRE(store.ok());
  REQUIRE(
      store.value()->put_meta(std::string("i") + '\0' + "team_a" + '\0' + "unreadable", "x").ok());
  return made;
}

// After the drop: the repeats of the creates the log holds get their answers, deleted or not;
// those of the lost creates make their records again, under new ids that GET serves.
void check_repeats(Server& server, const std::vector<KeyedCreate>& made) {
  Api a(server, kTeamA);
  for (const auto& c : made) {
    CAPTURE(c.key);
    Response again = a.post(c.path, c.body, {{"Idempotency-Key", c.key}});
    REQUIRE(again.status == 201);
    const bool lost = c.key == "k3" || c.key == "k4";
    CHECK((again.body.find(c.id) != std::string::npos) == !lost);
    if (lost) CHECK(a.get(c.path + "/" + c.id).status == 404);
  }
  CHECK(num(field(json(a.get("/v1/gateway_security_profile")), "pagination"), "total") == 1);
  CHECK(num(field(json(a.get("/v1/webhook")), "pagination"), "total") == 3);
}

TEST_CASE("rebuild drops the kept Idempotency-Key answers of creates the cut log lost") {
  Server server;
  const std::vector<KeyedCreate> made = keyed_creates_then_cut(server);
  const std::string dir = server.data_dir();
  auto rebuilt = ctl({"rebuild", "--data-dir", dir});
  INFO(rebuilt.out, rebuilt.err);
  REQUIRE(rebuilt.status.success());
  CHECK(rebuilt.out.ends_with(
      "rebuild: dropped 2 kept Idempotency-Key answers of creates the log no longer holds\n"));
  CHECK(ctl({"check", "--data-dir", dir}).status.success());
  server.restart();
  check_repeats(server, made);
  // Nothing left to drop: a second rebuild says nothing of answers.
  REQUIRE(server.stop().success());
  auto again = ctl({"rebuild", "--data-dir", dir});
  REQUIRE(again.status.success());
  CHECK(again.out.find("Idempotency-Key") == std::string::npos);
}

TEST_CASE("gatewayd's start without a read model drops them too") {
  Server server;
  const std::vector<KeyedCreate> made = keyed_creates_then_cut(server);
  {
    auto store = Store::open(server.data_dir());  // as a rebuild killed after dropping it
    REQUIRE(store.ok());
    REQUIRE(store.value()->reset_projections().ok());
  }
  server.restart();
  CHECK(server.wait_for_line(
      "gatewayd: dropped 2 kept Idempotency-Key answers of creates the log no longer holds"));
  check_repeats(server, made);
}

// The read model is in before the answers are checked against it, so a rebuild (or a start)
// stopped in between left them for good: the next start found a read model and checked nothing
// (helper 171). The key set before the read model changes says the check is still to be done.
TEST_CASE("a rebuild stopped before it checked the answers: the next start checks them") {
  Server server;
  const std::vector<KeyedCreate> made = keyed_creates_then_cut(server);
  const std::string dir = server.data_dir();
  std::vector<std::pair<std::string, std::string>> answers;  // the kept answers, as they were
  {
    auto store = Store::open(dir);
    REQUIRE(store.ok());
    const std::string prefix = std::string("i") + '\0';
    auto it = store.value()->iterate_under(Cf::kMeta, prefix);
    for (it->Seek(prefix); it->Valid(); it->Next()) {
      answers.emplace_back(it->key().ToString(), it->value().ToString());
    }
  }
  REQUIRE(answers.size() == 6);  // five and the one that cannot be read
  REQUIRE(ctl({"rebuild", "--data-dir", dir}).status.success());
  {
    // As the rebuild left it had it stopped once its read model was in: the answers unchecked.
    auto store = Store::open(dir);
    REQUIRE(store.ok());
    for (const auto& [key, value] : answers) REQUIRE(store.value()->put_meta(key, value).ok());
    REQUIRE(store.value()->put_meta("projections/answers-to-check", "").ok());
  }
  server.restart();
  CHECK(server.wait_for_line(
      "gatewayd: dropped 2 kept Idempotency-Key answers of creates the log no longer holds"));
  check_repeats(server, made);
  // Checked once: the next start has nothing to say of answers.
  REQUIRE(server.stop().success());
  server.restart();
  Api(server, kTeamA).get("/v1/webhook");
  CHECK(server.output().find("Idempotency-Key") == std::string::npos);  // this run's output
}

// The read-only commands open the data dir as a RocksDB secondary, whose info log is in their
// scratch directory. RocksDB's own logger aborts the process on its next write after a failed one
// (Debian's build asserts), so with that directory on a full disk `check` died with SIGABRT.
TEST_CASE("the read-only commands run when their scratch directory cannot be written") {
  Server server;
  Api a(server, kTeamA);
  create_webhooks(a, 20);
  REQUIRE(server.stop().success());
  testing::ChildEnv full_disk{{}, {}, 4096};  // writes past 4 KB fail with EFBIG
  auto check = testing::run_command({kGatewayctl, "check", "--data-dir", server.data_dir()},
                                    full_disk, std::chrono::seconds(60));
  INFO(check.out, check.err);
  CHECK(check.status.describe() == "exit 0");
  CHECK(check.out.starts_with("check: OK: 20 events"));
  auto events = testing::run_command({kGatewayctl, "events", "--data-dir", server.data_dir()},
                                     full_disk, std::chrono::seconds(60));
  CHECK(events.status.describe() == "exit 0");
  CHECK(lines_of(events.out).size() == 20);
}

// A fold on disk in a scratch directory that could not take it (a full disk) was reported as
// "check: FAIL: cannot read the store" (helper 80).
TEST_CASE("check whose fold on disk fails says so on stderr: it is no FAIL of the store") {
  Server server;
  Api a(server, kTeamA);
  create_webhooks(a, 5);
  REQUIRE(server.stop().success());
  // Writes past the first byte fail with EFBIG, as on a full disk; a read-only open writes
  // nothing that matters (see the case above), the fold's database does.
  testing::ChildEnv full_disk{{}, {}, 1};
  auto check = testing::run_command(
      {kGatewayctl, "check", "--data-dir", server.data_dir(), "--fold", "disk"}, full_disk,
      std::chrono::seconds(60));
  INFO(check.out, check.err);
  CHECK(check.status.describe() == "exit 1");
  CHECK(check.out.empty());
  CHECK(check.err.find("\ngatewayctl: check: the fold on disk failed: ") != std::string::npos);
  CHECK(ctl({"check", "--data-dir", server.data_dir(), "--fold", "disk"}).status.success());
}

// A $TMPDIR that named no directory put the read-only commands' scratch directory in the current
// one, wherever the command was run from.
TEST_CASE("a $TMPDIR that is no directory is refused, not replaced by the current directory") {
  Server server;
  Api a(server, kTeamA);
  create_webhooks(a, 3);
  testing::TempDir cwd;
  for (const char* command : {"events", "check"}) {
    CAPTURE(command);
    auto r =
        testing::run_command({"/bin/sh", "-c",
                              "cd " + cwd.path() + " && TMPDIR=" + cwd.file("absent") + " exec " +
                                  kGatewayctl + " " + command + " --data-dir " + server.data_dir()},
                             {}, std::chrono::seconds(60));
    INFO(r.out, r.err);
    CHECK(r.status.describe() == "exit 1");
    CHECK(r.out.empty());
    CHECK(r.err == "gatewayctl: " + std::string(command) +
                       ": cannot create a scratch directory under $TMPDIR (" + cwd.file("absent") +
                       "): No such file or directory\n");
    CHECK(std::filesystem::is_empty(cwd.path()));
  }
}

// The directory comes from the first of TMPDIR, TMP, TEMP and TEMPDIR that is set and not empty
// (libstdc++'s temp_directory_path took an empty one, and the command failed with "under $TMPDIR
// ()", helper 136): the message names the one that was taken.
TEST_CASE("a scratch directory that cannot be made names the variable it came from") {
  Server server;
  testing::TempDir cwd;
  for (const char* name : {"TMP", "TEMP", "TEMPDIR"}) {
    CAPTURE(name);
    auto r = testing::run_command(
        {"/bin/sh", "-c",
         "cd " + cwd.path() + " && exec env -u TMPDIR -u TMP -u TEMP -u TEMPDIR TMPDIR= " + name +
             "=" + cwd.file("absent") + " " + kGatewayctl + " events --data-dir " +
             server.data_dir()},
        {}, std::chrono::seconds(60));
    INFO(r.out, r.err);
    CHECK(r.status.describe() == "exit 1");
    CHECK(r.err == "gatewayctl: events: cannot create a scratch directory under $" +
                       std::string(name) + " (" + cwd.file("absent") +
                       "): No such file or directory\n");
    CHECK(std::filesystem::is_empty(cwd.path()));
  }
}

TEST_CASE("check that cannot read a data dir says so on stderr: it is no FAIL of the store") {
  testing::TempDir parent;
  auto r = ctl({"check", "--data-dir", parent.file("absent")});
  INFO(r.out, r.err);
  CHECK(r.status.code == 1);
  CHECK(r.out.empty());
  CHECK(r.err == "gatewayctl: check: " + parent.file("absent") + " holds no gatewayd database\n");
}

// replay --out wrote its file and renamed it over FILE with no sync of either: after a power loss
// FILE could be empty or in part, where it was to be the old one or the whole new one (helper 104,
// from a trace).
// `/dev/fd/N` is written through descriptor N as the shell gave it. One the command was not given
// was looked up once the store was open, where N could be the store's own LOG: the records went
// into it, and the command said it had written them (exit 0). A FILE inside the data dir replaced
// one of the store's files (`--out D/CURRENT`: the database lost, exit 0); it is refused as backup
// refuses such a DIR.
TEST_CASE("replay refuses a descriptor it was not given, and a FILE inside the data dir") {
  Server server;
  REQUIRE(Api(server, kTeamA).post("/v1/webhook", webhook_body(kTeamA, "wl")).status == 201);
  const std::string dir = server.data_dir();
  for (const std::string fd : {"3", "4", "9"}) {
    CAPTURE(fd);
    auto r = testing::run_command(
        {"/bin/sh", "-c",
         "exec 3>&- 4>&- 9>&-; exec " + std::string(kGatewayctl) + " replay --data-dir " + dir +
             " --until-seq 1 --out /dev/fd/" + fd},
        {}, std::chrono::seconds(120));
    CHECK(r.status.code == 1);
    CHECK(r.err == "gatewayctl: replay: cannot write /dev/fd/" + fd + ": Bad file descriptor\n");
  }
  std::ostringstream current_before;
  current_before << std::ifstream(dir + "/CURRENT").rdbuf();
  for (const std::string& inside : {dir + "/CURRENT", dir + "/replay.json",
                                    dir + "/../" + fs::path(dir).filename().string() + "/x.json"}) {
    CAPTURE(inside);
    auto r = ctl({"replay", "--data-dir", dir, "--until-seq", "1", "--out", inside});
    CHECK(r.status.code == 1);
    CHECK(r.err.find("is inside the data dir " + dir + "; write it outside") != std::string::npos);
  }
  std::ostringstream current_after;
  current_after << std::ifstream(dir + "/CURRENT").rdbuf();
  CHECK(current_after.str() == current_before.str());
  CHECK_FALSE(fs::exists(dir + "/replay.json"));
  REQUIRE(server.stop().success());
  CHECK(ctl({"check", "--data-dir", dir}).status.code == 0);
}

// A replay whose file could not be synced said `cannot write FILE.tmp.PID` and not why.
TEST_CASE("replay says why its file could not be written") {
  Server server;
  REQUIRE(Api(server, kTeamA).post("/v1/webhook", webhook_body(kTeamA, "wl")).status == 201);
  REQUIRE(server.stop().success());
  testing::TempDir out;
  auto r = testing::run_command(
      {"/usr/bin/strace", "-f", "-qq", "-o", "/dev/null", "-e", "trace=fsync", "-e",
       "inject=fsync:error=EIO:when=1", kGatewayctl, "replay", "--data-dir", server.data_dir(),
       "--until-seq", "1", "--out", out.file("replay.json")},
      testing::ChildEnv{{"GATEWAY_"}, traced_env()}, std::chrono::seconds(60));
  CHECK(r.status.code == 1);
  CHECK(r.err.find("replay: cannot write " + out.file("replay.json") + ".tmp.") !=
        std::string::npos);
  CHECK(r.err.find(": Input/output error\n") != std::string::npos);
  CHECK_FALSE(fs::exists(out.file("replay.json")));
}

TEST_CASE("replay --out syncs its file before the rename, and the directory after it") {
  Server server;
  REQUIRE(Api(server, kTeamA).post("/v1/webhook", webhook_body(kTeamA, "wl")).status == 201);
  REQUIRE(server.stop().success());
  testing::TempDir out;
  Traced t = run_traced({kGatewayctl, "replay", "--data-dir", server.data_dir(), "--until-seq", "1",
                         "--out", out.file("replay.json")});
  INFO(t.result.err);
  REQUIRE(t.result.status.success());
  std::string tmp_fd;
  for (const std::string& line : t.lines) {
    if (line.find(" openat(") != std::string::npos && line.find(".tmp.") != std::string::npos) {
      tmp_fd = line.substr(line.rfind(") = ") + 4);
    }
  }
  REQUIRE_FALSE(tmp_fd.empty());
  const size_t renamed = first_line(t.lines, "\", \"" + out.file("replay.json") + "\")");
  REQUIRE(renamed < t.lines.size());
  CHECK(first_line(t.lines, " fsync(" + tmp_fd + ") = 0") < renamed);
  CHECK(dir_sync(t.lines, out.path(), renamed) < t.lines.size());
}

// RocksDB syncs the entries of the files it makes in a data dir, not the data dir's own: a power
// cut could take away a data dir gatewayd made at its first start, with every event acknowledged in
// it (helper 122, with a model of what syncs make durable), and so for a backup dir made with its
// parents, whose last parent alone was synced. Each directory made is synced into the one it was
// made in.
TEST_CASE(
    "a data dir or a backup dir made with its parents is made durable: each entry is synced") {
  testing::TempDir parent;
  const std::string tokens = parent.file("tokens");
  testing::create_token(kGatewayctl, tokens, "team_a", "a");
  // A port in use: gatewayd makes and opens its data dir, then cannot listen and exits.
  const int busy = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(busy >= 0);
  sockaddr_in any{};
  any.sin_family = AF_INET;
  any.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof any;
  REQUIRE(::bind(busy, reinterpret_cast<sockaddr*>(&any), sizeof any) == 0);
  REQUIRE(::listen(busy, 1) == 0);
  REQUIRE(::getsockname(busy, reinterpret_cast<sockaddr*>(&any), &size) == 0);
  const std::string a = parent.file("a");
  const std::string data = a + "/b/data";
  Traced started = run_traced(
      {kGatewayd, "--listen", "127.0.0.1:" + std::to_string(ntohs(any.sin_port)), "--data-dir",
       data + "/", "--tokens-file", tokens, "--dns-servers", "127.0.0.1:1"});
  ::close(busy);
  INFO(started.result.err);
  CHECK(started.result.status.code == 1);
  CHECK(started.result.err.find("Address already in use") != std::string::npos);
  REQUIRE(fs::exists(data + "/CURRENT"));
  // Before the data format's mark, the first file gatewayd itself writes there.
  const size_t mark = first_line(started.lines, "GATEWAYD-FORMAT.new");
  REQUIRE(mark < started.lines.size());
  for (const std::string& dir : {parent.path(), a, a + "/b"}) {
    CAPTURE(dir);
    CHECK(dir_sync(started.lines, dir) < mark);
  }

  const std::string x = parent.file("x");
  Traced backed_up =
      run_traced({kGatewayctl, "backup", "--data-dir", data, "--out", x + "/y/copy"});
  INFO(backed_up.result.err);
  REQUIRE(backed_up.result.status.success());
  for (const std::string& dir : {parent.path(), x, x + "/y"}) {
    CAPTURE(dir);
    CHECK(dir_sync(backed_up.lines, dir) < backed_up.lines.size());
  }
  CHECK(ctl({"check", "--data-dir", x + "/y/copy"}).status.success());
}

// RocksDB makes the column families one by one after the database: a kill of gatewayd's first
// start in between left a dir that `check` called unreadable ("Column family not found: events"),
// a FAIL for a dir that holds no event (helper 102). gatewayd's start finishes it.
TEST_CASE("a data dir a first start left half made holds no database yet; gatewayd finishes it") {
  Server server;
  REQUIRE(server.stop().success());
  const std::string dir = server.data_dir();
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path() != server.tokens_file()) fs::remove_all(entry.path());
  }
  {
    rocksdb::Options options;
    options.create_if_missing = true;
    rocksdb::DB* raw = nullptr;
    REQUIRE(rocksdb::DB::Open(options, dir, &raw).ok());  // the default column family alone
    delete raw;
  }
  for (const std::string command : {"check", "events"}) {
    CAPTURE(command);
    auto r = ctl({command, "--data-dir", dir});
    INFO(r.out, r.err);
    CHECK(r.status.code == 1);
    CHECK(r.out.empty());
    CHECK(r.err == "gatewayctl: " + command + ": " + dir +
                       " holds no gatewayd database yet: its first start has not made it "
                       "(gatewayd finishes it when it starts)\n");
  }
  server.restart();
  REQUIRE(Api(server, kTeamA).post("/v1/webhook", webhook_body(kTeamA, "wl")).status == 201);
  REQUIRE(server.stop().success());
  auto checked = ctl({"check", "--data-dir", dir});
  INFO(checked.out, checked.err);
  CHECK(checked.status.code == 0);
}

// Starts `server` again on its data dir, which then serves its `webhooks` webhooks and, once
// stopped, passes check: the read model a killed rebuild left was made whole at the start.
void restarted_on_a_whole_read_model(Server& server, int webhooks) {
  server.restart();
  Response listed = Api(server, kTeamA).get("/v1/webhook");
  REQUIRE(listed.status == 200);
  CHECK(num(field(json(listed), "pagination"), "total") == webhooks);
  REQUIRE(server.stop().success());
  auto checked = ctl({"check", "--data-dir", server.data_dir()});
  INFO(checked.out, checked.err);
  CHECK(checked.status.code == 0);
}

// A rebuild drops the projections and makes them again: a kill in between left the events whole,
// and the first version of the check above said the dir held no database (helper 106).
TEST_CASE("a data dir a rebuild left without its read model says so; gatewayd makes it again") {
  Server server;
  REQUIRE(Api(server, kTeamA).post("/v1/webhook", webhook_body(kTeamA, "wl")).status == 201);
  REQUIRE(server.stop().success());
  const std::string dir = server.data_dir();
  {
    auto store = Store::open(dir);
    REQUIRE(store.ok());
    REQUIRE(store.value()->db()->DropColumnFamily(store.value()->cf(Cf::kProjections)).ok());
  }
  for (const std::string command : {"check", "events"}) {
    CAPTURE(command);
    auto r = ctl({command, "--data-dir", dir});
    INFO(r.out, r.err);
    CHECK(r.status.code == 1);
    CHECK(r.err == "gatewayctl: " + command + ": cannot read " + dir +
                       ": its read model is missing (a first start was stopped before making "
                       "it, or a rebuild, or a start that rebuilds it, between dropping it and "
                       "making it again; the events are there): start gatewayd on it, or run "
                       "gatewayctl rebuild\n");
  }
  restarted_on_a_whole_read_model(server, 1);
}

// A rebuild makes the read model again, then ingests the new one's table files: a kill in
// between (gdb, at the end of Store::reset_projections) left it empty, and check said only that
// the first key of a replay was missing from it, which reads as damage.
TEST_CASE("a data dir a rebuild left with an empty read model says so; gatewayd fills it again") {
  Server server;
  REQUIRE(Api(server, kTeamA).post("/v1/webhook", webhook_body(kTeamA, "wl")).status == 201);
  REQUIRE(Api(server, kTeamA).post("/v1/webhook", webhook_body(kTeamA, "wl2")).status == 201);
  REQUIRE(server.stop().success());
  const std::string dir = server.data_dir();
  {
    auto store = Store::open(dir);
    REQUIRE(store.ok());
    REQUIRE(store.value()->reset_projections().ok());
  }
  auto r = ctl({"check", "--data-dir", dir});
  INFO(r.out, r.err);
  CHECK(r.status.code == 1);
  CHECK(r.out ==
        "check: FAIL: projections: the read model is empty while the log holds 2 events (a "
        "rebuild, or a start that rebuilds it, was stopped between making it again and writing "
        "it): start gatewayd on it, or run gatewayctl rebuild\n");
  restarted_on_a_whole_read_model(server, 2);
}

// To a user who may not read the data dir, the commands said it "holds no gatewayd database",
// which sends an operator looking for lost data instead of running them as gatewayd's user.
TEST_CASE("the commands say so when they may not read the data dir") {
  Server server;
  REQUIRE(Api(server, kTeamA).post("/v1/webhook", webhook_body(kTeamA, "wl")).status == 201);
  REQUIRE(server.stop().success());
  // As root, the commands run as nobody (setpriv), from a copy of gatewayctl anyone may run; the
  // data dir is root's, mode 0700. As any other user, the data dir's permissions are taken away.
  const bool root = ::geteuid() == 0;
  testing::TempDir bin;
  REQUIRE(::chmod(bin.path().c_str(), 0755) == 0);
  fs::copy_file(kGatewayctl, bin.file("gatewayctl"));
  if (!root) REQUIRE(::chmod(server.data_dir().c_str(), 0) == 0);
  for (const std::string command : {"events", "check", "rebuild"}) {
    CAPTURE(command);
    std::vector<std::string> argv{bin.file("gatewayctl"), command, "--data-dir", server.data_dir()};
    if (root) {
      argv.insert(argv.begin(),
                  {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"});
    }
    auto r = testing::run_command(argv, {}, std::chrono::seconds(60));
    INFO(r.out, r.err);
    CHECK(r.status.code == 1);
    CHECK(r.err.find("cannot read " + server.data_dir() + ": Permission denied\n") !=
          std::string::npos);
  }
  if (!root) REQUIRE(::chmod(server.data_dir().c_str(), 0700) == 0);
  CHECK(ctl({"events", "--data-dir", server.data_dir()}).status.code == 0);
}

// A RocksDB secondary recovers the last state whose table files are all there: with every table
// file of a stopped server's data dir removed, `check` said "OK: 0 events", `events` printed
// nothing and `backup` made an empty copy, all with exit 0.
TEST_CASE("the read-only commands refuse a data dir whose table files are missing") {
  Server server;
  Api a(server, kTeamA);
  create_webhooks(a, 20);
  REQUIRE(server.stop().success());  // a clean stop flushes every event into table files
  testing::TempDir copies;
  const std::string damaged = copies.file("damaged");
  fs::copy(server.data_dir(), damaged, fs::copy_options::recursive);
  int removed = 0;
  for (const auto& entry : fs::directory_iterator(damaged)) {
    if (entry.path().extension() == ".sst") removed += fs::remove(entry.path()) ? 1 : 0;
  }
  REQUIRE(removed > 0);
  const std::vector<std::vector<std::string>> commands = {
      {"check", "--data-dir", damaged},
      {"events", "--data-dir", damaged},
      {"replay", "--data-dir", damaged, "--until-seq", "0", "--out", copies.file("replay.json")},
      {"backup", "--data-dir", damaged, "--out", copies.file("backup")}};
  for (const auto& args : commands) {
    auto r = ctl(args);
    INFO(args[0], " ", r.out, r.err);
    CHECK(r.status.code == 1);
    CHECK(r.err.find("cannot read " + damaged + ": ") != std::string::npos);
    CHECK(r.err.find("No such file or directory") != std::string::npos);
  }
  CHECK_FALSE(fs::exists(copies.file("replay.json")));
  // The undamaged data dir, and the same one beside a running server, still check out.
  auto whole = ctl({"check", "--data-dir", server.data_dir()});
  CHECK(whole.out.starts_with("check: OK: 20 events"));
  server.restart();
  auto live = ctl({"check", "--data-dir", server.data_dir()});
  INFO(live.out, live.err);
  CHECK(live.out.starts_with("check: OK: 20 events"));
}

// Stopped by SIGTERM or Ctrl-C (SIGINT) while it ran, gatewayctl left its scratch directory (and
// a replay its FILE.tmp.<pid>) behind: the default action ends a process before any cleanup.
TEST_CASE(
    "a command stopped by SIGTERM or SIGINT leaves no scratch directory; one ignored stays so") {
  Server server;
  Api a(server, kTeamA);
  for (int i = 0; i < 400; ++i)
    REQUIRE(a.post("/v1/webhook", webhook_body(kTeamA, "w")).status == 201);
  testing::TempDir work;
  const std::string tmp = work.file("tmp");
  fs::create_directories(tmp);
  // A reader that never reads: the command fills the pipe (over 64 KiB of output) and blocks.
  const std::string fifo = work.file("fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const int held = ::open(fifo.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
  REQUIRE(held >= 0);
  const std::string script =
      std::string("exec ") + kGatewayctl + " events --data-dir " + server.data_dir() + " > " + fifo;
  for (int sig : {SIGTERM, SIGINT}) {
    CAPTURE(sig);
    testing::ChildProcess child;
    child.spawn({"/bin/sh", "-c", script}, testing::ChildEnv{{}, {"TMPDIR=" + tmp}});
    // Running once its scratch directory is there; blocked once the pipe is full.
    bool started = false;
    for (int i = 0; i < 200 && !started; ++i) {
      started = !fs::is_empty(tmp);
      if (!started) std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    REQUIRE(started);
    // Writing once output is in the pipe, with the store open: a fixed 300 ms could end a slow
    // command still opening it, and a file made after the cleanup would stay. (It then blocks
    // once the pipe is full, at 55998 bytes here: the writes do not fill whole pages.)
    int queued = 0;
    for (int i = 0; i < 400 && queued < 32768; ++i) {
      if (::ioctl(held, FIONREAD, &queued) != 0) queued = 0;
      if (queued < 32768) std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    CAPTURE(queued);
    REQUIRE(queued >= 32768);
    REQUIRE(::kill(child.pid(), sig) == 0);
    auto status = child.wait(std::chrono::seconds(10));
    INFO(child.output());
    CHECK(status.signal == sig);
    CHECK(fs::is_empty(tmp));
    char drain[65536];
    while (::read(held, drain, sizeof drain) > 0) {
    }
  }

  // Started with SIGHUP and SIGINT ignored (`nohup`, a shell's background job), the command
  // keeps them ignored, as gatewayd does: it was ended by either once it had begun waiting for
  // them (helper 136: `nohup gatewayctl events ...` ended by the SIGHUP of a closed terminal).
  testing::ChildProcess child;
  child.spawn({"/bin/sh", "-c", script},
              testing::ChildEnv{{}, {"TMPDIR=" + tmp}, 0, 0, {SIGHUP, SIGINT}});
  int queued = 0;
  for (int i = 0; i < 400 && queued < 32768; ++i) {
    if (::ioctl(held, FIONREAD, &queued) != 0) queued = 0;
    if (queued < 32768) std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  REQUIRE(queued >= 32768);
  REQUIRE(::kill(child.pid(), SIGHUP) == 0);
  REQUIRE(::kill(child.pid(), SIGINT) == 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(child.running());
  // Read to its end: the command finishes its output and exits 0.
  char drain[65536];
  for (int i = 0; i < 1000 && child.running(); ++i) {
    if (::read(held, drain, sizeof drain) <= 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  auto status = child.wait(std::chrono::seconds(10));
  INFO(child.output());
  CHECK(status.exited);
  CHECK(status.code == 0);
  CHECK(fs::is_empty(tmp));
  ::close(held);
}

TEST_CASE("backup under write load holds every record acknowledged before it began") {
  Server server;
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::vector<std::pair<std::string, std::string>> acknowledged;  // team, path; in order of 201
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t) {
    writers.emplace_back([&, t] {
      Api api(server, t % 2 == 0 ? kTeamA : kTeamB);
      for (int n = t * 100000; !stop.load(); ++n) {
        const Kind& kind = *kKinds[static_cast<size_t>(n) % 3];
        Response r = api.post(std::string(kind.path), kind.body(api.team(), n));
        if (r.status != 201) continue;
        std::lock_guard<std::mutex> lock(mu);
        acknowledged.emplace_back(api.team(), item_path(kind, str(json(r), kind.id_field)));
      }
    });
  }
  // Some writes acknowledged first (waited for: a fixed 500 ms assumed the machine's speed).
  std::vector<std::pair<std::string, std::string>> before;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (before.size() <= 10 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::lock_guard<std::mutex> lock(mu);
    before = acknowledged;
  }
  testing::TempDir parent;
  const std::string out = parent.file("backup");
  auto r = ctl({"backup", "--data-dir", server.data_dir(), "--out", out});
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  stop = true;
  for (auto& w : writers) w.join();
  INFO(r.out, r.err);
  REQUIRE(r.status.success());
  CHECK(r.out.find("the tokens file is not included") != std::string::npos);
  REQUIRE(before.size() > 10);
  CHECK(acknowledged.size() > before.size());  // the server took writes during the backup

  testing::Gatewayd restored;
  restored.start(kGatewayd, out, {"--tokens-file", server.tokens_file()},
                 {std::string(kClosedDns)});
  HttpClient http;
  size_t found = 0;
  for (const auto& [team, path] : before) {
    Response got =
        http.request("GET", restored.base_url() + path,
                     {{"Authorization", "Bearer " + server.token(team)}, {"X-Tenant-ID", team}});
    if (got.status == 200) ++found;
  }
  CHECK(found == before.size());
  CHECK(restored.stop().success());
  CHECK(ctl({"check", "--data-dir", out}).status.success());
}

TEST_CASE("backup refuses a directory that is not empty") {
  Server server;
  Api a(server, kTeamA);
  create(a, kWebhook, 1);
  testing::TempDir parent;
  const std::string out = parent.file("used");
  fs::create_directory(out);
  std::ofstream(out + "/keep.txt") << "mine";
  auto r = ctl({"backup", "--data-dir", server.data_dir(), "--out", out});
  CHECK(r.status.code == 1);
  CHECK(r.err.find("exists and is not an empty directory") != std::string::npos);
  CHECK(fs::exists(out + "/keep.txt"));
  CHECK(std::distance(fs::directory_iterator(out), fs::directory_iterator()) == 1);
  // A file is no directory to back up into.
  r = ctl({"backup", "--data-dir", server.data_dir(), "--out", out + "/keep.txt"});
  CHECK(r.status.code == 1);
  CHECK(r.err.find("keep.txt exists and is not a directory") != std::string::npos);
  // Nor is the data dir, or a directory under it: the copy was made there, a second database
  // among gatewayd's files (helper 48).
  for (const std::string& inside :
       {server.data_dir() + "/backup", server.data_dir(), server.data_dir() + "/./x/../copy"}) {
    CAPTURE(inside);
    r = ctl({"backup", "--data-dir", server.data_dir(), "--out", inside});
    CHECK(r.status.code == 1);
    CHECK(r.err.find("is inside the data dir") != std::string::npos);
  }
  CHECK_FALSE(fs::exists(server.data_dir() + "/backup"));
  CHECK_FALSE(fs::exists(server.data_dir() + "/copy"));
}

// `gatewayctl backup --out out` under strace, held in the openat that makes its BACKUP-UNFINISHED
// file (the call waits 5 s at its entry); its pid once it is held there.
pid_t backup_held_at_its_marker(testing::ChildProcess& traced, const std::string& data_dir,
                                const std::string& out, const std::string& trace) {
  const std::string marker = out + "/" + Store::kUnfinishedBackup;
  traced.spawn({"/usr/bin/strace", "-f", "-qq", "-o", trace, "-P", marker, "-e", "trace=openat",
                "-e", "inject=openat:delay_enter=5000000", kGatewayctl, "backup", "--data-dir",
                data_dir, "--out", out},
               testing::ChildEnv{{"GATEWAY_"}, traced_env()});
  bool held = false;
  for (int i = 0; i < 400 && !held; ++i) {
    held = testing::read_file(trace).find(Store::kUnfinishedBackup) != std::string::npos;
    if (!held) std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  REQUIRE(held);
  CHECK_FALSE(fs::exists(marker));
  // strace's child.
  std::ifstream children("/proc/" + std::to_string(traced.pid()) + "/task/" +
                         std::to_string(traced.pid()) + "/children");
  pid_t pid = 0;
  children >> pid;
  REQUIRE(pid > 0);
  return pid;
}

// A backup stopped by an interrupt after it made DIR and before its BACKUP-UNFINISHED file was
// there left DIR empty and unmarked, which gatewayd serves as an empty store (helper 146). Held
// in the marker's creation when the interrupt comes, it removes DIR, with each parent it made.
TEST_CASE("a backup interrupted before its directory is marked leaves none of what it made") {
  Server server;
  Api a(server, kTeamA);
  create(a, kWebhook, 1);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) {
    CAPTURE(sig);
    testing::TempDir parent;
    const std::string made = parent.file("made");
    testing::ChildProcess traced;
    const pid_t backup =
        backup_held_at_its_marker(traced, server.data_dir(), made + "/out", parent.file("trace"));
    REQUIRE(fs::is_directory(made + "/out"));
    REQUIRE(::kill(backup, sig) == 0);
    auto status = traced.wait(std::chrono::seconds(20));
    INFO(traced.output());
    CHECK_FALSE(status.success());
    CHECK_FALSE(fs::exists(made));
  }
  // An empty directory given stays, as it was given.
  testing::TempDir parent;
  const std::string given = parent.file("given");
  fs::create_directory(given);
  testing::ChildProcess traced;
  const pid_t backup =
      backup_held_at_its_marker(traced, server.data_dir(), given, parent.file("trace"));
  REQUIRE(::kill(backup, SIGTERM) == 0);
  CHECK_FALSE(traced.wait(std::chrono::seconds(20)).success());
  CHECK(fs::is_directory(given));
  CHECK(fs::is_empty(given));
}

TEST_CASE("backup of a store with no events says it holds none") {
  Server server;
  testing::TempDir parent;
  const std::string out = parent.file("empty");
  auto r = ctl({"backup", "--data-dir", server.data_dir(), "--out", out});
  INFO(r.out, r.err);
  REQUIRE(r.status.success());
  CHECK(r.out.starts_with("backup: " + out + " holds no events (0 events, "));
  CHECK(ctl({"check", "--data-dir", out}).status.success());
}

// The permission bits of `path`.
fs::perms mode_of(const std::string& path) { return fs::status(path).permissions(); }

// A backup and a data dir hold every tenant's records, as replay's file (0600) does; they were made
// 0755 (the umask's), their files 0644, so any local user could read them.
TEST_CASE("a backup dir or a data dir that gatewayctl or gatewayd makes is its owner's alone") {
  Server server;
  Api a(server, kTeamA);
  create(a, kWebhook, 1);
  testing::TempDir parent;
  const std::string out = parent.file("made");
  auto made = ctl({"backup", "--data-dir", server.data_dir(), "--out", out});
  INFO(made.out, made.err);
  REQUIRE(made.status.success());
  CHECK(mode_of(out) == fs::perms::owner_all);
  // An empty directory given keeps the mode it was given.
  const std::string given = parent.file("given");
  fs::create_directory(given);
  fs::permissions(given, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec);
  auto into_given = ctl({"backup", "--data-dir", server.data_dir(), "--out", given});
  REQUIRE(into_given.status.success());
  CHECK(mode_of(given) == (fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec));
  // gatewayd's own data dir, made at its first start.
  const std::string data = parent.file("data");
  testing::Gatewayd fresh;
  fresh.start(kGatewayd, data, {"--tokens-file", server.tokens_file()}, {std::string(kClosedDns)});
  CHECK(mode_of(data) == fs::perms::owner_all);
  CHECK(fresh.stop().success());
}

TEST_CASE("gatewayd serves a schema-1 log's domains with scope subtree") {
  testing::TempDir dir;
  const std::string data = dir.file("data");
  REQUIRE(testing::load_event_log(data, testing::fixture_path("schema_v1/events.ndjson")) == 7);
  const std::string tokens = dir.file("tokens");
  const std::string token_a = testing::create_token(kGatewayctl, tokens, "team_a", "team_a-token");
  const std::string token_b = testing::create_token(kGatewayctl, tokens, "team_b", "team_b-token");
  testing::Gatewayd server;
  server.start(kGatewayd, data, {"--tokens-file", tokens}, {std::string(kClosedDns)});
  HttpClient http;
  auto get = [&](const std::string& token, std::string_view team, const std::string& path) {
    return http.request("GET", server.base_url() + path,
                        {{"Authorization", "Bearer " + token}, {"X-Tenant-ID", std::string(team)}});
  };
  Response a = get(token_a, kTeamA, "/v1/domain/dom_01HQ3Z8K2M4N6P8R0T2V4X6Y8Z");
  INFO(a.body);
  REQUIRE(a.status == 200);
  CHECK(str(json(a), "scope") == "subtree");
  CHECK(str(json(a), "status") == "verified");
  CHECK(a.header("ETag") == "\"3\"");
  Response b = get(token_b, kTeamB, "/v1/domain?hostname=blog.example.org");
  REQUIRE(b.status == 200);
  CHECK(str(at(field(json(b), "data"), 0), "scope") == "subtree");
  CHECK(get(token_b, kTeamB, "/v1/webhook/whk_01HQ3Z8P6R8T0W2Y4A6C8E0G2J").status == 404);
  auto checked = ctl({"check", "--data-dir", data});
  INFO(checked.out);
  CHECK(checked.status.success());
}

}  // namespace
}  // namespace gw::itest::admin_test
