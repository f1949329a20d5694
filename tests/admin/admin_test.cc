// The admin commands' library on a real RocksDB, starting from the schema-1 fixture log
// (tests/fixtures/schema_v1/events.ndjson): it replays with scope subtree; check finds a broken
// hash chain and a read model that differs from a fresh replay; replay and events read the log
// back; rebuild refuses a data dir in use; backup copies every column family. check, replay and
// rebuild give the same results folding the log in memory and on disk.
#include <doctest/doctest.h>
#include <rocksdb/db.h>
#include <unistd.h>

#include <csignal>
#include <ext/stdio_filebuf.h>
#include <filesystem>
#include <fstream>
#include <latch>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include "admin/backup.h"
#include "admin/check.h"
#include "admin/log_export.h"
#include "admin/read_only.h"
#include "admin/rebuild.h"
#include "core/hex.h"
#include "projections/apply.h"
#include "projections/catch_up.h"
#include "projections/fold.h"
#include "projections/keys.h"
#include "projections/read_model.h"
#include "store/store_test_util.h"
#include "store/tx.h"
#include "support/event_log.h"
#include "support/json.h"
#include "support/sanitized.h"
#include "support/temp_dir.h"

namespace gw::admin {
namespace {

using testing::parse_json;
using testing::str;

constexpr char kDomainA[] = "dom_01HQ3Z8K2M4N6P8R0T2V4X6Y8Z";  // team_a, verified at event 3
constexpr char kDomainB[] = "dom_01HQ3Z9A1B2C3D4E5F6G7H8J9K";  // team_b, created at event 7
constexpr char kProfile[] = "gsp_01HQ3Z8M5Q7S9V1X3Z5B7D9F1H";  // team_a, event 4
constexpr char kWebhook[] = "whk_01HQ3Z8P6R8T0W2Y4A6C8E0G2J";  // team_b, events 5 and 6 (deleted)

std::string fixture_file() { return testing::fixture_path("schema_v1/events.ndjson"); }

std::vector<std::string> fixture_lines() {
  std::ifstream in(fixture_file());
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// A data dir seeded with the fixture log and rebuilt.
struct FixtureDir {
  FixtureDir() {
    REQUIRE(testing::load_event_log(dir.path(), fixture_file()) == 7);
    auto r = rebuild(dir.path());
    REQUIRE(r.ok());
    report = r.value();
  }
  std::string path() const { return dir.path(); }
  testing::ScratchDir dir;
  RebuildReport report;
};

std::unique_ptr<ReadOnlyStore> open_read_only(const std::string& path) {
  auto s = ReadOnlyStore::open(path);
  REQUIRE(s.ok());
  return std::move(s.value());
}

std::unique_ptr<Store> open_store(const std::string& path) {
  auto s = Store::open(path);
  REQUIRE(s.ok());
  return std::move(s.value());
}

// gatewayctl's reads called a dir whose MANIFEST was cut before its events' column family "no
// gatewayd database yet" (helper 156); a dir gatewayd opened whole once is damaged then.
TEST_CASE("a read of a marked data dir whose MANIFEST names no events says it is damaged") {
  FixtureDir fixture;
  REQUIRE(testing::cut_manifest_before_events(fixture.path()).cut > 0);
  auto refused = ReadOnlyStore::open(fixture.path());
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().detail ==
        "cannot read " + fixture.path() +
            ": its MANIFEST names no column family of events, yet a gatewayd opened it whole (it "
            "holds GATEWAYD-FORMAT): the MANIFEST is cut short or damaged, and opened, the dir "
            "would serve an empty log. Restore a backup");
}

FoldOptions fold_at(FoldPlace place, const std::string& scratch_dir = "") {
  FoldOptions options;
  options.place = place;
  options.scratch_dir = scratch_dir;
  return options;
}

// check's finding, which is the same whether it folds the log in memory or on disk.
std::string check_failure(const std::string& path) {
  auto ro = open_read_only(path);
  auto in_memory = check_store(ro->store(), fold_at(FoldPlace::kMemory));
  auto on_disk = check_store(ro->store(), fold_at(FoldPlace::kDisk, ro->scratch_dir() + "/fold"));
  REQUIRE(in_memory.ok());
  REQUIRE(on_disk.ok());
  CHECK(on_disk.value().failure == in_memory.value().failure);
  CHECK(on_disk.value().events == in_memory.value().events);
  CHECK(on_disk.value().projection_keys == in_memory.value().projection_keys);
  CHECK(on_disk.value().spent_counters == in_memory.value().spent_counters);
  CHECK(describe(on_disk.value().records) == describe(in_memory.value().records));
  CHECK_FALSE(std::filesystem::exists(ro->scratch_dir() + "/fold"));
  return in_memory.value().failure;
}

// Every key and value of a closed data dir's projections, counters back at 0 included.
std::map<std::string, std::string> raw_projections(const std::string& path) {
  auto store = open_store(path);
  std::map<std::string, std::string> out;
  auto it = store->iterate(Cf::kProjections);
  for (it->SeekToFirst(); it->Valid(); it->Next())
    out[it->key().ToString()] = it->value().ToString();
  return out;
}

// Edits the stored event `seq` of a closed data dir.
void edit_event(const std::string& path, uint64_t seq,
                const std::function<std::string(std::string)>& edit) {
  auto store = open_store(path);
  auto event = store->get(Cf::kEvents, encode_u64(seq));
  REQUIRE(event.ok());
  REQUIRE(event.value().has_value());
  auto s = store->db()->Put(rocksdb::WriteOptions(), store->cf(Cf::kEvents), encode_u64(seq),
                            edit(*event.value()));
  REQUIRE(s.ok());
}

// The record JSON the read model holds for `id`, exactly as GET sends it.
std::string stored_record(const std::string& path, Kind kind, const std::string& team,
                          const std::string& id) {
  auto store = open_store(path);
  auto found = ReadModel(*store).get(kind, team, id);
  REQUIRE(found.ok());
  REQUIRE(found.value().has_value());
  return found.value()->json;
}

TEST_CASE("a schema-1 log replays its domains with scope subtree") {
  FixtureDir fx;
  CHECK(fx.report.events == 7);
  CHECK(fx.report.records.domains == 2);
  CHECK(fx.report.records.profiles == 1);
  CHECK(fx.report.records.webhooks == 0);
  CHECK(fx.report.records.deleted == 1);
  auto a = parse_json(stored_record(fx.path(), Kind::kDomain, "team_a", kDomainA));
  CHECK(str(a, "scope") == "subtree");
  CHECK(str(a, "status") == "verified");
  auto b = parse_json(stored_record(fx.path(), Kind::kDomain, "team_b", kDomainB));
  CHECK(str(b, "scope") == "subtree");  // a deeper name, yet created before scope existed
  CHECK(str(b, "status") == "pending");
  auto store = open_store(fx.path());
  CHECK_FALSE(ReadModel(*store).get(Kind::kWebhook, "team_b", kWebhook).value().has_value());
}

TEST_CASE("check passes on an intact log and read model") {
  FixtureDir fx;
  auto ro = open_read_only(fx.path());
  auto report = check_store(ro->store());
  REQUIRE(report.ok());
  CHECK(report.value().failure == "");
  CHECK(report.value().events == 7);
  CHECK(report.value().projection_keys > 7);
  CHECK(describe(report.value().records) ==
        "live gateway_security_profile=1 domain=2 webhook=0 deleted=1");
}

TEST_CASE("check passes on a read model kept in step event by event, counters back at 0 and all") {
  FixtureDir fx;
  uint64_t replayed_keys = 0;  // what check compares on the rebuilt read model (no spent counters)
  {
    auto ro = open_read_only(fx.path());
    auto report = check_store(ro->store());
    REQUIRE(report.ok());
    replayed_keys = report.value().projection_keys;
  }
  {
    auto store = open_store(fx.path());
    REQUIRE(store->reset_projections().ok());
    SystemClock clock;
    auto ids = make_system_id_generator(clock);
    auto events = store->iterate(Cf::kEvents);
    for (events->SeekToFirst(); events->Valid(); events->Next()) {  // a batch per event, as live
      Tx tx(*store, *ids, 0, kGenesisHash);
      REQUIRE(apply_logged_event(tx, events->value().ToString()).ok());
      REQUIRE(store->db()->Write(rocksdb::WriteOptions(), tx.seal().value()).ok());
    }
    // The webhook created at event 5 and deleted at 6 leaves its list and filter counters at 0.
    size_t spent = 0;
    auto it = store->iterate(Cf::kProjections);
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      spent += is_spent_counter(it->key().ToString(), it->value().ToString()) ? 1 : 0;
    }
    CHECK(spent >= 2);
  }
  CHECK(check_failure(fx.path()) == "");
  // The spent counters read as no counter: the figure check prints counts only the keys compared.
  auto ro = open_read_only(fx.path());
  auto report = check_store(ro->store());
  REQUIRE(report.ok());
  CHECK(report.value().projection_keys == replayed_keys);
  // Counted apart, so that check's figures add up with backup's, which copies them (helper 32:
  // 19,184 keys backed up against 17,511 checked, with no word of the difference).
  auto all = ro->store().iterate(Cf::kProjections);
  uint64_t keys = 0;
  for (all->SeekToFirst(); all->Valid(); all->Next()) ++keys;
  CHECK(report.value().spent_counters >= 2);
  CHECK(report.value().projection_keys + report.value().spent_counters == keys);
}

// A fold on disk whose scratch database could not be read gave a stream that ended early, and
// check reported the rest of the read model as "not in a fresh replay" (helper 80).
TEST_CASE("check reports a replay that ended early by its error, not as a difference") {
  FixtureDir fx;
  auto ro = open_read_only(fx.path());
  std::vector<std::pair<std::string, std::string>> stored;
  auto it = ro->store().iterate(Cf::kProjections);
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    stored.emplace_back(it->key().ToString(), it->value().ToString());
  }
  REQUIRE(stored.size() > 4);
  // The first half of the read model, then the end.
  auto half = [&stored, i = size_t{0}](std::string* key, std::string* value) mutable {
    if (i >= stored.size() / 2) return false;
    *key = stored[i].first;
    *value = stored[i++].second;
    return true;
  };
  const Error failed = scratch_failed(make_error(Code::kUnavailable, "injected read error"));
  uint64_t compared = 0;
  uint64_t spent = 0;
  auto ended = compare_projections(
      ro->store(), half, [&] { return std::optional<Error>(failed); }, &compared, &spent);
  REQUIRE_FALSE(ended.ok());
  CHECK(ended.error().detail == "the fold on disk failed: injected read error");
  // The same stream with no error is a difference.
  auto short_replay = compare_projections(
      ro->store(), half, [] { return std::optional<Error>(); }, &compared, &spent);
  REQUIRE(short_replay.ok());
  CHECK(
      short_replay.value().ends_with(" is in the read model but not in a fresh replay of the log"));
}

TEST_CASE("check names the first event whose stored bytes were changed") {
  FixtureDir fx;
  edit_event(fx.path(), 4, [](std::string e) {
    e.replace(e.find("www.shop"), 8, "www.shap");
    return e;
  });
  CHECK(check_failure(fx.path()) == "event 4: hash does not match its content");
}

TEST_CASE("check names the event after one that was re-hashed, and a missing event") {
  FixtureDir fx;
  SUBCASE("re-hashed") {
    // Event 5 is changed and given a hash that fits its new content: the break shows at event 6.
    edit_event(fx.path(), 5, [](std::string e) {
      e.replace(e.find("hook-17"), 7, "hook-18");
      const size_t trailer = e.find(",\"prev_hash\":\"");
      const std::string prev = e.substr(trailer + 14, 64);
      const std::string canonical = e.substr(0, trailer) + "}";
      return canonical.substr(0, canonical.size() - 1) + ",\"prev_hash\":\"" + prev +
             "\",\"hash\":\"" + sha256_hex(prev + canonical) + "\"}";
    });
    CHECK(check_failure(fx.path()) == "event 6: prev_hash is not the hash of event 5");
  }
  SUBCASE("missing") {
    auto store = open_store(fx.path());
    REQUIRE(
        store->db()->Delete(rocksdb::WriteOptions(), store->cf(Cf::kEvents), encode_u64(3)).ok());
    store.reset();
    CHECK(check_failure(fx.path()) == "event 3: missing (the log goes on with event 4)");
  }
}

// A read model of another layout differed from a replay at its first key, which read as damage
// (helper 119).
TEST_CASE("check names a read model of another layout as such") {
  FixtureDir fx;
  {
    auto store = open_store(fx.path());
    auto* cf = store->cf(Cf::kProjections);
    auto checkpoint = store->get(Cf::kProjections, keys::checkpoint());
    REQUIRE(checkpoint.value().has_value());
    REQUIRE(store->db()->Delete(rocksdb::WriteOptions(), cf, keys::checkpoint()).ok());
    REQUIRE(store->db()
                ->Put(rocksdb::WriteOptions(), cf,
                      std::string("m\0checkpoint\0"
                                  "2",
                                  14),
                      *checkpoint.value())
                .ok());
  }
  CHECK(check_failure(fx.path()) ==
        "projections: the read model is of layout 2, not this release's 3: gatewayd rebuilds it "
        "when it starts, as gatewayctl rebuild does");
  REQUIRE(rebuild(fx.path()).ok());
  CHECK(check_failure(fx.path()) == "");
}

TEST_CASE("check names the first projection key that differs from a fresh replay") {
  FixtureDir fx;
  auto store = open_store(fx.path());
  auto* cf = store->cf(Cf::kProjections);
  std::string expected;
  SUBCASE("changed value") {
    auto value = store->get(Cf::kProjections, keys::record(kProfile)).value().value();
    value.replace(value.find("monitor"), 7, "block  ");
    REQUIRE(store->db()->Put(rocksdb::WriteOptions(), cf, keys::record(kProfile), value).ok());
    expected = "projections: r/" + std::string(kProfile) + " differs: the read model has";
  }
  SUBCASE("missing key") {
    const std::string key = keys::list_prefix("team_b", Kind::kDomain) + encode_u64(7);
    REQUIRE(store->db()->Delete(rocksdb::WriteOptions(), cf, key).ok());
    expected = "projections: l/team_b/2/7 of a fresh replay is missing from the read model";
  }
  SUBCASE("extra key") {
    REQUIRE(store->db()
                ->Put(rocksdb::WriteOptions(), cf, keys::profile_hostname("x.example"), "id")
                .ok());
    expected = "projections: p/x.example is in the read model but not in a fresh replay of the log";
  }
  store.reset();
  CHECK(check_failure(fx.path()).starts_with(expected));
}

TEST_CASE("replay lists the records live after an event, upcast, in creation order") {
  FixtureDir fx;
  auto ro = open_read_only(fx.path());
  auto ids_at = [&](uint64_t until) {
    std::ostringstream out;
    auto n = write_replay(ro->store(), until, out, fold_at(FoldPlace::kMemory));
    REQUIRE(n.ok());
    std::ostringstream on_disk;
    auto disk_n = write_replay(ro->store(), until, on_disk,
                               fold_at(FoldPlace::kDisk, ro->scratch_dir() + "/fold"));
    REQUIRE(disk_n.ok());
    CHECK(disk_n.value() == n.value());
    CHECK(on_disk.str() == out.str());
    auto doc = parse_json(out.str());
    REQUIRE(doc.IsObject());
    CHECK(testing::num(doc, "until_seq") == static_cast<int64_t>(until));
    std::vector<std::string> ids;
    for (const auto* r : testing::items(testing::field(doc, "records"))) {
      if (r->HasMember("domain_id")) {
        CHECK(str(*r, "scope") == "subtree");
        ids.push_back(str(*r, "domain_id"));
      } else {
        ids.push_back(r->HasMember("profile_id") ? str(*r, "profile_id") : str(*r, "webhook_id"));
      }
    }
    CHECK(n.value() == ids.size());
    return ids;
  };
  using Ids = std::vector<std::string>;
  CHECK(ids_at(0) == Ids{});
  CHECK(ids_at(1) == Ids{kDomainA});
  CHECK(ids_at(5) == Ids{kDomainA, kProfile, kWebhook});
  CHECK(ids_at(6) == Ids{kDomainA, kProfile});
  CHECK(ids_at(7) == Ids{kDomainA, kProfile, kDomainB});

  // Each record exactly as GET shows it: the last one's state is the read model's.
  std::ostringstream out;
  REQUIRE(write_replay(ro->store(), 7, out).ok());
  const std::string expected_a = stored_record(fx.path(), Kind::kDomain, "team_a", kDomainA);
  CHECK(out.str().find("\n" + expected_a + ",\n") != std::string::npos);
  std::ostringstream pending;
  REQUIRE(write_replay(ro->store(), 2, pending).ok());
  CHECK(str(parse_json(pending.str())["records"][0], "status") == "pending");

  std::ostringstream past;
  auto beyond = write_replay(ro->store(), 8, past);
  REQUIRE_FALSE(beyond.ok());
  CHECK(beyond.error().code == Code::kValidationFailed);
  CHECK(beyond.error().detail == "--until-seq 8 is past the end of the log (its last event is 7)");
}

TEST_CASE("events writes the stored bytes of the events after a sequence number") {
  FixtureDir fx;
  auto ro = open_read_only(fx.path());
  const auto lines = fixture_lines();
  REQUIRE(lines.size() == 7);
  std::ostringstream all;
  CHECK(write_events(ro->store(), 0, all).value() == 7);
  std::ostringstream tail;
  CHECK(write_events(ro->store(), 5, tail).value() == 2);
  CHECK(tail.str() == lines[5] + "\n" + lines[6] + "\n");
  std::string file;
  for (const auto& line : lines) file += line + "\n";
  CHECK(all.str() == file);
}

// An empty log's end was named "its last event is 0", an event no log has.
TEST_CASE("events and replay past the end of an empty log say it has no events") {
  testing::ScratchDir dir;
  open_store(dir.path()).reset();
  auto ro = open_read_only(dir.path());
  std::ostringstream out;
  auto events = write_events(ro->store(), 1, out);
  REQUIRE_FALSE(events.ok());
  CHECK(events.error().detail == "--after 1 is past the end of the log (it has no events yet)");
  auto records = write_replay(ro->store(), 1, out);
  REQUIRE_FALSE(records.ok());
  CHECK(records.error().detail ==
        "--until-seq 1 is past the end of the log (it has no events yet)");
  CHECK(write_events(ro->store(), 0, out).value() == 0);
  CHECK(out.str().empty());
}

// A full disk (/dev/full) said "cannot write the events" and no more (helper 44).
TEST_CASE("events and replay that cannot write say why") {
  FixtureDir fx;
  auto ro = open_read_only(fx.path());
  std::ofstream events("/dev/full");
  auto written = write_events(ro->store(), 0, events);
  REQUIRE_FALSE(written.ok());
  CHECK(written.error().detail == "cannot write the events: No space left on device");
  std::ofstream replay("/dev/full");
  auto records = write_replay(ro->store(), 7, replay);
  REQUIRE_FALSE(records.ok());
  CHECK(records.error().detail == "cannot write the records: No space left on device");
}

// A reader that went away (EPIPE) is told apart from any other failed write, so gatewayctl can
// end quietly in `gatewayctl events | head` (helper 78).
TEST_CASE("events and replay into a pipe without a reader say the reader went away") {
  FixtureDir fx;
  auto ro = open_read_only(fx.path());
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  ::close(fds[0]);
  const auto old_handler = ::signal(SIGPIPE, SIG_IGN);
  {
    __gnu_cxx::stdio_filebuf<char> buffer(fds[1], std::ios::out, 1);
    std::ostream out(&buffer);
    auto written = write_events(ro->store(), 0, out);
    REQUIRE_FALSE(written.ok());
    CHECK(written.error().detail == kReaderGone);
    out.clear();
    auto records = write_replay(ro->store(), 7, out);
    REQUIRE_FALSE(records.ok());
    CHECK(records.error().detail == kReaderGone);
    // Folded on disk, where the scratch database is read between the writes.
    out.clear();
    auto on_disk =
        write_replay(ro->store(), 7, out, fold_at(FoldPlace::kDisk, ro->scratch_dir() + "/fold"));
    REQUIRE_FALSE(on_disk.ok());
    CHECK(on_disk.error().detail == kReaderGone);
  }
  ::signal(SIGPIPE, old_handler);
}

TEST_CASE("rebuild on disk leaves the read model a rebuild in memory leaves") {
  FixtureDir fx;  // rebuilt in memory
  REQUIRE_FALSE(fx.report.on_disk);
  const auto in_memory = raw_projections(fx.path());
  REQUIRE(in_memory.size() > 7);
  {
    // Kept in step event by event: the webhook created and deleted leaves counters back at 0,
    // which neither fold writes.
    auto store = open_store(fx.path());
    REQUIRE(store->reset_projections().ok());
    SystemClock clock;
    auto ids = make_system_id_generator(clock);
    auto events = store->iterate(Cf::kEvents);
    for (events->SeekToFirst(); events->Valid(); events->Next()) {
      Tx tx(*store, *ids, 0, kGenesisHash);
      REQUIRE(apply_logged_event(tx, events->value().ToString()).ok());
      REQUIRE(store->db()->Write(rocksdb::WriteOptions(), tx.seal().value()).ok());
    }
  }
  REQUIRE(raw_projections(fx.path()).size() > in_memory.size());
  auto r = rebuild(fx.path(), fold_at(FoldPlace::kDisk));
  REQUIRE(r.ok());
  CHECK(r.value().on_disk);
  CHECK(r.value().events == 7);
  CHECK(describe(r.value().records) == describe(fx.report.records));
  CHECK(raw_projections(fx.path()) == in_memory);
  CHECK_FALSE(std::filesystem::exists(fx.path() + "/" + kFoldDir));
  CHECK(check_failure(fx.path()) == "");
}

TEST_CASE("rebuild refuses a data dir that is open for writing") {
  FixtureDir fx;
  auto store = open_store(fx.path());
  auto r = rebuild(fx.path());
  REQUIRE_FALSE(r.ok());
  INFO(r.error().detail);
  CHECK(r.error().detail.find("stop gatewayd first") != std::string::npos);
  store.reset();
  CHECK(rebuild(fx.path()).ok());
  CHECK_FALSE(rebuild(fx.path() + "/nothing-here").ok());
}

// Any failure whose text had "lock" in it was told as a data dir in use: on a read-only file
// system, rebuild said to stop gatewayd, which was not running.
TEST_CASE("rebuild says a data dir is in use only when another open holds it") {
  FixtureDir fx;
  open_store(fx.path()).reset();
  namespace fs = std::filesystem;
  fs::remove(fx.path() + "/LOCK");
  fs::create_directory(fx.path() + "/LOCK");  // cannot be opened as the lock file
  auto r = rebuild(fx.path());
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().detail.find("/LOCK") != std::string::npos);
  CHECK(r.error().detail.find("in use") == std::string::npos);
  CHECK(r.error().detail.find("stop gatewayd") == std::string::npos);
}

// Rebuild dropped the projections before reading the log: a malformed event then left no read
// model, and gatewayd refused to start ("cannot bring projections up to date").
TEST_CASE("a rebuild that cannot replay the log leaves the read model as it was") {
  FixtureDir fx;
  std::map<std::string, std::string> before;
  {
    auto store = open_store(fx.path());
    before = testing::projections_as_read(*store);
  }
  REQUIRE_FALSE(before.empty());
  edit_event(fx.path(), 5, [](std::string) { return std::string(R"({"seq":5,"broken)"); });
  auto r = rebuild(fx.path());
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().detail.find("event 5") != std::string::npos);
  auto store = open_store(fx.path());
  CHECK(testing::projections_as_read(*store) == before);
}

TEST_CASE("backup copies every column family and refuses a non-empty directory") {
  FixtureDir fx;
  {
    auto store = open_store(fx.path());
    REQUIRE(store->put_meta("mirror-checkpoint", "5").ok());
  }
  testing::ScratchDir parent;
  const std::string out = parent.path() + "/copy";
  auto r = backup(fx.path(), out);
  REQUIRE(r.ok());
  CHECK(r.value().last_seq == 7);
  CHECK(r.value().events == 7);
  CHECK(r.value().meta == 1);
  CHECK(check_failure(out) == "");
  CHECK(stored_record(out, Kind::kDomain, "team_a", kDomainA) ==
        stored_record(fx.path(), Kind::kDomain, "team_a", kDomainA));
  CHECK(open_store(out)->get(Cf::kMeta, "mirror-checkpoint").value() ==
        std::optional<std::string>("5"));
  CHECK(testing::read_file(out + "/GATEWAYD-FORMAT") == "1\n");  // the copy's own, made here

  auto again = backup(fx.path(), out);
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().code == Code::kPreconditionFailed);
  CHECK(check_failure(out) == "");  // untouched

  // An empty directory is fine; a file in it is not.
  const std::string empty = parent.path() + "/empty";
  std::filesystem::create_directory(empty);
  CHECK(backup(fx.path(), empty).ok());
  const std::string used = parent.path() + "/used";
  std::filesystem::create_directory(used);
  std::ofstream(used + "/notes.txt") << "mine";
  CHECK(backup(fx.path(), used).error().code == Code::kPreconditionFailed);
  CHECK(std::filesystem::exists(used + "/notes.txt"));
}

// A backup killed half way left a directory that gatewayd opened and served: part of the log
// (rebuilt into projections that `check` then passed), or projections half copied. The copy
// carries a marker until it is complete and durable, and a store holding it is not opened.
TEST_CASE("a backup's copy is marked unfinished until it is whole; a marked copy is not opened") {
  FixtureDir fx;
  testing::ScratchDir parent;
  const std::string out = parent.path() + "/copy";
  REQUIRE(backup(fx.path(), out).ok());
  const std::string marker = out + "/" + Store::kUnfinishedBackup;
  CHECK_FALSE(std::filesystem::exists(marker));
  CHECK(check_failure(out) == "");

  std::ofstream(marker).close();  // what a backup that was stopped leaves
  auto opened = Store::open(out);
  REQUIRE_FALSE(opened.ok());
  CHECK(opened.error().code == Code::kUnavailable);
  CHECK(opened.error().detail.find("holds a backup that gatewayctl backup did not finish") !=
        std::string::npos);
  auto read_only = ReadOnlyStore::open(out);
  REQUIRE_FALSE(read_only.ok());
  CHECK(read_only.error().detail.find("did not finish") != std::string::npos);
  auto rebuilt = rebuild(out);
  REQUIRE_FALSE(rebuilt.ok());
  CHECK(rebuilt.error().detail.find("did not finish") != std::string::npos);
  CHECK(backup(out, parent.path() + "/copy2").error().detail.find("did not finish") !=
        std::string::npos);
}

// A backup stopped in its first moments leaves its marker with no CURRENT yet, or a database
// without all of gatewayd's column families. gatewayctl told those as a dir a first start or a
// rebuild had left ("gatewayd finishes it when it starts"), and gatewayd and rebuild then refused
// it as the unfinished backup it is (helper 122).
TEST_CASE("a backup stopped before its copy has a whole database is refused as unfinished") {
  testing::ScratchDir parent;
  const std::string out = parent.path() + "/copy";
  std::filesystem::create_directory(out);
  std::ofstream(out + "/" + Store::kUnfinishedBackup).close();
  auto all_refuse = [&] {
    auto read_only = ReadOnlyStore::open(out);
    REQUIRE_FALSE(read_only.ok());
    CHECK(read_only.error().detail ==
          out + " holds a backup that gatewayctl backup did not finish (" +
              Store::kUnfinishedBackup +
              "): it may lack events or projections; remove it and make the backup again");
    auto rebuilt = rebuild(out);
    REQUIRE_FALSE(rebuilt.ok());
    CHECK(rebuilt.error().detail == read_only.error().detail);
    auto opened = Store::open(out);
    REQUIRE_FALSE(opened.ok());
    CHECK(opened.error().detail == read_only.error().detail);
  };
  SUBCASE("the marker alone") { all_refuse(); }
  SUBCASE("the default column family alone, or the events without the projections") {
    rocksdb::Options options;
    options.create_if_missing = true;
    rocksdb::DB* raw = nullptr;
    REQUIRE(rocksdb::DB::Open(options, out, &raw).ok());
    all_refuse();
    rocksdb::ColumnFamilyHandle* events = nullptr;
    REQUIRE(raw->CreateColumnFamily(rocksdb::ColumnFamilyOptions(), "events", &events).ok());
    REQUIRE(raw->DestroyColumnFamilyHandle(events).ok());
    delete raw;
    all_refuse();
  }
  CHECK(std::filesystem::exists(out + "/" + Store::kUnfinishedBackup));
}

// Two backups started at the same moment into one empty directory both found it empty; the one
// that then could not make the marker cleared the directory as it failed, the other one's copy
// with it, and both failed (helper 35). Now the marker's maker goes on and the other leaves.
// The rounds are there to meet the race: 40 in the release build, 8 in the sanitizer builds,
// where a round took about a second under ThreadSanitizer (the longest unit case there).
TEST_CASE("two backups started at once into one directory: one copy is whole, the other leaves") {
  FixtureDir fx;
  testing::ScratchDir parent;
  constexpr int kRounds = testing::kSanitized ? 8 : 40;
  for (int round = 0; round < kRounds; ++round) {
    CAPTURE(round);
    const std::string out = parent.path() + "/copy" + std::to_string(round);
    // Given empty, or made by the backups themselves.
    if (round % 2 == 0) REQUIRE(std::filesystem::create_directory(out));
    std::latch start(2);
    std::optional<Result<BackupReport>> results[2];
    std::thread second([&] {
      start.arrive_and_wait();
      results[1].emplace(backup(fx.path(), out));
    });
    start.arrive_and_wait();
    results[0].emplace(backup(fx.path(), out));
    second.join();
    CHECK(results[0]->ok() + results[1]->ok() == 1);
    for (const auto& result : results) {
      if (!result->ok()) CHECK(result->error().code == Code::kPreconditionFailed);
    }
    CHECK_FALSE(std::filesystem::exists(out + "/" + Store::kUnfinishedBackup));
    CHECK(check_failure(out) == "");
    CHECK(stored_record(out, Kind::kDomain, "team_a", kDomainA) ==
          stored_record(fx.path(), Kind::kDomain, "team_a", kDomainA));
  }
}

TEST_CASE("projection keys are described readably") {
  CHECK(describe_key(keys::record("dom_x")) == "r/dom_x");
  CHECK(describe_key(keys::history_prefix("dom_x") + encode_u64(3)) == "r/dom_x/3");
  CHECK(describe_key(keys::list_prefix("team_a", Kind::kWebhook) + encode_u64(258)) ==
        "l/team_a/3/258");
  CHECK(describe_key(keys::filter_prefix("t", Kind::kDomain, "status", "pending") +
                     encode_u64(9)) == "f/t/2/status/pending/9");
  CHECK(describe_key(keys::request_prefix() + encode_u64(12)) == "q/12");
  CHECK(describe_key(keys::checkpoint()) == "m/checkpoint/3");
  CHECK(describe_key(std::string("c\0t\x01", 4)) == "c/t\\x01");
}

// A write-ahead log cut short (a copy that stopped, a truncate) after the read model's column
// family was flushed past the cut: RocksDB finds a table file ahead of the log. The read-only
// commands told it as a crash's torn write, "never acknowledged: gatewayd drops it" (helper 160),
// while the writes cut had been synced, so acknowledged.
TEST_CASE("a log cut short behind a flushed table file is not told as a crash's torn write") {
  testing::ScratchDir dir;
  std::string log;
  {
    auto store = std::move(Store::open(dir.path()).value());
    for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
      if (e.path().extension() == ".log") log = e.path().string();
    }
    rocksdb::WriteOptions sync;
    sync.sync = true;
    for (int i = 0; i < 6; ++i) {
      rocksdb::WriteBatch batch;
      const std::string key = "k" + std::to_string(i);
      REQUIRE(batch.Put(store->cf(Cf::kEvents), key, std::string(500, 'a')).ok());
      REQUIRE(batch.Put(store->cf(Cf::kProjections), key, std::string(500, 'b')).ok());
      REQUIRE(store->db()->Write(sync, &batch).ok());
    }
    REQUIRE(store->db()->Flush(rocksdb::FlushOptions(), store->cf(Cf::kProjections)).ok());
  }  // dropped as a crash drops it: the events are in that log alone
  REQUIRE_FALSE(log.empty());
  std::filesystem::resize_file(log, std::filesystem::file_size(log) - 700);  // the last batch
  auto refused = ReadOnlyStore::open(dir.path());
  REQUIRE_FALSE(refused.ok());
  const std::string& said = refused.error().detail;
  CAPTURE(said);
  CHECK(said.find("SST file is ahead of WALs") != std::string::npos);
  CHECK(said.find("no crash does that to synced writes, so acknowledged events may be gone; "
                  "restore a backup)") != std::string::npos);
  CHECK(said.find("a crash tore") == std::string::npos);
}

}  // namespace
}  // namespace gw::admin
