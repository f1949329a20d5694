#include "admin/counts.h"

namespace gw::admin {

Result<RecordCounts> count_records(const Fold& fold) {
  RecordCounts c;
  auto counted = fold.for_each_kind([&c](Kind kind, bool deleted) {
    if (deleted) {
      ++c.deleted;
      return;
    }
    switch (kind) {
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
  });
  if (!counted.ok()) return std::move(counted.error());
  return c;
}

std::string describe(const RecordCounts& c) {
  return std::string("live ") + kind_name(Kind::kProfile) + "=" + std::to_string(c.profiles) + " " +
         kind_name(Kind::kDomain) + "=" + std::to_string(c.domains) + " " +
         kind_name(Kind::kWebhook) + "=" + std::to_string(c.webhooks) +
         " deleted=" + std::to_string(c.deleted);
}

}  // namespace gw::admin
