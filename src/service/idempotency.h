// Idempotency-Key for creates: the first successful answer to (tenant, key) is kept for 24 hours
// in the store's kMeta column family, written in the same atomic batch as the events it answers,
// so it is exactly as durable as they are and survives restarts and `gatewayctl rebuild` (but
// for answers of creates the log lost: see drop_answers_of_lost_creates).
// A request with the same key and the same fingerprint (method, path and body bytes) gets that
// answer again without a new event; with another fingerprint it is refused. Failed requests keep
// nothing, so a client may fix and retry under the same key.
//
//   i \0 <tenant> \0 <key>                 -> fingerprint(64 hex) time(8) version(8) record JSON
//   I \0 <time 8 bytes> \0 <tenant> \0 <key> -> ""   expiry order; old entries are pruned by new
//   ones
//
// Pure functions over a Tx, used on the writer thread (find_written_answer reads the Store).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/error.h"
#include "store/writer.h"

namespace gw {

inline constexpr int64_t kIdempotencyWindowSeconds = 24 * 60 * 60;

struct IdempotencyKey {
  std::string tenant;
  std::string key;          // as sent, 1..255 visible ASCII characters
  std::string fingerprint;  // hex SHA-256 of the request (see fingerprint())
};

struct KeptAnswer {
  std::string fingerprint;
  int64_t time = 0;
  uint64_t version = 0;
  std::string json;
};

// Whether `key` is a well-formed Idempotency-Key header value.
bool valid_idempotency_key(std::string_view key);
// What "the same request" means: the method, the path and the body, byte for byte.
std::string request_fingerprint(std::string_view method, std::string_view path,
                                std::string_view body);

// Where keep_answer's pruning goes on: every expiry entry before `from` was pruned earlier by this
// process. RocksDB keeps a deleted key as a tombstone until a compaction drops it, so a scan from
// the start of the index stepped over every entry pruned so far on each keyed write (100,000
// pruned entries: about 15 ms a write, all on the writer thread). Empty: the start of the index
// (after a restart it is walked once). One per writer thread, used only there.
struct PruneCursor {
  std::string from;
};

// The answer kept for `key`, unless there is none or it is older than the window at `now`.
Result<std::optional<KeptAnswer>> find_answer(Tx& tx, const IdempotencyKey& key, int64_t now);
// The same, read from what the writer has written (any thread): an answer found is durable, one
// not found may be in a batch being written, so only the writer's find_answer decides a create.
Result<std::optional<KeptAnswer>> find_written_answer(const Store& store, const IdempotencyKey& key,
                                                      int64_t now);
// Stages `answer` under `key` and prunes up to a few entries that expired before `now`, from
// `cursor` on; moves `cursor` past what it pruned.
Result<bool> keep_answer(Tx& tx, const IdempotencyKey& key, const KeptAnswer& answer, int64_t now,
                         PruneCursor& cursor);
// If the read model was made from the log since the kept answers were last checked against it
// (kAnswersToCheckKey, projections/catch_up.h, is set), deletes every kept answer whose record it
// does not hold (it holds deleted ones), with its expiry entry, and the key, in one synced write;
// returns how many answers it deleted. Answers are kept only for creates and written in the
// batch of the create's event, so one whose record a read model made from the log lacks answers
// an event the log lost (cut short or damaged by something other than a crash): a repeat got 201
// for a record that was gone, and now makes it again. gatewayd runs it at every start, before
// any write, and `gatewayctl rebuild` after its read model is in. An answer that cannot be read
// is left as it is. kUnavailable on an I/O error.
Result<uint64_t> drop_answers_of_lost_creates(Store& store);
// "dropped N kept Idempotency-Key answers of creates the log no longer holds" (N > 0).
std::string dropped_answers_note(uint64_t n);
// True for the kMeta keys keep_answer scans (its expiry index) through Tx::scan.
bool scanned_by_keep_answer(std::string_view key);

}  // namespace gw
