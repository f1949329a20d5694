// Tells a write-ahead log that a crash tore at its end from one damaged before it.
//
// gatewayd syncs every batch before it acknowledges any write in it, and writes one batch at a
// time (the mirror's checkpoint, its one write outside the writer, is synced too: helper 104 saw
// it unsynced between two batches), so after a crash (a power cut, a kernel panic) only the last
// batch of the newest log can be incomplete on disk, and it was never acknowledged. It may be cut
// short (RocksDB's kTolerateCorruptedTailRecords drops such a record) or have its full length with
// parts that never reached the disk: ext4 allocates a page's blocks when it writes the page back,
// so a page that was not written yet reads as zeros inside a file whose size already covers it.
// RocksDB reports the second kind as "Corruption: checksum mismatch" and refuses to open. This file
// reads the logs in RocksDB's format (32 KiB blocks of records, each with a 7-byte header: masked
// CRC-32C, length, type; a batch larger than a block's rest is split into first, middle and last
// fragments) to tell whether the damage is that torn last write, with no trace of a later write
// after it, or anything else, which must still stop the start (Store::open).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gw {

struct WalTail {
  enum class Kind {
    kIntact,   // no damage found: every record reads, and whatever follows the last is zeros
    kTorn,     // the last write is damaged and nothing of a later write follows it
    kDamaged,  // damage before the last write (a complete record of a later write follows it),
               // or a log that cannot be read
  };
  Kind kind = Kind::kIntact;
  // kTorn: the log file holding the torn write, where its first fragment starts, and the bytes
  // from there to the end of that file. kDamaged: a sentence on what was found.
  std::string file;
  uint64_t offset = 0;
  uint64_t bytes = 0;
  std::string detail;
  // The last sequence number of the last complete batch before the damage (0 if there is none in
  // the logs): what a recovery up to the damage must reach.
  uint64_t last_complete_seq = 0;
};

// Reads RocksDB's write-ahead logs (`*.log`) in `dir`, oldest first. Only to be called after
// RocksDB has refused to open `dir`: it reads every log whole.
WalTail examine_wal_tail(const std::string& dir);

// The masked CRC-32C a record header carries for `type` and `payload` (for the tests, which write
// records of their own).
uint32_t wal_record_crc(uint8_t type, const char* payload, size_t n);

}  // namespace gw
