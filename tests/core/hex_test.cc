#include <doctest/doctest.h>

#include <string>
#include <thread>
#include <vector>

#include "core/hex.h"

namespace gw {
namespace {

TEST_CASE("sha256 gives the FIPS 180-2 digests, on every thread and call after call") {
  // The reused per-thread context must start clean each time: the same input twice, and a short
  // input after a long one, give the standard digests.
  const std::string million(1000000, 'a');
  auto check = [&] {
    CHECK(sha256_hex("abc") ==
          "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CHECK(sha256_hex(million) ==
          "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    CHECK(sha256_hex("") ==
          "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    CHECK(sha256_hex("abc") ==
          "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  };
  check();
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) threads.emplace_back(check);
  for (auto& t : threads) t.join();
}

TEST_CASE("sha256 of two parts is the digest of the two joined") {
  CHECK(to_hex(sha256("a", "bc")) ==
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(to_hex(sha256("", "abc")) == sha256_hex("abc"));
  CHECK(to_hex(sha256("abc", "")) == sha256_hex("abc"));
  const std::string first(100, 'x'), second(1000, 'y');
  CHECK(sha256(first, second) == sha256(first + second));
}

TEST_CASE("constant_time_equal compares whole byte strings") {
  CHECK(constant_time_equal("", ""));
  CHECK(constant_time_equal(std::string("a\0b", 3), std::string("a\0b", 3)));
  CHECK_FALSE(constant_time_equal(std::string("a\0b", 3), std::string("a\0c", 3)));
  CHECK_FALSE(constant_time_equal("abc", "abcd"));
}

TEST_CASE("from_hex reads an even number of hex digits of either case, and nothing else") {
  CHECK(from_hex("") == std::string());
  CHECK(from_hex("00ff7F80") == std::string("\x00\xff\x7f\x80", 4));
  CHECK(from_hex(to_hex(sha256("abc"))) == sha256("abc"));
  CHECK(from_hex("ABCDEF") == from_hex("abcdef"));
  CHECK_FALSE(from_hex("abc").has_value());  // odd
  CHECK_FALSE(from_hex("0g").has_value());
  CHECK_FALSE(from_hex("g0").has_value());
  CHECK_FALSE(from_hex(" 0").has_value());
  CHECK_FALSE(from_hex("0x12").has_value());
  CHECK(hex_digit('9') == 9);
  CHECK(hex_digit('a') == 10);
  CHECK(hex_digit('F') == 15);
  CHECK(hex_digit('G') == -1);
  CHECK(hex_digit('/') == -1);
  CHECK(hex_digit(':') == -1);
  CHECK(hex_digit('\0') == -1);
}

}  // namespace
}  // namespace gw
