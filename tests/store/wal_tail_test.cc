// A write-ahead log whose last write a crash tore is replayed up to that write; damage anywhere
// before it still stops the open (store/wal_tail.h, Store::open).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "store/store.h"
#include "store/store_test_util.h"
#include "store/wal_tail.h"

namespace gw {
namespace {

// The newest write-ahead log of `dir` (RocksDB numbers them).
std::string newest_log(const std::string& dir) {
  std::string newest;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".log" && entry.path().string() > newest) {
      newest = entry.path().string();
    }
  }
  return newest;
}

std::string key_of(int i) { return "k" + std::to_string(i); }

// A store in a scratch dir, written one synced batch at a time and then dropped as a crash drops
// it: the batches are in the write-ahead log only (no flush), each ending where `ends` says.
struct Crashed {
  testing::ScratchDir dir;
  std::unique_ptr<Store> store = std::move(Store::open(dir.path()).value());
  std::string log = newest_log(dir.path());
  std::vector<uint64_t> ends;  // the log's size after each batch
  std::vector<uint64_t> seqs;  // RocksDB's last sequence number after each batch

  // Batch i: one value of `bytes` bytes under key_of(i) in the events column family, and one in
  // `also` if given.
  void write(int i, size_t bytes, std::optional<Cf> also = std::nullopt) {
    rocksdb::WriteBatch batch;
    const std::string value(bytes, static_cast<char>('a' + i % 26));
    REQUIRE(batch.Put(store->cf(Cf::kEvents), key_of(i), value).ok());
    if (also) REQUIRE(batch.Put(store->cf(*also), key_of(i), value).ok());
    rocksdb::WriteOptions sync;
    sync.sync = true;
    REQUIRE(store->db()->Write(sync, &batch).ok());
    ends.push_back(std::filesystem::file_size(log));
    seqs.push_back(store->db()->GetLatestSequenceNumber());
  }
  void crash() { store.reset(); }
  // Where batch i starts in the log.
  uint64_t start(size_t i) const { return i == 0 ? 0 : ends[i - 1]; }
};

// Overwrites `n` bytes of `path` at `offset` with `byte`.
void overwrite(const std::string& path, uint64_t offset, size_t n, char byte = '\0') {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  REQUIRE(f.good());
  f.seekp(static_cast<std::streamoff>(offset));
  const std::string bytes(n, byte);
  f.write(bytes.data(), static_cast<std::streamsize>(n));
  REQUIRE(f.good());
}

// Appends a record of `type` holding `payload`, its header made as RocksDB's log writer makes
// it, to `path` (which must end with room for it in its block).
void append_record(const std::string& path, uint8_t type, const std::string& payload) {
  const uint32_t crc = wal_record_crc(type, payload.data(), payload.size());
  std::string record;
  for (int i = 0; i < 4; ++i) record.push_back(static_cast<char>(crc >> (8 * i)));
  record.push_back(static_cast<char>(payload.size() & 0xff));
  record.push_back(static_cast<char>(payload.size() >> 8));
  record.push_back(static_cast<char>(type));
  record += payload;
  std::ofstream f(path, std::ios::binary | std::ios::app);
  f.write(record.data(), static_cast<std::streamsize>(record.size()));
  REQUIRE(f.good());
}

bool has(const Store& store, int i) {
  auto v = store.get(Cf::kEvents, key_of(i));
  REQUIRE(v.ok());
  return v.value().has_value();
}

TEST_CASE("a last batch with a page that never reached the disk is dropped, the others kept") {
  Crashed c;
  for (int i = 0; i < 5; ++i) c.write(i, 1000);
  c.write(5, 100000);  // four blocks: first, middle, middle, last fragments
  c.crash();
  // A 4 KiB page inside the last batch reads as zeros: ext4 had not written it back.
  overwrite(c.log, c.start(5) + 40000, 4096);

  const WalTail tail = examine_wal_tail(c.dir.path());
  CHECK(tail.kind == WalTail::Kind::kTorn);
  CHECK(tail.file == std::filesystem::path(c.log).filename().string());
  CHECK(tail.offset == c.start(5));
  CHECK(tail.bytes == c.ends[5] - c.start(5));
  CHECK(tail.last_complete_seq == c.seqs[4]);

  {
    auto store = Store::open(c.dir.path());
    REQUIRE(store.ok());
    CHECK(store.value()->recovery_note().find("a write that a crash tore (checksum mismatch in " +
                                              tail.file + ", " + std::to_string(tail.bytes) +
                                              " bytes from byte " + std::to_string(tail.offset) +
                                              ")") != std::string::npos);
    for (int i = 0; i < 5; ++i) CHECK(has(*store.value(), i));
    CHECK_FALSE(has(*store.value(), 5));
    CHECK(store.value()->db()->GetLatestSequenceNumber() == c.seqs[4]);
    // Writing goes on after the last batch kept, and survives the next crash.
    rocksdb::WriteBatch batch;
    REQUIRE(batch.Put(store.value()->cf(Cf::kEvents), key_of(6), "after").ok());
    rocksdb::WriteOptions sync;
    sync.sync = true;
    REQUIRE(store.value()->db()->Write(sync, &batch).ok());
  }
  auto again = Store::open(c.dir.path());
  REQUIRE(again.ok());
  CHECK(again.value()->recovery_note().empty());
  CHECK(has(*again.value(), 4));
  CHECK(has(*again.value(), 6));
  CHECK_FALSE(has(*again.value(), 5));
}

TEST_CASE("a damaged last batch of one record, or one whose first header is zeros, is dropped") {
  for (bool header : {false, true}) {
    CAPTURE(header);
    Crashed c;
    for (int i = 0; i < 9; ++i) c.write(i, 500);
    if (header) {
      // A batch of three blocks whose first fragment's header is zeros: RocksDB's reader takes
      // the zeros for the block's end and finds the next fragments without their start.
      c.write(9, 70000);
      c.crash();
      overwrite(c.log, c.start(9), 7);
    } else {
      c.write(9, 500);
      c.crash();
      overwrite(c.log, c.ends[9] - 100, 8, '\xff');  // inside its one record
    }
    CHECK(examine_wal_tail(c.dir.path()).kind == WalTail::Kind::kTorn);
    auto store = Store::open(c.dir.path());
    REQUIRE(store.ok());
    CHECK_FALSE(store.value()->recovery_note().empty());
    CHECK(has(*store.value(), 8));
    CHECK_FALSE(has(*store.value(), 9));
  }
}

TEST_CASE("a file named like a log by a number past 64 bits is not RocksDB's, and is passed over") {
  // RocksDB reads no such name as a log of its own; the tail's check threw on it (stoull), and
  // gatewayd and gatewayctl ended with std::out_of_range on a torn last write.
  Crashed c;
  for (int i = 0; i < 3; ++i) c.write(i, 500);
  c.write(3, 500);
  c.crash();
  overwrite(c.log, c.ends[3] - 100, 8, '\xff');  // the last batch torn
  std::ofstream(c.dir.path() + "/18446744073709551616.log").put('x');
  std::ofstream(c.dir.path() + "/99999999999999999999999.log").put('x');

  const WalTail tail = examine_wal_tail(c.dir.path());
  CHECK(tail.kind == WalTail::Kind::kTorn);
  CHECK(tail.file == std::filesystem::path(c.log).filename().string());
  auto store = Store::open(c.dir.path());
  REQUIRE(store.ok());
  CHECK_FALSE(store.value()->recovery_note().empty());
  CHECK(has(*store.value(), 2));
  CHECK_FALSE(has(*store.value(), 3));
}

TEST_CASE("damage to a batch before the last stops the open, also in the same block as the rest") {
  // Twenty batches of 500 bytes share the log's first block: RocksDB's reader, which skips the
  // rest of a block after a bad record, would not see the later ones. Nothing is dropped.
  for (int damaged : {3, 18}) {
    CAPTURE(damaged);
    Crashed c;
    for (int i = 0; i < 20; ++i) c.write(i, 500);
    REQUIRE(c.ends.back() < 32768);
    c.crash();
    overwrite(c.log, c.start(damaged) + 200, 4, '\xff');
    const WalTail tail = examine_wal_tail(c.dir.path());
    CHECK(tail.kind == WalTail::Kind::kDamaged);
    CHECK(tail.detail.find("checksum mismatch") != std::string::npos);
    CHECK(tail.detail.find("and a later batch after it") != std::string::npos);
    const uint64_t size = std::filesystem::file_size(c.log);
    auto store = Store::open(c.dir.path());
    REQUIRE_FALSE(store.ok());
    CHECK(store.error().detail.find("Corruption") != std::string::npos);
    CHECK(std::filesystem::file_size(c.log) == size);
  }
}

// A review zeroed 16 bytes over an acknowledged batch's end and the last batch's header: the open
// dropped both, the acknowledged one included, saying that it was never acknowledged. No crash
// leaves that (the batch before the last was synced before the last was written); the damage
// now stops the open, as damage before the last write does.
TEST_CASE("damage over a batch's end and the last batch's header stops the open") {
  struct Case {
    const char* name;
    size_t batches, bytes;  // the second last of them ends where the damage is
    size_t before, after;   // zeros from this many bytes before that end to this many after it
  };
  const Case cases[] = {
      {"16 bytes", 10, 500, 8, 8},
      // A page of zeros over two whole batches, the third's end and the last one's header.
      {"a page", 20, 500, 1500, 7},
      // The last batch spans blocks: only its first fragment's header is damaged.
      {"before a batch of fragments", 10, 500, 8, 8},
  };
  for (const Case& k : cases) {
    CAPTURE(k.name);
    Crashed c;
    for (size_t i = 0; i + 1 < k.batches; ++i) c.write(static_cast<int>(i), k.bytes);
    const bool fragments = std::string_view(k.name) == "before a batch of fragments";
    c.write(static_cast<int>(k.batches - 1), fragments ? 70000 : k.bytes);
    c.crash();
    const uint64_t end = c.ends[k.batches - 2];
    overwrite(c.log, end - k.before, k.before + k.after);

    const WalTail tail = examine_wal_tail(c.dir.path());
    CHECK(tail.kind == WalTail::Kind::kDamaged);
    CHECK(tail.detail.find("and bytes of a later write after its end") != std::string::npos);
    const uint64_t size = std::filesystem::file_size(c.log);
    auto store = Store::open(c.dir.path());
    REQUIRE_FALSE(store.ok());
    CHECK(store.error().detail.find("Corruption") != std::string::npos);
    CHECK(store.error().detail.find("(" + tail.detail + ")") != std::string::npos);
    CHECK(std::filesystem::file_size(c.log) == size);
  }
}

TEST_CASE("damage in a log before a newer log with records stops the open") {
  Crashed c;
  const std::string first_log = c.log;
  // The default column family keeps the first log alive after the events are flushed.
  c.write(0, 500, Cf::kMeta);
  c.write(1, 500, Cf::kMeta);
  REQUIRE(c.store->db()->Flush(rocksdb::FlushOptions(), c.store->cf(Cf::kEvents)).ok());
  c.log = newest_log(c.dir.path());
  REQUIRE(c.log != first_log);
  c.write(2, 500);
  c.crash();
  REQUIRE(std::filesystem::exists(first_log));
  overwrite(first_log, std::filesystem::file_size(first_log) - 50, 4, '\xff');
  const WalTail tail = examine_wal_tail(c.dir.path());
  CHECK(tail.kind == WalTail::Kind::kDamaged);
  CHECK(tail.detail.find("a later log") != std::string::npos);
  CHECK_FALSE(Store::open(c.dir.path()).ok());
}

TEST_CASE("a torn last write is not dropped if the replay would stop before a batch ahead of it") {
  // A record RocksDB stops at although its checksum holds (a batch too small to be one), then a
  // complete batch, then the torn write: replaying up to the damage would lose that batch too.
  Crashed c;
  for (int i = 0; i < 5; ++i) c.write(i, 500);
  c.crash();
  append_record(c.log, 1, "tiny");
  const uint64_t next = c.seqs.back() + 1;
  std::string batch;
  for (int i = 0; i < 8; ++i) batch.push_back(static_cast<char>(next >> (8 * i)));
  batch += std::string("\x01\x00\x00\x00", 4);  // one entry:
  batch += "\x01\x01x\x01y";                    // Put("x", "y") in the default column family
  append_record(c.log, 1, batch);
  append_record(c.log, 2, std::string(300, 'z'));
  overwrite(c.log, std::filesystem::file_size(c.log) - 10, 4, '\xff');
  const WalTail tail = examine_wal_tail(c.dir.path());
  REQUIRE(tail.kind == WalTail::Kind::kTorn);
  CHECK(tail.last_complete_seq == next);
  const uint64_t size = std::filesystem::file_size(c.log);
  auto store = Store::open(c.dir.path());
  REQUIRE_FALSE(store.ok());
  CHECK(store.error().detail.find("does not reach the last complete batch before it") !=
        std::string::npos);
  CHECK(std::filesystem::file_size(c.log) == size);
}

TEST_CASE("a later batch that starts with an empty first fragment is seen after the damage") {
  // Where a block has only a header's room left, RocksDB starts a batch with an empty first
  // fragment there and goes on in the next block. A batch laid out so, after a damaged one, is a
  // later batch: the damage is not the log's tail.
  Crashed c;
  for (int i = 0; i < 3; ++i) c.write(i, 500);
  c.crash();
  const uint64_t end = std::filesystem::file_size(c.log);
  // A complete batch filling the block up to its last 7 bytes, then damaged.
  std::string filler;
  const uint64_t next = c.seqs.back() + 1;
  for (int i = 0; i < 8; ++i) filler.push_back(static_cast<char>(next >> (8 * i)));
  filler += std::string("\x01\x00\x00\x00", 4);
  filler.resize(32768 - 7 - end - 7, 'f');
  append_record(c.log, 1, filler);
  REQUIRE(std::filesystem::file_size(c.log) == 32768 - 7);
  append_record(c.log, 2, "");  // the next batch: an empty first fragment ...
  REQUIRE(std::filesystem::file_size(c.log) == 32768);
  append_record(c.log, 4, std::string(100, 'l'));  // ... and its last, in the next block
  overwrite(c.log, end + 7 + 100, 4, '\xff');      // damage inside the filler batch
  const WalTail tail = examine_wal_tail(c.dir.path());
  CHECK(tail.kind == WalTail::Kind::kDamaged);
  CHECK(tail.detail.find("and a later batch after it") != std::string::npos);
}

TEST_CASE("logs that a crash left whole, or cut short, need nothing of this") {
  for (bool cut : {false, true}) {
    CAPTURE(cut);
    Crashed c;
    for (int i = 0; i < 5; ++i) c.write(i, 1000);
    c.write(5, 100000);
    c.crash();
    if (cut) std::filesystem::resize_file(c.log, c.start(5) + 50000);
    const WalTail tail = examine_wal_tail(c.dir.path());
    // A batch cut short is RocksDB's to drop: the open does not fail, so this is not asked.
    CHECK(tail.kind == (cut ? WalTail::Kind::kTorn : WalTail::Kind::kIntact));
    auto store = Store::open(c.dir.path());
    REQUIRE(store.ok());
    CHECK(store.value()->recovery_note().empty());
    CHECK(has(*store.value(), 4));
    CHECK(has(*store.value(), 5) == !cut);
  }
}

}  // namespace
}  // namespace gw
