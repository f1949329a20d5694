// The connection's life at the edge: half-closed clients, lingering after a refusal, refusals that
// end a connection (400, 413, 431), requests that come in pieces, pipelining, HEAD, 100-continue,
// and answers that wait for a slow reader. Split from errors_test.cc, whose other cases are the
// error statuses of requests; the idle timeout's cases (408) are timeouts_test.cc.
#include <linux/tcp.h>  // TCP_INFO with tcpi_bytes_received (glibc's netinet/tcp.h has no such member)
#include <netinet/in.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/text.h"
#include "integration/fixture.h"

namespace gw::itest::connections_test {
namespace {

using testing::num;
using testing::str;

// exchange_on() on a new connection, closed afterwards.
std::string raw_exchange(const Server& server, const std::string& request) {
  const int fd = connect_with_timeout(server);
  std::string got = exchange_on(fd, request);
  ::close(fd);
  return got;
}

// The id in a create's raw answer (its JSON body), or "" if it has none.
std::string created_id(const std::string& reply, std::string_view id_field) {
  const std::string key = "\"" + std::string(id_field) + "\":\"";
  const size_t at = reply.find(key);
  if (at == std::string::npos) return "";
  const size_t from = at + key.size();
  return reply.substr(from, reply.find('"', from) - from);
}

// A client may shut its sending side right after its request and wait for the answer (a
// half-close: shutdown(SHUT_WR)). Pistache ended such a connection as soon as it read that end: the
// request still ran (a create was applied), and its answer was lost.
TEST_CASE("a client that shuts its sending side after its request gets the answer, then the end") {
  Server server;
  Api api(server, kTeamA);
  const size_t sockets_before = sockets_at_rest(server, api);
  // Sends `request` on a new connection and shuts the sending side at once; returns what the
  // server sent until it ended the stream ("(no end)" appended if it did not within 5 s).
  auto half_closed = [&](const std::string& request) {
    const int fd = connect_with_timeout(server);
    REQUIRE(::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(request.size()));
    REQUIRE(::shutdown(fd, SHUT_WR) == 0);
    std::string got;
    char buffer[65536];
    for (;;) {
      const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
      if (n == 0) break;
      if (n < 0) {
        got += "(no end)";
        break;
      }
      got.append(buffer, static_cast<size_t>(n));
    }
    ::close(fd);
    return got;
  };
  const std::string created =
      half_closed(raw_post(server, kTeamA, "/v1/webhook", webhook_body(kTeamA, "wl-half")));
  INFO("create: ", created);
  REQUIRE(created.starts_with("HTTP/1.1 201 "));
  CHECK(api.get("/v1/webhook/" + created_id(created, "webhook_id")).status == 200);
  CHECK(half_closed("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").starts_with("HTTP/1.1 200 "));
  // Refused, as every request without a token is; answered all the same.
  CHECK(half_closed("GET /v1/webhook HTTP/1.1\r\nHost: x\r\n\r\n").starts_with("HTTP/1.1 401 "));
  // Refused before it was read whole (a head too large for its 64 KiB).
  CHECK(half_closed("GET /healthz HTTP/1.1\r\nX-Big: " + std::string(70000, 'a') + "\r\n\r\n")
            .starts_with("HTTP/1.1 431 "));
  // A request that has not all come is not answered: the connection just ends.
  CHECK(half_closed("GET /healthz HTTP/1.1\r\nHost: x\r\n") == "");
  // gatewayd closed its side of each of them.
  CHECK(sockets_once_down_to(server, sockets_before) == sockets_before);
}

// The rest of an answer the socket did not take at once waited for the socket to be writable; at a
// half-closed connection every event was also readable (the end of the stream), which Pistache
// took as a read, so the rest was never written: the client got 4 to 5.6 MB of a 7 MB list page,
// and the connection hung in CLOSE-WAIT for about 300 s.
TEST_CASE("a half-closed client gets the whole of an answer larger than the socket takes") {
  Server server;
  Api api(server, kTeamA);
  const size_t sockets_before = sockets_at_rest(server, api);
  // A list page of about 7 MB, more than the sockets take at once (they took 4 to 5.6 MB of it).
  for (int n = 0; n < 8; ++n) {
    const std::string body =
        testing::json_with(profile_body(kTeamA, "big" + std::to_string(n) + ".example.com"),
                           "waf_overrides", "{\"k\": \"" + std::string(900000, 'x') + "\"}");
    REQUIRE(api.post("/v1/gateway_security_profile", body).status == 201);
  }
  const int fd = connect_to(server);
  REQUIRE(fd >= 0);
  timeval timeout{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  const std::string request = profile_page_request(server);
  REQUIRE(::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(request.size()));
  REQUIRE(::shutdown(fd, SHUT_WR) == 0);
  // Read nothing for a while: the server fills the socket and waits for room.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::string got;
  char buffer[65536];
  bool ended = false;
  for (;;) {
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0) {
      ended = n == 0;
      break;
    }
    got.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  const size_t head_end = got.find("\r\n\r\n");
  REQUIRE(head_end != std::string::npos);
  const std::string head = got.substr(0, head_end);
  INFO(head);
  CHECK(head.starts_with("HTTP/1.1 200 "));
  const size_t at = head.find("Content-Length: ");
  REQUIRE(at != std::string::npos);
  const size_t length = std::stoul(head.substr(at + 16));
  CHECK(length > 7000000);
  CHECK(got.size() - head_end - 4 == length);
  CHECK(ended);  // then the end of the stream, not a timeout
  // And gatewayd closed its side.
  CHECK(sockets_once_down_to(server, sockets_before) == sockets_before);
}

// After an answer that closed the connection (`Connection: close`), gatewayd shut its write side
// and waited for the client to close its own: a client that never did held a descriptor of
// gatewayd's for Pistache's idle limit of 300 s (where an idle keep-alive connection ends at 60 s).
TEST_CASE("an answer that closes the connection ends it without waiting for the client's end") {
  Server server;
  Api api(server, kTeamA);
  const size_t sockets_before = sockets_at_rest(server, api);
  const int fd = connect_with_timeout(server);
  const std::string reply =
      exchange_on(fd, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  CHECK(reply.starts_with("HTTP/1.1 200 "));
  CHECK(reply.find("Connection: close") != std::string::npos);
  // The client keeps its side open; gatewayd's descriptor goes all the same.
  CHECK(sockets_once_down_to(server, sockets_before) == sockets_before);
  char byte = 0;
  CHECK(::recv(fd, &byte, 1, 0) == 0);  // the end of the stream
  ::close(fd);
}

// After a refusal, gatewayd waits for its client's end, dropping what comes meanwhile (the rest
// of a refused body): a close with bytes unread would reset the connection and could take the
// answer with it. A client that kept its side open held the connection, one of gatewayd's
// descriptors, for Pistache's idle limit of 300 s (measured: released after 301 s, sending
// nothing). It now ends once the client has sent nothing for --lingering-timeout-ms, and at the
// latest --lingering-time-ms after the refusal.
TEST_CASE("after a refusal the connection ends once its client is quiet, and at a bounded time") {
  Server server({"--lingering-timeout-ms", "1000", "--lingering-time-ms", "4000"});
  Api api(server, kTeamA);
  const size_t sockets_before = sockets_at_rest(server, api);
  const std::string bare_lf = "GET /healthz HTTP/1.1\nHost: x\n\n";
  const std::string too_large =
      "POST /v1/webhook HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999\r\n\r\n";

  SUBCASE("a client that sends nothing more") {
    for (const std::string& request : {bare_lf, too_large}) {
      CAPTURE(request);
      const int fd = connect_with_timeout(server);
      const std::string reply = exchange_on(fd, request);
      CHECK((reply.starts_with("HTTP/1.1 400 ") || reply.starts_with("HTTP/1.1 413 ")));
      char byte = 0;
      CHECK(::recv(fd, &byte, 1, 0) == 0);  // the answer, then the end of the stream
      // The client keeps its side open; gatewayd's descriptor goes all the same.
      CHECK(sockets_once_down_to(server, sockets_before) == sockets_before);
      ::close(fd);
    }
  }

  SUBCASE("a client that goes on sending the body it was refused") {
    const int fd = connect_with_timeout(server);
    const std::string reply = exchange_on(fd, too_large);
    CHECK(reply.starts_with("HTTP/1.1 413 "));
    // A piece every 100 ms: past the lingering timeout the connection stays, since the client
    // is still sending; the lingering time ends it.
    const auto refused = std::chrono::steady_clock::now();
    const std::string piece(1000, 'a');
    bool open_past_timeout = false;  // seen open between 1.5 and 3.5 s after the refusal
    bool ended = false;
    while (std::chrono::steady_clock::now() - refused < std::chrono::seconds(15)) {
      if (::send(fd, piece.data(), piece.size(), MSG_NOSIGNAL) < 0) break;  // reset
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      const auto since = std::chrono::steady_clock::now() - refused;
      const bool open = open_sockets(server.pid()) > sockets_before;
      // Past the lingering timeout and before the lingering time, with a margin either side: a
      // window of half a second was missed when one turn of this loop took longer.
      if (since >= std::chrono::milliseconds(1500) && since < std::chrono::milliseconds(3500)) {
        open_past_timeout = open_past_timeout || open;
      }
      if (!open) {
        ended = true;
        break;
      }
    }
    CHECK(open_past_timeout);
    CHECK(ended);
    CHECK(sockets_once_down_to(server, sockets_before) == sockets_before);
    ::close(fd);
  }
  // Served as before.
  CHECK(api.get("/v1/webhook").status == 200);
}

// Pistache reserved as much memory as a request's Content-Length declared before any of the body
// came (a declared 10 TB took 10 TB of address space), and answered a Content-Length that is no
// number with a plain-text 500 naming a C++ exception ("stoull"). A number too long for 64 bits
// declares more than the limit too.
TEST_CASE("a declared Content-Length over the limit is 413 at once; one that is no number is 400") {
  Server server({"--max-request-bytes", "4096"});
  Api api(server, kTeamA);
  auto post = [&](const std::string& length) {
    return raw_exchange(server,
                        "POST /v1/webhook HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                            server.token(kTeamA) + "\r\nX-Tenant-ID: " + std::string(kTeamA) +
                            "\r\nContent-Type: application/json\r\nContent-Length: " + length +
                            "\r\n\r\n{}");
  };
  struct Row {
    std::string length;
    std::string status;  // the status line's start
    std::string detail;  // part of the problem's code and detail
  };
  const std::string too_large =
      R"("detail":"the request body exceeds 4096 bytes","code":"payload_too_large")";
  const std::string no_number =
      R"("detail":"Content-Length must be a decimal number of bytes","code":"bad_request")";
  for (const Row& row :
       {Row{"4097", "HTTP/1.1 413 ", too_large}, Row{"10000000000000", "HTTP/1.1 413 ", too_large},
        Row{"1000000000000000000", "HTTP/1.1 413 ", too_large},
        Row{"-5", "HTTP/1.1 400 ", no_number}, Row{"5abc", "HTTP/1.1 400 ", no_number},
        Row{"x", "HTTP/1.1 400 ", no_number},
        // Past 64 bits, a length all the same (it was a 400 saying it was no number).
        Row{"99999999999999999999", "HTTP/1.1 413 ", too_large},
        Row{"18446744073709551616", "HTTP/1.1 413 ", too_large},
        Row{"+5", "HTTP/1.1 400 ", no_number}, Row{"0x10", "HTTP/1.1 400 ", no_number},
        Row{"", "HTTP/1.1 400 ", no_number}}) {
    CAPTURE(row.length);
    const std::string got = post(row.length);
    CHECK(got.starts_with(row.status));
    CHECK(got.find("Content-Type: application/problem+json") != std::string::npos);
    CHECK(got.find("Connection: close") != std::string::npos);
    CHECK(got.find(row.detail) != std::string::npos);
  }
  // Blanks around the number are not part of it; the body it declares is read as before.
  CHECK(post(" 2 ").starts_with("HTTP/1.1 422 "));
  CHECK(total(api, kWebhook) == 0);
  CHECK(api.get("/healthz").status == 200);
  // Answered before the Api saw them, and counted like its own answers.
  const std::string text = metrics(server);
  CHECK(sample(text,
               R"(gatewayd_http_requests_total{route="create",kind="webhook",status="413"})") == 5);
  CHECK(sample(text,
               R"(gatewayd_http_requests_total{route="create",kind="webhook",status="400"})") == 6);
  CHECK(sample(text,
               R"(gatewayd_http_request_duration_seconds_count{route="create",kind="webhook"})") ==
        12);
}

// Pistache kept every connection open after a reply saying `Connection: close`, and went on
// reading requests from it: a client that sent another one got it applied and answered.
TEST_CASE("a reply that says Connection: close ends the connection; nothing sent after it is run") {
  Server server({"--max-request-bytes", "4096"});
  Api api(server, kTeamA);
  const std::string auth = "Authorization: Bearer " + server.token(kTeamA) +
                           "\r\nX-Tenant-ID: " + std::string(kTeamA) + "\r\n";
  // A create whose Content-Length is `length`, or the body's size if empty.
  auto create = [&](const std::string& more_headers, const std::string& body,
                    const std::string& length = "") {
    return "POST /v1/webhook HTTP/1.1\r\nHost: x\r\n" + auth +
           "Content-Type: application/json\r\nContent-Length: " +
           (length.empty() ? std::to_string(body.size()) : length) + "\r\n" + more_headers +
           "\r\n" + body;
  };
  const std::string valid = kWebhook.body(kTeamA, 1);
  struct Row {
    std::string name;
    std::string request;
    std::string status;  // the status line's start
  };
  for (const Row& row : {
           Row{"Connection: close", "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
               "HTTP/1.1 200 "},
           Row{"close as a later option",
               "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, Close\r\n\r\n",
               "HTTP/1.1 200 "},
           Row{"a create with Connection: close", create("Connection: close\r\n", valid),
               "HTTP/1.1 201 "},
           Row{"HTTP/1.0", "GET /healthz HTTP/1.0\r\n\r\n", "HTTP/1.1 200 "},
           Row{"a Content-Length that is no number", create("", "", "x"), "HTTP/1.1 400 "},
           Row{"a declared Content-Length over the limit", create("", "", "5000"), "HTTP/1.1 413 "},
           Row{"a body over the limit", create("", std::string(4097, ' ') + "{}"), "HTTP/1.1 413 "},
       }) {
    CAPTURE(row.name);
    const int fd = connect_with_timeout(server);
    const std::string reply = exchange_on(fd, row.request);
    CHECK(reply.starts_with(row.status));
    CHECK(reply.find("Connection: close") != std::string::npos);
    char byte = 0;
    // The end of the stream, right after the reply, whichever thread gave it (the create's
    // comes from the writer's thread); before, nothing came until the timeout.
    CHECK(::recv(fd, &byte, 1, 0) == 0);
    // A create sent on the same connection anyway is neither applied nor answered.
    CHECK(exchange_on(fd, create("", valid)).empty());
    ::close(fd);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(total(api, kWebhook) == 1);  // the row's own create
  // Keep-alive stays keep-alive: two requests on one connection, both answered.
  const int fd = connect_with_timeout(server);
  CHECK(exchange_on(fd, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").starts_with("HTTP/1.1 200 "));
  CHECK(exchange_on(fd, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").starts_with("HTTP/1.1 200 "));
  ::close(fd);
}

// RFC 9110 6.2: a server sends the highest version it conforms to whose major version is the
// request's. Pistache's status line repeated the request's version, and so did gatewayd's.
TEST_CASE("an HTTP/1.0 request is answered in HTTP/1.1; with keep-alive its connection stays") {
  Server server;
  const int fd = connect_with_timeout(server);
  for (int i = 0; i < 2; ++i) {
    CAPTURE(i);
    const std::string got =
        exchange_on(fd, "GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    CHECK(got.starts_with("HTTP/1.1 200 "));
    CHECK(got.find("Connection: keep-alive\r\n") != std::string::npos);
  }
  ::close(fd);
}

// The head of a request of kTeamA's whose body is chunked (a create of a webhook unless
// `method_path` says otherwise), with `more` header lines.
std::string chunked_head(const Server& server, std::string_view more = "",
                         std::string_view method_path = "POST /v1/webhook") {
  return std::string(method_path) + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
         server.token(kTeamA) + "\r\nX-Tenant-ID: " + std::string(kTeamA) +
         "\r\nContent-Type: application/json\r\n" + std::string(more) +
         "Transfer-Encoding: chunked\r\n\r\n";
}

// A chunk's size line: `size` in hex, then `extensions`.
std::string size_line(size_t size, std::string_view extensions = "") {
  char hex[32];
  std::snprintf(hex, sizeof hex, "%zx", size);
  return hex + std::string(extensions) + "\r\n";
}

// `line` without its CR.
std::string without_cr(std::string line) {
  line.erase(line.find('\r'), 1);
  return line;
}

// Pistache's decoder of chunked bodies spun for good on a chunk whose CRLF came split across two
// reads: one HTTP thread at 100% CPU, and the connections it served unanswered. gatewayd refused
// chunked bodies (501) from then on; it now reads them itself (RFC 9112 7.1: a server must).
TEST_CASE("a chunked body is read, also one whose CRLF comes split across two reads") {
  Server server({"--threads", "2"});
  Api api(server, kTeamA);
  for (int i = 0; i < 3; ++i) {  // so that both threads get one
    CAPTURE(i);
    const std::string workload = "wl-split-" + std::to_string(i);
    const std::string body = webhook_body(kTeamA, workload);
    const int fd = connect_with_timeout(server);
    const std::string first = chunked_head(server) + "5\r\n" + body.substr(0, 5) + "\r";
    CHECK(::send(fd, first.data(), first.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(first.size()));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const std::string rest = "\n" + size_line(body.size() - 5) + body.substr(5) + "\r\n0\r\n\r\n";
    const std::string reply = exchange_on(fd, rest);
    CHECK(reply.starts_with("HTTP/1.1 201 "));
    // The body's end is known, so the connection stays, and serves the next request.
    CHECK(reply.find("Connection: close") == std::string::npos);
    CHECK(exchange_on(fd, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").starts_with("HTTP/1.1 200 "));
    const Response got = api.get("/v1/webhook/" + created_id(reply, "webhook_id"));
    REQUIRE(got.status == 200);
    CHECK(str(json(got), "workload_id") == workload);
    ::close(fd);
  }
  // Every new connection is answered, whichever thread it lands on.
  for (int i = 0; i < 6; ++i) {
    CAPTURE(i);
    CHECK(raw_exchange(server, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
              .starts_with("HTTP/1.1 200 "));
  }
  CHECK(total(api, kWebhook) == 3);
}

TEST_CASE(
    "a chunked body sent a chunk at a time, with extensions and trailers, is what is stored") {
  Server server;
  Api api(server, kTeamA);
  const std::string body = webhook_body(kTeamA, "wl-chunked");
  const int fd = connect_with_timeout(server);
  const std::string head = chunked_head(server, "Expect: 100-continue\r\n");
  REQUIRE(::send(fd, head.data(), head.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(head.size()));
  // The client asked to be told to go on: it is, once, before the first chunk.
  const std::string interim = "HTTP/1.1 100 Continue\r\n\r\n";
  std::string got(interim.size(), '\0');
  CHECK(::recv(fd, got.data(), got.size(), MSG_WAITALL) == static_cast<ssize_t>(got.size()));
  CHECK(got == interim);
  // Chunks of 7 bytes, each in a write of its own; some with extensions, which are ignored.
  for (size_t at = 0; at < body.size(); at += 7) {
    const std::string piece = body.substr(at, 7);
    const std::string chunk =
        size_line(piece.size(), at % 14 == 0 ? ";n=\"quoted; \\\"ext\\\"\"" : "") + piece + "\r\n";
    REQUIRE(::send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(chunk.size()));
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  // Trailer fields are dropped: one named as a header gatewayd reads stands for nothing.
  const std::string reply =
      exchange_on(fd, "0\r\nX-Checksum: abc\r\nX-Tenant-ID: " + std::string(kTeamB) + "\r\n\r\n");
  CHECK(reply.starts_with("HTTP/1.1 201 "));
  const std::string id = created_id(reply, "webhook_id");
  const Response stored = api.get("/v1/webhook/" + id);
  REQUIRE(stored.status == 200);
  CHECK(str(json(stored), "workload_id") == "wl-chunked");
  CHECK(str(json(stored), "team_id") == std::string(kTeamA));
  // The connection goes on: an update whose chunked body comes whole, with its head.
  const std::string update = webhook_body(kTeamA, "wl-renamed");
  const std::string put = chunked_head(server, "", "PUT /v1/webhook/" + id) +
                          size_line(update.size()) + update + "\r\n0\r\n\r\n";
  CHECK(exchange_on(fd, put).starts_with("HTTP/1.1 200 "));
  CHECK(str(json(api.get("/v1/webhook/" + id)), "workload_id") == "wl-renamed");
  ::close(fd);
}

// Each read of a chunked body is read on from where the last one stopped, and the head is read
// again only once the body has ended; the request's last read reads its last part again.
TEST_CASE("a chunked request sent a byte at a time is served as it would be sent whole") {
  Server server;
  Api api(server, kTeamA);
  const std::string body = webhook_body(kTeamA, "wl-bytes");
  const std::string request = chunked_head(server) + size_line(40, ";x=\"y\"") +
                              body.substr(0, 40) + "\r\n" + size_line(body.size() - 40) +
                              body.substr(40) + "\r\n0\r\nT: v\r\n\r\n";
  const int fd = connect_with_timeout(server);
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  const size_t head = request.find("\r\n\r\n") + 4;
  REQUIRE(::send(fd, request.data(), head, MSG_NOSIGNAL) == static_cast<ssize_t>(head));
  for (size_t at = head; at + 1 < request.size(); ++at) {
    REQUIRE(::send(fd, request.data() + at, 1, MSG_NOSIGNAL) == 1);
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  const std::string reply = exchange_on(fd, request.substr(request.size() - 1));
  CHECK(reply.starts_with("HTTP/1.1 201 "));
  ::close(fd);
  const Response stored = api.get("/v1/webhook/" + created_id(reply, "webhook_id"));
  REQUIRE(stored.status == 200);
  CHECK(str(json(stored), "workload_id") == "wl-bytes");
  CHECK(total(api, kWebhook) == 1);
}

// Sends `first` on a new connection, and `later` 100 ms after it unless it is empty: the answer
// must be `status` with `detail_part` in it and `Connection: close`, and the connection end.
void check_refused(const Server& server, const std::string& first, const std::string& later,
                   const std::string& status, const std::string& detail_part) {
  const int fd = connect_with_timeout(server);
  std::string reply;
  if (later.empty()) {
    reply = exchange_on(fd, first);
  } else {
    REQUIRE(::send(fd, first.data(), first.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(first.size()));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    reply = exchange_on(fd, later);
  }
  CHECK(reply.starts_with("HTTP/1.1 " + status + " "));
  CHECK(reply.find(detail_part) != std::string::npos);
  CHECK(reply.find("Connection: close") != std::string::npos);
  char byte = 0;
  CHECK(::recv(fd, &byte, 1, 0) == 0);
  ::close(fd);
}

// What gatewayd does not read as a chunked body is refused before anything runs, and the
// connection ends: where the body ends is not known (or not what a proxy in front may think).
TEST_CASE("a chunked body gatewayd cannot read is refused, and nothing is created") {
  Server server({"--max-request-bytes", "4096"});
  Api api(server, kTeamA);
  const std::string body = kWebhook.body(kTeamA, 1);
  const std::string whole = size_line(body.size()) + body + "\r\n0\r\n\r\n";
  struct Row {
    std::string name;
    std::string request;
    std::string status;
    std::string detail_part;
  };
  for (const Row& row : {
           Row{"Content-Length too", chunked_head(server, "Content-Length: 4\r\n") + whole, "400",
               "both a Transfer-Encoding and a Content-Length"},
           Row{"a coding before chunked",
               chunked_head(server, "Transfer-Encoding: gzip\r\n") + whole, "501",
               "the transfer coding gzip is not supported"},
           Row{"a bare LF",
               chunked_head(server) + without_cr(size_line(body.size())) + body + "\r\n0\r\n\r\n",
               "400", "bare LF"},
           Row{"data longer than its size", chunked_head(server) + "5\r\n" + body + "\r\n0\r\n\r\n",
               "400", "must be followed by CRLF"},
           Row{"data over --max-request-bytes", chunked_head(server) + "1001\r\n", "413",
               "the request body exceeds 4096 bytes"},
           Row{"data over it in chunks",
               chunked_head(server) + "800\r\n" + std::string(2048, ' ') + "\r\n801\r\n", "413",
               "the request body exceeds 4096 bytes"},
       }) {
    CAPTURE(row.name);
    check_refused(server, row.request, "", row.status, row.detail_part);
  }
  CHECK(total(api, kWebhook) == 0);
}

// The held request's reading finds the problem in a read after its head's (server.cc reads a held
// chunked body on without its head, then reads the head again to refuse it).
TEST_CASE("a chunked body whose problem comes in a later read is refused there") {
  Server server;
  Api api(server, kTeamA);
  struct Row {
    std::string name;
    std::string later;  // sent after the head and `5\r\nhello`
    std::string status;
    std::string detail_part;
  };
  for (const Row& row : {
           Row{"data longer than its size", "X\r\n0\r\n\r\n", "400", "must be followed by CRLF"},
           Row{"a blank after a size", "\r\n5 \r\n", "400", "nothing but chunk extensions"},
           Row{"a bare LF", "\r\n5\n", "400", "bare LF"},
           Row{"data past the limit", "\r\n100000\r\n", "413", "the request body exceeds"},
       }) {
    CAPTURE(row.name);
    check_refused(server, chunked_head(server) + "5\r\nhello", row.later, row.status,
                  row.detail_part);
  }
  CHECK(total(api, kWebhook) == 0);
}

// The end of a chunked body is where the next request starts: one sent right behind it in the
// same read is a pipelined request (answered after it, as behind a Content-Length body), and an
// empty line there is no request.
TEST_CASE("what follows a chunked body in its read: a pipelined request, or an empty line") {
  Server server;
  Api api(server, kTeamA);
  auto create = [&](std::string_view workload) {
    const std::string body = webhook_body(kTeamA, workload);
    return chunked_head(server) + size_line(body.size()) + body + "\r\n0\r\n\r\n";
  };
  const int fd = connect_with_timeout(server);
  const std::string sent = create("wl-first") + "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
  REQUIRE(::send(fd, sent.data(), sent.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(sent.size()));
  const std::vector<std::string> answers = read_responses(fd, 2);
  REQUIRE(answers.size() == 2);
  CHECK(answers[0].starts_with("HTTP/1.1 201 "));
  CHECK(answers[0].find("Connection: keep-alive") != std::string::npos);
  CHECK(answers[1].starts_with("HTTP/1.1 200 "));
  ::close(fd);
  // A CRLF after the body, as some clients send: the connection stays, and serves the next.
  const int other = connect_with_timeout(server);
  const std::string created = exchange_on(other, create("wl-second") + "\r\n");
  CHECK(created.starts_with("HTTP/1.1 201 "));
  CHECK(created.find("Connection: close") == std::string::npos);
  CHECK(
      exchange_on(other, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").starts_with("HTTP/1.1 200 "));
  ::close(other);
  CHECK(total(api, kWebhook) == 2);
}

// A real client's chunked upload: libcurl sends a body whose size it is not told in the chunked
// coding, a chunk for each piece its read callback gives.
TEST_CASE("libcurl's chunked upload creates the record") {
  Server server;
  Api api(server, kTeamA);
  const std::string body = webhook_body(kTeamA, "wl-from-curl");
  std::vector<std::string> chunks;
  for (size_t at = 0; at < body.size(); at += 10) chunks.push_back(body.substr(at, 10));
  const Response created =
      api.http().request_chunked("POST", server.url() + "/v1/webhook",
                                 {{"Authorization", "Bearer " + server.token(kTeamA)},
                                  {"X-Tenant-ID", std::string(kTeamA)},
                                  {"Content-Type", "application/json"}},
                                 chunks);
  REQUIRE(created.status == 201);
  // It went chunked: the header, and each piece as a chunk of its own (10 bytes: `a`).
  CAPTURE(created.sent);
  CHECK(created.sent.find("\r\nTransfer-Encoding: chunked\r\n") != std::string::npos);
  CHECK(created.sent.find("Content-Length") == std::string::npos);
  CHECK(created.sent.find("\r\n\r\na\r\n" + chunks[0] + "\r\na\r\n" + chunks[1] + "\r\n") !=
        std::string::npos);
  CHECK(created.sent.ends_with("\r\n0\r\n\r\n"));
  const std::string id = str(json(created), "webhook_id");
  CHECK(str(json(api.get("/v1/webhook/" + id)), "workload_id") == "wl-from-curl");
}

// RFC 9110 6.6.1: an origin server with a clock sends Date in every 2xx, 3xx and 4xx answer. None
// had one.
TEST_CASE("every answer carries a Date header with the time it was sent") {
  Server server;
  Api api(server, kTeamA);
  auto check_sent_now = [](auto send) {
    const int64_t before = unix_now();
    const std::optional<std::string> date = send();
    const int64_t after = unix_now();
    REQUIRE(date.has_value());
    bool now = false;
    for (int64_t t = before; t <= after; ++t) now = now || *date == http_date(t);
    CHECK_MESSAGE(now, "Date: ", *date);
  };
  for (const std::string path : {"/healthz", "/metrics", "/openapi.json", "/v1/nope"}) {
    CAPTURE(path);
    check_sent_now([&] { return api.http().request("GET", server.url() + path).header("Date"); });
  }
  check_sent_now([&] { return api.get("/v1/webhook").header("Date"); });
  check_sent_now(
      [&] { return api.post("/v1/webhook", webhook_body(kTeamA, "wl-date")).header("Date"); });
  check_sent_now([&] { return api.post("/v1/webhook", "{}").header("Date"); });  // 422
  check_sent_now([&] {
    return api.http().request("GET", server.url() + "/v1/webhook").header("Date");  // 401
  });
  // A head refused before it was read whole (400), as gatewayd writes it itself.
  check_sent_now([&]() -> std::optional<std::string> {
    const std::string reply =
        raw_exchange(server, "GET /healthz HTTP/1.1\r\nHost: x\r\nBad\r\n\r\n");
    CHECK(reply.starts_with("HTTP/1.1 400 "));
    const size_t at = reply.find("\r\nDate: ");
    if (at == std::string::npos) return std::nullopt;
    const size_t start = at + 8;
    return reply.substr(start, reply.find("\r\n", start) - start);
  });
}

// Pistache parsed a request's head again from its start each time more of it came, so a head of
// megabytes sent in pieces kept an HTTP thread busy for minutes (no token needed), and it took
// heads of up to 17 MiB.
TEST_CASE("a request head over 64 KiB is 431 and ends the connection; one under it is served") {
  Server server;
  auto head_with = [](size_t header_bytes) {
    return "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(header_bytes, 'a') +
           "\r\n\r\n";
  };
  for (const std::string& request :
       {head_with(70'000), "GET /healthz HTTP/1.1\r\nHost: x\r\n" + std::string(70'000, 'a')}) {
    CAPTURE(request.size());
    const int fd = connect_with_timeout(server);
    const std::string reply = exchange_on(fd, request);
    CHECK(reply.starts_with("HTTP/1.1 431 "));
    CHECK(reply.find("Content-Type: application/problem+json") != std::string::npos);
    CHECK(reply.find(R"("code":"headers_too_large")") != std::string::npos);
    char byte = 0;
    CHECK(::recv(fd, &byte, 1, 0) == 0);
    ::close(fd);
  }
  // A head just under the limit, sent in 400 pieces, is held until it has all come.
  const int fd = connect_with_timeout(server);
  const std::string request = head_with(64'000);
  const size_t piece = request.size() / 400 + 1;
  for (size_t at = 0; at + piece < request.size(); at += piece) {
    CHECK(::send(fd, request.data() + at, piece, MSG_NOSIGNAL) == static_cast<ssize_t>(piece));
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  const std::string last = request.substr(request.size() / piece * piece);
  CHECK(exchange_on(fd, last).starts_with("HTTP/1.1 200 "));
  CHECK(exchange_on(fd, head_with(10)).starts_with("HTTP/1.1 200 "));  // and stays open
  ::close(fd);
  CHECK(sample(metrics(server), R"(gatewayd_http_requests_total{route="/healthz",status="431"})") ==
        2);
}

// RFC 9112 3: a request-target longer than the server takes is 414. It was 431, which tells the
// client to shorten its headers (helper 170).
TEST_CASE("a request line over 64 KiB is 414 and ends the connection") {
  Server server;
  for (const std::string& request :
       {"GET /healthz?" + std::string(70'000, 'a') + " HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET /v1/webhook/whk_" + std::string(70'000, 'A')}) {
    CAPTURE(request.size());
    const int fd = connect_with_timeout(server);
    const std::string reply = exchange_on(fd, request);
    CHECK(reply.starts_with("HTTP/1.1 414 "));
    CHECK(reply.find(R"("code":"uri_too_long")") != std::string::npos);
    CHECK(reply.find("the request line exceeds 65523 bytes: send a shorter target") !=
          std::string::npos);
    CHECK(reply.find("\r\nCache-Control: no-cache, private\r\n") != std::string::npos);
    char byte = 0;
    CHECK(::recv(fd, &byte, 1, 0) == 0);
    ::close(fd);
  }
  // At the limit: a line that leaves room for `Host: x` is read (and this one's query refused);
  // one byte more is 414.
  const std::string path = "/healthz?";
  auto line_of = [&](size_t bytes) {
    return "GET " + path + std::string(bytes - 4 - path.size() - 9, 'a') + " HTTP/1.1";
  };
  REQUIRE(line_of(65'523).size() == 65'523);
  CHECK(raw_exchange(server, line_of(65'523) + "\r\nHost: x\r\n\r\n").starts_with("HTTP/1.1 400 "));
  CHECK(raw_exchange(server, line_of(65'524) + "\r\nHost: x\r\n\r\n").starts_with("HTTP/1.1 414 "));
  // A request line that fits, with headers that take the head over the limit, is 431.
  const std::string head = "GET /healthz?" + std::string(60'000, 'a') +
                           " HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(6'000, 'b') + "\r\n\r\n";
  CHECK(raw_exchange(server, head).starts_with("HTTP/1.1 431 "));
}

// RFC 9111 4.2.2 lets a cache reuse a 200, 404, 405 or 501 without an expiry for as long as it
// guesses, so a shared cache in front could answer /readyz 200 after writes stopped (helper 170).
TEST_CASE("every answer says no shared cache may keep it and a client's must revalidate it") {
  Server server;
  Api api(server, kTeamA);
  Response made = api.post("/v1/webhook", webhook_body(kTeamA, "cached"));
  REQUIRE(made.status == 201);
  const std::string id = str(json(made), "webhook_id");
  testing::HttpClient client;
  for (const Response& r :
       {made, api.get("/v1/webhook/" + id), api.get("/v1/webhook"), api.get("/v1/webhook/whk_x"),
        api.get("/v1/webhook/" + id, {{"If-None-Match", made.header("ETag").value_or("")}}),
        client.request("GET", server.url() + "/readyz"),
        client.request("GET", server.url() + "/metrics"),
        client.request("DELETE", server.url() + "/healthz"),
        client.request("HEAD", server.url() + "/readyz")}) {
    CAPTURE(r.status);
    CHECK(r.header_values("Cache-Control") == std::vector<std::string>{"no-cache, private"});
  }
  CHECK(raw_exchange(server, "GET /healthz HTTP/1.1\r\nHost: x\r\nBad\r\n\r\n")
            .find("\r\nCache-Control: no-cache, private\r\n") != std::string::npos);
}

// Pistache ignored a header with a blank before its colon or at the start of its line, kept the
// first of two different Content-Lengths and read a bare LF as part of a value: so it could take
// a request as bodiless and run its body as a request of its own, where a proxy in front, or the
// RFC, sees one request. It also let control bytes and a missing or doubled Host through, and
// answered a malformed request line with plain text, or nothing at all.
TEST_CASE(
    "a head a server must refuse is 400, 501 or 505 and ends the connection; its body never runs") {
  Server server;
  Api api(server, kTeamA);
  const std::string auth = "Authorization: Bearer " + server.token(kTeamA) +
                           "\r\nX-Tenant-ID: " + std::string(kTeamA) + "\r\n";
  const std::string body = kWebhook.body(kTeamA, 1);
  // A whole create of its own, sent as the body of the refused request.
  const std::string inner =
      "POST /v1/webhook HTTP/1.1\r\nHost: x\r\n" + auth +
      "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
      "\r\n\r\n" + body;
  const std::string length = std::to_string(inner.size());
  const std::string post = "POST /v1/webhook HTTP/1.1\r\n";
  const std::string typed = auth + "Content-Type: application/json\r\n";
  struct Row {
    std::string name;
    std::string head;
    std::string status = "400";
    std::string code = "bad_request";
  };
  for (const Row& row : {
           Row{"a blank before the colon",
               post + "Host: x\r\n" + typed + "Content-Length : " + length + "\r\n\r\n"},
           Row{"a tab before the colon",
               post + "Host: x\r\n" + typed + "Content-Length\t: " + length + "\r\n\r\n"},
           Row{"a folded line",
               post + "Host: x\r\n" + typed + "X-A: b\r\n Content-Length: " + length + "\r\n\r\n"},
           Row{"two different Content-Lengths",
               post + "Host: x\r\n" + typed + "Content-Length: 0\r\nContent-Length: " + length +
                   "\r\n\r\n"},
           Row{"a bare LF",
               post + "Host: x\r\n" + typed + "X-A: b\nContent-Length: " + length + "\r\n\r\n"},
           // No CRLF at all: before, no head end was ever found, and the client waited for the
           // connection's 60 s timer.
           Row{"only bare LFs",
               "POST /v1/webhook HTTP/1.1\nHost: x\nContent-Length: " + length + "\n\n"},
           Row{"a NUL in a value", "GET /v1/webhook HTTP/1.1\r\nHost: x\r\n" + auth + "X-A: a" +
                                       std::string(1, '\0') + "b\r\n\r\n"},
           Row{"no Host", "GET /v1/webhook HTTP/1.1\r\n" + auth + "\r\n"},
           Row{"two Hosts", "GET /v1/webhook HTTP/1.1\r\nHost: x\r\nHost: y\r\n" + auth + "\r\n"},
           Row{"a Host that is no host",
               "GET /v1/webhook HTTP/1.1\r\nHost: a b/c\r\n" + auth + "\r\n"},
           Row{"a header line with no colon",
               "GET /v1/webhook HTTP/1.1\r\nHost: x\r\nX-A\r\n" + auth + "\r\n"},
           // RFC 9110 15.6.2 and 15.6.6 (both were 400; helper 99).
           Row{"an unknown method",
               "PURGE /v1/webhook HTTP/1.1\r\nHost: x\r\n" + typed + "Content-Length: " + length +
                   "\r\n\r\n",
               "501", "not_implemented"},
           Row{"a lower-case method",
               "post /v1/webhook HTTP/1.1\r\nHost: x\r\n" + typed + "Content-Length: " + length +
                   "\r\n\r\n",
               "501", "not_implemented"},
           Row{"HTTP/2.0",
               "POST /v1/webhook HTTP/2.0\r\nHost: x\r\n" + typed + "Content-Length: " + length +
                   "\r\n\r\n",
               "505", "http_version_not_supported"},
           Row{"a version of no digits", "GET /v1/webhook HTTP/1.x\r\nHost: x\r\n" + auth + "\r\n"},
           // RFC 9112 3.2 (these were 404, the last one served; helper 99).
           Row{"a target with no '/'", "GET v1/webhook HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n"},
           Row{"a fragment", "GET /v1/webhook#a HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n"},
           Row{"user information", "POST http://u@x/v1/webhook HTTP/1.1\r\nHost: x\r\n" + typed +
                                       "Content-Length: " + length + "\r\n\r\n"},
           Row{"a control byte in the target",
               "GET /v1/webhook\x01 HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n"},
           // A proxy in front may have read the other line of these (before: the first counted).
           Row{"two X-Tenant-IDs", post + "Host: x\r\n" + typed +
                                       "X-Tenant-ID: " + std::string(kTeamB) +
                                       "\r\nContent-Length: " + length + "\r\n\r\n"},
           Row{"two Authorizations", post + "Host: x\r\n" + typed +
                                         "Authorization: Bearer nope\r\nContent-Length: " + length +
                                         "\r\n\r\n"},
           Row{"two Content-Types", post + "Host: x\r\n" + typed +
                                        "Content-Type: text/plain\r\nContent-Length: " + length +
                                        "\r\n\r\n"},
           Row{"two Idempotency-Keys", post + "Host: x\r\n" + typed +
                                           "Idempotency-Key: a\r\nIdempotency-Key: b\r\n"
                                           "Content-Length: " +
                                           length + "\r\n\r\n"},
       }) {
    CAPTURE(row.name);
    const int fd = connect_with_timeout(server);
    const std::string reply = exchange_on(fd, row.head);
    CHECK(reply.starts_with("HTTP/1.1 " + row.status + " "));
    CHECK(reply.find("Content-Type: application/problem+json") != std::string::npos);
    CHECK(reply.find(R"("code":")" + row.code + "\"") != std::string::npos);
    CHECK(reply.find("Connection: close") != std::string::npos);
    // The connection ends: a body sent after the head is never read.
    CHECK(exchange_on(fd, inner).empty());
    ::close(fd);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(total(api, kWebhook) == 0);
  // One Content-Length given twice with the same value is taken.
  const int fd = connect_with_timeout(server);
  CHECK(exchange_on(
            fd, post + "Host: x\r\n" + typed + "Content-Length: " + std::to_string(body.size()) +
                    "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body)
            .starts_with("HTTP/1.1 201 "));
  ::close(fd);
  CHECK(total(api, kWebhook) == 1);
  // A later minor version of HTTP/1 is served as HTTP/1.1 (RFC 9110 6.2; it was 400).
  const std::string later = raw_exchange(
      server, "GET /v1/webhook HTTP/1.2\r\nHost: x\r\n" + auth + "Connection: close\r\n\r\n");
  CHECK(later.starts_with("HTTP/1.1 200 "));
  CHECK(later.find(R"("total":1)") != std::string::npos);
}

// gatewayd reads requests itself: a head and a body may come in any number of reads.
// RFC 9112 2.2: empty lines before a request line are skipped. One whose CR came at the end of a
// read and its LF at the start of the next was taken for the start of the request: 400.
TEST_CASE("an empty line before a request, split between two reads, is skipped") {
  Server server;
  const int fd = connect_with_timeout(server);
  REQUIRE(::send(fd, "\r", 1, MSG_NOSIGNAL) == 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // read on its own
  CHECK(exchange_on(fd, "\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            .starts_with("HTTP/1.1 200 "));
  REQUIRE(::send(fd, "\r", 1, MSG_NOSIGNAL) == 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  REQUIRE(::send(fd, "\n", 1, MSG_NOSIGNAL) == 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(exchange_on(fd, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").starts_with("HTTP/1.1 200 "));
  ::close(fd);
}

// The same with the CR at the end of the read that held a whole request: it was dropped, and the
// LF that began the next read was taken for the start of the next request (400, "not a bare LF";
// helper 38), with or without a body before it.
TEST_CASE("an empty line after a request, split between two reads, is skipped") {
  Server server;
  Api api(server, kTeamA);
  const std::string get = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
  const int fd = connect_with_timeout(server);
  CHECK(exchange_on(fd, get + "\r").starts_with("HTTP/1.1 200 "));
  CHECK(exchange_on(fd, "\n" + get).starts_with("HTTP/1.1 200 "));
  // The LF in a read of its own.
  CHECK(exchange_on(fd, get + "\r\n\r").starts_with("HTTP/1.1 200 "));
  REQUIRE(::send(fd, "\n", 1, MSG_NOSIGNAL) == 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(exchange_on(fd, get).starts_with("HTTP/1.1 200 "));
  // After a create's body.
  const std::string post = raw_post(server, kTeamA, "/v1/webhook", kWebhook.body(kTeamA, 1));
  CHECK(exchange_on(fd, post + "\r").starts_with("HTTP/1.1 201 "));
  CHECK(exchange_on(fd, "\n" + get).starts_with("HTTP/1.1 200 "));
  ::close(fd);
  CHECK(total(api, kWebhook) == 1);
}

TEST_CASE("a request that comes in pieces is served once it has all come") {
  Server server;
  Api api(server, kTeamA);
  const std::string body = kWebhook.body(kTeamA, 1);
  const std::string request = raw_post(server, kTeamA, "/v1/webhook", body);
  const size_t head_bytes = request.size() - body.size();
  // Where the request is cut: inside the request line, inside the empty line that ends the head,
  // right after the head, inside the body; each piece is its own read.
  const std::vector<std::vector<size_t>> cuts = {
      {5},
      {head_bytes - 3},
      {head_bytes},
      {head_bytes + 7},
      {3, 40, head_bytes - 1, head_bytes + 1, request.size() - 1},
  };
  for (const auto& at : cuts) {
    CAPTURE(at.size());
    CAPTURE(at.front());
    const int fd = connect_with_timeout(server);
    size_t from = 0;
    for (size_t cut : at) {
      REQUIRE(::send(fd, request.data() + from, cut - from, MSG_NOSIGNAL) ==
              static_cast<ssize_t>(cut - from));
      from = cut;
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
    }
    const std::string reply = exchange_on(fd, request.substr(from));
    CHECK(reply.starts_with("HTTP/1.1 201 "));
    CHECK(reply.find("Connection: keep-alive") != std::string::npos);
    // The connection goes on: the next request on it is served.
    CHECK(exchange_on(fd, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").starts_with("HTTP/1.1 200 "));
    ::close(fd);
  }
  CHECK(total(api, kWebhook) == static_cast<int64_t>(cuts.size()));
  // Empty lines around a request are not a request (RFC 9112 2.2): the connection goes on.
  const int fd = connect_with_timeout(server);
  const std::string reply = exchange_on(fd, "\r\n" + request + "\r\n");
  CHECK(reply.starts_with("HTTP/1.1 201 "));
  CHECK(reply.find("Connection: keep-alive") != std::string::npos);
  CHECK(exchange_on(fd, "\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            .starts_with("HTTP/1.1 200 "));
  ::close(fd);
  CHECK(total(api, kWebhook) == static_cast<int64_t>(cuts.size()) + 1);
}

// Pistache never answered `Expect: 100-continue`: curl, which sends it for larger bodies, waited a
// second before it sent the body anyway.
TEST_CASE("Expect: 100-continue gets a 100 (Continue) once the head has come") {
  Server server;
  Api api(server, kTeamA);
  const std::string body = kWebhook.body(kTeamA, 1);
  const std::string request =
      raw_post(server, kTeamA, "/v1/webhook", body, "Expect: 100-continue\r\n");
  const std::string head = request.substr(0, request.size() - body.size());
  const int fd = connect_with_timeout(server);
  REQUIRE(::send(fd, head.data(), head.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(head.size()));
  const std::string interim = "HTTP/1.1 100 Continue\r\n\r\n";
  std::string got(interim.size(), '\0');
  CHECK(::recv(fd, got.data(), got.size(), MSG_WAITALL) == static_cast<ssize_t>(got.size()));
  CHECK(got == interim);
  const std::string reply = exchange_on(fd, body);
  CHECK(reply.starts_with("HTTP/1.1 201 "));
  // A request whose body came with its head gets no 100: its answer is the first thing read.
  CHECK(exchange_on(fd, head + body).starts_with("HTTP/1.1 201 "));
  ::close(fd);
  CHECK(total(api, kWebhook) == 2);
}

// Pistache ran the first request of a read and dropped the bytes after it, and read whatever came
// next as the start of a new request (a body that came in a read of its own could run as a
// request). gatewayd then answered the first with `Connection: close` and ended the connection,
// and the client had to send the rest again on a new one. Each request of a pipeline is now read
// once the answer to the one before it is on its way, and answered in its turn (RFC 9112 9.3.2).
TEST_CASE("pipelined requests are each run and answered in their order; the connection stays") {
  Server server;
  Api api(server, kTeamA);
  const std::string auth = "Authorization: Bearer " + server.token(kTeamA) +
                           "\r\nX-Tenant-ID: " + std::string(kTeamA) + "\r\n";
  auto create = [&](int n) {
    return raw_post(server, kTeamA, "/v1/webhook", kWebhook.body(kTeamA, n));
  };
  const std::string list = "GET /v1/webhook HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n";
  const std::string health = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
  const int fd = connect_with_timeout(server);
  // In one write: each list sees the creates before it, and none after it.
  const std::string sent = health + create(1) + list + "\r\n" + create(2) + list + health;
  REQUIRE(::send(fd, sent.data(), sent.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(sent.size()));
  const std::vector<std::string> answers = read_responses(fd, 6);
  REQUIRE(answers.size() == 6);
  const std::vector<std::string> statuses = {"200", "201", "200", "201", "200", "200"};
  for (size_t i = 0; i < answers.size(); ++i) {
    CAPTURE(i);
    CAPTURE(answers[i].substr(0, 300));
    CHECK(answers[i].starts_with("HTTP/1.1 " + statuses[i] + " "));
    CHECK(answers[i].find("Connection: keep-alive") != std::string::npos);
  }
  CHECK(answers[2].find(R"("total":1)") != std::string::npos);
  CHECK(answers[4].find(R"("total":2)") != std::string::npos);
  CHECK(answers[5].ends_with(R"({"status":"ok"})"));
  // A request whose start came behind another's: the rest of it completes it.
  const std::string fourth = create(4);
  const std::string start = create(3) + fourth.substr(0, 1);
  REQUIRE(::send(fd, start.data(), start.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(start.size()));
  CHECK(read_response(fd).starts_with("HTTP/1.1 201 "));
  CHECK(exchange_on(fd, fourth.substr(1)).starts_with("HTTP/1.1 201 "));
  ::close(fd);
  CHECK(total(api, kWebhook) == 4);
}

// Requests pipelined past what one read of gatewayd's takes (4 KiB), each with an answer of its
// own: 300 lookups of distinct ids, answered in the order sent.
TEST_CASE("a long pipeline is answered in the order of its requests") {
  Server server;
  const std::string auth = "Authorization: Bearer " + server.token(kTeamA) +
                           "\r\nX-Tenant-ID: " + std::string(kTeamA) + "\r\n";
  std::string sent;
  for (int i = 0; i < 300; ++i) {
    sent += "GET /v1/webhook/wh_" + std::to_string(i) + " HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n";
  }
  const int fd = connect_with_timeout(server);
  REQUIRE(::send(fd, sent.data(), sent.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(sent.size()));
  const std::vector<std::string> answers = read_responses(fd, 300);
  REQUIRE(answers.size() == 300);
  for (size_t i = 0; i < answers.size(); ++i) {
    CAPTURE(i);
    CHECK(answers[i].starts_with("HTTP/1.1 404 "));
    CHECK(answers[i].find("webhook wh_" + std::to_string(i) + " not found") != std::string::npos);
  }
  CHECK(exchange_on(fd, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").starts_with("HTTP/1.1 200 "));
  ::close(fd);
}

// The server's end of the connection whose client's end is `fd`: a copy of gatewayd's socket in
// this process (pidfd_getfd, called as a system call: Debian 12's <sys/pidfd.h> declares it without
// C linkage), found by its peer's port; -1 if none is found.
int server_end_of(const Server& server, int fd) {
  sockaddr_in mine{};
  socklen_t size = sizeof mine;
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&mine), &size) == 0);
  const auto process = static_cast<int>(::syscall(SYS_pidfd_open, server.pid(), 0));
  REQUIRE(process >= 0);
  int found = -1;
  for (const auto& entry :
       std::filesystem::directory_iterator("/proc/" + std::to_string(server.pid()) + "/fd")) {
    const auto copy = static_cast<int>(
        ::syscall(SYS_pidfd_getfd, process, std::stoi(entry.path().filename().string()), 0));
    if (copy < 0) continue;
    sockaddr_in peer{};
    size = sizeof peer;
    if (::getpeername(copy, reinterpret_cast<sockaddr*>(&peer), &size) == 0 &&
        peer.sin_family == AF_INET && peer.sin_port == mine.sin_port) {
      found = copy;
      break;
    }
    ::close(copy);
  }
  ::close(process);
  return found;
}

// gatewayd's sockets did not turn off Nagle's algorithm: of two answers to a pipeline, the second
// waited for the client to acknowledge the first, which a client that has nothing to send does
// only after its delayed-ACK timer (44 ms for two pipelined GETs, 0.1 ms for one; helper 132).
TEST_CASE("the connections gatewayd accepts send without Nagle's delay (TCP_NODELAY)") {
  Server server;
  const int fd = connect_with_timeout(server);
  REQUIRE(exchange_on(fd, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").starts_with("HTTP/1.1 200 "));
  const int server_end = server_end_of(server, fd);
  REQUIRE(server_end >= 0);
  int nodelay = 0;
  socklen_t size = sizeof nodelay;
  REQUIRE(::getsockopt(server_end, IPPROTO_TCP, TCP_NODELAY, &nodelay, &size) == 0);
  CHECK(nodelay == 1);
  ::close(server_end);
  ::close(fd);
}

// An HTTP thread delivered the answers queued for it in one loop that took each answer queued
// meanwhile too, and delivering one gave its connection the request held behind it, whose answer
// was queued at once: one connection's pipeline was served whole before any other connection of
// that thread was read (helper 132: 60 MB of pipelined GETs held a probe for 6.4 s). A pipeline is
// now read only as it is served (pause_while_held), a read's worth at a time, and served a request
// a turn of the thread's loop (drain). Here, on one HTTP thread, 20,000 GETs are sent behind a
// create whose answer waits (its WAF check is stopped); once it comes, another connection asks for
// /metrics until the pipeline has begun: the first such answer counted all 20,000 served before
// both changes, and now counts a few. (It counts a few with the pause alone too: that drain()
// serves one request a turn, rather than a read's worth, was measured by hand, not here: a probe
// beside a pipeline of 300,000 GETs waited 0.2 ms at the median with it, 4.2 ms without.)
TEST_CASE("a long pipeline does not hold back the other connections of its HTTP thread") {
  Server server({"--threads", "1"});
  const std::string health = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
  constexpr size_t kPipelined = 20000;  // 700 KB
  std::string pipeline;
  for (size_t i = 0; i < kPipelined; ++i) pipeline += health;
  const std::string counter = R"(gatewayd_http_requests_total{route="/healthz",status="200"})";
  const pid_t zygote = stop_zygote(server);
  const int fd = connect_with_timeout(server);
  timeval long_wait{60, 0};  // a WAF check under a sanitizer on a loaded machine
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &long_wait, sizeof long_wait);
  send_until_read(
      server, fd,
      raw_post(server, kTeamA, "/v1/gateway_security_profile", custom_waf_body(kTeamA, "first")));
  // Sent while the answer waits; gatewayd reads it as it serves it (pause_reading).
  std::thread sender([&] {
    CHECK(::send(fd, pipeline.data(), pipeline.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(pipeline.size()));
  });
  std::vector<std::string> answers;
  std::thread reader([&] { answers = read_responses(fd, kPipelined + 1); });
  const int other = connect_with_timeout(server);
  REQUIRE(::kill(zygote, SIGCONT) == 0);
  std::optional<double> served;
  for (int i = 0; i < 100000 && served.value_or(0) < 1; ++i) {
    served = sample(exchange_on(other, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"), counter);
  }
  ::close(other);
  reader.join();
  sender.join();
  ::close(fd);
  REQUIRE(answers.size() == kPipelined + 1);
  CHECK(answers[0].starts_with("HTTP/1.1 201 "));
  CHECK(answers[kPipelined].starts_with("HTTP/1.1 200 "));
  CAPTURE(served);
  CHECK(served.value_or(0) >= 1);
  CHECK(served.value_or(kPipelined) < kPipelined / 4);
}

// A pipelined request behind one whose answer closes the connection (one that asks for the close,
// or one refused) is neither run nor answered.
TEST_CASE("nothing pipelined behind a closing answer is run") {
  Server server;
  Api api(server, kTeamA);
  const std::string create = raw_post(server, kTeamA, "/v1/webhook", kWebhook.body(kTeamA, 1));
  const std::string health = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
  struct Row {
    std::string name;
    std::string closing;  // the second request of three
    std::string status;   // its answer's status line's start
  };
  for (const Row& row : {
           Row{"Connection: close", "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
               "HTTP/1.1 200 "},
           Row{"HTTP/1.0", "GET /healthz HTTP/1.0\r\n\r\n", "HTTP/1.1 200 "},
           Row{"a refused head", "GET /healthz HTTP/1.1\r\nBad Name: x\r\n\r\n", "HTTP/1.1 400 "},
       }) {
    CAPTURE(row.name);
    const int fd = connect_with_timeout(server);
    const std::string sent = health + row.closing + create;
    REQUIRE(::send(fd, sent.data(), sent.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(sent.size()));
    bool ended = false;
    const std::vector<std::string> answers = read_responses(fd, 3, &ended);
    REQUIRE(answers.size() == 2);
    CHECK(ended);  // the end of the stream after the second answer, and no third
    CHECK(answers[0].starts_with("HTTP/1.1 200 "));
    CHECK(answers[0].find("Connection: keep-alive") != std::string::npos);
    CHECK(answers[1].starts_with(row.status));
    CHECK(answers[1].find("Connection: close") != std::string::npos);
    ::close(fd);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(total(api, kWebhook) == 0);
}

// A request that came in a read of its own while the answer to the one before it was pending was
// read and run at once: a GET was answered before the create sent ahead of it (the client took the
// 200 for the create's answer), and with `Connection: close` on the GET the create's 201 was never
// sent. It is now read once that answer is on its way, and answered after it.
TEST_CASE("a request sent before the answer to the one before it is answered after that one") {
  Server server;
  Api api(server, kTeamA);
  // A profile with 1,300 custom WAF rules: their check (about 25 ms, in a worker process, while
  // the HTTP thread waits for it) and the durable write keep its answer pending while the next
  // request comes, once gatewayd has read the whole create. (They read the count of ARGS: 1,300
  // rules of ARGS would add more matches for each argument than a text may.)
  std::string rules;
  for (int id = 1; id <= 1300; ++id) {
    rules +=
        "SecRule &ARGS \\\"@contains a\\\" \\\"id:" + std::to_string(id) + ",phase:2,pass\\\"\\n";
  }
  auto create = [&](const std::string& hostname) {
    const std::string body = testing::json_with(
        testing::json_with(profile_body(kTeamA, hostname), "waf_template", R"("custom")"),
        "waf_custom_directives", "\"" + rules + "\"");
    return raw_post(server, kTeamA, "/v1/gateway_security_profile", body);
  };
  // Sends `first`, then `next` once gatewayd has read all of `first`; shuts the sending side
  // after it if `half_close`. Returns every byte that came back until the end of the stream or
  // `count` answers, split into answers by their Content-Length.
  auto exchange = [&](const std::string& first, const std::string& next, size_t count,
                      bool half_close) {
    const int fd = connect_with_timeout(server);
    // The check of 1,300 rules took over the usual 5 s under TSan on a loaded machine.
    timeval long_wait{60, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &long_wait, sizeof long_wait);
    send_until_read(server, fd, first);
    REQUIRE(::send(fd, next.data(), next.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(next.size()));
    if (half_close) REQUIRE(::shutdown(fd, SHUT_WR) == 0);
    bool ended = false;
    std::vector<std::string> answers = read_responses(fd, count, &ended);
    char byte = 0;
    if (half_close && !ended) ended = ::recv(fd, &byte, 1, 0) == 0;
    ::close(fd);
    answers.resize(count);
    if (half_close) answers.push_back(ended ? "(end)" : "(no end)");
    return answers;
  };
  struct Row {
    std::string name;
    std::string next;         // sent once gatewayd has read the create, in a write of its own
    std::string next_status;  // its answer's status line's start
    bool closes;
  };
  int n = 0;
  for (const Row& row : {
           Row{"a GET", "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 200 ", false},
           Row{"a GET that closes", "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
               "HTTP/1.1 200 ", true},
           Row{"a head that is refused", "GET /healthz HTTP/1.1\r\nBad Name: x\r\n\r\n",
               "HTTP/1.1 400 ", true},
       }) {
    CAPTURE(row.name);
    const auto answers =
        exchange(create("order" + std::to_string(n++) + ".example.com"), row.next, 2, false);
    INFO("first: ", answers[0].substr(0, 200), "\nsecond: ", answers[1].substr(0, 300));
    CHECK(answers[0].starts_with("HTTP/1.1 201 "));
    CHECK(answers[0].find("Connection: keep-alive") != std::string::npos);
    CHECK(answers[1].starts_with(row.next_status));
    CHECK((answers[1].find("Connection: close") != std::string::npos) == row.closes);
  }
  CHECK(total(api, kProfile) == 3);

  // The same, and then the client shuts its sending side: the request held behind the pending
  // answer is still run and answered, and then the connection ends. (Before the held request was
  // read, the first answer's write ended the connection: a create was applied and its 201 lost.)
  const auto answers = exchange(
      create("order-half.example.com"),
      raw_post(server, kTeamA, "/v1/webhook", webhook_body(kTeamA, "held-behind")), 2, true);
  INFO("first: ", answers[0].substr(0, 200), "\nsecond: ", answers[1].substr(0, 300));
  CHECK(answers[0].starts_with("HTTP/1.1 201 "));
  CHECK(answers[1].starts_with("HTTP/1.1 201 "));
  CHECK(answers[1].find("\"webhook_id\"") != std::string::npos);
  CHECK(answers[2] == "(end)");
  CHECK(total(api, kWebhook) == 1);
}

// The answer to HEAD carried the body of the same answer to GET, which a client reads as the start
// of the next answer on the connection.
TEST_CASE("HEAD is answered without a body; the next request on the connection reads its own") {
  Server server;
  const int fd = connect_with_timeout(server);
  timeval short_wait{0, 300'000};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &short_wait, sizeof short_wait);
  const std::string head = "HEAD /v1/webhook HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                           server.token(kTeamA) + "\r\nX-Tenant-ID: " + std::string(kTeamA) +
                           "\r\n\r\n";
  REQUIRE(::send(fd, head.data(), head.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(head.size()));
  std::string got;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;)
    got.append(buf, static_cast<size_t>(n));
  CAPTURE(got);
  CHECK(got.starts_with("HTTP/1.1 200 "));
  // The head a GET's answer would have, Content-Length included, and nothing after it.
  const size_t end = got.find("\r\n\r\n");
  REQUIRE(end != std::string::npos);
  CHECK(got.size() == end + 4);
  CHECK(got.find("Content-Length: 0\r\n") == std::string::npos);
  const std::string next = exchange_on(fd, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  CHECK(next.starts_with("HTTP/1.1 200 "));
  CHECK(next.ends_with(R"({"status":"ok"})"));
  ::close(fd);
}

// Sends `after` on `fd` behind a create whose read ends in a CR and whose answer is still to
// come (its WAF check waits: the zygote is stopped), waits for gatewayd to read it, then lets the
// check go on and returns the create's answer. That waits for up to a minute: a WAF check under a
// sanitizer on a loaded machine took more than the connection's usual 5 s (the test below failed
// once so).
std::string send_behind_held_answer(const Server& server, int fd, const std::string& after) {
  const pid_t zygote = stop_zygote(server);
  send_until_read(
      server, fd,
      raw_post(server, kTeamA, "/v1/gateway_security_profile", custom_waf_body(kTeamA, "held")) +
          "\r");
  // From a thread of its own: gatewayd reads what comes behind the answer only once the answer is
  // on its way, so the send may wait for it.
  std::thread sender([&] {
    CHECK(::send(fd, after.data(), after.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(after.size()));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // sent behind the answer
  REQUIRE(::kill(zygote, SIGCONT) == 0);
  timeval long_wait{60, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &long_wait, sizeof long_wait);
  std::string answer = read_response(fd);
  sender.join();
  timeval usual{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &usual, sizeof usual);
  return answer;
}

// Empty lines held behind an answer still to come counted towards the request's worth held: a
// create of the largest size (64 KiB of head, --max-request-bytes of body) after a CRLF was
// dropped, and its connection ended after the first answer (helper 43).
TEST_CASE("a request of the largest size after an empty line, behind an answer, is served") {
  Server server({"--max-request-bytes", "4096"});
  Api api(server, kTeamA);
  std::string body = kWebhook.body(kTeamA, 1);
  body.resize(4096, ' ');
  std::string head = "POST /v1/webhook HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                     server.token(kTeamA) + "\r\nX-Tenant-ID: " + std::string(kTeamA) +
                     "\r\nContent-Type: application/json\r\nContent-Length: 4096\r\nX-Pad: ";
  head += std::string(65536 - head.size() - 4, 'p') + "\r\n\r\n";
  REQUIRE(head.size() == 65536);
  const int fd = connect_with_timeout(server);
  std::string got = send_behind_held_answer(server, fd, "\n" + head + body);
  if (got.find("HTTP/1.1 ", 1) == std::string::npos) got += read_response(fd);
  CAPTURE(got);
  CHECK(got.starts_with("HTTP/1.1 201 "));
  const size_t second = got.find("HTTP/1.1 ", 1);
  REQUIRE(second != std::string::npos);
  CHECK(got.substr(second).starts_with("HTTP/1.1 201 "));
  CHECK(got.find("\"webhook_id\"", second) != std::string::npos);
  ::close(fd);
  CHECK(total(api, kWebhook) == 1);
}

// A refused HEAD (400, 413, 431, 501) was answered with the problem's body, which a client reads
// as the start of the next answer (helper 38).
TEST_CASE("a refused HEAD is answered without a body") {
  Server server;
  struct Row {
    std::string head;
    std::string status;
  };
  for (const Row& row : {
           Row{"HEAD /healthz HTTP/1.1\r\nHost: a b\r\n\r\n", "400"},
           Row{"HEAD /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 2000000\r\n\r\n", "413"},
           Row{"HEAD /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
               "501"},
           Row{"HEAD /healthz HTTP/1.1\r\nHost: x\r\nX: " + std::string(70000, 'x') + "\r\n\r\n",
               "431"},
       }) {
    CAPTURE(row.status);
    const int fd = connect_with_timeout(server);
    REQUIRE(::send(fd, row.head.data(), row.head.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(row.head.size()));
    const std::string got = read_to_end(fd);
    ::close(fd);
    CAPTURE(got);
    CHECK(got.starts_with("HTTP/1.1 " + row.status + " "));
    CHECK(got.find("Connection: close\r\n") != std::string::npos);
    // The head the answer to GET would have, Content-Length included, and nothing after it.
    const size_t end = got.find("\r\n\r\n");
    REQUIRE(end != std::string::npos);
    CHECK(got.size() == end + 4);
    CHECK(got.find("Content-Length: 0\r\n") == std::string::npos);
  }
  // A GET refused alike still has its body.
  const int fd = connect_with_timeout(server);
  const std::string get = "GET /healthz HTTP/1.1\r\nHost: a b\r\n\r\n";
  REQUIRE(::send(fd, get.data(), get.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(get.size()));
  const std::string got = read_to_end(fd);
  ::close(fd);
  CHECK(got.ends_with("}"));
}

// What gatewayd has read of what the client's end `fd` sent: what its end received, less what
// is still unread there (TCP_INFO and FIONREAD on a copy of its socket).
uint64_t server_consumed(const Server& server, int fd) {
  const int server_end = server_end_of(server, fd);
  REQUIRE(server_end >= 0);
  tcp_info info{};
  socklen_t size = sizeof info;
  REQUIRE(::getsockopt(server_end, IPPROTO_TCP, TCP_INFO, &info, &size) == 0);
  int unread = 0;
  REQUIRE(::ioctl(server_end, FIONREAD, &unread) == 0);
  ::close(server_end);
  return info.tcpi_bytes_received - static_cast<uint64_t>(unread);
}

// What a client sent behind a request whose answer was still to come was read and held, up to a
// request's worth (64 KiB of head, --max-request-bytes, a chunked body's framing); past that the
// connection ended after the answer (and before that, it stayed, every request after it
// unanswered, until the idle timeout's 408: helper 38). A client that pipelined requests and read
// no answer made gatewayd hold that much behind each answer, and about twice that in memory
// (helper 132: 270 MB for one connection at --max-request-bytes 64 MiB). Nothing more is read now
// while a request waits behind an answer: what the client sends stays in the kernel's buffers
// (TCP's flow control holds the client back), and is read as the requests before it are served.
TEST_CASE(
    "what comes behind an answer still to come is read only as the requests before it are served") {
  Server server;
  const std::string base = "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: \r\n\r\n";
  std::string more;  // 1.2 MB: 20 GETs of 60,000 bytes each
  for (int i = 0; i < 20; ++i) {
    more += "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: " + std::string(60000 - base.size(), 'p') +
            "\r\n\r\n";
  }
  const std::string create =
      raw_post(server, kTeamA, "/v1/gateway_security_profile", custom_waf_body(kTeamA, "first"));
  const pid_t zygote = stop_zygote(server);
  const int fd = connect_with_timeout(server);
  timeval long_wait{60, 0};  // a WAF check under a sanitizer on a loaded machine
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &long_wait, sizeof long_wait);
  send_until_read(server, fd, create);
  std::thread sender([&] {
    CHECK(::send(fd, more.data(), more.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(more.size()));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  // One read's worth at most (4 KiB, Pistache's buffer), the one that found the answer pending.
  const uint64_t read_behind = server_consumed(server, fd) - create.size();
  CAPTURE(read_behind);
  CHECK(read_behind <= 8192);
  REQUIRE(::kill(zygote, SIGCONT) == 0);
  const std::vector<std::string> answers = read_responses(fd, 21);
  sender.join();
  REQUIRE(answers.size() == 21);
  CHECK(answers[0].starts_with("HTTP/1.1 201 "));
  for (const std::string& answer : answers) {
    CHECK(answer.find("Connection: keep-alive") != std::string::npos);
  }
  CHECK(answers[20].starts_with("HTTP/1.1 200 "));
  CHECK(exchange_on(fd, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").starts_with("HTTP/1.1 200 "));
  ::close(fd);
}

// After a closing answer: the client sends `piece` `sends` times, 20 ms apart, and every send is
// taken; then it reads the end of the stream, not a reset; then, as it stays quiet, gatewayd's
// socket goes (--lingering-timeout-ms) and the count is back to `sockets_before`.
void check_not_reset(const Server& server, int fd, const std::string& piece, int sends,
                     size_t sockets_before) {
  for (int i = 0; i < sends; ++i) {
    const ssize_t n = ::send(fd, piece.data(), piece.size(), MSG_NOSIGNAL);
    const int error = n < 0 ? errno : 0;
    CAPTURE(i);
    CAPTURE(error);
    CHECK(n == static_cast<ssize_t>(piece.size()));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  char byte = 0;
  const ssize_t n = ::recv(fd, &byte, 1, 0);
  const int error = n < 0 ? errno : 0;
  CAPTURE(error);
  CHECK(n == 0);  // the end of the stream, not a reset
  CHECK(sockets_once_down_to(server, sockets_before) == sockets_before);
}

// The answer to a request with more behind it in the same read said `Connection: close` (now
// only one that closes anyway does: one that asks for it here); once it was written, gatewayd
// shut the connection for reading too if nothing more had come by then, and ended it at its next
// read. A client still sending the rest of its pipeline was reset: what it sent next met a closed
// socket, and a reset can take the answer with it before the client reads it (RFC 9112 9.6). The
// client's end is now waited for, as after a refusal, within --lingering-timeout-ms.
TEST_CASE("a client still sending behind a closing answer in its pipeline is not reset") {
  Server server({"--lingering-timeout-ms", "1500"});
  Api api(server, kTeamA);
  const size_t sockets_before = sockets_at_rest(server, api);
  const std::string health = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  const int fd = connect_with_timeout(server);
  const std::string sent = health + "GET /healthz HTTP/1.1\r\n";
  REQUIRE(::send(fd, sent.data(), sent.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(sent.size()));
  // The answer and the end of the stream: written, and the write side shut.
  const std::string got = read_to_end(fd);
  CAPTURE(got);
  CHECK(got.starts_with("HTTP/1.1 200 "));
  CHECK(got.find("Connection: close") != std::string::npos);
  // The rest of the pipeline, 1 MB in 16 sends; then the client keeps its side open and sends
  // nothing more.
  check_not_reset(server, fd, "X-Pad: " + std::string(65000, 'p') + "\r\n", 16, sockets_before);
  ::close(fd);
}

// Bytes that came in reads of their own behind a request whose answer closes (`Connection:
// close`, HTTP/1.0 without keep-alive) were dropped, and once that answer was written nothing was
// left unread, so gatewayd ended the connection at once: the client's next send met a closed
// socket and was reset (helper 49, 10 of 10). The client's end is now waited for, as after a
// pipelined request.
TEST_CASE("a client still sending behind a request that asked for the close is not reset") {
  Server server({"--lingering-timeout-ms", "1500"});
  Api api(server, kTeamA);
  const size_t sockets_before = sockets_at_rest(server, api);
  const std::string close_asked =
      raw_post(server, kTeamA, "/v1/gateway_security_profile", custom_waf_body(kTeamA, "closing"),
               "Connection: close\r\n");
  std::string http10 =
      raw_post(server, kTeamA, "/v1/gateway_security_profile", custom_waf_body(kTeamA, "http10"));
  http10.replace(http10.find("HTTP/1.1"), 8, "HTTP/1.0");
  int round = 0;
  for (const std::string& request : {close_asked, http10}) {
    CAPTURE(round);
    // The answer is held (its WAF check waits) while a request comes in a send of its own.
    const pid_t zygote = stop_zygote(server);
    const int fd = connect_with_timeout(server);
    send_until_read(server, fd, request);
    const std::string more = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
    send_until_read(server, fd, more);
    REQUIRE(::kill(zygote, SIGCONT) == 0);
    const std::string got = read_to_end(fd);
    CAPTURE(got.substr(0, 200));
    CHECK(got.starts_with("HTTP/1.1 201 "));
    CHECK(got.find("Connection: close") != std::string::npos);
    CHECK(got.find(" 200 ") == std::string::npos);  // the GET behind it is not answered
    // The client goes on sending for a while, then waits for the end of the stream.
    check_not_reset(server, fd, more, 8, sockets_before);
    ::close(fd);
    ++round;
  }
  CHECK(total(api, kProfile) == 2);  // the two creates, and nothing behind them
}

// Requests read behind an answer that waits for the socket were served as they came, and each
// answer queued behind it in gatewayd's memory: a client that sent requests and read nothing had
// about 600 KB queued for each request of 200 bytes, without bound (helper 57). Nothing more is
// served on a connection while an answer waits for its socket: what the client sends is held
// within a request's worth (past that, dropped, and the connection ends after the answer), and
// served once the answer is written.
// The metric of the pages of profiles served.
constexpr std::string_view kProfilePages =
    R"(gatewayd_http_requests_total{route="list",kind="gateway_security_profile",status="200"})";

// A connection of a client that reads slowly (slow_reader), whose first request, a page of large
// profiles, has been served: its answer waits for the socket. `*before` is how many pages of
// profiles were served before it.
int behind_large_answer(const Server& server, Api& api, double* before) {
  create_large_profiles(api);
  *before = sample(metrics(server), kProfilePages).value_or(0);
  const int fd = slow_reader(server, profile_page_request(server));
  // The first request is served alone before more is sent, so that its answer is the one the
  // socket waits for (a loaded machine can take longer than the sends after it are apart).
  REQUIRE(metric_reaches(server, kProfilePages, *before + 1));
  // Sent while the answer is still queued, a request is read once the answer is taken, before its
  // first write finds the socket full, and is served then (a second page served behind one, under
  // ThreadSanitizer on a loaded machine). The HTTP thread writes until the socket is full before
  // it reads again, so once the client has a byte, what it sends next finds the answer waiting
  // for the socket.
  REQUIRE(answer_started(fd));
  return fd;
}

TEST_CASE("requests behind an answer that waits for the socket are served once it is written") {
  Server server;
  Api api(server, kTeamA);
  double before = 0;
  const int fd = behind_large_answer(server, api, &before);
  const std::string list = profile_page_request(server);
  for (int i = 1; i < 20; ++i) {  // each in a read of its own
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    REQUIRE(::send(fd, list.data(), list.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(list.size()));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  // The first request alone was served while its answer waited.
  CHECK(sample(metrics(server), kProfilePages).value_or(0) - before == 1);
  // Read, the answer goes out, and the held requests are served one after another, each once the
  // answer before it is written. (They were read as one read, whose first request was served with
  // `Connection: close` and the rest dropped, as pipelined requests were.)
  const std::vector<std::string> answers = read_responses(fd, 20);
  REQUIRE(answers.size() == 20);
  for (const std::string& answer : answers) {
    CHECK(answer.starts_with("HTTP/1.1 200 "));
    CHECK(answer.find("Connection: keep-alive") != std::string::npos);
  }
  CHECK(sample(metrics(server), kProfilePages).value_or(0) - before == 20);
  ::close(fd);
}

// Closes connection `fd` with a reset (SO_LINGER of 0), as a client that gives up does.
void reset_connection(int fd) {
  const linger at_once{1, 0};
  REQUIRE(::setsockopt(fd, SOL_SOCKET, SO_LINGER, &at_once, sizeof at_once) == 0);
  ::close(fd);
}

// A client that stopped reading (its answer waits for the socket, a request behind it is held,
// and the connection is read no more) and then reset its connection: the reset went unseen while
// the connection was not read, and it, its descriptor and what it held stayed until Pistache's
// keep-alive limit (300 s; helper 133: 1,072 descriptors left after 20 s of such clients).
TEST_CASE("a client that resets a connection that is not being read ends it at once") {
  Server server;
  Api api(server, kTeamA);
  double before = 0;
  const int fd = behind_large_answer(server, api, &before);
  const std::string list = profile_page_request(server);  // held behind the answer
  REQUIRE(::send(fd, list.data(), list.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(list.size()));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const size_t sockets = open_sockets(server.pid());
  reset_connection(fd);
  CHECK(sockets_once_down_to(server, sockets - 1) == sockets - 1);
}

// A request held behind an answer still to come, on a connection its client then reset, still ran
// once that answer came, for a client gone (helper 133: all 5 creates held so were applied).
TEST_CASE("a request held behind an answer is dropped when its client resets the connection") {
  Server server;
  Api api(server, kTeamA);
  const pid_t zygote = stop_zygote(server);
  const int fd = connect_with_timeout(server);
  send_until_read(
      server, fd,
      raw_post(server, kTeamA, "/v1/gateway_security_profile", custom_waf_body(kTeamA, "first")));
  const std::string create = raw_post(server, kTeamA, "/v1/webhook", kWebhook.body(kTeamA, 1));
  REQUIRE(::send(fd, create.data(), create.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(create.size()));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const size_t sockets = open_sockets(server.pid());
  reset_connection(fd);
  REQUIRE(sockets_once_down_to(server, sockets - 1) == sockets - 1);  // the reset was seen
  REQUIRE(::kill(zygote, SIGCONT) == 0);
  for (int i = 0; i < 1000 && total(api, kProfile) == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(total(api, kProfile) == 1);  // the create whose answer the client did not wait for
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(total(api, kWebhook) == 0);
}

// A chunked request's worth is its head, its data and its framing. Held behind an answer that
// waited for the socket, one within each of its limits but over a head's and a body's worth of
// bytes together was dropped, and the connection ended with no answer to it (helper 129).
TEST_CASE("a chunked request held behind an answer that waits for the socket is served") {
  Server server;
  Api api(server, kTeamA);
  double before = 0;
  const int fd = behind_large_answer(server, api, &before);
  // 20 KB of header, 60 KB of chunk extensions and 1,040,000 bytes of data (the limit is 1 MiB).
  std::string body = webhook_body(kTeamA, "wl-held");
  body.insert(body.size() - 1, std::string(1'040'000 - body.size(), ' '));
  const std::string request =
      chunked_head(server, "Connection: close\r\nX-Pad: " + std::string(20000, 'p') + "\r\n") +
      size_line(100, ";e=" + std::string(60000, 'e')) + body.substr(0, 100) + "\r\n" +
      size_line(body.size() - 100) + body.substr(100) + "\r\n0\r\n\r\n";
  // From a thread of its own: it is read as the answer before it is read (pause_reading).
  std::thread sender([&] {
    CHECK(::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(request.size()));
  });
  const std::string got = read_to_end(fd);
  sender.join();
  CHECK(got.starts_with("HTTP/1.1 200 "));
  CHECK(got.find("HTTP/1.1 201 ") != std::string::npos);
  ::close(fd);
  CHECK(total(api, kWebhook) == 1);
}

// Bytes a client sent behind a request that asked for the close, while that request's answer was
// taken and waited for the socket, did not keep the connection from ending once the answer was
// written: nothing was left unread then, so it ended at once, and the client's next send was reset
// (helper 57). Its end is waited for now, as when the answer is still to come.
TEST_CASE("a client still sending behind a closing answer that waits for the socket is not reset") {
  Server server({"--lingering-timeout-ms", "1500"});
  Api api(server, kTeamA);
  create_large_profiles(api);
  const size_t sockets_before = sockets_at_rest(server, api);
  std::string list = profile_page_request(server);
  list.insert(list.size() - 2, "Connection: close\r\n");
  const int fd = slow_reader(server, list);
  // The answer is taken and waits for the socket; more comes, and is dropped.
  REQUIRE(answer_started(fd));
  const std::string more = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
  REQUIRE(::send(fd, more.data(), more.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(more.size()));
  const std::string got = read_to_end(fd);  // the answer, then the end of the stream
  CAPTURE(got.size());
  CHECK(got.starts_with("HTTP/1.1 200 "));
  CHECK(got.size() > 500000);
  check_not_reset(server, fd, more, 16, sockets_before);
  ::close(fd);
}

// Behind an answer still to come, every CR and LF went uncounted in the request's worth held, so
// empty lines piled up without bound for as long as the answer took (review); then one was
// uncounted, and past a request's worth of them the connection ended after the answer. Nothing is
// read behind an answer still to come now, and the empty lines are skipped once it is on its way.
TEST_CASE("empty lines sent behind an answer still to come are skipped once it is on its way") {
  Server server({"--max-request-bytes", "4096"});
  const int fd = connect_with_timeout(server);
  // The LF that ends the held CR's line, then 200 KB of empty lines: three requests' worth.
  std::string lines = "\n";
  for (int i = 0; i < 100000; ++i) lines += "\r\n";
  const std::string held = send_behind_held_answer(server, fd, lines);
  CAPTURE(held);
  CHECK(held.starts_with("HTTP/1.1 201 "));
  CHECK(held.find("HTTP/1.1 ", 1) == std::string::npos);  // that answer alone
  CHECK(exchange_on(fd, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").starts_with("HTTP/1.1 200 "));
  ::close(fd);
}

}  // namespace
}  // namespace gw::itest::connections_test
