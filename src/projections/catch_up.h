// Bringing the read model up to the log: applies every event after the projections' checkpoint.
// Normally a no-op (events and projections are written in one batch); after `gatewayctl rebuild`
// dropped the projections, it replays the whole log. Run before the Writer starts or with the
// server stopped; not concurrent with other writers.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "core/clock.h"
#include "core/error.h"
#include "projections/fold.h"
#include "store/store.h"

namespace gw {

// Returns the number of events applied. With no checkpoint (empty projections) this is
// rebuild_projections, folding where `options` say; otherwise the events past the checkpoint are
// applied one by one. A caller checks read_model_ahead_of_log first (gatewayd's start does):
// catching up such a read model would let the writer take the lost events' numbers again.
Result<uint64_t> catch_up_projections(Store& store, IdGenerator& ids,
                                      const FoldOptions& options = {});

// The layout of a read model another release wrote (keys.h: "2", say), which catch_up_projections
// drops and rebuilds: the layout a checkpoint key names when none names this release's. nullopt
// if a checkpoint of this layout is there, or none is. gatewayd says so as it starts, and
// `gatewayctl check` names it instead of its first key.
Result<std::optional<std::string>> other_projections_layout(const Store& store);

// What a read model that has seen events the log no longer holds is told by: its checkpoint (the
// last event it applied) beyond the log's last event. Events are written with the projections
// they imply in one synced batch, and no crash takes synced writes away, so only a log cut short
// or damaged by something else (a copy that stopped, a `truncate`, an edit) does this; going on,
// the writer took the lost events' sequence numbers again beside projections of the lost ones
// (helper 160: lists served records with no events, and /v1/events and history answered 500).
// A sentence for gatewayd's refusal and for `gatewayctl check`'s finding, or nullopt when the
// read model is not ahead (none at all, or of another layout, is not).
Result<std::optional<std::string>> read_model_ahead_of_log(const Store& store);

// The kMeta key write_projections sets (synced) before it changes the read model: a read model made
// from the log may lack records the kept Idempotency-Key answers name (a log cut short), and
// those answers are checked against it, and the key deleted, in the same write
// (service/idempotency.h, drop_answers_of_lost_creates). Set, it tells every later start and
// rebuild that the check is still to be done, whatever stopped the one before.
inline constexpr char kAnswersToCheckKey[] = "projections/answers-to-check";

// A fold on disk for a rebuild goes into <data-dir>/fold.tmp unless the options name another
// scratch directory; the sorted table files into <data-dir>/rebuild.tmp. Both are removed once
// used, and made afresh (removing what a stopped rebuild left) when next needed.
inline constexpr char kFoldDir[] = "fold.tmp";
inline constexpr char kRebuildDir[] = "rebuild.tmp";

// Replays the whole log into the projections column family, which must be empty (a new data dir,
// or right after Store::reset_projections): folds every event (fold.h, where `options` say),
// writes the projections it implies to sorted table files under <data-dir>/rebuild.tmp and
// ingests them in one atomic step, so the read model is either complete or still empty. Returns
// the number of events. kInternal for a malformed event, kUnavailable on an I/O error.
Result<uint64_t> rebuild_projections(Store& store, const FoldOptions& options = {});

// The two steps of rebuild_projections, for a caller that drops the projections in between:
// `gatewayctl rebuild` drops them with `before_ingest`, once the log has been read to its end and
// its table files are written, so that a failure before (a malformed event, a full disk) leaves
// the read model as it was. An error of `before_ingest` ingests nothing.
Result<std::unique_ptr<Fold>> fold_log(Store& store, const FoldOptions& options);
// Where fold_log folds on disk: the options' scratch_dir, or <data-dir>/fold.tmp.
std::string fold_scratch_dir(const Store& store, const FoldOptions& options);
Result<bool> write_projections(Store& store, const Fold& fold,
                               const std::function<Result<bool>()>& before_ingest = nullptr);

}  // namespace gw
