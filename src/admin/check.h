// `gatewayctl check`: is the data dir's history intact, and does its read model follow from it?
//  - the hash chain: sequence numbers run 1, 2, 3, ... without gaps; each event's `prev_hash` is
//    the previous event's `hash` (64 zeros for the first); each `hash` is
//    hex(SHA-256(prev_hash || canonical)), canonical being the stored bytes up to the appended
//    `,"prev_hash":...` plus `}` (see encode_event in store/writer.h): recomputed from the bytes
//    as stored, never from a re-serialization;
//  - the projections column family equals, key for key and byte for byte, what a fresh replay of
//    the log writes, folded in memory or on disk (projections/fold.h).
// `store` must not change during the call: a ReadOnlyStore's (whose view is fixed at its open,
// also while gatewayd runs) or one no writer is running on. Safe to call from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "admin/counts.h"
#include "core/error.h"
#include "projections/fold.h"
#include "store/store.h"

namespace gw::admin {

struct CheckReport {
  // Empty when everything holds; otherwise the first problem found, naming the first bad event's
  // sequence number for the chain ("event 7: hash does not match its content") or the first
  // differing key for the projections.
  std::string failure;
  uint64_t events = 0;
  uint64_t projection_keys = 0;  // keys compared
  // Counters back at 0 that the read model keeps and a replay never writes: not compared (they
  // read as no counter), but `gatewayctl backup` copies and counts them.
  uint64_t spent_counters = 0;
  RecordCounts records;
};

// kUnavailable on an I/O error; a damaged log or read model is a report with `failure` set.
// The fold goes where `options` say. A failure of a fold on disk (its scratch directory full or
// unwritable: an error whose detail begins with kFoldScratchFailed) is an error too, and no
// finding about the store.
Result<CheckReport> check_store(const Store& store, const FoldOptions& options = {});

// The first difference between `store`'s projections and `replay`, a sorted stream of what a fresh
// replay writes, as check's failure text, or "" when there is none. `replay_error` tells whether
// the stream ended early (a read error of a fold on disk); if it did, that error is returned
// instead of a difference. kUnavailable when `store` cannot be read.
Result<std::string> compare_projections(const Store& store, const LogFold::Stream& replay,
                                        const std::function<std::optional<Error>()>& replay_error,
                                        uint64_t* compared, uint64_t* spent);

// A projection key for people: components joined by '/', a trailing 8-byte number in decimal,
// other bytes outside printable ASCII as \xNN. E.g. "h/dom_01J.../3".
std::string describe_key(std::string_view key);

}  // namespace gw::admin
