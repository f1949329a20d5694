// Tx on a real RocksDB: reads through the batch's own writes, ordered scans merging committed
// data with the batch, save points, counters and seal-time values.
#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

#include <rocksdb/utilities/debug.h>

#include "store/store_test_util.h"
#include "store/tx.h"

namespace gw {
namespace {

using Pairs = std::vector<std::pair<std::string, std::string>>;

struct TxFixture {
  testing::ScratchDir dir;
  SystemClock clock;
  std::unique_ptr<IdGenerator> ids = make_system_id_generator(clock);
  std::unique_ptr<Store> store = std::move(Store::open(dir.path()).value());

  void commit(Tx& tx) {
    auto batch = tx.seal();
    REQUIRE(batch.ok());
    REQUIRE(store->db()->Write(rocksdb::WriteOptions(), batch.value()).ok());
  }
  std::optional<std::string> stored(std::string_view key) {
    auto r = store->get(Cf::kProjections, key);
    REQUIRE(r.ok());
    return r.value();
  }
};

Pairs scan_all(Tx& tx, std::string_view prefix, size_t limit = 100) {
  Pairs out;
  auto r = tx.scan(Cf::kProjections, prefix, [&](std::string_view k, std::string_view v) {
    out.emplace_back(std::string(k), std::string(v));
    return out.size() < limit;
  });
  REQUIRE(r.ok());
  return out;
}

std::optional<std::string> read(Tx& tx, std::string_view key) {
  auto r = tx.get(Cf::kProjections, key);
  REQUIRE(r.ok());
  return r.value();
}

bool only_v_keys(Cf, std::string_view key) { return key.starts_with("v"); }

TEST_CASE("a Tx lists each watched key it writes once, and no other key") {
  TxFixture f;
  Tx tx(*f.store, *f.ids, 0, kGenesisHash);
  tx.put(Cf::kProjections, "v0", "before watching");
  tx.watch([](Cf which, std::string_view key) {
    return which == Cf::kProjections && key.starts_with("v");
  });
  tx.put(Cf::kProjections, "v1", "1");
  tx.put(Cf::kProjections, "v1", "2");
  tx.del(Cf::kProjections, "v2");
  tx.put(Cf::kProjections, "a", "not watched");
  tx.put(Cf::kEvents, "v3", "another column family");
  CHECK(tx.watched() == std::vector<std::string>{"v1", "v2"});
  // A rolled-back write stays listed (a key listed for nothing costs only a cache drop).
  tx.set_savepoint();
  tx.put(Cf::kProjections, "v4", "rejected");
  tx.rollback_to_savepoint();
  tx.put(Cf::kProjections, "v5", "5");
  CHECK(tx.watched() == std::vector<std::string>{"v1", "v2", "v4", "v5"});
}

TEST_CASE("a Tx reads its own puts and deletes over committed data") {
  TxFixture f;
  {
    Tx tx(*f.store, *f.ids, 0, kGenesisHash);
    tx.put(Cf::kProjections, "a", "1");
    tx.put(Cf::kProjections, "b", "2");
    f.commit(tx);
  }
  Tx tx(*f.store, *f.ids, 0, kGenesisHash);
  CHECK(read(tx, "a") == "1");
  tx.put(Cf::kProjections, "a", "one");
  tx.del(Cf::kProjections, "b");
  tx.put(Cf::kProjections, "c", "3");
  CHECK(read(tx, "a") == "one");
  CHECK_FALSE(read(tx, "b").has_value());
  CHECK(read(tx, "c") == "3");
  CHECK_FALSE(read(tx, "d").has_value());
  // The same key in another column family is another key.
  auto meta = tx.get(Cf::kMeta, "a");
  REQUIRE(meta.ok());
  CHECK_FALSE(meta.value().has_value());
  f.commit(tx);
  CHECK(f.stored("a") == "one");
  CHECK_FALSE(f.stored("b").has_value());
  CHECK(f.stored("c") == "3");
}

TEST_CASE("a scan merges committed keys with the batch's writes, in key order") {
  TxFixture f;
  {
    Tx tx(*f.store, *f.ids, 0, kGenesisHash);
    for (const char* k : {"p1", "p3", "p5", "p7", "q0"}) tx.put(Cf::kProjections, k, "old");
    tx.put(Cf::kProjections, "o9", "before the prefix");
    f.commit(tx);
  }
  Tx tx(*f.store, *f.ids, 0, kGenesisHash);
  tx.put(Cf::kProjections, "p2", "new");   // between committed keys
  tx.put(Cf::kProjections, "p3", "new");   // replaces a committed value
  tx.del(Cf::kProjections, "p5");          // hides a committed key
  tx.put(Cf::kProjections, "p9", "new");   // after the last committed key of the prefix
  tx.put(Cf::kProjections, "p8", "gone");
  tx.del(Cf::kProjections, "p8");          // written and deleted in the batch
  tx.put(Cf::kProjections, "q1", "other prefix");
  CHECK(scan_all(tx, "p") ==
        Pairs{{"p1", "old"}, {"p2", "new"}, {"p3", "new"}, {"p7", "old"}, {"p9", "new"}});
  CHECK(scan_all(tx, "p", 2) == Pairs{{"p1", "old"}, {"p2", "new"}});  // visit stops it
  CHECK(scan_all(tx, "q") == Pairs{{"q0", "old"}, {"q1", "other prefix"}});
  CHECK(scan_all(tx, "x").empty());
}

TEST_CASE("a scan with a prefix ending in 0xff bytes stops at the prefix") {
  TxFixture f;
  Tx tx(*f.store, *f.ids, 0, kGenesisHash);
  const std::string prefix("a\xff\xff", 3);
  tx.put(Cf::kProjections, prefix + "1", "in");
  tx.put(Cf::kProjections, "b", "out");
  f.commit(tx);
  Tx again(*f.store, *f.ids, 0, kGenesisHash);
  again.put(Cf::kProjections, prefix + "2", "in");
  CHECK(scan_all(again, prefix) == Pairs{{prefix + "1", "in"}, {prefix + "2", "in"}});
}

TEST_CASE("a Tx told which keys it scans orders only those, and refuses other scans") {
  TxFixture f;
  Tx tx(*f.store, *f.ids, 0, kGenesisHash, only_v_keys);
  tx.put(Cf::kProjections, "v2", "b");
  tx.put(Cf::kProjections, "v1", "a");
  tx.put(Cf::kProjections, "w1", "point reads only");
  CHECK(scan_all(tx, "v") == Pairs{{"v1", "a"}, {"v2", "b"}});
  CHECK(read(tx, "w1") == "point reads only");
  auto refused = tx.scan(Cf::kProjections, "w", [](std::string_view, std::string_view) {
    return true;
  });
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == Code::kInternal);
}

TEST_CASE("a Tx keeps write-only keys in its batch only: written, rolled back, never read") {
  TxFixture f;
  Tx tx(*f.store, *f.ids, 0, kGenesisHash);
  tx.write_only([](Cf which, std::string_view key) {
    return which == Cf::kProjections && key.starts_with("w");
  });
  tx.watch([](Cf, std::string_view) { return true; });
  tx.put(Cf::kProjections, "w1", "kept");
  tx.put(Cf::kProjections, "w2", "replaced");
  tx.put(Cf::kProjections, "w2", "last");
  tx.put(Cf::kProjections, "a", "read back");
  tx.set_savepoint();
  tx.put(Cf::kProjections, "w3", "rolled back");
  tx.del(Cf::kProjections, "w1");
  tx.rollback_to_savepoint();
  CHECK(read(tx, "a") == "read back");
  auto refused = tx.get(Cf::kProjections, "w1");
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == Code::kInternal);
  auto scan =
      tx.scan(Cf::kProjections, "w", [](std::string_view, std::string_view) { return true; });
  REQUIRE_FALSE(scan.ok());
  CHECK(scan.error().code == Code::kInternal);
  // The same key in another column family is an ordinary key.
  tx.put(Cf::kMeta, "w1", "meta");
  auto meta = tx.get(Cf::kMeta, "w1");
  REQUIRE(meta.ok());
  CHECK(meta.value() == "meta");
  // Watched write-only keys are listed at every write, rolled back or not (they have no overlay
  // entry to tell a first write by); the others once: `a`, and Meta's `w1`.
  CHECK(tx.watched() == std::vector<std::string>{"w1", "w2", "w2", "a", "w3", "w1", "w1"});
  f.commit(tx);
  CHECK(f.stored("w1") == "kept");
  CHECK(f.stored("w2") == "last");
  CHECK_FALSE(f.stored("w3").has_value());
  CHECK(f.stored("a") == "read back");
}

TEST_CASE("rolling back to the save point undoes writes, counters, seal values and events") {
  TxFixture f;
  {
    Tx tx(*f.store, *f.ids, 0, kGenesisHash);
    tx.put(Cf::kProjections, "kept", "committed");
    tx.add_to_counter(Cf::kProjections, "n", 5);
    f.commit(tx);
  }
  Tx tx(*f.store, *f.ids, 0, kGenesisHash);
  tx.set_savepoint();  // job 1: accepted
  tx.put(Cf::kProjections, "a", "job1");
  tx.add_to_counter(Cf::kProjections, "n", 1);
  tx.put_at_seal(Cf::kProjections, "m", "1");
  tx.append(EventDraft{"thing.created", "thing", "t1", 1, "team", "test", 1, "{}"});
  const std::string hash_after_job1 = tx.last_hash();

  tx.set_savepoint();  // job 2: rejected
  tx.put(Cf::kProjections, "a", "job2");    // overwrites job 1's write
  tx.put(Cf::kProjections, "b", "job2");    // a new key
  tx.put(Cf::kProjections, "b", "job2 again");
  tx.del(Cf::kProjections, "kept");         // hides a committed key
  tx.add_to_counter(Cf::kProjections, "n", 10);
  tx.add_to_counter(Cf::kProjections, "other", 1);
  tx.put_at_seal(Cf::kProjections, "m", "2");
  tx.append(EventDraft{"thing.created", "thing", "t2", 1, "team", "test", 1, "{}"});
  CHECK(read(tx, "a") == "job2");
  CHECK_FALSE(read(tx, "kept").has_value());
  tx.rollback_to_savepoint();

  CHECK(read(tx, "a") == "job1");
  CHECK_FALSE(read(tx, "b").has_value());
  CHECK(read(tx, "kept") == "committed");
  CHECK(scan_all(tx, "b").empty());
  CHECK(tx.last_seq() == 1);
  CHECK(tx.last_hash() == hash_after_job1);
  f.commit(tx);
  CHECK(f.stored("a") == "job1");
  CHECK_FALSE(f.stored("b").has_value());
  CHECK(f.stored("kept") == "committed");
  CHECK(decode_u64(*f.stored("n")) == 6);
  CHECK_FALSE(f.stored("other").has_value());
  CHECK(f.stored("m") == "1");
  auto events = f.store->iterate(Cf::kEvents);
  events->SeekToFirst();
  REQUIRE(events->Valid());
  CHECK(events->value().ToString().find("\"aggregate_id\":\"t1\"") != std::string::npos);
  events->Next();
  CHECK_FALSE(events->Valid());
}

TEST_CASE("counters sum over the batch and read 0 when back at zero; the last seal value wins") {
  TxFixture f;
  {
    Tx tx(*f.store, *f.ids, 0, kGenesisHash);
    tx.add_to_counter(Cf::kProjections, "n", 2);
    tx.add_to_counter(Cf::kProjections, "n", 1);
    tx.add_to_counter(Cf::kProjections, "z", 1);
    tx.add_to_counter(Cf::kProjections, "z", -1);  // nets to nothing: never written
    tx.put_at_seal(Cf::kProjections, "m", "first");
    tx.put_at_seal(Cf::kProjections, "m", "last");
    CHECK_FALSE(read(tx, "n").has_value());  // counters are written when the batch is sealed
    f.commit(tx);
  }
  CHECK(decode_u64(*f.stored("n")) == 3);
  CHECK_FALSE(f.stored("z").has_value());
  CHECK(f.stored("m") == "last");
  {
    Tx tx(*f.store, *f.ids, 0, kGenesisHash);
    tx.add_to_counter(Cf::kProjections, "n", -3);
    f.commit(tx);
  }
  CHECK(decode_u64(*f.stored("n")) == 0);
}

TEST_CASE("a counter adds up over many batches, across flushes, and compactions drop it at 0") {
  TxFixture f;
  auto* proj = f.store->cf(Cf::kProjections);
  auto add = [&f](std::string_view key, int64_t delta) {
    Tx tx(*f.store, *f.ids, 0, kGenesisHash);
    tx.add_to_counter(Cf::kProjections, key, delta);
    f.commit(tx);
  };
  auto count = [&f](std::string_view key) -> std::optional<uint64_t> {
    auto v = f.stored(key);
    if (!v) return std::nullopt;
    REQUIRE(v->size() == 8);
    return decode_u64(*v);
  };
  // More deltas than the memtable keeps unfolded (Store::kMaxCounterDeltas), some in table files.
  for (int i = 0; i < 100; ++i) {
    add("c_hot", +1);
    if (i == 40) REQUIRE(f.store->db()->Flush(rocksdb::FlushOptions(), proj).ok());
  }
  {
    // Newest first, a read folds the deltas down to the first stored sum: never more than
    // Store::kMaxCounterDeltas (32) of them, although 59 were written since the flush.
    std::vector<rocksdb::KeyVersion> versions;
    REQUIRE(
        rocksdb::GetAllKeyVersions(f.store->db(), proj, "c_hot", "c_hot", 1000, &versions).ok());
    size_t deltas = 0;
    bool sum_found = false;
    for (const auto& v : versions) {
      REQUIRE(v.user_key == "c_hot");
      if (v.GetTypeName() == "TypeValue") {
        sum_found = true;
        break;
      }
      REQUIRE(v.GetTypeName() == "TypeMerge");
      ++deltas;
    }
    CHECK(sum_found);
    CHECK(deltas <= Store::kMaxCounterDeltas);
    CHECK(deltas > 0);
  }
  add("c_hot", -30);
  CHECK(count("c_hot") == 70);
  add("c_gone", +2);
  REQUIRE(f.store->db()->Flush(rocksdb::FlushOptions(), proj).ok());
  add("c_gone", -2);
  CHECK(count("c_gone") == 0);  // stored as 0 until a compaction
  // A zero value under another kind of key is data, not a counter.
  REQUIRE(f.store->db()->Put(rocksdb::WriteOptions(), proj, "z_zero", encode_u64(0)).ok());
  REQUIRE(f.store->db()->Flush(rocksdb::FlushOptions(), proj).ok());
  rocksdb::CompactRangeOptions full;
  full.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForce;
  REQUIRE(f.store->db()->CompactRange(full, proj, nullptr, nullptr).ok());
  CHECK(count("c_gone") == 0);  // the compaction that folds the deltas writes their sum, 0
  REQUIRE(f.store->db()->CompactRange(full, proj, nullptr, nullptr).ok());
  CHECK(count("c_hot") == 70);
  CHECK_FALSE(count("c_gone").has_value());
  CHECK(count("z_zero") == 0);
}

// Records what a sealed batch holds, in the batch's order.
class Recorder final : public rocksdb::WriteBatch::Handler {
 public:
  struct Op {
    uint32_t cf;
    std::string key;
    std::optional<std::string> value;  // nullopt: a delete
    bool merge = false;
    bool operator==(const Op&) const = default;
  };
  std::vector<Op> ops;
  rocksdb::Status PutCF(uint32_t cf, const rocksdb::Slice& k, const rocksdb::Slice& v) override {
    ops.push_back(Op{cf, k.ToString(), v.ToString()});
    return rocksdb::Status::OK();
  }
  rocksdb::Status DeleteCF(uint32_t cf, const rocksdb::Slice& k) override {
    ops.push_back(Op{cf, k.ToString(), std::nullopt});
    return rocksdb::Status::OK();
  }
  rocksdb::Status MergeCF(uint32_t cf, const rocksdb::Slice& k, const rocksdb::Slice& v) override {
    ops.push_back(Op{cf, k.ToString(), v.ToString(), true});
    return rocksdb::Status::OK();
  }
};

TEST_CASE("a sealed batch is in column family and key order, with only the last write of a key") {
  TxFixture f;
  REQUIRE(f.store->db()->Put(rocksdb::WriteOptions(), f.store->cf(Cf::kProjections), "gone", "x")
              .ok());
  Tx tx(*f.store, *f.ids, 0, kGenesisHash);
  tx.put(Cf::kProjections, "m", "1");
  tx.append(EventDraft{"thing.created", "thing", "a", 1, "team_a", "test", 100, "{}"});
  tx.put(Cf::kProjections, "b", "1");
  tx.del(Cf::kProjections, "gone");
  tx.put(Cf::kProjections, "a", "1");
  tx.put(Cf::kProjections, "m", "2");    // rewritten: only "3" is kept
  tx.del(Cf::kProjections, "b");         // put, then deleted: the delete is kept
  tx.del(Cf::kProjections, "c");
  tx.put(Cf::kProjections, "c", "back");  // deleted, then put: the put is kept
  tx.append(EventDraft{"thing.created", "thing", "b", 1, "team_a", "test", 100, "{}"});
  tx.put(Cf::kProjections, "m", "3");
  // A counter's delta is merged at seal, after everything else; it adds to a put of its key in
  // the same batch, so both stay, in that order.
  tx.add_to_counter(Cf::kProjections, "cn", 2);
  tx.put(Cf::kProjections, "cn", encode_u64(5));
  // A rejected job's writes are gone before the batch is reordered.
  tx.set_savepoint();
  tx.put(Cf::kProjections, "a", "rejected");
  tx.put(Cf::kProjections, "0", "rejected");
  tx.rollback_to_savepoint();
  auto batch = tx.seal();
  REQUIRE(batch.ok());
  Recorder seen;
  REQUIRE(batch.value()->Iterate(&seen).ok());
  const uint32_t events = f.store->cf(Cf::kEvents)->GetID();
  const uint32_t proj = f.store->cf(Cf::kProjections)->GetID();
  REQUIRE(seen.ops.size() == 9);
  CHECK(seen.ops[0].cf == events);
  CHECK(seen.ops[0].key == encode_u64(1));
  CHECK(seen.ops[1].cf == events);
  CHECK(seen.ops[1].key == encode_u64(2));
  CHECK(seen.ops[2] == Recorder::Op{proj, "a", "1"});
  CHECK(seen.ops[3] == Recorder::Op{proj, "b", std::nullopt});
  CHECK(seen.ops[4] == Recorder::Op{proj, "c", "back"});
  CHECK(seen.ops[5] == Recorder::Op{proj, "cn", encode_u64(5)});
  CHECK(seen.ops[6] == Recorder::Op{proj, "cn", encode_u64(2), true});
  CHECK(seen.ops[7] == Recorder::Op{proj, "gone", std::nullopt});
  CHECK(seen.ops[8] == Recorder::Op{proj, "m", "3"});
  REQUIRE(f.store->db()->Write(rocksdb::WriteOptions(), batch.value()).ok());
  CHECK(decode_u64(*f.stored("cn")) == 7);
  CHECK(f.stored("a") == "1");
  CHECK_FALSE(f.stored("b").has_value());
  CHECK(f.stored("c") == "back");
  CHECK_FALSE(f.stored("gone").has_value());
  CHECK(f.stored("m") == "3");
  CHECK_FALSE(f.stored("0").has_value());
}

}  // namespace
}  // namespace gw
