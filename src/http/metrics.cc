#include "http/metrics.h"

#include <sstream>

#include "commands/records.h"
#include "core/metric_text.h"

namespace gw::http {

const char* route_label(Route route) {
  switch (route) {
    case Route::kHealthz: return "/healthz";
    case Route::kReadyz: return "/readyz";
    case Route::kMetrics: return "/metrics";
    case Route::kOpenapi: return "/openapi.json";
    case Route::kList: return "list";
    case Route::kCreate: return "create";
    case Route::kGet: return "get";
    case Route::kUpdate: return "update";
    case Route::kDelete: return "delete";
    case Route::kVerify: return "verify";
    case Route::kHistory: return "history";
    case Route::kEvents: return "/v1/events";
    case Route::kUnmatched: return "unmatched";
    case Route::kCount: break;
  }
  return "unmatched";
}

void Metrics::record(Route route, int kind_index, int status, double seconds) {
  if (kind_index < 0 || static_cast<size_t>(kind_index) >= kKinds) kind_index = 0;
  PerRoute& r = routes_[static_cast<size_t>(route)][static_cast<size_t>(kind_index)];
  if (status >= 0 && static_cast<size_t>(status) < kStatuses) {
    r.by_status[static_cast<size_t>(status)].fetch_add(1, std::memory_order_relaxed);
  }
  r.latency.observe(seconds);
}

void Metrics::set_sources(std::function<uint64_t()> events_appended,
                          std::function<uint64_t()> last_seq, std::function<uint64_t()> batches) {
  events_appended_ = std::move(events_appended);
  last_seq_ = std::move(last_seq);
  batches_ = std::move(batches);
}

void Metrics::set_timeouts(std::function<uint64_t()> timeouts) { timeouts_ = std::move(timeouts); }

void Metrics::add_section(std::function<std::string()> section) {
  sections_.push_back(std::move(section));
}

std::string Metrics::render() const {
  std::ostringstream out;
  auto labels = [](size_t route, size_t kind) {
    std::string l = std::string("route=\"") + route_label(static_cast<Route>(route)) + "\"";
    if (kind != 0) l += std::string(",kind=\"") + kind_name(static_cast<Kind>(kind)) + "\"";
    return l;
  };
  out << "# HELP gatewayd_http_requests_total HTTP requests by route and status.\n"
      << "# TYPE gatewayd_http_requests_total counter\n";
  const size_t unmatched = static_cast<size_t>(Route::kUnmatched);
  for (size_t route = 0; route < routes_.size(); ++route) {
    for (size_t kind = 0; kind < kKinds; ++kind) {
      const PerRoute& r = routes_[route][kind];
      for (size_t s = 0; s < kStatuses; ++s) {
        uint64_t n = r.by_status[s].load(std::memory_order_relaxed);
        if (route == unmatched && kind == 0 && s == 408 && timeouts_) n += timeouts_();
        if (n != 0) {
          out << "gatewayd_http_requests_total{" << labels(route, kind) << ",status=\"" << s
              << "\"} " << n << "\n";
        }
      }
    }
  }
  out << "# HELP gatewayd_http_request_duration_seconds HTTP request latency.\n"
      << "# TYPE gatewayd_http_request_duration_seconds histogram\n";
  for (size_t route = 0; route < routes_.size(); ++route) {
    for (size_t kind = 0; kind < kKinds; ++kind) {
      const PerRoute& r = routes_[route][kind];
      if (r.latency.count() == 0) continue;
      r.latency.render(out, "gatewayd_http_request_duration_seconds", labels(route, kind));
    }
  }
  auto gauge = [&out](const char* name, const char* type, const char* help,
                      const std::function<uint64_t()>& f) {
    if (f) write_metric(out, name, type, help, f());
  };
  gauge("gatewayd_events_appended_total", "counter", "Events appended since start.",
        events_appended_);
  gauge("gatewayd_event_log_last_seq", "gauge", "Sequence number of the last event in the log.",
        last_seq_);
  gauge("gatewayd_store_batches_total", "counter", "Synced write batches since start.", batches_);
  for (const auto& section : sections_) out << section();
  return out.str();
}

}  // namespace gw::http
