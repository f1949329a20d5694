// A small blocking HTTP/1.1 client over libcurl for integration tests. One HttpClient owns one
// curl easy handle, so consecutive requests reuse the connection (keep-alive) when the server
// allows it. An HttpClient is used by one thread at a time; use one client per thread.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <curl/curl.h>

namespace gw::testing {

using Headers = std::vector<std::pair<std::string, std::string>>;

struct Response {
  long status = 0;    // HTTP status; 0 when the exchange failed (see `error`)
  std::string error;  // curl's message when status == 0
  Headers headers;    // of the final response, in the order received
  std::string body;
  long new_connections = 0;  // connections opened for this request (CURLINFO_NUM_CONNECTS)
  // Of request_chunked(): the request's head and body as libcurl sent them.
  std::string sent;

  // The first header named `name` (case-insensitive).
  std::optional<std::string> header(std::string_view name) const;
  // Every value of headers named `name` (case-insensitive), in order.
  std::vector<std::string> header_values(std::string_view name) const;
};

class HttpClient {
 public:
  explicit HttpClient(std::chrono::milliseconds timeout = std::chrono::seconds(15));
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Sends `method` (any token: GET, HEAD, POST, PUT, DELETE, PATCH, ...) to `url` with exactly the
  // given headers plus curl's Host/Content-Length. A body is sent when `body` has a value (even an
  // empty one). curl's own defaults are suppressed: no `Expect: 100-continue`, no `Accept`, and no
  // Content-Type unless `headers` has one. Proxies from the environment are never used.
  // `target`, if given, is sent as the request target instead of the URL's path and query (e.g.
  // the absolute form "http://host/path").
  Response request(std::string_view method, const std::string& url, const Headers& headers = {},
                   const std::optional<std::string>& body = std::nullopt,
                   const std::optional<std::string>& target = std::nullopt);

  // As request(), with a body sent in the chunked coding (`Transfer-Encoding: chunked`), a chunk
  // for each of `chunks` (libcurl's own encoding: each piece its read callback gives is a chunk).
  Response request_chunked(std::string_view method, const std::string& url, const Headers& headers,
                           const std::vector<std::string>& chunks);

  // How long a request may take from now on (the constructor's by default).
  void set_timeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }

 private:
  // request(), or with `chunks` request_chunked().
  Response perform(std::string_view method, const std::string& url, const Headers& headers,
                   const std::optional<std::string>& body, const std::optional<std::string>& target,
                   const std::vector<std::string>* chunks);

  CURL* curl_;
  std::chrono::milliseconds timeout_;
};

// Percent-encodes `s` for use in a URL query or path segment.
std::string url_escape(std::string_view s);

// Case-insensitive ASCII comparison.
bool iequals(std::string_view a, std::string_view b);

}  // namespace gw::testing
