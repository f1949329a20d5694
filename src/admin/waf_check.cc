#include "admin/waf_check.h"

#include <utility>
#include <variant>

#include "projections/fold.h"

namespace gw::admin {

Result<WafCheckReport> waf_check(const Store& store, const DirectivesCheck& check,
                                 const FoldOptions& options) {
  auto fold = Fold::of_log(store, UINT64_MAX, options);
  if (!fold.ok()) return std::move(fold.error());
  WafCheckReport report;
  report.last_seq = fold.value()->last_seq();
  auto checked = fold.value()->for_each_record([&](const Record& record) -> Result<bool> {
    const auto* profile = std::get_if<Profile>(&record);
    if (profile == nullptr || profile->meta.deleted_at != 0) return true;
    ++report.profiles;
    if (profile->waf_custom_directives.empty()) return true;
    ++report.with_directives;
    auto problem = check(profile->waf_custom_directives);
    if (!problem.ok()) return std::move(problem.error());
    if (problem.value()) {
      report.refused.push_back(
          {profile->meta.id, profile->meta.team_id, profile->hostname, *problem.value()});
    }
    return true;
  });
  if (!checked.ok()) return std::move(checked.error());
  return report;
}

}  // namespace gw::admin
