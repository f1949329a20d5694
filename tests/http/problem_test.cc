// What a 503 says in place of its internal detail.
#include "http/problem.h"

#include <doctest/doctest.h>

#include <string>

namespace gw::http {
namespace {

std::string detail_of(const Reply& r) {
  const size_t at = r.body.find("\"detail\":\"") + 10;
  return r.body.substr(at, r.body.find('"', at) - at);
}

TEST_CASE("a 503 says what the service cannot do, and never its internal detail but if asked") {
  const Error rocksdb = make_error(Code::kUnavailable, "IO error: While pread offset 0 len 1452");
  CHECK(unavailable_detail(rocksdb, "GET") == kCannotRead);
  CHECK(unavailable_detail(rocksdb, "HEAD") == kCannotRead);
  CHECK(unavailable_detail(rocksdb, "POST") == kCannotWrite);
  CHECK(unavailable_detail(rocksdb, "DELETE") == kCannotWrite);
  // A write refused because its reads failed is no failed write (helper 123 F4).
  Error read = rocksdb;
  read.shown = Shown::kCannotRead;
  CHECK(unavailable_detail(read, "PUT") == kCannotRead);
  // A detail written for the client is said as it is (the WAF check's: helper 128 F3).
  Error said = make_error(Code::kUnavailable, "waf_custom_directives cannot be checked right now");
  said.shown = Shown::kDetail;
  CHECK(unavailable_detail(said, "PUT") == said.detail);
  CHECK(detail_of(problem(said, unavailable_detail(said, "PUT"))) == said.detail);
  CHECK(detail_of(problem(rocksdb, unavailable_detail(rocksdb, "PUT"))) == kCannotWrite);
  CHECK(detail_of(problem(rocksdb)) == kCannotWrite);
  // Shown is for 503s only: a 500's detail is never said.
  Error internal = make_error(Code::kInternal, "stored record x is not JSON");
  internal.shown = Shown::kDetail;
  CHECK(detail_of(problem(internal)) == "an internal error occurred");
}

}  // namespace
}  // namespace gw::http
