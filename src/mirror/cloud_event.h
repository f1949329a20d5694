// Stored events as CloudEvents 1.0 Kafka messages in binary content mode: the record key is the
// aggregate id (so one aggregate's events share a partition and keep their order), the value is
// the stored event JSON byte for byte, and the context attributes travel as `ce_*` headers:
//   ce_specversion  "1.0"
//   ce_id           the event id (unique per event; consumers drop duplicates by it)
//   ce_source       "/tenants/<tenant>"
//   ce_type         the event type, e.g. "domain.created"
//   ce_subject      the aggregate id
//   ce_time         RFC 3339 UTC, e.g. "2026-11-20T09:30:00Z"
//   ce_sequence     the log sequence number, zero-padded to 20 digits so that, as the CloudEvents
//                   sequence extension requires, string order is log order
//   content-type    "application/json" (the event's datacontenttype)
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.h"

namespace gw::mirror {

struct OutboundMessage {
  uint64_t seq = 0;
  int64_t time = 0;  // the event's Unix time in seconds
  std::string key;
  std::string value;
  std::vector<std::pair<std::string, std::string>> headers;
};

// The message for the stored event `stored` at `seq`. kInternal if the bytes are not an event
// (a member missing or of the wrong type) or carry another sequence number.
Result<OutboundMessage> to_cloud_event(uint64_t seq, std::string_view stored);

// "1970-01-01T00:00:00Z" form of a Unix time (UTC, seconds precision).
std::string rfc3339_utc(int64_t unix_seconds);

// `seq` in decimal, zero-padded to 20 digits (the width of the largest uint64).
std::string sequence_attribute(uint64_t seq);

}  // namespace gw::mirror
