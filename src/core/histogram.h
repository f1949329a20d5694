// A Prometheus latency histogram with fixed bucket bounds (0.5 ms to 2.5 s). observe() is a few
// relaxed atomic increments: no lock, no allocation. Thread-safe.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <ostream>
#include <string_view>

namespace gw {

class LatencyHistogram {
 public:
  static constexpr std::array<double, 12> kBounds{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                                  0.05,   0.1,   0.25,   0.5,   1.0,  2.5};
  void observe(double seconds);
  uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  // Writes the `<name>_bucket`, `<name>_sum` and `<name>_count` samples; `labels` is empty or a
  // label list without braces (`route="get"`).
  void render(std::ostream& out, std::string_view name, std::string_view labels) const;

 private:
  std::array<std::atomic<uint64_t>, kBounds.size() + 1> buckets_{};  // the last one is +Inf
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> sum_micros_{0};
};

}  // namespace gw
