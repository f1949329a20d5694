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
  memo.remember(kIndex, visit, {{1024, 10250}, {2048, 20490}, {2059, 20600}}, 2060);
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
  CHECK(stats.stepped == 2060);
  CHECK(stats.from_checkpoint == 6);
}

TEST_CASE("the list memo keeps nothing read before or during a write of its shard") {
  ListMemo memo;
  ListMemo::Visit before;
  nearest(memo, 2000, &before);
  memo.before_write({entry(50000)});
  ListMemo::Visit during;
  nearest(memo, 2000, &during);
  CHECK_FALSE(during.can_remember);
  memo.remember(kIndex, before, {{1024, 10250}}, 1);  // its snapshot may not hold the write
  memo.remember(kIndex, during, {{1024, 10250}}, 1);  // nor may this one's
  CHECK_FALSE(nearest(memo, 2000));
  memo.after_write({entry(50000)});
  ListMemo::Visit after;
  nearest(memo, 2000, &after);
  memo.remember(kIndex, after, {{1024, 10250}}, 1);
  CHECK(nearest(memo, 2000)->seq == 10250);
}

TEST_CASE("the list memo keeps the last pages' ends and at most its checkpoints") {
  ListMemo memo(64 * 20);  // 20 a shard
  ListMemo::Visit visit;
  nearest(memo, 0, &visit);
  for (uint64_t page = 1; page <= 12; ++page) {
    memo.remember(kIndex, visit, {{page * 20 - 1, page * 20}}, 20);
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
    memo.remember(prefix, v, {{1024, 1}, {2048, 2}, {3072, 3}, {4096, 4}, {5120, 5}, {5130, 6}}, 0);
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
    service_ = std::make_unique<Service>(*writer_, clock_, *ids_, "verify.platform.test");
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
  std::vector<std::string> write_all(int calls, const std::function<void(int, Done)>& call) {
    std::vector<std::promise<Result<Written>>> done(calls);
    for (int i = 0; i < calls; ++i) {
      call(i, [&p = done[i]](Result<Written> r) { p.set_value(std::move(r)); });
    }
    std::vector<std::string> ids;
    for (auto& p : done) {
      auto r = p.get_future().get();
      REQUIRE(r.ok());
      ids.push_back(r.value().json.substr(15, 30));  // {"webhook_id":"<30 chars>"
    }
    return ids;
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
  const uint64_t walks = fx.memo_.stats().walks;
  fx.check_page(2, kPerPage);
  CHECK(fx.memo_.stats().walks == walks);
  CHECK(fx.check_page(111, kPerPage) == 0);  // past the end: the true total, no items

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
  const int kRecords = 2500;
  fx.create(0, kRecords);
  // The list's ids in order, walked from the start.
  std::vector<std::string> order;
  for (uint64_t page = 1; order.size() < kRecords; ++page) {
    auto items = ListMemoFixture::page_of(*fx.plain_reads_, {}, page, 100).items;
    REQUIRE_FALSE(items.empty());
    for (const auto& item : items) order.push_back(item.substr(15, 30));
  }
  // Deletes alternate between the list's two ends, so the list after k deletes is the ids from
  // (k + 1) / 2 to kRecords - k / 2, and a page's total tells which k its snapshot saw.
  std::atomic<bool> writing{true};
  std::thread deleter([&] {
    for (int k = 0; k < 400; ++k) {
      fx.remove({k % 2 == 0 ? order[k / 2] : order[kRecords - 1 - k / 2]});
    }
    writing = false;
  });
  auto reader = [&](unsigned seed) {
    std::mt19937 rng(seed);
    int pages = 0;
    while (writing || pages < 50) {
      const uint64_t per_page = 20;
      const uint64_t page = (ListMemo::kStride + rng() % 1000) / per_page + 1;
      auto got = ListMemoFixture::page_of(*fx.memo_reads_, {}, page, per_page);
      const uint64_t k = kRecords - got.total;
      const uint64_t first = (k + 1) / 2 + (page - 1) * per_page;
      REQUIRE(got.items.size() == per_page);
      for (uint64_t i = 0; i < per_page; ++i) {
        REQUIRE(got.items[i].substr(15, 30) == order[first + i]);
      }
      ++pages;
    }
  };
  std::thread r1(reader, 1), r2(reader, 2);
  deleter.join();
  r1.join();
  r2.join();
  CHECK(fx.memo_.stats().from_checkpoint > 0);
}

}  // namespace
}  // namespace gw
