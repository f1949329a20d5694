// Per-tenant token buckets: `rate` requests per second with a burst of `rate`. rate 0 = off.
// Thread-safe; tenants are spread over independent shards so tenants do not contend.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

namespace gw::http {

class RateLimiter {
 public:
  explicit RateLimiter(uint32_t rate) : rate_(rate) {}
  // 0 if the request may proceed, else the whole seconds to wait before retrying (>= 1).
  // `now_ms` is a monotonic clock reading.
  int64_t admit(const std::string& tenant, int64_t now_ms);
  bool enabled() const { return rate_ > 0; }

 private:
  struct Bucket {
    double tokens = 0;
    int64_t last_ms = 0;
  };
  struct Shard {
    std::mutex mu;
    std::unordered_map<std::string, Bucket> buckets;  // GUARDED_BY(mu)
  };
  uint32_t rate_;
  std::array<Shard, 16> shards_;
};

}  // namespace gw::http
