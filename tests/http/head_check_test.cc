#include "http/head_check.h"

#include <doctest/doctest.h>

#include <string>

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

TEST_CASE("heads a server takes") {
  for (const std::string& h : {
           head("GET /v1/webhook?page=2 HTTP/1.1", "Host: localhost:8080\r\n"),
           head("GET /healthz HTTP/1.0", ""),
           head("POST /v1/webhook HTTP/1.1",
                "host: [::1]:80\r\nContent-Length: 2\r\ncontent-length:  2 \r\n"
                "X-A:\t\tvalue with tab \xc3\xa9\r\nX-Empty:\r\n"),
           head("DELETE http://h/v1/webhook/whk_1 HTTP/1.1", "Host: h\r\n"),
           head("OPTIONS * HTTP/1.1", "Host: \r\n"),
       }) {
    CAPTURE(h);
    CHECK_FALSE(check_head(h).has_value());
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
           Row{head("get / HTTP/1.1", "Host: x\r\n"), "method is not one"},
           Row{head("GET /a\x7f HTTP/1.1", "Host: x\r\n"), "target must be"},
           Row{head("GET / HTTP/2.0", "Host: x\r\n"), "HTTP version"},
           Row{head("GET / HTTP/1.1 ", "Host: x\r\n"), "HTTP version"},
           Row{head("GET / HTTP/1.1", ""), "must have a Host"},
           Row{head("GET / HTTP/1.1", "Host: x\r\nHOST: x\r\n"), "more than once"},
           Row{head("GET / HTTP/1.1", "Host: x/y\r\n"), "not a valid host"},
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
    const std::optional<Error> e = check_head(row.head);
    REQUIRE(e.has_value());
    CHECK(e->code == Code::kBadRequest);
    CHECK(e->detail.find(row.detail_part) != std::string::npos);
  }
}

}  // namespace
}  // namespace gw::http
