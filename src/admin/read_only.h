// Opening a data dir for reading while gatewayd may be running on it. The database is opened as
// a RocksDB secondary instance (Store::open_secondary): it reads the table files, the MANIFEST and
// the write-ahead logs as they are at the open, takes no LOCK and never writes to the data dir,
// so everything gatewayd acknowledged (synced to its log) before the open is visible. The view
// never moves on (TryCatchUpWithPrimary is not called), so all reads agree with each other;
// RocksDB offers no snapshots on a secondary, and none are needed. RocksDB's own log of the
// secondary goes to a private directory under $TMPDIR (default /tmp), removed again on close
// (and on an interrupt: admin/interrupt_cleanup.h).
//
// A secondary recovers the last state of each column family whose table files are all there, since
// the writer deletes files as it compacts: with files missing, it would show an older state (no
// events at all if every table file is gone) as if whole. So with no process holding the data
// dir's LOCK, the database is first opened strictly (Store::check_table_files), and a missing
// file is an error. Beside a running gatewayd that check is not made (its deletions would race
// it); gatewayd itself fails to start on such a data dir.
// A ReadOnlyStore is used like a Store: safe for concurrent reads.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "admin/interrupt_cleanup.h"
#include "core/error.h"
#include "store/store.h"

namespace gw::admin {

// Why gatewayctl cannot use `data_dir` as a database, if it cannot: it holds a backup not
// finished, none is there, or the directory cannot be read (say, as another user than
// gatewayd's), which is not the same advice.
std::optional<Error> unusable_data_dir(const std::string& data_dir);

class ReadOnlyStore {
 public:
  // kUnavailable (with a message naming `data_dir`) if there is no database there or it cannot be
  // read.
  static Result<std::unique_ptr<ReadOnlyStore>> open(const std::string& data_dir);
  ~ReadOnlyStore();  // closes the database, then removes the scratch directory

  ReadOnlyStore(const ReadOnlyStore&) = delete;
  ReadOnlyStore& operator=(const ReadOnlyStore&) = delete;

  const Store& store() const { return *store_; }
  // The private directory under $TMPDIR, removed on close and on an interrupt: room for a
  // command's scratch files (a fold on disk) while the store is open.
  const std::string& scratch_dir() const { return scratch_dir_; }

 private:
  ReadOnlyStore() = default;
  std::string scratch_dir_;
  std::unique_ptr<RemovedOnInterrupt> removed_on_interrupt_;
  std::unique_ptr<Store> store_;
};

}  // namespace gw::admin
