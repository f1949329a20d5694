// Writing events and keeping the read model in step with them, inside one writer Tx, so an event
// and its projection are committed by the same atomic WriteBatch. Writer thread only.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "commands/decide.h"
#include "projections/record_cache.h"
#include "store/writer.h"

namespace gw {

// A record as written by the last change of a decision: its JSON and version (the ETag).
struct Recorded {
  std::string json;
  uint64_t version = 0;
};

class TxLookups;
// Appends one event per change of `decision` and applies each to the read model. Returns the
// record of the decision's subject (decision.result) as written. `lookups` is what the decision
// read through: the records it loaded are not read again. A change to a stored record has its
// record moved into `lookups` (for its cache); the caller reads only the changes' types after.
// On failure (an I/O error reading current state) the caller must discard the Tx's writes.
Result<Recorded> record_changes(Tx& tx, TxLookups& lookups, Decision& decision,
                                const Actor& actor, int64_t now);

// Applies an event already in the log (its stored JSON) to the read model: used to catch up and to
// rebuild. Upcasts older schema versions.
Result<uint64_t> apply_logged_event(Tx& tx, std::string_view event_json);

// An event read back from the log, its record upcast to the current schema.
struct LoggedEvent {
  uint64_t seq = 0;
  std::string type;
  uint64_t version = 0;    // aggregate_version
  uint64_t caused_by = 0;  // 0 when the event has none
  Record record;
};
// A record of `kind` from its stored JSON (a record key's value after its header, or what
// ReadModel::get gives), numbers read exactly. kInternal when it is not JSON.
Result<Record> parse_stored_record(Kind kind, std::string_view id, std::string_view json);

// Parses a stored event. kInternal when it is not JSON or a member is missing or mistyped.
Result<LoggedEvent> parse_logged_event(std::string_view event_json);

// apply_logged_event for an event already parsed. With `created`, tells whether the event made its
// aggregate: the read model held no record of its id before.
Result<bool> apply_event(Tx& tx, const LoggedEvent& event, bool* created = nullptr);

// Every index entry (key -> value) a record contributes while live, none once it is deleted: all
// projection keys of a record except its own, its history, and the counters. Each key once, in
// the same order for records of one kind (a few entries: a vector, not a map).
using IndexEntries = std::vector<std::pair<std::string, std::string>>;
IndexEntries entries_of(const Record& record, uint64_t create_seq);
// Tx::write_only's predicate for a Tx that writes projections: keys::written_only, in the
// projections column family only. The commands' Writer and the catch-up both use it.
bool written_only_by_projections(Cf which, std::string_view key);
// List and filter entries are counted: each such key ends in the record's create_seq (8 bytes),
// and a counter (keys::count_of_prefix of the rest of the key) holds the number of entries under
// that prefix.
bool counted(std::string_view entry_key);

// Whether an event of this type opens a verification request (a `q` key the verifier works from).
bool opens_verification_request(std::string_view event_type);
// Whether an event of this type is a verification request's outcome (its `caused_by` names the
// request it closes). Inheritance and revocation carry a `caused_by` too, which closes nothing.
bool answers_verification_request(std::string_view event_type);

// Lookups for decide, over the writer's Tx (pending writes of the batch included). Records are
// read and parsed once: load() keeps what it read until take(id), which must be called before
// the record is changed. One per job.
class TxLookups final : public Lookups {
 public:
  // With `cache`, records are looked up there before the Tx, and what is read is kept there (see
  // projections/record_cache.h for what keeps it coherent).
  explicit TxLookups(Tx& tx, RecordCache* cache = nullptr) : tx_(tx), cache_(cache) {}
  std::optional<Stored> load(const std::string& id) override;
  std::optional<std::string> live_profile_by_hostname(const std::string& hostname) override;
  std::optional<std::string> live_domain_by_hostname(const std::string& team,
                                                     const std::string& hostname) override;
  std::vector<Claim> claims_covering(const std::string& hostname) override;
  std::vector<Claim> claims_under(const std::string& hostname) override;
  std::optional<uint64_t> open_request(const std::string& domain_id) override;
  std::vector<std::string> team_domains_under(const std::string& team,
                                              const std::string& hostname) override;
  std::vector<std::string> inherited_from(const std::string& parent_id) override;
  // Before record `id` is changed: what is stored of it (what load() read, moved out, or read
  // now), dropped here and in the cache.
  std::optional<Stored> take(const std::string& id);
  // After a record was changed (record_changes): its new state, put in the cache by
  // keep_written() once the job's writes are sure to be kept.
  void wrote(Stored stored, size_t json_bytes);
  void keep_written();
  // An I/O error met by any lookup; decisions taken after one must be discarded.
  const std::optional<Error>& failure() const { return failure_; }

 private:
  std::optional<std::string> get(const std::string& key);
  // Under `prefix`: the values (values=true) or the rest of each key.
  std::vector<std::string> ids_under(const std::string& prefix, bool values);
  // What load() returns, kept in loaded_ (read once).
  std::optional<Stored>& loaded(const std::string& id);
  struct Written {
    Stored stored;  // its record's id is the cache's key
    size_t json_bytes;
  };
  Tx& tx_;
  RecordCache* cache_;
  std::unordered_map<std::string, std::optional<Stored>> loaded_;
  std::vector<Written> written_;
  // Records this job changes: what is read of them now includes the job's own writes, which
  // are not kept if the job is rejected later, so no read of them goes into the cache.
  std::unordered_set<std::string> changing_;
  std::optional<Error> failure_;
};

}  // namespace gw
