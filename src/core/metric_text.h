// Prometheus text exposition for /metrics sections.
#pragma once

#include <cstdint>
#include <ostream>
#include <string_view>

namespace gw {

// One unlabelled sample with its HELP and TYPE lines; `type` is "counter" or "gauge".
void write_metric(std::ostream& out, std::string_view name, std::string_view type,
                  std::string_view help, uint64_t value);

}  // namespace gw
