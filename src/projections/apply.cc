#include "projections/apply.h"

#include <algorithm>

#include <rapidjson/document.h>

#include "core/json_numbers.h"
#include "projections/keys.h"

namespace gw {

IndexEntries entries_of(const Record& record, uint64_t create_seq) {
  IndexEntries out;
  const Meta& m = meta_of(record);
  if (m.deleted_at != 0) return out;
  out.reserve(8);
  const Kind kind = kind_of(record);
  const std::string seq = encode_u64(create_seq);
  out.emplace_back(keys::list_prefix(m.team_id, kind) + seq, m.id);
  auto filter = [&](const char* field, const std::string& value) {
    out.emplace_back(keys::filter_prefix(m.team_id, kind, field, value) + seq, m.id);
  };
  if (const auto* p = std::get_if<Profile>(&record)) {
    filter("hostname", p->hostname);
    out.emplace_back(keys::profile_hostname(p->hostname), m.id);
  } else if (const auto* d = std::get_if<Domain>(&record)) {
    filter("hostname", d->hostname);
    filter("status", d->status);
    filter("workload_id", d->workload_id);
    out.emplace_back(keys::domain_hostname(m.team_id, d->hostname), m.id);
    out.emplace_back(keys::domain_name_prefix(m.team_id) + keys::reversed_hostname(d->hostname),
                     m.id);
    if (!d->verification_parent_id.empty()) {
      out.emplace_back(keys::inherited_prefix(d->verification_parent_id) + m.id, "");
    }
    // Only a directly verified domain is a claim; inherited ones sit under their parent's.
    if (d->status == "verified" && d->verification_parent_id.empty()) {
      std::string claim = m.team_id;
      claim.push_back('\0');
      claim += d->scope;
      out.emplace_back(keys::claim_prefix(d->hostname) + m.id, claim);
    }
  } else if (const auto* h = std::get_if<Webhook>(&record)) {
    filter("status", h->status);
    filter("workload_id", h->workload_id);
  }
  return out;
}

bool written_only_by_projections(Cf which, std::string_view key) {
  return which == Cf::kProjections && keys::written_only(key);
}

bool opens_verification_request(std::string_view event_type) {
  return event_type == "domain.verification_requested";
}

bool answers_verification_request(std::string_view event_type) {
  return event_type == "domain.verified" || event_type == "domain.verification_failed" ||
         event_type == "domain.verification_superseded";
}

bool counted(std::string_view entry_key) { return entry_key[0] == 'l' || entry_key[0] == 'f'; }

namespace {

std::string counter_key(const std::string& entry) {
  // Strip the trailing <create_seq> (8 bytes), keep the separator before it for count_of_prefix.
  return keys::count_of_prefix(std::string_view(entry).substr(0, entry.size() - 8));
}

// Writes the record and moves its index entries from what `before` had to what `after` has.
// projections/log_fold.cc derives the same keys from the final records; keep the two in step.
// `after_json` is to_json(after), made once by the caller.
void project(Tx& tx, uint64_t seq, const std::optional<Record>& before, const Record& after,
                     std::string_view after_json, uint64_t version, uint64_t create_seq) {
  const Meta& m = meta_of(after);
  keys::RecordHeader header{version, create_seq, m.deleted_at != 0, m.team_id};
  tx.put(Cf::kProjections, keys::record(m.id), keys::encode_record(header, after_json));
  const IndexEntries old_entries = before ? entries_of(*before, create_seq) : IndexEntries{};
  const IndexEntries new_entries = entries_of(after, create_seq);
  auto find = [](const IndexEntries& entries, const std::string& key) {
    return std::find_if(entries.begin(), entries.end(),
                        [&](const auto& e) { return e.first == key; });
  };
  for (const auto& [key, value] : old_entries) {
    if (find(new_entries, key) != new_entries.end()) continue;
    tx.del(Cf::kProjections, key);
    if (counted(key)) {
      tx.add_to_counter(Cf::kProjections, counter_key(key), -1);
    }
  }
  for (const auto& [key, value] : new_entries) {
    auto old = find(old_entries, key);
    if (old != old_entries.end() && old->second == value) continue;
    tx.put(Cf::kProjections, key, value);
    if (counted(key) && old == old_entries.end()) {
      tx.add_to_counter(Cf::kProjections, counter_key(key), +1);
    }
  }
  tx.put(Cf::kProjections, keys::history_prefix(m.id) + encode_u64(version), encode_u64(seq));
  tx.put(Cf::kProjections, keys::tenant_events_prefix(m.team_id) + encode_u64(seq), "");
  tx.put_at_seal(Cf::kProjections, keys::checkpoint(), encode_u64(seq));
}

// The open-request queue the verifier works from: a verification request opens one (and becomes
// the domain's latest), its outcome closes it. Kept in the same batch as the events.
// LogFold::add (projections/log_fold.cc) follows the same rules. A failed read of the open
// request is the caller's failure: ignored, it left the request open (helper 128).
std::optional<Error> track_requests(Tx& tx, std::string_view type, uint64_t seq, uint64_t caused_by,
                                    const std::string& domain_id) {
  if (opens_verification_request(type)) {
    tx.put(Cf::kProjections, keys::request_prefix() + encode_u64(seq), domain_id);
    tx.put(Cf::kProjections, keys::open_request(domain_id), encode_u64(seq));
  } else if (answers_verification_request(type) && caused_by != 0) {
    tx.del(Cf::kProjections, keys::request_prefix() + encode_u64(caused_by));
    auto latest = tx.get(Cf::kProjections, keys::open_request(domain_id));
    if (!latest.ok()) return std::move(latest.error());
    if (latest.value() && decode_u64(*latest.value()) == caused_by) {
      tx.del(Cf::kProjections, keys::open_request(domain_id));
    }
  }
  return std::nullopt;
}

}  // namespace

Result<Record> parse_stored_record(Kind kind, std::string_view id, std::string_view json) {
  rapidjson::Document doc;
  if (parse_exact(doc, json).IsError()) {
    return make_error(Code::kInternal, "stored record " + std::string(id) + " is not JSON");
  }
  return record_from_json(kind, doc, kSchemaVersion);
}

namespace {

// Reads a stored record (header and parsed record); `json_bytes`, if given, gets the length of
// its JSON.
Result<std::optional<Stored>> load_stored(Tx& tx, const std::string& id,
                                          size_t* json_bytes = nullptr) {
  auto raw = tx.get(Cf::kProjections, keys::record(id));
  if (!raw.ok()) return std::move(raw.error());
  if (!raw.value()) return std::optional<Stored>();
  keys::RecordHeader header;
  std::string_view json;
  auto kind = kind_of_id(id);
  if (!kind || !keys::decode_record(*raw.value(), &header, &json)) {
    return make_error(Code::kInternal, "stored record " + id + " is malformed");
  }
  if (json_bytes != nullptr) *json_bytes = json.size();
  auto record = parse_stored_record(*kind, id, json);
  if (!record.ok()) return std::move(record.error());
  return std::optional<Stored>(
      Stored{std::move(record.value()), header.version, header.create_seq});
}

}  // namespace

Result<Recorded> record_changes(Tx& tx, TxLookups& lookups, Decision& decision,
                                const Actor& actor, int64_t now) {
  const std::string& subject = meta_of(decision.result).id;
  Recorded subject_written;
  // A decision's later changes (inheritance, revocation) follow from its first, and say so.
  uint64_t first_seq = 0;
  for (auto& change : decision.changes) {
    const Meta& m = meta_of(change.record);
    // Usually what the decision itself loaded, kept by `lookups`; a new record has nothing stored.
    std::optional<Stored> current;
    if (!change.created) {
      current = lookups.take(m.id);  // about to change
      if (lookups.failure()) return *lookups.failure();
    }
    std::optional<Record> before;
    uint64_t version = 1;
    uint64_t create_seq = tx.last_seq() + 1;
    if (current) {
      before = std::move(current->record);
      version = current->version + 1;
      create_seq = current->create_seq;
    }
    EventDraft draft{change.type,
                     kind_name(kind_of(change.record)),
                     m.id,
                     version,
                     m.team_id,
                     actor.name,
                     now,
                     to_json(change.record),
                     first_seq != 0 && change.caused_by == 0 ? first_seq : change.caused_by};
    uint64_t seq = tx.append(draft);
    if (first_seq == 0) first_seq = seq;
    if (auto failed = track_requests(tx, change.type, seq, draft.caused_by, m.id)) return *failed;
    project(tx, seq, before, change.record, draft.data_json, version, create_seq);
    // The reply is the subject's record, not that of a domain a change cascaded to.
    const bool is_subject = m.id == subject;
    // A changed record goes back to the cache (keep_written); a new one does not, so that creates
    // do not push out the records being updated. Moved there: `change` is not read again.
    const size_t json_bytes = draft.data_json.size();
    if (before) lookups.wrote(Stored{std::move(change.record), version, create_seq}, json_bytes);
    if (is_subject) subject_written = Recorded{std::move(draft.data_json), version};
  }
  return subject_written;
}

Result<LoggedEvent> parse_logged_event(std::string_view event_json) {
  // A typical event's DOM fits this buffer, so parsing one takes no 64 KiB chunk from the heap
  // (freeing such chunks makes malloc consolidate its free lists, a cost that shows in a replay).
  char buffer[16 << 10];
  rapidjson::MemoryPoolAllocator<> pool(buffer, sizeof buffer);
  rapidjson::Document doc(&pool);
  if (parse_exact(doc, event_json).IsError() || !doc.IsObject())
    return make_error(Code::kInternal, "event is not JSON");
  auto member = [&doc](const char* name) -> const rapidjson::Value* {
    auto it = doc.FindMember(name);
    return it == doc.MemberEnd() ? nullptr : &it->value;
  };
  const auto* seq = member("seq");
  const auto* kind_v = member("aggregate_kind");
  const auto* version = member("aggregate_version");
  const auto* schema = member("schema_version");
  const auto* data = member("data");
  const auto* type = member("type");
  const auto* caused_by = member("caused_by");
  if (seq == nullptr || !seq->IsUint64() || kind_v == nullptr || !kind_v->IsString() ||
      version == nullptr || !version->IsUint64() || schema == nullptr || !schema->IsInt() ||
      data == nullptr || type == nullptr || !type->IsString() ||
      (caused_by != nullptr && !caused_by->IsUint64())) {
    return make_error(Code::kInternal, "event lacks a required member");
  }
  auto kind = kind_from_name(kind_v->GetString());
  if (!kind) return make_error(Code::kInternal, "event has an unknown aggregate kind");
  auto record = record_from_json(*kind, *data, schema->GetInt());
  if (!record.ok()) return std::move(record.error());
  return LoggedEvent{seq->GetUint64(), std::string(type->GetString(), type->GetStringLength()),
                     version->GetUint64(), caused_by == nullptr ? 0 : caused_by->GetUint64(),
                     std::move(record.value())};
}

Result<uint64_t> apply_logged_event(Tx& tx, std::string_view event_json) {
  auto parsed = parse_logged_event(event_json);
  if (!parsed.ok()) return std::move(parsed.error());
  if (auto r = apply_event(tx, parsed.value()); !r.ok()) return std::move(r.error());
  return parsed.value().seq;
}

Result<bool> apply_event(Tx& tx, const LoggedEvent& e, bool* created) {
  const std::string& id = meta_of(e.record).id;
  auto current = load_stored(tx, id);
  if (!current.ok()) return std::move(current.error());
  std::optional<Record> before;
  uint64_t create_seq = e.seq;
  if (current.value()) {
    before = current.value()->record;
    create_seq = current.value()->create_seq;
  }
  if (created != nullptr) *created = !current.value();
  project(tx, e.seq, before, e.record, to_json(e.record), e.version, create_seq);
  if (auto failed = track_requests(tx, e.type, e.seq, e.caused_by, id)) return *failed;
  return true;
}

std::optional<std::string> TxLookups::get(const std::string& key) {
  auto r = tx_.get(Cf::kProjections, key);
  if (!r.ok()) {
    failure_ = r.error();
    return std::nullopt;
  }
  return std::move(r.value());
}

std::optional<Stored>& TxLookups::loaded(const std::string& id) {
  auto kept = loaded_.find(id);
  if (kept != loaded_.end()) return kept->second;
  if (cache_ != nullptr) {
    if (const Stored* cached = cache_->find(id)) return loaded_.emplace(id, *cached).first->second;
  }
  size_t json_bytes = 0;
  auto r = load_stored(tx_, id, &json_bytes);
  if (!r.ok()) {
    // Kept as "none": after a failure the job's decision is discarded anyway (failure()).
    failure_ = r.error();
    return loaded_.emplace(id, std::nullopt).first->second;
  }
  if (cache_ != nullptr && r.value() && !changing_.contains(id)) {
    cache_->put(id, *r.value(), json_bytes);
  }
  return loaded_.emplace(id, std::move(r.value())).first->second;
}

std::optional<Stored> TxLookups::load(const std::string& id) { return loaded(id); }

std::optional<Stored> TxLookups::take(const std::string& id) {
  std::optional<Stored> current = std::move(loaded(id));
  loaded_.erase(id);
  if (cache_ != nullptr) {
    cache_->erase(id);
    changing_.insert(id);
  }
  return current;
}

void TxLookups::wrote(Stored stored, size_t json_bytes) {
  if (cache_ != nullptr) written_.push_back(Written{std::move(stored), json_bytes});
}

void TxLookups::keep_written() {
  // In order: a record changed twice by one decision ends as its last change left it.
  for (auto& w : written_) {
    // A copy: put() takes the record by value, which moves it before the key is read.
    const std::string id = meta_of(w.stored.record).id;
    cache_->put(id, std::move(w.stored), w.json_bytes);
  }
  written_.clear();
}

std::optional<std::string> TxLookups::live_profile_by_hostname(const std::string& hostname) {
  return get(keys::profile_hostname(hostname));
}

std::optional<std::string> TxLookups::live_domain_by_hostname(const std::string& team,
                                                              const std::string& hostname) {
  return get(keys::domain_hostname(team, hostname));
}

std::vector<Claim> TxLookups::claims_covering(const std::string& hostname) {
  std::vector<Claim> out;
  // The name itself, then each ancestor (subtree claims only).
  std::string_view name = hostname;
  for (bool self = true;; self = false) {
    const std::string prefix = keys::claim_prefix(name);
    auto r = tx_.scan(Cf::kProjections, prefix, [&](std::string_view key, std::string_view value) {
      size_t sep = value.find('\0');
      if (sep == std::string_view::npos) return true;
      Claim c{std::string(value.substr(0, sep)), std::string(key.substr(prefix.size())),
              std::string(name), std::string(value.substr(sep + 1))};
      if (self || c.scope == "subtree") out.push_back(std::move(c));
      return true;
    });
    if (!r.ok()) failure_ = std::move(r.error());
    size_t dot = name.find('.');
    if (dot == std::string_view::npos) break;
    name.remove_prefix(dot + 1);
  }
  return out;
}

std::vector<Claim> TxLookups::claims_under(const std::string& hostname) {
  std::vector<Claim> out;
  const std::string prefix = keys::claims_at_or_under_prefix(hostname);
  const std::string reversed_parent = keys::reversed_hostname(hostname);
  auto r = tx_.scan(Cf::kProjections, prefix, [&](std::string_view key, std::string_view value) {
    std::string_view rest = key.substr(prefix.size());
    size_t name_end = rest.find('\0');
    size_t sep = value.find('\0');
    // name_end == 0: a claim on `hostname` itself.
    if (name_end == 0 || name_end == std::string_view::npos || sep == std::string_view::npos) {
      return true;
    }
    std::string reversed = reversed_parent;
    reversed.append(rest.substr(0, name_end));
    out.push_back(Claim{std::string(value.substr(0, sep)), std::string(rest.substr(name_end + 1)),
                        keys::hostname_of_reversed(reversed), std::string(value.substr(sep + 1))});
    return true;
  });
  if (!r.ok()) failure_ = std::move(r.error());
  return out;
}

std::optional<uint64_t> TxLookups::open_request(const std::string& domain_id) {
  auto v = get(keys::open_request(domain_id));
  if (!v) return std::nullopt;
  return decode_u64(*v);
}

std::vector<std::string> TxLookups::ids_under(const std::string& prefix, bool values) {
  std::vector<std::string> out;
  auto r = tx_.scan(Cf::kProjections, prefix, [&](std::string_view key, std::string_view value) {
    out.emplace_back(values ? value : key.substr(prefix.size()));
    return true;
  });
  if (!r.ok()) failure_ = std::move(r.error());
  return out;
}

std::vector<std::string> TxLookups::team_domains_under(const std::string& team,
                                                       const std::string& hostname) {
  const std::string self = keys::domain_name_prefix(team) + keys::reversed_hostname(hostname);
  auto ids = ids_under(self, true);
  // The prefix also matches the domain itself (same key); drop it by its own id.
  auto own = get(self);
  if (own) std::erase(ids, *own);
  return ids;
}

std::vector<std::string> TxLookups::inherited_from(const std::string& parent_id) {
  return ids_under(keys::inherited_prefix(parent_id), false);
}

}  // namespace gw
