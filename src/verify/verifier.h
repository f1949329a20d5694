// The background verifier: answers every open domain verification request with exactly one
// outcome event. Open requests are a projection of the log (`q` keys, written in the same batch as
// each domain.verification_requested event and removed in the same batch as its outcome), so the
// queue is durable: requests accepted before a crash or restart are picked up again at start.
// One thread scans for new requests when a write that opened one is durable
// (Service::verification_requests); lookups run concurrently in the Resolver; outcomes are decided
// and recorded on the writer thread (Service::record_outcome).
// Thread-safe; start() once, stop() before the Writer stops.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "core/histogram.h"
#include "service/service.h"
#include "store/store.h"
#include "verify/resolver.h"

namespace gw {

class Verifier {
 public:
  Verifier(const Store& store, Service& service, Resolver& resolver);
  ~Verifier();

  void start();
  // Stops scanning; lookups still running are answered or cancelled by the Resolver; cancelled
  // requests stay open and are checked again after a restart.
  void stop();

  // Prometheus text: queue depth, lookups by outcome, lookup latency.
  std::string render_metrics() const;
  // Requests seen and not yet answered.
  int64_t queue_depth() const { return open_.load(std::memory_order_relaxed); }

 private:
  void run();
  void dispatch(uint64_t request_seq, const std::string& domain_id);
  void record(uint64_t request_seq, const std::string& domain_id, CheckResult result);

  const Store& store_;
  Service& service_;
  Resolver& resolver_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  uint64_t dispatched_up_to_ = 0;  // verifier thread only
  std::atomic<int64_t> open_{0};
  std::atomic<uint64_t> scans_{0};

  // DNS lookup results, as metric labels: "verified" (the CNAME is right) and the failure codes.
  static constexpr std::array<const char*, 7> kLookupResults{
      "verified", "no_cname", "wrong_value", "nxdomain", "servfail", "timeout", "unreachable"};
  std::array<std::atomic<uint64_t>, kLookupResults.size()> lookups_{};
  // What was written for a request, as verification_outcome_label has it: a right CNAME can still
  // end in claimed_by_another_team, or in superseded.
  static constexpr std::array<const char*, 9> kOutcomes{
      "verified",  "no_cname", "wrong_value", "nxdomain",
      "servfail",  "timeout",  "unreachable", "claimed_by_another_team",
      "superseded"};
  std::array<std::atomic<uint64_t>, kOutcomes.size()> outcomes_{};
  LatencyHistogram latency_;
};

}  // namespace gw
