#include "admin/read_only.h"

#include <algorithm>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "core/scratch_dir.h"
#include "store/data_format.h"
#include "store/wal_tail.h"

namespace gw::admin {

std::optional<Error> unusable_data_dir(const std::string& data_dir) {
  // First: a backup stopped early holds no CURRENT yet, or none of the column families, and was
  // told as a dir that gatewayd or a rebuild would finish, which refuse it (helper 122).
  if (auto refused = Store::unfinished_backup(data_dir)) return refused;
  std::error_code ec;
  if (std::filesystem::exists(data_dir + "/CURRENT", ec)) return std::nullopt;
  if (ec) return make_error(Code::kUnavailable, "cannot read " + data_dir + ": " + ec.message());
  if (auto refused = Store::files_without_current(data_dir)) {
    return make_error(Code::kUnavailable, "cannot read " + data_dir + ": " + refused->detail);
  }
  return make_error(Code::kUnavailable, data_dir + " holds no gatewayd database");
}

Result<std::unique_ptr<ReadOnlyStore>> ReadOnlyStore::open(const std::string& data_dir) {
  if (auto unusable = unusable_data_dir(data_dir)) return std::move(*unusable);
  // A dir of a newer data format is read by no part of this release (store/data_format.h).
  auto format = read_data_format(data_dir);
  if (!format.ok()) {
    return make_error(Code::kUnavailable, "cannot read " + data_dir + ": " + format.error().detail);
  }
  auto made = make_scratch_dir("gatewayctl-");
  if (!made.ok()) return std::move(made.error());
  const std::string& scratch = made.value();
  std::unique_ptr<ReadOnlyStore> out(new ReadOnlyStore());
  out->scratch_dir_ = scratch;
  out->removed_on_interrupt_ = std::make_unique<RemovedOnInterrupt>(scratch);
  // RocksDB said "Column family not found", which reads as damage: a kill of gatewayd's first
  // start left no events (helper 102), one of a rebuild no projections (helper 106), and so did a
  // power cut in a first start after the events' column family was made (helper 125).
  const std::vector<std::string> absent = Store::missing_column_families(data_dir);
  if (std::find(absent.begin(), absent.end(), "events") != absent.end()) {
    // A dir a gatewayd opened whole is damaged then, not new (helper 156).
    if (auto gone = Store::events_gone(data_dir, format.value())) {
      return make_error(Code::kUnavailable, "cannot read " + data_dir + ": " + gone->detail);
    }
    return make_error(Code::kUnavailable,
                      data_dir +
                          " holds no gatewayd database yet: its first start has not made it "
                          "(gatewayd finishes it when it starts)");
  }
  if (!absent.empty()) {
    return make_error(Code::kUnavailable,
                      "cannot read " + data_dir +
                          ": its read model is missing (a first start was stopped before making "
                          "it, or a rebuild, or a start that rebuilds it, between dropping it and "
                          "making it again; the events are there): start gatewayd on it, or run "
                          "gatewayctl rebuild");
  }
  const bool in_use = Store::locked_by_another_process(data_dir);
  // A log whose last write a crash tore is dropped by the first open for writing (Store::open);
  // until then RocksDB refuses to read it here, and the message says what will open it.
  auto cannot_read = [&](const std::string& why) {
    std::string hint;
    if (!in_use && why.find("SST file is ahead of WALs") != std::string::npos) {
      // A column family's table files hold writes past where the log now ends. Events and their
      // projections are written and synced together, and a flush syncs the log first, so no
      // crash does that: the log was cut short or damaged after the fact. It was told as a
      // crash's torn write, never acknowledged (helper 160).
      hint =
          " (a table file holds writes that the write-ahead log, cut short or damaged, no longer "
          "has: no crash does that to synced writes, so acknowledged events may be gone; restore "
          "a backup)";
    } else if (!in_use && why.find("Corruption") != std::string::npos &&
               examine_wal_tail(data_dir).kind == WalTail::Kind::kTorn) {
      hint =
          " (the write-ahead log ends in a write that a crash tore, never acknowledged: "
          "gatewayd drops it when it starts, as gatewayctl rebuild does)";
    }
    return make_error(Code::kUnavailable, "cannot read " + data_dir + ": " + why + hint);
  };
  if (!in_use) {
    if (auto missing = Store::check_table_files(data_dir, scratch)) {
      return cannot_read(missing->detail);
    }
  }
  auto store = Store::open_secondary(data_dir, scratch);
  if (!store.ok()) return cannot_read(store.error().detail);
  out->store_ = std::move(store.value());
  return out;
}

ReadOnlyStore::~ReadOnlyStore() {
  store_.reset();
  std::error_code ec;
  std::filesystem::remove_all(scratch_dir_, ec);
}

}  // namespace gw::admin
