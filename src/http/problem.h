// RFC 9457 problem details: the one place where an error Code becomes an HTTP status.
// Pure; thread-safe.
#pragma once

#include "core/error.h"
#include "http/request.h"

namespace gw::http {

int status_of(Code code);
// An application/problem+json reply for `error` (status, title, detail, code, errors).
Reply problem(const Error& error);

}  // namespace gw::http
