// The OpenAPI 3.1 description of the API: src/http/openapi.json, compiled into the binary at build
// time (cmake/embed_openapi.cmake), so the server needs no file to serve GET /openapi.json.
// Immutable; thread-safe.
#pragma once

#include <string_view>

namespace gw::http {

// The bytes of src/http/openapi.json as they were at build time.
std::string_view openapi_json();

}  // namespace gw::http
