// `gatewayctl rebuild`: drops the read model of a data dir and replays the whole log into it
// (fold_log: one fold of the whole log, in memory or on disk, see projections/fold.h; then
// write_projections: sorted table files, then Store::reset_projections, then the files ingested at
// once). A log that cannot be folded, or table files that cannot be written, leave the read model
// as it was. The server must be stopped: the data dir
// is opened for writing, which RocksDB's LOCK refuses while gatewayd holds it. Safe to call from
// any thread; not concurrently on one data dir.
#pragma once

#include <cstdint>
#include <string>

#include "admin/counts.h"
#include "core/error.h"
#include "projections/fold.h"

namespace gw::admin {

struct RebuildReport {
  uint64_t events = 0;  // events replayed
  RecordCounts records;
  double seconds = 0;         // dropping, replaying and writing the projections
  bool on_disk = false;       // the fold was on disk
  std::string recovery_note;  // Store::recovery_note() of the open
  // Kept Idempotency-Key answers dropped because their creates are not in the log
  // (drop_answers_of_lost_creates, service/idempotency.h).
  uint64_t answers_dropped = 0;
};

// kUnavailable when the data dir cannot be opened for writing (the message says so when gatewayd,
// or another process, holds it) or on an I/O error; kInternal (naming the event) for a malformed
// event. Until the new read model's table files are written nothing is changed; an error after
// that (dropping the old one, the ingest) leaves the projections empty, and gatewayd replays the
// log at its next start.
// The fold goes where `options` say, on disk into <data-dir>/fold.tmp unless they name another
// scratch directory.
Result<RebuildReport> rebuild(const std::string& data_dir, const FoldOptions& options = {});

}  // namespace gw::admin
