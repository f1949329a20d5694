// Folding the event log into the state it implies. Every event carries the full record after the
// change, so an aggregate's last event is its state; from those records a fold derives the whole
// projections column family exactly as applying the events one by one (projections/apply.h)
// leaves it, without a RocksDB read or write per event. Used to rebuild and to check the read
// model, and to list every record as of an event.
// A LogFold is used by one thread at a time; fold_events parses on a helper thread of its own.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <rocksdb/iterator.h>

#include "commands/records.h"
#include "core/error.h"
#include "projections/apply.h"

namespace gw {

class LogFold {
 public:
  // Folds the next event. Events must come in ascending sequence order; kInternal otherwise.
  Result<bool> add(LoggedEvent event);
  // Makes room for about `events` more events (a hint; saves rehashing a large fold).
  void reserve(uint64_t events);

  struct Aggregate {
    Record record;  // as of the last event folded
    uint64_t version = 0;
    uint64_t create_seq = 0;
  };
  // Every aggregate seen, in the order of its first event (so by create_seq).
  const std::deque<Aggregate>& aggregates() const { return aggregates_; }
  uint64_t events() const { return events_; }
  uint64_t last_seq() const { return last_seq_; }

  // A sorted stream of key/value pairs: each call yields the next pair; false at the end.
  using Stream = std::function<bool(std::string* key, std::string* value)>;
  // Every key and value of the projections column family that applying the folded events to an
  // empty read model writes, as sorted streams over consecutive key ranges: one after another
  // they are the whole column family in ascending key order; side by side they can be written on
  // separate threads (one thread per stream). The streams read this fold: keep it alive and
  // unchanged while they are used.
  std::vector<Stream> projections() const;

 private:
  struct Touch {  // one event of an aggregate: its history entry
    uint32_t aggregate;
    uint64_t version;
    uint64_t seq;
  };
  struct TeamEvent {  // one event of a team: its tenant-feed entry
    uint32_t team;
    uint64_t seq;
  };

  std::deque<Aggregate> aggregates_;  // a deque: growing it never moves the records
  // Aggregate id (a view of the id in its record) -> aggregates_ index.
  std::unordered_map<std::string_view, uint32_t> index_;
  std::vector<Touch> touches_;
  std::vector<std::string> teams_;
  std::unordered_map<std::string, uint32_t> team_index_;
  std::vector<TeamEvent> team_events_;
  std::map<uint64_t, std::string> open_requests_;             // request seq -> domain id
  std::unordered_map<std::string, uint64_t> latest_request_;  // domain id -> its open request
  uint64_t events_ = 0;
  uint64_t last_seq_ = 0;
};

// The streams one after another.
LogFold::Stream concatenated(std::vector<LogFold::Stream> parts);

// Sees each stored event (its sequence number and bytes) in order before it is folded; an error
// stops the scan and is returned.
using EventInspector = std::function<Result<bool>(uint64_t seq, std::string_view stored)>;

// Takes each parsed event in order; an error stops the scan and is returned.
using EventSink = std::function<Result<bool>(LoggedEvent event)>;

// Hands the events of the `events` column family from `it`'s position through sequence number
// `until` to `add`, parsing batches of them on a helper thread meanwhile. kInternal (naming the
// event) when one is malformed or its seq is not its key's, kUnavailable on an I/O error, or the
// inspector's or `add`'s error.
Result<bool> fold_events(rocksdb::Iterator& it, uint64_t until, const EventSink& add,
                         const EventInspector& inspect = nullptr);
// The same into `fold`.
Result<bool> fold_events(rocksdb::Iterator& it, uint64_t until, LogFold& fold,
                         const EventInspector& inspect = nullptr);

}  // namespace gw
