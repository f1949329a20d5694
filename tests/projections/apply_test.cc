// Applying a logged event to the projections on a store whose reads fail.
#include <doctest/doctest.h>

#include <rocksdb/db.h>

#include "projections/apply.h"
#include "projections/keys.h"
#include "store/store_test_util.h"
#include "store/tx.h"

namespace gw {
namespace {

Domain domain(uint64_t updated_at) {
  Domain d;
  d.meta = Meta{"dom_01", "team_a", 1, static_cast<int64_t>(updated_at), 0};
  d.hostname = "shop.example.com";
  d.scope = "exact";
  return d;
}

// A verification outcome's apply read the domain's open request and ignored a failed read: the
// request stayed open, with no error (helper 128 F4).
TEST_CASE("an outcome whose read of the domain's open request fails is not applied") {
  testing::FailingReadsDir disk;
  auto store = disk.open();
  auto apply = [&](const LoggedEvent& e) -> Result<bool> {
    Tx tx(*store, *disk.ids, e.seq - 1, kGenesisHash);
    auto applied = apply_event(tx, e);
    if (!applied.ok()) return applied;
    REQUIRE(store->db()->Write(rocksdb::WriteOptions(), tx.seal().value()).ok());
    return true;
  };
  REQUIRE(apply(LoggedEvent{1, "domain.created", 1, 0, domain(1)}).ok());
  REQUIRE(apply(LoggedEvent{2, "domain.verification_requested", 2, 0, domain(2)}).ok());
  // The open request in a table file, none of whose blocks the cache of a store opened again
  // holds; the domain's record, written again as it is, in the memtable.
  const std::string record = store->get(Cf::kProjections, keys::record("dom_01")).value().value();
  store.reset();
  store = disk.open();
  REQUIRE(store->level0_files(Cf::kProjections) > 0);
  REQUIRE(store->db()
              ->Put(rocksdb::WriteOptions(), store->cf(Cf::kProjections), keys::record("dom_01"),
                    record)
              .ok());
  disk.env.fail = true;
  auto outcome = apply(LoggedEvent{3, "domain.verification_failed", 3, 2, domain(3)});
  disk.env.fail = false;
  REQUIRE_FALSE(outcome.ok());
  CHECK(outcome.error().code == Code::kUnavailable);
  CHECK(outcome.error().detail.find("injected: read failed") != std::string::npos);
  // Applied once the read works, the outcome closes the request.
  REQUIRE(apply(LoggedEvent{3, "domain.verification_failed", 3, 2, domain(3)}).ok());
  CHECK_FALSE(store->get(Cf::kProjections, keys::open_request("dom_01")).value().has_value());
}

}  // namespace
}  // namespace gw
