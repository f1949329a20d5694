// The list memo (projections/list_memo.h): alone, and as a watcher of a real Writer on a real
// RocksDB, with deep list pages read through it compared with the same pages walked from the
// index's start while the Service creates, updates and deletes records.
#include <doctest/doctest.h>

#include <atomic>
#include <future>
#include <random>
#include <thread>

#include "projections/keys.h"
#include "projections/list_memo.h"
#include "projections/read_model.h"
#include "projections/watchers.h"
#include "service/service.h"
#include "service/service_test_util.h"
#include "store/store_test_util.h"

namespace gw {
namespace {

const std::string kIndex = keys::list_prefix("team_a", Kind::kWebhook);

std::string entry(uint64_t seq) { return kIndex + encode_u64(seq); }

// The checkpoint begin() gives for `offset`, with a visit for remember().
std::optional<ListMemo::Checkpoint> nearest(ListMemo& memo, uint64_t offset,
                                            ListMemo::Visit* visit = nullptr) {
  ListMemo::Visit ignored;
  return memo.begin(
      kIndex, offset, [] {}, visit != nullptr ? visit : &ignored);
}

TEST_CASE("the list memo gives the nearest checkpoint and forgets those a write can move") {
  ListMemo memo;
  ListMemo::Visit visit;
  CHECK_FALSE(nearest(memo, 5000, &visit));
  // Entry seq 10 * k has k - 1 entries before it: strided at 1024 and 2048, a page end at 2059.
  memo.remember(kIndex, visit, {{1024, 10250}, {2048, 20490}, {2059, 20600}}, 2060, false);
  CHECK_FALSE(nearest(memo, 1023));
  CHECK(nearest(memo, 1024)->seq == 10250);
  CHECK(nearest(memo, 2050)->offset == 2048);
  CHECK(nearest(memo, 2060)->offset == 2059);
  CHECK(nearest(memo, 1 << 20)->offset == 2059);

  // A write after the last checkpoint (a create appends) moves none of them.
  memo.before_write({entry(30000)});
  memo.after_write({entry(30000)});
  CHECK(memo.stats().checkpoints == 3);
  // A write between them drops those at or after it, and keeps those before.
  memo.before_write({entry(20490)});
  CHECK(nearest(memo, 2060)->offset == 1024);
  memo.after_write({entry(20490)});
  CHECK(memo.stats().checkpoints == 1);
  // Another index's entries and keys that are not index entries change nothing.
  memo.before_write({keys::list_prefix("team_b", Kind::kWebhook) + encode_u64(1),
                     keys::record("whk_01"), keys::checkpoint()});
  memo.after_write({keys::list_prefix("team_b", Kind::kWebhook) + encode_u64(1),
                    keys::record("whk_01"), keys::checkpoint()});
  CHECK(nearest(memo, 2060)->offset == 1024);
  memo.before_write({entry(1)});
  memo.after_write({entry(1)});
  CHECK_FALSE(nearest(memo, 2060));
  CHECK(memo.stats().indexes == 0);

  auto stats = memo.stats();
  CHECK(stats.walks == 1);
  CHECK(stats.stepped == 2060);
  CHECK(stats.from_checkpoint == 0);
}

TEST_CASE("a walk keeps what it found before the first entry of its index written since") {
  ListMemo memo;
  const std::string other = keys::list_prefix("team_b", Kind::kWebhook);
  // Creates (appends) while the walk went on: all it found is kept.
  ListMemo::Visit v1;
  nearest(memo, 2000, &v1);
  memo.before_write({entry(50000), other + encode_u64(5)});
  memo.after_write({entry(50000), other + encode_u64(5)});
  memo.remember(kIndex, v1, {{1024, 10250}, {2048, 20490}}, 1, false);
  CHECK(nearest(memo, 2060)->seq == 20490);

  // An entry written between what it found, after its snapshot: the checkpoints from it on are
  // not kept (and the write drops those already kept from it on).
  ListMemo::Visit v2;
  nearest(memo, 2000, &v2);
  memo.before_write({entry(15000)});
  memo.remember(kIndex, v2, {{1024, 10250}, {2048, 20490}, {2059, 20600}}, 1, false);
  memo.after_write({entry(15000)});
  CHECK(nearest(memo, 2060)->offset == 1024);

  // A write under way at the snapshot may or may not be in it: the same.
  memo.before_write({entry(30000)});
  ListMemo::Visit v3;
  nearest(memo, 2000, &v3);
  memo.after_write({entry(30000)});
  memo.remember(kIndex, v3, {{2048, 20490}, {3072, 31000}}, 1, false);
  CHECK(nearest(memo, 2060)->offset == 2048);
  CHECK(nearest(memo, 4000)->offset == 2048);

  // A write that had ended before the snapshot is in it: nothing is held back.
  ListMemo::Visit v4;
  nearest(memo, 2000, &v4);
  memo.remember(kIndex, v4, {{3072, 31000}}, 1, false);
  CHECK(nearest(memo, 4000)->offset == 3072);

  // More entries of the shard written since than it logs: nothing is kept.
  ListMemo::Visit v5;
  nearest(memo, 2000, &v5);
  for (uint64_t n = 0; n <= ListMemo::kLoggedWrites; ++n) {
    memo.before_write({entry(100000 + n)});
    memo.after_write({entry(100000 + n)});
  }
  memo.remember(kIndex, v5, {{4096, 41000}}, 1, false);
  CHECK(nearest(memo, 5000)->offset == 3072);
  ListMemo::Visit v6;  // one fewer: kept
  nearest(memo, 2000, &v6);
  for (uint64_t n = 0; n < ListMemo::kLoggedWrites; ++n) {
    memo.before_write({entry(200000 + n)});
    memo.after_write({entry(200000 + n)});
  }
  memo.remember(kIndex, v6, {{4096, 41000}}, 1, false);
  CHECK(nearest(memo, 5000)->offset == 4096);
}

TEST_CASE("the list memo keeps the last pages' ends and at most its checkpoints") {
  ListMemo memo(64 * 20);  // 20 a shard
  ListMemo::Visit visit;
  nearest(memo, 0, &visit);
  for (uint64_t page = 1; page <= 12; ++page) {
    memo.remember(kIndex, visit, {{page * 20 - 1, page * 20}}, 20, false);
  }
  CHECK(memo.stats().checkpoints == ListMemo::kPageEnds);
  CHECK(nearest(memo, 239)->offset == 239);
  CHECK(nearest(memo, 150)->offset == 139);  // page 7's end: pages 1 to 4 are forgotten
  CHECK_FALSE(nearest(memo, 78));

  // Indexes of one shard beyond its bound: the least recently used goes first.
  std::vector<std::string> indexes;
  for (int team = 0; indexes.size() < 3; ++team) {
    std::string prefix = keys::list_prefix("t" + std::to_string(team), Kind::kWebhook);
    ListMemo::Visit v;
    memo.begin(
        prefix, 0, [] {}, &v);
    if (v.shard == visit.shard) indexes.push_back(prefix);
  }
  auto fill = [&memo](const std::string& prefix) {
    ListMemo::Visit v;
    memo.begin(
        prefix, 0, [] {}, &v);
    memo.remember(prefix, v, {{1024, 1}, {2048, 2}, {3072, 3}, {4096, 4}, {5120, 5}, {5130, 6}}, 0,
                  false);
  };
  fill(indexes[0]);
  fill(indexes[1]);
  CHECK(memo.stats().checkpoints == ListMemo::kPageEnds + 12);  // two indexes, kIndex's 8
  fill(indexes[2]);  // 26 > 20: kIndex, the least recently used, goes
  CHECK_FALSE(nearest(memo, 239));
  ListMemo::Visit v;
  CHECK(memo.begin(
                indexes[0], 6000, [] {}, &v)
            ->offset == 5130);
  fill(indexes[1]);  // already there: nothing new
  CHECK(memo.stats().checkpoints == 18);
}

// Webhooks of team_a created, updated and deleted through the Service on a Writer watched by a
// list memo, as in gatewayd; `memo_reads` lists through the memo, `plain_reads` walks every
// index from its start.
class ListMemoFixture {
 public:
  ListMemoFixture() {
    store_ = std::move(Store::open(dir_.path()).value());
    ids_ = make_system_id_generator(clock_);
    writer_ = std::move(
        Writer::start(*store_, *ids_, scanned_by_commands, &watchers_, written_only_by_commands)
            .value());
    service_ = std::make_unique<Service>(*writer_, clock_, *ids_, "verify.platform.test",
                                         FieldPolicy().platform);
    memo_reads_ = std::make_unique<ReadModel>(*store_, nullptr, &memo_);
    plain_reads_ = std::make_unique<ReadModel>(*store_);
  }
  ~ListMemoFixture() { writer_->stop(); }

  static Webhook hook(int n, const std::string& status) {
    Webhook h;
    h.meta.team_id = "team_a";
    h.workload_id = "w-" + std::to_string(n % 7);
    h.provider = "github";
    h.status = status;
    h.external_id = "x-" + std::to_string(n);
    return h;
  }

  // Runs `calls` writes at once (they share batches) and waits for all; returns their ids.
  static std::vector<std::string> write_all(int calls, const std::function<void(int, Done)>& call) {
    return testing::call_all(static_cast<size_t>(calls), [&call](size_t i, Done d) {
      call(static_cast<int>(i), std::move(d));
    });
  }

  std::vector<std::string> create(int from, int count) {
    return write_all(count, [&](int i, Done d) {
      service_->create(hook(from + i, (from + i) % 3 == 0 ? "inactive" : "active"), actor_,
                       std::nullopt, std::move(d));
    });
  }

  void update(const std::vector<std::string>& ids, int n, const std::string& status) {
    write_all(static_cast<int>(ids.size()), [&](int i, Done d) {
      service_->update(Kind::kWebhook, ids[i], hook(n + i, status), actor_, {}, std::move(d));
    });
  }

  void remove(const std::vector<std::string>& ids) {
    std::vector<std::promise<Result<Written>>> done(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      service_->remove(Kind::kWebhook, ids[i], actor_,
                       [&p = done[i]](Result<Written> r) { p.set_value(std::move(r)); });
    }
    for (auto& p : done) REQUIRE(p.get_future().get().ok());
  }

  static ReadModel::Page page_of(const ReadModel& reads, const std::vector<ReadModel::Filter>& f,
                                 uint64_t page, uint64_t per_page) {
    auto r = reads.list(Kind::kWebhook, "team_a", f, page, per_page);
    REQUIRE(r.ok());
    return std::move(r.value());
  }

  // The page read through the memo, checked against the same page walked from the start; returns
  // the index entries the memo's walk stepped over.
  uint64_t check_page(uint64_t page, uint64_t per_page,
                      const std::vector<ReadModel::Filter>& filters = {}) {
    const uint64_t stepped = memo_.stats().stepped;
    const auto got = page_of(*memo_reads_, filters, page, per_page);
    const auto want = page_of(*plain_reads_, filters, page, per_page);
    INFO("page " << page << " per_page " << per_page);
    CHECK(got.total == want.total);
    CHECK(got.items == want.items);
    return memo_.stats().stepped - stepped;
  }

  testing::ScratchDir dir_;
  SystemClock clock_;
  ListMemo memo_;
  ProjectionWatchers watchers_{nullptr, &memo_};
  std::unique_ptr<Store> store_;
  std::unique_ptr<IdGenerator> ids_;
  std::unique_ptr<Writer> writer_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<ReadModel> memo_reads_;
  std::unique_ptr<ReadModel> plain_reads_;
  Actor actor_{"team_a", "test"};
};

TEST_CASE("deep list pages start from the memo and equal pages walked from the index's start") {
  ListMemoFixture fx;
  std::vector<std::string> ids = fx.create(0, 2200);
  const uint64_t kPerPage = 20;

  // The first walk to page 100 steps over every entry before it; the next page and any page
  // before it start from a checkpoint.
  CHECK(fx.check_page(100, kPerPage) == 100 * kPerPage);
  CHECK(fx.check_page(101, kPerPage) == kPerPage + 1);
  CHECK(fx.check_page(90, kPerPage) == 90 * kPerPage - ListMemo::kStride);
  CHECK(fx.check_page(60, kPerPage) == 60 * kPerPage - ListMemo::kStride);
  // Pages before the first stride do not use the memo.
  const ListMemo::Stats before = fx.memo_.stats();
  CHECK(before.walks == 4);
  CHECK(before.from_checkpoint == 3);
  fx.check_page(2, kPerPage);
  // Past the end: the true total, no items, no walk counted.
  CHECK(fx.check_page(111, kPerPage) == 0);
  CHECK(fx.memo_.stats().walks == before.walks);

  SUBCASE("creates append: the checkpoints stay") {
    fx.create(2200, 300);
    CHECK(fx.check_page(102, kPerPage) == kPerPage + 1);
    CHECK(fx.check_page(120, kPerPage) == 120 * kPerPage - 102 * kPerPage + 1);
  }
  SUBCASE("a delete before a checkpoint moves it: it is forgotten") {
    fx.remove({ids[10]});
    CHECK(fx.check_page(102, kPerPage) == 102 * kPerPage);
    CHECK(fx.check_page(101, kPerPage) == 101 * kPerPage - ListMemo::kStride);
  }
  SUBCASE("a delete after the checkpoints keeps them") {
    fx.remove({ids[2100]});
    CHECK(fx.check_page(102, kPerPage) == kPerPage + 1);
  }
  SUBCASE("pages of a filter's index, with records moving in and out of it") {
    const std::vector<ReadModel::Filter> active{{"status", "active"}};
    const std::vector<ReadModel::Filter> inactive{{"status", "inactive"}};  // 734: no deep page
    CHECK(fx.check_page(53, kPerPage, active) == 53 * kPerPage);
    CHECK(fx.check_page(54, kPerPage, active) == kPerPage + 1);
    // Records near the start become inactive and others active: both indexes change before
    // their checkpoints.
    fx.update({ids[4], ids[5], ids[6]}, 4, "inactive");
    fx.update({ids[0], ids[3]}, 0, "active");
    CHECK(fx.check_page(55, kPerPage, active) == 55 * kPerPage);
    CHECK(fx.check_page(56, kPerPage, active) == kPerPage + 1);
    CHECK(fx.check_page(1, kPerPage, inactive) == 0);
    // The updates wrote no entry of the list itself: its checkpoints stay.
    CHECK(fx.check_page(102, kPerPage) == kPerPage + 1);
  }
  SUBCASE("random pages between random writes") {
    std::mt19937 rng(7);
    int next = 2200;
    for (int round = 0; round < 40; ++round) {
      switch (rng() % 4) {
        case 0:
          fx.create(next, 5);
          next += 5;
          break;
        case 1:
          fx.remove({ids[rng() % ids.size()]});
          break;
        case 2:
          fx.update({ids[rng() % ids.size()]}, round, rng() % 2 ? "active" : "inactive");
          break;
        default:
          break;  // no write: the memo's checkpoints are used as they are
      }
      const uint64_t per_page = 1 + rng() % 100;
      for (int i = 0; i < 3; ++i) {
        const uint64_t page = (ListMemo::kStride + rng() % 1200) / per_page + 1;
        fx.check_page(page, per_page);
        fx.check_page(page, per_page, {{"status", "active"}});
      }
    }
    CHECK(fx.memo_.stats().from_checkpoint > 0);
  }
}

TEST_CASE("deep pages read through the memo while records are deleted are the snapshot's pages") {
  ListMemoFixture fx;
  const int kRecords = 2500, kDeletes = 400;
  fx.create(0, kRecords);
  // The list's ids in order, and which of them are active, walked from the start.
  auto walk = [&fx](const std::vector<ReadModel::Filter>& filters) {
    std::vector<std::string> ids;
    for (uint64_t page = 1;; ++page) {
      auto items = ListMemoFixture::page_of(*fx.plain_reads_, filters, page, 100).items;
      if (items.empty()) return ids;
      for (const auto& item : items) ids.push_back(item.substr(15, 30));
    }
  };
  const std::vector<std::string> order = walk({});
  const std::vector<ReadModel::Filter> none, active_filter{{"status", "active"}};
  const std::vector<std::string> active = walk(active_filter);
  REQUIRE(order.size() == kRecords);
  // actives_before[i]: the active ids among order[0, i).
  std::vector<size_t> actives_before{0};
  for (size_t i = 0, a = 0; i < order.size(); ++i) {
    if (a < active.size() && active[a] == order[i]) ++a;
    actives_before.push_back(a);
  }
  REQUIRE(actives_before.back() == active.size());
  // Deletes alternate between the list's two ends, so after k deletes the list is order[from(k),
  // to(k)): a page's total tells which k its snapshot saw (of the active ones, one of a few).
  auto from = [](uint64_t k) { return (k + 1) / 2; };
  auto to = [](uint64_t k) { return kRecords - k / 2; };
  std::atomic<bool> writing{true};
  std::thread deleter([&] {
    for (int k = 0; k < kDeletes; ++k) {
      fx.remove({k % 2 == 0 ? order[k / 2] : order[kRecords - 1 - k / 2]});
    }
    writing = false;
  });
  // Whether `got`, the page at `offset` of `ids` (the list, or its active ones), is that page of
  // one of the lists a snapshot could hold.
  auto holds = [&](const ReadModel::Page& got, uint64_t offset, uint64_t per_page, bool actives) {
    for (uint64_t k = 0; k <= kDeletes; ++k) {
      const size_t begin = actives ? actives_before[from(k)] : from(k);
      const size_t end = actives ? actives_before[to(k)] : to(k);
      if (end - begin != got.total) continue;
      const std::vector<std::string>& ids = actives ? active : order;
      const uint64_t left = got.total > offset ? got.total - offset : 0;
      bool same = got.items.size() == std::min(left, per_page);
      for (size_t i = 0; same && i < got.items.size(); ++i) {
        same = begin + offset + i < end && got.items[i].substr(15, 30) == ids[begin + offset + i];
      }
      if (same) return true;
    }
    return false;
  };
  std::atomic<int> wrong{0};
  auto reader = [&](unsigned seed, bool actives) {
    std::mt19937 rng(seed);
    for (int pages = 0; writing || pages < 50; ++pages) {
      const uint64_t per_page = 1 + rng() % 100;
      const uint64_t depth = actives ? 600 : 1000;  // of about 1,600 active records
      const uint64_t page = (ListMemo::kStride + rng() % depth) / per_page + 1;
      auto got =
          ListMemoFixture::page_of(*fx.memo_reads_, actives ? active_filter : none, page, per_page);
      if (!holds(got, (page - 1) * per_page, per_page, actives)) ++wrong;
    }
  };
  std::thread r1(reader, 1, false), r2(reader, 2, true);
  deleter.join();
  r1.join();
  r2.join();
  CHECK(wrong == 0);
  CHECK(fx.memo_.stats().from_checkpoint > 0);
  CHECK(fx.memo_.stats().misplaced == 0);
}

}  // namespace
}  // namespace gw
