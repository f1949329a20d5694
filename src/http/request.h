// The HTTP layer's own request/reply values, independent of Pistache, so the API logic can be
// driven in unit tests without sockets. Plain values; a Respond callback is called exactly once,
// from any thread.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gw::http {

struct Request {
  std::string method;  // "GET", "POST", ...
  std::string path;    // without the query string, percent-decoded except "%2F"
  // Decoded, in the URL's order; a name may come more than once (the Api refuses that).
  std::vector<std::pair<std::string, std::string>> query;
  std::optional<std::string> authorization;
  std::optional<std::string> tenant;
  std::optional<std::string> content_type;
  std::optional<std::string> content_encoding;
  std::optional<std::string> if_match;
  std::optional<std::string> if_none_match;
  std::optional<std::string> idempotency_key;
  std::string body;
};

struct Reply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers (ETag, Allow, ...)
  bool close = false;  // close the connection after sending
};

using Respond = std::function<void(Reply)>;

}  // namespace gw::http
