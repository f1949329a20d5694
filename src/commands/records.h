// The three record kinds as plain values, and their JSON wire form. A record's JSON is produced in
// one fixed member order, so the same record always serializes to the same bytes (the event log's
// hash chain and the stored read model rely on that). Pure; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include <rapidjson/document.h>

#include "core/error.h"

namespace gw {

enum class Kind : uint8_t { kProfile = 1, kDomain = 2, kWebhook = 3 };

// "gateway_security_profile", "domain", "webhook": the path segment and the event-type prefix.
const char* kind_name(Kind kind);
// "gsp", "dom", "whk"
const char* id_prefix(Kind kind);
// Name of the id member: "profile_id", "domain_id", "webhook_id".
const char* id_field(Kind kind);
std::optional<Kind> kind_from_name(std::string_view name);
// The kind an id belongs to, by its prefix (nullopt for anything that is not one of our ids,
// among them any id holding a NUL: the store's keys use NUL as their separator).
std::optional<Kind> kind_of_id(std::string_view id);
// Whether `id` has the form gatewayd gives ids of `kind`: its prefix, '_' and 26 characters of
// Crockford's base32 alphabet (core/clock.h). A path's id of any other form names no record;
// the API answers 404 for it before it reaches the store.
bool is_record_id(Kind kind, std::string_view id);

// Members shared by every record. Timestamps are Unix seconds; 0 means "not set".
struct Meta {
  std::string id;
  std::string team_id;
  int64_t created_at = 0;
  int64_t updated_at = 0;
  int64_t deleted_at = 0;
  bool operator==(const Meta&) const = default;
};

struct Profile {
  Meta meta;
  std::string hostname;
  bool enabled = true;
  bool force_https = true;
  bool hsts_enabled = true;
  bool cors_enabled = true;
  std::string cors_headers;
  std::string cors_methods;
  std::string cors_origins;
  int64_t max_body_bytes = 0;
  std::string geo_policy;  // canonical JSON text, or "null"
  std::string waf_mode = "off";
  std::string waf_template = "workload_default";
  std::string waf_custom_directives;
  std::string waf_overrides;        // canonical JSON text, or "null"
  std::string waf_rule_exclusions;  // canonical JSON text, or "null"
  bool operator==(const Profile&) const = default;
};

struct Domain {
  Meta meta;
  std::string hostname;
  std::string redirect_to;
  std::string scope;   // "exact" | "subtree"
  std::string status = "pending";  // "pending" | "verified"
  std::string verification_hostname;
  std::string verification_value;
  std::string verification_parent_id;
  int64_t verified_at = 0;
  std::string verification_error;
  std::string workload_id;
  bool operator==(const Domain&) const = default;
};

struct Webhook {
  Meta meta;
  std::string workload_id;
  std::string provider;  // "github" | "gitlab"
  std::string status = "active";
  std::string external_id;
  bool operator==(const Webhook&) const = default;
};

using Record = std::variant<Profile, Domain, Webhook>;

Kind kind_of(const Record& record);
const Meta& meta_of(const Record& record);
Meta& meta_of(Record& record);

// The response/event form of a record (every field of spec section 2, contract defaults included).
std::string to_json(const Record& record);

// Reads a record of `kind` from its JSON form (as written by to_json, or by an older schema:
// `schema_version` 1 domains have no `scope` and replay as "subtree"). Fails with kInternal on a
// shape it cannot read.
Result<Record> record_from_json(Kind kind, const rapidjson::Value& value, int schema_version);

// Canonical compact JSON of a value (member order as given). Used for the JSON-typed fields.
std::string canonical_json(const rapidjson::Value& value);

}  // namespace gw
