// Time and randomness are injected so decide/evolve and tests stay exact. The system
// implementations are thread-safe; test doubles are used from one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace gw {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t now_seconds() const = 0;  // Unix seconds
  virtual int64_t now_millis() const = 0;   // Unix milliseconds
};

class SystemClock final : public Clock {
 public:
  int64_t now_seconds() const override;
  int64_t now_millis() const override;
};

// Milliseconds of the monotonic clock (std::chrono::steady_clock): for intervals and deadlines,
// never a date.
int64_t steady_millis();

// Makes record and event ids: `<prefix>_<26 chars>`, Crockford base32 of a 48-bit millisecond time
// and 80 random bits (OpenSSL RAND_bytes). Ids sort by creation time across calls of one
// generator (monotonic within a millisecond). Thread-safe.
class IdGenerator {
 public:
  virtual ~IdGenerator() = default;
  virtual std::string next(const char* prefix) = 0;
  // `bytes` unguessable random bytes, hex-encoded (2*bytes chars).
  virtual std::string random_hex(size_t bytes) = 0;
};

std::unique_ptr<IdGenerator> make_system_id_generator(const Clock& clock);

}  // namespace gw
