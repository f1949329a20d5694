#include "commands/records.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

namespace gw {

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::kProfile: return "gateway_security_profile";
    case Kind::kDomain: return "domain";
    case Kind::kWebhook: return "webhook";
  }
  return "";
}

const char* id_prefix(Kind kind) {
  switch (kind) {
    case Kind::kProfile: return "gsp";
    case Kind::kDomain: return "dom";
    case Kind::kWebhook: return "whk";
  }
  return "";
}

const char* id_field(Kind kind) {
  switch (kind) {
    case Kind::kProfile: return "profile_id";
    case Kind::kDomain: return "domain_id";
    case Kind::kWebhook: return "webhook_id";
  }
  return "";
}

std::optional<Kind> kind_from_name(std::string_view name) {
  for (Kind k : {Kind::kProfile, Kind::kDomain, Kind::kWebhook}) {
    if (name == kind_name(k)) return k;
  }
  return std::nullopt;
}

std::optional<Kind> kind_of_id(std::string_view id) {
  if (id.find('\0') != std::string_view::npos) return std::nullopt;
  for (Kind k : {Kind::kProfile, Kind::kDomain, Kind::kWebhook}) {
    std::string_view p = id_prefix(k);
    if (id.size() > p.size() + 1 && id.substr(0, p.size()) == p && id[p.size()] == '_') return k;
  }
  return std::nullopt;
}

bool is_record_id(Kind kind, std::string_view id) {
  const std::string_view prefix = id_prefix(kind);
  if (id.size() != prefix.size() + 1 + 26 || !id.starts_with(prefix) || id[prefix.size()] != '_') {
    return false;
  }
  constexpr std::string_view kCrockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
  return id.substr(prefix.size() + 1).find_first_not_of(kCrockford) == std::string_view::npos;
}

Kind kind_of(const Record& record) { return static_cast<Kind>(record.index() + 1); }

const Meta& meta_of(const Record& record) {
  return std::visit([](const auto& r) -> const Meta& { return r.meta; }, record);
}

Meta& meta_of(Record& record) {
  return std::visit([](auto& r) -> Meta& { return r.meta; }, record);
}

namespace {

using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

void str(Writer& w, const char* key, const std::string& value) {
  w.Key(key);
  w.String(value.data(), static_cast<rapidjson::SizeType>(value.size()));
}
void boolean(Writer& w, const char* key, bool value) {
  w.Key(key);
  w.Bool(value);
}
void integer(Writer& w, const char* key, int64_t value) {
  w.Key(key);
  w.Int64(value);
}
void raw(Writer& w, const char* key, const std::string& json) {
  w.Key(key);
  if (json.empty()) {
    w.Null();
  } else {
    w.RawValue(json.data(), json.size(), rapidjson::kObjectType);
  }
}

void write_head(Writer& w, Kind kind, const Meta& m) {
  str(w, id_field(kind), m.id);
  str(w, "team_id", m.team_id);
}
void write_times(Writer& w, const Meta& m) {
  integer(w, "created_at", m.created_at);
  integer(w, "updated_at", m.updated_at);
  integer(w, "deleted_at", m.deleted_at);
}

void write(Writer& w, const Profile& p) {
  write_head(w, Kind::kProfile, p.meta);
  str(w, "hostname", p.hostname);
  boolean(w, "enabled", p.enabled);
  boolean(w, "force_https", p.force_https);
  boolean(w, "hsts_enabled", p.hsts_enabled);
  boolean(w, "cors_enabled", p.cors_enabled);
  str(w, "cors_headers", p.cors_headers);
  str(w, "cors_methods", p.cors_methods);
  str(w, "cors_origins", p.cors_origins);
  integer(w, "max_body_bytes", p.max_body_bytes);
  raw(w, "geo_policy", p.geo_policy);
  str(w, "waf_mode", p.waf_mode);
  str(w, "waf_template", p.waf_template);
  str(w, "waf_custom_directives", p.waf_custom_directives);
  raw(w, "waf_overrides", p.waf_overrides);
  raw(w, "waf_rule_exclusions", p.waf_rule_exclusions);
  write_times(w, p.meta);
}

void write(Writer& w, const Domain& d) {
  write_head(w, Kind::kDomain, d.meta);
  str(w, "hostname", d.hostname);
  str(w, "redirect_to", d.redirect_to);
  str(w, "scope", d.scope);
  str(w, "status", d.status);
  str(w, "verification_hostname", d.verification_hostname);
  str(w, "verification_value", d.verification_value);
  str(w, "verification_parent_id", d.verification_parent_id);
  integer(w, "verified_at", d.verified_at);
  str(w, "verification_error", d.verification_error);
  str(w, "workload_id", d.workload_id);
  write_times(w, d.meta);
}

void write(Writer& w, const Webhook& h) {
  write_head(w, Kind::kWebhook, h.meta);
  str(w, "workload_id", h.workload_id);
  str(w, "provider", h.provider);
  str(w, "status", h.status);
  str(w, "external_id", h.external_id);
  write_times(w, h.meta);
}

// Reading stored records: the JSON was written by us, so a missing or mistyped member is data
// corruption (or a schema we do not know), reported as kInternal.
class Reader {
 public:
  explicit Reader(const rapidjson::Value& v) : v_(v) {}
  bool ok() const { return ok_; }
  std::string str(const char* key, const char* fallback = nullptr) {
    auto it = v_.FindMember(key);
    if (it == v_.MemberEnd() || !it->value.IsString()) {
      if (fallback != nullptr && it == v_.MemberEnd()) return fallback;
      ok_ = false;
      return {};
    }
    return std::string(it->value.GetString(), it->value.GetStringLength());
  }
  bool boolean(const char* key) {
    auto it = v_.FindMember(key);
    if (it == v_.MemberEnd() || !it->value.IsBool()) {
      ok_ = false;
      return false;
    }
    return it->value.GetBool();
  }
  int64_t integer(const char* key) {
    auto it = v_.FindMember(key);
    if (it == v_.MemberEnd() || !it->value.IsInt64()) {
      ok_ = false;
      return 0;
    }
    return it->value.GetInt64();
  }
  std::string json(const char* key) {
    auto it = v_.FindMember(key);
    if (it == v_.MemberEnd()) {
      ok_ = false;
      return {};
    }
    return it->value.IsNull() ? std::string() : canonical_json(it->value);
  }
  Meta meta(Kind kind) {
    Meta m;
    m.id = str(id_field(kind));
    m.team_id = str("team_id");
    m.created_at = integer("created_at");
    m.updated_at = integer("updated_at");
    m.deleted_at = integer("deleted_at");
    return m;
  }

 private:
  const rapidjson::Value& v_;
  bool ok_ = true;
};

}  // namespace

std::string canonical_json(const rapidjson::Value& value) {
  rapidjson::StringBuffer buf;
  Writer w(buf);
  value.Accept(w);
  return std::string(buf.GetString(), buf.GetSize());
}

std::string to_json(const Record& record) {
  rapidjson::StringBuffer buf(nullptr, 1024);  // most records fit: the buffer does not grow
  Writer w(buf);
  w.StartObject();
  std::visit([&w](const auto& r) { write(w, r); }, record);
  w.EndObject();
  return std::string(buf.GetString(), buf.GetSize());
}

Result<Record> record_from_json(Kind kind, const rapidjson::Value& value, int schema_version) {
  if (!value.IsObject()) return make_error(Code::kInternal, "stored record is not an object");
  Reader r(value);
  Record out;
  switch (kind) {
    case Kind::kProfile: {
      Profile p;
      p.meta = r.meta(kind);
      p.hostname = r.str("hostname");
      p.enabled = r.boolean("enabled");
      p.force_https = r.boolean("force_https");
      p.hsts_enabled = r.boolean("hsts_enabled");
      p.cors_enabled = r.boolean("cors_enabled");
      p.cors_headers = r.str("cors_headers");
      p.cors_methods = r.str("cors_methods");
      p.cors_origins = r.str("cors_origins");
      p.max_body_bytes = r.integer("max_body_bytes");
      p.geo_policy = r.json("geo_policy");
      p.waf_mode = r.str("waf_mode");
      p.waf_template = r.str("waf_template");
      p.waf_custom_directives = r.str("waf_custom_directives");
      p.waf_overrides = r.json("waf_overrides");
      p.waf_rule_exclusions = r.json("waf_rule_exclusions");
      out = std::move(p);
      break;
    }
    case Kind::kDomain: {
      Domain d;
      d.meta = r.meta(kind);
      d.hostname = r.str("hostname");
      d.redirect_to = r.str("redirect_to");
      // Schema 1 predates `scope`: those records were all subtree claims.
      d.scope = schema_version < 2 ? r.str("scope", "subtree") : r.str("scope");
      d.status = r.str("status");
      d.verification_hostname = r.str("verification_hostname");
      d.verification_value = r.str("verification_value");
      d.verification_parent_id = r.str("verification_parent_id");
      d.verified_at = r.integer("verified_at");
      d.verification_error = r.str("verification_error", "");
      d.workload_id = r.str("workload_id");
      out = std::move(d);
      break;
    }
    case Kind::kWebhook: {
      Webhook h;
      h.meta = r.meta(kind);
      h.workload_id = r.str("workload_id");
      h.provider = r.str("provider");
      h.status = r.str("status");
      h.external_id = r.str("external_id");
      out = std::move(h);
      break;
    }
  }
  if (!r.ok()) return make_error(Code::kInternal, "stored record has a missing or mistyped member");
  return out;
}

}  // namespace gw
