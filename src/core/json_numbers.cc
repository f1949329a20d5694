#include "core/json_numbers.h"

#include <locale.h>
#include <stdlib.h>

#include <charconv>
#include <cmath>
#include <string>

namespace gw::json_detail {

namespace {

// strtod's reading of a number does not depend on the process's locale (a decimal comma).
locale_t c_locale() {
  static const locale_t locale = ::newlocale(LC_ALL_MASK, "C", static_cast<locale_t>(nullptr));
  return locale;
}

}  // namespace

Number read_number(std::string_view text) {
  Number n;
  const char* const begin = text.data();
  const char* const end = begin + text.size();
  if (text.find_first_of(".eE") == std::string_view::npos) {
    // An integer: as RapidJSON reads one, signed if it has a minus, else unsigned, while it fits
    // in 64 bits; a larger one is a double.
    if (!text.empty() && text[0] == '-') {
      if (auto r = std::from_chars(begin, end, n.i); r.ec == std::errc() && r.ptr == end) {
        n.kind = Number::Kind::kInt64;
        return n;
      }
    } else if (auto r = std::from_chars(begin, end, n.u); r.ec == std::errc() && r.ptr == end) {
      n.kind = Number::Kind::kUint64;
      return n;
    }
  }
  // RapidJSON ends the text it hands over with a NUL; a copy makes sure of it.
  const std::string terminated(text);
  char* parsed_end = nullptr;
  const locale_t c = c_locale();
  const double d = c != static_cast<locale_t>(nullptr)
                       ? ::strtod_l(terminated.c_str(), &parsed_end, c)
                       : ::strtod(terminated.c_str(), &parsed_end);  // gatewayd sets no locale
  if (parsed_end != terminated.c_str() + terminated.size() || !std::isfinite(d)) return n;
  // Under the smallest double strtod says ERANGE and gives the nearest value (0 or a subnormal):
  // that value is the one kept.
  n.kind = Number::Kind::kDouble;
  n.d = d;
  return n;
}

}  // namespace gw::json_detail
