// `gatewayctl backup`: a consistent copy of a data dir's database, taken while gatewayd runs.
//
// Why a logical copy: rocksdb::Checkpoint (hard links to the table files plus copies of the
// MANIFEST and logs) needs the DB object of the process that has the database open for writing;
// gatewayctl runs in another process, and RocksDB 7.8's secondary instance cannot make a
// checkpoint (it cannot flush, and nothing stops gatewayd from deleting table files mid-copy).
// A plain copy of the files would race gatewayd's compactions. So the database is opened as a
// secondary (admin/read_only.h: a consistent view including everything gatewayd has
// acknowledged, without its LOCK, and fixed at the open), every column family (events,
// projections and the default one with the Kafka mirror's checkpoint) is read from that view and
// written into a fresh database in the target directory, which is flushed to table files, synced
// and closed. Point gatewayd's --data-dir at the target to restore. The copy holds the database
// only: the tokens file is not part of it. Safe to call from any thread.
#pragma once

#include <cstdint>
#include <string>

#include "core/error.h"

namespace gw::admin {

struct BackupReport {
  uint64_t last_seq = 0;  // the last event in the copy
  uint64_t events = 0;    // keys copied per column family
  uint64_t projections = 0;
  uint64_t meta = 0;
};

// Whether `path` is `dir` or under it, symlinks of the parts that exist resolved (a file written
// there would be among gatewayd's own files: a copy, or a replay's output over CURRENT).
bool inside_dir(const std::string& dir, const std::string& path);

// Copies the database of `data_dir` into `out_dir`, created if missing.
// kPreconditionFailed when `out_dir` exists and is not an empty directory; kUnavailable when the
// source cannot be read or the copy cannot be written (what was written is removed again).
Result<BackupReport> backup(const std::string& data_dir, const std::string& out_dir);

}  // namespace gw::admin
