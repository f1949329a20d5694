// gatewayctl waf-check: every live profile's waf_custom_directives checked again against the
// current policy. The policy applies to writes: a profile stored before a release tightened it
// keeps its text (replay never re-checks), and this finds such profiles.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "commands/fields.h"
#include "core/error.h"
#include "projections/fold.h"
#include "store/store.h"

namespace gw::admin {

struct WafFinding {
  std::string profile_id;
  std::string team_id;
  std::string hostname;
  std::string problem;
};

struct WafCheckReport {
  uint64_t last_seq = 0;            // the log was read through this event
  uint64_t profiles = 0;            // live profiles
  uint64_t with_directives = 0;     // of them, those with waf_custom_directives to check
  std::vector<WafFinding> refused;  // those the current policy refuses, in create order
};

// The problem the current policy finds with a text, or nothing; an error when no check could run
// (gatewayctl runs fields::waf_directives in its WAF sandbox, as gatewayd does).
using DirectivesCheck = std::function<Result<fields::Problem>(std::string_view directives)>;

// Folds the whole log (where `options` say, projections/fold.h) and checks each live profile's
// non-empty waf_custom_directives with `check`. kInternal for a malformed event, kUnavailable on
// an I/O error or when a check could not run.
Result<WafCheckReport> waf_check(const Store& store, const DirectivesCheck& check,
                                 const FoldOptions& options = {});

}  // namespace gw::admin
