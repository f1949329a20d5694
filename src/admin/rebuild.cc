#include "admin/rebuild.h"

#include <chrono>

#include "admin/interrupt_cleanup.h"
#include "admin/read_only.h"
#include "projections/catch_up.h"
#include "service/idempotency.h"
#include "store/store.h"

namespace gw::admin {

Result<RebuildReport> rebuild(const std::string& data_dir, const FoldOptions& options) {
  if (auto unusable = unusable_data_dir(data_dir)) return std::move(*unusable);
  auto store = Store::open(data_dir);
  if (!store.ok()) {
    const std::string& why = store.error().detail;
    const bool in_use = why.starts_with(Store::kInUse);
    return make_error(Code::kUnavailable, "cannot open " + data_dir + " for writing" +
                                              (in_use ? " (stop gatewayd first)" : "") + ": " +
                                              why);
  }
  const auto start = std::chrono::steady_clock::now();
  // The log is read to its end before the projections are dropped: a log that cannot be replayed
  // (a malformed event) leaves the data dir as it was, and gatewayd still starts on it.
  // A fold on disk and the table files being written are removed also when gatewayctl is
  // interrupted (a name nothing is under otherwise).
  const RemovedOnInterrupt fold_removed(fold_scratch_dir(*store.value(), options));
  const RemovedOnInterrupt tables_removed(store.value()->dir() + "/" + kRebuildDir);
  auto fold = fold_log(*store.value(), options);
  if (!fold.ok()) return std::move(fold.error());
  // Counted before anything is dropped: a fold on disk that cannot be read changes nothing.
  auto counts = count_records(*fold.value());
  if (!counts.ok()) return std::move(counts.error());
  // The old read model is dropped only once the new one's table files are written.
  Store& s = *store.value();
  bool dropped_old = false;
  if (auto r = write_projections(s, *fold.value(),
                                 [&s, &dropped_old] {
                                   dropped_old = true;
                                   return s.reset_projections();
                                 });
      !r.ok()) {
    // Failed while the new read model went in (its table files' ingest): the old one is gone,
    // and the message says so (the data dir read as empty to `check`, with no word of it here).
    if (dropped_old) {
      r.error().detail +=
          "; the old read model was dropped before this failure: run gatewayctl rebuild again, or "
          "start gatewayd, which builds it from the log";
    }
    return std::move(r.error());
  }
  // A kept answer whose create the log lost would answer a repeat 201 for a record that is gone.
  auto dropped = drop_answers_of_lost_creates(s);
  if (!dropped.ok()) return std::move(dropped.error());
  RebuildReport report;
  report.answers_dropped = dropped.value();
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  report.events = fold.value()->events();
  report.on_disk = fold.value()->on_disk();
  report.records = counts.value();
  report.recovery_note = store.value()->recovery_note();
  return report;
}

}  // namespace gw::admin
