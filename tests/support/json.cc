#include "support/json.h"

#include <stdexcept>

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

namespace gw::testing {
namespace {

rapidjson::Document parse_object(std::string_view text) {
  rapidjson::Document d = parse_json(text);
  if (d.HasParseError() || !d.IsObject()) {
    throw std::invalid_argument("not a JSON object: " + std::string(text));
  }
  return d;
}

const rapidjson::Value* member(const rapidjson::Value& v, std::string_view key) {
  if (!v.IsObject()) return nullptr;
  auto it = v.FindMember(rapidjson::Value(rapidjson::StringRef(key.data(), key.size())));
  return it == v.MemberEnd() ? nullptr : &it->value;
}

}  // namespace

rapidjson::Document parse_json(std::string_view text) {
  rapidjson::Document d;
  d.Parse(text.data(), text.size());
  return d;
}

std::string to_json(const rapidjson::Value& v) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  v.Accept(w);
  return std::string(buf.GetString(), buf.GetSize());
}

std::string json_with(std::string_view object_json, std::string_view key,
                      std::string_view value_json) {
  rapidjson::Document d = parse_object(object_json);
  rapidjson::Document value = parse_json(value_json);
  if (value.HasParseError())
    throw std::invalid_argument("bad JSON value: " + std::string(value_json));
  auto& alloc = d.GetAllocator();
  rapidjson::Value copy(value, alloc);
  rapidjson::Value name(key.data(), static_cast<rapidjson::SizeType>(key.size()), alloc);
  auto it = d.FindMember(name);
  if (it != d.MemberEnd()) {
    it->value = copy;
  } else {
    d.AddMember(name, copy, alloc);
  }
  return to_json(d);
}

std::string json_without(std::string_view object_json, std::string_view key) {
  rapidjson::Document d = parse_object(object_json);
  d.RemoveMember(rapidjson::Value(rapidjson::StringRef(key.data(), key.size())));
  return to_json(d);
}

std::string json_quote(std::string_view s) {
  rapidjson::Value v(rapidjson::StringRef(s.data(), s.size()));
  return to_json(v);
}

const rapidjson::Value& field(const rapidjson::Value& v, std::string_view key) {
  static const rapidjson::Value kNull;
  const rapidjson::Value* m = member(v, key);
  return m != nullptr ? *m : kNull;
}

const rapidjson::Value& at(const rapidjson::Value& v, size_t i) {
  static const rapidjson::Value kNull;
  return v.IsArray() && i < v.Size() ? v[static_cast<rapidjson::SizeType>(i)] : kNull;
}

int64_t length(const rapidjson::Value& v) { return v.IsArray() ? v.Size() : -1; }

std::vector<const rapidjson::Value*> items(const rapidjson::Value& v) {
  std::vector<const rapidjson::Value*> out;
  if (v.IsArray()) {
    for (const auto& e : v.GetArray()) out.push_back(&e);
  }
  return out;
}

std::string str(const rapidjson::Value& v, std::string_view key) {
  const rapidjson::Value* m = member(v, key);
  return m != nullptr && m->IsString() ? std::string(m->GetString(), m->GetStringLength()) : "";
}

int64_t num(const rapidjson::Value& v, std::string_view key, int64_t fallback) {
  const rapidjson::Value* m = member(v, key);
  return m != nullptr && m->IsInt64() ? m->GetInt64() : fallback;
}

}  // namespace gw::testing
