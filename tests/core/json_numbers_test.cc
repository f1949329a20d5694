// The rewrite of numbers that RapidJSON 1.1.0's full-precision parse reads out of bounds.
#include <doctest/doctest.h>

#include <string>

#include <rapidjson/document.h>

#include "core/json_numbers.h"

namespace gw {
namespace {

TEST_CASE("numbers with a zero integer part and leading fraction zeros are rewritten") {
  struct Row {
    std::string in;
    std::string out;
  };
  for (const Row& row : {
           Row{"[0.00125]", "[1.25e-3]"},
           Row{"[-0.05e3]", "[-5e1]"},
           Row{"[0.0001E-2]", "[1e-6]"},
           Row{"[0." + std::string(400, '0') + "1]", "[0.0]"},  // under 10^-324: zero
           Row{"[0." + std::string(300, '0') + "1]", "[1e-301]"},
           Row{"[-2e-400]", "[-0.0]"},
           Row{"[2." + std::string(20, '1') + "e400]", "[1e309]"},  // too big, as the parser says
           Row{"[1.7976931348623159e308]", "[1e309]"},
           Row{"[9." + std::string(800, '0') + "1]", "[9e0]"},  // digits past the 780th dropped
           Row{"[12.50000000000000000001]", "[1.250000000000000000001e1]"},
           Row{"[1" + std::string(30, '0') + ".5e-10]", "[1.0000000000000000000000000000005e20]"},
           Row{"[0e100]", "[0.0]"},
           Row{"[-0.000e-30]", "[-0.0]"},
           Row{R"({"a":0.0e50,"b":"0.001","c":[1,0.01]})", R"({"a":0.0,"b":"0.001","c":[1,1e-2]})"},
           // A string ends at the first quote not escaped: after an even run of backslashes.
           Row{R"({"s":"\\","n":0.01})", R"({"s":"\\","n":1e-2})"},
           Row{R"(["x\"0.01\\\"0.01",0.01])", R"(["x\"0.01\\\"0.01",1e-2])"},
           Row{R"(["\\\\",0.01,"0.01"])", R"(["\\\\",1e-2,"0.01"])"},
           // Invalid text after a number: the parser works out the number at the front first.
           Row{"[0." + std::string(400, '0') + "1-]", "[0.0-]"},
           Row{"[0e100-]", "[0.0-]"},
           Row{"[0.00125.5]", "[1.25e-3.5]"},
           Row{"[0.01.2]", "[1e-2.2]"},
           Row{"[0.00125e]", "[1.25e-3e]"},
           Row{"[0.00125e+-1]", "[1.25e-3e+-1]"},
           Row{"[-0.0e40-06]", "[-0.0-06]"},
       }) {
    CAPTURE(row.in);
    auto out = rewrite_risky_numbers(row.in);
    REQUIRE(out.has_value());
    CHECK(*out == row.out);
  }
}

TEST_CASE("other numbers, strings and text that is no number are left alone") {
  for (const std::string in :
       {"[0]", "[-0]", "[0.5]", "[0.5e-30]", "[10.01]", "[1e-299]", "[100000000000000000000000]",
        "[12345678901234567890]", "[1.2345678901234567e300]",
        R"({"x":"0.00000000000000000000001","y":"\"0.001\""})", "[00.01]", "[0.]", "[0.0e]", "[-]",
        R"(["unterminated 0.001)", R"(["\"0.001)", "[1.0e+-3]"}) {
    CAPTURE(in);
    CHECK_FALSE(rewrite_risky_numbers(in).has_value());
  }
}

// Found by fuzzing: a risky number followed by `-`, `+` or `.` was left as it was (the run of
// number characters was no single number), and the parser read out of bounds (a segmentation
// fault of gatewayd, from one request body) or passed zero to clz before it refused the text.
TEST_CASE("invalid text with a risky number at its front is refused, not read out of bounds") {
  for (const std::string& json :
       {"[0." + std::string(400, '0') + "1-]", std::string("[0e100-]"), std::string("[0e40-06]"),
        "[0." + std::string(32, '0') + "--1]",
        "[0." + std::string(317, '0') + "-" + std::string(44, '0') + "1]",
        "[9." + std::string(800, '0') + "1+]", "{\"a\":0." + std::string(400, '0') + "1.5}"}) {
    CAPTURE(json);
    rapidjson::Document doc;
    parse_exact(doc, json);
    CHECK(doc.HasParseError());
  }
}

TEST_CASE("a rewritten number parses to the value the original names") {
  for (const std::string number :
       {"0.1", "0.001", "0.000000000000000000000001", "0.0000000000000000000000012345678901234567",
        "0.012345678901234567890", "0.00000000000000000000000000000000000000001e-250"}) {
    CAPTURE(number);
    const std::string json = "[" + number + "]";
    auto rewritten = rewrite_risky_numbers(json);
    const std::string text = rewritten ? *rewritten : json;
    rapidjson::Document doc;
    doc.Parse<rapidjson::kParseFullPrecisionFlag>(text.c_str(), text.size());
    REQUIRE_FALSE(doc.HasParseError());
    CHECK(doc[0].GetDouble() == std::stod(number));
  }
}

}  // namespace
}  // namespace gw
