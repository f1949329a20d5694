#include "mirror/cloud_event.h"

#include <rapidjson/document.h>

#include <cstdio>
#include <ctime>

namespace gw::mirror {

namespace {

Error bad_event(uint64_t seq, const std::string& why) {
  return make_error(Code::kInternal, "event " + std::to_string(seq) + " is malformed: " + why);
}

}  // namespace

std::string rfc3339_utc(int64_t unix_seconds) {
  std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string sequence_attribute(uint64_t seq) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%020llu", static_cast<unsigned long long>(seq));
  return buf;
}

Result<OutboundMessage> to_cloud_event(uint64_t seq, std::string_view stored) {
  rapidjson::Document doc;
  doc.Parse(stored.data(), stored.size());
  if (doc.HasParseError() || !doc.IsObject()) return bad_event(seq, "not a JSON object");
  auto text = [&doc](const char* name) -> const rapidjson::Value* {
    auto it = doc.FindMember(name);
    return it != doc.MemberEnd() && it->value.IsString() ? &it->value : nullptr;
  };
  const rapidjson::Value* id = text("event_id");
  const rapidjson::Value* type = text("type");
  const rapidjson::Value* aggregate = text("aggregate_id");
  const rapidjson::Value* tenant = text("tenant");
  if (id == nullptr || type == nullptr || aggregate == nullptr || tenant == nullptr) {
    return bad_event(seq, "event_id, type, aggregate_id and tenant must be strings");
  }
  auto seq_it = doc.FindMember("seq");
  auto time_it = doc.FindMember("time");
  if (seq_it == doc.MemberEnd() || !seq_it->value.IsUint64() || seq_it->value.GetUint64() != seq) {
    return bad_event(seq, "its seq member differs from its key");
  }
  if (time_it == doc.MemberEnd() || !time_it->value.IsInt64()) {
    return bad_event(seq, "time must be an integer");
  }
  OutboundMessage m;
  m.seq = seq;
  m.time = time_it->value.GetInt64();
  m.key.assign(aggregate->GetString(), aggregate->GetStringLength());
  m.value.assign(stored);
  std::string subject = m.key;
  m.headers = {
      {"ce_specversion", "1.0"},
      {"ce_id", std::string(id->GetString(), id->GetStringLength())},
      {"ce_source", "/tenants/" + std::string(tenant->GetString(), tenant->GetStringLength())},
      {"ce_type", std::string(type->GetString(), type->GetStringLength())},
      {"ce_subject", std::move(subject)},
      {"ce_time", rfc3339_utc(m.time)},
      {"ce_sequence", sequence_attribute(seq)},
      {"content-type", "application/json"},
  };
  return m;
}

}  // namespace gw::mirror
