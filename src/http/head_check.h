// gatewayd's reading of a request's head (its request line and header lines). gatewayd parses
// requests itself, not with Pistache 0.0.5's parser: that one parsed a head again from its start
// each time more of it arrived, was lenient where a lenient server lets a body run as a request
// (it ignored a header whose name had a blank before the colon or that began with a blank, kept
// the first of two different Content-Lengths, took a bare LF as part of a value, passed control
// bytes on), kept only the first of repeated headers, and was about a quarter of an HTTP thread's
// time on a write (a heap object per header, every name lower-cased, the request copied whole
// before it was handed over). The server holds a head until it is whole (up to kMaxHeadBytes)
// and reads it here, in one pass.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/error.h"

namespace gw::http {

// The longest head taken: request line, header lines and the empty line that ends them.
// Longer ones get 431 headers_too_large.
constexpr size_t kMaxHeadBytes = 64 << 10;

// Where the head that starts `bytes` ends: the offset just past its empty line, or npos if
// it has not all come. `from` is how many bytes were searched before (a search goes on from
// there, so a head that comes in pieces is searched once).
size_t head_end(std::string_view bytes, size_t from = 0);

// The bytes of the empty lines (CRLF) that start `bytes`: before a request line they are not part
// of the request (RFC 9112 2.2; some clients send a CRLF after a body).
size_t empty_lines(std::string_view bytes);

// Whether the head bytes from `from` on hold a line ending in a bare LF (a LF not after a CR).
// Such a head never ends as head_end() looks for its end (RFC 9112 2.2 lets a server take a bare
// LF as the end of a line or refuse it; gatewayd refuses it), so it is refused as soon as one
// comes, rather than held until the connection's 60 s run out.
bool bare_line_feed(std::string_view bytes, size_t from = 0);

// Whether `c` may be in a token (RFC 9110 5.6.2: a method, a header name), and in a field value
// (RFC 9110 5.5: visible ASCII, SP, HTAB and obs-text).
bool token_char(char c);
bool field_value_char(char c);

// A header line (or a trailer field's) without its CRLF: `name: value`, the name a token with no
// blank before the colon, the value without the blanks around it.
struct Field {
  std::string_view name;
  std::string_view value;
};
// The line read, or the 400 for a line that is not one: one that begins with a blank (obsolete
// line folding), has no colon, a name that is not a token, or a control byte but tab in its value.
Result<Field> read_field_line(std::string_view line);

// What gatewayd reads of a head. The views point into the head given to parse_head.
struct Head {
  std::string_view method;
  std::string_view target;  // as sent: the path (origin or absolute form) and the query
  bool http11 = true;       // else HTTP/1.0
  // Each of these is taken once (blanks around the value are not part of it); a second line of
  // one is refused, since a proxy in front may have read the other.
  std::optional<std::string_view> authorization;
  std::optional<std::string_view> tenant;  // X-Tenant-ID
  std::optional<std::string_view> content_type;
  std::optional<std::string_view> idempotency_key;
  // A list (RFC 9110 13.1.1): the values of all its lines, joined with ", ".
  std::optional<std::string> if_match;
  std::optional<std::string> if_none_match;
  // The codings of the body, as a list too (RFC 9110 8.4.1).
  std::optional<std::string> content_encoding;
  uint64_t content_length = 0;  // 0 without one
  // `Transfer-Encoding: chunked`: the body is in the chunked coding (chunked.h), and ends where
  // it says, not after a Content-Length (the head has none).
  bool chunked = false;
  // `close` or `keep-alive` among the options of the Connection lines (RFC 9110 7.6.1).
  bool close = false;
  bool keep_alive = false;
  // `Expect: 100-continue`: the client waits for a 100 (Continue) before it sends the body.
  bool expect_continue = false;
};

// The head (as head_end delimits it) read, or the problem with it if it is not one gatewayd
// takes (RFC 9112 2 to 6): a request line `METHOD SP target SP HTTP/D.D` with a target of
// visible ASCII in one of RFC 9112 3.2's forms (a path from '/', an absolute URI without user
// information in http and https, host:port for CONNECT, '*' for OPTIONS) and no fragment; header
// lines `name: value` with a token for a name (no blank before the colon, none at the start of a
// line), no control bytes but tab in a value, CR only in the CRLF that ends a line; exactly one
// Host with a valid value for HTTP/1.1 (at most one for HTTP/1.0); Content-Length a decimal
// number, given once or repeated with the same value; Authorization, X-Tenant-ID, Content-Type
// and Idempotency-Key at most once. Each problem is a 400 bad_request; a head without one is
// then 505 http_version_not_supported for an HTTP major version other than 1 (a later HTTP/1
// minor version is read as HTTP/1.1), and 501 not_implemented for a method other than those of
// RFC 9110 and PATCH. Last, its Transfer-Encoding lines (one list, RFC 9110 5.3), if it has any,
// must name `chunked` alone (in any case; RFC 9112 6.1 and 7): 501 for one that names another
// coding before it (`gzip, chunked`: gatewayd decodes none), and 400 for one whose last coding is
// not chunked (where the body ends is not known, RFC 9112 6.3), that names chunked twice (RFC 9112
// 7), that comes with a Content-Length (a proxy in front may have read that one: RFC 9112 6.3
// lets a server refuse both), or in an HTTP/1.0 request (RFC 9112 6.1: its framing is faulty).
Result<Head> parse_head(std::string_view head);

}  // namespace gw::http
