// Parsing JSON with every number read exactly: RapidJSON 1.1.0 (Debian 12) checks the text and
// builds the document, but works out no number's value. Its own reading of numbers is wrong in
// ways found here, each from one request of any tenant or one stored value:
// - its default precision put about one number in eight a unit or two off in the last place (the
//   stored 0.30000000000000007 read back as 0.3000000000000001);
// - its full-precision path read out of bounds on some numbers (0.<400 zeros>1, also followed by
//   text that makes the body invalid: a segmentation fault of gatewayd), passed zero to clz (0e100
//   read back as -1.997919072202235e146), wrapped a significand of 2^64 - 1 to zero
//   (184467440737095516155 read back as 16), read uninitialized stack words for numbers of 129
//   digits and more, dropped digits past the 780th, and rounded values under half the smallest
//   double up to it.
// Here RapidJSON hands over each number's text (kParseNumbersAsStringsFlag), as it checked it
// against JSON's grammar: an integer that fits in 64 bits becomes an integer value, as RapidJSON's
// own would; any other number becomes the nearest double (glibc's strtod, correctly rounded; under
// half the smallest double it is zero); one too large for a double is refused as RapidJSON refuses
// one ("Number too big to be stored in double"). RapidJSON's check of the text refuses some
// others the same way before they are read: an integer part of more than 308 digits, and an
// exponent over 308 less the fraction's digits (0e324), whatever the value.
#pragma once

#include <cstdint>
#include <string_view>

#include <rapidjson/document.h>
#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>

namespace gw {

namespace json_detail {

// The value of a JSON number from its text (as RapidJSON checked it).
struct Number {
  enum class Kind { kInt64, kUint64, kDouble, kTooBig };
  Kind kind = Kind::kTooBig;
  int64_t i = 0;
  uint64_t u = 0;
  double d = 0;
};
Number read_number(std::string_view text);

// RapidJSON's reader events, passed on to a document, with each number's text read by
// read_number.
class ExactNumbers {
 public:
  explicit ExactNumbers(rapidjson::Document& doc) : doc_(doc) {}
  bool Null() { return doc_.Null(); }
  bool Bool(bool b) { return doc_.Bool(b); }
  // Int to Double are never called under kParseNumbersAsStringsFlag, but the reader's code for
  // them is compiled all the same.
  bool Int(int i) { return doc_.Int(i); }
  bool Uint(unsigned u) { return doc_.Uint(u); }
  bool Int64(int64_t i) { return doc_.Int64(i); }
  bool Uint64(uint64_t u) { return doc_.Uint64(u); }
  bool Double(double d) { return doc_.Double(d); }
  bool RawNumber(const char* text, rapidjson::SizeType length, bool /*copy*/) {
    const Number n = read_number(std::string_view(text, length));
    switch (n.kind) {
      case Number::Kind::kInt64:
        return doc_.Int64(n.i);
      case Number::Kind::kUint64:
        return doc_.Uint64(n.u);
      case Number::Kind::kDouble:
        return doc_.Double(n.d);
      case Number::Kind::kTooBig:
        break;
    }
    too_big_ = true;
    return false;
  }
  bool String(const char* s, rapidjson::SizeType length, bool copy) {
    return doc_.String(s, length, copy);
  }
  bool StartObject() { return doc_.StartObject(); }
  bool Key(const char* s, rapidjson::SizeType length, bool copy) {
    return doc_.Key(s, length, copy);
  }
  bool EndObject(rapidjson::SizeType members) { return doc_.EndObject(members); }
  bool StartArray() { return doc_.StartArray(); }
  bool EndArray(rapidjson::SizeType elements) { return doc_.EndArray(elements); }
  bool too_big() const { return too_big_; }

 private:
  rapidjson::Document& doc_;
  bool too_big_ = false;
};

}  // namespace json_detail

// Parses `json` into `doc` (empty, as made), with RapidJSON's parse flags `kFlags`, every number
// read exactly (above). A UTF-8 byte order mark at the very start is skipped (RFC 8259 8.1);
// offsets count it. Returns RapidJSON's result: check it, not doc.HasParseError(), which this
// parse does not set. On an error `doc` is left as it was.
template <unsigned kFlags = rapidjson::kParseDefaultFlags>
rapidjson::ParseResult parse_exact(rapidjson::Document& doc, std::string_view json) {
  rapidjson::ParseResult result;
  auto generate = [&](rapidjson::Document& handler) {
    json_detail::ExactNumbers exact(handler);
    // The mark is skipped whole or not at all. RapidJSON's EncodedInputStream skips each of its
    // three bytes that comes next on its own, so a body starting with a lone 0xBF (or 0xEF, 0xBB,
    // 0xBB 0xBF, ...) was read without those bytes, its invalid UTF-8 unseen (helper 71).
    rapidjson::MemoryStream in(json.data(), json.size());
    if (json.starts_with("\xEF\xBB\xBF")) {
      for (int i = 0; i < 3; ++i) in.Take();
    }
    // One reader a thread: its stack keeps its memory from one parse to the next.
    thread_local rapidjson::Reader reader;
    result = reader.Parse<kFlags | rapidjson::kParseNumbersAsStringsFlag>(in, exact);
    if (result.IsError() && exact.too_big()) {
      result.Set(rapidjson::kParseErrorNumberTooBig, result.Offset());
    }
    // The stream reads a NUL byte as its end, so the text after a NUL that follows the root
    // (`{...}\0anything`) was never looked at, and the document passed. Nothing may follow the
    // root but white space, which the reader skipped: it stopped short only at such a NUL.
    if (!result.IsError() && (kFlags & rapidjson::kParseStopWhenDoneFlag) == 0 &&
        in.Tell() != json.size()) {
      result.Set(rapidjson::kParseErrorDocumentRootNotSingular, in.Tell());
    }
    return !result.IsError();
  };
  doc.Populate(generate);
  return result;
}

}  // namespace gw
