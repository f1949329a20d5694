// Queries over the projections, for the HTTP read path. Reads committed data straight from RocksDB
// (get() through the read cache, if given, whose shards have a mutex each); safe for concurrent
// use from any number of threads. Records are returned as their stored JSON bytes, ready to send,
// never re-parsed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "commands/records.h"
#include "core/error.h"
#include "projections/keys.h"
#include "store/store.h"

namespace gw {

class ListMemo;
class ReadCache;

class ReadModel {
 public:
  // With `cache` (which must outlive the ReadModel and be watched by the store's Writer, see
  // projections/watchers.h), get() reads records through it; with `memo` (the same), list() finds
  // deep pages through it.
  explicit ReadModel(const Store& store, ReadCache* cache = nullptr, ListMemo* memo = nullptr)
      : store_(store), cache_(cache), memo_(memo) {}

  struct Found {
    std::string json;
    uint64_t version = 0;
  };
  // The live record `id` of `kind` owned by `team`; nullopt when it does not exist, is deleted or
  // belongs to another team (callers answer 404 for all three alike).
  Result<std::optional<Found>> get(Kind kind, std::string_view team, std::string_view id) const;

  // The record `id` as it was right after event `as_of` (read from its history, upcast from older
  // schema versions); nullopt when it did not exist then, was deleted by then, or belongs to
  // another team. The version is the record's version at that point.
  Result<std::optional<Found>> get_as_of(Kind kind, std::string_view team, std::string_view id,
                                         uint64_t as_of) const;
  // The sequence number of the log's last event (0 for an empty log); kInternal if its key is not
  // a sequence number.
  Result<uint64_t> last_seq() const;

  struct Filter {
    std::string field;
    std::string value;
  };
  struct Page {
    std::vector<std::string> items;  // record JSON, oldest first
    uint64_t total = 0;              // all matches, not only this page
  };
  // Page `page` (1-based) of the team's live records of `kind` matching every filter.
  // Precondition: filters name fields indexed for the kind (see filterable()).
  Result<Page> list(Kind kind, std::string_view team, const std::vector<Filter>& filters,
                    uint64_t page, uint64_t per_page) const;

  // The fields `?field=value` may filter on for a kind.
  static bool filterable(Kind kind, std::string_view field);

  // A page of events holds at most this many bytes of event JSON, unless its one event is larger:
  // what a history or feed request holds in memory does not grow with the log.
  static constexpr size_t kMaxPageBytes = size_t{4} << 20;

  struct History {
    std::vector<std::string> events;  // event JSON, oldest first
    // The version of the last event returned when later ones were left for the next page (pass
    // it as `after_version`); 0 when the page ends the history.
    uint64_t next_after_version = 0;
  };
  // The events of record `id` (deleted records included) with a version > `after_version`, oldest
  // first, at most `limit` of them and at most kMaxPageBytes (one event at least); nullopt when
  // the record does not exist or belongs to another team.
  Result<std::optional<History>> history(Kind kind, std::string_view team, std::string_view id,
                                         uint64_t after_version, uint64_t limit) const;

  struct Events {
    std::vector<std::string> events;  // event JSON, by sequence number
    uint64_t next_after = 0;          // pass as `after` to continue
  };
  // The team's events with sequence number > after, at most `limit` and at most kMaxPageBytes
  // (one event at least).
  Result<Events> tenant_events(std::string_view team, uint64_t after, uint64_t limit) const;

 private:
  struct Owned {
    std::string raw;  // the stored value; header.team and json point into it
    keys::RecordHeader header;
    std::string_view json;
  };
  // Reads record `id` (deleted or not) into *out; through the read cache unless a snapshot is
  // given. False when `id` is not of `kind`, the record does not exist, or it belongs to another
  // team.
  Result<bool> read_owned(Kind kind, std::string_view team, std::string_view id,
                          const rocksdb::Snapshot* snap, Owned* out) const;

  const Store& store_;
  ReadCache* cache_;
  ListMemo* memo_;
};

// The log's end as the errors that refuse a sequence number beyond it name it: "its last event is
// N", or "it has no events yet" for an empty log (`last_seq` 0, which is no event).
std::string the_logs_end(uint64_t last_seq);

}  // namespace gw
