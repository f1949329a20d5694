// Seeding a data dir with a given history, for tests that start from stored events (a fixture
// written by an older schema, say). Not a user-facing tool: each event goes into the `events`
// column family byte for byte and unchecked, with no projections, so gatewayd (or a rebuild)
// replays them. Used from one thread at a time; the data dir must not be open elsewhere.
#pragma once

#include <cstdint>
#include <string>

namespace gw::testing {

// Creates (or opens) the database in `data_dir` and stores each non-empty line of the NDJSON file
// `ndjson_path` under the sequence number of its "seq" member. Returns the number of events.
// Throws std::runtime_error when the file cannot be read, a line has no "seq", or RocksDB fails.
uint64_t load_event_log(const std::string& data_dir, const std::string& ndjson_path);

// The path of a file under tests/fixtures/ of the source tree.
std::string fixture_path(const std::string& relative);

}  // namespace gw::testing
