#include "http/chunked.h"

#include <algorithm>

#include "core/hex.h"
#include "http/head_check.h"
#include "http/problem.h"

namespace gw::http {

namespace {

Error bad_framing(std::string detail) { return make_error(Code::kBadRequest, std::move(detail)); }

bool blank(char c) { return c == ' ' || c == '\t'; }

void skip_blanks(std::string_view s, size_t* at) {
  while (*at < s.size() && blank(s[*at])) ++*at;
}

// The length of the token that starts `s` (RFC 9110 5.6.2).
size_t token_length(std::string_view s) {
  size_t n = 0;
  while (n < s.size() && token_char(s[n])) ++n;
  return n;
}

// The length of the quoted string (RFC 9110 5.6.4) that starts `s`, its quotes included, or 0 if
// `s` does not start with a whole one: its characters are a field value's, but for `"` and `\`,
// and a `\` quotes the character after it.
size_t quoted_string_length(std::string_view s) {
  if (s.empty() || s.front() != '"') return 0;
  for (size_t at = 1; at < s.size(); ++at) {
    const char c = s[at];
    if (c == '"') return at + 1;
    if (!field_value_char(c)) return 0;
    if (c == '\\' && (++at == s.size() || !field_value_char(s[at]))) return 0;
  }
  return 0;
}

// The chunk extensions after a chunk's size (RFC 9112 7.1.1): any number of
// `BWS ";" BWS name [ BWS "=" BWS value ]`, the name a token, the value a token or a quoted string.
bool chunk_extensions(std::string_view s) {
  size_t at = 0;
  while (true) {
    skip_blanks(s, &at);
    if (at == s.size()) return at == 0 || !blank(s.back());
    if (s[at] != ';') return false;
    ++at;
    skip_blanks(s, &at);
    const size_t name = token_length(s.substr(at));
    if (name == 0) return false;
    at += name;
    size_t after_name = at;
    skip_blanks(s, &after_name);
    if (after_name < s.size() && s[after_name] == '=') {
      at = after_name + 1;
      skip_blanks(s, &at);
      const std::string_view rest = s.substr(at);
      const size_t value = rest.starts_with('"') ? quoted_string_length(rest) : token_length(rest);
      if (value == 0) return false;
      at += value;
    }
  }
}

}  // namespace

Result<ChunkedBody::Progress> ChunkedBody::read(std::string_view sent) {
  while (true) {
    if (part_ == Part::kData) {
      const uint64_t end = at_ + chunk_bytes_;  // where the CRLF after the data starts
      if (sent.size() < end + 2) return Progress{.bytes = static_cast<size_t>(end + 2)};
      if (sent.substr(end, 2) != "\r\n") {
        return bad_framing(
            "a chunk's data must be followed by CRLF (more bytes came than its size says)");
      }
      framing_bytes_ += 2;
      if (framing_bytes_ > max_framing_bytes_) break;
      at_ = end + 2;
      part_ = Part::kSizeLine;
      continue;
    }
    // A line: a chunk's size, or a trailer field (or the empty line that ends them).
    const size_t lf = sent.find('\n', std::max(at_, scanned_));
    if (lf == std::string_view::npos) {
      if (framing_bytes_ + (sent.size() - at_) > max_framing_bytes_) break;
      scanned_ = sent.size();  // a line that comes a byte at a time is searched once
      return Progress{.bytes = sent.size() + 1};
    }
    if (lf == at_ || sent[lf - 1] != '\r') {
      return bad_framing("the lines of a chunked body must end in CRLF, not a bare LF");
    }
    const std::string_view line = sent.substr(at_, lf - 1 - at_);
    framing_bytes_ += line.size() + 2;
    if (framing_bytes_ > max_framing_bytes_) break;
    at_ = lf + 1;
    if (part_ == Part::kTrailers) {
      if (line.empty()) return Progress{.done = true, .bytes = at_};
      if (!read_field_line(line).ok()) {
        return bad_framing("a trailer field of a chunked body must be a header line, name: value");
      }
      continue;
    }
    // chunk-size [ chunk-ext ] (RFC 9112 7.1): hex digits, then extensions, which are ignored.
    // The line's form is checked before its size.
    size_t digits = 0;
    uint64_t size = 0;
    const uint64_t room = max_data_bytes_ - data_bytes_;
    bool too_large = false;
    for (; digits < line.size() && hex_digit(line[digits]) >= 0; ++digits) {
      too_large = too_large || size > room / 16;  // past the room, and the next digit could wrap
      if (!too_large) size = size * 16 + static_cast<uint64_t>(hex_digit(line[digits]));
    }
    if (digits == 0) return bad_framing("a chunk must start with its size in hex digits, as in 1a");
    if (!chunk_extensions(line.substr(digits))) {
      return bad_framing(
          "a chunk's size must be followed by nothing but chunk extensions, as in ;name=value");
    }
    if (too_large || size > room) return body_too_large_error(max_data_bytes_);
    data_bytes_ += size;
    if (size == 0) {
      part_ = Part::kTrailers;
    } else {
      chunk_bytes_ = size;
      part_ = Part::kData;
    }
  }
  return make_error(Code::kPayloadTooLarge,
                    "the framing of the chunked body (its chunk-size lines, chunk extensions and "
                    "trailer fields) exceeds " +
                        std::to_string(max_framing_bytes_) +
                        " bytes: send the body in fewer, larger chunks");
}

std::string ChunkedBody::decode(std::string_view body) {
  std::string data;
  data.reserve(body.size());
  size_t at = 0;
  while (true) {
    uint64_t size = 0;
    for (; hex_digit(body[at]) >= 0; ++at) {
      size = size * 16 + static_cast<uint64_t>(hex_digit(body[at]));
    }
    at = body.find("\r\n", at) + 2;  // past the extensions, which hold no CR
    if (size == 0) return data;
    data.append(body.substr(at, size));
    at += size + 2;
  }
}

}  // namespace gw::http
