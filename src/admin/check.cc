#include "admin/check.h"

#include <functional>

#include "core/hex.h"
#include "projections/catch_up.h"
#include "projections/keys.h"
#include "store/writer.h"

namespace gw::admin {

namespace {

constexpr std::string_view kPrevHashMember = ",\"prev_hash\":\"";
constexpr std::string_view kHashMember = "\",\"hash\":\"";
constexpr size_t kHashHex = 64;
// The stored event ends with ,"prev_hash":"<64 hex>","hash":"<64 hex>"}
constexpr size_t kTrailer = kPrevHashMember.size() + kHashHex + kHashMember.size() + kHashHex + 2;

std::string escaped(std::string_view bytes, size_t limit) {
  static const char kHexDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes.substr(0, limit)) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      out += "\\x";
      out.push_back(kHexDigits[c >> 4]);
      out.push_back(kHexDigits[c & 0xf]);
    }
  }
  if (bytes.size() > limit) out += "...";
  return out;
}

// Follows the hash chain event by event; the first break becomes the error.
class ChainCheck {
 public:
  Result<bool> operator()(uint64_t seq, std::string_view stored) {
    auto fail = [seq](const std::string& why) {
      return make_error(Code::kInternal, "event " + std::to_string(seq) + ": " + why);
    };
    if (seq != expected_) {
      return make_error(Code::kInternal, "event " + std::to_string(expected_) +
                                             ": missing (the log goes on with event " +
                                             std::to_string(seq) + ")");
    }
    const std::string head = "{\"seq\":" + std::to_string(seq) + ",";
    if (stored.size() < head.size() + kTrailer || !stored.starts_with(head) ||
        !stored.ends_with("\"}")) {
      return fail("the stored event is malformed");
    }
    const std::string_view trailer = stored.substr(stored.size() - kTrailer);
    const std::string_view prev_hash = trailer.substr(kPrevHashMember.size(), kHashHex);
    const std::string_view hash = trailer.substr(kTrailer - 2 - kHashHex, kHashHex);
    if (!trailer.starts_with(kPrevHashMember) ||
        trailer.substr(kPrevHashMember.size() + kHashHex, kHashMember.size()) != kHashMember) {
      return fail("the stored event does not end with prev_hash and hash");
    }
    if (prev_hash != prev_hash_) {
      return fail("prev_hash is not the hash of event " + std::to_string(seq - 1));
    }
    std::string canonical(stored.substr(0, stored.size() - kTrailer));
    canonical.push_back('}');
    if (to_hex(sha256(prev_hash_, canonical)) != hash) {
      return fail("hash does not match its content");
    }
    prev_hash_ = std::string(hash);
    ++expected_;
    return true;
  }

 private:
  uint64_t expected_ = 1;
  std::string prev_hash_ = kGenesisHash;
};

}  // namespace

Result<std::string> compare_projections(const Store& store, const LogFold::Stream& replay,
                                        const std::function<std::optional<Error>()>& replay_error,
                                        uint64_t* compared, uint64_t* spent) {
  auto it = store.iterate(Cf::kProjections);
  it->SeekToFirst();
  // A replay that ended early differs from there on: its error, not a difference.
  auto difference = [&replay_error](std::string text) -> Result<std::string> {
    if (auto ended = replay_error()) return std::move(*ended);
    return text;
  };
  std::string key;
  std::string value;
  bool more = replay(&key, &value);
  while (it->Valid() || more) {
    // A block that cannot be read ends the iteration early: no finding about the read model.
    if (!it->Valid() && !it->status().ok()) break;
    const std::string_view stored_key(it->Valid() ? it->key().data() : nullptr,
                                      it->Valid() ? it->key().size() : 0);
    if (it->Valid() &&
        is_spent_counter(stored_key, {it->value().data(), it->value().size()})) {
      ++*spent;
      it->Next();  // reads as no counter, and a replay writes none
      continue;
    }
    if (!more || (it->Valid() && stored_key < key)) {
      return difference("projections: " + describe_key(stored_key) +
                        " is in the read model but not in a fresh replay of the log");
    }
    if (!it->Valid() || key < stored_key) {
      return difference("projections: " + describe_key(key) +
                        " of a fresh replay is missing from the read model");
    }
    const std::string_view stored_value(it->value().data(), it->value().size());
    if (stored_value != value) {
      return difference("projections: " + describe_key(key) + " differs: the read model has \"" +
                        escaped(stored_value, 200) + "\", a fresh replay has \"" +
                        escaped(value, 200) + "\"");
    }
    ++*compared;
    it->Next();
    more = replay(&key, &value);
  }
  if (!it->status().ok()) return io_error(it->status());
  if (auto ended = replay_error()) return std::move(*ended);
  return std::string();
}

std::string describe_key(std::string_view key) {
  std::string out;
  // List, filter, history, tenant-feed and request keys end in an 8-byte big-endian number.
  const bool numbered = !key.empty() &&
                        std::string_view("lfrtq").find(key[0]) != std::string_view::npos &&
                        !keys::is_record(key) && key.size() >= 10 && key[key.size() - 9] == '\0';
  std::string_view text = numbered ? key.substr(0, key.size() - 9) : key;
  for (char c : text) out += c == '\0' ? std::string("/") : escaped(std::string_view(&c, 1), 1);
  if (numbered) out += "/" + std::to_string(decode_u64(key.substr(key.size() - 8)));
  return out;
}

Result<CheckReport> check_store(const Store& store, const FoldOptions& options) {
  CheckReport report;
  ChainCheck chain;
  auto fold = Fold::of_log(store, UINT64_MAX, options, std::ref(chain), &report.events);
  if (!fold.ok()) {
    if (fold.error().code == Code::kUnavailable) return std::move(fold.error());
    report.failure = fold.error().detail;
    return report;
  }
  const Fold& folded = *fold.value();
  // Its first key differs from a replay's, which read as damage (helper 119).
  auto other_layout = other_projections_layout(store);
  if (!other_layout.ok()) return std::move(other_layout.error());
  if (other_layout.value()) {
    report.failure = "projections: the read model is of layout " + *other_layout.value() +
                     ", not this release's " + std::string(keys::kLayout) +
                     ": gatewayd rebuilds it when it starts, as gatewayctl rebuild does";
    return report;
  }
  // The default column family (kept Idempotency-Key answers, the Kafka mirror's checkpoints) is
  // read through as well: a block of it that could not be read was no finding (helper 160), while
  // gatewayd answered a replay of a key kept there 503 and `backup` failed on it.
  auto meta = store.iterate(Cf::kMeta);
  for (meta->SeekToFirst(); meta->Valid(); meta->Next()) {
  }
  if (!meta->status().ok()) return io_error(meta->status());
  // Key by key, the first record of an event the log lost read as a difference (helper 160).
  auto ahead = read_model_ahead_of_log(store);
  if (!ahead.ok()) return std::move(ahead.error());
  if (ahead.value()) {
    report.failure = "projections: " + *ahead.value();
    return report;
  }
  // A rebuild, or a start that rebuilds, makes the read model again and then ingests the new
  // one's table files: stopped in between, it left the read model empty, and key by key that
  // read as damage (the first key a replay has, missing).
  if (report.events > 0) {
    auto any = store.holds_keys(Cf::kProjections);
    if (!any.ok()) return std::move(any.error());
    if (!any.value()) {
      report.failure = "projections: the read model is empty while the log holds " +
                       std::to_string(report.events) +
                       " events (a rebuild, or a start that rebuilds it, was stopped between "
                       "making it again and writing it): start gatewayd on it, or run gatewayctl "
                       "rebuild";
      return report;
    }
  }
  auto diff = compare_projections(
      store, concatenated(folded.projections()), [&folded] { return folded.stream_error(); },
      &report.projection_keys, &report.spent_counters);
  if (!diff.ok()) return std::move(diff.error());
  report.failure = diff.value();
  auto counts = count_records(*fold.value());
  if (!counts.ok()) return std::move(counts.error());
  report.records = counts.value();
  return report;
}

}  // namespace gw::admin
