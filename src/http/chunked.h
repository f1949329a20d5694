// A request body in the chunked transfer coding (RFC 9112 7.1), read as it comes: a chunk-size
// line (hex digits and chunk extensions, which are checked and ignored), the chunk's data and a
// CRLF, again and again until a chunk of size 0, then trailer fields (checked and dropped: none
// can stand in for a header) and an empty line. Every line must end in CRLF; anything else in the
// framing is a 400, since a server that reads it leniently reads a different body than a proxy
// in front of it that reads it strictly (request smuggling).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/error.h"

namespace gw::http {

// The most bytes of a chunked body that are not its data (its framing: the chunk-size lines with
// their extensions, the CRLF after each chunk's data, the trailer fields and the empty line that
// ends them), for a limit of `max_data_bytes` on its data: that limit, or 64 KiB if it is less.
// RFC 9112 7.1.1 asks a server to bound extensions; this bounds the size lines too, whose number
// the client chooses (a chunk of one byte has five bytes of framing), so that a chunked body is
// never sent in more than twice its limit (or its limit and 64 KiB). A chunk has five bytes of
// framing or more, and the last chunk and the empty line after it five, so data up to the limit
// may come in chunks of six bytes or more on average, and up to the limit less five bytes in
// chunks of five, as a client that streams small writes sends them (64 KiB alone refused 100 KB
// in chunks of 5).
constexpr uint64_t kMinChunkFramingBytes = 64 << 10;
constexpr uint64_t max_chunk_framing_bytes(uint64_t max_data_bytes) {
  return max_data_bytes > kMinChunkFramingBytes ? max_data_bytes : kMinChunkFramingBytes;
}

class ChunkedBody {
 public:
  // Data past `max_data_bytes` (at most 2^62, so that no offset wraps) is a 413, and so is
  // framing past max_chunk_framing_bytes of it.
  explicit ChunkedBody(uint64_t max_data_bytes)
      : max_data_bytes_(max_data_bytes),
        max_framing_bytes_(max_chunk_framing_bytes(max_data_bytes)) {}

  struct Progress {
    bool done = false;  // the body has all come
    // Once done, how many of the bytes given are the body, as sent; before that, how many must
    // have come before read() can get further (more than were given).
    size_t bytes = 0;
  };

  // Reads on from where the last call stopped. `sent` is what came of the body so far, from its
  // first byte: what the last call was given, and more. The error is the problem with the body:
  // a 400 for framing that is not RFC 9112 7.1's, a 413 for more data or framing than allowed
  // (a chunk-size line of good form whose size passes the limit, once its CRLF has come).
  Result<Progress> read(std::string_view sent);

  // The data of the chunks of `body`, a body read() found whole (`Progress::bytes` of them).
  static std::string decode(std::string_view body);

 private:
  enum class Part : uint8_t { kSizeLine, kData, kTrailers };

  uint64_t max_data_bytes_;
  uint64_t max_framing_bytes_;
  Part part_ = Part::kSizeLine;
  size_t at_ = 0;             // where the part being read starts in the body
  size_t scanned_ = 0;        // how far a line not yet ended was searched for its end
  uint64_t chunk_bytes_ = 0;  // the size of the chunk whose data is read (Part::kData)
  uint64_t data_bytes_ = 0;   // of the chunks read so far
  size_t framing_bytes_ = 0;  // of the lines read so far
};

}  // namespace gw::http
