// The 8-byte big-endian numbers of keys and values (store/store.h): they sort as numbers, and a
// value cut short reads only its own bytes.
#include <doctest/doctest.h>

#include <cstring>
#include <memory>
#include <string_view>

#include "store/store.h"

namespace gw {
namespace {

TEST_CASE("encode_u64 and decode_u64 round-trip, and their bytes sort as the numbers do") {
  for (uint64_t v : {uint64_t{0}, uint64_t{1}, uint64_t{255}, uint64_t{256},
                     uint64_t{0x0102030405060708}, ~uint64_t{0}}) {
    CAPTURE(v);
    CHECK(encode_u64(v).size() == 8);
    CHECK(decode_u64(encode_u64(v)) == v);
  }
  CHECK(encode_u64(255) < encode_u64(256));
  CHECK(encode_u64(0x00ffffffffffffff) < encode_u64(0x0100000000000000));
}

TEST_CASE("decode_u64 of a value shorter than 8 bytes reads those bytes only") {
  // A damaged store could hand back a short value where a number was written; reading 8 bytes
  // from it read past its end. The bytes sit alone on the heap, so a read past them is caught
  // by AddressSanitizer, and the result would hold whatever followed them.
  const char bytes[] = {'\x01', '\x02', '\x03'};
  auto alone = std::make_unique<char[]>(sizeof bytes);
  std::memcpy(alone.get(), bytes, sizeof bytes);
  CHECK(decode_u64(std::string_view(alone.get(), sizeof bytes)) == 0x010203);
  CHECK(decode_u64(std::string_view()) == 0);
}

}  // namespace
}  // namespace gw
