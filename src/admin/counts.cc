#include "admin/counts.h"

namespace gw::admin {

RecordCounts count_records(const LogFold& fold) {
  RecordCounts c;
  for (const auto& a : fold.aggregates()) {
    if (meta_of(a.record).deleted_at != 0) {
      ++c.deleted;
      continue;
    }
    switch (kind_of(a.record)) {
      case Kind::kProfile:
        ++c.profiles;
        break;
      case Kind::kDomain:
        ++c.domains;
        break;
      case Kind::kWebhook:
        ++c.webhooks;
        break;
    }
  }
  return c;
}

std::string describe(const RecordCounts& c) {
  return std::string("live ") + kind_name(Kind::kProfile) + "=" + std::to_string(c.profiles) + " " +
         kind_name(Kind::kDomain) + "=" + std::to_string(c.domains) + " " +
         kind_name(Kind::kWebhook) + "=" + std::to_string(c.webhooks) +
         " deleted=" + std::to_string(c.deleted);
}

}  // namespace gw::admin
