// Durability: SIGKILL gatewayd under load; every create, update, delete and Idempotency-Key answer
// it acknowledged must survive a restart byte-for-byte (same JSON, same ETag).
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "integration/fixture.h"

namespace gw::itest::crash_test {
namespace {

struct Acked {
  const Kind* kind;
  std::string team;
  std::string id;
  std::string body;
  std::string etag;
};

struct Worker {
  std::vector<Acked> acked;
  size_t transport_errors = 0;
  long unexpected_status = 0;  // first status other than 201 (0 = none)
  std::string unexpected_body;
};

std::string crash_body(const Kind& kind, std::string_view team, int thread, int n) {
  std::string tag = "c" + std::to_string(thread) + "-" + std::to_string(n);
  if (&kind == &kProfile) return profile_body(team, tag + ".crash-profiles.example.com");
  if (&kind == &kDomain) return domain_body(team, tag + ".crash-domains.example.com");
  return webhook_body(team, "crash-" + tag);
}

void load(const Server& server, int thread, const std::atomic<bool>& stop, Worker* out) {
  std::string_view team = thread % 2 == 0 ? kTeamA : kTeamB;
  Api api(server, team);
  for (int n = 0; !stop.load(); ++n) {
    const Kind& kind = *kKinds[static_cast<size_t>(n) % 3];
    Response r = api.post(std::string(kind.path), crash_body(kind, team, thread, n));
    if (r.status == 201) {
      out->acked.push_back(Acked{&kind, std::string(team), str(json(r), kind.id_field), r.body,
                                 r.header("ETag").value_or("")});
    } else if (r.status == 0) {
      ++out->transport_errors;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    } else if (out->unexpected_status == 0) {
      out->unexpected_status = r.status;
      out->unexpected_body = r.body;
    }
  }
}

TEST_CASE("SIGKILL under load loses no acknowledged create") {
  Server server;
  constexpr int kThreads = 8;
  std::atomic<bool> stop{false};
  std::vector<Worker> workers(kThreads);
  std::vector<std::thread> pool;
  for (int t = 0; t < kThreads; ++t) {
    pool.emplace_back(load, std::cref(server), t, std::cref(stop),
                      &workers[static_cast<size_t>(t)]);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  testing::ExitStatus killed = server.kill();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the load runs on into the void
  stop = true;
  for (auto& th : pool) th.join();
  CHECK(killed.signal == SIGKILL);

  size_t acked = 0;
  size_t errors = 0;
  for (const Worker& w : workers) {
    INFO("unexpected response under load: ", w.unexpected_status, " ", w.unexpected_body);
    CHECK(w.unexpected_status == 0);
    acked += w.acked.size();
    errors += w.transport_errors;
  }
  MESSAGE("acknowledged creates before SIGKILL: ", acked, " (failed exchanges after it: ", errors,
          ")");
  REQUIRE(acked > 0);
  CHECK(errors > 0);

  server.restart();
  Api a(server, kTeamA);
  Api b(server, kTeamB);
  size_t lost = 0;
  size_t changed = 0;
  std::string first_problem;
  std::map<std::pair<std::string, const Kind*>, int64_t> per_list;
  for (const Worker& w : workers) {
    for (const Acked& rec : w.acked) {
      ++per_list[{rec.team, rec.kind}];
      Api& api = rec.team == kTeamA ? a : b;
      Response r = api.get(item_path(*rec.kind, rec.id));
      bool same = r.status == 200 && json(r) == testing::parse_json(rec.body) &&
                  r.header("ETag").value_or("") == rec.etag;
      if (same) continue;
      ++(r.status == 200 ? changed : lost);
      if (first_problem.empty()) {
        first_problem = item_path(*rec.kind, rec.id) + " acknowledged as " + rec.etag + " " +
                        rec.body + "; after restart " + std::to_string(r.status) + " " +
                        r.header("ETag").value_or("") + " " + r.body;
      }
    }
  }
  INFO("first problem: ", first_problem);
  CHECK(lost == 0);
  CHECK(changed == 0);
  for (const auto& [key, count] : per_list) {
    CAPTURE(key.first);
    CAPTURE(key.second->name);
    Api& api = key.first == kTeamA ? a : b;
    int64_t total = num(field(json(api.get(std::string(key.second->path))), "pagination"), "total");
    CHECK(total >= count);
  }
  Response fresh = a.post("/v1/webhook", webhook_body(kTeamA, "after-crash"));
  CHECK(fresh.status == 201);
}

// Each worker owns the records it creates and is the only one to change them, so it knows what
// each should hold: the last acknowledged answer, or, for the one write whose answer the SIGKILL
// cut off, either that or what the write would have made.
struct Owned {
  const Kind* kind;
  std::string id;
  std::string create_body;  // the edits below change one field of it
  int edits = 0;            // acknowledged updates
  bool deleted = false;     // acknowledged
  std::string body;         // the last acknowledged record (empty once deleted)
  std::string etag;
  enum class Cut { kNone, kUpdate, kDelete } cut = Cut::kNone;
};

// A keyed create's request and its answer.
struct Keyed {
  const Kind* kind;
  std::string key;
  std::string body;
  Response answer;  // status 0: cut off by the SIGKILL
};

struct MixedWorker {
  std::string team;
  std::vector<Owned> owned;
  std::vector<Keyed> keyed;
  long unexpected_status = 0;
  std::string unexpected;
};

// The field edit number `n` of a record sets, and its JSON value: one each kind may change.
std::pair<std::string_view, std::string> mixed_edit(const Kind& kind, const Owned& rec, int n) {
  if (&kind == &kProfile) return {"max_body_bytes", std::to_string(1000 + n)};
  if (&kind == &kDomain) {
    return {"redirect_to", testing::json_quote("https://www.example.org/v" + std::to_string(n))};
  }
  return {"workload_id", testing::json_quote(rec.id + "-v" + std::to_string(n))};
}

// Creates (each with an Idempotency-Key), updates and deletes (each with If-Match) its own records
// until the first exchange that fails, the SIGKILL's.
void mixed_load(const Server& server, int thread, MixedWorker* out) {
  out->team = std::string(thread % 2 == 0 ? kTeamA : kTeamB);
  Api api(server, out->team);
  auto unexpected = [out](const Response& r, std::string_view what) {
    if (out->unexpected_status != 0) return;
    out->unexpected_status = r.status;
    out->unexpected = std::string(what) + ": " + r.body;
  };
  size_t next = 0;  // the owned record the next change goes to, round robin
  for (int step = 0;; ++step) {
    size_t live = 0;
    for (const Owned& rec : out->owned) live += rec.deleted ? 0 : 1;
    if (live < 4 || step % 3 == 0) {
      const Kind& kind = *kKinds[out->keyed.size() % 3];
      std::string tag = "m" + std::to_string(thread) + "-" + std::to_string(out->keyed.size());
      Keyed k{&kind, "key-" + tag, crash_body(kind, out->team, thread, 100000 + step), {}};
      k.answer = api.post(std::string(kind.path), k.body, {{"Idempotency-Key", k.key}});
      out->keyed.push_back(k);
      if (k.answer.status == 0) return;
      if (k.answer.status != 201) return unexpected(k.answer, "create");
      out->owned.push_back(Owned{&kind, str(json(k.answer), kind.id_field), k.body, 0, false,
                                 k.answer.body, k.answer.header("ETag").value_or(""),
                                 Owned::Cut::kNone});
      continue;
    }
    while (out->owned[next % out->owned.size()].deleted) ++next;
    Owned& rec = out->owned[next++ % out->owned.size()];
    Headers if_match{{"If-Match", rec.etag}};
    if (step % 5 == 4) {
      Response r = api.del(item_path(*rec.kind, rec.id), if_match);
      if (r.status == 0) {
        rec.cut = Owned::Cut::kDelete;
        return;
      }
      if (r.status != 200) return unexpected(r, "delete");
      rec.deleted = true;
      rec.body.clear();
      rec.etag.clear();
      continue;
    }
    auto [name, value] = mixed_edit(*rec.kind, rec, rec.edits + 1);
    Response r = api.put(item_path(*rec.kind, rec.id),
                         testing::json_with(rec.create_body, name, value), if_match);
    if (r.status == 0) {
      rec.cut = Owned::Cut::kUpdate;
      return;
    }
    if (r.status != 200) return unexpected(r, "update");
    ++rec.edits;
    rec.body = r.body;
    rec.etag = r.header("ETag").value_or("");
  }
}

// What `rec` holds after the restart, against what it may hold; "" when it is one of those.
// `cut_landed` is set when it holds what a write cut off by the SIGKILL made.
std::string mixed_problem(Api& api, const Owned& rec, bool* cut_landed) {
  const std::string path = item_path(*rec.kind, rec.id);
  Response r = api.get(path);
  const std::string etag = r.header("ETag").value_or("");
  const bool as_acked =
      rec.deleted ? r.status == 404
                  : r.status == 200 && json(r) == testing::parse_json(rec.body) && etag == rec.etag;
  bool as_cut = false;
  if (rec.cut == Owned::Cut::kDelete) as_cut = r.status == 404;
  if (rec.cut == Owned::Cut::kUpdate && r.status == 200) {
    // The update cut off may have landed: the next version, with the field it set.
    auto [name, value] = mixed_edit(*rec.kind, rec, rec.edits + 1);
    const int64_t acked_version = std::stoll(rec.etag.substr(1));  // "N"
    as_cut = etag == "\"" + std::to_string(acked_version + 1) + "\"" &&
             testing::to_json(field(json(r), name)) == value;
  }
  *cut_landed = as_cut && !as_acked;
  if (as_acked || as_cut) return "";
  return path + " acknowledged as " + (rec.deleted ? "deleted" : rec.etag + " " + rec.body) +
         "; after the restart " + std::to_string(r.status) + " " + etag + " " + r.body;
}

TEST_CASE("SIGKILL under updates, deletes and keyed creates loses no acknowledged change") {
  Server server;
  constexpr int kThreads = 8;
  std::vector<MixedWorker> workers(kThreads);
  std::vector<std::thread> pool;
  for (int t = 0; t < kThreads; ++t) {
    pool.emplace_back(mixed_load, std::cref(server), t, &workers[static_cast<size_t>(t)]);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  testing::ExitStatus killed = server.kill();
  for (auto& th : pool) th.join();
  CHECK(killed.signal == SIGKILL);

  size_t updates = 0;
  size_t deletes = 0;
  size_t creates = 0;
  for (const MixedWorker& w : workers) {
    INFO("unexpected answer under load: ", w.unexpected_status, " ", w.unexpected);
    CHECK(w.unexpected_status == 0);
    for (const Owned& rec : w.owned) {
      updates += static_cast<size_t>(rec.edits);
      deletes += rec.deleted ? 1 : 0;
    }
    creates += w.owned.size();
  }
  MESSAGE("acknowledged before SIGKILL: ", creates, " creates, ", updates, " updates, ", deletes,
          " deletes");
  REQUIRE(updates > 0);
  REQUIRE(deletes > 0);

  server.restart();
  Api a(server, kTeamA);
  Api b(server, kTeamB);
  size_t problems = 0;
  size_t cut_changes = 0;
  size_t cut_changes_landed = 0;
  std::string first_problem;
  for (const MixedWorker& w : workers) {
    Api& api = w.team == kTeamA ? a : b;
    for (const Owned& rec : w.owned) {
      bool landed = false;
      std::string problem = mixed_problem(api, rec, &landed);
      cut_changes += rec.cut == Owned::Cut::kNone ? 0 : 1;
      cut_changes_landed += landed ? 1 : 0;
      if (problem.empty()) continue;
      ++problems;
      if (first_problem.empty()) first_problem = problem;
    }
  }
  MESSAGE("updates and deletes cut off by the SIGKILL: ", cut_changes,
          ", of which landed: ", cut_changes_landed);
  INFO("first problem: ", first_problem);
  CHECK(problems == 0);

  // Every acknowledged key still has its first answer, however its record changed since, and a
  // repeat appends nothing; a create whose answer the SIGKILL cut off is made at most once.
  const size_t events_a = all_events(a).size();
  const size_t events_b = all_events(b).size();
  size_t cut_creates = 0;
  size_t cut_landed = 0;
  for (const MixedWorker& w : workers) {
    Api& api = w.team == kTeamA ? a : b;
    for (const Keyed& k : w.keyed) {
      CAPTURE(k.key);
      Response again = api.post(std::string(k.kind->path), k.body, {{"Idempotency-Key", k.key}});
      if (k.answer.status == 0) {
        ++cut_creates;
        CHECK(again.status == 201);
        cut_landed += again.header("Idempotency-Replayed").has_value() ? 1 : 0;
        continue;
      }
      CHECK(again.status == k.answer.status);
      CHECK(again.header("Idempotency-Replayed") == std::optional<std::string>("true"));
      CHECK(json(again) == json(k.answer));
      CHECK(again.header("ETag") == k.answer.header("ETag"));
      CHECK(again.header("Location") == k.answer.header("Location"));
    }
  }
  MESSAGE("creates cut off by the SIGKILL: ", cut_creates, ", of which landed: ", cut_landed);
  CHECK(all_events(a).size() + all_events(b).size() ==
        events_a + events_b + (cut_creates - cut_landed));

  // The log and the projections agree after all this: the chain is whole and a replay of it
  // makes what gatewayd serves.
  REQUIRE(server.stop().success());
  auto check = testing::run_command({GATEWAYCTL_PATH, "check", "--data-dir", server.data_dir()}, {},
                                    std::chrono::seconds(60));
  INFO(check.out, check.err);
  CHECK(check.status.describe() == "exit 0");
  CHECK(check.out.starts_with("check: OK: "));
}

Response unauthenticated(const Server& server, const std::string& path) {
  return testing::HttpClient().request("GET", server.url() + path);
}

// A full disk (simulated by a file size limit on the server process: writes past it fail with
// EFBIG as they do with ENOSPC) stops writing. The operator sees why on stderr, both health checks
// answer 503 so a supervisor restarts gatewayd, reads go on, and the restart, with space again,
// has every create that was acknowledged.
TEST_CASE("a failed disk write stops writes, fails the health checks, and a restart recovers") {
  Server server;
  Api api(server, kTeamA);
  std::vector<std::pair<std::string, std::string>> acked;  // id, body
  for (int n = 0; n < 5; ++n) {
    Response r = api.post("/v1/webhook", webhook_body(kTeamA, "before-" + std::to_string(n)));
    REQUIRE(r.status == 201);
    acked.emplace_back(str(json(r), "webhook_id"), r.body);
  }
  REQUIRE(server.stop().success());
  server.restart({.max_file_bytes = 256 * 1024});  // a new write-ahead log, full after about 256 KB
  CHECK(unauthenticated(server, "/healthz").status == 200);
  const Headers key{{"Idempotency-Key", "before-the-failure"}};
  const std::string keyed_body = webhook_body(kTeamA, "keyed");
  Response keyed = api.post("/v1/webhook", keyed_body, key);
  REQUIRE(keyed.status == 201);
  acked.emplace_back(str(json(keyed), "webhook_id"), keyed.body);

  Response failed;
  for (int n = 0; n < 20000 && failed.status == 0; ++n) {
    std::string body = webhook_body(kTeamA, "full-" + std::to_string(n));
    Response r = api.post("/v1/webhook", body);
    if (r.status == 201) {
      acked.emplace_back(str(json(r), "webhook_id"), r.body);
    } else {
      failed = r;
    }
  }
  INFO("server output: ", server.output());
  REQUIRE(failed.status != 0);
  check_problem(failed, 503, "unavailable");
  CHECK(acked.size() > 5);
  MESSAGE("creates acknowledged before the write failed: ", acked.size() - 5);
  Response refused = api.post("/v1/webhook", webhook_body(kTeamA, "after-failure"));
  check_problem(refused, 503, "unavailable");
  CHECK(str(json(refused), "detail") == "the service cannot accept writes right now");
  for (const char* path : {"/healthz", "/readyz"}) {
    CAPTURE(path);
    Response health = unauthenticated(server, path);
    check_problem(health, 503, "unavailable");
    // This detail was written for the operator but replaced by the generic one of writes.
    CHECK(str(json(health), "detail") ==
          "writes stopped after a failed write to or read of the data dir (disk full or I/O "
          "error); restart gatewayd to recover");
  }
  CHECK(api.get(item_path(kWebhook, acked.back().first)).status == 200);
  // A retry of a create that was written gets its answer, as before the failure (it was 503).
  Response replayed = api.post("/v1/webhook", keyed_body, key);
  CHECK(replayed.status == 201);
  CHECK(replayed.body == keyed.body);
  check_problem(api.post("/v1/webhook", webhook_body(kTeamA, "other"), key), 503, "unavailable");
  CHECK(
      server.wait_for_line("gatewayd: writes stopped: cannot write a batch: IO error").has_value());
  CHECK(server.stop().success());  // SIGTERM exits 0 after a failed write too

  server.restart();
  CHECK(unauthenticated(server, "/healthz").status == 200);
  CHECK(unauthenticated(server, "/readyz").status == 200);
  size_t lost = 0;
  for (const auto& [id, body] : acked) {
    Response r = api.get(item_path(kWebhook, id));
    if (r.status != 200 || json(r) != testing::parse_json(body)) ++lost;
  }
  CHECK(lost == 0);
  CHECK(api.post("/v1/webhook", webhook_body(kTeamA, "after-restart")).status == 201);
}

// RocksDB's own info log (`LOG`) aborted gatewayd on a full disk: Debian's librocksdb asserts on
// the next write to it after a failed one. A limit of 4 KB fails that log within the first lines
// it writes at start, so gatewayd died with SIGABRT on every start; with it, and with the
// write-ahead log full soon after, gatewayd must run, refuse writes with 503 and exit 0.
TEST_CASE("a disk too full for RocksDB's info log neither stops gatewayd nor its shutdown") {
  Server server;
  Api api(server, kTeamA);
  Response first = api.post("/v1/webhook", webhook_body(kTeamA, "before"));
  REQUIRE(first.status == 201);
  REQUIRE(server.stop().success());
  server.restart({.max_file_bytes = 4096});
  INFO("server output: ", server.output());
  CHECK(api.get(item_path(kWebhook, str(json(first), "webhook_id"))).status == 200);
  Response failed;
  for (int n = 0; n < 1000 && failed.status == 0; ++n) {
    Response r = api.post("/v1/webhook", webhook_body(kTeamA, "full-" + std::to_string(n)));
    if (r.status != 201) failed = r;
  }
  check_problem(failed, 503, "unavailable");
  CHECK(server.wait_for_line("gatewayd: writes stopped:").has_value());
  CHECK(unauthenticated(server, "/healthz").status == 503);
  CHECK(server.stop().success());
  CHECK(server.output().find("Assertion") == std::string::npos);
}

// The largest write-ahead log in the data dir `dir`: after a crash, the one holding the writes.
std::string largest_log(const std::string& dir) {
  std::string wal;
  uintmax_t size = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".log" && entry.file_size() > size) {
      wal = entry.path().string();
      size = entry.file_size();
    }
  }
  return wal;
}

// Writes `bytes` over the file `path` at `offset`.
void overwrite(const std::string& path, uintmax_t offset, std::string_view bytes) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(f.good());
}

// Creates `n` webhooks of kTeamA named `tag`-0 and on, each acknowledged (REQUIREd); their ids.
std::vector<std::string> create_webhooks(Api& api, int n, std::string_view tag) {
  std::vector<std::string> ids;
  for (int i = 0; i < n; ++i) {
    Response r =
        api.post("/v1/webhook", webhook_body(kTeamA, std::string(tag) + "-" + std::to_string(i)));
    REQUIRE(r.status == 201);
    ids.push_back(str(json(r), "webhook_id"));
  }
  return ids;
}

// A write refused because the read it needs failed said "the service cannot accept writes right
// now", as if writes had stopped, while they went on (helper 123, with reads failing on EIO). A
// table file damaged where one webhook's bytes are fails every read of them with RocksDB's
// Corruption: the GET, the PUT and the DELETE of that webhook answer 503 saying reads fail (as
// does a domain's update next to it), and other writes go on.
TEST_CASE("a write whose read of the store fails says that reads fail, and writes go on") {
  Server server;
  Api api(server, kTeamA);
  // Snappy compresses a table file's blocks: a run of 4 bytes seen earlier in a block is stored
  // as a reference to it. This workload_id of rare letters has no 4 bytes in common with other
  // records (field names, ids, hex hashes: a hex one was split by such references in a third of
  // the runs), nor twice in itself, so it stays whole. In the middle of 300 webhooks, the blocks
  // holding it hold none of the keys a start or another write reads.
  const std::string marker = "xqyjkkxjvjkyykvkyjkvjyjvjqwyqkwqkvxkkjvzyxzzxwvq";
  create_webhooks(api, 150, "before");
  Response target = api.post("/v1/webhook", webhook_body(kTeamA, marker));
  REQUIRE(target.status == 201);
  const std::string path = item_path(kWebhook, str(json(target), "webhook_id"));
  create_webhooks(api, 150, "after");
  // A domain with the marker in a field of its record only (its hostname is in keys a start
  // reads), in the middle of 200 domains.
  for (int n = 0; n < 100; ++n) REQUIRE_FALSE(create(api, kDomain, n).empty());
  const std::string hostname = "unread.example.com";
  Response domain =
      api.post("/v1/domain", testing::json_with(domain_body(kTeamA, hostname), "workload_id",
                                                testing::json_quote(marker)));
  REQUIRE(domain.status == 201);
  const std::string domain_path = item_path(kDomain, str(json(domain), "domain_id"));
  for (int n = 100; n < 200; ++n) REQUIRE_FALSE(create(api, kDomain, n).empty());
  REQUIRE(server.stop().success());  // a clean stop flushes the projections to a table file
  int damaged = 0;
  for (const auto& entry : std::filesystem::directory_iterator(server.data_dir())) {
    if (entry.path().extension() != ".sst") continue;
    const std::string bytes = testing::read_file(entry.path().string());
    if (bytes.find("projections") == std::string::npos) continue;  // the column family's name
    for (size_t at = bytes.find(marker); at != std::string::npos; at = bytes.find(marker, at + 1)) {
      overwrite(entry.path().string(), at, "#");
      ++damaged;
    }
  }
  REQUIRE(damaged > 0);  // the records, their history and the tenant's feed
  server.restart();
  INFO("server output: ", server.output());
  const std::string reads_fail = "the service cannot read its data right now";
  Response got = api.get(path);
  check_problem(got, 503, "unavailable");
  CHECK(str(json(got), "detail") == reads_fail);
  for (Response refused : {api.put(path, webhook_body(kTeamA, "changed")), api.del(path)}) {
    check_problem(refused, 503, "unavailable");
    CHECK(str(json(refused), "detail") == reads_fail);
  }
  // A domain update whose body breaks a rule is checked against the stored domain as well: a
  // failed read of it is the answer, not a 422 short of those checks (helper 128: 422 naming
  // scope alone).
  Response unchecked = api.put(
      domain_path, testing::json_with(domain_body(kTeamA, hostname), "scope", R"("bogus")"));
  check_problem(unchecked, 503, "unavailable");
  CHECK(str(json(unchecked), "detail") == reads_fail);
  CHECK(api.post("/v1/webhook", webhook_body(kTeamA, "new")).status == 201);
  CHECK(unauthenticated(server, "/readyz").status == 200);
  CHECK(server.wait_for_line("unavailable: Corruption: block checksum mismatch").has_value());
}

// RocksDB's point-in-time recovery replayed the log up to a damaged record and dropped every
// acknowledged event after it without a word: gatewayd started with 15 of 50 creates, and the
// next create reused sequence number 16.
TEST_CASE("a write-ahead log damaged before its end stops gatewayd from starting") {
  Server server;
  Api api(server, kTeamA);
  create_webhooks(api, 50, "acked");
  server.kill();
  // The events are in the write-ahead log only (a crash; a clean stop would have flushed them to
  // table files): damage its middle.
  const std::string wal = largest_log(server.data_dir());
  const uintmax_t size = std::filesystem::file_size(wal);
  REQUIRE(size > 20000);
  overwrite(wal, size / 2, "\xff\xff\xff\xff");
  testing::CommandResult run =
      testing::run_command({GATEWAYD_PATH, "--listen", "127.0.0.1:0", "--data-dir",
                            server.data_dir(), "--tokens-file", server.tokens_file()},
                           testing::ChildEnv{{"GATEWAY_"}, {}}, std::chrono::seconds(10));
  CAPTURE(run.err);
  CHECK(run.status.exited);
  CHECK(run.status.code == 1);
  CHECK(run.err.find("cannot open " + server.data_dir() + ": Corruption:") != std::string::npos);
}

// A data dir whose CURRENT was lost (an operator's cleanup, a partial restore): gatewayd's first
// start exited 1 on RocksDB's "wal_dir contains existing log file" but left a new CURRENT naming
// an empty database, and the second served that empty store, having deleted every table file,
// while gatewayctl called the dir "no gatewayd database yet" (helper 113: 5,231 events gone).
TEST_CASE("a data dir without its CURRENT stops gatewayd and gatewayctl, and keeps its events") {
  Server server;
  Api api(server, kTeamA);
  create_webhooks(api, 20, "kept");
  REQUIRE(server.stop().success());
  REQUIRE(std::filesystem::remove(server.data_dir() + "/CURRENT"));
  const std::string refusal = ": it holds a database's files (";
  for (int attempt = 0; attempt < 2; ++attempt) {
    testing::CommandResult run =
        testing::run_command({GATEWAYD_PATH, "--listen", "127.0.0.1:0", "--data-dir",
                              server.data_dir(), "--tokens-file", server.tokens_file()},
                             testing::ChildEnv{{"GATEWAY_"}, {}}, std::chrono::seconds(10));
    CAPTURE(run.err);
    CHECK(run.status.describe() == "exit 1");
    CHECK(run.err.find("cannot open " + server.data_dir() + refusal) != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(server.data_dir() + "/CURRENT"));
  }
  auto check = testing::run_command({GATEWAYCTL_PATH, "check", "--data-dir", server.data_dir()}, {},
                                    std::chrono::seconds(30));
  CAPTURE(check.err);
  CHECK(check.status.describe() == "exit 1");
  CHECK(check.err.starts_with("gatewayctl: check: cannot read " + server.data_dir() + refusal));
  // CURRENT restored as the message says, every event is there.
  std::string manifest;
  for (const auto& entry : std::filesystem::directory_iterator(server.data_dir())) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("MANIFEST-")) manifest = std::max(manifest, name);
  }
  REQUIRE_FALSE(manifest.empty());
  std::ofstream(server.data_dir() + "/CURRENT") << manifest << "\n";
  server.restart();
  CHECK(num(field(json(api.get("/v1/webhook")), "pagination"), "total") == 20);
}

// RocksDB reserves disk ahead of its write-ahead log (about 70 MB) and MANIFEST (4 MB) and gives
// back what it did not use as it closes them. A SIGKILL leaves the reservation, and on a disk it
// had filled the restart failed for want of room for its new files (helper 113). gatewayd gives it
// back as it opens the data dir, before RocksDB writes, and says so in LOG.
TEST_CASE("after a SIGKILL, the restart gives back the disk reserved past the log's end") {
  Server server;
  Api api(server, kTeamA);
  create_webhooks(api, 5, "reserved");
  server.kill();
  // The log's and the MANIFEST's reservations, which the restart's LOG line counts: all of them
  // but what the blocks of their last bytes take.
  int reserved_files = 0;
  int64_t reserved = 0;
  for (const auto& entry : std::filesystem::directory_iterator(server.data_dir())) {
    const std::string name = entry.path().filename().string();
    if (!name.ends_with(".log") && !name.starts_with("MANIFEST-")) continue;
    const int64_t held = testing::held_past_size(entry.path());
    if (held < (1 << 20)) continue;
    ++reserved_files;
    reserved += held;
  }
  REQUIRE(reserved_files == 2);  // the log and the MANIFEST
  server.restart();
  CHECK(num(field(json(api.get("/v1/webhook")), "pagination"), "total") == 5);
  const std::string text = testing::read_file(server.data_dir() + "/LOG");
  const std::string said = "[WARN] gatewayd: gave back ";
  const size_t at = text.find(said);
  REQUIRE(at != std::string::npos);
  const int64_t given = std::stoll(text.substr(at + said.size()));
  CHECK(given > reserved - 2 * 4096);
  CHECK(given <= reserved);
  CHECK(text.find(" bytes of disk reserved past the ends of 2 of the database's files by a "
                  "run that did not close them (a crash)\n",
                  at) != std::string::npos);
}

// A power cut during a batch's synced write can leave the batch at its full length on disk with
// parts of it never written (ext4 gives a page its blocks when it writes it back: until then it
// reads as zeros). RocksDB drops a last record cut short, but took one of full length with a bad
// checksum for damage and refused to open: gatewayd did not start, and the recovery the README
// gave (restore a backup) lost every acknowledged write since that backup. The torn write was
// never acknowledged: gatewayd drops it, says so, and goes on from the write before it.
TEST_CASE("a write-ahead log whose last write a crash tore starts without that write") {
  Server server;
  Api api(server, kTeamA);
  const std::vector<std::string> ids = create_webhooks(api, 20, "torn");
  server.kill();
  // The last create's batch ends the log; a few of its bytes never reached the disk.
  const std::string wal = largest_log(server.data_dir());
  const uintmax_t size = std::filesystem::file_size(wal);
  REQUIRE(size > 10000);
  overwrite(wal, size - 100, std::string(8, '\0'));
  // The read-only commands cannot read it until gatewayd has dropped the torn write, and say so.
  auto before = testing::run_command({GATEWAYCTL_PATH, "check", "--data-dir", server.data_dir()},
                                     {}, std::chrono::seconds(60));
  CHECK(before.status.code == 1);
  CHECK(before.err.find("Corruption: checksum mismatch (the write-ahead log ends in a write that "
                        "a crash tore, never acknowledged: gatewayd drops it when it starts") !=
        std::string::npos);
  server.restart();
  auto said = server.wait_for_line("a write that a crash tore");
  REQUIRE(said.has_value());
  CHECK(said->find("gatewayd: " + server.data_dir() +
                   ": the write-ahead log ended in a write "
                   "that a crash tore (checksum mismatch in " +
                   std::filesystem::path(wal).filename().string()) == 0);
  for (size_t n = 0; n + 1 < ids.size(); ++n) {
    CHECK(api.get(item_path(kWebhook, ids[n])).status == 200);
  }
  CHECK(api.get(item_path(kWebhook, ids.back())).status == 404);
  CHECK(num(field(json(api.get("/v1/webhook")), "pagination"), "total") == 19);
  Response after = api.post("/v1/webhook", webhook_body(kTeamA, "after-the-tear"));
  CHECK(after.status == 201);
  REQUIRE(server.stop().success());
  // The log goes on from the last write kept: 19 events and the new one, the hash chain whole.
  auto check = testing::run_command({GATEWAYCTL_PATH, "check", "--data-dir", server.data_dir()}, {},
                                    std::chrono::seconds(60));
  INFO(check.out, check.err);
  CHECK(check.status.describe() == "exit 0");
  CHECK(check.out.starts_with("check: OK: 20 events, hash chain intact"));
}

}  // namespace
}  // namespace gw::itest::crash_test
