// Key layout of the `projections` column family. Components are separated by '\0' (tenant ids,
// hostnames, enum values and workload ids never contain it: parse.cc and fields.cc refuse control
// characters), numbers are 8-byte big-endian so they sort.
//
//   r \0 <id>                                   -> RecordHeader + record JSON (deleted ones too)
//   r \0 <id> \0 <version>                      -> seq       an aggregate's events (its history,
//                                                  next to its record: written in one place)
//   l \0 <team> \0 <kind> \0 <create_seq>       -> id        list of live records, oldest first
//   f \0 <team> \0 <kind> \0 <field> \0 <value> \0 <create_seq> -> id   filter index (live)
//   c \0 <team> \0 <kind> [\0 <field> \0 <value>] -> count   number of l / f entries under it
//   p \0 <hostname>                             -> profile id  (live profiles, all teams)
//   d \0 <team> \0 <hostname>                   -> domain id   (live domains of a team)
//   v \0 <reversed hostname> \0 <domain id>     -> <team> \0 <scope>  live, directly verified
//   n \0 <team> \0 <reversed hostname>          -> domain id   (live domains by name: subtrees)
//   i \0 <parent id> \0 <child id>              -> ""          live domains verified through parent
//   q \0 <request seq>                          -> domain id   open verification requests
//   Q \0 <domain id>                            -> request seq the domain's latest open request
//   t \0 <team> \0 <seq>                        -> ""        a tenant's events
//   m \0 checkpoint                             -> seq       last event applied
//
// l, t and q keys end in a sequence number and are written in increasing order under the rest of
// the key; the store's memtable insert hint (store/store.cc) counts on it for speed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "commands/records.h"

namespace gw::keys {

std::string record(std::string_view id);
// Whether `key` is one record() makes.
bool is_record(std::string_view key);
std::string list_prefix(std::string_view team, Kind kind);
std::string filter_prefix(std::string_view team, Kind kind, std::string_view field,
                          std::string_view value);
// The counter of every entry under a list or filter prefix.
std::string count_of_prefix(std::string_view prefix);
std::string profile_hostname(std::string_view hostname);
std::string domain_hostname(std::string_view team, std::string_view hostname);
// Verified claims are keyed by reversed hostname: claim_prefix(h) + domain_id. The claims on `h`
// and on every name under it share claims_at_or_under_prefix(h).
std::string claim_prefix(std::string_view hostname);
std::string claims_at_or_under_prefix(std::string_view hostname);
std::string history_prefix(std::string_view aggregate_id);
// "shop.example.com" -> "com.example.shop.": every name under a domain shares its reversed prefix.
std::string reversed_hostname(std::string_view hostname);
// The inverse: "com.example.shop." -> "shop.example.com".
std::string hostname_of_reversed(std::string_view reversed);
std::string domain_name_prefix(std::string_view team);
std::string inherited_prefix(std::string_view parent_id);
std::string request_prefix();
std::string open_request(std::string_view domain_id);
std::string tenant_events_prefix(std::string_view team);
// The projections' layout. Layout 3: an aggregate's history right after its record, under the
// record's key (layout 2 kept it under `h`). Layout 2: claims keyed by reversed hostname (layout 1
// keyed them by hostname).
inline constexpr std::string_view kLayout = "3";
// The sequence number the projections include. Its key holds the projections' layout version:
// projections of another layout have no checkpoint under it, so gatewayd drops them and rebuilds
// them from the log at start.
std::string checkpoint();
// The start of every layout's checkpoint key (layout 1's key is this alone).
std::string checkpoint_prefix();
// The layout a checkpoint key of any layout names ("1" for layout 1's); nullopt for another key.
std::optional<std::string> checkpoint_layout(std::string_view key);

// True for the keys decisions scan in key order (claims, domains by name, inherited
// verifications), also for a prefix of such keys: the writer's Tx orders only these (Tx::scan).
bool scanned_by_decisions(std::string_view key);

// True for the keys a command writes and never reads back while staging (list, filter and
// count entries, history, tenant feed, request queue, checkpoint): a Tx keeps them in its batch
// only (Tx::write_only). Readers outside the writer read them from the store.
bool written_only(std::string_view key);

// Stored record value: a small binary header read without parsing JSON on the hot path.
struct RecordHeader {
  uint64_t version = 0;
  uint64_t create_seq = 0;
  bool deleted = false;
  std::string_view team;
};
std::string encode_record(const RecordHeader& header, std::string_view json);
// Splits a stored value; false if it is malformed.
bool decode_record(std::string_view value, RecordHeader* header, std::string_view* json);

}  // namespace gw::keys
