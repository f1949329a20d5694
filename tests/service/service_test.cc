// The Service over a real Writer and RocksDB: what it signals after a write is durable.
#include <doctest/doctest.h>

#include <rapidjson/document.h>

#include <future>
#include <string>

#include "projections/keys.h"
#include "service/service.h"
#include "service/service_test_util.h"
#include "store/store_test_util.h"

namespace gw {
namespace {

struct ServiceFixture {
  testing::ScratchDir dir;
  std::unique_ptr<Store> store = std::move(Store::open(dir.path()).value());
  SystemClock clock;
  std::unique_ptr<IdGenerator> ids = make_system_id_generator(clock);
  std::unique_ptr<Writer> writer = std::move(
      Writer::start(*store, *ids, scanned_by_commands, nullptr, written_only_by_commands).value());
  Service service{*writer, clock, *ids, "verify.example.net", FieldPolicy().platform};

  // Runs one command and waits for its answer (given after the write is durable).
  template <typename Submit>
  Result<Written> call(Submit submit) {
    return testing::call_one(std::move(submit));
  }
};

std::string domain_id_of(const Written& w) {
  rapidjson::Document doc;
  doc.Parse(w.json.c_str());
  INFO(w.json);
  REQUIRE((doc.IsObject() && doc.HasMember("domain_id") && doc["domain_id"].IsString()));
  return doc["domain_id"].GetString();
}

TEST_CASE(
    "the keys commands only write are the index, count, history, feed, queue and checkpoint") {
  auto only = [](std::string_view key) { return written_only_by_commands(Cf::kProjections, key); };
  CHECK(only(keys::list_prefix("team_a", Kind::kWebhook) + "12345678"));
  CHECK(only(keys::filter_prefix("team_a", Kind::kWebhook, "status", "active") + "12345678"));
  CHECK(only(keys::count_of_prefix(keys::list_prefix("team_a", Kind::kWebhook))));
  CHECK(only(keys::history_prefix("whk_01") + "12345678"));
  CHECK(only(keys::tenant_events_prefix("team_a") + "12345678"));
  CHECK(only(keys::request_prefix() + "12345678"));
  CHECK(only(keys::checkpoint()));
  // What decisions read or scan stays readable.
  CHECK_FALSE(only(keys::record("whk_01")));
  CHECK_FALSE(only(keys::profile_hostname("shop.example.com")));
  CHECK_FALSE(only(keys::domain_hostname("team_a", "shop.example.com")));
  CHECK_FALSE(only(keys::claim_prefix("shop.example.com") + "dom_01"));
  CHECK_FALSE(only(keys::domain_name_prefix("team_a") + "com.example."));
  CHECK_FALSE(only(keys::inherited_prefix("dom_01") + "dom_02"));
  CHECK_FALSE(only(keys::open_request("dom_01")));
  CHECK_FALSE(written_only_by_commands(Cf::kMeta, keys::checkpoint()));
  CHECK_FALSE(written_only_by_commands(Cf::kEvents, keys::checkpoint()));
}

TEST_CASE("verification_requests is raised when a request is durable, and for no other write") {
  ServiceFixture f;
  const Actor actor{"team_a", "test"};
  EventCount& requests = f.service.verification_requests();
  CHECK(requests.current() == 0);

  Webhook hook;
  hook.meta.team_id = "team_a";
  hook.workload_id = "w-1";
  hook.provider = "github";
  hook.external_id = "x";
  REQUIRE(f.call([&](Done done) { f.service.create(hook, actor, std::nullopt, done); }).ok());
  DomainSpec spec;
  spec.domain.meta.team_id = "team_a";
  spec.domain.hostname = "shop.example.com";
  auto domain = f.call([&](Done done) { f.service.create(spec, actor, std::nullopt, done); });
  REQUIRE(domain.ok());
  CHECK(requests.current() == 0);  // creates open no request

  const std::string id = domain_id_of(domain.value());
  REQUIRE(f.call([&](Done done) { f.service.verify(id, actor, done); }).ok());
  CHECK(requests.current() == 1);  // raised before the answer

  // A rejected request (another team's domain reads as unknown) writes nothing and raises nothing.
  auto other = f.call([&](Done done) { f.service.verify(id, Actor{"team_b", "test"}, done); });
  CHECK_FALSE(other.ok());
  CHECK(requests.current() == 1);
}

}  // namespace
}  // namespace gw
