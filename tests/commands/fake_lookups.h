// An in-memory Lookups for decide tests: given a set of stored records and verified claims.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "commands/decide.h"
#include "commands/fields.h"

namespace gw::testing {

class FakeLookups final : public Lookups {
 public:
  void given(Record record, uint64_t version = 1) {
    std::string id = meta_of(record).id;
    records_[id] = Stored{std::move(record), version, ++seq_};
  }
  void given_claim(Claim claim) { claims_.push_back(std::move(claim)); }
  void given_open_request(const std::string& domain_id, uint64_t seq) {
    requests_[domain_id] = seq;
  }

  std::optional<Stored> load(const std::string& id) override {
    auto it = records_.find(id);
    if (it == records_.end()) return std::nullopt;
    return it->second;
  }
  std::optional<std::string> live_profile_by_hostname(const std::string& hostname) override {
    for (const auto& [id, s] : records_) {
      if (const auto* p = std::get_if<Profile>(&s.record);
          p && p->hostname == hostname && p->meta.deleted_at == 0) {
        return id;
      }
    }
    return std::nullopt;
  }
  std::optional<std::string> live_domain_by_hostname(const std::string& team,
                                                     const std::string& hostname) override {
    for (const auto& [id, s] : records_) {
      if (const auto* d = std::get_if<Domain>(&s.record); d && d->hostname == hostname &&
                                                          d->meta.team_id == team &&
                                                          d->meta.deleted_at == 0) {
        return id;
      }
    }
    return std::nullopt;
  }
  std::optional<uint64_t> open_request(const std::string& domain_id) override {
    auto it = requests_.find(domain_id);
    if (it == requests_.end()) return std::nullopt;
    return it->second;
  }
  std::vector<std::string> team_domains_under(const std::string& team,
                                              const std::string& hostname) override {
    std::vector<std::string> out;
    for (const auto& [id, s] : records_) {
      const auto* d = std::get_if<Domain>(&s.record);
      if (d && d->meta.team_id == team && d->meta.deleted_at == 0 && d->hostname != hostname &&
          fields::is_at_or_under(d->hostname, hostname)) {
        out.push_back(id);
      }
    }
    return out;
  }
  std::vector<std::string> inherited_from(const std::string& parent_id) override {
    std::vector<std::string> out;
    for (const auto& [id, s] : records_) {
      const auto* d = std::get_if<Domain>(&s.record);
      if (d && d->meta.deleted_at == 0 && d->verification_parent_id == parent_id) out.push_back(id);
    }
    return out;
  }
  std::vector<Claim> claims_under(const std::string& hostname) override {
    std::vector<Claim> out;
    for (const auto& c : claims_) {
      if (c.hostname != hostname && fields::is_at_or_under(c.hostname, hostname)) out.push_back(c);
    }
    return out;
  }
  std::vector<Claim> claims_covering(const std::string& hostname) override {
    std::vector<Claim> out;
    for (const auto& c : claims_) {
      if (c.hostname == hostname ||
          (c.scope == "subtree" && fields::is_at_or_under(hostname, c.hostname))) {
        out.push_back(c);
      }
    }
    return out;
  }

 private:
  std::map<std::string, Stored> records_;
  std::vector<Claim> claims_;
  std::map<std::string, uint64_t> requests_;
  uint64_t seq_ = 0;
};

}  // namespace gw::testing
