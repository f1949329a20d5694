#include "projections/catch_up.h"

#include "projections/apply.h"
#include "projections/keys.h"
#include "store/writer.h"

namespace gw {

namespace {
constexpr size_t kEventsPerBatch = 1024;
}

Result<uint64_t> catch_up_projections(Store& store, IdGenerator& ids) {
  auto checkpoint = store.get(Cf::kProjections, keys::checkpoint());
  if (!checkpoint.ok()) return std::move(checkpoint.error());
  uint64_t after = checkpoint.value() ? decode_u64(*checkpoint.value()) : 0;
  uint64_t applied = 0;
  auto it = store.iterate(Cf::kEvents);
  it->Seek(encode_u64(after + 1));
  while (it->Valid()) {
    // The Tx's own sequence/hash are unused here: catching up appends no event.
    Tx tx(store, ids, 0, kGenesisHash);
    for (size_t n = 0; it->Valid() && n < kEventsPerBatch; ++n, it->Next()) {
      auto r = apply_logged_event(tx, std::string_view(it->value().data(), it->value().size()));
      if (!r.ok()) return std::move(r.error());
      ++applied;
    }
    rocksdb::WriteOptions wo;
    wo.sync = true;
    auto s = store.db()->Write(wo, tx.batch());
    if (!s.ok()) return make_error(Code::kUnavailable, s.ToString());
  }
  if (!it->status().ok()) return make_error(Code::kUnavailable, it->status().ToString());
  return applied;
}

}  // namespace gw
