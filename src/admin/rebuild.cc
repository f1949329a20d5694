#include "admin/rebuild.h"

#include <chrono>

#include "admin/read_only.h"
#include "projections/catch_up.h"
#include "store/store.h"

namespace gw::admin {

Result<RebuildReport> rebuild(const std::string& data_dir) {
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
  LogFold fold;
  if (auto r = fold_log(*store.value(), fold); !r.ok()) return std::move(r.error());
  if (auto r = store.value()->reset_projections(); !r.ok()) return std::move(r.error());
  if (auto r = write_projections(*store.value(), fold); !r.ok()) return std::move(r.error());
  RebuildReport report;
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  report.events = fold.events();
  report.records = count_records(fold);
  report.recovery_note = store.value()->recovery_note();
  return report;
}

}  // namespace gw::admin
