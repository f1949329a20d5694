// GET /openapi.json on the real server, and the document checked against the server that serves
// it: a real request to every documented path and method gets a documented success, never 405 and
// never the "unknown path" 404.
#include <algorithm>
#include <string>
#include <vector>

#include "integration/fixture.h"
#include "support/process.h"

namespace gw::itest::openapi_test {
namespace {

bool is_method(std::string_view key) {
  for (std::string_view m : {"get", "put", "post", "delete", "patch", "head", "options", "trace"}) {
    if (key == m) return true;
  }
  return false;
}

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
  return s;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return s;
}

// The media type of a Content-Type value, without parameters or blanks.
std::string media_type(std::string_view content_type) {
  return testing::trim(content_type.substr(0, content_type.find(';')));
}

struct Operation {
  std::string method;  // upper case
  std::string path;    // template, e.g. /v1/domain/{id}/verify
};

// The documented operations, DELETEs last so every other request still finds its record.
std::vector<Operation> operations(const rapidjson::Document& doc) {
  std::vector<Operation> out;
  const rapidjson::Value& paths = field(doc, "paths");
  if (!paths.IsObject()) return out;
  for (const auto& item : paths.GetObject()) {
    if (!item.value.IsObject()) continue;
    for (const auto& m : item.value.GetObject()) {
      if (is_method(m.name.GetString())) {
        out.push_back({upper(m.name.GetString()), item.name.GetString()});
      }
    }
  }
  std::stable_partition(out.begin(), out.end(),
                        [](const Operation& op) { return op.method != "DELETE"; });
  return out;
}

// The resource kind whose paths start with `path`'s first two segments, or nullptr.
const Kind* kind_of_path(std::string_view path) {
  for (const Kind* kind : kKinds) {
    if (path == kind->path || path.starts_with(std::string(kind->path) + "/")) return kind;
  }
  return nullptr;
}

// `op`'s path with its `{id}` replaced by `ids`' id of a record of its kind (`ids[i]` one of
// kKinds[i]'s).
std::string concrete_path(const Operation& op, const std::string (&ids)[std::size(kKinds)]) {
  std::string path = op.path;
  if (size_t at = path.find("{id}"); at != std::string::npos) {
    const Kind* kind = kind_of_path(op.path);
    REQUIRE(kind != nullptr);
    path.replace(at, 4, ids[std::find(std::begin(kKinds), std::end(kKinds), kind) - kKinds]);
  }
  return path;
}

// `v`, or what its `$ref` (a local `#/...` pointer) points to.
const rapidjson::Value& resolve(const rapidjson::Value& doc, const rapidjson::Value& v) {
  const std::string ref = str(v, "$ref");
  if (!ref.starts_with("#/")) return v;
  const rapidjson::Value* at = &doc;
  size_t start = 2;
  while (start <= ref.size()) {
    const size_t slash = std::min(ref.find('/', start), ref.size());
    at = &field(*at, std::string_view(ref).substr(start, slash - start));
    start = slash + 1;
  }
  return *at;
}

}  // namespace

TEST_CASE("GET /openapi.json serves the OpenAPI 3.1 document without authentication") {
  Server server;
  HttpClient http;
  Response r = http.request("GET", server.url() + "/openapi.json");
  INFO(r.status, " ", r.error);
  CHECK(r.status == 200);
  CHECK(media_type(r.header("Content-Type").value_or("")) == "application/json");
  rapidjson::Document doc = json(r);
  REQUIRE_FALSE(doc.HasParseError());
  CHECK(str(doc, "openapi") == "3.1.0");
  CHECK(str(field(doc, "info"), "title") == "gatewayd");

  check_problem(http.request("GET", server.url() + "/openapi.json?pretty=1"), 400, "invalid_query");
  check_problem(http.request("POST", server.url() + "/openapi.json", {}, std::string("{}")), 405,
                "method_not_allowed");
  Response metrics = http.request("GET", server.url() + "/metrics");
  CHECK(metrics.body.find("route=\"/openapi.json\",status=\"200\"} 1\n") != std::string::npos);
}

TEST_CASE("every documented OpenAPI operation is served with a documented success") {
  Server server;
  Api api(server, kTeamA);
  Response served = api.http().request("GET", server.url() + "/openapi.json");
  rapidjson::Document doc = json(served);
  REQUIRE_FALSE(doc.HasParseError());
  // One live record per kind for the `{id}` paths; the creates below use other hostnames.
  std::string ids[std::size(kKinds)];
  for (size_t i = 0; i < std::size(kKinds); ++i) ids[i] = create(api, *kKinds[i], 1);

  const std::vector<Operation> ops = operations(doc);
  CHECK(ops.size() >= 20);
  int n = 100;
  for (const Operation& op : ops) {
    CAPTURE(op.method);
    CAPTURE(op.path);
    const Kind* kind = kind_of_path(op.path);
    std::string path = op.path;
    if (size_t at = path.find("{id}"); at != std::string::npos) {
      REQUIRE(kind != nullptr);
      path.replace(at, 4, ids[std::find(std::begin(kKinds), std::end(kKinds), kind) - kKinds]);
    }
    REQUIRE(path.find('{') == std::string::npos);  // no other template parameters
    Response r;
    if (op.method == "POST" && kind != nullptr && path == kind->path) {
      r = api.post(path, kind->body(api.team(), ++n));
    } else if (op.method == "PUT") {
      REQUIRE(kind != nullptr);
      r = api.put(path, kind->body(api.team(), 1));
    } else if (op.method == "POST") {
      r = api.send(op.method, path, {}, std::string());  // an action such as verify: no body
    } else {
      r = api.send(op.method, path, {});
    }
    INFO(r.status, " ", r.body.substr(0, 300), r.error);
    CHECK(r.status != 405);
    if (r.status == 404) CHECK_FALSE(str(json(r), "detail").starts_with("no resource at"));
    // The status is a documented success of this operation, with its documented media type.
    const rapidjson::Value& responses =
        field(field(field(field(doc, "paths"), op.path), lower(op.method)), "responses");
    const std::string status = std::to_string(r.status);
    CHECK(status.starts_with("2"));
    const rapidjson::Value& documented = field(responses, status);
    REQUIRE(documented.IsObject());
    const rapidjson::Value& content = field(documented, "content");
    if (content.IsObject()) {
      const std::string got = media_type(r.header("Content-Type").value_or(""));
      bool listed = false;
      for (const auto& c : content.GetObject())
        listed = listed || media_type(c.name.GetString()) == got;
      CHECK_MESSAGE(listed, "Content-Type ", got, " is not documented");
    }
    // Every header the document marks as always sent is there.
    const rapidjson::Value& headers = field(documented, "headers");
    if (headers.IsObject()) {
      for (const auto& h : headers.GetObject()) {
        const rapidjson::Value& header = resolve(doc, h.value);
        if (!field(header, "required").IsTrue()) continue;
        CHECK_MESSAGE(r.header(h.name.GetString()).has_value(), std::string(h.name.GetString()),
                      " is documented as required but not sent");
      }
    }
  }
}

TEST_CASE("a head the server refuses gets a 400 code each operation documents") {
  Server server;
  Api api(server, kTeamA);
  rapidjson::Document doc = json(api.http().request("GET", server.url() + "/openapi.json"));
  REQUIRE_FALSE(doc.HasParseError());
  std::string ids[std::size(kKinds)];
  for (size_t i = 0; i < std::size(kKinds); ++i) ids[i] = create(api, *kKinds[i], 1);
  for (const Operation& op : operations(doc)) {
    CAPTURE(op.method);
    CAPTURE(op.path);
    const std::string path = concrete_path(op, ids);
    // A second X-Tenant-ID line: refused with the head, before the path or the token is looked
    // at, on every path.
    Response r = api.send(op.method, path, {{"X-Tenant-ID", api.team()}}, std::string("{}"));
    INFO(r.status, " ", r.body.substr(0, 300), r.error);
    REQUIRE(r.status == 400);
    const std::string code = str(json(r), "code");
    CHECK(code == "bad_request");
    const rapidjson::Value& documented = resolve(
        doc, field(field(field(field(field(doc, "paths"), op.path), lower(op.method)), "responses"),
                   "400"));
    const rapidjson::Value& codes = field(
        field(field(field(field(documented, "content"), "application/problem+json"), "schema"),
              "properties"),
        "code");
    bool listed = false;
    for (const rapidjson::Value* c : items(field(codes, "enum")))
      listed = listed || c->GetString() == code;
    CHECK_MESSAGE(listed, code, " is not in the documented 400 codes");
  }
}

// Every operation of a method that takes a body (POST, PUT, DELETE) reads one, and refuses one
// over --max-request-bytes with 413: each documents its body and that 413 (DELETE documented
// neither, helper 135).
TEST_CASE("every operation that reads a body documents it and its 413") {
  Server server({"--max-request-bytes", "1000"});
  Api api(server, kTeamA);
  rapidjson::Document doc = json(api.http().request("GET", server.url() + "/openapi.json"));
  REQUIRE_FALSE(doc.HasParseError());
  std::string ids[std::size(kKinds)];
  for (size_t i = 0; i < std::size(kKinds); ++i) ids[i] = create(api, *kKinds[i], 1);
  int checked = 0;
  for (const Operation& op : operations(doc)) {
    if (op.method != "POST" && op.method != "PUT" && op.method != "DELETE") continue;
    CAPTURE(op.method);
    CAPTURE(op.path);
    const std::string path = concrete_path(op, ids);
    Response r = api.send(op.method, path, {}, "{\"a\":\"" + std::string(1000, 'x') + "\"}");
    INFO(r.status, " ", r.body.substr(0, 300), r.error);
    CHECK(r.status == 413);
    const rapidjson::Value& operation =
        field(field(field(doc, "paths"), op.path), lower(op.method));
    CHECK(field(operation, "requestBody").IsObject());
    CHECK(field(field(operation, "responses"), "413").IsObject());
    ++checked;
  }
  CHECK(checked == 10);  // a create, an update and a delete of each kind, and verify
}

}  // namespace gw::itest::openapi_test
