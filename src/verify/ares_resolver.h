// The c-ares resolver: one event-loop thread runs every lookup, each on a c-ares channel (and so a
// UDP socket and port) of its own; lookups submitted from any thread queue up and at most
// `max_in_flight` run at once (each holds a descriptor while it runs).
// Queued lookups start in turns by owner: a free slot goes to the next owner with lookups waiting,
// one lookup each, so an owner waits for at most one slot to free per other owner waiting, however
// many lookups those owners queued. Every query has a bounded timeout and number of tries.
// Thread-safe.
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "core/error.h"
#include "verify/resolver.h"

namespace gw {

struct ResolverConfig {
  std::string servers;  // c-ares CSV ("127.0.0.1:5353,[::1]:53"); empty = the system resolver
  int timeout_ms = 500;
  int tries = 2;
  int max_in_flight = 100;
  // DNS 0x20: each name is asked with the case of its letters chosen at random, and a reply
  // counts only if its question repeats the name letter for letter (see ares_resolver.cc).
  bool mixed_case = true;
};

class AresResolver final : public Resolver {
 public:
  // kValidationFailed if `servers` cannot be parsed, kUnavailable if c-ares cannot start.
  static Result<std::unique_ptr<AresResolver>> create(const ResolverConfig& config);
  // Stops the loop; lookups not yet answered get kCancelled.
  ~AresResolver() override;

  void lookup_cname(std::string name, std::string owner, Callback callback, Wanted wanted) override;
  size_t waiting() const override;

  struct State;

 private:
  explicit AresResolver(std::unique_ptr<State> state);
  void run();
  std::unique_ptr<State> state_;
  std::thread thread_;
};

}  // namespace gw
