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
#include <chrono>
#include <cstdint>
#include <mutex>
#include <ostream>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

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
  // Requests seen and not yet answered, those waiting to be tried again among them.
  int64_t queue_depth() const { return open_.load(std::memory_order_relaxed); }

 private:
  // A request whose record could not be read, or whose outcome was refused while writes go on
  // (a read of the store that failed): tried again from the start once `due` has come.
  struct Retry {
    uint64_t request_seq;
    std::string domain_id;
    int attempt;  // 1 for the first retry
    std::chrono::steady_clock::time_point due;
  };

  void run();
  // `attempt` is 0 for a request seen in the store, or that of the Retry that tries it again.
  void dispatch(uint64_t request_seq, const std::string& domain_id, int attempt);
  void record(uint64_t request_seq, const std::string& domain_id, int attempt, CheckResult result);
  // Queues attempt `attempt` of a request after a backoff of 1 s doubled per attempt, at most
  // 60 s; the request stays counted in queue_depth.
  void retry_later(uint64_t request_seq, const std::string& domain_id, int attempt);
  // Dispatches the retries that are due (the verifier thread).
  void dispatch_due_retries();

  const Store& store_;
  Service& service_;
  Resolver& resolver_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  uint64_t dispatched_up_to_ = 0;  // verifier thread only
  std::atomic<int64_t> open_{0};
  std::atomic<uint64_t> scans_{0};
  std::atomic<uint64_t> retries_total_{0};
  std::mutex retry_mu_;
  std::vector<Retry> retries_;  // GUARDED_BY(retry_mu_)

  // A Prometheus counter with one `outcome` label of a fixed set; other labels are not counted.
  template <size_t N>
  struct Tally {
    std::array<const char*, N> labels;
    std::array<std::atomic<uint64_t>, N> counts{};
    void add(std::string_view label) {
      for (size_t i = 0; i < N; ++i) {
        if (label == labels[i]) counts[i].fetch_add(1, std::memory_order_relaxed);
      }
    }
    void render(std::ostream& out, const char* name, const char* help) const {
      out << "# HELP " << name << " " << help << "\n# TYPE " << name << " counter\n";
      for (size_t i = 0; i < N; ++i) {
        out << name << "{outcome=\"" << labels[i] << "\"} "
            << counts[i].load(std::memory_order_relaxed) << "\n";
      }
    }
  };
  // DNS lookup results: "verified" (the CNAME is right) and the failure codes.
  Tally<7> lookups_{
      {"verified", "no_cname", "wrong_value", "nxdomain", "servfail", "timeout", "unreachable"}};
  // What was written for a request, as verification_outcome_label has it: a right CNAME can still
  // end in claimed_by_another_team or reserved_for_platform, or in superseded.
  Tally<10> outcomes_{{"verified", "no_cname", "wrong_value", "nxdomain", "servfail", "timeout",
                       "unreachable", "claimed_by_another_team", "reserved_for_platform",
                       "superseded"}};
  LatencyHistogram latency_;
};

}  // namespace gw
