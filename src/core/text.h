// Small ASCII text helpers shared by the parsers (HTTP headers, field rules, WAF directives,
// DNS names). Locale-independent; pure and thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace gw {

// `c` lower-cased if it is an ASCII capital letter, else `c`.
constexpr char ascii_lower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}
std::string ascii_lower(std::string_view s);
// Whether `c` is an ASCII digit, an ASCII letter.
constexpr bool ascii_digit(char c) { return c >= '0' && c <= '9'; }
constexpr bool ascii_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
// Equal ignoring ASCII letter case.
bool ascii_iequals(std::string_view a, std::string_view b);
// True if every byte of `s` is under 0x80 (so `s` is valid UTF-8). Eight bytes at a time.
bool is_ascii(std::string_view s);
// `s` without leading and trailing spaces and tabs.
std::string_view trim_blanks(std::string_view s);
// `s` made safe to echo to a client: each byte that does not start a well-formed UTF-8 sequence
// (overlong forms, surrogates and code points above U+10FFFF included) becomes U+FFFD, and the
// result is cut to at most `max_bytes` bytes of whole characters, "..." marking a cut.
std::string client_text(std::string_view s, size_t max_bytes);
// Whether `s` is well-formed UTF-8 without control characters (U+0000-U+001F, U+007F-U+009F).
bool is_plain_text(std::string_view s);
// `unix_seconds` as an HTTP date (RFC 9110 5.6.7, IMF-fixdate): "Sun, 06 Nov 1994 08:49:37 GMT".
std::string http_date(int64_t unix_seconds);

}  // namespace gw
