// Reading Prometheus text (gatewayd's /metrics) in tests. Pure functions, thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace gw::testing {

// The value of the sample whose name and labels are exactly `series` in Prometheus text; nullopt
// when absent.
std::optional<double> sample(const std::string& text, std::string_view series);

}  // namespace gw::testing
