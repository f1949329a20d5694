// The Verifier over a real Writer and RocksDB, with a Resolver of the test's own: a request whose
// store reads fail is tried again, neither answered wrongly nor left open for good.
#include <doctest/doctest.h>

#include <rapidjson/document.h>
#include <rocksdb/table.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <string>
#include <thread>

#include "projections/keys.h"
#include "service/service.h"
#include "service/service_test_util.h"
#include "store/store_test_util.h"
#include "verify/verifier.h"

namespace gw {
namespace {

// Drops every block of `store`'s projections from the block cache: the next read of one reads
// its table file.
void drop_cached_blocks(Store& store) {
  store.db()
      ->GetOptions(store.cf(Cf::kProjections))
      .table_factory->GetOptions<rocksdb::BlockBasedTableOptions>()
      ->block_cache->EraseUnRefEntries();
}

// Answers every lookup at once, on the calling thread, with the CNAME `target`, after running
// `before_answer` (if given) on the first lookup.
class FixedResolver final : public Resolver {
 public:
  explicit FixedResolver(std::string target, std::function<void()> before_answer = nullptr)
      : target_(std::move(target)), before_answer_(std::move(before_answer)) {}
  void lookup_cname(std::string, std::string, Callback callback, Wanted wanted) override {
    CnameAnswer answer;
    if (wanted && !wanted()) {
      answer.status = CnameAnswer::Status::kSkipped;
    } else {
      if (lookups.fetch_add(1) == 0 && before_answer_) before_answer_();
      answer.status = CnameAnswer::Status::kFound;
      answer.target = target_;
    }
    callback(std::move(answer));
  }
  size_t waiting() const override { return 0; }
  std::atomic<int> lookups{0};

 private:
  std::string target_;
  std::function<void()> before_answer_;
};

// A domain with an open verification request, whose projections are in a table file that no
// cached block holds: the next read of them reads the file, which the env can fail. Fifty
// domains created before it put its record in another block than the open requests' keys, which
// sort before every record.
struct OpenRequest {
  testing::FailingReadsDir disk;
  std::unique_ptr<Store> store = disk.open();
  std::unique_ptr<Writer> writer = std::move(
      Writer::start(*store, *disk.ids, scanned_by_commands, nullptr, written_only_by_commands)
          .value());
  Service service{*writer, disk.clock, *disk.ids, "verify.example.net", FieldPolicy().platform};
  std::string id;
  std::string value;  // the CNAME target the domain expects

  OpenRequest() {
    const Actor actor{"team_a", "test"};
    DomainSpec spec;
    spec.domain.meta.team_id = "team_a";
    for (int i = 0; i < 50; ++i) {
      spec.domain.hostname = "before-" + std::to_string(i) + ".example.com";
      REQUIRE(call([&](Done done) { service.create(spec, actor, std::nullopt, done); }).ok());
    }
    spec.domain.hostname = "shop.example.com";
    auto created = call([&](Done done) { service.create(spec, actor, std::nullopt, done); });
    REQUIRE(created.ok());
    rapidjson::Document doc;
    doc.Parse(created.value().json.c_str());
    id = doc["domain_id"].GetString();
    value = doc["verification_value"].GetString();
    REQUIRE(call([&](Done done) { service.verify(id, actor, done); }).ok());
    REQUIRE(store->db()->Flush(rocksdb::FlushOptions(), store->cf(Cf::kProjections)).ok());
    drop_cached_blocks(*store);
  }
  ~OpenRequest() { writer->stop(); }

  template <typename Submit>
  Result<Written> call(Submit submit) {
    return testing::call_one(std::move(submit));
  }

  // The domain as stored now: its status and verification_error. Read without filling the
  // block cache, which would spare the verifier's own read the file.
  std::pair<std::string, std::string> domain() const {
    rocksdb::ReadOptions uncached;
    uncached.fill_cache = false;
    std::string raw;
    REQUIRE(store->db()->Get(uncached, store->cf(Cf::kProjections), keys::record(id), &raw).ok());
    keys::RecordHeader header;
    std::string_view json;
    REQUIRE(keys::decode_record(raw, &header, &json));
    rapidjson::Document doc;
    doc.Parse(json.data(), json.size());
    return {doc["status"].GetString(), doc["verification_error"].GetString()};
  }
};

// The verifier's retries as its metrics say them.
int retries(const Verifier& verifier) {
  const std::string text = verifier.render_metrics();
  const std::string name = "\ngatewayd_verifier_retries_total ";
  const size_t at = text.find(name);
  REQUIRE(at != std::string::npos);
  return std::stoi(text.substr(at + name.size()));
}

// Waits up to 20 s for `done`.
template <typename Done>
bool eventually(Done done) {
  for (int i = 0; i < 2000 && !done(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

TEST_CASE("a request whose domain the verifier cannot read is tried again, not answered") {
  // It was answered `superseded`, as if the domain were deleted: the decision, which read the
  // domain, found the request open and wrote a verification_failed of "superseded: ".
  OpenRequest r;
  // The open requests' block in the cache, so that the verifier's scan finds the request; the
  // record's block, which is another, still to be read.
  {
    auto it = r.store->iterate_under(Cf::kProjections, keys::request_prefix());
    it->Seek(keys::request_prefix());
    REQUIRE(it->Valid());
  }
  r.disk.env.only_thread = "gw-verify";
  r.disk.env.fail = true;
  FixedResolver resolver(r.value);
  Verifier verifier(*r.store, r.service, resolver);
  verifier.start();
  REQUIRE(eventually([&] { return retries(verifier) >= 1 || !r.domain().second.empty(); }));
  CHECK(r.domain() == std::make_pair(std::string("pending"), std::string()));
  CHECK(resolver.lookups == 0);
  CHECK(verifier.queue_depth() == 1);

  r.disk.env.fail = false;  // the next try reads it, looks it up and verifies it
  CHECK(eventually([&] { return r.domain().first == "verified"; }));
  CHECK(eventually([&] { return verifier.queue_depth() == 0; }));
  CHECK(resolver.lookups == 1);
  verifier.stop();
}

TEST_CASE("an outcome refused because the store could not be read is tried again") {
  // It was left open until a restart, with queue_depth saying nothing was pending.
  OpenRequest r;
  r.disk.env.only_thread = "gw-stage";  // the writer's thread, where decisions read the store
  r.disk.env.fail = true;
  // The verifier's own reads filled the cache; the decision's must read the file.
  FixedResolver resolver(r.value, [&] { drop_cached_blocks(*r.store); });
  Verifier verifier(*r.store, r.service, resolver);
  verifier.start();
  REQUIRE(eventually([&] {
    return retries(verifier) >= 1 || (resolver.lookups >= 1 && verifier.queue_depth() == 0);
  }));
  CHECK(r.domain() == std::make_pair(std::string("pending"), std::string()));
  CHECK(verifier.queue_depth() == 1);
  CHECK(r.writer->writable());

  r.disk.env.fail = false;
  CHECK(eventually([&] { return r.domain().first == "verified"; }));
  CHECK(eventually([&] { return verifier.queue_depth() == 0; }));
  CHECK(resolver.lookups >= 2);  // each try looks the name up again
  verifier.stop();
}

}  // namespace
}  // namespace gw
