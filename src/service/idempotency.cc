#include "service/idempotency.h"

#include <algorithm>
#include <optional>
#include <vector>

#include <rapidjson/document.h>

#include "commands/records.h"
#include "core/hex.h"
#include "projections/catch_up.h"
#include "projections/keys.h"

namespace gw {

namespace {

constexpr size_t kFingerprintSize = 64;
constexpr int kPrunePerWrite = 8;

std::string answer_key(const IdempotencyKey& k) {
  std::string out = "i";
  out.append(1, '\0').append(k.tenant).append(1, '\0').append(k.key);
  return out;
}

std::string expiry_prefix() { return std::string("I") + '\0'; }

std::string expiry_key(int64_t time, const IdempotencyKey& k) {
  std::string out = expiry_prefix() + encode_u64(static_cast<uint64_t>(time));
  out.append(1, '\0').append(k.tenant).append(1, '\0').append(k.key);
  return out;
}

std::optional<KeptAnswer> decode(std::string_view v) {
  if (v.size() < kFingerprintSize + 16) return std::nullopt;
  KeptAnswer a;
  a.fingerprint.assign(v.substr(0, kFingerprintSize));
  a.time = static_cast<int64_t>(decode_u64(v.substr(kFingerprintSize, 8)));
  a.version = decode_u64(v.substr(kFingerprintSize + 8, 8));
  a.json.assign(v.substr(kFingerprintSize + 16));
  return a;
}

// The id of the record a kept answer created ("webhook_id" and the like), or nullptr.
const rapidjson::Value* created_id(const rapidjson::Value& record) {
  for (Kind kind : {Kind::kProfile, Kind::kDomain, Kind::kWebhook}) {
    auto m = record.FindMember(id_field(kind));
    if (m != record.MemberEnd() && m->value.IsString()) return &m->value;
  }
  return nullptr;
}

}  // namespace

bool valid_idempotency_key(std::string_view key) {
  if (key.empty() || key.size() > 255) return false;
  for (char c : key) {
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

std::string request_fingerprint(std::string_view method, std::string_view path,
                                std::string_view body) {
  std::string text;
  text.reserve(method.size() + path.size() + body.size() + 2);
  text.append(method).append(" ").append(path).append("\n").append(body);
  return sha256_hex(text);
}

namespace {

// The answer in `raw` (a read of answer_key), unless there is none or it expired at `now`.
Result<std::optional<KeptAnswer>> live_answer(Result<std::optional<std::string>> raw, int64_t now) {
  if (!raw.ok()) return std::move(raw.error());
  if (!raw.value()) return std::optional<KeptAnswer>();
  auto answer = decode(*raw.value());
  if (!answer) return make_error(Code::kInternal, "a kept idempotent answer is malformed");
  if (now - answer->time >= kIdempotencyWindowSeconds) return std::optional<KeptAnswer>();
  return answer;
}

}  // namespace

Result<std::optional<KeptAnswer>> find_answer(Tx& tx, const IdempotencyKey& key, int64_t now) {
  return live_answer(tx.get(Cf::kMeta, answer_key(key)), now);
}

Result<std::optional<KeptAnswer>> find_written_answer(const Store& store, const IdempotencyKey& key,
                                                      int64_t now) {
  return live_answer(store.get(Cf::kMeta, answer_key(key)), now);
}

Result<uint64_t> drop_answers_of_lost_creates(Store& store) {
  auto to_check = store.get(Cf::kMeta, kAnswersToCheckKey);
  if (!to_check.ok()) return std::move(to_check.error());
  if (!to_check.value()) return uint64_t{0};
  const std::string prefix = std::string("i") + '\0';
  std::vector<std::string> gone;  // the answers' keys and their expiry entries'
  auto it = store.iterate_under(Cf::kMeta, prefix);
  for (it->Seek(prefix); it->Valid(); it->Next()) {
    const std::string_view key(it->key().data(), it->key().size());
    auto answer = decode(std::string_view(it->value().data(), it->value().size()));
    rapidjson::Document record;
    if (answer) record.Parse(answer->json.data(), answer->json.size());
    const auto* id = answer && record.IsObject() ? created_id(record) : nullptr;
    // One that cannot be read names no record: left as it is (a repeat of its key is 500, as
    // before), it does not stop the rebuild that calls this after making the read model.
    if (id == nullptr) continue;
    auto found = store.get(Cf::kProjections,
                           keys::record(std::string_view(id->GetString(), id->GetStringLength())));
    if (!found.ok()) return std::move(found.error());
    if (found.value()) continue;  // deleted records too: their creates are in the log
    gone.emplace_back(key);
    // i \0 <tenant> \0 <key>  ->  I \0 <time> \0 <tenant> \0 <key>
    gone.push_back(expiry_prefix() + encode_u64(static_cast<uint64_t>(answer->time)) +
                   std::string(key.substr(1)));
  }
  if (!it->status().ok()) return make_error(Code::kUnavailable, it->status().ToString());
  const uint64_t dropped = gone.size() / 2;
  gone.emplace_back(kAnswersToCheckKey);
  if (auto deleted = store.delete_meta(gone); !deleted.ok()) return std::move(deleted.error());
  return dropped;
}

std::string dropped_answers_note(uint64_t n) {
  return "dropped " + std::to_string(n) +
         (n == 1 ? " kept Idempotency-Key answer of a create"
                 : " kept Idempotency-Key answers of creates") +
         " the log no longer holds";
}

bool scanned_by_keep_answer(std::string_view key) { return key.starts_with(expiry_prefix()); }

Result<bool> keep_answer(Tx& tx, const IdempotencyKey& key, const KeptAnswer& answer, int64_t now,
                         PruneCursor& cursor) {
  // Prune first, so a key that expired and is used again keeps its new entry.
  const std::string prefix = expiry_prefix();
  // Entries made before now - 24 h have expired. Within a day of 1970 (a clock that lost its
  // setting) none has: the difference would wrap to a huge time and prune every entry.
  const int64_t expired_before = std::max<int64_t>(0, now - kIdempotencyWindowSeconds);
  const std::string cutoff = prefix + encode_u64(static_cast<uint64_t>(expired_before));
  std::vector<std::string> expired;
  std::optional<std::string> first_live;  // where the scan met an entry that has not expired
  auto scanned = tx.scan(
      Cf::kMeta, prefix,
      [&](std::string_view k, std::string_view) {
        if (k.substr(0, cutoff.size()) >= cutoff) {
          first_live.emplace(k);
          return false;
        }
        expired.emplace_back(k);
        return expired.size() < kPrunePerWrite;
      },
      cursor.from);
  if (!scanned.ok()) return std::move(scanned.error());
  for (const std::string& k : expired) {
    tx.del(Cf::kMeta, k);
    // The answer key is the expiry key's tail: i \0 <tenant> \0 <key>. Delete it only if it
    // still belongs to this expiry entry (it may have been replaced since).
    std::string_view tail = std::string_view(k).substr(prefix.size() + 9);
    std::string answer_k = std::string("i") + '\0' + std::string(tail);
    auto stored = tx.get(Cf::kMeta, answer_k);
    if (!stored.ok()) return std::move(stored.error());
    auto a = stored.value() ? decode(*stored.value()) : std::nullopt;
    if (a && encode_u64(static_cast<uint64_t>(a->time)) ==
                 std::string_view(k).substr(prefix.size(), 8)) {
      tx.del(Cf::kMeta, answer_k);
    }
  }
  std::string value = answer.fingerprint;
  value += encode_u64(static_cast<uint64_t>(answer.time));
  value += encode_u64(answer.version);
  value += answer.json;
  tx.put(Cf::kMeta, answer_key(key), value);
  const std::string expiry = expiry_key(answer.time, key);
  tx.put(Cf::kMeta, expiry, "");
  // Moved only once the job's writes are all staged (a job that fails is rolled back): to the first
  // entry that has not expired when the scan met one (everything before it is pruned now, even
  // when this write pruned nothing: after a restart the cursor starts empty and the index may
  // begin with tombstones only), else past what was pruned. An entry behind the cursor (the wall
  // clock went back) moves it back, or it would never be pruned.
  if (first_live) {
    cursor.from = std::move(*first_live);
  } else if (!expired.empty()) {
    cursor.from = expired.back();
  }
  if (expiry < cursor.from) cursor.from = expiry;
  return true;
}

}  // namespace gw
