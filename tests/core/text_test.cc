#include <doctest/doctest.h>

#include "core/text.h"

namespace gw {
namespace {

TEST_CASE("ASCII helpers leave non-ASCII bytes alone and trim only spaces and tabs") {
  CHECK(ascii_lower("Application/JSON; Charset=UTF-8") == "application/json; charset=utf-8");
  CHECK(ascii_lower("\xC3\x89t\xC3\xA9") == "\xC3\x89t\xC3\xA9");
  CHECK(ascii_iequals("Bearer ", "bearer "));
  CHECK_FALSE(ascii_iequals("bearer", "bearer "));
  CHECK_FALSE(ascii_iequals("\xC3\x89", "\xC3\xA9"));
  CHECK(trim_blanks(" \t a b \t ") == "a b");
  CHECK(trim_blanks("\na\n") == "\na\n");
  CHECK(trim_blanks(" \t ").empty());
}

}  // namespace
}  // namespace gw
