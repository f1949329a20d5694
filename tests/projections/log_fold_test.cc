// The fold of a log (projections/log_fold.h) writes exactly the read model that applying its events
// one by one writes: checked on a long random history of every kind of change, verification
// requests and outcomes, inheritance and deletes included.
#include <doctest/doctest.h>

#include <filesystem>
#include <map>
#include <random>

#include "projections/apply.h"
#include "projections/catch_up.h"
#include "store/store_test_util.h"

namespace gw {
namespace {

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

TEST_CASE("folding the log writes the read model that applying each event writes") {
  testing::ScratchDir dir;
  auto store = std::move(Store::open(dir.path()).value());
  write_random_log(*store, 20000);
  // One by one, as catch-up past a checkpoint does.
  SystemClock clock;
  auto ids = make_system_id_generator(clock);
  auto it = store->iterate(Cf::kEvents);
  it->SeekToFirst();
  while (it->Valid()) {
    Tx tx(*store, *ids, 0, kGenesisHash);
    for (int n = 0; it->Valid() && n < 1000; ++n, it->Next()) {
      REQUIRE(
          apply_logged_event(tx, std::string_view(it->value().data(), it->value().size())).ok());
    }
    REQUIRE(store->db()->Write(rocksdb::WriteOptions(), tx.seal().value()).ok());
  }
  const auto applied = testing::projections_as_read(*store);

  REQUIRE(store->reset_projections().ok());
  LogFold fold;
  REQUIRE(rebuild_projections(*store, fold).ok());
  CHECK(fold.events() == 20000);
  const auto folded = testing::projections_as_read(*store);
  CHECK(folded.size() == applied.size());
  CHECK(folded == applied);
  CHECK_FALSE(std::filesystem::exists(dir.path() + "/rebuild.tmp"));

  // An empty read model is caught up by the same fold.
  REQUIRE(store->reset_projections().ok());
  auto caught_up = catch_up_projections(*store, *ids);
  REQUIRE(caught_up.ok());
  CHECK(caught_up.value() == 20000);
  CHECK(testing::projections_as_read(*store) == applied);
}

TEST_CASE("folding stops at a malformed event and names it") {
  testing::ScratchDir dir;
  auto store = std::move(Store::open(dir.path()).value());
  write_random_log(*store, 10);
  REQUIRE(
      store->db()->Put(rocksdb::WriteOptions(), store->cf(Cf::kEvents), encode_u64(4), "{}").ok());
  LogFold fold;
  auto r = rebuild_projections(*store, fold);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().detail == "event 4: event lacks a required member");
  CHECK(testing::projections_as_read(*store).empty());
}

}  // namespace
}  // namespace gw
