#include "http/chunked.h"

#include <doctest/doctest.h>

#include <string>

namespace gw::http {
namespace {

// Reads `body` whole at once; fails the test if it is not done.
size_t read_whole(std::string_view body, uint64_t max = 1 << 20) {
  ChunkedBody reader(max);
  auto r = reader.read(body);
  REQUIRE(r.ok());
  REQUIRE(r.value().done);
  return r.value().bytes;
}

// The error read() gives for `body`, given whole.
Error error_of(std::string_view body, uint64_t max = 1 << 20) {
  ChunkedBody reader(max);
  auto r = reader.read(body);
  REQUIRE_FALSE(r.ok());
  return r.error();
}

TEST_CASE("a chunked body is read to its end and decoded to its chunks' data") {
  const std::string body = "5\r\nhello\r\n7\r\n, world\r\n0\r\n\r\n";
  CHECK(read_whole(body) == body.size());
  CHECK(ChunkedBody::decode(body) == "hello, world");
  // What follows its end (a pipelined request) is not part of it.
  CHECK(read_whole(body + "GET / HTTP/1.1\r\n") == body.size());
  // Hex digits in either case, leading zeros, extensions (ignored), trailer fields (dropped).
  const std::string fancy =
      "00A;name=value;quoted=\"a \\\"b\\\";c\"\r\n0123456789\r\n"
      "1 ; x = y\r\n!\r\n"
      "0;last\r\nX-Checksum: abc\r\nOther:\r\n\r\n";
  CHECK(read_whole(fancy) == fancy.size());
  CHECK(ChunkedBody::decode(fancy) == "0123456789!");
  // No data at all.
  CHECK(read_whole("0\r\n\r\n") == 5);
  CHECK(ChunkedBody::decode("0\r\n\r\n").empty());
}

TEST_CASE("a chunked body read as it comes, a byte at a time, ends where it ends") {
  const std::string body = "3;a=\"x\"\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nT: v\r\n\r\n";
  ChunkedBody reader(1 << 20);
  for (size_t n = 0; n < body.size(); ++n) {
    CAPTURE(n);
    auto r = reader.read(std::string_view(body).substr(0, n));
    REQUIRE(r.ok());
    CHECK_FALSE(r.value().done);
    // It asks for more than it was given, and never for more than the body holds.
    CHECK(r.value().bytes > n);
    CHECK(r.value().bytes <= body.size());
  }
  auto r = reader.read(body);
  REQUIRE(r.ok());
  CHECK(r.value().done);
  CHECK(r.value().bytes == body.size());
  CHECK(ChunkedBody::decode(body) == "abc0123456789abcdef");
}

TEST_CASE("while a chunk's data comes, read() asks for all of it and its CRLF") {
  ChunkedBody reader(1 << 20);
  auto r = reader.read("400\r\nab");
  REQUIRE(r.ok());
  CHECK_FALSE(r.value().done);
  CHECK(r.value().bytes == 5 + 0x400 + 2);
}

TEST_CASE("framing that is not RFC 9112's is a 400, and says what is wrong") {
  struct Row {
    std::string body;
    std::string detail_part;
  };
  for (const Row& row : {
           Row{"5\nhello\r\n0\r\n\r\n", "must end in CRLF, not a bare LF"},
           Row{"5\r\nhello\r\n0\r\n\n", "must end in CRLF, not a bare LF"},
           Row{"\r\nhello\r\n0\r\n\r\n", "must start with its size in hex digits"},
           Row{"x\r\n", "must start with its size in hex digits"},
           Row{"-5\r\n", "must start with its size in hex digits"},
           Row{" 5\r\n", "must start with its size in hex digits"},
           Row{"0x5\r\n", "nothing but chunk extensions"},
           Row{"5 \r\n", "nothing but chunk extensions"},
           Row{"5;\r\n", "nothing but chunk extensions"},
           Row{"5;a=\r\n", "nothing but chunk extensions"},
           Row{"5;a=b c\r\n", "nothing but chunk extensions"},
           Row{"5;a=\"b\r\n", "nothing but chunk extensions"},
           Row{"5;a=\"b\\\"\r\n", "nothing but chunk extensions"},
           Row{"5;a=b \r\n", "nothing but chunk extensions"},
           Row{"5;a\rb\r\n", "nothing but chunk extensions"},
           Row{"5\r\nhelloX\r\n0\r\n\r\n", "must be followed by CRLF"},
           Row{"5\r\nhello\n0\r\n\r\n", "must be followed by CRLF"},
           Row{"0\r\nno colon\r\n\r\n", "a trailer field"},
           Row{"0\r\n x: y\r\n\r\n", "a trailer field"},
           Row{"0\r\nbad name: y\r\n\r\n", "a trailer field"},
           Row{"0\r\nx: a\x01\r\n\r\n", "a trailer field"},
       }) {
    CAPTURE(row.body);
    const Error e = error_of(row.body);
    CHECK(e.code == Code::kBadRequest);
    CHECK(e.detail.find(row.detail_part) != std::string::npos);
  }
}

TEST_CASE("more data than allowed is a 413 as soon as a chunk's size line says so") {
  // Before its data comes.
  Error e = error_of("b\r\n", 10);
  CHECK(e.code == Code::kPayloadTooLarge);
  CHECK(e.detail == "the request body exceeds 10 bytes");
  // Over several chunks; exactly the limit is taken.
  CHECK(read_whole("6\r\nabcdef\r\n4\r\nghij\r\n0\r\n\r\n", 10) > 0);
  CHECK(error_of("6\r\nabcdef\r\n5\r\n", 10).code == Code::kPayloadTooLarge);
  // A size of more digits than 64 bits hold, under the largest limit a reader takes.
  const uint64_t largest = uint64_t{1} << 62;
  CHECK(error_of("ffffffffffffffffffffffff\r\n", largest).code == Code::kPayloadTooLarge);
  CHECK(error_of("10000000000000000\r\n", largest).code == Code::kPayloadTooLarge);
  CHECK(error_of("4000000000000001\r\n", largest).code == Code::kPayloadTooLarge);
  // The line's form is judged first: a size past the limit with a bad extension is a 400.
  CHECK(error_of("200000;;bad\r\n").code == Code::kBadRequest);
  CHECK(error_of("fffffffffffffffffffff \r\n").code == Code::kBadRequest);
  // Leading zeros are no size.
  CHECK(read_whole(std::string(100, '0') + "1\r\na\r\n0\r\n\r\n", 1) > 0);
}

TEST_CASE("framing past its bound is a 413, also a line that has not ended") {
  CHECK(max_chunk_framing_bytes(4096) == 64 << 10);
  CHECK(max_chunk_framing_bytes(1 << 20) == 1 << 20);
  const uint64_t max = 4096;  // so the bound is 64 KiB
  const size_t bound = 64 << 10;
  // One long extension, its line not ended yet: refused once it is past the bound, not held.
  const std::string line = "1;a=" + std::string(bound, 'x');
  ChunkedBody reader(max);
  auto r = reader.read(line);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == Code::kPayloadTooLarge);
  CHECK(r.error().detail ==
        "the framing of the chunked body (its chunk-size lines, chunk extensions and trailer "
        "fields) exceeds 65536 bytes: send the body in fewer, larger chunks");
  // Trailer fields count too.
  std::string trailers = "0\r\n";
  while (trailers.size() <= bound) trailers += "X-Pad: 0123456789\r\n";
  CHECK(error_of(trailers, max).code == Code::kPayloadTooLarge);
  // Under the bound, the same shapes are read.
  const std::string ok_line = "1;a=" + std::string(bound - 20, 'x') + "\r\nz\r\n0\r\n\r\n";
  CHECK(read_whole(ok_line, max) == ok_line.size());
}

// A client that streams small writes sends small chunks: with a bound of 64 KiB alone, 100 KB in
// chunks of 5 bytes (100 KB of framing) was refused under a limit of 1 MiB.
TEST_CASE("data near the limit may come in chunks of five bytes, not in chunks of one") {
  std::string five;  // 100 KB of data, 100 KB of framing
  for (int i = 0; i < 20000; ++i) five += "5\r\nabcde\r\n";
  five += "0\r\n\r\n";
  CHECK(read_whole(five, 1 << 20) == five.size());
  CHECK(ChunkedBody::decode(five).size() == 100000);
  // Under a limit of 100 KB: the end (a last chunk and an empty line) takes five bytes more, so
  // data of the limit less five bytes is read; in chunks of six, all of it.
  CHECK(error_of(five, 100000).code == Code::kPayloadTooLarge);
  CHECK(read_whole(five.substr(five.find("5\r\n", 5)), 100000) > 0);
  std::string six;
  for (int i = 0; i < 16666; ++i) six += "6\r\nabcdef\r\n";
  six += "4\r\nabcd\r\n0\r\n\r\n";
  CHECK(read_whole(six, 100000) == six.size());
  CHECK(ChunkedBody::decode(six).size() == 100000);
  // Chunks of one byte: 5 bytes of framing for each, past the bound (the limit) at a fifth of it.
  const uint64_t max = 200000;
  std::string ones;
  for (uint64_t i = 0; i <= max / 5; ++i) ones += "1\r\nx\r\n";
  CHECK(error_of(ones, max).code == Code::kPayloadTooLarge);
  std::string fewer;
  for (uint64_t i = 0; i < max / 5 - 1; ++i) fewer += "1\r\nx\r\n";
  fewer += "0\r\n\r\n";
  CHECK(read_whole(fewer, max) == fewer.size());
}

}  // namespace
}  // namespace gw::http
