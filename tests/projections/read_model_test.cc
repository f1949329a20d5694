// Commands through the Service on a real RocksDB, read back through the ReadModel: lists, totals,
// filters and tenancy; and the read model rebuilt from the log equals the one kept in step.
#include <doctest/doctest.h>

#include <rocksdb/env.h>
#include <rocksdb/file_system.h>
#include <rocksdb/perf_context.h>
#include <rocksdb/perf_level.h>

#include <atomic>
#include <functional>
#include <future>
#include <map>
#include <random>

#include "projections/catch_up.h"
#include "projections/read_model.h"
#include "service/service.h"
#include "service/service_test_util.h"
#include "store/store_test_util.h"

namespace gw {
namespace {

// Ids that sort in the reverse of their creation order (as after a clock step back).
class DescendingIds final : public IdGenerator {
 public:
  std::string next(const char* prefix) override {
    std::string digits = std::to_string(1'000'000'000'000 - ++n_);
    return std::string(prefix) + "_" + std::string(26 - digits.size(), '0') + digits;
  }
  std::string random_hex(size_t bytes) override { return std::string(2 * bytes, 'a'); }

 private:
  uint64_t n_ = 0;
};

class ReadModelFixture {
 public:
  explicit ReadModelFixture(std::unique_ptr<IdGenerator> ids = nullptr) {
    store_ = std::move(Store::open(dir_.path()).value());
    ids_ = ids ? std::move(ids) : make_system_id_generator(clock_);
    writer_ = std::move(Writer::start(*store_, *ids_).value());
    service_ = std::make_unique<Service>(*writer_, clock_, *ids_, "verify.platform.test",
                                         FieldPolicy().platform);
  }
  ~ReadModelFixture() { writer_->stop(); }

  template <typename F>
  Result<Written> call(F&& f) {
    std::promise<Result<Written>> p;
    auto fut = p.get_future();
    f([&p](Result<Written> r) { p.set_value(std::move(r)); });
    return fut.get();
  }

  std::string create_domain(const std::string& team, const std::string& host,
                            const std::string& workload) {
    DomainSpec s;
    s.domain.meta.team_id = team;
    s.domain.hostname = host;
    s.domain.workload_id = workload;
    auto r = call([&](Done d) {
      service_->create(Spec{s}, Actor{team, "t"}, std::nullopt, std::move(d));
    });
    REQUIRE(r.ok());
    return r.value().json.substr(14, 30);  // {"domain_id":"<30 chars>"
  }

  // A webhook of team_a's with `status` and `workload`.
  static Webhook hook(const std::string& status, const std::string& workload) {
    Webhook h;
    h.meta.team_id = "team_a";
    h.provider = "github";
    h.status = status;
    h.workload_id = workload;
    return h;
  }

  // Creates webhooks of team_a, one per (status, workload), one after another.
  std::vector<std::string> create_webhooks(
      const std::vector<std::pair<std::string, std::string>>& specs) {
    std::vector<std::string> ids;
    for (const auto& [status, workload] : specs) {
      auto r = call([&](Done d) {
        service_->create(hook(status, workload), Actor{"team_a", "t"}, std::nullopt, std::move(d));
      });
      REQUIRE(r.ok());
      ids.push_back(r.value().json.substr(15, 30));
    }
    return ids;
  }

  std::map<std::string, std::string> dump_projections() {
    return testing::projections_as_read(*store_);
  }

  testing::ScratchDir dir_;
  SystemClock clock_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<IdGenerator> ids_;
  std::unique_ptr<Writer> writer_;
  std::unique_ptr<Service> service_;
};

TEST_CASE("lists page oldest first with true totals, filter, and forget deleted records") {
  ReadModelFixture fx;
  std::vector<std::string> ids;
  for (int i = 0; i < 25; ++i) {
    ids.push_back(fx.create_domain("team_a", "d" + std::to_string(i) + ".example.com",
                                   i % 2 == 0 ? "even" : "odd"));
  }
  fx.create_domain("team_b", "other.example.com", "even");
  ReadModel reads(*fx.store_);

  auto page2 = reads.list(Kind::kDomain, "team_a", {}, 2, 10);
  REQUIRE(page2.ok());
  CHECK(page2.value().total == 25);
  REQUIRE(page2.value().items.size() == 10);
  CHECK(page2.value().items[0].find(ids[10]) != std::string::npos);
  auto past = reads.list(Kind::kDomain, "team_a", {}, 4, 10);
  CHECK(past.value().items.empty());
  CHECK(past.value().total == 25);

  auto even = reads.list(Kind::kDomain, "team_a", {{"workload_id", "even"}}, 1, 100);
  CHECK(even.value().total == 13);
  auto even_pending =
      reads.list(Kind::kDomain, "team_a", {{"workload_id", "even"}, {"status", "pending"}}, 1, 5);
  CHECK(even_pending.value().total == 13);
  CHECK(even_pending.value().items.size() == 5);
  auto none =
      reads.list(Kind::kDomain, "team_a", {{"workload_id", "even"}, {"status", "verified"}}, 1, 5);
  CHECK(none.value().total == 0);

  auto del = fx.call([&](Done d) {
    fx.service_->remove(Kind::kDomain, ids[0], Actor{"team_a", "t"}, std::move(d));
  });
  REQUIRE(del.ok());
  CHECK(reads.list(Kind::kDomain, "team_a", {}, 1, 100).value().total == 24);
  CHECK(reads.list(Kind::kDomain, "team_a", {{"workload_id", "even"}}, 1, 100).value().total == 12);
  CHECK_FALSE(reads.get(Kind::kDomain, "team_a", ids[0]).value().has_value());
  CHECK(reads.get(Kind::kDomain, "team_a", ids[1]).value().has_value());
  CHECK_FALSE(reads.get(Kind::kDomain, "team_b", ids[1]).value().has_value());
  CHECK_FALSE(reads.get(Kind::kWebhook, "team_a", ids[1]).value().has_value());

  auto feed = reads.tenant_events("team_a", 0, 1000);
  CHECK(feed.value().events.size() == 26);  // 25 creates + 1 delete; team_b's event is not here
}

TEST_CASE("a list with several filters walks the narrowest filter's index") {
  ReadModelFixture fx;
  std::vector<std::string> rare;
  for (int i = 0; i < 60; ++i) {
    const bool is_rare = i == 20 || i == 45;
    std::string id = fx.create_domain("team_a", "n" + std::to_string(i) + ".example.com",
                                      is_rare ? "rare" : "common");
    if (is_rare) rare.push_back(id);
  }
  ReadModel reads(*fx.store_);
  // Store turns RocksDB's perf level off on a thread's first read: done here, before counting.
  REQUIRE(reads.list(Kind::kDomain, "team_a", {}, 1, 1).ok());
  // Point reads of the store (index entries and counters) made by one list call; the page's
  // records are walked with an iterator, not read one by one.
  auto point_reads = [&](const std::vector<ReadModel::Filter>& filters, uint64_t* total,
                         std::vector<std::string>* items) {
    rocksdb::SetPerfLevel(rocksdb::PerfLevel::kEnableCount);
    rocksdb::get_perf_context()->Reset();
    auto listed = reads.list(Kind::kDomain, "team_a", filters, 1, 20);
    const uint64_t gets = rocksdb::get_perf_context()->get_from_memtable_count;
    rocksdb::SetPerfLevel(rocksdb::PerfLevel::kDisable);
    // Every list reads at least one counter per filter (up to the first empty one, here the
    // last): fewer means the counts were not taken, and the upper bounds below would hold for
    // nothing.
    CHECK(gets >= filters.size());
    REQUIRE(listed.ok());
    *total = listed.value().total;
    *items = listed.value().items;
    return gets;
  };
  // `status` (60 entries) named first, `workload_id` (2 entries) second, and the other way round:
  // the same page, and the 2-entry index is the one walked (2 counters + 2 entry lookups, not
  // one lookup per pending domain).
  for (const auto& filters : std::vector<std::vector<ReadModel::Filter>>{
           {{"status", "pending"}, {"workload_id", "rare"}},
           {{"workload_id", "rare"}, {"status", "pending"}}}) {
    CAPTURE(filters[0].field);
    uint64_t total = 0;
    std::vector<std::string> items;
    CHECK(point_reads(filters, &total, &items) <= 4);
    CHECK(total == 2);
    REQUIRE(items.size() == 2);
    CHECK(items[0].find(rare[0]) != std::string::npos);
    CHECK(items[1].find(rare[1]) != std::string::npos);
  }
  // A filter that matches nothing ends the list after the counters, whatever comes before it.
  uint64_t total = 1;
  std::vector<std::string> items;
  CHECK(point_reads({{"status", "pending"}, {"workload_id", "nobody"}}, &total, &items) <= 2);
  CHECK(total == 0);
  CHECK(items.empty());
}

// A list of two filters joins their indexes (ReadModel::list, FilterCursor): the narrowest one is
// walked, the other is stepped along with it where their entries lie close, looked up entry by
// entry where they lie far apart, and tells the walk where its next entry is. Pages and totals
// against a model, over runs of records alike, scattered ones, status flips, moves between
// workloads (of single records and of blocks) and deletes.
TEST_CASE("lists of two filters equal the records that match both, in creation order") {
  ReadModelFixture fx;
  std::mt19937 random(20261201);
  const std::vector<std::string> workloads = {"run", "rare", "half", "w3", "w4"};
  const std::vector<std::string> statuses = {"active", "inactive"};
  struct Model {
    std::string status, workload;
    bool live = true;
  };
  std::map<std::string, Model> model;
  std::vector<std::string> order;  // every id, in creation order
  auto create = [&](size_t n,
                    const std::function<std::pair<std::string, std::string>(size_t)>& spec) {
    std::vector<std::pair<std::string, std::string>> specs;
    for (size_t i = 0; i < n; ++i) specs.push_back(spec(i));
    // In batches of 50 at once: creation order is the order of their sequence numbers, read
    // back from the list below.
    for (size_t from = 0; from < n; from += 50) {
      const size_t count = std::min<size_t>(50, n - from);
      auto ids = testing::call_all(count, [&](size_t i, Done d) {
        const auto& [status, workload] = specs[from + i];
        fx.service_->create(ReadModelFixture::hook(status, workload), Actor{"team_a", "t"},
                            std::nullopt, std::move(d));
      });
      for (size_t i = 0; i < count; ++i)
        model[ids[i]] = {specs[from + i].first, specs[from + i].second};
    }
  };
  // Runs of records alike, long and short, then records of random values.
  create(300, [](size_t i) {
    return std::pair{std::string(i < 150 ? "active" : "inactive"), std::string("run")};
  });
  create(400, [&](size_t i) {
    return std::pair{statuses[random() % 2],
                     i % 40 == 0 ? std::string("rare") : workloads[2 + random() % 3]};
  });
  create(200, [](size_t i) {
    return std::pair{std::string(i % 9 < 3 ? "inactive" : "active"),
                     std::string(i % 2 ? "half" : "run")};
  });
  ReadModel reads(*fx.store_);
  for (uint64_t page = 1;; ++page) {
    auto listed = reads.list(Kind::kWebhook, "team_a", {}, page, 100);
    REQUIRE(listed.ok());
    if (listed.value().items.empty()) break;
    for (const auto& item : listed.value().items) order.push_back(item.substr(15, 30));
  }
  REQUIRE(order.size() == model.size());

  auto check_all = [&](const std::string& when) {
    CAPTURE(when);
    for (const auto& status : statuses) {
      for (const auto& workload : workloads) {
        std::vector<std::string> want;
        for (const auto& id : order) {
          const Model& m = model[id];
          if (m.live && m.status == status && m.workload == workload) want.push_back(id);
        }
        for (const bool reversed : {false, true}) {
          std::vector<ReadModel::Filter> filters{{"status", status}, {"workload_id", workload}};
          if (reversed) std::swap(filters[0], filters[1]);
          const uint64_t per_page = 1 + random() % 60;
          for (uint64_t page = 1; page <= want.size() / per_page + 2; page += 1 + random() % 3) {
            CAPTURE(status);
            CAPTURE(workload);
            CAPTURE(per_page);
            CAPTURE(page);
            auto listed = reads.list(Kind::kWebhook, "team_a", filters, page, per_page);
            REQUIRE(listed.ok());
            CHECK(listed.value().total == want.size());
            std::vector<std::string> got;
            for (const auto& item : listed.value().items) got.push_back(item.substr(15, 30));
            const size_t from = std::min<size_t>((page - 1) * per_page, want.size());
            const size_t to = std::min<size_t>(from + per_page, want.size());
            CHECK(got == std::vector<std::string>(want.begin() + from, want.begin() + to));
          }
        }
      }
    }
  };
  check_all("created");

  // Flips of status and moves between workloads, then deletes, at random places.
  for (int round = 0; round < 3; ++round) {
    std::vector<std::string> changed;
    for (int i = 0; i < 120; ++i) changed.push_back(order[random() % order.size()]);
    std::sort(changed.begin(), changed.end());
    changed.erase(std::unique(changed.begin(), changed.end()), changed.end());
    std::erase_if(changed, [&](const std::string& id) { return !model[id].live; });
    std::vector<Model> next;
    for (size_t i = 0; i < changed.size(); ++i) {
      next.push_back({statuses[random() % 2], workloads[random() % workloads.size()]});
    }
    // And a block of 150 records one after another, all moved to one status and workload: the
    // indexes they leave get runs of deleted entries longer than a walk's bound.
    const Model block{statuses[round % 2], workloads[(round * 2) % workloads.size()]};
    for (size_t i = 150 * (2 * round + 1), end = i + 150; i < end; ++i) {
      if (!model[order[i]].live || std::binary_search(changed.begin(), changed.end(), order[i]))
        continue;
      changed.push_back(order[i]);
      next.push_back(block);
    }
    testing::call_all(changed.size(), [&](size_t i, Done d) {
      fx.service_->update(Kind::kWebhook, changed[i],
                          ReadModelFixture::hook(next[i].status, next[i].workload),
                          Actor{"team_a", "t"}, {}, std::move(d));
    });
    for (size_t i = 0; i < changed.size(); ++i) model[changed[i]] = next[i];
    std::vector<std::string> gone;
    for (int i = 0; i < 40; ++i) {
      const std::string& id = order[random() % order.size()];
      if (model[id].live && std::find(gone.begin(), gone.end(), id) == gone.end())
        gone.push_back(id);
    }
    testing::call_all(gone.size(), [&](size_t i, Done d) {
      fx.service_->remove(Kind::kWebhook, gone[i], Actor{"team_a", "t"}, std::move(d));
    });
    for (const auto& id : gone) model[id].live = false;
    check_all("round " + std::to_string(round));
  }
}

// What the join reads, counted (RocksDB's perf context; the store is in its memtable): a run the
// other index lacks is stepped over at once, a run both have is stepped along without point
// lookups, and entries far apart in the other index are looked up one by one.
TEST_CASE("a list of two filters steps over a run the other index lacks and along one it has") {
  ReadModelFixture fx;
  std::vector<std::pair<std::string, std::string>> specs;
  for (int i = 0; i < 250; ++i) specs.emplace_back("active", "run");
  for (int i = 0; i < 350; ++i) specs.emplace_back("inactive", i % 20 == 0 ? "every20" : "other");
  fx.create_webhooks(specs);
  ReadModel reads(*fx.store_);
  REQUIRE(reads.list(Kind::kDomain, "team_a", {}, 1, 1).ok());  // perf level: see above
  struct Counts {
    uint64_t total, gets, seeks, nexts;
  };
  auto counted = [&](const std::vector<ReadModel::Filter>& filters) {
    rocksdb::SetPerfLevel(rocksdb::PerfLevel::kEnableCount);
    rocksdb::get_perf_context()->Reset();
    // One record on the page: its read (a Seek of the records) is counted too.
    auto listed = reads.list(Kind::kWebhook, "team_a", filters, 1, 1);
    const auto* perf = rocksdb::get_perf_context();
    Counts out{0, perf->get_from_memtable_count, perf->seek_on_memtable_count,
               perf->next_on_memtable_count};
    rocksdb::SetPerfLevel(rocksdb::PerfLevel::kDisable);
    REQUIRE(listed.ok());
    out.total = listed.value().total;
    return out;
  };
  // `run` (250 entries) is walked; `inactive` (350) has none of them: one Seek of it lands after
  // the run, and the walk goes there at once (before: a point lookup for each of the 250). Two
  // counters are read.
  Counts lacked = counted({{"status", "inactive"}, {"workload_id", "run"}});
  CHECK(lacked.total == 0);
  CHECK(lacked.gets == 2);
  CHECK(lacked.seeks <= 4);
  CHECK(lacked.nexts <= 2 * 8);
  // `active` (250) has all of `run`'s: stepped along, one entry at a time, no lookups.
  Counts had = counted({{"workload_id", "run"}, {"status", "active"}});
  CHECK(had.total == 250);
  CHECK(had.gets == 2);
  CHECK(had.seeks <= 4);
  // `every20` (18 entries, one in 20 of the inactive ones) is walked; `inactive` has them 20
  // entries apart: each is looked up, and the iterator placed again only once every 16 lookups.
  Counts apart = counted({{"status", "inactive"}, {"workload_id", "every20"}});
  CHECK(apart.total == 18);
  CHECK(apart.gets <= 2 + 18);
  CHECK(apart.seeks <= 2 + 18 / 16 + 2);
}

// An iterator steps over every deleted entry in its way, a point lookup does not: with 1,979 of
// `active`'s 2,000 entries moved to `inactive` (each leaves a deleted entry until a compaction),
// the join stops stepping through them and looks the rare workload's entries up instead (helper
// 88: 0.1 ms before the join, 18 ms with it, before this bound).
TEST_CASE("a list of two filters does not step over the other index's deleted entries") {
  ReadModelFixture fx;
  const auto make = [](size_t i) {
    return ReadModelFixture::hook("active", i % 100 == 0 ? "rare" : "common");
  };
  std::vector<std::string> ids = testing::call_all(2000, [&](size_t i, Done d) {
    fx.service_->create(make(i), Actor{"team_a", "t"}, std::nullopt, std::move(d));
  });
  // All but one of the common ones: `active` keeps 21 entries, so `rare` (20) is walked.
  std::vector<std::string> common;
  for (size_t i = 2; i < ids.size(); ++i) {
    if (i % 100 != 0) common.push_back(ids[i]);
  }
  testing::call_all(common.size(), [&](size_t i, Done d) {
    fx.service_->update(Kind::kWebhook, common[i], ReadModelFixture::hook("inactive", "common"),
                        Actor{"team_a", "t"}, {}, std::move(d));
  });
  ReadModel reads(*fx.store_);
  REQUIRE(reads.list(Kind::kDomain, "team_a", {}, 1, 1).ok());  // perf level: see above
  rocksdb::SetPerfLevel(rocksdb::PerfLevel::kEnableCount);
  rocksdb::get_perf_context()->Reset();
  auto listed =
      reads.list(Kind::kWebhook, "team_a", {{"status", "active"}, {"workload_id", "rare"}}, 1, 1);
  const uint64_t skipped = rocksdb::get_perf_context()->internal_delete_skipped_count;
  rocksdb::SetPerfLevel(rocksdb::PerfLevel::kDisable);
  REQUIRE(listed.ok());
  CHECK(listed.value().total == 20);
  CHECK(skipped <= 64);  // twice the cursor's bound; 1,979 when stepped through
}

// The index walked (the narrowest by its counter) may be the one full of deleted entries: with
// all but 8 of `active`'s 3,000 entries moved out (8 left, all in the rare workload, which has
// 12), `active` is walked. Where its walk stops at a run of deleted entries, the rare workload's
// index tells where its next entry is, and the walk goes on from there (helper 88: 10 ms where
// the other index alone would have cost 0.4). Where the other index has entries all along the
// run (`common`), the walk's bound doubles until it is through.
TEST_CASE("a list of two filters passes a run of its walked index's deleted entries at once") {
  ReadModelFixture fx;
  const auto workload = [](size_t i) { return i % 250 == 0 ? "rare" : "common"; };
  std::vector<std::string> ids = testing::call_all(3000, [&](size_t i, Done d) {
    fx.service_->create(ReadModelFixture::hook("active", workload(i)), Actor{"team_a", "t"},
                        std::nullopt, std::move(d));
  });
  // Moved to `inactive`: every common one, and the rare ones at 0, 750, 1,500 and 2,250.
  std::vector<size_t> moved;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i % 250 != 0 || i % 750 == 0) moved.push_back(i);
  }
  testing::call_all(moved.size(), [&](size_t i, Done d) {
    fx.service_->update(Kind::kWebhook, ids[moved[i]],
                        ReadModelFixture::hook("inactive", workload(moved[i])),
                        Actor{"team_a", "t"}, {}, std::move(d));
  });
  ReadModel reads(*fx.store_);
  REQUIRE(reads.list(Kind::kDomain, "team_a", {}, 1, 1).ok());  // perf level: see above
  auto listed_with_skips = [&](const std::vector<ReadModel::Filter>& filters, uint64_t per_page,
                               uint64_t* skipped) {
    rocksdb::SetPerfLevel(rocksdb::PerfLevel::kEnableCount);
    rocksdb::get_perf_context()->Reset();
    auto listed = reads.list(Kind::kWebhook, "team_a", filters, 1, per_page);
    *skipped = rocksdb::get_perf_context()->internal_delete_skipped_count;
    rocksdb::SetPerfLevel(rocksdb::PerfLevel::kDisable);
    REQUIRE(listed.ok());
    return std::move(listed.value());
  };
  uint64_t skipped = 0;
  ReadModel::Page page =
      listed_with_skips({{"workload_id", "rare"}, {"status", "active"}}, 100, &skipped);
  CHECK(page.total == 8);
  std::vector<std::string> expected;
  for (size_t i = 250; i < ids.size(); i += 250) {
    if (i % 750 != 0) expected.push_back(ids[i]);
  }
  REQUIRE(page.items.size() == expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    CHECK(page.items[i].find(expected[i]) != std::string::npos);
  }
  // About 32 internal keys (16 moved entries) at each of the 12 runs: 2,992 walked through
  // before.
  CHECK(skipped <= 12 * 40);
  // `common` has an entry at every deleted one of `active`'s: nothing to jump to, and the walk is
  // through every run in at most twice its length.
  page = listed_with_skips({{"status", "active"}, {"workload_id", "common"}}, 20, &skipped);
  CHECK(page.total == 0);
  CHECK(page.items.empty());
  CHECK(skipped <= 2 * 2992 + 64);
  CHECK(skipped >= 2900);  // it did go through them
}

// Every read of a table file after the first `budget` of them fails (-1: none does).
class FailingReads final : public rocksdb::FileSystemWrapper {
 public:
  FailingReads() : FileSystemWrapper(rocksdb::FileSystem::Default()) {}
  const char* Name() const override { return "FailingReads"; }
  rocksdb::IOStatus NewRandomAccessFile(const std::string& name,
                                        const rocksdb::FileOptions& options,
                                        std::unique_ptr<rocksdb::FSRandomAccessFile>* file,
                                        rocksdb::IODebugContext* debug) override {
    std::unique_ptr<rocksdb::FSRandomAccessFile> base;
    auto s = target()->NewRandomAccessFile(name, options, &base, debug);
    if (s.ok()) *file = std::make_unique<File>(std::move(base), this);
    return s;
  }
  std::atomic<long> budget{-1};
  std::atomic<long> failed{0};

 private:
  class File final : public rocksdb::FSRandomAccessFileOwnerWrapper {
   public:
    File(std::unique_ptr<rocksdb::FSRandomAccessFile> base, FailingReads* fs)
        : FSRandomAccessFileOwnerWrapper(std::move(base)), fs_(fs) {}
    rocksdb::IOStatus Read(uint64_t offset, size_t n, const rocksdb::IOOptions& options,
                           rocksdb::Slice* result, char* scratch,
                           rocksdb::IODebugContext* debug) const override {
      if (fs_->budget.load() >= 0 && fs_->budget.fetch_sub(1) <= 0) {
        ++fs_->failed;
        return rocksdb::IOStatus::IOError("injected");
      }
      return target()->Read(offset, n, options, result, scratch, debug);
    }
    rocksdb::IOStatus MultiRead(rocksdb::FSReadRequest* requests, size_t n,
                                const rocksdb::IOOptions& options,
                                rocksdb::IODebugContext* debug) override {
      if (fs_->budget.load() >= 0 && fs_->budget.fetch_sub(1) <= 0) {
        ++fs_->failed;
        for (size_t i = 0; i < n; ++i) requests[i].status = rocksdb::IOStatus::IOError("injected");
        return rocksdb::IOStatus::IOError("injected");
      }
      return target()->MultiRead(requests, n, options, debug);
    }

   private:
    FailingReads* fs_;
  };
};

// A read that fails while a page's records are read is an error: the page was one record short,
// with no error, when a later record's Seek found its blocks cached (helper 92).
TEST_CASE("a list whose reads fail is an error, never a short page") {
  testing::ScratchDir dir;
  {
    auto store = std::move(Store::open(dir.path()).value());
    SystemClock clock;
    auto ids = make_system_id_generator(clock);
    auto writer = std::move(Writer::start(*store, *ids).value());
    Service service(*writer, clock, *ids, "verify.platform.test", FieldPolicy().platform);
    testing::call_all(300, [&](size_t i, Done d) {
      service.create(ReadModelFixture::hook(i % 2 ? "active" : "inactive", i % 3 ? "a" : "b"),
                     Actor{"team_a", "t"}, std::nullopt, std::move(d));
    });
    writer->stop();
    REQUIRE(store->flush().ok());
  }
  auto fs = std::make_shared<FailingReads>();
  auto env = rocksdb::NewCompositeEnv(fs);
  const std::vector<std::vector<ReadModel::Filter>> queries = {
      {}, {{"status", "active"}}, {{"status", "active"}, {"workload_id", "b"}}};
  const uint64_t totals[] = {300, 150, 50};
  // Each query fails at its first read, then its second, and so on, until a budget lets it read
  // all it needs: a larger one would read the same blocks with nothing failed (the store is
  // opened anew for each, so no block comes from the cache of the run before).
  for (size_t q = 0; q < queries.size(); ++q) {
    CAPTURE(q);
    int errors = 0;
    bool whole = false;
    for (long budget = 0; budget < 40 && !whole; ++budget) {
      CAPTURE(budget);
      fs->budget = -1;
      auto store = std::move(Store::open(dir.path(), env.get()).value());
      ReadModel reads(*store);
      const long failed_before = fs->failed.load();
      fs->budget = budget;
      auto listed = reads.list(Kind::kWebhook, "team_a", queries[q], 2, 20);
      fs->budget = -1;
      whole = fs->failed.load() == failed_before;
      if (!listed.ok()) {
        CHECK_FALSE(whole);  // nothing failed, so the list had no reason to
        ++errors;
        continue;
      }
      CHECK(listed.value().total == totals[q]);
      CHECK(listed.value().items.size() == 20);
    }
    CHECK(errors > 0);
    CHECK(whole);
  }
}

TEST_CASE(
    "a list page keeps creation order when ids sort otherwise and other records lie between") {
  ReadModelFixture fx(std::make_unique<DescendingIds>());
  std::vector<std::string> ids;
  for (int i = 0; i < 30; ++i) {
    ids.push_back(fx.create_domain("team_a", "a" + std::to_string(i) + ".example.com", "w"));
    // Other records between two of team_a's in key order: more than a few steps apart.
    for (int j = 0; j < 12; ++j) {
      fx.create_domain("team_b", "b" + std::to_string(i) + "-" + std::to_string(j) + ".example.com",
                       "w");
    }
  }
  REQUIRE(ids[0] > ids[1]);  // the first created sorts last
  ReadModel reads(*fx.store_);
  for (uint64_t page = 1; page <= 2; ++page) {
    auto listed = reads.list(Kind::kDomain, "team_a", {}, page, 20);
    REQUIRE(listed.ok());
    CHECK(listed.value().total == 30);
    const size_t first = (page - 1) * 20;
    REQUIRE(listed.value().items.size() == std::min<size_t>(20, 30 - first));
    for (size_t i = 0; i < listed.value().items.size(); ++i) {
      CHECK(listed.value().items[i].find("\"domain_id\":\"" + ids[first + i] + "\"") !=
            std::string::npos);
    }
  }
}

TEST_CASE("a list does not step over another tenant's deleted index entries") {
  ReadModelFixture fx;
  for (int i = 0; i < 5; ++i)
    fx.create_domain("team_a", "a" + std::to_string(i) + ".example.com", "w");
  // team_b's entries follow team_a's in key order; it creates and deletes 2,000 domains (sent
  // together, so they share batches), which leaves a tombstone per index entry until RocksDB
  // compacts them.
  constexpr int kGone = 2000;
  auto all_done = [](std::vector<std::future<Result<Written>>>& futures) {
    std::vector<std::string> out;
    for (auto& f : futures) {
      auto r = f.get();
      REQUIRE(r.ok());
      out.push_back(r.value().json.substr(14, 30));
    }
    futures.clear();
    return out;
  };
  std::vector<std::future<Result<Written>>> futures;
  auto pending = [&] {
    auto p = std::make_shared<std::promise<Result<Written>>>();
    futures.push_back(p->get_future());
    return [p](Result<Written> r) { p->set_value(std::move(r)); };
  };
  for (int i = 0; i < kGone; ++i) {
    DomainSpec s;
    s.domain.meta.team_id = "team_b";
    s.domain.hostname = "b" + std::to_string(i) + ".example.com";
    s.domain.workload_id = "w";
    fx.service_->create(Spec{s}, Actor{"team_b", "t"}, std::nullopt, pending());
  }
  for (const std::string& id : all_done(futures)) {
    fx.service_->remove(Kind::kDomain, id, Actor{"team_b", "t"}, pending());
  }
  all_done(futures);

  ReadModel reads(*fx.store_);
  REQUIRE(reads.list(Kind::kDomain, "team_a", {}, 1, 1).ok());  // perf level: see above
  for (const auto& filters : std::vector<std::vector<ReadModel::Filter>>{
           {}, {{"workload_id", "w"}}, {{"status", "pending"}}}) {
    CAPTURE(filters.size());
    rocksdb::SetPerfLevel(rocksdb::PerfLevel::kEnableCount);
    rocksdb::get_perf_context()->Reset();
    auto listed = reads.list(Kind::kDomain, "team_a", filters, 1, 20);
    const uint64_t skipped = rocksdb::get_perf_context()->internal_delete_skipped_count;
    rocksdb::SetPerfLevel(rocksdb::PerfLevel::kDisable);
    REQUIRE(listed.ok());
    CHECK(listed.value().total == 5);
    CHECK(listed.value().items.size() == 5);
    CHECK(skipped == 0);  // 2,000 when the walk ran on past team_a's last entry
  }
}

TEST_CASE("the read model rebuilt from the log equals the one kept in step with it") {
  ReadModelFixture fx;
  std::vector<std::string> ids;
  for (int i = 0; i < 10; ++i)
    ids.push_back(fx.create_domain("team_a", "r" + std::to_string(i) + ".example.com", "w"));
  for (int i = 0; i < 3; ++i) {
    auto r = fx.call([&](Done d) {
      fx.service_->remove(Kind::kDomain, ids[i], Actor{"team_a", "t"}, std::move(d));
    });
    REQUIRE(r.ok());
  }
  auto v = fx.call([&](Done d) {
    fx.service_->verify(ids[5], Actor{"team_a", "t"}, std::move(d));
  });
  REQUIRE(v.ok());
  CHECK(v.value().version == 2);
  // Verify a subtree parent too, so inheritance and the open-request queue (r5's request is
  // still open) are part of what is rebuilt.
  std::string parent = fx.create_domain("team_a", "example.com", "w");
  auto pv = fx.call([&](Done d) {
    fx.service_->verify(parent, Actor{"team_a", "t"}, std::move(d));
  });
  REQUIRE(pv.ok());
  ReadModel reads(*fx.store_);
  auto feed = reads.tenant_events("team_a", 0, 1000).value().events;
  uint64_t parent_request = 0;
  for (const auto& e : feed) {
    if (e.find("\"type\":\"domain.verification_requested\"") != std::string::npos &&
        e.find(parent) != std::string::npos) {
      parent_request = std::stoull(e.substr(7, e.find(',') - 7));  // {"seq":N,
    }
  }
  REQUIRE(parent_request > 0);
  std::string label;
  auto outcome = fx.call([&](Done d) {
    fx.service_->record_outcome(parent, parent_request, CheckResult{true, "", ""},
                                [&label, d](Result<Written> r, const std::string& written) {
                                  label = written;
                                  d(std::move(r));
                                });
  });
  REQUIRE(outcome.ok());
  CHECK(label == "verified");
  // The parent is verified and passed it to the 7 live pending r-domains.
  auto verified = reads.list(Kind::kDomain, "team_a", {{"status", "verified"}}, 1, 100);
  CHECK(verified.value().total == 8);
  fx.writer_->stop();
  auto before = fx.dump_projections();
  REQUIRE(fx.store_->reset_projections().ok());
  CHECK(fx.dump_projections().empty());
  auto applied = catch_up_projections(*fx.store_, *fx.ids_);
  REQUIRE(applied.ok());
  CHECK(applied.value() == 14 + 3 + 7);  // + create, verify request, verified; 7 inherited
  CHECK(fx.dump_projections() == before);
}

// Projections written by a gatewayd of layout 1 (keys.h: claims keyed by hostname, checkpoint
// without a layout) have no checkpoint under today's key, so catch-up drops them and rebuilds
// from the log: no key of the old layout survives to be misread.
TEST_CASE("projections of an older layout are dropped and rebuilt from the log") {
  ReadModelFixture fx;
  std::string parent = fx.create_domain("team_a", "example.com", "w");
  fx.create_domain("team_a", "shop.example.com", "w");
  auto v = fx.call([&](Done d) {
    fx.service_->verify(parent, Actor{"team_a", "t"}, std::move(d));
  });
  REQUIRE(v.ok());
  auto outcome = fx.call([&](Done d) {
    fx.service_->record_outcome(parent, 3, CheckResult{true, "", ""},
                                [d](Result<Written> r, const std::string&) { d(std::move(r)); });
  });
  REQUIRE(outcome.ok());
  fx.writer_->stop();
  auto before = fx.dump_projections();
  const std::string claim = keys::claim_prefix("example.com") + parent;
  REQUIRE(before.count(claim) == 1);
  REQUIRE(before.count(keys::checkpoint()) == 1);

  auto* db = fx.store_->db();
  auto* cf = fx.store_->cf(Cf::kProjections);
  const rocksdb::WriteOptions wo;
  REQUIRE(db->Delete(wo, cf, keys::checkpoint()).ok());
  REQUIRE(db->Put(wo, cf, std::string("m\0checkpoint", 12), encode_u64(5)).ok());
  REQUIRE(db->Delete(wo, cf, claim).ok());
  const std::string old_claim = std::string("v\0example.com\0", 14) + parent;
  REQUIRE(db->Put(wo, cf, old_claim, std::string("team_a\0subtree", 14)).ok());

  auto applied = catch_up_projections(*fx.store_, *fx.ids_);
  REQUIRE(applied.ok());
  CHECK(applied.value() == 5);  // 2 creates, the request, verified, 1 inherited
  CHECK(fx.dump_projections() == before);
}

// Layout 2 kept an aggregate's history under `h`, apart from its record; layout 3 keeps it right
// after the record (keys.h), so that a write's record and history entry land together.
TEST_CASE("projections of layout 2 (histories under h) are rebuilt with histories by the record") {
  ReadModelFixture fx;
  std::string id = fx.create_domain("team_a", "example.com", "w");
  fx.writer_->stop();
  auto before = fx.dump_projections();
  const std::string history = keys::history_prefix(id) + encode_u64(1);
  REQUIRE(before.count(history) == 1);
  CHECK(history.substr(0, keys::record(id).size() + 1) == keys::record(id) + std::string(1, '\0'));
  CHECK_FALSE(keys::is_record(history));
  CHECK(keys::is_record(keys::record(id)));

  auto* db = fx.store_->db();
  auto* cf = fx.store_->cf(Cf::kProjections);
  const rocksdb::WriteOptions wo;
  REQUIRE(db->Delete(wo, cf, keys::checkpoint()).ok());
  REQUIRE(db->Put(wo, cf,
                  std::string("m\0checkpoint\0"
                              "2",
                              14),
                  encode_u64(1))
              .ok());
  REQUIRE(db->Delete(wo, cf, history).ok());
  REQUIRE(db->Put(wo, cf, std::string("h\0", 2) + id + std::string(1, '\0') + encode_u64(1),
                  encode_u64(1))
              .ok());
  CHECK(other_projections_layout(*fx.store_).value() == std::optional<std::string>("2"));

  auto applied = catch_up_projections(*fx.store_, *fx.ids_);
  REQUIRE(applied.ok());
  CHECK(applied.value() == 1);
  CHECK(fx.dump_projections() == before);
  CHECK(other_projections_layout(*fx.store_).value() == std::nullopt);
}

// Only a checkpoint of another layout makes a read model another layout's: one that lost its
// checkpoint is no such thing (a difference check names as it finds it).
TEST_CASE("a read model is of another layout when a checkpoint of another layout names it") {
  testing::ScratchDir dir;
  auto store = Store::open(dir.path());
  REQUIRE(store.ok());
  auto other = [&store] { return other_projections_layout(*store.value()).value(); };
  CHECK(other() == std::nullopt);  // new: empty
  auto* db = store.value()->db();
  auto* cf = store.value()->cf(Cf::kProjections);
  const rocksdb::WriteOptions wo;
  REQUIRE(db->Put(wo, cf, keys::record("whk_1"), "r").ok());
  CHECK(other() == std::nullopt);  // keys, no checkpoint
  REQUIRE(db->Put(wo, cf, std::string("m\0checkpointx", 13), "x").ok());
  REQUIRE(db->Put(wo, cf,
                  std::string("m\0checkpoint\0"
                              "2a",
                              15),
                  "x")
              .ok());
  CHECK(other() == std::nullopt);  // no checkpoint keys
  REQUIRE(db->Put(wo, cf, std::string("m\0checkpoint", 12), "x").ok());
  CHECK(other() == std::optional<std::string>("1"));
  REQUIRE(db->Put(wo, cf,
                  std::string("m\0checkpoint\0"
                              "2",
                              14),
                  "x")
              .ok());
  CHECK(other() == std::optional<std::string>("2"));
  REQUIRE(db->Put(wo, cf, keys::checkpoint(), encode_u64(0)).ok());
  CHECK(other() == std::nullopt);
  REQUIRE(keys::checkpoint_layout(keys::checkpoint()) == std::string(keys::kLayout));
}

// ?as_of walked a record's history from its first version, so its cost grew with the history.
TEST_CASE("as_of finds the version of a long history in a few point reads") {
  ReadModelFixture fx;
  const std::string id = fx.create_domain("team_a", "h.example.com", "w1");
  ReadModel reads(*fx.store_);
  // seq_of[v]: the sequence number of the event that made version v. Another record's event
  // comes between two of them, so some sequence numbers fall between versions.
  std::vector<uint64_t> seq_of{0, reads.last_seq().value()};
  constexpr uint64_t kVersions = 200;
  for (uint64_t v = 2; v <= kVersions; ++v) {
    fx.create_domain("team_a", "o" + std::to_string(v) + ".example.com", "other");
    DomainSpec s;
    s.domain.meta.team_id = "team_a";
    s.domain.hostname = "h.example.com";
    s.domain.workload_id = "w" + std::to_string(v);
    auto r = fx.call([&](Done d) {
      fx.service_->update(Kind::kDomain, id, Spec{s}, Actor{"team_a", "t"}, {}, std::move(d));
    });
    REQUIRE(r.ok());
    REQUIRE(r.value().version == v);
    seq_of.push_back(reads.last_seq().value());
  }
  REQUIRE(reads.get_as_of(Kind::kDomain, "team_a", id, seq_of[1]).ok());  // perf level set off
  auto as_of = [&](uint64_t seq, uint64_t* point_reads, uint64_t* steps) {
    rocksdb::SetPerfLevel(rocksdb::PerfLevel::kEnableCount);
    rocksdb::get_perf_context()->Reset();
    auto found = reads.get_as_of(Kind::kDomain, "team_a", id, seq);
    *point_reads = rocksdb::get_perf_context()->get_from_memtable_count;
    *steps = rocksdb::get_perf_context()->next_on_memtable_count;
    rocksdb::SetPerfLevel(rocksdb::PerfLevel::kDisable);
    REQUIRE(found.ok());
    return found.value();
  };
  uint64_t most_reads = 0, most_steps = 0;
  for (uint64_t v = 1; v <= kVersions; ++v) {
    CAPTURE(v);
    for (uint64_t seq : {seq_of[v], seq_of[v] + 1}) {
      CAPTURE(seq);
      uint64_t point_reads = 0, steps = 0;
      auto found = as_of(seq, &point_reads, &steps);
      REQUIRE(found.has_value());
      CHECK(found->version == v);
      CHECK(found->json.find("\"workload_id\":\"w" + std::to_string(v) + "\"") !=
            std::string::npos);
      most_reads = std::max(most_reads, point_reads);
      most_steps = std::max(most_steps, steps);
    }
  }
  uint64_t point_reads = 0, steps = 0;
  CHECK_FALSE(as_of(seq_of[1] - 1, &point_reads, &steps).has_value());  // before its creation
  // The record, its event, and about log2(200) = 8 history entries (before: up to 200 steps).
  CHECK(most_reads >= 3);
  CHECK(most_reads <= 2 + 9);
  CHECK(most_steps <= 2);
}

// The log's last seq is its last key, 8 bytes; a key of another length (a store written by some
// other tool, or damaged) was decoded all the same, read past its end when shorter.
TEST_CASE("the log's last seq is 0 when empty, the last key's, and an error for a malformed key") {
  testing::ScratchDir dir;
  auto store = std::move(Store::open(dir.path()).value());
  ReadModel reads(*store);
  CHECK(reads.last_seq().value() == 0);
  const rocksdb::WriteOptions write;
  REQUIRE(store->db()->Put(write, store->cf(Cf::kEvents), encode_u64(41), "{}").ok());
  REQUIRE(store->db()->Put(write, store->cf(Cf::kEvents), encode_u64(42), "{}").ok());
  CHECK(reads.last_seq().value() == 42);
  REQUIRE(store->db()->Put(write, store->cf(Cf::kEvents), "abc", "{}").ok());  // sorts last
  auto last = reads.last_seq();
  REQUIRE_FALSE(last.ok());
  CHECK(last.error().code == Code::kInternal);
  CHECK(last.error().detail == "an event key is malformed");
}

}  // namespace
}  // namespace gw
