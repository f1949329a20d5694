// Stored events as CloudEvents binary-mode Kafka messages.
#include <doctest/doctest.h>

#include "mirror/cloud_event.h"
#include "store/writer.h"

namespace gw::mirror {
namespace {

std::string stored_event(uint64_t seq) {
  EventDraft d{"domain.created", "domain",   "dom_01",   1,
               "team_a",         "ci-token", 1795166400, R"({"domain_id":"dom_01"})"};
  return encode_event(seq, "evt_01", d, kGenesisHash, nullptr);
}

TEST_CASE("an event becomes a message keyed by its aggregate with the ce_ headers") {
  const std::string stored = stored_event(42);
  auto m = to_cloud_event(42, stored);
  REQUIRE(m.ok());
  CHECK(m.value().seq == 42);
  CHECK(m.value().key == "dom_01");
  CHECK(m.value().value == stored);  // the stored bytes, hashes included
  CHECK(m.value().time == 1795166400);
  using Headers = std::vector<std::pair<std::string, std::string>>;
  CHECK(m.value().headers == Headers{{"ce_specversion", "1.0"},
                                     {"ce_id", "evt_01"},
                                     {"ce_source", "/tenants/team_a"},
                                     {"ce_type", "domain.created"},
                                     {"ce_subject", "dom_01"},
                                     {"ce_time", "2026-11-20T09:20:00Z"},
                                     {"ce_sequence", "00000000000000000042"},
                                     {"content-type", "application/json"}});
}

TEST_CASE("bytes that are not the event at that sequence number are refused") {
  const char* rows[] = {"", "[]", "{\"seq\":1}", "not json",
                        R"({"seq":1,"event_id":"e","type":"t","aggregate_id":"a","tenant":"x"})"};
  for (const char* row : rows) {
    CAPTURE(row);
    auto m = to_cloud_event(1, row);
    REQUIRE_FALSE(m.ok());
    CHECK(m.error().code == Code::kInternal);
  }
  CHECK_FALSE(to_cloud_event(7, stored_event(42)).ok());  // another event's bytes
}

TEST_CASE("times are RFC 3339 UTC and sequence numbers sort as strings") {
  CHECK(rfc3339_utc(0) == "1970-01-01T00:00:00Z");
  CHECK(rfc3339_utc(951782400) == "2000-02-29T00:00:00Z");
  CHECK(sequence_attribute(0) == "00000000000000000000");
  CHECK(sequence_attribute(18446744073709551615ull) == "18446744073709551615");
  CHECK(sequence_attribute(9) < sequence_attribute(10));
}

}  // namespace
}  // namespace gw::mirror
