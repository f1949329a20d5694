#include "support/event_log.h"

#include <fstream>
#include <stdexcept>

#include "store/store.h"
#include "support/json.h"

namespace gw::testing {

uint64_t load_event_log(const std::string& data_dir, const std::string& ndjson_path) {
  std::ifstream in(ndjson_path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + ndjson_path);
  auto store = Store::open(data_dir);
  if (!store.ok())
    throw std::runtime_error("cannot open " + data_dir + ": " + store.error().detail);
  rocksdb::WriteBatch batch;
  uint64_t events = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const int64_t seq = num(parse_json(line), "seq");
    if (seq <= 0) throw std::runtime_error("an event in " + ndjson_path + " has no seq: " + line);
    batch.Put(store.value()->cf(Cf::kEvents), encode_u64(static_cast<uint64_t>(seq)), line);
    ++events;
  }
  rocksdb::WriteOptions wo;
  wo.sync = true;
  auto s = store.value()->db()->Write(wo, &batch);
  if (!s.ok()) throw std::runtime_error("cannot write the events: " + s.ToString());
  return events;
}

std::string fixture_path(const std::string& relative) {
  return std::string(GATEWAY_FIXTURES_DIR) + "/" + relative;
}

}  // namespace gw::testing
