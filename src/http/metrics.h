// Prometheus metrics of the HTTP layer and the store. Counters are relaxed atomics in fixed
// arrays: recording never takes a lock or allocates. Thread-safe.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/histogram.h"

namespace gw::http {

// Routes as metric labels.
enum class Route : uint8_t {
  kHealthz, kReadyz, kMetrics, kOpenapi, kList, kCreate, kGet, kUpdate, kDelete, kVerify, kHistory,
  kEvents, kUnmatched, kCount
};
const char* route_label(Route route);

class Metrics {
 public:
  void record(Route route, int kind_index, int status, double seconds);
  // Gauges and counters owned elsewhere, read at render time.
  void set_sources(std::function<uint64_t()> events_appended, std::function<uint64_t()> last_seq,
                   std::function<uint64_t()> batches);
  // The 408s written outside the Api (the idle timeout's: transport.h timeout_answers), read at
  // render time and counted under route `unmatched` (set up before serving).
  void set_timeouts(std::function<uint64_t()> timeouts);
  // Appends another component's Prometheus text to every render (set up before serving).
  void add_section(std::function<std::string()> section);
  std::string render() const;

 private:
  static constexpr size_t kKinds = 4;  // 0 = none, then Kind values
  static constexpr size_t kStatuses = 600;
  struct PerRoute {
    std::array<std::atomic<uint64_t>, kStatuses> by_status{};
    LatencyHistogram latency;
  };
  std::array<std::array<PerRoute, kKinds>, static_cast<size_t>(Route::kCount)> routes_{};
  std::function<uint64_t()> events_appended_, last_seq_, batches_, timeouts_;
  std::vector<std::function<std::string()>> sections_;
};

}  // namespace gw::http
