#include "core/deferral.h"

#include <algorithm>
#include <new>
#include <utility>
#include <vector>

namespace gw {

namespace {

struct Deferred {
  void (*fn)(void*) noexcept;
  void* arg;
  bool operator==(const Deferred&) const = default;
};

struct ThreadDeferrals {
  int depth = 0;
  std::vector<Deferred> pending;  // few: one per HTTP thread
};

thread_local ThreadDeferrals deferrals;

}  // namespace

DeferralScope::DeferralScope() { ++deferrals.depth; }

DeferralScope::~DeferralScope() {
  if (--deferrals.depth > 0) return;
  // Taken out first: what runs may start a scope of its own.
  std::vector<Deferred> todo = std::move(deferrals.pending);
  deferrals.pending.clear();
  for (const Deferred& d : todo) d.fn(d.arg);
}

void run_at_scope_end(void (*fn)(void*) noexcept, void* arg) {
  const Deferred d{fn, arg};
  if (deferrals.depth == 0) {
    fn(arg);
    return;
  }
  if (std::find(deferrals.pending.begin(), deferrals.pending.end(), d) != deferrals.pending.end()) {
    return;
  }
  try {
    deferrals.pending.push_back(d);
  } catch (const std::bad_alloc&) {
    fn(arg);  // not put off, but not lost either
  }
}

}  // namespace gw
