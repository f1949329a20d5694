#include "core/histogram.h"

#include <cmath>
#include <cstdio>
#include <string>

namespace gw {

void LatencyHistogram::observe(double seconds) {
  size_t b = 0;
  while (b < kBounds.size() && seconds > kBounds[b]) ++b;
  buckets_[b].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  const double micros = std::round(seconds * 1e6);
  sum_micros_.fetch_add(micros > 0 ? static_cast<uint64_t>(micros) : 0, std::memory_order_relaxed);
}

void LatencyHistogram::render(std::ostream& out, std::string_view name,
                              std::string_view labels) const {
  const std::string prefix = labels.empty() ? "" : std::string(labels) + ",";
  const std::string braces = labels.empty() ? "" : "{" + std::string(labels) + "}";
  // _count is the +Inf bucket as read here, not count_: observe() adds to a bucket and to the
  // count one after the other, and a scrape must show them equal. (_sum may lag or lead by the
  // observations under way; Prometheus asks no equality of it.)
  uint64_t cumulative = 0;
  for (size_t b = 0; b <= kBounds.size(); ++b) {
    cumulative += buckets_[b].load(std::memory_order_relaxed);
    out << name << "_bucket{" << prefix << "le=\"";
    if (b < kBounds.size()) {
      out << kBounds[b];
    } else {
      out << "+Inf";
    }
    out << "\"} " << cumulative << "\n";
  }
  // The sum to the microsecond, as it is kept: a double printed at the stream's six significant
  // digits stepped by a millisecond past 100 s, and by 10 s past 1e6 s, which flattened a
  // long-running server's rate(_sum) / rate(_count).
  const uint64_t sum = sum_micros_.load(std::memory_order_relaxed);
  char decimals[8];
  std::snprintf(decimals, sizeof decimals, "%06llu",
                static_cast<unsigned long long>(sum % 1000000));
  out << name << "_sum" << braces << " " << sum / 1000000 << "." << decimals << "\n"
      << name << "_count" << braces << " " << cumulative << "\n";
}

}  // namespace gw
