// Reading the event log out of a data dir: the raw events, and every record as of an event.
// `store` must not change during a call: a ReadOnlyStore's (whose view is fixed at its open, also
// while gatewayd runs) or one no writer is running on. Safe to call from any thread; `out` is the
// caller's.
#pragma once

#include <cstdint>
#include <ostream>
#include <string_view>

#include "core/error.h"
#include "projections/fold.h"
#include "store/store.h"

namespace gw::admin {

// The detail of the kUnavailable error write_events and write_replay return when `out`'s reader
// went away (a write failed with EPIPE: `gatewayctl events | head`), which is no failure to
// report: the reader took what it wanted.
inline constexpr std::string_view kReaderGone = "the reader of the output went away";

// Writes every event with sequence number > `after` as NDJSON: exactly the stored bytes of each,
// one per line, in sequence order. Returns the number written; kUnavailable on an I/O error
// (kReaderGone when the reader went away).
Result<uint64_t> write_events(const Store& store, uint64_t after, std::ostream& out);

// Writes every record live right after event `until_seq` (0 = before the first event), each
// exactly as GET would show it (older schema versions upcast), ordered by the sequence number of
// its create event, as
//   {"until_seq":N,"records":[
//   {...},
//   {...}
//   ]}
// Returns the number of records. kValidationFailed when `until_seq` is past the last event;
// kInternal (naming the event) for a malformed event; kUnavailable on an I/O error (kReaderGone
// when the reader went away). The events are folded where `options` say (projections/fold.h).
Result<uint64_t> write_replay(const Store& store, uint64_t until_seq, std::ostream& out,
                              const FoldOptions& options = {});

}  // namespace gw::admin
