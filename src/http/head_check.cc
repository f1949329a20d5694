#include "http/head_check.h"

#include <array>
#include <string>

#include "core/text.h"

namespace gw::http {

namespace {

enum Class : uint8_t {
  kToken = 1,    // tchar (RFC 9110 5.6.2): a method or a header name
  kValue = 2,    // field-vchar, SP or HTAB (RFC 9110 5.5); obs-text included
  kTarget = 4,   // visible ASCII: a request target
  kHostChar = 8  // what a Host value may hold: reg-name, IP literal, port (RFC 3986 3.2)
};

constexpr std::array<uint8_t, 256> make_classes() {
  std::array<uint8_t, 256> c{};
  for (int i = 0x21; i <= 0x7e; ++i) c[i] |= kTarget | kValue;
  for (int i = 0x80; i <= 0xff; ++i) c[i] |= kValue;
  c[' '] |= kValue;
  c['\t'] |= kValue;
  auto add = [&c](std::string_view chars, uint8_t cls) {
    for (char ch : chars) c[static_cast<unsigned char>(ch)] |= cls;
  };
  for (char ch = '0'; ch <= '9'; ++ch) c[static_cast<unsigned char>(ch)] |= kToken | kHostChar;
  for (char ch = 'a'; ch <= 'z'; ++ch) c[static_cast<unsigned char>(ch)] |= kToken | kHostChar;
  for (char ch = 'A'; ch <= 'Z'; ++ch) c[static_cast<unsigned char>(ch)] |= kToken | kHostChar;
  add("!#$%&'*+-.^_`|~", kToken);
  add("-._~!$&'()*+,;=:[]%", kHostChar);
  return c;
}

constexpr std::array<uint8_t, 256> kClasses = make_classes();

bool all_of_class(std::string_view s, uint8_t cls) {
  for (char ch : s) {
    if ((kClasses[static_cast<unsigned char>(ch)] & cls) == 0) return false;
  }
  return true;
}

// The methods Pistache 0.0.5 knows; it answers any other with a plain-text 400.
bool known_method(std::string_view m) {
  for (std::string_view known :
       {"GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH", "TRACE", "CONNECT"}) {
    if (m == known) return true;
  }
  return false;
}

Error bad(std::string detail) { return make_error(Code::kBadRequest, std::move(detail)); }

}  // namespace

size_t head_end(std::string_view bytes, size_t from) {
  const size_t start = from > 3 ? from - 3 : 0;  // the end may straddle what came before
  if (start >= bytes.size()) return std::string_view::npos;
  const size_t at = bytes.find("\r\n\r\n", start);
  return at == std::string_view::npos ? at : at + 4;
}

std::optional<Error> check_head(std::string_view head) {
  const size_t line_end = head.find("\r\n");
  if (line_end == std::string_view::npos) return bad("the request has no request line");
  const std::string_view line = head.substr(0, line_end);
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos) {
    return bad("the request line must be: method, space, target, space, HTTP version");
  }
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (method.empty() || !all_of_class(method, kToken)) {
    return bad("the request line must be: method, space, target, space, HTTP version");
  }
  if (!known_method(method)) return bad("the request method is not one this server knows");
  if (target.empty() || !all_of_class(target, kTarget)) {
    return bad("the request target must be visible ASCII characters");
  }
  const bool http11 = version == "HTTP/1.1";
  if (!http11 && version != "HTTP/1.0") return bad("the HTTP version must be HTTP/1.1 or HTTP/1.0");

  int hosts = 0;
  std::optional<std::string_view> content_length;
  size_t at = line_end + 2;
  while (true) {
    const size_t end = head.find("\r\n", at);
    if (end == std::string_view::npos) return bad("the request's headers do not end");
    if (end == at) break;  // the empty line
    const std::string_view field = head.substr(at, end - at);
    at = end + 2;
    if (field.front() == ' ' || field.front() == '\t') {
      return bad("a header line begins with a blank (obsolete line folding is not accepted)");
    }
    const size_t colon = field.find(':');
    if (colon == std::string_view::npos) return bad("a header line has no colon");
    const std::string_view name = field.substr(0, colon);
    const std::string_view value = trim_blanks(field.substr(colon + 1));
    if (name.empty() || !all_of_class(name, kToken)) {
      return bad("a header name must be a token, with no blank before its colon");
    }
    if (!all_of_class(value, kValue)) {
      return bad("a header value holds a control character (CR, LF, NUL or another)");
    }
    if (ascii_iequals(name, "Host")) {
      if (++hosts > 1) return bad("the Host header is given more than once");
      if (!all_of_class(value, kHostChar)) return bad("the Host header is not a valid host");
    } else if (ascii_iequals(name, "Content-Length")) {
      if (content_length && *content_length != value) {
        return bad("Content-Length is given more than once, with different values");
      }
      content_length = value;
    }
  }
  if (http11 && hosts == 0) return bad("an HTTP/1.1 request must have a Host header");
  return std::nullopt;
}

}  // namespace gw::http
