# Script mode, run at build time:
#   cmake -DINPUT=src/http/openapi.json -DOUTPUT=<dir>/openapi_json.cc -P cmake/embed_openapi.cmake
# Writes OUTPUT, a C++ file defining gw::http::openapi_json() (declared in src/http/openapi.h),
# which returns the bytes of INPUT as a raw string literal. Fails the build when INPUT is not JSON
# with an "openapi" member, or holds the literal's closing delimiter.
file(READ "${INPUT}" text)
string(JSON version ERROR_VARIABLE json_error GET "${text}" openapi)
if(json_error)
  message(FATAL_ERROR "${INPUT}: not an OpenAPI JSON document: ${json_error}")
endif()
string(FIND "${text}" ")openapi_json\"" delimiter_at)
if(NOT delimiter_at EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains the raw-string delimiter )openapi_json\"")
endif()
set(generated "// Generated from ${INPUT} by cmake/embed_openapi.cmake; do not edit.
#include \"http/openapi.h\"

namespace gw::http {

std::string_view openapi_json() {
  static constexpr std::string_view kDocument = R\"openapi_json(${text})openapi_json\";
  return kDocument;
}

}  // namespace gw::http
")
file(WRITE "${OUTPUT}" "${generated}")
