#include "core/json_numbers.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace gw {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Numbers of at most this many digits (and no leading zeros in a fraction of 0.) are read by the
// parser's fast path or safely; longer ones are rewritten.
constexpr size_t kSafeDigits = 17;
// RapidJSON keeps 780 significant digits and drops the rest (its own limit, and more than a double
// needs to round right); it moved the decimal position by the dropped count, which wrapped.
constexpr size_t kMaxDigits = 780;

// Whether d1.d2...dn * 10^308 is below the midpoint between the largest double
// (1.7976931348623157e308) and 2^1024, so that it rounds to a finite double. The midpoint's first
// 100 digits decide; a number that matches all of them counts as not below.
bool below_overflow(std::string_view digits) {
  constexpr std::string_view kMidpoint =
      "17976931348623158079372897140530341507993413271003"
      "78269361737789804449682927647509466490179775872070";
  const size_t n = std::min(digits.size(), kMidpoint.size());
  const int order = digits.substr(0, n).compare(kMidpoint.substr(0, n));
  return order < 0 || (order == 0 && digits.size() < kMidpoint.size());
}

// The rewrite of `number`, one number token of the body, if it needs one (see the header), else "".
std::string rewritten(std::string_view number) {
  size_t i = 0;
  const bool negative = number[i] == '-';
  if (negative) ++i;
  const size_t int_start = i;
  while (i < number.size() && is_digit(number[i])) ++i;
  const std::string_view int_digits = number.substr(int_start, i - int_start);
  if (int_digits.empty() || (int_digits.size() > 1 && int_digits[0] == '0')) return "";
  std::string_view frac;
  if (i < number.size() && number[i] == '.') {
    const size_t frac_start = ++i;
    while (i < number.size() && is_digit(number[i])) ++i;
    frac = number.substr(frac_start, i - frac_start);
    if (frac.empty()) return "";
  }
  int64_t exponent = 0;
  bool has_exponent = false;
  if (i < number.size() && (number[i] == 'e' || number[i] == 'E')) {
    has_exponent = true;
    ++i;
    bool exp_negative = false;
    if (i < number.size() && (number[i] == '+' || number[i] == '-'))
      exp_negative = number[i++] == '-';
    const size_t exp_start = i;
    while (i < number.size() && is_digit(number[i])) {
      // Far beyond a double's range either way; the parser says so or gives 0 as it would.
      if (exponent < 100000000) exponent = exponent * 10 + (number[i] - '0');
      ++i;
    }
    if (i == exp_start) return "";
    if (exp_negative) exponent = -exponent;
  }
  if (i != number.size()) return "";
  if (frac.empty() && !has_exponent) return "";  // an integer: read digit by digit, or too big
  // The value is digits * 10^scale.
  std::string digits = std::string(int_digits) + std::string(frac);
  int64_t scale = exponent - static_cast<int64_t>(frac.size());
  const size_t first = digits.find_first_not_of('0');
  if (first == std::string::npos) return negative ? "-0.0" : "0.0";  // a double stays a double
  const bool leading_zero_fraction = int_digits == "0" && !frac.empty() && frac[0] == '0';
  const bool many_digits = digits.size() > kSafeDigits;
  digits.erase(0, first);
  if (digits.size() > kMaxDigits) {
    scale += static_cast<int64_t>(digits.size() - kMaxDigits);
    digits.resize(kMaxDigits);
  }
  const size_t last = digits.find_last_not_of('0');
  scale += static_cast<int64_t>(digits.size() - 1 - last);
  digits.resize(last + 1);
  // The value is d1.d2...dn * 10^power, d1 not 0.
  const int64_t power = scale + static_cast<int64_t>(digits.size()) - 1;
  // Under 10^-324 rounds to zero (the smallest double is about 4.9e-324); the parser's own test
  // for that counts digits and let long numbers through to the out-of-bounds read.
  if (power <= -325) return negative ? "-0.0" : "0.0";
  // From the midpoint between the largest double and 2^1024 up, a number rounds to infinity:
  // written as 1e309, the parser's "number too big" (400 invalid_json). (A long number there
  // reached an assertion of the parser's, `!Sign()` in NextPositiveDouble.)
  if (power >= 309 || (power == 308 && !below_overflow(digits)))
    return negative ? "-1e309" : "1e309";
  // A short number well inside the range is read safely as it is.
  if (!leading_zero_fraction && !many_digits && power > -300) return "";
  std::string out = negative ? "-" : "";
  out += digits[0];
  if (digits.size() > 1) out += "." + digits.substr(1);
  out += "e" + std::to_string(power);
  return out;
}

// The position after the string whose text starts at `from` (after its opening quote): after the
// first quote not escaped by a backslash, or json.size() + 1 if there is none. Found with memchr,
// as a stored event is mostly strings (every record read back from the store is scanned).
size_t string_end(std::string_view json, size_t from) {
  const char* const begin = json.data();
  const char* const end = begin + json.size();
  for (const char* p = begin + from; p < end;) {
    const auto* quote = static_cast<const char*>(std::memchr(p, '"', static_cast<size_t>(end - p)));
    if (quote == nullptr) break;
    // Escaped if an odd number of backslashes stands right before it, inside the string.
    const char* b = quote;
    while (b > begin + from && b[-1] == '\\') --b;
    if ((quote - b) % 2 == 0) return static_cast<size_t>(quote - begin) + 1;
    p = quote + 1;
  }
  return json.size() + 1;
}

// Where the JSON number (RFC 8259: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?) that starts at
// json[begin] ends, within json[begin, run_end); `begin` if none starts there.
size_t number_prefix_end(std::string_view json, size_t begin, size_t run_end) {
  size_t at = begin;
  auto digits = [&] {
    const size_t from = at;
    while (at < run_end && is_digit(json[at])) ++at;
    return at - from;
  };
  if (at < run_end && json[at] == '-') ++at;
  if (at < run_end && json[at] == '0') {
    ++at;
  } else if (digits() == 0) {
    return begin;
  }
  if (at + 1 < run_end && json[at] == '.' && is_digit(json[at + 1])) {
    ++at;
    digits();
  }
  if (at < run_end && (json[at] == 'e' || json[at] == 'E')) {
    size_t exponent = at + 1;
    if (exponent < run_end && (json[exponent] == '+' || json[exponent] == '-')) ++exponent;
    if (exponent < run_end && is_digit(json[exponent])) {
      at = exponent;
      digits();
    }
  }
  return at;
}

}  // namespace

std::optional<std::string> rewrite_risky_numbers(std::string_view json) {
  std::optional<std::string> out;
  size_t copied = 0;  // json[0, copied) is in *out already
  for (size_t i = 0; i < json.size();) {
    const char c = json[i];
    if (c == '"') {
      i = string_end(json, i + 1);
      continue;
    }
    if (c != '-' && !is_digit(c)) {
      ++i;
      continue;
    }
    size_t end = i + 1;
    while (end < json.size() && (is_digit(json[end]) || json[end] == '.' || json[end] == 'e' ||
                                 json[end] == 'E' || json[end] == '+' || json[end] == '-')) {
      ++end;
    }
    // The parser reads the number at the front of the run and works out its value before it finds
    // that what follows (`-`, `+`, `.`, a second number) makes the text invalid: that number is
    // the one rewritten. (The whole run was; a run that was no single number was left as it was,
    // and `[0.<400 zeros>1-]` crashed gatewayd as it was refused.)
    const size_t number_end = number_prefix_end(json, i, end);
    const std::string_view number = json.substr(i, number_end - i);
    const std::string replacement = number.empty() ? "" : rewritten(number);
    if (!replacement.empty() && replacement != number) {
      if (!out) out.emplace();
      out->append(json.substr(copied, i - copied));
      out->append(replacement);
      copied = number_end;
    }
    i = end;
  }
  if (out) out->append(json.substr(copied));
  return out;
}

}  // namespace gw
