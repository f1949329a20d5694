#include "http/rate_limiter.h"

#include <algorithm>
#include <cmath>
#include <functional>

namespace gw::http {

int64_t RateLimiter::admit(const std::string& tenant, int64_t now_ms) {
  if (rate_ == 0) return 0;
  Shard& shard = shards_[std::hash<std::string>{}(tenant) % shards_.size()];
  std::lock_guard<std::mutex> lock(shard.mu);
  auto [it, fresh] = shard.buckets.try_emplace(tenant);
  Bucket& b = it->second;
  if (fresh) {
    b.tokens = rate_;
    b.last_ms = now_ms;
  }
  b.tokens = std::min<double>(rate_, b.tokens + (now_ms - b.last_ms) * rate_ / 1000.0);
  b.last_ms = now_ms;
  if (b.tokens >= 1.0) {
    b.tokens -= 1.0;
    return 0;
  }
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil((1.0 - b.tokens) / rate_)));
}

}  // namespace gw::http
