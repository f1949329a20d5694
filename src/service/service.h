// The use cases: each command is decided and recorded on the single writer thread (see
// store/writer.h), so decisions see every earlier write, including those of the same batch, and
// two concurrent creates of one hostname cannot both succeed. Thread-safe; `done` callbacks run on
// the writer's finish thread after the result is durable and must not block.
#pragma once

#include <atomic>
#include <functional>
#include <optional>
#include <string>

#include "commands/decide.h"
#include "commands/parse.h"
#include "core/clock.h"
#include "core/event_count.h"
#include "projections/record_cache.h"
#include "service/idempotency.h"
#include "store/writer.h"

namespace gw {

// A record as written: its JSON and its version (the ETag).
struct Written {
  std::string json;
  uint64_t version = 0;
  bool replayed = false;  // the answer kept for an Idempotency-Key, not a new write
};

using Done = std::function<void(Result<Written>)>;

// The keys the Service's jobs scan through Tx::scan: pass to Writer::start.
bool scanned_by_commands(Cf which, std::string_view key);
// The keys the Service's jobs write and never read back: pass to Writer::start.
bool written_only_by_commands(Cf which, std::string_view key);

class Service {
 public:
  // The parsed records the writer thread keeps (projections/record_cache.h), by their JSON's
  // length.
  static constexpr size_t kRecordCacheBytes = 32 << 20;

  // `reserved`: the platform namespaces, in which no domain is verified (decide.h).
  Service(Writer& writer, const Clock& clock, IdGenerator& ids, std::string verification_domain,
          PlatformNamespaces reserved);

  // With `idempotency`, a repeat of a create that succeeded in the last 24 hours gets its first
  // answer (replayed) and appends nothing; the same key with another request is
  // kIdempotencyKeyReused (see service/idempotency.h).
  void create(Spec spec, Actor actor, std::optional<IdempotencyKey> idempotency, Done done);
  // The answer create() would replay for `idempotency` now, if it was written already and is for
  // this same request: answering it needs no check of the body. nullopt otherwise (none kept yet,
  // another request's, or the store cannot be read): create() decides.
  std::optional<Written> written_replay(const IdempotencyKey& idempotency) const;
  // `pre`: the If-Match and If-None-Match headers, if sent (see decide.h).
  void update(Kind kind, std::string id, Spec spec, Actor actor, Preconditions pre, Done done);
  void remove(Kind kind, std::string id, Actor actor, Done done, Preconditions pre = {});
  void verify(std::string id, Actor actor, Done done, Preconditions pre = {});
  // Records the outcome of verification request `request_seq` (see decide_verification_outcome).
  // The request is closed in the same write, so each request gets exactly one outcome.
  // `done` also gets what was written, as verification_outcome_label has it ("" on a failure).
  using OutcomeDone = std::function<void(Result<Written>, const std::string& outcome)>;
  void record_outcome(std::string domain_id, uint64_t request_seq, CheckResult result,
                      OutcomeDone done);

  uint64_t events_appended() const { return events_appended_.load(std::memory_order_relaxed); }
  // False once the writer stopped writing after a failed write (Writer::writable).
  bool writable() const { return writer_.writable(); }
  // Raised after each write that opened a verification request is durable (the verifier waits on
  // it instead of waking on every commit).
  EventCount& verification_requests() { return verification_requests_; }

 private:
  // Runs on the writer thread with the job's actor and the time read as the job is staged.
  using Decide = std::function<Result<Decision>(Lookups&, const Actor&, int64_t now)>;
  void run(Actor actor, Decide decide, Done done,
           std::optional<IdempotencyKey> idempotency = std::nullopt);

  Writer& writer_;
  const Clock& clock_;
  IdGenerator& ids_;
  std::string verification_domain_;
  PlatformNamespaces reserved_;
  std::atomic<uint64_t> events_appended_{0};
  EventCount verification_requests_;
  // Used by the jobs, on the writer thread. Every change of a record goes through them, which
  // keeps it coherent (projections/record_cache.h).
  RecordCache records_{kRecordCacheBytes};
  PruneCursor pruned_;  // Idempotency-Key answers pruned so far (service/idempotency.h)
};

}  // namespace gw
