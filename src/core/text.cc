#include "core/text.h"

#include <rapidjson/encodings.h>
#include <rapidjson/memorystream.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>

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

bool is_ascii(std::string_view s) {
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t word;
    std::memcpy(&word, s.data() + i, 8);
    if ((word & 0x8080808080808080ULL) != 0) return false;
  }
  for (; i < s.size(); ++i) {
    if (static_cast<unsigned char>(s[i]) >= 0x80) return false;
  }
  return true;
}

std::string_view trim_blanks(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

namespace {

// Length of the well-formed UTF-8 sequence at the start of `s`, or 0: RapidJSON's validating
// decoder (overlong forms, surrogates and code points above U+10FFFF are not well-formed).
size_t utf8_sequence(std::string_view s) {
  struct Discard {
    void Put(char) {}
  } sink;
  rapidjson::MemoryStream in(s.data(), s.size());
  return rapidjson::UTF8<>::Validate(in, sink) ? in.Tell() : 0;
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

bool is_plain_text(std::string_view s) {
  while (!s.empty()) {
    const auto lead = static_cast<unsigned char>(s[0]);
    if (lead < 0x80) {
      if (lead < 0x20 || lead == 0x7F) return false;
      s.remove_prefix(1);
      continue;
    }
    const size_t n = utf8_sequence(s);
    // U+0080-U+009F, the C1 controls, are 0xC2 0x80 to 0xC2 0x9F.
    if (n == 0 || (lead == 0xC2 && static_cast<unsigned char>(s[1]) < 0xA0)) return false;
    s.remove_prefix(n);
  }
  return true;
}

std::string http_date(int64_t unix_seconds) {
  static constexpr char kDays[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
  static constexpr char kMonths[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                          "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  const auto t = static_cast<time_t>(unix_seconds);
  struct tm utc {};
  if (gmtime_r(&t, &utc) == nullptr) return {};
  char out[40];
  const int n = std::snprintf(out, sizeof out, "%s, %02d %s %04d %02d:%02d:%02d GMT",
                              kDays[utc.tm_wday], utc.tm_mday, kMonths[utc.tm_mon],
                              utc.tm_year + 1900, utc.tm_hour, utc.tm_min, utc.tm_sec);
  return n > 0 ? std::string(out, static_cast<size_t>(n)) : std::string();
}

}  // namespace gw
