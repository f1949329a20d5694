// Bringing the read model up to the log: applies every event after the projections' checkpoint.
// Normally a no-op (events and projections are written in one batch); after `gatewayctl rebuild`
// dropped the projections, it replays the whole log. Run before the Writer starts or with the
// server stopped; not concurrent with other writers.
#pragma once

#include <cstdint>

#include "core/clock.h"
#include "core/error.h"
#include "store/store.h"

namespace gw {

// Returns the number of events applied.
Result<uint64_t> catch_up_projections(Store& store, IdGenerator& ids);

}  // namespace gw
