// A fold of the event log kept on disk, for a log whose fold in memory (log_fold.h, about a
// kilobyte per record) would not fit in the memory there is. The events are applied one by one
// (projections/apply.h, as catch-up applies them) to the projections column family of a scratch
// database of their own, in batches written without a write-ahead log; what it holds then is the
// read model that applying them to an empty one leaves, which LogFold derives too. Memory stays
// at the scratch database's buffers and caches, whatever the size of the log; a fold takes
// several times longer than LogFold's. The scratch database also keeps, in its default column
// family, the id of each aggregate under the sequence number of its first event (the order in
// which LogFold lists aggregates).
// Used by one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "core/error.h"
#include "projections/apply.h"
#include "projections/log_fold.h"
#include "store/store.h"

namespace gw {

// How the detail of every error of a fold's scratch database begins (kUnavailable): a failure of
// the disk it is on (full, unwritable, a read error), not a finding about the log or the read
// model folded from it. Errors of the log itself (a malformed event) do not begin so.
inline constexpr std::string_view kFoldScratchFailed = "the fold on disk failed: ";
// `error` as such a failure.
Error scratch_failed(Error error);

class DiskFold {
 public:
  // Makes `dir` afresh (what is there is removed first) and opens the scratch database in it.
  // kUnavailable (kFoldScratchFailed) if it cannot.
  static Result<std::unique_ptr<DiskFold>> create(const std::string& dir);
  ~DiskFold();  // closes the scratch database and removes `dir`

  DiskFold(const DiskFold&) = delete;
  DiskFold& operator=(const DiskFold&) = delete;

  // As LogFold::add: the next event, in ascending sequence order (kInternal otherwise). Staged in
  // a batch, written every kEventsPerBatch events (or kBytesPerBatch bytes); kUnavailable
  // (kFoldScratchFailed) if the scratch database fails.
  Result<bool> add(LoggedEvent event);
  // Writes what add() staged; call after the last add(), before reading the fold.
  Result<bool> finish();

  uint64_t events() const { return events_; }
  // The batches written to the scratch database so far.
  uint64_t batches_written() const { return batches_written_; }
  uint64_t last_seq() const { return last_seq_; }

  // As LogFold::projections: the projections column family the folded events leave, as sorted
  // streams over consecutive key ranges (the counters back at 0 left out, as a replay writes
  // none). They read the scratch database: keep the fold alive while they are used.
  std::vector<LogFold::Stream> projections() const;
  // The first read error that ended one of those streams early (kUnavailable), if any: a stream
  // cannot return one, so its consumer asks once it has read to the end.
  std::optional<Error> stream_error() const;

  // Calls visit(record) for every aggregate folded, deleted ones included, in the order of their
  // first events, each as of its last event; stops at visit's error, or an I/O error.
  using Visit = std::function<Result<bool>(const Record& record)>;
  Result<bool> for_each_record(const Visit& visit) const;
  // Calls visit(kind, deleted) for every aggregate folded, in no set order, reading only the
  // stored records' ids and headers (no JSON parsed). kUnavailable on an I/O error.
  using KindVisit = std::function<void(Kind kind, bool deleted)>;
  Result<bool> for_each_kind(const KindVisit& visit) const;

  static constexpr size_t kEventsPerBatch = 1024;
  // ... or once its writes take this many bytes, whichever comes first: 1024 profiles with 60 KB
  // of WAF directives each made a batch of over 60 MB, held twice at its write.
  static constexpr size_t kBytesPerBatch = 4 << 20;

 private:
  DiskFold() = default;
  LogFold::Stream stream_range(std::string from, std::string to) const;
  std::string dir_;
  std::unique_ptr<Store> scratch_;
  SystemClock clock_;
  std::unique_ptr<IdGenerator> ids_;  // a Tx takes one; applying events makes no ids
  std::unique_ptr<Tx> tx_;            // the batch being staged
  size_t staged_ = 0;
  uint64_t batches_written_ = 0;
  std::vector<std::pair<uint64_t, std::string>> firsts_;  // this batch's first events: seq, id
  uint64_t events_ = 0;
  uint64_t last_seq_ = 0;
  mutable std::mutex stream_error_mu_;  // the streams may be read on several threads
  mutable std::optional<Error> stream_error_;
};

}  // namespace gw
