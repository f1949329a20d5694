#include "core/text.h"

#include <algorithm>

namespace gw {

std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = ascii_lower(c);
  return out;
}

bool ascii_iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (ascii_lower(a[i]) != ascii_lower(b[i])) return false;
  }
  return true;
}

std::string_view trim_blanks(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

namespace {

// Length of the well-formed UTF-8 sequence at the start of `s` (RFC 3629), or 0.
size_t utf8_sequence(std::string_view s) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  unsigned char b0 = byte(0);
  if (b0 < 0x80) return 1;
  size_t n = b0 >= 0xC2 && b0 <= 0xDF   ? 2
             : b0 >= 0xE0 && b0 <= 0xEF ? 3
             : b0 >= 0xF0 && b0 <= 0xF4 ? 4
                                        : 0;
  if (n == 0 || s.size() < n) return 0;
  for (size_t i = 1; i < n; ++i) {
    if ((byte(i) & 0xC0) != 0x80) return 0;
  }
  unsigned char b1 = byte(1);
  if ((b0 == 0xE0 && b1 < 0xA0) || (b0 == 0xED && b1 > 0x9F) || (b0 == 0xF0 && b1 < 0x90) ||
      (b0 == 0xF4 && b1 > 0x8F))
    return 0;  // overlong, surrogate, above U+10FFFF
  return n;
}

}  // namespace

std::string client_text(std::string_view s, size_t max_bytes) {
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  std::string out;
  out.reserve(std::min(s.size(), max_bytes));
  while (!s.empty()) {
    size_t n = utf8_sequence(s);
    std::string_view piece = n == 0 ? kReplacement : s.substr(0, n);
    if (out.size() + piece.size() > max_bytes) {
      // Make room for "..." by dropping whole characters: continuation bytes, then the lead byte.
      while (!out.empty() && out.size() + 3 > max_bytes) {
        while ((static_cast<unsigned char>(out.back()) & 0xC0) == 0x80) out.pop_back();
        out.pop_back();
      }
      return out + "...";
    }
    out.append(piece);
    s.remove_prefix(n == 0 ? 1 : n);
  }
  return out;
}

}  // namespace gw
