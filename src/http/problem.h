// RFC 9457 problem details: the one place where an error Code becomes an HTTP status.
// Thread-safe; pure but for log_hidden_detail, which writes to stderr.
#pragma once

#include <chrono>
#include <string_view>

#include "core/error.h"
#include "http/request.h"

namespace gw::http {

int status_of(Code code);
// What a 503 says instead of its internal detail (a RocksDB status, a path): why, in the words of
// the request's side of it.
inline constexpr std::string_view kCannotWrite = "the service cannot accept writes right now";
inline constexpr std::string_view kCannotRead = "the service cannot read its data right now";
inline constexpr std::string_view kShuttingDown = "the server is shutting down";
inline constexpr std::string_view kWritesStopped =
    "writes stopped after a failed write to or read of the data dir (disk full or I/O error); "
    "restart gatewayd to recover";

// What a 503 to a request of `method` says for `error` (see Shown): a read's is no failed write,
// nor is a write's whose reads failed.
std::string_view unavailable_detail(const Error& error, std::string_view method);

// An application/problem+json reply for `error` (status, title, detail, code, errors). Internal
// details never leave the process: a 500 says "an internal error occurred", a 503 `unavailable`
// (unless the error's detail is written for the client: Shown::kDetail).
Reply problem(const Error& error, std::string_view unavailable = kCannotWrite);

// 503 unavailable, "the server is shutting down", with Connection: close: for a request that
// comes, or would run, once gatewayd drains.
Reply shutting_down();

// 413 payload_too_large for a body (received, declared, or a chunked body's data) over
// `max_request_bytes`, with Connection: close: the rest of such a body is never read.
Reply body_too_large(size_t max_request_bytes);
// Its error.
Error body_too_large_error(size_t max_request_bytes);

// 408 request_timeout, with Connection: close: for a connection on which no whole request came
// within `idle` (--idle-timeout-ms), which Pistache's timer then ends.
Reply request_timeout(std::chrono::milliseconds idle);

// Writes the internal detail of a 500 or 503 that `problem` keeps from the client to stderr, as
// `gatewayd: METHOD PATH: <code>: <detail>`, so the operator learns why. At most one line a
// second: a damaged block that every request meets would otherwise flood the log; the next line
// says how many were left out.
void log_hidden_detail(const Error& error, std::string_view method, std::string_view path);

}  // namespace gw::http
