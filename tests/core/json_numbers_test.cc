// parse_exact: JSON numbers read exactly, including the ones RapidJSON 1.1.0 reads wrong or out of
// bounds (found by fuzzing; core/json_numbers.h).
#include "core/json_numbers.h"

#include <doctest/doctest.h>

#include <cmath>
#include <string>

namespace gw {
namespace {

// The one value of `[token]`, parsed; REQUIREs that it parsed.
rapidjson::Document one_value(const std::string& token) {
  rapidjson::Document doc;
  const std::string json = "[" + token + "]";
  const rapidjson::ParseResult r = parse_exact(doc, json);
  REQUIRE_FALSE(r.IsError());
  REQUIRE(doc.IsArray());
  REQUIRE(doc.Size() == 1);
  rapidjson::Document value;
  value.CopyFrom(doc[0], value.GetAllocator());
  return value;
}

TEST_CASE("doubles read as the nearest double, also where RapidJSON's own reading is wrong") {
  struct Row {
    std::string token;
    double value;
  };
  const Row rows[] = {
      {"0.30000000000000004", 0.30000000000000004},
      {"0.30000000000000007", 0.30000000000000004},  // the same double: its default reading
                                                     // gave 0.3000000000000001
      {"1e23", 1e23},
      {"0.1", 0.1},
      {"0.00125", 0.00125},
      {"1.7976931348623157e308", 1.7976931348623157e308},
      {"5e-324", 5e-324},
      // Its full precision wrapped a significand of 2^64 - 1 to zero.
      {"184467440737095516155", 1.8446744073709552e20},
      {"1.84467440737095516159e-5", 1.84467440737095516159e-5},
      // It read uninitialized stack words at 129 digits, and dropped digits past the 780th.
      {"1." + std::string(127, '0') + "1e23", 1.0000000000000001e23},
      {"1." + std::string(779, '0') + "1e23", 1.0000000000000001e23},
      // Under half the smallest double it rounded up to that double.
      {"2E-324", 0.0},
      {"2.4703282292062327e-324", 0.0},
      {"2.4703282292062328e-324", 5e-324},
      // It read out of bounds, or passed zero to clz.
      {"0." + std::string(400, '0') + "1", 0.0},
      {"0." + std::string(300, '0') + "1", 1e-301},
      {"9." + std::string(800, '0') + "1", 9.0},
      {"0e100", 0.0},
      {"0.012345678901234567890", 0.012345678901234568},
      {"0.00000000000000000000000000000000000000001e-250", 1e-291},
  };
  for (const Row& row : rows) {
    CAPTURE(row.token);
    const rapidjson::Document v = one_value(row.token);
    REQUIRE(v.IsDouble());
    CHECK(v.GetDouble() == row.value);
  }
  const rapidjson::Document negative_zero = one_value("-0.0e-30");
  REQUIRE(negative_zero.IsDouble());
  CHECK(negative_zero.GetDouble() == 0.0);
  CHECK(std::signbit(negative_zero.GetDouble()));
}

TEST_CASE("integers are integers while they fit in 64 bits, as RapidJSON reads them") {
  const rapidjson::Document small = one_value("5");
  CHECK(small.IsInt());
  CHECK(small.IsUint());
  CHECK(small.GetInt() == 5);
  CHECK(one_value("-0").GetInt() == 0);
  const rapidjson::Document min = one_value("-9223372036854775808");
  REQUIRE(min.IsInt64());
  CHECK(min.GetInt64() == INT64_MIN);
  const rapidjson::Document max = one_value("18446744073709551615");
  REQUIRE(max.IsUint64());
  CHECK(max.GetUint64() == UINT64_MAX);
  CHECK_FALSE(max.IsInt64());
  const rapidjson::Document beyond = one_value("18446744073709551616");
  REQUIRE(beyond.IsDouble());
  CHECK(beyond.GetDouble() == 18446744073709551616.0);
  CHECK(one_value("-9223372036854775809").GetDouble() == -9223372036854775808.0);
  CHECK(one_value("1.0").IsDouble());
}

TEST_CASE("a number too large for a double is refused as RapidJSON refuses one") {
  for (const std::string& json : {std::string("[1.8e308]"), std::string("[1e400]"),
                                  std::string("[-2e308]"), "[" + std::string(400, '9') + "]"}) {
    CAPTURE(json);
    rapidjson::Document doc;
    const rapidjson::ParseResult r = parse_exact(doc, json);
    CHECK(r.Code() == rapidjson::kParseErrorNumberTooBig);
    CHECK(r.Offset() == 1);
  }
}

// RapidJSON's check of the text refuses a positive exponent over 308 plus the fraction digits it
// counted, whatever the value; an integer part is refused only past the range of a double.
TEST_CASE("RapidJSON's check of the text refuses an exponent past 308 whatever the value") {
  for (const std::string json : {"[0e309]", "[0.0e310]", "[1e309]"}) {
    CAPTURE(json);
    rapidjson::Document doc;
    CHECK(parse_exact(doc, json).Code() == rapidjson::kParseErrorNumberTooBig);
  }
  CHECK(one_value("0.00e310").GetDouble() == 0.0);
  CHECK(one_value("0.1e309").GetDouble() == 1e308);
  CHECK(one_value("1" + std::string(308, '0')).GetDouble() == 1e308);
  CHECK(one_value(std::string(309, '1')).GetDouble() == 1.1111111111111112e308);
}

// Found by fuzzing: RapidJSON works out the value of the number at the front before it refuses
// what follows. A rewrite of risky numbers, which gatewayd used before, missed these or made them
// valid ([0e0e100] rewritten to [0.0e100]).
TEST_CASE("invalid text is refused whatever number starts it, and leaves the document as it was") {
  for (const std::string& json :
       {"[0." + std::string(400, '0') + "1-]", std::string("[0e100-]"), std::string("[0e40-06]"),
        "[0." + std::string(32, '0') + "--1]", "[9." + std::string(800, '0') + "1+]",
        std::string("[0e0e100]"), std::string("[-0E1E+300]"), std::string("[1e-400e308]"),
        std::string("[0e0e0]"), std::string("{\"a\":0e0E-5}"), std::string("[00.01]"),
        std::string("[0.01.2]"), std::string("[-]"), std::string("[1.]"), std::string("[1e]"),
        std::string("[184467440737095516155-]"), std::string("[1,2")}) {
    CAPTURE(json);
    rapidjson::Document doc;
    CHECK(parse_exact(doc, json).IsError());
    CHECK(doc.IsNull());
  }
}

// RapidJSON's stream reads a NUL byte as its end: a body of a valid object, a NUL and anything
// after it passed as the object (helper 36: a create was applied, the rest never looked at).
TEST_CASE("a NUL byte after the root is text after the root, and refused") {
  using namespace std::string_literals;
  for (const std::string& json :
       {"{\"a\":1}\0"s, "{\"a\":1}\0\0"s, "{\"a\":1} \0{\"not\":\"json"s, "[1]\n\0x"s}) {
    CAPTURE(json.size());
    rapidjson::Document doc;
    const rapidjson::ParseResult r = parse_exact<rapidjson::kParseIterativeFlag>(doc, json);
    CHECK(r.Code() == rapidjson::kParseErrorDocumentRootNotSingular);
    CHECK(r.Offset() == json.find('\0'));
    CHECK(doc.IsNull());
    CHECK(parse_exact(doc, json).Code() == rapidjson::kParseErrorDocumentRootNotSingular);
  }
  // White space after the root is fine, and a NUL before or inside it is refused as before.
  rapidjson::Document spaced, nul_first, nul_inside;
  CHECK_FALSE(parse_exact(spaced, "{\"a\":1} \r\n\t"s).IsError());
  CHECK(parse_exact(nul_first, "\0{}"s).IsError());
  CHECK(parse_exact(nul_inside, "{\"a\":\"x\0y\"}"s).IsError());
}

// RapidJSON's EncodedInputStream skipped each byte of the mark that came next on its own, so a
// body starting with a lone 0xBF, or any other part of the mark, was read as if it were not there
// (helper 71).
TEST_CASE("a byte order mark is skipped only whole and only at the start") {
  using namespace std::string_literals;
  rapidjson::Document whole;
  REQUIRE_FALSE(parse_exact(whole, "\xEF\xBB\xBF{\"a\":1}"s).IsError());
  CHECK(whole["a"].GetInt() == 1);
  for (const std::string& start : {"\xEF"s, "\xBB"s, "\xBF"s, "\xEF\xBB"s, "\xEF\xBF"s, "\xBB\xBF"s,
                                   "\xEF\xBB\xBF\xEF\xBB\xBF"s, " \xEF\xBB\xBF"s}) {
    CAPTURE(start.size());
    const std::string json = start + "{\"a\":1}";
    rapidjson::Document doc;
    CHECK(parse_exact<rapidjson::kParseValidateEncodingFlag>(doc, json).IsError());
    CHECK(doc.IsNull());
  }
  // Inside a string its bytes are the character U+FEFF, kept.
  rapidjson::Document inside;
  REQUIRE_FALSE(
      parse_exact<rapidjson::kParseValidateEncodingFlag>(inside, "{\"a\":\"x\xEF\xBB\xBFy\"}"s)
          .IsError());
  CHECK(std::string(inside["a"].GetString()) == "x\xEF\xBB\xBFy");
  // Offsets count the mark.
  rapidjson::Document bad;
  CHECK(parse_exact(bad, "\xEF\xBB\xBF{\"a\":}"s).Offset() == 8);
}

TEST_CASE("the document is built as RapidJSON builds it") {
  rapidjson::Document doc;
  const std::string json = R"({"a":[1,-2,3.5,"x",true,null,{"b":{}}],"c":"d"})";
  REQUIRE_FALSE(parse_exact<rapidjson::kParseIterativeFlag>(doc, json).IsError());
  rapidjson::Document plain;
  plain.Parse(json.c_str(), json.size());
  CHECK(doc == plain);
}

}  // namespace
}  // namespace gw
