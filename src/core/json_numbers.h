// RapidJSON 1.1.0 (Debian 12) reads out of bounds in its full-precision number path: it trims a
// number's leading zeros, trailing zeros and digits past the 780th by moving an unsigned decimal
// position that can wrap, then indexes its table of cached powers of ten with it. One number in one
// request of any tenant crashed gatewayd (a segmentation fault): 0.<400 zeros>1, or 9.<800 zeros>1.
// A zero significand with an exponent (0e100) passed zero to clz there (0e100 read back as
// -1.997919072202235e146). Request bodies are parsed at full precision (numbers kept in
// waf_overrides read back as the nearest double), so such numbers are first rewritten into the same
// value in a form that path reads safely.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <rapidjson/document.h>

namespace gw {

// `json` with each number that has a fraction or an exponent and either more than 17 digits, a
// fraction with leading zeros after "0.", only zeros, or a power of ten under -300 or over 308,
// written as the same value with one integer digit and no leading or trailing zeros (0.00125 ->
// 1.25e-3, 12.50000000000000000001 -> 1.250000000000000000001e1; digits past the 780th dropped,
// as the parser itself does); a zero, or a value under 10^-324, as 0.0 or -0.0; a value that
// rounds to infinity as 1e309, which the parser refuses as too big. nullopt when no number needs
// it. Integers, strings and text that is no JSON number are left as they are; of a run of number
// characters that is no single number (invalid JSON, such as `0.0001-`), the number at its front
// is the one rewritten, as the parser works out that one before it refuses the text.
std::optional<std::string> rewrite_risky_numbers(std::string_view json);

// Parses `json` into `doc` (RapidJSON's Parse with `kFlags`) at full precision, so that every
// number reads as the nearest double: a number gatewayd stored reads back as the double it wrote,
// and a record or event read again is written out as it was. Risky numbers are rewritten first
// (above). RapidJSON's default reading is off by up to a few units in the last place: the stored
// 0.30000000000000007 read back as 0.3000000000000001, so a replay of the log, an `as_of` read
// and a delete's event gave another value than the one acknowledged.
template <unsigned kFlags = rapidjson::kParseDefaultFlags, typename Document>
void parse_exact(Document& doc, std::string_view json) {
  const std::optional<std::string> rewritten = rewrite_risky_numbers(json);
  const std::string_view text = rewritten ? std::string_view(*rewritten) : json;
  doc.template Parse<kFlags | rapidjson::kParseFullPrecisionFlag>(text.data(), text.size());
}

}  // namespace gw
