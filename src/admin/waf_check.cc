#include "admin/waf_check.h"

#include <utility>
#include <variant>

#include "projections/log_fold.h"

namespace gw::admin {

Result<WafCheckReport> waf_check(const Store& store, const DirectivesCheck& check) {
  LogFold fold;
  auto it = store.iterate(Cf::kEvents);
  it->SeekToFirst();
  if (auto r = fold_events(*it, UINT64_MAX, fold); !r.ok()) return std::move(r.error());
  WafCheckReport report;
  report.last_seq = fold.last_seq();
  for (const auto& a : fold.aggregates()) {
    const auto* profile = std::get_if<Profile>(&a.record);
    if (profile == nullptr || profile->meta.deleted_at != 0) continue;
    ++report.profiles;
    if (profile->waf_custom_directives.empty()) continue;
    ++report.with_directives;
    auto problem = check(profile->waf_custom_directives);
    if (!problem.ok()) return std::move(problem.error());
    if (problem.value()) {
      report.refused.push_back(
          {profile->meta.id, profile->meta.team_id, profile->hostname, *problem.value()});
    }
  }
  return report;
}

}  // namespace gw::admin
