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

TEST_CASE("is_ascii finds a byte of 0x80 or more at any place, in a word or in the tail") {
  CHECK(is_ascii(""));
  CHECK(is_ascii(std::string_view("\0\x7f", 2)));
  const std::string plain(37, 'a');  // four 8-byte words and a 5-byte tail
  CHECK(is_ascii(plain));
  for (size_t at = 0; at < plain.size(); ++at) {
    for (unsigned char high : {0x80, 0xc3, 0xff}) {
      std::string s = plain;
      s[at] = static_cast<char>(high);
      INFO("at " << at << ", byte " << static_cast<int>(high));
      CHECK_FALSE(is_ascii(s));
    }
  }
}

TEST_CASE("client_text replaces what is not UTF-8 and cuts at whole characters") {
  CHECK(client_text("plain", 100) == "plain");
  CHECK(client_text("\xC3\xA9t\xC3\xA9 \xF0\x9F\x98\x80", 100) ==
        "\xC3\xA9t\xC3\xA9 \xF0\x9F\x98\x80");
  const std::string fffd = "\xEF\xBF\xBD";
  CHECK(client_text("a\xFF"
                    "b",
                    100) == "a" + fffd + "b");
  CHECK(client_text("\xED\xB0\x80", 100) == fffd + fffd + fffd);             // an encoded surrogate
  CHECK(client_text("\xC0\xAF", 100) == fffd + fffd);                        // overlong '/'
  CHECK(client_text("\xF4\x90\x80\x80", 100) == fffd + fffd + fffd + fffd);  // above U+10FFFF
  CHECK(client_text("\xE2\x82", 100) == fffd + fffd);                        // cut short
  CHECK(client_text(std::string(10, 'x'), 10) == std::string(10, 'x'));
  CHECK(client_text(std::string(11, 'x'), 10) == "xxxxxxx...");
  // "...e" would split the 2-byte e-acute: the whole character goes.
  CHECK(client_text("abcd\xC3\xA9"
                    "fgh",
                    8) == "abcd...");
}

}  // namespace
TEST_CASE("is_plain_text takes well-formed UTF-8 without control characters") {
  CHECK(is_plain_text(""));
  CHECK(is_plain_text("team_a wl-1 ~"));
  CHECK(is_plain_text("\xC3\xA9t\xC3\xA9 \xF0\x9F\x98\x80"));
  CHECK(is_plain_text("\xC2\xA0"));  // U+00A0, the first after the C1 controls
  CHECK_FALSE(is_plain_text(std::string("a\0b", 3)));
  CHECK_FALSE(is_plain_text("a\tb"));
  CHECK_FALSE(is_plain_text("\x1F"));
  CHECK_FALSE(is_plain_text("\x7F"));
  CHECK_FALSE(is_plain_text("\xC2\x80"));  // U+0080
  CHECK_FALSE(is_plain_text("\xC2\x85"));  // U+0085 (NEL)
  CHECK_FALSE(is_plain_text("\xC2\x9F"));  // U+009F
  CHECK_FALSE(is_plain_text("a\xFF"));
  CHECK_FALSE(is_plain_text("\xC3"));              // cut short
  CHECK_FALSE(is_plain_text("\xED\xB0\x80"));      // an encoded surrogate
  CHECK_FALSE(is_plain_text("\xC0\xAF"));          // overlong '/'
  CHECK_FALSE(is_plain_text("\xF4\x90\x80\x80"));  // above U+10FFFF
}

TEST_CASE("http_date writes the IMF-fixdate of RFC 9110") {
  CHECK(http_date(0) == "Thu, 01 Jan 1970 00:00:00 GMT");
  CHECK(http_date(784111777) == "Sun, 06 Nov 1994 08:49:37 GMT");  // RFC 9110's own example
  CHECK(http_date(951782400) == "Tue, 29 Feb 2000 00:00:00 GMT");
  CHECK(http_date(1795880000) == "Sat, 28 Nov 2026 15:33:20 GMT");
  CHECK(http_date(4102444799) == "Thu, 31 Dec 2099 23:59:59 GMT");
}

}  // namespace gw
