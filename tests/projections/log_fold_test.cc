// The fold of a log, in memory (projections/log_fold.h) and on disk (disk_fold.h), writes exactly
// the read model that applying its events one by one writes: checked on a long random history of
// every kind of change, verification requests and outcomes, inheritance and deletes included.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "projections/apply.h"
#include "projections/catch_up.h"
#include "projections/fold.h"
#include "projections/keys.h"
#include "store/store_test_util.h"
#include "support/sanitized.h"

namespace gw {
namespace {

// The random log's length. The sanitizer builds of scripts/test.sh fold a quarter of it, still
// several of the folds' batches of 1,024 events: their instrumented JSON parsing made the
// 20,000 events about a minute of one core under ThreadSanitizer, the longest case of that stage.
constexpr int kRandomLogEvents = testing::kSanitized ? 5000 : 20000;

struct Live {
  Record record;
  uint64_t version = 1;
};

// Appends `n` random events to the log of `store`, with a valid hash chain. Hostnames are unique,
// as the uniqueness rules keep them among live records.
void write_random_log(Store& store, int n) {
  std::mt19937 rng(7);
  std::vector<Live> live;
  std::vector<uint64_t> open_requests;  // seqs of verification requests not yet answered
  std::string hash = kGenesisHash;
  rocksdb::WriteBatch batch;
  for (int seq = 1; seq <= n; ++seq) {
    EventDraft d;
    d.actor = "test";
    d.time = 1700000000 + seq;
    const int op = static_cast<int>(rng() % 100);
    size_t touched = 0;
    if (live.empty() || op < 35) {
      Record r;
      const std::string n_str = std::to_string(seq);
      if (rng() % 3 == 0) {
        Profile p;
        p.meta.id = "gsp_" + n_str;
        p.hostname = "p" + n_str + ".example.com";
        r = p;
      } else if (rng() % 2 == 0) {
        Domain x;
        x.meta.id = "dom_" + n_str;
        x.hostname = "d" + n_str + ".example.com";
        x.scope = rng() % 2 == 0 ? "exact" : "subtree";
        x.workload_id = "w" + std::to_string(rng() % 4);
        r = x;
      } else {
        Webhook h;
        h.meta.id = "whk_" + n_str;
        h.workload_id = "w" + std::to_string(rng() % 4);
        h.provider = "github";
        r = h;
      }
      meta_of(r).team_id = "team_" + std::to_string(rng() % 3);
      meta_of(r).created_at = d.time;
      touched = live.size();
      live.push_back(Live{r, 1});
      d.type = std::string(kind_name(kind_of(r))) + ".created";
    } else {
      touched = rng() % live.size();
      Live& l = live[touched];
      ++l.version;
      d.type = std::string(kind_name(kind_of(l.record))) + ".updated";
      auto* domain = std::get_if<Domain>(&l.record);
      if (op >= 90) {
        meta_of(l.record).deleted_at = d.time;
        d.type = std::string(kind_name(kind_of(l.record))) + ".deleted";
      } else if (domain != nullptr && op < 60) {
        d.type = "domain.verification_requested";
        open_requests.push_back(static_cast<uint64_t>(seq));
      } else if (domain != nullptr && op < 75 && !open_requests.empty()) {
        d.caused_by = open_requests[rng() % open_requests.size()];
        std::erase(open_requests, d.caused_by);
        d.type = "domain.verified";
        domain->status = "verified";
        domain->verification_parent_id = rng() % 3 == 0 ? "dom_1" : "";
      } else if (domain != nullptr) {
        domain->status = "pending";
        domain->verification_parent_id.clear();
        domain->scope = domain->scope == "exact" ? "subtree" : "exact";
      } else if (auto* h = std::get_if<Webhook>(&l.record)) {
        h->status = h->status == "active" ? "inactive" : "active";
      } else {
        std::get<Profile>(l.record).waf_mode = rng() % 2 == 0 ? "block" : "monitor";
      }
      meta_of(l.record).updated_at = d.time;
    }
    const Live& l = live[touched];
    d.aggregate_kind = kind_name(kind_of(l.record));
    d.aggregate_id = meta_of(l.record).id;
    d.aggregate_version = l.version;
    d.tenant = meta_of(l.record).team_id;
    d.data_json = to_json(l.record);
    std::string next;
    batch.Put(
        store.cf(Cf::kEvents), encode_u64(static_cast<uint64_t>(seq)),
        encode_event(static_cast<uint64_t>(seq), "evt_" + std::to_string(seq), d, hash, &next));
    hash = next;
    std::erase_if(live, [](const Live& x) { return meta_of(x.record).deleted_at != 0; });
  }
  REQUIRE(store.db()->Write(rocksdb::WriteOptions(), &batch).ok());
}

// The read model that applying the events of `store`'s log one by one writes, as catch-up past a
// checkpoint does; the store's projections are left as that writes them.
std::map<std::string, std::string> applied_one_by_one(Store& store) {
  SystemClock clock;
  auto ids = make_system_id_generator(clock);
  auto it = store.iterate(Cf::kEvents);
  it->SeekToFirst();
  while (it->Valid()) {
    Tx tx(store, *ids, 0, kGenesisHash);
    for (int n = 0; it->Valid() && n < 1000; ++n, it->Next()) {
      REQUIRE(
          apply_logged_event(tx, std::string_view(it->value().data(), it->value().size())).ok());
    }
    REQUIRE(store.db()->Write(rocksdb::WriteOptions(), tx.seal().value()).ok());
  }
  return testing::projections_as_read(store);
}

// Every record a fold lists, as JSON, in its order.
std::vector<std::string> records_of(const Fold& fold) {
  std::vector<std::string> out;
  REQUIRE(fold.for_each_record([&out](const Record& record) -> Result<bool> {
                out.push_back(to_json(record));
                return true;
              })
              .ok());
  return out;
}

// How many aggregates of each kind a fold has, live and deleted.
std::map<std::pair<Kind, bool>, int> kinds_of(const Fold& fold) {
  std::map<std::pair<Kind, bool>, int> out;
  REQUIRE(fold.for_each_kind([&out](Kind kind, bool deleted) { ++out[{kind, deleted}]; }).ok());
  return out;
}

FoldOptions at(FoldPlace place, const std::string& scratch_dir = "") {
  FoldOptions options;
  options.place = place;
  options.scratch_dir = scratch_dir;
  return options;
}

TEST_CASE("folding the log writes the read model that applying each event writes") {
  testing::ScratchDir dir;
  auto store = std::move(Store::open(dir.path()).value());
  write_random_log(*store, kRandomLogEvents);
  const auto applied = applied_one_by_one(*store);

  for (auto place : {FoldPlace::kMemory, FoldPlace::kDisk}) {
    CAPTURE(static_cast<int>(place));
    REQUIRE(store->reset_projections().ok());
    auto events = rebuild_projections(*store, at(place));
    REQUIRE(events.ok());
    CHECK(events.value() == kRandomLogEvents);
    const auto folded = testing::projections_as_read(*store);
    CHECK(folded.size() == applied.size());
    CHECK(folded == applied);
    CHECK_FALSE(std::filesystem::exists(dir.path() + "/rebuild.tmp"));
    CHECK_FALSE(std::filesystem::exists(dir.path() + "/fold.tmp"));

    // An empty read model is caught up by the same fold (on disk too in the integration
    // admin_test, by gatewayd's start; once here, for the time the sanitizer builds take).
    if (place == FoldPlace::kDisk) continue;
    REQUIRE(store->reset_projections().ok());
    SystemClock clock;
    auto ids = make_system_id_generator(clock);
    auto caught_up = catch_up_projections(*store, *ids, at(place));
    REQUIRE(caught_up.ok());
    CHECK(caught_up.value() == kRandomLogEvents);
    CHECK(testing::projections_as_read(*store) == applied);
  }
}

// Inheritance and revocation events carry the seq of the change they follow from. A `caused_by`
// closed a verification request whatever the event's type, so one naming a request (none does,
// but the log is what an auditor may have written) closed it: only outcomes close one now.
TEST_CASE("only a verification outcome's caused_by closes the request it names") {
  Domain child;
  child.meta.id = "dom_child";
  child.meta.team_id = "team_a";
  child.hostname = "a.example.com";
  child.scope = "exact";
  child.status = "pending";
  struct Step {
    const char* type;
    const char* status;
    uint64_t caused_by;
  };
  // Seq 2 opens a request; 3 names it but is no outcome; 4 answers it.
  const Step steps[] = {{"domain.created", "pending", 0},
                        {"domain.verification_requested", "pending", 0},
                        {"domain.verification_inherited", "verified", 2},
                        {"domain.verified", "verified", 2}};
  const std::string request_key = keys::request_prefix() + encode_u64(2);
  const std::string latest_key = keys::open_request("dom_child");
  for (size_t until = 3; until <= 4; ++until) {
    CAPTURE(until);
    testing::ScratchDir dir;
    auto store = std::move(Store::open(dir.path()).value());
    rocksdb::WriteBatch batch;
    std::string hash = kGenesisHash;
    for (uint64_t seq = 1; seq <= until; ++seq) {
      EventDraft d;
      d.type = steps[seq - 1].type;
      d.aggregate_kind = "domain";
      d.aggregate_id = child.meta.id;
      d.aggregate_version = seq;
      d.tenant = child.meta.team_id;
      d.actor = "test";
      d.time = 1700000000 + static_cast<int64_t>(seq);
      d.caused_by = steps[seq - 1].caused_by;
      child.status = steps[seq - 1].status;
      d.data_json = to_json(Record{child});
      std::string next;
      batch.Put(store->cf(Cf::kEvents), encode_u64(seq),
                encode_event(seq, "evt_" + std::to_string(seq), d, hash, &next));
      hash = next;
    }
    REQUIRE(store->db()->Write(rocksdb::WriteOptions(), &batch).ok());
    const auto applied = applied_one_by_one(*store);
    CHECK(applied.count(request_key) == (until == 3 ? 1 : 0));
    CHECK(applied.count(latest_key) == (until == 3 ? 1 : 0));
    REQUIRE(store->reset_projections().ok());
    REQUIRE(rebuild_projections(*store, at(FoldPlace::kMemory)).ok());
    CHECK(testing::projections_as_read(*store) == applied);
  }
}

TEST_CASE("a fold on disk lists the records a fold in memory lists, in the same order") {
  testing::ScratchDir dir;
  auto store = std::move(Store::open(dir.path()).value());
  write_random_log(*store, 5000);
  for (uint64_t until : {uint64_t{0}, uint64_t{1}, uint64_t{2500}, UINT64_MAX}) {
    CAPTURE(until);
    auto memory = Fold::of_log(*store, until, at(FoldPlace::kMemory));
    REQUIRE(memory.ok());
    CHECK_FALSE(memory.value()->on_disk());
    std::vector<std::string> notes;
    FoldOptions on_disk = at(FoldPlace::kDisk, dir.path() + "/scratch");
    on_disk.on_disk_note = [&notes](const std::string& note) { notes.push_back(note); };
    auto disk = Fold::of_log(*store, until, on_disk);
    REQUIRE(disk.ok());
    CHECK(disk.value()->on_disk());
    REQUIRE(notes.size() == 1);
    CHECK(notes[0] == "the log's " + std::to_string(std::min<uint64_t>(until, 5000)) +
                          " events are folded on disk in " + dir.path() + "/scratch: as asked");
    CHECK(std::filesystem::exists(dir.path() + "/scratch"));
    CHECK(disk.value()->events() == memory.value()->events());
    CHECK(disk.value()->last_seq() == memory.value()->last_seq());
    const auto listed = records_of(*memory.value());
    CHECK(records_of(*disk.value()) == listed);
    if (until <= 1) CHECK(listed.size() == until);  // the first event is a create
    const auto kinds = kinds_of(*memory.value());
    CHECK(kinds_of(*disk.value()) == kinds);
    int aggregates = 0;
    for (const auto& [kind, n] : kinds) aggregates += n;
    CHECK(aggregates == static_cast<int>(listed.size()));
    if (until >= 2500) CHECK(kinds.size() == 6);  // each kind live and deleted
    if (until >= 2500) CHECK(listed.size() > 500);
    {
      // The projections of a partial fold agree too. (The streams go before the fold.)
      auto a = concatenated(memory.value()->projections());
      auto b = concatenated(disk.value()->projections());
      std::string ka, va, kb, vb;
      uint64_t keys = 0;
      bool more_a = a(&ka, &va);
      bool more_b = b(&kb, &vb);
      for (; more_a && more_b; more_a = a(&ka, &va), more_b = b(&kb, &vb), ++keys) {
        REQUIRE(ka == kb);
        REQUIRE(va == vb);
      }
      CHECK(more_a == more_b);
      CHECK_FALSE(disk.value()->stream_error());
      if (until >= 2500) CHECK(keys > 5000);
    }
    disk.value().reset();
    CHECK_FALSE(std::filesystem::exists(dir.path() + "/scratch"));
  }
}

TEST_CASE("folding stops at a malformed event and names it, in memory and on disk") {
  testing::ScratchDir dir;
  auto store = std::move(Store::open(dir.path()).value());
  write_random_log(*store, 10);
  REQUIRE(
      store->db()->Put(rocksdb::WriteOptions(), store->cf(Cf::kEvents), encode_u64(4), "{}").ok());
  for (auto place : {FoldPlace::kMemory, FoldPlace::kDisk}) {
    CAPTURE(static_cast<int>(place));
    auto r = rebuild_projections(*store, at(place));
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().detail == "event 4: event lacks a required member");
    CHECK(testing::projections_as_read(*store).empty());
    CHECK_FALSE(std::filesystem::exists(dir.path() + "/fold.tmp"));
    uint64_t events = 99;
    auto fold = Fold::of_log(*store, UINT64_MAX, at(place), nullptr, &events);
    REQUIRE_FALSE(fold.ok());
    CHECK(events == 3);
  }
}

// Writes `n` profile creates whose WAF directives take `size` bytes each.
void write_large_profiles(Store& store, int n, size_t size) {
  std::string hash = kGenesisHash;
  rocksdb::WriteBatch batch;
  for (int seq = 1; seq <= n; ++seq) {
    Profile p;
    p.meta.id = "gsp_" + std::to_string(seq);
    p.meta.team_id = "team_a";
    p.hostname = "p" + std::to_string(seq) + ".example.com";
    p.waf_template = "custom";
    p.waf_custom_directives = std::string(size, '#');
    EventDraft d;
    d.actor = "test";
    d.time = 1700000000 + seq;
    d.type = "gateway_security_profile.created";
    d.aggregate_kind = kind_name(Kind::kProfile);
    d.aggregate_id = p.meta.id;
    d.aggregate_version = 1;
    d.tenant = p.meta.team_id;
    d.data_json = to_json(Record(p));
    std::string next;
    batch.Put(
        store.cf(Cf::kEvents), encode_u64(static_cast<uint64_t>(seq)),
        encode_event(static_cast<uint64_t>(seq), "evt_" + std::to_string(seq), d, hash, &next));
    hash = next;
  }
  REQUIRE(store.db()->Write(rocksdb::WriteOptions(), &batch).ok());
}

// An iterator that counts the steps taken through it.
class CountingIterator final : public rocksdb::Iterator {
 public:
  explicit CountingIterator(std::unique_ptr<rocksdb::Iterator> inner) : inner_(std::move(inner)) {}
  bool Valid() const override { return inner_->Valid(); }
  void SeekToFirst() override { inner_->SeekToFirst(); }
  void SeekToLast() override { inner_->SeekToLast(); }
  void Seek(const rocksdb::Slice& target) override { inner_->Seek(target); }
  void SeekForPrev(const rocksdb::Slice& target) override { inner_->SeekForPrev(target); }
  void Next() override {
    ++steps;
    inner_->Next();
  }
  void Prev() override { inner_->Prev(); }
  rocksdb::Slice key() const override { return inner_->key(); }
  rocksdb::Slice value() const override { return inner_->value(); }
  rocksdb::Status status() const override { return inner_->status(); }
  size_t steps = 0;

 private:
  std::unique_ptr<rocksdb::Iterator> inner_;
};

// Every event of `store`'s log added to a DiskFold in `dir`, one by one, and finished.
std::unique_ptr<DiskFold> fold_on_disk(const Store& store, const std::string& dir) {
  auto disk = std::move(DiskFold::create(dir).value());
  auto it = store.iterate(Cf::kEvents);
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    auto event = parse_logged_event(std::string_view(it->value().data(), it->value().size()));
    REQUIRE(event.ok());
    REQUIRE(disk->add(std::move(event.value())).ok());
  }
  REQUIRE(disk->finish().ok());
  return disk;
}

// A batch of events read and parsed at once took up to 4096 events whatever their size, and a
// scratch batch of the fold on disk up to 1024: a log of large profiles (60 KB of directives
// each) was held whole, read and parsed, by a fold in memory (2,000 of them: 283 MB of max RSS for
// 120 MB of events), and a fold on disk held 60 MB batches twice (508 MB). Both stop at a number
// of bytes now, as well.
TEST_CASE("a fold reads, parses and writes large events in batches bounded by their bytes") {
  testing::ScratchDir dir;
  auto store = std::move(Store::open(dir.path()).value());
  constexpr int kEvents = 40;
  write_large_profiles(*store, kEvents, 300'000);  // 12 MB
  SUBCASE("reading and parsing: two batches of 4 MB at most ahead of the event folded") {
    CountingIterator it(store->iterate(Cf::kEvents));
    it.SeekToFirst();
    size_t read_at_first = 0;
    int folded = 0;
    auto r = fold_events(it, UINT64_MAX, [&](LoggedEvent) -> Result<bool> {
      if (folded++ == 0) read_at_first = it.steps;
      return true;
    });
    REQUIRE(r.ok());
    CHECK(folded == kEvents);
    CHECK(read_at_first <= 2 * (4 * 1024 * 1024 / 300'000 + 1));
  }
  SUBCASE("the fold on disk writes its scratch batches every 4 MB or so") {
    auto disk = fold_on_disk(*store, dir.path() + "/fold");
    CHECK(disk->events() == kEvents);
    CHECK(disk->batches_written() >= 12 / 4);
  }
}

TEST_CASE("a fold on disk still writes small records DiskFold::kEventsPerBatch at a time") {
  testing::ScratchDir dir;
  auto store = std::move(Store::open(dir.path()).value());
  write_random_log(*store, 5000);
  auto disk = fold_on_disk(*store, dir.path() + "/fold");
  CHECK(disk->batches_written() ==
        (5000 + DiskFold::kEventsPerBatch - 1) / DiskFold::kEventsPerBatch);
}

TEST_CASE("auto folds in memory when the fold takes at most half of the memory available") {
  CHECK(parse_fold_place("auto") == FoldPlace::kAuto);
  CHECK(parse_fold_place("memory") == FoldPlace::kMemory);
  CHECK(parse_fold_place("disk") == FoldPlace::kDisk);
  CHECK_FALSE(parse_fold_place("Disk"));
  CHECK_FALSE(parse_fold_place(""));
  CHECK(fits_in_memory(1000, 2000));
  CHECK_FALSE(fits_in_memory(1001, 2000));
  CHECK(fits_in_memory(0, 0));
  CHECK_FALSE(fits_in_memory(UINT64_MAX, UINT64_MAX));
  // 1.2 KB an event, or 8/5 of the events' bytes if more: webhooks (718 bytes an event in the
  // benchmark's log) by their number, profiles of 60 KB by their bytes.
  CHECK(fold_memory_estimate(1000, 0) == 1000 * kFoldBytesPerEvent);
  CHECK(fold_memory_estimate(1000, 718'000) == 1000 * kFoldBytesPerEvent);
  CHECK(fold_memory_estimate(100, 6'000'000) == 9'600'000);
  CHECK(fold_memory_estimate(UINT64_MAX, 0) == UINT64_MAX);
  CHECK(fold_memory_estimate(1, UINT64_MAX) == UINT64_MAX);
  // This machine's, read from /proc: more than nothing, less than no limit.
  const uint64_t available = available_memory();
  CHECK(available > (16u << 20));
  CHECK(available < UINT64_MAX);
}

// auto counted 1.2 KB an event whatever their size, so a log of large records (profiles with
// kilobytes of WAF directives, about their size each in a fold in memory) was folded in memory
// where it did not fit. The events' bytes now count too, read from the store's own figures.
TEST_CASE("the events' bytes, in the memtable and in table files, are the store's raw bytes") {
  testing::ScratchDir dir;
  auto store = std::move(Store::open(dir.path()).value());
  const uint64_t empty = store->raw_bytes(Cf::kEvents);
  CHECK(empty < 10'000);
  const std::string large(60'000, 'w');  // about a profile with 60 KB of directives
  for (uint64_t seq = 1; seq <= 100; ++seq) {
    REQUIRE(store->db()
                ->Put(rocksdb::WriteOptions(), store->cf(Cf::kEvents), encode_u64(seq), large)
                .ok());
  }
  const uint64_t in_memtable = store->raw_bytes(Cf::kEvents);
  CHECK(in_memtable >= 6'000'000);
  CHECK(in_memtable < 7'000'000);
  REQUIRE(store->db()->Flush(rocksdb::FlushOptions(), store->cf(Cf::kEvents)).ok());
  const uint64_t in_tables = store->raw_bytes(Cf::kEvents);
  CHECK(in_tables >= 6'000'000);
  CHECK(in_tables < 7'000'000);
  // So auto takes them for 9.6 MB, not the 120 KB of 1.2 KB an event.
  CHECK(fold_memory_estimate(100, in_tables) >= 9'600'000);
}

TEST_CASE("the memory available is MemAvailable, or less under a cgroup's memory limit") {
  testing::ScratchDir root;
  auto write = [&root](const std::string& path, const std::string& text) {
    std::filesystem::create_directories(std::filesystem::path(root.path() + path).parent_path());
    std::ofstream(root.path() + path) << text;
  };
  const uint64_t mb = 1 << 20;
  CHECK(available_memory(root.path()) == UINT64_MAX);  // nothing to read
  write("/proc/meminfo",
        "MemTotal:       24683520 kB\nMemFree:  100 kB\nMemAvailable:    "
        "2097152 kB\nBuffers: 1 kB\n");
  CHECK(available_memory(root.path()) == 2048 * mb);
  SUBCASE("cgroup v2 with a limit, found by its path") {
    write("/proc/self/cgroup", "0::/system.slice/gw.service\n");
    write("/sys/fs/cgroup/system.slice/gw.service/memory.max", std::to_string(512 * mb) + "\n");
    write("/sys/fs/cgroup/system.slice/gw.service/memory.current", std::to_string(112 * mb));
    CHECK(available_memory(root.path()) == 400 * mb);
  }
  SUBCASE(
      "cgroup v2: memory.high, where the kernel throttles the group, bounds it like memory.max") {
    write("/proc/self/cgroup", "0::/batch\n");
    write("/sys/fs/cgroup/batch/memory.max", "max\n");
    write("/sys/fs/cgroup/batch/memory.high", std::to_string(600 * mb) + "\n");
    write("/sys/fs/cgroup/batch/memory.current", std::to_string(100 * mb));
    CHECK(available_memory(root.path()) == 500 * mb);
    write("/sys/fs/cgroup/batch/memory.max", std::to_string(300 * mb));  // the lower one counts
    CHECK(available_memory(root.path()) == 200 * mb);
  }
  SUBCASE("cgroup v2 without a limit") {
    write("/proc/self/cgroup", "0::/\n");
    write("/sys/fs/cgroup/memory.max", "max\n");
    write("/sys/fs/cgroup/memory.current", std::to_string(112 * mb));
    CHECK(available_memory(root.path()) == 2048 * mb);
  }
  SUBCASE("cgroup v2 in a container: its path is not there, the mount's root is its cgroup") {
    write("/proc/self/cgroup", "0::/docker/0123abc\n");
    write("/sys/fs/cgroup/memory.max", std::to_string(300 * mb));
    write("/sys/fs/cgroup/memory.current", std::to_string(400 * mb));  // over: nothing left
    CHECK(available_memory(root.path()) == 0);
  }
  SUBCASE("cgroup v2: a parent's limit bounds its child's (helper 80)") {
    write("/proc/self/cgroup", "0::/jobs.slice/inner\n");
    write("/sys/fs/cgroup/jobs.slice/memory.max", std::to_string(250 * mb));
    write("/sys/fs/cgroup/jobs.slice/memory.current", std::to_string(50 * mb));
    write("/sys/fs/cgroup/jobs.slice/inner/memory.max", "max\n");
    write("/sys/fs/cgroup/jobs.slice/inner/memory.current", std::to_string(40 * mb));
    CHECK(available_memory(root.path()) == 200 * mb);
  }
  SUBCASE("the page cache, active and inactive, counts as free, as in MemAvailable") {
    write("/proc/self/cgroup", "0::/job\n");
    write("/sys/fs/cgroup/job/memory.max", std::to_string(1024 * mb));
    write("/sys/fs/cgroup/job/memory.current", std::to_string(900 * mb));
    // A file read twice is on the active list (helper 81: 840 MB active, 36 KB inactive).
    write("/sys/fs/cgroup/job/memory.stat", "anon 1000\nfile 864026624\nactive_file " +
                                                std::to_string(700 * mb) + "\ninactive_file " +
                                                std::to_string(100 * mb) + "\nslab 5\n");
    CHECK(available_memory(root.path()) == 924 * mb);
  }
  SUBCASE("cgroup v1: a parent's limit bounds its child's, page cache as free") {
    write("/proc/self/cgroup", "4:memory:/job/inner\n");
    write("/sys/fs/cgroup/memory/job/memory.limit_in_bytes", std::to_string(300 * mb));
    write("/sys/fs/cgroup/memory/job/memory.usage_in_bytes", std::to_string(150 * mb));
    write("/sys/fs/cgroup/memory/job/memory.stat",
          "cache 5\ninactive_file 7\nactive_file 9\ntotal_active_file " + std::to_string(20 * mb) +
              "\ntotal_inactive_file " + std::to_string(30 * mb) + "\n");
    write("/sys/fs/cgroup/memory/job/inner/memory.limit_in_bytes", "9223372036854771712");
    write("/sys/fs/cgroup/memory/job/inner/memory.usage_in_bytes", std::to_string(100 * mb));
    CHECK(available_memory(root.path()) == 200 * mb);
  }
  SUBCASE("cgroup v1 with a limit, and the unlimited figure of v1") {
    write("/proc/self/cgroup", "9:name=systemd:/\n4:cpuacct,memory:/job/7\n0::/\n");
    write("/sys/fs/cgroup/memory/job/7/memory.limit_in_bytes", std::to_string(1024 * mb));
    write("/sys/fs/cgroup/memory/job/7/memory.usage_in_bytes", std::to_string(24 * mb));
    CHECK(available_memory(root.path()) == 1000 * mb);
    write("/sys/fs/cgroup/memory/job/7/memory.limit_in_bytes", "9223372036854771712\n");
    CHECK(available_memory(root.path()) == 2048 * mb);
  }
}

}  // namespace
}  // namespace gw
