#include "http/head_check.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace gw::http {
namespace {

using namespace std::string_literals;

std::string head(const std::string& request_line, const std::string& fields) {
  return request_line + "\r\n" + fields + "\r\n";
}

TEST_CASE("head_end finds the empty line, also when the head came in pieces") {
  const std::string h = "GET / HTTP/1.1\r\nHost: x\r\n\r\nbody";
  CHECK(head_end(h) == h.size() - 4);
  CHECK(head_end(h.substr(0, 20)) == std::string_view::npos);
  // Searched up to 25 bytes before: the end straddles the two pieces.
  CHECK(head_end(h, 25) == h.size() - 4);
  CHECK(head_end(h, h.size()) == std::string_view::npos);  // nothing new to search
  CHECK(head_end("\r\n\r") == std::string_view::npos);
}

TEST_CASE("empty_lines counts the CRLFs that start the bytes") {
  CHECK(empty_lines("GET / HTTP/1.1\r\n") == 0);
  CHECK(empty_lines("\r\n\r\nGET") == 4);
  CHECK(empty_lines("\r\n\r") == 2);
  CHECK(empty_lines("") == 0);
}

TEST_CASE("bare_line_feed finds a line ending in LF alone, also when the head came in pieces") {
  CHECK_FALSE(bare_line_feed("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  CHECK(bare_line_feed("GET / HTTP/1.1\nHost: x\n\n"));
  CHECK(bare_line_feed("GET / HTTP/1.1\r\nHost: x\n"));
  CHECK(bare_line_feed("\nGET / HTTP/1.1\r\n"));
  // The CR came in the piece before: searched from the LF on, it is still seen.
  const std::string h = "GET / HTTP/1.1\r\nHost: x\r\n";
  CHECK_FALSE(bare_line_feed(h, h.size() - 1));
  CHECK_FALSE(bare_line_feed("GET / HTTP/1.1\r"));
}

TEST_CASE("heads a server takes") {
  for (const std::string& h : {
           head("GET /v1/webhook?page=2 HTTP/1.1", "Host: localhost:8080\r\n"),
           head("GET /healthz HTTP/1.0", ""),
           head("POST /v1/webhook HTTP/1.1",
                "host: [::1]:80\r\nContent-Length: 2\r\ncontent-length:  2 \r\n"
                "X-A:\t\tvalue with tab \xc3\xa9\r\nX-Empty:\r\n"),
           head("DELETE http://h/v1/webhook/whk_1 HTTP/1.1", "Host: h\r\n"),
           head("OPTIONS * HTTP/1.1", "Host: \r\n"),
           head("CONNECT example.com:443 HTTP/1.1", "Host: example.com:443\r\n"),
           // An absolute URI of any scheme (served as 404 by the router, but for http and https).
           head("GET HTTPS://h:443 HTTP/1.1", "Host: h\r\n"),
           head("GET urn:a.b-c+d:x HTTP/1.1", "Host: h\r\n"),
           head("GET http://h/a@b?c@d HTTP/1.1", "Host: h\r\n"),  // '@' in the path and query
           head("GET http://[::1]:8080/healthz HTTP/1.1", "Host: h\r\n"),
           head("GET http://127.0.0.1:/healthz?x=1 HTTP/1.1", "Host: h\r\n"),
           head("GET http://h HTTP/1.1", "Host: h\r\n"),
           head("GET ftp://u@h/ HTTP/1.1", "Host: h\r\n"),
           head("GET / HTTP/1.1", "Host: [::1]\r\n"),
           head("GET / HTTP/1.1", "Host: 127.0.0.1:\r\n"),
           head("GET / HTTP/1.1", "Host: a%20b.example:443\r\n"),
           head("GET / HTTP/1.1", "Host: x!$&'()*+,;=-._~\r\n"),
       }) {
    CAPTURE(h);
    CHECK(parse_head(h).ok());
  }
}

TEST_CASE("heads a server must refuse are 400 bad_request, each with what is wrong") {
  struct Row {
    std::string head;
    std::string detail_part;
  };
  for (const Row& row : {
           Row{"GET / HTTP/1.1", "no request line"},
           Row{head("GET /", "Host: x\r\n"), "request line must be"},
           Row{head("GET  / HTTP/1.1", "Host: x\r\n"), "target must be"},
           Row{head("G(T / HTTP/1.1", "Host: x\r\n"), "request line must be"},
           // RFC 9112 3.2: a path from '/', an absolute URI, '*' for OPTIONS, host:port for
           // CONNECT; no fragment, no user information in an http URI (helper 99: these were 404,
           // and the last one 200).
           Row{head("GET healthz HTTP/1.1", "Host: x\r\n"), "must be a path from '/'"},
           Row{head("GET ?a HTTP/1.1", "Host: x\r\n"), "must be a path from '/'"},
           Row{head("GET 1a:b HTTP/1.1", "Host: x\r\n"), "must be a path from '/'"},
           Row{head("GET :/x HTTP/1.1", "Host: x\r\n"), "must be a path from '/'"},
           Row{head("GET /healthz#x HTTP/1.1", "Host: x\r\n"), "fragment"},
           Row{head("GET /v1/webhook?a=1#x HTTP/1.1", "Host: x\r\n"), "fragment"},
           Row{head("GET * HTTP/1.1", "Host: x\r\n"), "'*' is for OPTIONS only"},
           Row{head("CONNECT /x HTTP/1.1", "Host: x\r\n"), "of CONNECT must be a host and port"},
           Row{head("CONNECT h HTTP/1.1", "Host: x\r\n"), "of CONNECT must be a host and port"},
           Row{head("GET http://u@h/healthz HTTP/1.1", "Host: h\r\n"), "user information"},
           Row{head("GET hTTpS://u:p@h HTTP/1.1", "Host: h\r\n"), "user information"},
           Row{head("GET http://u@h?x HTTP/1.1", "Host: h\r\n"), "user information"},
           // An http(s) URI with no host, or one the Host header's rules refuse, was served
           // (helper 127); RFC 9110 4.2.1 says to reject it.
           Row{head("GET http:///healthz HTTP/1.1", "Host: x\r\n"), "host is not a valid host"},
           Row{head("GET http://:80/healthz HTTP/1.1", "Host: x\r\n"), "host is not a valid host"},
           Row{head("GET https://?a HTTP/1.1", "Host: x\r\n"), "host is not a valid host"},
           Row{head("GET http://h:abc/healthz HTTP/1.1", "Host: x\r\n"),
               "host is not a valid host"},
           Row{head("GET http://h%zz/ HTTP/1.1", "Host: x\r\n"), "host is not a valid host"},
           Row{head("GET http://h\"/ HTTP/1.1", "Host: x\r\n"), "host is not a valid host"},
           Row{head("GET http://[::1/ HTTP/1.1", "Host: x\r\n"), "host is not a valid host"},
           Row{head("GET http:/healthz HTTP/1.1", "Host: x\r\n"), "must have '//' and a host"},
           Row{head("GET HTTP:healthz HTTP/1.1", "Host: x\r\n"), "must have '//' and a host"},
           Row{head("GET /a\x7f HTTP/1.1", "Host: x\r\n"), "target must be"},
           // A '%' that starts no escape of two hex digits (helper 52: `?workload_id=%ZZ` was
           // a filter on the three characters).
           Row{head("GET /v1/webhook?workload_id=%ZZ HTTP/1.1", "Host: x\r\n"), "'%'"},
           Row{head("GET /v1/webhook?a=%4 HTTP/1.1", "Host: x\r\n"), "'%'"},
           Row{head("GET /v1/webhook?a=% HTTP/1.1", "Host: x\r\n"), "'%'"},
           Row{head("GET /v1/webhook/%g1 HTTP/1.1", "Host: x\r\n"), "'%'"},
           Row{head("GET /v1/webhook?a=%41%%41 HTTP/1.1", "Host: x\r\n"), "'%'"},
           Row{head("GET / HTTP/1.1 ", "Host: x\r\n"), "HTTP version"},
           Row{head("GET / HTTP/1.10", "Host: x\r\n"), "HTTP version"},
           Row{head("GET / HTTP/01.1", "Host: x\r\n"), "HTTP version"},
           Row{head("GET / http/1.1", "Host: x\r\n"), "HTTP version"},
           Row{head("GET / HTTP/1", "Host: x\r\n"), "HTTP version"},
           Row{head("GET / HTTP/2", "Host: x\r\n"), "HTTP version"},
           Row{head("GET / HTTP/1.1", ""), "must have a Host"},
           Row{head("GET / HTTP/1.1", "Host: x\r\nHOST: x\r\n"), "more than once"},
           Row{head("GET / HTTP/1.1", "Host: x/y\r\n"), "not a valid host"},
           // RFC 9112 3.2: an invalid Host value is a 400; the characters alone let these pass.
           Row{head("GET / HTTP/1.1", "Host: a:b\r\n"), "not a valid host"},
           Row{head("GET / HTTP/1.1", "Host: [::1\r\n"), "not a valid host"},
           Row{head("GET / HTTP/1.1", "Host: a:80:80\r\n"), "not a valid host"},
           Row{head("GET / HTTP/1.1", "Host: a%zz\r\n"), "not a valid host"},
           Row{head("GET / HTTP/1.1", "Host: a%2\r\n"), "not a valid host"},
           Row{head("GET / HTTP/1.1", "Host: a:-1\r\n"), "not a valid host"},
           Row{head("GET / HTTP/1.1", "Host: [zz]\r\n"), "not a valid host"},
           Row{head("GET / HTTP/1.1", "Host: [::1]x\r\n"), "not a valid host"},
           Row{head("GET / HTTP/1.1", "Host: a]\r\n"), "not a valid host"},
           Row{head("GET / HTTP/1.1", "Host: x\r\n X-A: b\r\n"), "begins with a blank"},
           Row{head("GET / HTTP/1.1", "Host: x\r\n\tX-A: b\r\n"), "begins with a blank"},
           Row{head("GET / HTTP/1.1", "Host: x\r\nX-A : b\r\n"), "name must be a token"},
           Row{head("GET / HTTP/1.1", "Host: x\r\n: b\r\n"), "name must be a token"},
           Row{head("GET / HTTP/1.1", "Host: x\r\nX-A\r\n"), "no colon"},
           Row{head("GET / HTTP/1.1", "Host: x\r\nX-A: a\nX-B: b\r\n"), "control character"},
           Row{head("GET / HTTP/1.1", "Host: x\r\nX-A: a\rb\r\n"), "control character"},
           Row{head("GET / HTTP/1.1", "Host: x\r\nX-A: a\0b\r\n"s), "control character"},
           Row{head("GET / HTTP/1.1", "Host: x\r\nX-A: \x1b[0m\r\n"), "control character"},
           Row{head("POST / HTTP/1.1", "Host: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n"),
               "different values"},
       }) {
    CAPTURE(row.head);
    const auto r = parse_head(row.head);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == Code::kBadRequest);
    CAPTURE(r.error().detail);
    CHECK(r.error().detail.find(row.detail_part) != std::string::npos);
  }
}

// RFC 9110 9.1 and 15.6.2: a method the server does not recognize is 501 (it was 400); RFC 9110
// 6.2 and 15.6.6: a later HTTP/1 minor version is served as HTTP/1.1, another major version is
// 505 (it was 400). Both once the head has no problem of a 400 (helper 99).
TEST_CASE("an unknown method is 501, another major version of HTTP 505, and HTTP/1.2 is HTTP/1.1") {
  struct Row {
    std::string head;
    Code code;
    std::string detail;
  };
  for (const Row& row : {
           Row{head("get / HTTP/1.1", "Host: x\r\n"), Code::kNotImplemented,
               "the request method is not one this server implements: get"},
           Row{head("FOO /x HTTP/1.1", "Host: x\r\n"), Code::kNotImplemented,
               "the request method is not one this server implements: FOO"},
           Row{head("GET / HTTP/2.0", "Host: x\r\n"), Code::kVersionNotSupported,
               "HTTP/2.0 is not supported: send HTTP/1.1"},
           Row{head("GET / HTTP/0.9", ""), Code::kVersionNotSupported,
               "HTTP/0.9 is not supported: send HTTP/1.1"},
           Row{head("PRI * HTTP/2.0", ""), Code::kBadRequest,
               "the request target '*' is for OPTIONS only"},
           // A 400's problem first, then the version, then the method.
           Row{head("FOO /x HTTP/1.1", ""), Code::kBadRequest,
               "an HTTP/1.1 request must have a Host header"},
           Row{head("FOO /x HTTP/3.0", ""), Code::kVersionNotSupported,
               "HTTP/3.0 is not supported: send HTTP/1.1"},
           Row{head("FOO /x HTTP/1.1", "Host: x\r\nTransfer-Encoding: chunked\r\n"),
               Code::kNotImplemented, "the request method is not one this server implements: FOO"},
       }) {
    CAPTURE(row.head);
    const auto r = parse_head(row.head);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == row.code);
    CHECK(r.error().detail == row.detail);
  }
  for (const char* version : {"HTTP/1.1", "HTTP/1.2", "HTTP/1.9"}) {
    CAPTURE(version);
    const auto r = parse_head(head(std::string("GET / ") + version, "Host: x\r\n"));
    REQUIRE(r.ok());
    CHECK(r.value().http11);
  }
  const auto r = parse_head(head("GET / HTTP/1.2", ""));  // as HTTP/1.1: Host is required
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().detail == "an HTTP/1.1 request must have a Host header");
}

TEST_CASE("escapes of two hex digits, either case, pass in the target") {
  for (const std::string target : {"/a%2Fb", "/v1/webhook?x=%41%e9%E9", "/%25", "/a?b=%00"}) {
    CAPTURE(target);
    CHECK(parse_head(head("GET " + target + " HTTP/1.1", "Host: x\r\n")).ok());
  }
}

TEST_CASE("parse_head reads the request line and the headers gatewayd uses") {
  const std::string h = head("PUT /v1/webhook/whk_1?a=1&b HTTP/1.1",
                             "Host: x\r\nauthorization:  Bearer t0k \r\nX-TENANT-ID:\tteam_a\t\r\n"
                             "Content-Type: application/json\r\nIdempotency-Key: k1\r\n"
                             "If-Match: \"1\"\r\nX-Other: y\r\nif-match: \"2\", \"3\"\r\n"
                             "If-None-Match: W/\"4\"\r\nif-none-match: *\r\n"
                             "Connection: keep-alive\r\nContent-Length: 17\r\n");
  auto r = parse_head(h);
  REQUIRE(r.ok());
  const Head& got = r.value();
  CHECK(got.method == "PUT");
  CHECK(got.target == "/v1/webhook/whk_1?a=1&b");
  CHECK(got.http11);
  CHECK(got.authorization == "Bearer t0k");
  CHECK(got.tenant == "team_a");
  CHECK(got.content_type == "application/json");
  CHECK(got.idempotency_key == "k1");
  // A list: its lines joined, in order.
  CHECK(got.if_match == R"("1", "2", "3")");
  CHECK(got.if_none_match == R"(W/"4", *)");
  CHECK(got.content_length == 17);
  CHECK_FALSE(got.close);
  CHECK(got.keep_alive);
  CHECK_FALSE(got.expect_continue);
  auto expecting = parse_head(head("POST / HTTP/1.1", "Host: x\r\nExpect: 100-Continue\r\n"));
  REQUIRE(expecting.ok());
  CHECK(expecting.value().expect_continue);

  auto bare = parse_head(head("GET /healthz HTTP/1.0", "Connection: x, CLOSE , y\r\n"));
  REQUIRE(bare.ok());
  CHECK_FALSE(bare.value().http11);
  CHECK(bare.value().close);
  CHECK_FALSE(bare.value().keep_alive);
  CHECK_FALSE(bare.value().authorization.has_value());
  CHECK_FALSE(bare.value().if_match.has_value());
  CHECK_FALSE(bare.value().if_none_match.has_value());
  CHECK(bare.value().content_length == 0);

  // Connection is a list too: an option on any of its lines counts.
  auto two =
      parse_head(head("GET / HTTP/1.1", "Host: x\r\nConnection: a\r\nConnection: close\r\n"));
  REQUIRE(two.ok());
  CHECK(two.value().close);
  // The largest Content-Length of 19 digits.
  auto big =
      parse_head(head("POST / HTTP/1.1", "Host: x\r\nContent-Length: 9999999999999999999\r\n"));
  REQUIRE(big.ok());
  CHECK(big.value().content_length == 9999999999999999999ULL);
  // A decimal number past 64 bits is a length too (RFC 9110 8.6: a recipient must expect large
  // numerals), larger than any limit: it was a 400 saying it was not a decimal number. Leading
  // zeros count for nothing.
  for (const std::string& huge :
       std::vector<std::string>{"18446744073709551615", "18446744073709551616",
                                "99999999999999999999", std::string(400, '9')}) {
    CAPTURE(huge);
    auto past = parse_head(head("POST / HTTP/1.1", "Host: x\r\nContent-Length: " + huge + "\r\n"));
    REQUIRE(past.ok());
    CHECK(past.value().content_length == UINT64_MAX);
  }
  auto zeros = parse_head(
      head("POST / HTTP/1.1", "Host: x\r\nContent-Length: " + std::string(40, '0') + "17\r\n"));
  REQUIRE(zeros.ok());
  CHECK(zeros.value().content_length == 17);
  auto zero = parse_head(head("POST / HTTP/1.1", "Host: x\r\nContent-Length: 000\r\n"));
  REQUIRE(zero.ok());
  CHECK(zero.value().content_length == 0);
}

TEST_CASE("parse_head refuses a header gatewayd takes once given twice") {
  struct Row {
    std::string fields;
    Code code;
    std::string detail_part;
  };
  for (const Row& row : {
           Row{"Authorization: Bearer a\r\nauthorization: Bearer b\r\n", Code::kBadRequest,
               "the Authorization header is given more than once"},
           Row{"X-Tenant-ID: a\r\nX-Tenant-ID: a\r\n", Code::kBadRequest,
               "the X-Tenant-ID header is given more than once"},
           Row{"Content-Type: application/json\r\nContent-Type: text/plain\r\n", Code::kBadRequest,
               "the Content-Type header is given more than once"},
           Row{"Idempotency-Key: a\r\nIdempotency-Key: b\r\n", Code::kBadRequest,
               "the Idempotency-Key header is given more than once"},
           Row{"Content-Length: 5abc\r\n", Code::kBadRequest, "decimal number of bytes"},
           Row{"Content-Length: -5\r\n", Code::kBadRequest, "decimal number of bytes"},
           Row{"Content-Length:\r\n", Code::kBadRequest, "decimal number of bytes"},
           Row{"Content-Length: +5\r\n", Code::kBadRequest, "decimal number of bytes"},
           Row{"Content-Length: 5 5\r\n", Code::kBadRequest, "decimal number of bytes"},
       }) {
    CAPTURE(row.fields);
    auto r = parse_head(head("POST /v1/webhook HTTP/1.1", "Host: x\r\n" + row.fields));
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == row.code);
    CHECK(r.error().detail.find(row.detail_part) != std::string::npos);
  }
}

TEST_CASE("parse_head takes Transfer-Encoding: chunked alone, and refuses any other framing") {
  for (const std::string fields : {
           "Transfer-Encoding: chunked\r\n",
           "transfer-encoding: Chunked\r\n",
           // A list: empty elements are none (RFC 9110 5.6.1).
           "Transfer-Encoding: , chunked ,\r\n",
           "Transfer-Encoding:\r\nTransfer-Encoding: chunked\r\n",
       }) {
    CAPTURE(fields);
    auto r = parse_head(head("POST /v1/webhook HTTP/1.1", "Host: x\r\n" + fields));
    REQUIRE(r.ok());
    CHECK(r.value().chunked);
    CHECK(r.value().content_length == 0);
  }
  auto plain = parse_head(head("POST /v1/webhook HTTP/1.1", "Host: x\r\nContent-Length: 5\r\n"));
  REQUIRE(plain.ok());
  CHECK_FALSE(plain.value().chunked);
  struct Row {
    std::string request_line;
    std::string fields;
    Code code;
    std::string detail;
  };
  const std::string post = "POST /v1/webhook HTTP/1.1";
  const std::string not_last =
      "the last transfer coding of a request must be chunked, or where its body ends is not known";
  const std::string both = "a request must not have both a Transfer-Encoding and a Content-Length";
  for (const Row& row : {
           Row{post, "Transfer-Encoding: gzip, chunked\r\n", Code::kNotImplemented,
               "the transfer coding gzip is not supported: send the body chunked, or with a "
               "Content-Length"},
           // Two lines are one list.
           Row{post, "Transfer-Encoding: deflate\r\nTransfer-Encoding: chunked\r\n",
               Code::kNotImplemented,
               "the transfer coding deflate is not supported: send the body chunked, or with a "
               "Content-Length"},
           Row{post, "Transfer-Encoding: chunked, gzip\r\n", Code::kBadRequest, not_last},
           Row{post, "Transfer-Encoding: gzip\r\n", Code::kBadRequest, not_last},
           Row{post, "Transfer-Encoding: chunked;q=1\r\n", Code::kBadRequest, not_last},
           Row{post, "Transfer-Encoding:\r\n", Code::kBadRequest, not_last},
           Row{post, "Transfer-Encoding: chunked, chunked\r\n", Code::kBadRequest,
               "the chunked transfer coding must not be applied twice"},
           Row{post, "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n", Code::kBadRequest,
               both},
           Row{post, "Content-Length: 5\r\nTransfer-Encoding: gzip, chunked\r\n", Code::kBadRequest,
               both},
           Row{"POST /v1/webhook HTTP/1.0", "Transfer-Encoding: chunked\r\n", Code::kBadRequest,
               "an HTTP/1.0 request must not have a Transfer-Encoding: send the body with a "
               "Content-Length"},
       }) {
    CAPTURE(row.request_line);
    CAPTURE(row.fields);
    auto r = parse_head(head(row.request_line, "Host: x\r\n" + row.fields));
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == row.code);
    CHECK(r.error().detail == row.detail);
  }
  // A head with another problem is that problem's 400, also with a Transfer-Encoding.
  auto no_host = parse_head(head("POST / HTTP/1.1", "Transfer-Encoding: gzip\r\n"));
  REQUIRE_FALSE(no_host.ok());
  CHECK(no_host.error().detail == "an HTTP/1.1 request must have a Host header");
}

TEST_CASE("read_field_line reads a header line, and says what is wrong with one it refuses") {
  auto f = read_field_line("X-Name: \t a value \t");
  REQUIRE(f.ok());
  CHECK(f.value().name == "X-Name");
  CHECK(f.value().value == "a value");
  CHECK(read_field_line("Empty:").value().value.empty());
  for (const char* line :
       {" x: y", "\tx: y", "no colon", ": y", "a b: y", "x : y", "x: a\rb", "x: a\x7f"}) {
    CAPTURE(line);
    auto r = read_field_line(line);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == Code::kBadRequest);
  }
}

}  // namespace
}  // namespace gw::http
