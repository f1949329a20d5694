#pragma once

// A data dir's format mark: the file GATEWAYD-FORMAT, the newest data format a gatewayd that
// opened the dir for writing wrote in, as a decimal number and a newline. A gatewayd or gatewayctl
// that reads only older formats refuses the dir before RocksDB opens it (so it changes nothing
// there): started on a data dir a newer release wrote, a release before the mark rebuilt the read
// model in its own layout and served what it made of events it did not know, and sent the Kafka
// mirror's events again from the first (helper 119).

#include <cstdint>
#include <optional>
#include <string>

#include "core/error.h"

namespace gw {

inline constexpr const char* kDataFormatFile = "GATEWAYD-FORMAT";

// The format this release writes. Raise it when a release writes what an older one would misread
// or damage: an event of a new schema_version, a key of its own moved or renamed (as the mirror's
// checkpoint was), a column family more, table or log files an older RocksDB cannot read. A new
// layout of the projections alone needs none: a release finds no checkpoint in projections of
// another layout and rebuilds them from the log.
inline constexpr uint64_t kDataFormat = 1;

// `dir`'s mark: 0 if it has none (a new dir, or one of a release before the mark). An error if
// the mark cannot be read, holds no format number, or names a format newer than kDataFormat; its
// message begins "it" or "its", to follow "cannot open DIR: ".
Result<uint64_t> read_data_format(const std::string& dir);

// Makes kDataFormat `dir`'s mark: the file replaced whole by a rename, synced, and the rename
// synced with the dir. An error (beginning "cannot write") if any step fails.
std::optional<Error> mark_data_format(const std::string& dir);

}  // namespace gw
