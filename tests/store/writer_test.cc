// The single writer on a real RocksDB: sequence numbers, the hash chain, atomic batches, group
// commit and recovery of the tail after a restart.
#include <doctest/doctest.h>

#include <rapidjson/document.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <future>
#include <latch>
#include <map>
#include <mutex>
#include <thread>

#include "core/hex.h"
#include "store/store_test_util.h"
#include "store/writer.h"
#include "support/prometheus.h"

namespace gw {
namespace {

// Appends one event per job (or nothing when `reject`), then reports the outcome.
class AppendJob final : public Job {
 public:
  AppendJob(std::string id, bool reject, std::promise<bool> done, std::latch* gate = nullptr,
            std::latch* started = nullptr)
      : id_(std::move(id)),
        reject_(reject),
        done_(std::move(done)),
        gate_(gate),
        started_(started) {}
  bool execute(Tx& tx) override {
    if (started_ != nullptr) started_->count_down();
    if (gate_ != nullptr) gate_->wait();
    EventDraft d{"thing.created", "thing", id_, 1,
                 "team_a",        "test",  100, R"({"id":")" + id_ + "\"}"};
    tx.append(d);
    tx.put(Cf::kProjections, std::string("r\0", 2) + id_, "x");
    return !reject_;
  }
  void finish(bool committed) override { done_.set_value(committed); }

 private:
  std::string id_;
  bool reject_;
  std::promise<bool> done_;
  std::latch* gate_;
  std::latch* started_;
};

// Submits one AppendJob for `id` and waits for it: whether it was committed.
bool append_one(Writer& writer, const std::string& id) {
  std::promise<bool> p;
  auto f = p.get_future();
  writer.submit(std::make_unique<AppendJob>(id, false, std::move(p)));
  return f.get();
}

std::vector<std::string> all_events(Store& store) {
  std::vector<std::string> out;
  auto it = store.iterate(Cf::kEvents);
  for (it->SeekToFirst(); it->Valid(); it->Next()) out.push_back(it->value().ToString());
  return out;
}

// Recomputes every hash from the stored bytes: hash = SHA-256(prev_hash || event without hashes).
void check_chain(const std::vector<std::string>& events) {
  std::string prev = kGenesisHash;
  uint64_t seq = 0;
  for (const auto& e : events) {
    rapidjson::Document doc;
    doc.Parse(e.c_str());
    REQUIRE_FALSE(doc.HasParseError());
    CHECK(doc["seq"].GetUint64() == ++seq);
    CHECK(std::string(doc["prev_hash"].GetString()) == prev);
    const std::string suffix = ",\"prev_hash\":\"" + prev + "\",\"hash\":\"" +
                               doc["hash"].GetString() + "\"}";
    REQUIRE(e.size() > suffix.size());
    CHECK(e.substr(e.size() - suffix.size()) == suffix);
    std::string canonical = e.substr(0, e.size() - suffix.size()) + "}";
    CHECK(sha256_hex(prev + canonical) == doc["hash"].GetString());
    prev = doc["hash"].GetString();
  }
}

TEST_CASE("events get consecutive sequence numbers and a hash chain that survives a restart") {
  testing::ScratchDir dir;
  SystemClock clock;
  auto ids = make_system_id_generator(clock);
  for (int round = 0; round < 2; ++round) {
    auto store = Store::open(dir.path());
    REQUIRE(store.ok());
    auto writer = Writer::start(*store.value(), *ids);
    REQUIRE(writer.ok());
    CHECK(writer.value()->last_seq() == static_cast<uint64_t>(round * 5));
    for (int i = 0; i < 5; ++i) {
      std::promise<bool> p;
      auto f = p.get_future();
      writer.value()->submit(
          std::make_unique<AppendJob>("id" + std::to_string(i), false, std::move(p)));
      CHECK(f.get());
    }
    writer.value()->stop();
    auto events = all_events(*store.value());
    CHECK(events.size() == static_cast<size_t>((round + 1) * 5));
    check_chain(events);
  }
}

TEST_CASE("jobs queued during a sync share one batch; a rejected job leaves no trace") {
  testing::ScratchDir dir;
  SystemClock clock;
  auto ids = make_system_id_generator(clock);
  auto store = Store::open(dir.path());
  REQUIRE(store.ok());
  auto writer = Writer::start(*store.value(), *ids);
  REQUIRE(writer.ok());
  std::latch gate(1);
  std::latch started(1);
  std::vector<std::future<bool>> done;
  {
    std::promise<bool> p;
    done.push_back(p.get_future());
    // The first job holds the writer until the others are queued behind it.
    writer.value()->submit(
        std::make_unique<AppendJob>("first", false, std::move(p), &gate, &started));
  }
  started.wait();
  for (int i = 0; i < 100; ++i) {
    std::promise<bool> p;
    done.push_back(p.get_future());
    writer.value()->submit(
        std::make_unique<AppendJob>("job" + std::to_string(i), /*reject=*/i == 50, std::move(p)));
  }
  gate.count_down();
  for (auto& f : done) CHECK(f.get());
  // The 100 queued jobs share one batch. The first has one of its own, or joins theirs when the
  // commit thread takes its batch only after the writer thread staged them (a loaded machine).
  CHECK(writer.value()->batches() >= 1);
  CHECK(writer.value()->batches() <= 2);
  CHECK(writer.value()->last_seq() == 100);  // 101 jobs, one rejected
  auto events = all_events(*store.value());
  CHECK(events.size() == 100);
  check_chain(events);
  for (const auto& e : events) CHECK(e.find("\"aggregate_id\":\"job50\"") == std::string::npos);
  auto rejected = store.value()->get(Cf::kProjections, std::string("r\0job50", 7));
  REQUIRE(rejected.ok());
  CHECK_FALSE(rejected.value().has_value());
  auto accepted = store.value()->get(Cf::kProjections, std::string("r\0job49", 7));
  REQUIRE(accepted.ok());
  CHECK(accepted.value() == "x");
}

// A stop waits for the answers of writes while the writer has jobs unfinished (Server::shutdown).
TEST_CASE("a job is unfinished from its submit until the writer finished it; after stop, none") {
  testing::ScratchDir dir;
  SystemClock clock;
  auto ids = make_system_id_generator(clock);
  auto store = Store::open(dir.path());
  REQUIRE(store.ok());
  auto writer = Writer::start(*store.value(), *ids);
  REQUIRE(writer.ok());
  Writer& w = *writer.value();
  CHECK_FALSE(w.has_unfinished());
  std::latch gate(1);
  std::promise<bool> held;
  auto held_done = held.get_future();
  w.submit(std::make_unique<AppendJob>("held", false, std::move(held), &gate));
  CHECK(w.has_unfinished());
  gate.count_down();
  CHECK(held_done.get());
  bool finished = false;
  for (int i = 0; i < 500 && !(finished = !w.has_unfinished()); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(finished);
  const size_t written = all_events(*store.value()).size();
  CHECK(written == 1);
  w.stop();
  std::promise<bool> p;
  auto f = p.get_future();
  w.submit(std::make_unique<AppendJob>("late", false, std::move(p)));
  CHECK_FALSE(f.get());
  CHECK_FALSE(w.has_unfinished());
  CHECK(all_events(*store.value()).size() == written);
}

TEST_CASE("a second process cannot open the same data dir") {
  testing::ScratchDir dir;
  auto first = Store::open(dir.path());
  REQUIRE(first.ok());
  auto second = Store::open(dir.path());
  REQUIRE_FALSE(second.ok());
  CHECK(second.error().code == Code::kUnavailable);
}

}  // namespace
}  // namespace gw

namespace gw {
namespace {

// Wraps the real Env; while `fail` is set, appends and syncs of files it created fail like a full
// or broken disk. While `log_syncs` is shut, a sync of the write-ahead log waits (a slow disk)
// until it is opened, and fails then if `fail` was set meanwhile.
class FailingEnv final : public rocksdb::EnvWrapper {
 public:
  FailingEnv() : rocksdb::EnvWrapper(rocksdb::Env::Default()) {}
  const char* Name() const override { return "FailingEnv"; }
  std::atomic<bool> fail{false};
  testing::Gate log_syncs;

  rocksdb::Status NewWritableFile(const std::string& name,
                                  std::unique_ptr<rocksdb::WritableFile>* result,
                                  const rocksdb::EnvOptions& options) override {
    std::unique_ptr<rocksdb::WritableFile> file;
    auto s = target()->NewWritableFile(name, &file, options);
    if (s.ok()) result->reset(new File(std::move(file), *this, name.ends_with(".log")));
    return s;
  }

 private:
  class File final : public rocksdb::WritableFileWrapper {
   public:
    File(std::unique_ptr<rocksdb::WritableFile> target, FailingEnv& env, bool log)
        : rocksdb::WritableFileWrapper(target.get()), owned_(std::move(target)), env_(env),
          log_(log) {}
    rocksdb::Status Append(const rocksdb::Slice& data) override {
      if (env_.fail) return rocksdb::Status::IOError("injected: disk full");
      return rocksdb::WritableFileWrapper::Append(data);
    }
    rocksdb::Status Sync() override {
      if (log_) env_.log_syncs.pass();
      if (env_.fail) return rocksdb::Status::IOError("injected: fsync failed");
      return rocksdb::WritableFileWrapper::Sync();
    }
    rocksdb::Status Fsync() override { return Sync(); }

   private:
    std::unique_ptr<rocksdb::WritableFile> owned_;
    FailingEnv& env_;
    bool log_;
  };
};

// Reads a key through its Tx, then appends an event and writes its own key. `executed` is
// counted down after the read.
class ReadingJob final : public Job {
 public:
  ReadingJob(std::string id, std::string reads, std::latch& executed, std::promise<bool> done,
             std::vector<std::string>& finished)
      : id_(std::move(id)), reads_(std::move(reads)), executed_(executed), done_(std::move(done)),
        finished_(finished) {}
  bool execute(Tx& tx) override {
    auto r = tx.get(Cf::kProjections, reads_);
    seen = r.ok() && r.value() ? *r.value() : "(none)";
    tx.append(EventDraft{"thing.created", "thing", id_, 1, "team_a", "test", 100, "{}"});
    tx.put(Cf::kProjections, std::string("r\0", 2) + id_, "written by " + id_);
    executed_.count_down();
    return true;
  }
  void finish(bool committed) override {
    finished_.push_back(id_);  // the finish thread only: no lock needed
    done_.set_value(committed);
  }
  std::string seen;

 private:
  std::string id_;
  std::string reads_;
  std::latch& executed_;
  std::promise<bool> done_;
  std::vector<std::string>& finished_;
};

// Batch A is held in its log sync; job B is staged behind it meanwhile, reading A's key.
struct PipelineRun {
  testing::ScratchDir dir;
  SystemClock clock;
  std::unique_ptr<IdGenerator> ids = make_system_id_generator(clock);
  FailingEnv env;
  std::unique_ptr<Store> store = std::move(Store::open(dir.path(), &env).value());
  std::unique_ptr<Writer> writer = std::move(Writer::start(*store, *ids).value());
  std::vector<std::string> finished;
  std::latch a_executed{1};
  std::latch b_executed{1};
  std::future<bool> a_done;
  std::future<bool> b_done;
  ReadingJob* b = nullptr;

  void stage_b_behind_held_a() {
    env.log_syncs.shut();
    std::promise<bool> pa;
    a_done = pa.get_future();
    writer->submit(std::make_unique<ReadingJob>("a", "none", a_executed, std::move(pa), finished));
    env.log_syncs.await_waiting();  // A is being written
    std::promise<bool> pb;
    b_done = pb.get_future();
    auto job = std::make_unique<ReadingJob>("b", std::string("r\0a", 3), b_executed, std::move(pb),
                                            finished);
    b = job.get();
    writer->submit(std::move(job));
    b_executed.wait();  // B was staged while A's write had not ended
  }
};

TEST_CASE("a batch staged while the one before it is being written reads that batch's writes") {
  PipelineRun run;
  run.stage_b_behind_held_a();
  CHECK(run.b->seen == "written by a");
  auto stored = run.store->get(Cf::kProjections, std::string("r\0a", 3));
  REQUIRE(stored.ok());
  CHECK_FALSE(stored.value().has_value());  // A is not in the database yet: B read A's batch
  run.env.log_syncs.open();
  CHECK(run.a_done.get());
  CHECK(run.b_done.get());
  CHECK(run.finished == std::vector<std::string>{"a", "b"});
  CHECK(run.writer->last_seq() == 2);
  run.writer->stop();
  auto events = all_events(*run.store);
  CHECK(events.size() == 2);
  check_chain(events);
}

TEST_CASE("more jobs than one batch holds, queued behind a slow write, all get written") {
  PipelineRun run;  // its real store and writer on the FailingEnv; the jobs here are its own
  auto& env = run.env;
  auto& writer = run.writer;
  env.log_syncs.shut();
  std::vector<std::future<bool>> done;
  auto submit = [&](const std::string& id) {
    std::promise<bool> p;
    done.push_back(p.get_future());
    writer->submit(std::make_unique<AppendJob>(id, false, std::move(p)));
  };
  submit("held");
  env.log_syncs.await_waiting();
  // A batch takes at most 1024 jobs: the writer stages a full one behind the held write and
  // queues the rest, which must be staged once the full batch is taken, with no new submission.
  for (int i = 0; i < 2500; ++i) submit("job" + std::to_string(i));
  env.log_syncs.open();
  for (auto& f : done) {
    REQUIRE(f.wait_for(std::chrono::seconds(30)) == std::future_status::ready);
    CHECK(f.get());
  }
  CHECK(writer->last_seq() == 2501);
  CHECK(writer->batches() >= 4);
  writer->stop();
  auto events = all_events(*run.store);
  CHECK(events.size() == 2501);
  check_chain(events);
}

TEST_CASE("when a batch fails to be written, the batch staged on it fails too") {
  PipelineRun run;
  run.stage_b_behind_held_a();
  run.env.fail = true;
  run.env.log_syncs.open();
  CHECK_FALSE(run.a_done.get());
  CHECK_FALSE(run.b_done.get());  // B was decided on A's writes, which never happened
  CHECK(run.finished == std::vector<std::string>{"a", "b"});
  CHECK_FALSE(run.writer->writable());
  CHECK(run.writer->last_seq() == 0);
  run.writer->stop();
  run.env.fail = false;
  CHECK(all_events(*run.store).empty());
}

TEST_CASE("a failed write answers every job of the batch as not committed and stops writing") {
  testing::ScratchDir dir;
  SystemClock clock;
  auto ids = make_system_id_generator(clock);
  FailingEnv env;
  {
    auto store = Store::open(dir.path(), &env);
    REQUIRE(store.ok());
    auto writer = Writer::start(*store.value(), *ids);
    REQUIRE(writer.ok());
    auto append = [&](const std::string& id) { return append_one(*writer.value(), id); };
    CHECK(append("before"));
    env.fail = true;
    CHECK_FALSE(append("during"));
    CHECK_FALSE(writer.value()->writable());
    env.fail = false;
    CHECK_FALSE(append("after"));  // fail-stop until a restart
    CHECK(writer.value()->last_seq() == 1);
    writer.value()->stop();
  }
  auto store = Store::open(dir.path());
  REQUIRE(store.ok());
  auto events = all_events(*store.value());
  REQUIRE_FALSE(events.empty());
  CHECK(events[0].find("\"aggregate_id\":\"before\"") != std::string::npos);
  check_chain(events);
  auto writer = Writer::start(*store.value(), *ids);
  REQUIRE(writer.ok());
  CHECK(writer.value()->writable());
}

// A read that failed in a compaction stopped RocksDB's writes, but the writer learnt of it only
// from the next batch's failure: on an idle server /readyz said 200 for as long as no client
// wrote (helper 123, a failed pread of a table file in a compaction RocksDB started itself).
TEST_CASE("a compaction that fails stops the writes at once, before any write meets it") {
  testing::FailingReadsDir disk;
  {
    auto store = disk.open();
    auto writer = std::move(Writer::start(*store, *disk.ids).value());
    auto append = [&](const std::string& id) { return append_one(*writer, id); };
    for (int file = 0; file < 3; ++file) {  // three L0 table files of projections to compact
      REQUIRE(append("before-" + std::to_string(file)));
      REQUIRE(store->db()->Flush(rocksdb::FlushOptions(), store->cf(Cf::kProjections)).ok());
    }
    REQUIRE(store->level0_files(Cf::kProjections) == 3);
    REQUIRE(writer->writable());
    disk.env.fail = true;
    CHECK_FALSE(store->compact_level0(Cf::kProjections).ok());
    disk.env.fail = false;
    CHECK_FALSE(writer->writable());  // no write was tried
    CHECK_FALSE(append("after"));
    CHECK(writer->last_seq() == 3);
    writer->stop();
  }
  // A restart recovers: the three events, their chain, and writes again.
  auto store = std::move(Store::open(disk.dir.path()).value());
  auto events = all_events(*store);
  CHECK(events.size() == 3);
  check_chain(events);
  auto writer = std::move(Writer::start(*store, *disk.ids).value());
  CHECK(writer->writable());
}

// The Kafka mirror writes its checkpoint beside the writer (Store::put_meta, on its own thread).
// A failure of that write stopped RocksDB's writes without a word: the next client's write was
// the one told, and /readyz said 200 until then (helper 123).
TEST_CASE("a failed write of another thread's stops the writer's writes at once") {
  PipelineRun run;  // its real store and writer on the FailingEnv; no batch is held here
  REQUIRE(append_one(*run.writer, "before"));
  run.env.fail = true;
  std::thread([&] { CHECK_FALSE(run.store->put_meta("checkpoint", "x").ok()); }).join();
  run.env.fail = false;
  CHECK_FALSE(run.writer->writable());
  run.writer->stop();
}

// A Writer registered for RocksDB's stop and destroyed leaves nothing behind for a later one:
// a stop met after it (a flush at gatewayd's stop) reaches no writer, and a new writer on a store
// RocksDB stopped is stopped from its start.
TEST_CASE("a writer started on a store RocksDB has stopped is stopped from its start") {
  testing::FailingReadsDir disk;
  auto store = disk.open();
  for (int file = 0; file < 2; ++file) {  // two table files of one key: a compaction reads both
    REQUIRE(store->db()
                ->Put(rocksdb::WriteOptions(), store->cf(Cf::kProjections), "k",
                      "v" + std::to_string(file))
                .ok());
    REQUIRE(store->db()->Flush(rocksdb::FlushOptions(), store->cf(Cf::kProjections)).ok());
  }
  {
    auto first = std::move(Writer::start(*store, *disk.ids).value());
    first->stop();
  }
  disk.env.fail = true;
  CHECK_FALSE(store->compact_level0(Cf::kProjections).ok());
  disk.env.fail = false;
  auto second = std::move(Writer::start(*store, *disk.ids).value());
  CHECK_FALSE(second->writable());
}

// Wraps the real Env and keeps, for each write-ahead log file, its size at its last sync.
class SyncedSizesEnv final : public rocksdb::EnvWrapper {
 public:
  SyncedSizesEnv() : rocksdb::EnvWrapper(rocksdb::Env::Default()) {}
  const char* Name() const override { return "SyncedSizesEnv"; }
  rocksdb::Status NewWritableFile(const std::string& name,
                                  std::unique_ptr<rocksdb::WritableFile>* result,
                                  const rocksdb::EnvOptions& options) override {
    std::unique_ptr<rocksdb::WritableFile> file;
    auto s = target()->NewWritableFile(name, &file, options);
    if (s.ok() && name.ends_with(".log")) {
      file.reset(new File(std::move(file), *this, name));
    }
    if (s.ok()) *result = std::move(file);
    return s;
  }
  std::map<std::string, uint64_t> synced_sizes() {
    std::lock_guard<std::mutex> lock(mu_);
    return synced_;
  }

 private:
  class File final : public rocksdb::WritableFileWrapper {
   public:
    File(std::unique_ptr<rocksdb::WritableFile> target, SyncedSizesEnv& env, std::string name)
        : rocksdb::WritableFileWrapper(target.get()),
          owned_(std::move(target)),
          env_(env),
          name_(std::move(name)) {}
    rocksdb::Status Sync() override {
      auto s = rocksdb::WritableFileWrapper::Sync();
      std::error_code ec;
      const uint64_t size = std::filesystem::file_size(name_, ec);
      std::lock_guard<std::mutex> lock(env_.mu_);
      if (s.ok() && !ec) env_.synced_[name_] = size;
      return s;
    }
    rocksdb::Status Fsync() override { return Sync(); }

   private:
    std::unique_ptr<rocksdb::WritableFile> owned_;
    SyncedSizesEnv& env_;
    std::string name_;
  };
  std::mutex mu_;
  std::map<std::string, uint64_t> synced_;
};

// A write left unsynced in the write-ahead log (the mirror's checkpoint) lay between two synced
// batches: a power loss that kept the later batch and lost part of it left a log whose damage was
// not its last write, and gatewayd refused to start (helper 104). Every write syncs now, so the
// only record a crash can tear is the last one (store/wal_tail.h).
TEST_CASE("every write to the store leaves no unsynced byte in the write-ahead log") {
  testing::ScratchDir dir;
  SyncedSizesEnv env;
  auto store = Store::open(dir.path(), &env);
  REQUIRE(store.ok());
  auto unsynced = [&] {
    uint64_t bytes = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
      if (entry.path().extension() != ".log") continue;
      const auto synced = env.synced_sizes();
      const auto found = synced.find(entry.path().string());
      bytes += entry.file_size() - (found == synced.end() ? 0 : found->second);
    }
    return bytes;
  };
  for (int i = 0; i < 3; ++i) {
    REQUIRE(store.value()->put_meta("k" + std::to_string(i), std::string(100, 'v')).ok());
    CHECK(unsynced() == 0);
  }
  REQUIRE(store.value()->put_meta({{"a", "1"}, {"b", "2"}}).ok());
  CHECK(unsynced() == 0);
}

TEST_CASE("each synced batch write is timed: a write held in its log sync counts as slow") {
  PipelineRun run;  // its store on the FailingEnv; the jobs here are this test's own
  auto append = [&](const std::string& id) {
    std::promise<bool> p;
    auto f = p.get_future();
    run.writer->submit(std::make_unique<AppendJob>(id, false, std::move(p)));
    return f;
  };
  run.env.log_syncs.shut();
  auto held = append("held");
  run.env.log_syncs.await_waiting();  // the batch's write is in its sync, as on a stalled disk
  std::this_thread::sleep_for(std::chrono::milliseconds(80));
  run.env.log_syncs.open();
  CHECK(held.get());
  CHECK(append("quick").get());
  CHECK(run.writer->batches() == 2);
  CHECK(run.writer->write_latency().count() == 2);
  const std::string text = run.writer->render_metrics();
  INFO(text);
  CHECK(text.find("# TYPE gatewayd_store_batch_write_seconds histogram\n") != std::string::npos);
  const std::string name = "gatewayd_store_batch_write_seconds";
  using testing::sample;
  CHECK(sample(text, name + "_count") == 2);
  CHECK(sample(text, name + "_bucket{le=\"+Inf\"}") == 2);
  // The held write took at least 80 ms, so at most the quick one is within 50 ms.
  CHECK(sample(text, name + "_bucket{le=\"0.05\"}").value_or(2) <= 1);
  CHECK(sample(text, name + "_sum").value_or(0) >= 0.08);
  run.writer->stop();
}

}  // namespace
}  // namespace gw
