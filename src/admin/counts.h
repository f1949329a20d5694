// Record counts of a folded log, for the summaries the admin commands print.
#pragma once

#include <cstdint>
#include <string>

#include "projections/fold.h"

namespace gw::admin {

struct RecordCounts {
  uint64_t profiles = 0;  // live records of each kind
  uint64_t domains = 0;
  uint64_t webhooks = 0;
  uint64_t deleted = 0;  // deleted records of all kinds
};

// kUnavailable if a fold on disk cannot be read.
Result<RecordCounts> count_records(const Fold& fold);

// "live gateway_security_profile=3 domain=2 webhook=1 deleted=1"
std::string describe(const RecordCounts& counts);

}  // namespace gw::admin
