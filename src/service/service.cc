#include "service/service.h"

#include <algorithm>

#include "commands/challenge.h"
#include "projections/apply.h"
#include "projections/keys.h"
#include "service/idempotency.h"

namespace gw {

namespace {

class CommandJob final : public Job {
 public:
  using Decide = std::function<Result<Decision>(Lookups&, const Actor&, int64_t now)>;
  CommandJob(Actor actor, Decide decide, Done done, const Clock& clock,
             std::atomic<uint64_t>& events, EventCount& requests, RecordCache& records,
             PruneCursor& pruned, std::optional<IdempotencyKey> idempotency)
      : actor_(std::move(actor)),
        decide_(std::move(decide)),
        done_(std::move(done)),
        clock_(clock),
        events_(events),
        requests_(requests),
        records_(records),
        pruned_(pruned),
        idempotency_(std::move(idempotency)) {}

  bool execute(Tx& tx) override {
    const int64_t now = clock_.now_seconds();
    if (idempotency_) {
      auto kept = find_answer(tx, *idempotency_, now);
      if (!kept.ok()) return reject(std::move(kept.error()));
      if (kept.value()) return replay(std::move(*kept.value()));
    }
    TxLookups lookups(tx, &records_);
    auto decision = decide_(lookups, actor_, now);
    if (lookups.failure()) return reject(*lookups.failure());
    if (!decision.ok()) return reject(std::move(decision.error()));
    Decision& d = decision.value();
    if (d.changes.empty()) {
      // Nothing to append: answer with the record as stored.
      auto stored = lookups.load(meta_of(d.result).id);
      if (lookups.failure()) return reject(*lookups.failure());
      uint64_t version = stored ? stored->version : 0;
      result_ = Written{to_json(d.result), version};
      return false;
    }
    auto written = record_changes(tx, lookups, d, actor_, now);
    if (!written.ok()) return reject(std::move(written.error()));
    if (idempotency_) {
      KeptAnswer answer{idempotency_->fingerprint, now, written.value().version,
                        written.value().json};
      auto kept = keep_answer(tx, *idempotency_, answer, now, pruned_);
      if (!kept.ok()) return reject(std::move(kept.error()));
    }
    lookups.keep_written();  // the job's writes are kept from here on
    appended_ = d.changes.size();
    opens_request_ = std::any_of(d.changes.begin(), d.changes.end(), [](const Change& c) {
      return opens_verification_request(c.type);
    });
    result_ = Written{std::move(written.value().json), written.value().version};
    return true;
  }

  void finish(bool committed) override {
    if (!committed) {
      done_(make_error(Code::kUnavailable, "the store cannot write right now"));
      return;
    }
    events_.fetch_add(appended_, std::memory_order_relaxed);
    if (opens_request_) requests_.raise();
    done_(std::move(result_));
  }

 private:
  // execute() only reads the store (its writes are the batch's, written after it), so a
  // kUnavailable met there is a failed read, which the answer says.
  bool reject(Error e) {
    if (e.code == Code::kUnavailable) e.shown = Shown::kCannotRead;
    result_ = std::move(e);
    return false;
  }

  // Answers with what the first request under this key got, or refuses another request.
  bool replay(KeptAnswer kept) {
    if (kept.fingerprint != idempotency_->fingerprint) {
      return reject(make_error(Code::kIdempotencyKeyReused,
                               "Idempotency-Key " + idempotency_->key +
                                   " was used in the last 24 hours for a different request"));
    }
    result_ = Written{std::move(kept.json), kept.version, true};
    return false;
  }

  Actor actor_;
  Decide decide_;
  Done done_;
  const Clock& clock_;
  std::atomic<uint64_t>& events_;
  EventCount& requests_;
  RecordCache& records_;  // the writer thread's
  PruneCursor& pruned_;   // the writer thread's
  std::optional<IdempotencyKey> idempotency_;
  Result<Written> result_ = make_error(Code::kInternal, "command was not executed");
  size_t appended_ = 0;
  bool opens_request_ = false;
};

}  // namespace

bool scanned_by_commands(Cf which, std::string_view key) {
  if (which == Cf::kMeta) return scanned_by_keep_answer(key);
  return which == Cf::kProjections && keys::scanned_by_decisions(key);
}

bool written_only_by_commands(Cf which, std::string_view key) {
  return written_only_by_projections(which, key);  // the Meta keys they write are read back
}

Service::Service(Writer& writer, const Clock& clock, IdGenerator& ids,
                 std::string verification_domain, PlatformNamespaces reserved)
    : writer_(writer),
      clock_(clock),
      ids_(ids),
      verification_domain_(std::move(verification_domain)),
      reserved_(std::move(reserved)) {}

void Service::run(Actor actor, Decide decide, Done done,
                  std::optional<IdempotencyKey> idempotency) {
  writer_.submit(std::make_unique<CommandJob>(std::move(actor), std::move(decide), std::move(done),
                                              clock_, events_appended_, verification_requests_,
                                              records_, pruned_, std::move(idempotency)));
}

void Service::record_outcome(std::string domain_id, uint64_t request_seq, CheckResult result,
                             OutcomeDone done) {
  // Set on the writer thread by the decision, read by `done` after the write is durable.
  auto outcome = std::make_shared<std::string>();
  run(
      Actor{"", std::string(kVerifierActor)},
      [this, id = std::move(domain_id), request_seq, result = std::move(result), outcome](
          Lookups& lookups, const Actor&, int64_t now) {
        auto decision =
            decide_verification_outcome(id, request_seq, result, now, lookups, reserved_);
        *outcome = decision.ok() ? verification_outcome_label(decision.value()) : "";
        return decision;
      },
      [outcome, done = std::move(done)](Result<Written> written) {
        if (!written.ok()) outcome->clear();
        done(std::move(written), *outcome);
      });
}

void Service::create(Spec spec, Actor actor, std::optional<IdempotencyKey> idempotency,
                     Done done) {
  const Kind kind = static_cast<Kind>(spec.index() + 1);
  Fresh fresh;
  fresh.id = ids_.next(id_prefix(kind));
  if (kind == Kind::kDomain) {
    fresh.verification_value = make_verification_value(ids_, verification_domain_);
  }
  run(std::move(actor),
      [spec = std::move(spec), fresh = std::move(fresh)](Lookups& lookups, const Actor& a,
                                                         int64_t now) mutable {
        fresh.now = now;
        return decide_create(spec, a, fresh, lookups);
      },
      std::move(done), std::move(idempotency));
}

std::optional<Written> Service::written_replay(const IdempotencyKey& idempotency) const {
  auto kept = find_written_answer(writer_.store(), idempotency, clock_.now_seconds());
  if (!kept.ok() || !kept.value() || kept.value()->fingerprint != idempotency.fingerprint) {
    return std::nullopt;
  }
  return Written{std::move(kept.value()->json), kept.value()->version, true};
}

void Service::update(Kind kind, std::string id, Spec spec, Actor actor, Preconditions pre,
                     Done done) {
  run(
      std::move(actor),
      [this, kind, id = std::move(id), spec = std::move(spec), pre = std::move(pre)](
          Lookups& lookups, const Actor& a, int64_t now) {
        return decide_update(kind, id, spec, a, pre, now, lookups, reserved_);
      },
      std::move(done));
}

void Service::remove(Kind kind, std::string id, Actor actor, Done done, Preconditions pre) {
  run(
      std::move(actor),
      [this, kind, id = std::move(id), pre = std::move(pre)](Lookups& lookups, const Actor& a,
                                                             int64_t now) {
        return decide_delete(kind, id, a, now, lookups, pre, reserved_);
      },
      std::move(done));
}

void Service::verify(std::string id, Actor actor, Done done, Preconditions pre) {
  run(
      std::move(actor),
      [this, id = std::move(id), pre = std::move(pre)](Lookups& lookups, const Actor& a, int64_t) {
        return decide_verify(id, a, lookups, pre, reserved_);
      },
      std::move(done));
}

}  // namespace gw
