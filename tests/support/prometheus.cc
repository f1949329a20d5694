#include "support/prometheus.h"

#include <cstdlib>

namespace gw::testing {

std::optional<double> sample(const std::string& text, std::string_view series) {
  size_t at = 0;
  while (at < text.size()) {
    size_t nl = text.find('\n', at);
    std::string_view line(text.data() + at, (nl == std::string::npos ? text.size() : nl) - at);
    at = nl == std::string::npos ? text.size() : nl + 1;
    if (line.size() > series.size() && line.starts_with(series) && line[series.size()] == ' ') {
      return std::strtod(std::string(line.substr(series.size() + 1)).c_str(), nullptr);
    }
  }
  return std::nullopt;
}

}  // namespace gw::testing
