#include "projections/keys.h"

#include <algorithm>

#include "core/text.h"
#include "store/store.h"

namespace gw::keys {

namespace {

std::string join(std::initializer_list<std::string_view> parts) {
  size_t size = parts.size() - 1;  // the separators
  for (auto p : parts) size += p.size();
  std::string out;
  out.reserve(size);  // keys are built on every write and read: one allocation each
  bool first = true;
  for (auto p : parts) {
    if (!first) out.push_back('\0');
    out.append(p);
    first = false;
  }
  return out;
}

std::string_view kind_byte(Kind kind) {
  static const char kBytes[] = {'0', '1', '2', '3'};
  return std::string_view(&kBytes[static_cast<int>(kind)], 1);
}

}  // namespace

std::string record(std::string_view id) { return join({"r", id}); }

bool is_record(std::string_view key) {
  // A history key continues its record's key: r \0 <id> \0 <version>.
  return key.size() > 2 && key[0] == 'r' && key[1] == '\0' &&
         key.find('\0', 2) == std::string_view::npos;
}

std::string list_prefix(std::string_view team, Kind kind) {
  return join({"l", team, kind_byte(kind), ""});
}

std::string filter_prefix(std::string_view team, Kind kind, std::string_view field,
                          std::string_view value) {
  return join({"f", team, kind_byte(kind), field, value, ""});
}

std::string count_of_prefix(std::string_view prefix) {
  std::string out(prefix);
  out[0] = 'c';
  out.pop_back();  // the trailing separator
  return out;
}

std::string profile_hostname(std::string_view hostname) { return join({"p", hostname}); }

std::string domain_hostname(std::string_view team, std::string_view hostname) {
  return join({"d", team, hostname});
}

std::string claim_prefix(std::string_view hostname) {
  return join({"v", reversed_hostname(hostname), ""});
}

std::string claims_at_or_under_prefix(std::string_view hostname) {
  return join({"v", reversed_hostname(hostname)});
}

std::string history_prefix(std::string_view aggregate_id) { return join({"r", aggregate_id, ""}); }

std::string reversed_hostname(std::string_view hostname) {
  std::string out;
  out.reserve(hostname.size() + 1);
  size_t end = hostname.size();
  while (true) {
    size_t dot = hostname.rfind('.', end == 0 ? 0 : end - 1);
    size_t start = dot == std::string_view::npos ? 0 : dot + 1;
    out.append(hostname.substr(start, end - start));
    out.push_back('.');
    if (dot == std::string_view::npos) break;
    end = dot;
  }
  return out;
}

std::string hostname_of_reversed(std::string_view reversed) {
  if (reversed.ends_with('.')) reversed.remove_suffix(1);
  std::string out = reversed_hostname(reversed);
  out.pop_back();
  return out;
}

std::string domain_name_prefix(std::string_view team) { return join({"n", team, ""}); }

std::string inherited_prefix(std::string_view parent_id) { return join({"i", parent_id, ""}); }

std::string request_prefix() { return join({"q", ""}); }

std::string open_request(std::string_view domain_id) { return join({"Q", domain_id}); }

std::string tenant_events_prefix(std::string_view team) { return join({"t", team, ""}); }

std::string checkpoint() { return join({"m", "checkpoint", kLayout}); }

std::string checkpoint_prefix() { return join({"m", "checkpoint"}); }

std::optional<std::string> checkpoint_layout(std::string_view key) {
  const std::string prefix = checkpoint_prefix();
  if (!key.starts_with(prefix)) return std::nullopt;
  key.remove_prefix(prefix.size());
  if (key.empty()) return "1";
  if (key.size() < 2 || key[0] != '\0') return std::nullopt;
  key.remove_prefix(1);
  if (!std::all_of(key.begin(), key.end(), ascii_digit)) return std::nullopt;
  return std::string(key);
}

bool scanned_by_decisions(std::string_view key) {
  return !key.empty() && (key[0] == 'v' || key[0] == 'n' || key[0] == 'i');
}

bool written_only(std::string_view key) {
  if (key.size() < 2 || key[1] != '\0') return false;
  switch (key[0]) {
    case 'l':
    case 'f':
    case 'c':
    case 't':
    case 'q':
    case 'm':
      return true;
    case 'r':
      return !is_record(key);  // history
    default:
      return false;
  }
}

std::string encode_record(const RecordHeader& header, std::string_view json) {
  std::string out = encode_u64(header.version);
  out += encode_u64(header.create_seq);
  out.push_back(header.deleted ? '\1' : '\0');
  out.push_back(static_cast<char>(header.team.size()));
  out.append(header.team);
  out.append(json);
  return out;
}

bool decode_record(std::string_view value, RecordHeader* header, std::string_view* json) {
  if (value.size() < 18) return false;
  header->version = decode_u64(value.substr(0, 8));
  header->create_seq = decode_u64(value.substr(8, 8));
  header->deleted = value[16] != '\0';
  size_t team_len = static_cast<unsigned char>(value[17]);
  if (value.size() < 18 + team_len) return false;
  header->team = value.substr(18, team_len);
  *json = value.substr(18 + team_len);
  return true;
}

}  // namespace gw::keys
