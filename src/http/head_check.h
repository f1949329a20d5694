// The checks gatewayd makes on a request's head (its request line and header lines) before
// Pistache parses it. Pistache 0.0.5 parses a head again from its start each time more of it
// arrives, and is lenient where a lenient server lets a body run as a request: it ignores a
// header whose name has a blank before the colon or that begins with a blank, keeps the first of
// two different Content-Lengths, takes a bare LF as part of a value, and passes control bytes on.
// So the server holds a head until it is whole (up to kMaxHeadBytes) and checks it here first.
#pragma once

#include <cstddef>
#include <optional>
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

// The problem with a whole head (as head_end delimits it), or nothing if it is one gatewayd
// takes (RFC 9112 2 to 6): a request line `METHOD SP target SP HTTP/1.x` with a method Pistache
// knows and a target of visible ASCII; header lines `name: value` with a token for a name (no
// blank before the colon, none at the start of a line), no control bytes but tab in a value,
// CR only in the CRLF that ends a line; exactly one Host with a valid value for HTTP/1.1 (at
// most one for HTTP/1.0); and Content-Length given once, or repeated with the same value.
// Each problem is a 400 bad_request.
std::optional<Error> check_head(std::string_view head);

}  // namespace gw::http
