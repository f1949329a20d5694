#include "store/crc32c.h"

#include <dlfcn.h>
#include <nmmintrin.h>

#include <cstring>

namespace gw {
namespace {

bool cpu_has_sse42() {
  static const bool has = __builtin_cpu_supports("sse4.2");
  return has;
}

// Eight bytes per instruction; the tail a byte at a time. With the pre- and post-inversion
// RocksDB's Extend applies, so a checksum may be continued across calls.
__attribute__((target("sse4.2"))) uint32_t extend_sse42(uint32_t crc, const char* data, size_t n) {
  const auto* p = reinterpret_cast<const unsigned char*>(data);
  uint64_t c = crc ^ 0xffffffffu;
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    c = _mm_crc32_u64(c, word);
  }
  auto c32 = static_cast<uint32_t>(c);
  for (; n > 0; ++p, --n) c32 = _mm_crc32_u8(c32, *p);
  return c32 ^ 0xffffffffu;
}

}  // namespace

Crc32cExtend rocksdb_crc32c_extend() {
  static const auto library = reinterpret_cast<Crc32cExtend>(dlsym(RTLD_NEXT, kCrc32cExtendSymbol));
  return library;
}

const char* crc32c_implementation() {
  // Bound to this program's definition, which is not librocksdb's (the one past it).
  const void* bound = dlsym(RTLD_DEFAULT, kCrc32cExtendSymbol);
  const void* library = reinterpret_cast<const void*>(rocksdb_crc32c_extend());
  if (bound == nullptr || bound == library) return "rocksdb (not replaced)";
  return cpu_has_sse42() ? "sse4.2" : "rocksdb";
}

}  // namespace gw

namespace rocksdb::crc32c {

uint32_t Extend(uint32_t crc, const char* data, size_t n) {
  if (gw::cpu_has_sse42()) return gw::extend_sse42(crc, data, n);
  return gw::rocksdb_crc32c_extend()(crc, data, n);
}

}  // namespace rocksdb::crc32c
