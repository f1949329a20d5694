// The embedded OpenAPI document against the router's own table: it parses as JSON, every served
// route is documented with its method, every documented operation is served, authentication is
// documented exactly where the router asks for it, and the error shape lists every error code.
#include <doctest/doctest.h>

#include <algorithm>
#include <initializer_list>
#include <regex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <rapidjson/document.h>

#include "commands/challenge.h"
#include "commands/fields.h"
#include "core/error.h"
#include "http/api.h"
#include "http/openapi.h"
#include "service/idempotency.h"

namespace gw::http {
namespace {

constexpr std::string_view kMethods[] = {"get",     "put",  "post",  "delete",
                                         "options", "head", "patch", "trace"};

rapidjson::Document parsed() {
  rapidjson::Document doc;
  const std::string_view text = openapi_json();
  doc.Parse<rapidjson::kParseValidateEncodingFlag>(text.data(), text.size());
  return doc;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return out;
}

const rapidjson::Value* member(const rapidjson::Value& v, const std::string& name) {
  if (!v.IsObject()) return nullptr;
  auto it = v.FindMember(name.c_str());
  return it == v.MemberEnd() ? nullptr : &it->value;
}

// The value at `names` under `v`, one member name after another, or nullptr where one is missing.
const rapidjson::Value* member_at(const rapidjson::Value& v,
                                  std::initializer_list<std::string> names) {
  const rapidjson::Value* at = &v;
  for (const std::string& name : names) {
    at = member(*at, name);
    if (at == nullptr) return nullptr;
  }
  return at;
}

// The operation object documented for `method` (any case) on `path`, or nullptr.
const rapidjson::Value* operation(const rapidjson::Document& doc, const std::string& path,
                                  std::string_view method) {
  const rapidjson::Value* paths = member(doc, "paths");
  const rapidjson::Value* item = paths != nullptr ? member(*paths, path) : nullptr;
  return item != nullptr ? member(*item, lower(method)) : nullptr;
}

TEST_CASE("the embedded OpenAPI document is a JSON object for OpenAPI 3.1.0") {
  rapidjson::Document doc = parsed();
  REQUIRE_FALSE(doc.HasParseError());
  REQUIRE(doc.IsObject());
  const rapidjson::Value* version = member(doc, "openapi");
  REQUIRE(version != nullptr);
  REQUIRE(version->IsString());
  CHECK(std::string_view(version->GetString()) == "3.1.0");
  REQUIRE(member(doc, "paths") != nullptr);
  CHECK(member(doc, "paths")->IsObject());
}

TEST_CASE("the 429 answer documents the number of WAF checks a tenant may have waiting") {
  rapidjson::Document doc = parsed();
  const rapidjson::Value* d =
      member_at(doc, {"components", "responses", "TooManyRequests", "description"});
  REQUIRE(d != nullptr);
  REQUIRE(d->IsString());
  CHECK(std::string_view(d->GetString())
            .find("has " + std::to_string(kMaxWafChecksWaiting) + " such writes waiting") !=
        std::string_view::npos);
}

TEST_CASE("every route the router serves is documented in the OpenAPI document") {
  rapidjson::Document doc = parsed();
  REQUIRE(doc.IsObject());
  REQUIRE_FALSE(served_routes().empty());
  for (const RouteSpec& route : served_routes()) {
    CAPTURE(route.method);
    CAPTURE(route.path);
    const rapidjson::Value* op = operation(doc, route.path, route.method);
    REQUIRE(op != nullptr);
    // Authentication is documented exactly where the router asks for it: the global bearer
    // requirement applies unless the operation opts out with `security: []`.
    const rapidjson::Value* security = member(*op, "security");
    const bool open = security != nullptr && security->IsArray() && security->Empty();
    CHECK(open == !route.protected_route);
    const rapidjson::Value* responses = member(*op, "responses");
    REQUIRE(responses != nullptr);
    CHECK((member(*responses, "401") != nullptr) == route.protected_route);
  }
}

TEST_CASE("every operation of the OpenAPI document is served by the router") {
  rapidjson::Document doc = parsed();
  REQUIRE(doc.IsObject());
  const rapidjson::Value* paths = member(doc, "paths");
  REQUIRE(paths != nullptr);
  size_t documented = 0;
  for (const auto& item : paths->GetObject()) {
    const std::string path = item.name.GetString();
    REQUIRE(item.value.IsObject());
    for (const auto& m : item.value.GetObject()) {
      const std::string key = m.name.GetString();
      if (std::find(std::begin(kMethods), std::end(kMethods), key) == std::end(kMethods)) continue;
      ++documented;
      CAPTURE(path);
      CAPTURE(key);
      const auto& routes = served_routes();
      CHECK(std::any_of(routes.begin(), routes.end(), [&](const RouteSpec& r) {
        return r.path == path && lower(r.method) == key;
      }));
    }
  }
  CHECK(documented == served_routes().size());
}

TEST_CASE("the OpenAPI problem codes include every error code the server sends") {
  rapidjson::Document doc = parsed();
  REQUIRE(doc.IsObject());
  const rapidjson::Value* codes =
      member_at(doc, {"components", "schemas", "Problem", "properties", "code", "enum"});
  REQUIRE(codes != nullptr);
  REQUIRE(codes->IsArray());
  std::set<std::string> documented;
  for (const auto& c : codes->GetArray()) documented.insert(c.GetString());
  for (int i = 0; i <= static_cast<int>(Code::kUnavailable); ++i) {
    const std::string name = code_name(static_cast<Code>(i));
    CAPTURE(name);
    CHECK(documented.contains(name));
  }
}

TEST_CASE(
    "the document's bounds of after, after_version, as_of and Idempotency-Key are the server's") {
  rapidjson::Document doc = parsed();
  REQUIRE(doc.IsObject());
  const rapidjson::Value* components = member(doc, "components");
  const rapidjson::Value* parameters = components ? member(*components, "parameters") : nullptr;
  REQUIRE(parameters != nullptr);
  auto schema = [&](const char* name) -> const rapidjson::Value& {
    const rapidjson::Value* p = member(*parameters, name);
    const rapidjson::Value* s = p ? member(*p, "schema") : nullptr;
    REQUIRE(s != nullptr);
    return *s;
  };
  for (const char* name : {"After", "AfterVersion", "AsOf"}) {
    CAPTURE(name);
    const rapidjson::Value* max = member(schema(name), "maximum");
    REQUIRE(max != nullptr);
    REQUIRE(max->IsUint64());
    CHECK(max->GetUint64() == kMaxQuerySeq);
  }
  const rapidjson::Value& key = schema("IdempotencyKey");
  const rapidjson::Value* pattern = member(key, "pattern");
  REQUIRE(pattern != nullptr);
  const std::regex allowed(pattern->GetString());
  for (int c = 1; c < 128; ++c) {
    const std::string candidate = "k" + std::string(1, static_cast<char>(c)) + "k";
    CAPTURE(c);
    CHECK(std::regex_match(candidate, allowed) == valid_idempotency_key(candidate));
  }
  const rapidjson::Value* max_length = member(key, "maxLength");
  REQUIRE(max_length != nullptr);
  const size_t longest = max_length->GetUint();
  CHECK(valid_idempotency_key(std::string(longest, 'k')));
  CHECK_FALSE(valid_idempotency_key(std::string(longest + 1, 'k')));
}

TEST_CASE("the document's hostname pattern and domain hostname bound are the server's") {
  rapidjson::Document doc = parsed();
  REQUIRE(doc.IsObject());
  const rapidjson::Value* pattern =
      member_at(doc, {"components", "schemas", "HostnameInput", "pattern"});
  REQUIRE(pattern != nullptr);
  const std::regex allowed(pattern->GetString());
  // Names each side of every rule the pattern states: labels, hyphens, blanks, wildcards, a last
  // label that is a number, and the length (253 bytes, 254 with the trailing dot: a maxLength of
  // 254 let a name of 254 without one through, helper 159).
  std::vector<std::string> candidates = {"example.com",   "Shop.Example.com.",
                                         "a.b",           "xn--bcher-kva.example",
                                         "a-1.b-2",       "9.example.com",
                                         "example.123",   "1.2.3.4",
                                         "1.2.3.4.",      "b.0X1F",
                                         "a.0x",          "d.0x10.example.com",
                                         "c.0xfg",        "e.0b1",
                                         "f.1x",          "g.0x1f.",
                                         "localhost",     "-a.com",
                                         "a-.com",        "a..com",
                                         ".a.com",        "a.com..",
                                         "*.example.com", "ex ample.com",
                                         "ex_ample.com",  "[::1].com",
                                         "a.com:80",      "example.com-"};
  candidates.push_back(std::string(63, 'a') + ".com");
  candidates.push_back(std::string(64, 'a') + ".com");
  const std::string l63(63, 'a');
  candidates.push_back(l63 + "." + l63 + "." + l63 + "." + std::string(61, 'a'));        // 253
  candidates.push_back(l63 + "." + l63 + "." + l63 + "." + std::string(61, 'a') + ".");  // 254
  candidates.push_back(l63 + "." + l63 + "." + l63 + "." + std::string(62, 'a'));        // 254
  candidates.push_back(l63 + "." + l63 + "." + l63 + "." + std::string(62, 'a') + ".");  // 255
  for (const std::string& candidate : candidates) {
    CAPTURE(candidate);
    std::string normalized;
    CHECK(std::regex_match(candidate, allowed) ==
          !fields::hostname(candidate, &normalized).has_value());
  }
  const rapidjson::Value* max_length = member_at(
      doc, {"components", "schemas", "DomainInput", "properties", "hostname", "maxLength"});
  REQUIRE(max_length != nullptr);
  CHECK(max_length->GetUint() == kMaxDomainHostnameBytes + 1);  // with a trailing dot
  // ...and the trailing dot alone gets that byte: 238 bytes without one passed the schema.
  const rapidjson::Value* domain_pattern =
      member_at(doc, {"components", "schemas", "DomainInput", "properties", "hostname", "pattern"});
  REQUIRE(domain_pattern != nullptr);
  const std::regex domain_allowed(domain_pattern->GetString());
  const std::string head = l63 + "." + l63 + "." + l63 + ".";  // 192 bytes
  for (size_t bytes :
       {kMaxDomainHostnameBytes - 1, kMaxDomainHostnameBytes, kMaxDomainHostnameBytes + 1}) {
    const std::string name = head + std::string(bytes - head.size(), 'b');
    CAPTURE(bytes);
    CHECK(std::regex_match(name, domain_allowed) == (bytes <= kMaxDomainHostnameBytes));
    CHECK(std::regex_match(name + ".", domain_allowed) == (bytes <= kMaxDomainHostnameBytes));
  }
}

}  // namespace
}  // namespace gw::http
