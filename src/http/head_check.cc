#include "http/head_check.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <string>

#include "core/hex.h"
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

bool is_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// A Host value (RFC 9112 3.2, RFC 3986 3.2.2 and 3.2.3): empty, or uri-host [ ":" port ], where
// uri-host is an IP literal in brackets (an IPv6 address) or a reg-name (IPv4 addresses
// included) of unreserved characters, sub-delims and %XX escapes, and port is digits. The
// characters alone let `a:b`, `[::1`, `a:80:80` and `a%zz` pass (helper 38).
bool valid_host(std::string_view host) {
  std::string_view name = host;
  std::string_view port;
  if (host.starts_with('[')) {
    const size_t close = host.find(']');
    if (close == std::string_view::npos) return false;
    const std::string address(host.substr(1, close - 1));
    in6_addr parsed{};
    if (::inet_pton(AF_INET6, address.c_str(), &parsed) != 1) return false;
    name = {};
    const std::string_view rest = host.substr(close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':') return false;
      port = rest.substr(1);
    }
  } else if (const size_t colon = host.find(':'); colon != std::string_view::npos) {
    name = host.substr(0, colon);
    port = host.substr(colon + 1);
  }
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (c == '%') {
      if (i + 2 >= name.size() || !is_hex(name[i + 1]) || !is_hex(name[i + 2])) return false;
      i += 2;
    } else if (c == ':' || c == '[' || c == ']' ||
               (kClasses[static_cast<unsigned char>(c)] & kHostChar) == 0) {
      return false;
    }
  }
  return std::all_of(port.begin(), port.end(), ascii_digit);
}

bool all_of_class(std::string_view s, uint8_t cls) {
  for (char ch : s) {
    if ((kClasses[static_cast<unsigned char>(ch)] & cls) == 0) return false;
  }
  return true;
}

// The methods of RFC 9110 and PATCH (RFC 5789); any other is refused.
bool known_method(std::string_view m) {
  for (std::string_view known :
       {"GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH", "TRACE", "CONNECT"}) {
    if (m == known) return true;
  }
  return false;
}

Error bad(std::string detail) { return make_error(Code::kBadRequest, std::move(detail)); }

// A request target in one of the forms of RFC 9112 3.2: a path from '/' with its query (origin
// form), a URI with its scheme (absolute form), a host and port for CONNECT (authority form), or
// '*' for OPTIONS (asterisk form); no fragment (RFC 9112 3.2 has none), and no user information
// in an http or https URI (RFC 9110 4.2.4 calls it an error). Other targets went to the router
// and were 404 (`healthz`, `?a`), and `http://user@host/healthz` was served (helper 99).
std::optional<Error> target_form_problem(std::string_view method, std::string_view target) {
  if (target.find('#') != std::string_view::npos) {
    return bad("the request target must not have a fragment ('#')");
  }
  if (method == "CONNECT") {
    if (target.find(':') != std::string_view::npos && valid_host(target)) return std::nullopt;
    return bad("the request target of CONNECT must be a host and port");
  }
  if (target.front() == '/') return std::nullopt;
  if (target == "*") {
    if (method == "OPTIONS") return std::nullopt;
    return bad("the request target '*' is for OPTIONS only");
  }
  // scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) (RFC 3986 3.1)
  const size_t colon = target.find(':');
  const std::string_view scheme = target.substr(0, colon);
  const bool absolute =
      colon != std::string_view::npos && colon > 0 && ascii_alpha(scheme.front()) &&
      std::all_of(scheme.begin(), scheme.end(), [](char c) {
        return ascii_alpha(c) || ascii_digit(c) || c == '+' || c == '-' || c == '.';
      });
  if (!absolute) {
    return bad("the request target must be a path from '/', an absolute URI or '*' for OPTIONS");
  }
  if (!ascii_iequals(scheme, "http") && !ascii_iequals(scheme, "https")) return std::nullopt;
  // An http(s) URI has an authority, whose host must not be empty (RFC 9110 4.2.1: a recipient
  // MUST reject one that has none as invalid); it is the Host header's syntax. `http:///healthz`
  // and `http://h:abc/healthz` were served.
  if (!target.substr(colon + 1).starts_with("//")) {
    return bad("the request target, an http or https URI, must have '//' and a host");
  }
  const std::string_view rest = target.substr(colon + 3);
  const std::string_view authority = rest.substr(0, rest.find_first_of("/?"));
  if (authority.find('@') != std::string_view::npos) {
    return bad("the request target must not have user information ('@' in its authority)");
  }
  if (authority.empty() || authority.front() == ':' || !valid_host(authority)) {
    return bad("the request target's host is not a valid host");
  }
  return std::nullopt;
}

// Calls `f` with each element of a comma-separated list (RFC 9110 5.6.1), blanks around it
// trimmed; empty elements are none.
template <typename F>
void for_each_element(std::string_view list, F f) {
  while (!list.empty()) {
    const size_t comma = list.find(',');
    const std::string_view element = trim_blanks(list.substr(0, comma));
    if (!element.empty()) f(element);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
  }
}

// Marks `close` and `keep-alive` among a Connection line's options.
void read_connection_options(std::string_view options, Head* out) {
  for_each_element(options, [out](std::string_view option) {
    if (ascii_iequals(option, "close")) out->close = true;
    if (ascii_iequals(option, "keep-alive")) out->keep_alive = true;
  });
}

// What is wrong with a request's Transfer-Encoding (its lines joined), if anything: see
// parse_head.
std::optional<Error> transfer_coding_problem(std::string_view codings, bool http11,
                                             bool content_length) {
  if (!http11) {
    return bad(
        "an HTTP/1.0 request must not have a Transfer-Encoding: send the body with a "
        "Content-Length");
  }
  if (content_length) {
    return bad("a request must not have both a Transfer-Encoding and a Content-Length");
  }
  // The codings in the order they were applied.
  std::string_view first;
  std::string_view last;
  int count = 0;
  int chunked = 0;
  for_each_element(codings, [&](std::string_view coding) {
    if (count++ == 0) first = coding;
    last = coding;
    if (ascii_iequals(coding, "chunked")) ++chunked;
  });
  if (count == 0 || !ascii_iequals(last, "chunked")) {
    return bad(
        "the last transfer coding of a request must be chunked, or where its body ends is "
        "not known");
  }
  if (chunked > 1) return bad("the chunked transfer coding must not be applied twice");
  if (count > 1) {  // so the first is not chunked
    return make_error(Code::kNotImplemented,
                      "the transfer coding " + std::string(first) +
                          " is not supported: send the body chunked, or with a Content-Length");
  }
  return std::nullopt;
}

}  // namespace

bool token_char(char c) { return (kClasses[static_cast<unsigned char>(c)] & kToken) != 0; }

bool field_value_char(char c) { return (kClasses[static_cast<unsigned char>(c)] & kValue) != 0; }

Result<Field> read_field_line(std::string_view line) {
  if (!line.empty() && (line.front() == ' ' || line.front() == '\t')) {
    return bad("a header line begins with a blank (obsolete line folding is not accepted)");
  }
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) return bad("a header line has no colon");
  const Field field{line.substr(0, colon), trim_blanks(line.substr(colon + 1))};
  if (field.name.empty() || !all_of_class(field.name, kToken)) {
    return bad("a header name must be a token, with no blank before its colon");
  }
  if (!all_of_class(field.value, kValue)) {
    return bad("a header value holds a control character (CR, LF, NUL or another)");
  }
  return field;
}

size_t head_end(std::string_view bytes, size_t from) {
  const size_t start = from > 3 ? from - 3 : 0;  // the end may straddle what came before
  if (start >= bytes.size()) return std::string_view::npos;
  const size_t at = bytes.find("\r\n\r\n", start);
  return at == std::string_view::npos ? at : at + 4;
}

size_t empty_lines(std::string_view bytes) {
  size_t at = 0;
  while (bytes.substr(at, 2) == "\r\n") at += 2;
  return at;
}

bool bare_line_feed(std::string_view bytes, size_t from) {
  for (size_t at = bytes.find('\n', from); at != std::string_view::npos;
       at = bytes.find('\n', at + 1)) {
    if (at == 0 || bytes[at - 1] != '\r') return true;
  }
  return false;
}

Result<Head> parse_head(std::string_view head) {
  Head out;
  const size_t line_end = head.find("\r\n");
  if (line_end == std::string_view::npos) return bad("the request has no request line");
  const std::string_view line = head.substr(0, line_end);
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos) {
    return bad("the request line must be: method, space, target, space, HTTP version");
  }
  out.method = line.substr(0, sp1);
  out.target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (out.method.empty() || !all_of_class(out.method, kToken)) {
    return bad("the request line must be: method, space, target, space, HTTP version");
  }
  if (out.target.empty() || !all_of_class(out.target, kTarget)) {
    return bad("the request target must be visible ASCII characters");
  }
  if (std::optional<Error> problem = target_form_problem(out.method, out.target)) {
    return std::move(*problem);
  }
  // A `%` starts an escape of two hex digits (RFC 3986 2.1). One that did not was read as itself,
  // so that `?workload_id=%ZZ` filtered on a value no client meant.
  for (size_t at = out.target.find('%'); at != std::string_view::npos;
       at = out.target.find('%', at + 1)) {
    if (at + 2 >= out.target.size() || hex_digit(out.target[at + 1]) < 0 ||
        hex_digit(out.target[at + 2]) < 0) {
      return bad("a '%' in the request target must start an escape of two hex digits");
    }
  }
  // HTTP-version is "HTTP/" DIGIT "." DIGIT (RFC 9112 2.3). A later minor version of HTTP/1 is
  // served as HTTP/1.1 (RFC 9110 6.2); another major version is 505, once the head has no other
  // problem.
  const bool version_form = version.size() == 8 && version.starts_with("HTTP/") &&
                            ascii_digit(version[5]) && version[6] == '.' && ascii_digit(version[7]);
  if (!version_form) {
    return bad("the HTTP version must be HTTP/ and a digit, a dot and a digit, as in HTTP/1.1");
  }
  out.http11 = version[5] == '1' && version[7] != '0';

  int hosts = 0;
  std::optional<std::string_view> content_length;
  std::optional<std::string> transfer_encoding;  // its lines' values, joined
  // A header gatewayd takes once: a second line of it is refused.
  auto once = [](std::optional<std::string_view>& slot, std::string_view value,
                 std::string_view name) -> std::optional<Error> {
    if (slot) return bad("the " + std::string(name) + " header is given more than once");
    slot = value;
    return std::nullopt;
  };
  // A list header (RFC 9110 5.3): its lines are one list, joined with ", ".
  auto add_to_list = [](std::optional<std::string>& slot, std::string_view value) {
    if (slot) {
      slot->append(", ").append(value);
    } else {
      slot.emplace(value);
    }
  };
  size_t at = line_end + 2;
  while (true) {
    const size_t end = head.find("\r\n", at);
    if (end == std::string_view::npos) return bad("the request's headers do not end");
    if (end == at) break;  // the empty line
    auto field = read_field_line(head.substr(at, end - at));
    at = end + 2;
    if (!field.ok()) return std::move(field.error());
    const auto [name, value] = field.value();
    std::optional<Error> twice;
    if (ascii_iequals(name, "Host")) {
      if (++hosts > 1) return bad("the Host header is given more than once");
      if (!valid_host(value)) return bad("the Host header is not a valid host");
    } else if (ascii_iequals(name, "Content-Length")) {
      if (content_length && *content_length != value) {
        return bad("Content-Length is given more than once, with different values");
      }
      content_length = value;
    } else if (ascii_iequals(name, "Authorization")) {
      twice = once(out.authorization, value, "Authorization");
    } else if (ascii_iequals(name, "X-Tenant-ID")) {
      twice = once(out.tenant, value, "X-Tenant-ID");
    } else if (ascii_iequals(name, "Content-Type")) {
      twice = once(out.content_type, value, "Content-Type");
    } else if (ascii_iequals(name, "Idempotency-Key")) {
      twice = once(out.idempotency_key, value, "Idempotency-Key");
    } else if (ascii_iequals(name, "If-Match")) {
      add_to_list(out.if_match, value);
    } else if (ascii_iequals(name, "If-None-Match")) {
      add_to_list(out.if_none_match, value);
    } else if (ascii_iequals(name, "Content-Encoding")) {
      add_to_list(out.content_encoding, value);
    } else if (ascii_iequals(name, "Connection")) {
      read_connection_options(value, &out);
    } else if (ascii_iequals(name, "Expect")) {
      out.expect_continue = out.expect_continue || ascii_iequals(value, "100-continue");
    } else if (ascii_iequals(name, "Transfer-Encoding")) {
      add_to_list(transfer_encoding, value);
    }
    if (twice) return std::move(*twice);
  }
  if (out.http11 && hosts == 0) return bad("an HTTP/1.1 request must have a Host header");
  // Checked last: a head with another problem is a 400 as any other.
  if (version[5] != '1') {
    return make_error(Code::kVersionNotSupported,
                      std::string(version) + " is not supported: send HTTP/1.1");
  }
  if (!known_method(out.method)) {
    // RFC 9110 9.1: a method the server does not recognize is 501 (methods are case-sensitive,
    // so `get` is one).
    return make_error(
        Code::kNotImplemented,
        "the request method is not one this server implements: " + std::string(out.method));
  }
  if (transfer_encoding) {
    if (std::optional<Error> problem =
            transfer_coding_problem(*transfer_encoding, out.http11, content_length.has_value())) {
      return std::move(*problem);
    }
    out.chunked = true;
  }
  if (content_length) {
    std::string_view v = *content_length;
    const bool digits = !v.empty() && std::all_of(v.begin(), v.end(), ascii_digit);
    if (!digits) return bad("Content-Length must be a decimal number of bytes");
    // A number past 64 bits declares more than any limit (RFC 9110 8.6: expect large numerals);
    // it was refused as "not a decimal number".
    v.remove_prefix(std::min(v.find_first_not_of('0'), v.size()));
    if (std::from_chars(v.data(), v.data() + v.size(), out.content_length).ec ==
        std::errc::result_out_of_range) {
      out.content_length = UINT64_MAX;
    }
  }
  return out;
}

}  // namespace gw::http
