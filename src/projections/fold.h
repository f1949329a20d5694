// A fold of the event log, kept where it fits: in memory (LogFold, log_fold.h: the fastest, about
// kFoldBytesPerEvent bytes for each event at most) or on disk (DiskFold, disk_fold.h: several
// times slower, its memory bounded whatever the size of the log). Both give the same projections
// and the same records in the same order. Rebuilding the read model (gatewayd's start without
// one, `gatewayctl rebuild`), `check`, `replay` and `waf-check` fold through this.
// Used by one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "projections/disk_fold.h"
#include "projections/log_fold.h"
#include "store/store.h"

namespace gw {

enum class FoldPlace { kAuto, kMemory, kDisk };
// "auto", "memory", "disk"; nullopt for anything else.
std::optional<FoldPlace> parse_fold_place(std::string_view name);

// What a fold in memory is taken to need: kFoldBytesPerEvent for each event, or, if more, 8/5 of
// the bytes of the events themselves (every event carries its whole record, and a fold keeps each
// record's last state). Measured on 1M webhooks, the record kind that takes the least, a fold in
// memory took 1.10 to 1.18 KB per event, 1.56 times their 718 bytes each; records larger than
// that (a profile with kilobytes of WAF directives) take more than 1.2 KB: 2,000 profiles of 60 KB
// took 1.2 (rebuild) to 1.7 (check) times their bytes.
// A record with many events takes less per event.
inline constexpr uint64_t kFoldBytesPerEvent = 1200;
// Fold::of_log takes `event_bytes` as the events' share of the log's Store::raw_bytes.
uint64_t fold_memory_estimate(uint64_t events, uint64_t event_bytes);
// kAuto's rule: in memory when the estimate (`need` bytes) is at most half of `available`.
bool fits_in_memory(uint64_t need, uint64_t available);
// The memory this process can still take, in bytes: /proc/meminfo's MemAvailable, or what is left
// under its cgroup's memory limit (v2 or v1) if that is less; UINT64_MAX if neither can be read.
// `root` is prefixed to every path read (tests give a tree of their own).
uint64_t available_memory(const std::string& root = "");

struct FoldOptions {
  FoldPlace place = FoldPlace::kAuto;
  // For a fold on disk: made afresh, and removed when the Fold is destroyed. Empty: a new
  // directory under $TMPDIR (default /tmp).
  std::string scratch_dir;
  // Told, before the events are read, why the fold goes on disk (a sentence with no end stop);
  // not called for a fold in memory.
  std::function<void(const std::string& note)> on_disk_note;
};

class Fold {
 public:
  // Folds the events of `store`'s log from its first through sequence number `until`, where
  // `options` says. The error of DiskFold::create, fold_events's (kInternal naming a malformed
  // event, kUnavailable on an I/O error, the inspector's). On an error, `*events` (when given)
  // is the number of events folded before it.
  static Result<std::unique_ptr<Fold>> of_log(const Store& store, uint64_t until,
                                              const FoldOptions& options,
                                              const EventInspector& inspect = nullptr,
                                              uint64_t* events = nullptr);

  bool on_disk() const { return disk_ != nullptr; }
  uint64_t events() const;
  uint64_t last_seq() const;
  // As LogFold::projections; keep the Fold alive and unchanged while they are used. Once a
  // consumer has read them to their ends, stream_error() tells whether one ended early (a read
  // error on disk; never in memory).
  std::vector<LogFold::Stream> projections() const;
  std::optional<Error> stream_error() const;
  // Every aggregate folded, deleted ones included, in the order of their first events, each as of
  // its last event folded; stops at visit's error (or an I/O error on disk).
  using Visit = DiskFold::Visit;
  Result<bool> for_each_record(const Visit& visit) const;
  // The kind of every aggregate folded and whether it is deleted, in no set order: cheaper than
  // for_each_record on disk.
  using KindVisit = DiskFold::KindVisit;
  Result<bool> for_each_kind(const KindVisit& visit) const;

 private:
  Fold() = default;
  std::unique_ptr<LogFold> memory_;
  std::unique_ptr<DiskFold> disk_;
};

}  // namespace gw
