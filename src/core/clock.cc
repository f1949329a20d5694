#include "core/clock.h"

#include <openssl/rand.h>

#include <array>
#include <chrono>
#include <cstring>
#include <mutex>
#include <stdexcept>

#include "core/hex.h"

namespace gw {

int64_t SystemClock::now_seconds() const {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int64_t SystemClock::now_millis() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int64_t steady_millis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

namespace {

constexpr char kCrockford[] = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

void fill_random(unsigned char* out, size_t n) {
  if (RAND_bytes(out, static_cast<int>(n)) != 1) throw std::runtime_error("RAND_bytes failed");
}

class SystemIdGenerator final : public IdGenerator {
 public:
  explicit SystemIdGenerator(const Clock& clock) : clock_(clock) {}

  std::string next(const char* prefix) override {
    std::array<unsigned char, 16> raw{};
    {
      std::lock_guard<std::mutex> lock(mu_);
      int64_t ms = clock_.now_millis();
      if (ms > last_ms_) {
        last_ms_ = ms;
        fill_random(last_random_.data(), last_random_.size());
      } else {
        // Same (or earlier) millisecond: keep the time and increment the random part (ids sort).
        for (size_t i = last_random_.size(); i-- > 0;) {
          if (++last_random_[i] != 0) break;
        }
      }
      uint64_t t = static_cast<uint64_t>(last_ms_);
      for (int i = 0; i < 6; ++i) raw[i] = static_cast<unsigned char>(t >> (8 * (5 - i)));
      std::memcpy(raw.data() + 6, last_random_.data(), last_random_.size());
    }
    // 128 bits -> 26 base32 chars (first char carries 3 bits).
    std::string out(prefix);
    out.push_back('_');
    // Read 5 bits at a time from the big-endian 128-bit value; the first char holds 3 bits.
    auto bits = [&raw](int from, int count) {
      unsigned v = 0;
      for (int b = from; b < from + count; ++b) {
        v = (v << 1) | ((raw[static_cast<size_t>(b / 8)] >> (7 - b % 8)) & 1u);
      }
      return v;
    };
    char buf[26];
    buf[0] = kCrockford[bits(0, 3)];
    for (int i = 1; i < 26; ++i) buf[i] = kCrockford[bits(3 + (i - 1) * 5, 5)];
    out.append(buf, sizeof(buf));
    return out;
  }

  std::string random_hex(size_t bytes) override {
    std::string raw(bytes, '\0');
    fill_random(reinterpret_cast<unsigned char*>(raw.data()), bytes);
    return to_hex(raw);
  }

 private:
  const Clock& clock_;
  std::mutex mu_;
  int64_t last_ms_ = 0;                          // GUARDED_BY(mu_)
  std::array<unsigned char, 10> last_random_{};  // GUARDED_BY(mu_)
};

}  // namespace

std::unique_ptr<IdGenerator> make_system_id_generator(const Clock& clock) {
  return std::make_unique<SystemIdGenerator>(clock);
}

}  // namespace gw
