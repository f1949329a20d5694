// The Kafka mirror against a real Kafka-protocol broker (librdkafka's mock cluster in its own
// process, tests/tools/kafka_mock) read back with a real consumer (kcat).
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <map>
#include <memory>
#include <set>
#include <thread>

#include "integration/fixture.h"
#include "support/kafka.h"
#include "support/process.h"

namespace gw::itest::mirror_test {
namespace {

using testing::KafkaMessage;
using testing::KafkaMock;

constexpr int kPartitions = 4;

// A broker with the test topic, started.
struct Broker {
  KafkaMock mock;
  // Brokers of different `clusters_before` are different clusters (their ids differ).
  // With `port`, on that port of 127.0.0.1.
  explicit Broker(int clusters_before = 0, int port = 0, bool same_id = false,
                  int partitions = kPartitions, int brokers = 1)
      : mock(KAFKA_MOCK_PATH, "gateway-config.events", partitions, clusters_before, port, same_id,
             brokers) {
    mock.start();
  }
  std::vector<std::string> flags() const {
    return {"--kafka-brokers", mock.bootstrap(), "--kafka-topic", mock.topic()};
  }
};

// A gauge of the mirror's metrics (-1 when absent).
double mirror_gauge(const Server& server, std::string_view series) {
  return sample(metrics(server), series).value_or(-1);
}

// Waits until the mirror has confirmed every event of the log (lag 0) or 30 s passed.
void wait_mirrored(const Server& server) {
  for (int i = 0; i < 300; ++i) {
    if (mirror_gauge(server, "gatewayd_mirror_lag_events") == 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  FAIL_CHECK("the mirror did not catch up: " << metrics(server));
}

// Checks that the topic holds every event of `log` (seq i+1 = log[i]) at least once, with the
// CloudEvents headers, keyed by aggregate id, and that each key's first deliveries are in log
// order on one partition. Returns how many messages were duplicates.
size_t check_topic(const std::vector<KafkaMessage>& messages, const std::vector<std::string>& log) {
  std::map<uint64_t, const KafkaMessage*> first;  // seq -> its first delivery
  std::map<std::string, int> partition_of;
  std::map<std::pair<int, std::string>, uint64_t> last_seq_of_key;  // (partition, key) -> seq
  size_t duplicates = 0;
  // kcat prints each partition in offset order; a key's messages all live in one partition.
  for (const KafkaMessage& m : messages) {
    rapidjson::Document event;
    event.Parse(m.payload.c_str());
    REQUIRE_MESSAGE(event.IsObject(), m.payload);
    const uint64_t seq = static_cast<uint64_t>(num(event, "seq"));
    CAPTURE(seq);
    REQUIRE(seq >= 1);
    REQUIRE(seq <= log.size());
    CHECK(testing::to_json(event) == log[seq - 1]);
    CHECK(m.key == str(event, "aggregate_id"));
    CHECK(m.header("ce_specversion") == "1.0");
    CHECK(m.header("ce_id") == str(event, "event_id"));
    CHECK(m.header("ce_source") == "/tenants/" + str(event, "tenant"));
    CHECK(m.header("ce_type") == str(event, "type"));
    CHECK(m.header("ce_subject") == str(event, "aggregate_id"));
    CHECK(m.header("ce_time").value_or("").size() == 20);  // 2026-11-20T09:30:00Z
    char padded[24];
    std::snprintf(padded, sizeof padded, "%020llu", static_cast<unsigned long long>(seq));
    CHECK(m.header("ce_sequence") == std::string(padded));
    CHECK(m.header("content-type") == "application/json");
    auto [where, fresh] = partition_of.emplace(m.key, m.partition);
    CHECK(where->second == m.partition);
    if (first.count(seq) != 0) {
      ++duplicates;
      continue;
    }
    first[seq] = &m;
    // The first delivery of each event comes after the first delivery of the key's earlier
    // events: after dropping duplicates by ce_id, a consumer sees each aggregate in log order.
    auto& last = last_seq_of_key[{m.partition, m.key}];
    CHECK_MESSAGE(seq > last, "key " << m.key << ": event " << seq << " after " << last);
    last = std::max(last, seq);
  }
  for (uint64_t seq = 1; seq <= log.size(); ++seq) {
    CHECK_MESSAGE(first.count(seq) == 1, "event " << seq << " is missing from the topic");
  }
  return duplicates;
}

TEST_CASE("every event is published once, as a CloudEvents message keyed by aggregate, in order") {
  Broker broker;
  Server server(broker.flags());
  Api api(server, kTeamA);
  std::vector<std::string> ids;
  for (int n = 0; n < 5; ++n) {
    for (const Kind* kind : kKinds) {
      Response created = api.post(std::string(kind->path), kind->body(kTeamA, n));
      REQUIRE(created.status == 201);
      std::string id = str(json(created), kind->id_field);
      REQUIRE(api.put(item_path(*kind, id),
                      testing::json_with(kind->body(kTeamA, n), kind->edit_field, kind->edit_value))
                  .status == 200);
      if (kind == &kDomain) REQUIRE(verify(api, id).status == 200);  // + an outcome event
      if (n == 0) REQUIRE(api.del(item_path(*kind, id)).status == 200);
      ids.push_back(id);
    }
  }
  // The whole log: every test here writes as team_a only. The verifier writes each domain's
  // outcome after its verify was answered, on a thread of its own; the mirror's lag counts only
  // what is written, so it can reach 0 before the last outcome is.
  constexpr size_t kEvents = 5 * 3 * 2 + 5 * 2 + 3;
  std::vector<std::string> log = all_events(api);
  for (int i = 0; i < 300 && log.size() < kEvents; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    log = all_events(api);
  }
  REQUIRE(log.size() == kEvents);
  wait_mirrored(server);
  auto messages = testing::kcat_read_at_least(broker.mock.bootstrap(), broker.mock.topic(),
                                              log.size(), std::chrono::seconds(10));
  CHECK(messages.size() == log.size());
  CHECK(check_topic(messages, log) == 0);
  std::set<int> partitions;
  for (const auto& m : messages) partitions.insert(m.partition);
  CHECK(partitions.size() > 1);  // keys spread over the topic; order holds per key

  std::string text = metrics(server);
  CHECK(sample(text, "gatewayd_mirror_enabled") == 1);
  CHECK(sample(text, "gatewayd_mirror_checkpoint_seq") == static_cast<double>(log.size()));
  CHECK(sample(text, "gatewayd_mirror_delivered_total") == static_cast<double>(log.size()));
  CHECK(sample(text, "gatewayd_mirror_lag_seconds") == 0);
  CHECK(sample(text, "gatewayd_mirror_delivery_failures_total") == 0);
}

TEST_CASE("without --kafka-brokers nothing is mirrored and the metrics say so") {
  Server server;
  std::string text = metrics(server);
  CHECK(sample(text, "gatewayd_mirror_enabled") == 0);
  CHECK_FALSE(sample(text, "gatewayd_mirror_lag_events").has_value());
}

// The mirror reads the topic's newest event at every start (and after a new producer), asking
// each partition's leader for its offsets. librdkafka 2.0.2's rd_kafka_query_watermark_offsets did
// not end at its timeout while a leader did not answer, so the mirror's thread, and a SIGTERM
// with it, waited until the broker came back: SIGKILLed after the 15 s here, exiting 0 only when
// a frozen broker was resumed (helper 61).
TEST_CASE("SIGTERM ends gatewayd while the topic's partition leader cannot be reached") {
  testing::ChildProcess broker;
  broker.spawn({KAFKA_MOCK_PATH, "--brokers", "2", "--topic", "gateway-config.events",
                "--partitions", "2", "--leader-down", "1"});
  auto bootstrap = broker.wait_for_line("bootstrap ", std::chrono::seconds(10));
  REQUIRE(bootstrap.has_value());
  Server server({"--kafka-brokers", bootstrap->substr(bootstrap->find(' ') + 1)});
  Api api(server, kTeamA);
  REQUIRE(api.post("/v1/webhook", webhook_body(kTeamA, "w")).status == 201);
  // The read of the newest event fails at its timeout, and is tried again later.
  CHECK(server.wait_for_line("cannot read the newest event of topic").has_value());
  const testing::ExitStatus stopped = server.stop();
  INFO(server.output());
  CHECK(stopped.describe() == "exit 0");
}

TEST_CASE("a frozen broker never blocks writes; the backlog drains in order when it returns") {
  Broker broker;
  Server server(broker.flags());
  Api api(server, kTeamA);
  REQUIRE(api.post("/v1/webhook", webhook_body(kTeamA, "before-freeze")).status == 201);
  wait_mirrored(server);

  broker.mock.pause();
  std::vector<std::string> ids;
  for (int n = 0; n < 300; ++n) {
    Response r =
        api.post("/v1/domain", domain_body(kTeamA, "frozen" + std::to_string(n) + ".example.com"));
    REQUIRE(r.status == 201);
    ids.push_back(str(json(r), "domain_id"));
  }
  for (int n = 0; n < 300; n += 3) {
    REQUIRE(api.put(item_path(kDomain, ids[n]),
                    testing::json_with(
                        domain_body(kTeamA, "frozen" + std::to_string(n) + ".example.com"), "scope",
                        R"("exact")"))
                .status == 200);
  }
  testing::HttpClient http;
  CHECK(http.request("GET", server.url() + "/readyz").status == 200);
  std::string text = metrics(server);
  CHECK(sample(text, "gatewayd_mirror_lag_events").value_or(0) >= 300);
  CHECK(sample(text, "gatewayd_mirror_checkpoint_seq") == 1);

  broker.mock.resume();
  wait_mirrored(server);
  std::vector<std::string> log = all_events(api);
  auto messages = testing::kcat_read_at_least(broker.mock.bootstrap(), broker.mock.topic(),
                                              log.size(), std::chrono::seconds(10));
  CHECK(check_topic(messages, log) == 0);

  SUBCASE("gatewayd stopped while the broker is frozen exits cleanly; its backlog survives") {
    broker.mock.pause();
    for (int n = 0; n < 50; ++n) {
      REQUIRE(api.post("/v1/webhook", webhook_body(kTeamA, "w" + std::to_string(n))).status == 201);
    }
    CHECK(server.stop().success());
    broker.mock.resume();
    server.restart();
    wait_mirrored(server);
    log = all_events(api);
    messages = testing::kcat_read_at_least(broker.mock.bootstrap(), broker.mock.topic(), log.size(),
                                           std::chrono::seconds(10));
    check_topic(messages, log);
  }
}

// A broker of several going down while gatewayd publishes, as a Kafka node fails and its
// partitions get new leaders: nothing the API acknowledged is lost, and each aggregate's events
// still arrive in log order, whether or not the broker's going replaced the producer.
TEST_CASE("a broker of three going down mid-run loses nothing and keeps each key's order") {
  Broker broker(0, 0, false, kPartitions, 3);
  Server server(broker.flags());
  Api api(server, kTeamA);
  std::vector<std::string> ids;
  for (int n = 0; n < 40; ++n) {
    Response r = api.post("/v1/webhook", webhook_body(kTeamA, "w" + std::to_string(n)));
    REQUIRE(r.status == 201);
    ids.push_back(str(json(r), "webhook_id"));
  }
  wait_mirrored(server);
  // Taken down 20 ms into 40 updates, so that it goes while events are being published.
  std::vector<int> statuses;
  std::jthread writer([&] {  // joined on the way out too, if the take-down throws
    for (int n = 0; n < 40; ++n) {
      statuses.push_back(api.put(item_path(kWebhook, ids[n]),
                                 testing::json_with(webhook_body(kTeamA, "w" + std::to_string(n)),
                                                    "status", R"("inactive")"))
                             .status);
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const int down = broker.mock.take_down_broker();
  writer.join();
  CHECK(down == 3);
  CHECK(statuses == std::vector<int>(40, 200));
  for (int n = 40; n < 80; ++n) {
    REQUIRE(api.post("/v1/webhook", webhook_body(kTeamA, "w" + std::to_string(n))).status == 201);
  }
  wait_mirrored(server);
  const std::vector<std::string> log = all_events(api);
  REQUIRE(log.size() == 120);
  auto messages = testing::kcat_read_at_least(broker.mock.bootstrap(), broker.mock.topic(),
                                              log.size(), std::chrono::seconds(10));
  INFO(server.output());
  check_topic(messages, log);  // every event, each key's first deliveries in log order
  CHECK(mirror_gauge(server, "gatewayd_mirror_delivery_failures_total") == 0);
  // Whether the producer is replaced depends on the moment. librdkafka reports no lost connection
  // to gatewayd (log.connection.close is false: it retries what was in flight itself), but a
  // reconnect to the downed broker refused before the new leaders are known replaces it, and it
  // sends again from its checkpoint. Either way, above, nothing is lost. (Broker 3 led partition
  // 2, kafka_mock's leaders being round-robin.)
}

// A stop shut the HTTP threads once no request was in flight, but left the connections open, and
// unread, until the verifier, the Kafka mirror (up to its 3 s flush) and the writer had stopped: a
// request a client sent meanwhile on a keep-alive connection was never answered, and its
// connection was reset at the end (helper 109, up to 0.84 s after the signal). The connections now
// end as the HTTP threads stop, before the rest of the stop.
TEST_CASE("a stop ends open connections as the HTTP threads stop, before the mirror's flush") {
  Broker broker;
  Server server(broker.flags());
  Api api(server, kTeamA);
  REQUIRE(api.post("/v1/webhook", webhook_body(kTeamA, "before-freeze")).status == 201);
  wait_mirrored(server);
  const int fd = connect_to(server);
  REQUIRE(fd >= 0);
  send_until_read(server, fd, "GET /healthz HTTP/1.1\r\nHost: gatewayd\r\n\r\n");
  const std::string first = read_response(fd);
  REQUIRE(first.starts_with("HTTP/1.1 200 "));
  REQUIRE(first.find("\r\nConnection: close\r\n") == std::string::npos);
  // An event the frozen broker never confirms: the mirror's stop waits its 3 s flush for it.
  broker.mock.pause();
  REQUIRE(api.post("/v1/webhook", webhook_body(kTeamA, "frozen")).status == 201);
  REQUIRE(::kill(server.pid(), SIGTERM) == 0);
  const timeval wait{.tv_sec = 10, .tv_usec = 0};
  REQUIRE(::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait) == 0);
  char byte = 0;
  CHECK(::recv(fd, &byte, 1, 0) == 0);  // the end of the stream, no reset
  // Ended while the mirror still flushes: its thread is still there (it was joined first).
  const auto names = testing::thread_names(server.pid());
  CHECK(std::find(names.begin(), names.end(), "gw-mirror") != names.end());
  ::close(fd);
  const testing::ExitStatus stopped = server.stop();
  INFO(server.output());
  CHECK(stopped.describe() == "exit 0");
  broker.mock.resume();
}

// The checkpoint was the data dir's: restarted with another --kafka-topic, or against another
// cluster (a new or rebuilt one), gatewayd sent only the events after it, and the new topic never
// got the first ones while the metrics said lag 0 (helper 29).
TEST_CASE("another topic, and another cluster, get the whole log; the first topic goes on") {
  Broker broker;
  Server server(broker.flags());
  Api api(server, kTeamA);
  for (int n = 0; n < 6; ++n) {
    REQUIRE(api.post("/v1/webhook", webhook_body(kTeamA, "w" + std::to_string(n))).status == 201);
  }
  wait_mirrored(server);
  REQUIRE(server.stop().success());

  server.restart_with(
      {"--kafka-brokers", broker.mock.bootstrap(), "--kafka-topic", "audit.events"});
  REQUIRE(api.post("/v1/webhook", webhook_body(kTeamA, "on-audit")).status == 201);
  const std::vector<std::string> log = all_events(api);
  REQUIRE(log.size() == 7);
  // Once the server caught up: `topic` at `bootstrap` holds every event of the log, once.
  auto holds_the_log = [&](const std::string& bootstrap, const std::string& topic) {
    wait_mirrored(server);
    auto messages =
        testing::kcat_read_at_least(bootstrap, topic, log.size(), std::chrono::seconds(10));
    CHECK(messages.size() == log.size());
    CHECK(check_topic(messages, log) == 0);
    REQUIRE(server.stop().success());
  };
  holds_the_log(broker.mock.bootstrap(), "audit.events");

  // Back to the first topic: it goes on from its own checkpoint (event 7 only, no repeats).
  server.restart_with(broker.flags());
  holds_the_log(broker.mock.bootstrap(), broker.mock.topic());

  // Another cluster (another mock, another cluster id), the same topic: it gets the whole log.
  Broker other(1);
  REQUIRE(other.mock.bootstrap() != broker.mock.bootstrap());
  server.restart_with(other.flags());
  holds_the_log(other.mock.bootstrap(), other.mock.topic());
  // The server's output reaches the test through a thread of its own: waited for, not read once.
  CHECK(server.wait_for_line("gatewayd: mirror: the Kafka cluster changed"));
}

// The address and flags of a broker with the test topic of `partitions` partitions that was
// started and then killed: its address refuses connections until a broker is started there.
struct VacatedBroker {
  std::string address;
  int port;
  std::vector<std::string> flags;
};
VacatedBroker vacated_broker(int partitions = kPartitions) {
  Broker placeholder(0, 0, false, partitions);
  const std::string address = placeholder.mock.bootstrap();
  return {address, placeholder.mock.port(), placeholder.flags()};
}

// Creates webhooks w<first> to w<last - 1> of team A, each answered 201.
void post_webhooks(Api& api, int first, int last) {
  for (int n = first; n < last; ++n) {
    REQUIRE(api.post("/v1/webhook", webhook_body(kTeamA, "w" + std::to_string(n))).status == 201);
  }
}

// A cluster replaced behind the same address while gatewayd ran: the producer reconnected and
// went on, and its cached cluster id changed only at its next metadata refresh (up to 5 minutes),
// so the new cluster got only the events written after the swap, lag 0 (helper 31).
TEST_CASE("a cluster replaced behind the same address while running gets the whole log") {
  auto first = std::make_unique<Broker>();
  Server server(first->flags());
  Api api(server, kTeamA);
  post_webhooks(api, 0, 6);
  wait_mirrored(server);
  const std::string address = first->mock.bootstrap();
  const int port = first->mock.port();
  first.reset();           // SIGKILL
  Broker second(1, port);  // another cluster id, the same address
  REQUIRE(second.mock.bootstrap() == address);
  post_webhooks(api, 6, 9);
  wait_mirrored(server);
  const std::vector<std::string> log = all_events(api);
  REQUIRE(log.size() == 9);
  auto messages = testing::kcat_read_at_least(address, second.mock.topic(), log.size(),
                                              std::chrono::seconds(10));
  CHECK(messages.size() == log.size());
  CHECK(check_topic(messages, log) == 0);
  // The server's output reaches the test through a thread of its own: waited for, not read once.
  CHECK(server.wait_for_line("gatewayd: mirror: the Kafka cluster changed"));
}

// A gatewayd started while its broker could not be reached (nothing listening yet): the
// producer's refused connections marked it broken, that mark was read only after its first
// round of sends once the broker came up, and the producer was replaced, so every event of the
// backlog was published twice without any connection lost (helper 149: 500 events, 1,000
// messages). Errors from before the producer first reached its cluster no longer count.
TEST_CASE("a gatewayd started before its broker publishes each event once when it comes up") {
  const VacatedBroker vacated = vacated_broker();
  const std::string& address = vacated.address;
  Server server(vacated.flags);
  Api api(server, kTeamA);
  post_webhooks(api, 0, 200);
  REQUIRE(server.wait_for_line("Connection refused"));
  Broker broker(0, vacated.port);
  REQUIRE(broker.mock.bootstrap() == address);
  wait_mirrored(server);
  const std::vector<std::string> log = all_events(api);
  REQUIRE(log.size() == 200);
  auto messages = testing::kcat_read_at_least(address, broker.mock.topic(), log.size(),
                                              std::chrono::seconds(10));
  CHECK(check_topic(messages, log) == 0);
  CHECK(messages.size() == log.size());
  CHECK(server.output().find("the producer stopped") == std::string::npos);
}

// How many partitions the cluster at `bootstrap` says `topic` has (kcat -L), -1 if it names none.
int topic_partitions(const std::string& bootstrap, const std::string& topic) {
  auto r = testing::run_command({"/usr/bin/kcat", "-L", "-J", "-b", bootstrap, "-t", topic}, {},
                                std::chrono::seconds(30));
  REQUIRE_MESSAGE(r.status.success(), r.err);
  rapidjson::Document doc;
  doc.Parse(r.out.c_str());
  REQUIRE_MESSAGE((doc.IsObject() && doc.HasMember("topics") && doc["topics"].IsArray()), r.out);
  for (const auto& t : doc["topics"].GetArray()) {
    if (t["topic"].GetString() == topic) return static_cast<int>(t["partitions"].GetArray().Size());
  }
  return -1;
}

// kafka_mock exited now and then with "Topic already exists" when a broker replaced one behind
// the same address: gatewayd's producer, retrying all along, asked the new cluster for the topic
// before kafka_mock had created it, and librdkafka's mock creates a topic a client asks for (with
// 4 partitions). kafka_mock now resets every connection until its cluster is set up; --hold-ms
// widens that window here so that gatewayd reaches it, as it did by chance before.
TEST_CASE("a broker that gatewayd reaches while it is being set up serves the topic as asked") {
  constexpr int kAskedPartitions = 2;  // not the 4 of a topic the mock makes on its own
  const VacatedBroker vacated = vacated_broker(kAskedPartitions);
  const std::string& address = vacated.address;
  Server server(vacated.flags);
  Api api(server, kTeamA);
  post_webhooks(api, 0, 5);
  REQUIRE(server.wait_for_line("Connection refused"));
  KafkaMock mock(KAFKA_MOCK_PATH, "gateway-config.events", kAskedPartitions, 0, vacated.port);
  mock.hold_setup(std::chrono::milliseconds(2500));  // gatewayd retries at least once a second
  mock.start();
  REQUIRE(mock.bootstrap() == address);
  wait_mirrored(server);
  CHECK(topic_partitions(address, mock.topic()) == kAskedPartitions);
  const std::vector<std::string> log = all_events(api);
  REQUIRE(log.size() == 5);
  auto messages =
      testing::kcat_read_at_least(address, mock.topic(), log.size(), std::chrono::seconds(10));
  CHECK(messages.size() == log.size());
  CHECK(check_topic(messages, log) == 0);
}

// A broker that lost its data under the same cluster id (a Kafka volume made anew while the
// cluster id stays, as docker-compose.yml pins it): the topic held none of the events the
// checkpoint said were confirmed, and the mirror went on from the checkpoint, so the history
// never reached the topic while the metrics said lag 0 (helper 89).
TEST_CASE("a topic that lost the events confirmed to it gets them again") {
  auto first = std::make_unique<Broker>(0, 0, true);
  Server server(first->flags());
  Api api(server, kTeamA);
  for (int n = 0; n < 6; ++n) {
    REQUIRE(api.post("/v1/webhook", webhook_body(kTeamA, "w" + std::to_string(n))).status == 201);
  }
  wait_mirrored(server);
  REQUIRE(server.stop().success());
  const std::string address = first->mock.bootstrap();
  const int port = first->mock.port();
  first.reset();                 // SIGKILL: its topic is gone
  Broker second(0, port, true);  // the same cluster id, the same address, an empty topic
  server.restart_with(second.flags());
  REQUIRE(api.post("/v1/webhook", webhook_body(kTeamA, "after")).status == 201);
  wait_mirrored(server);
  const std::vector<std::string> log = all_events(api);
  REQUIRE(log.size() == 7);
  auto messages = testing::kcat_read_at_least(address, second.mock.topic(), log.size(),
                                              std::chrono::seconds(10));
  CHECK(messages.size() == log.size());
  CHECK(check_topic(messages, log) == 0);
  CHECK(
      server.wait_for_line("gatewayd: mirror: topic gateway-config.events holds events up to "
                           "0, but every event up to 6 was confirmed to it"));
  // The same cluster: the whole log was sent for the lost events, not for a new cluster id.
  CHECK(server.output().find("the Kafka cluster changed") == std::string::npos);
}

TEST_CASE("after a SIGKILL of gatewayd mid-stream, publishing resumes from the checkpoint") {
  Broker broker;
  Server server(broker.flags());
  std::atomic<bool> stop{false};
  std::atomic<int> acknowledged{0};
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t) {
    writers.emplace_back([&, t] {
      Api api(server, kTeamA);
      for (int n = 0; !stop.load(); ++n) {
        Response r = api.post(
            "/v1/webhook", webhook_body(kTeamA, "w" + std::to_string(t) + "-" + std::to_string(n)));
        if (r.status != 201) return;  // the server is gone
        acknowledged.fetch_add(1);
      }
    });
  }
  // Kill it while events are being written and published.
  for (int i = 0; i < 200 && mirror_gauge(server, "gatewayd_mirror_checkpoint_seq") < 200; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK(server.kill().signal == SIGKILL);
  stop.store(true);
  for (auto& w : writers) w.join();
  REQUIRE(acknowledged.load() > 0);

  server.restart();
  Api api(server, kTeamA);
  REQUIRE(api.post("/v1/webhook", webhook_body(kTeamA, "after-restart")).status == 201);
  wait_mirrored(server);
  std::vector<std::string> log = all_events(api);
  CHECK(log.size() >= static_cast<size_t>(acknowledged.load()) + 1);
  auto messages = testing::kcat_read_at_least(broker.mock.bootstrap(), broker.mock.topic(),
                                              log.size(), std::chrono::seconds(10));
  size_t duplicates = check_topic(messages, log);
  MESSAGE(log.size(), " events, ", messages.size(), " messages, ", duplicates, " duplicates");
}

// Each new producer reads the topic's newest event first. It read one partition after another,
// and the broker held each fetch after the first for its wait (500 ms), so a topic of 16
// partitions took 7.5 s against the read's 2 s: it failed at every try, and after a restart
// nothing more was sent (helper 102).
TEST_CASE("after a restart, publishing resumes on a topic of many partitions") {
  Broker broker(0, 0, false, 32);
  Server server(broker.flags());
  Api api(server, kTeamA);
  for (int n = 0; n < 96; ++n) {
    REQUIRE(api.post("/v1/webhook", webhook_body(kTeamA, "w" + std::to_string(n))).status == 201);
  }
  wait_mirrored(server);
  REQUIRE(server.stop().success());
  server.restart();
  REQUIRE(api.post("/v1/webhook", webhook_body(kTeamA, "after-restart")).status == 201);
  wait_mirrored(server);
  CHECK(mirror_gauge(server, "gatewayd_mirror_restarts_total") == 0);
  std::vector<std::string> log = all_events(api);
  REQUIRE(log.size() == 97);
  auto messages = testing::kcat_read_at_least(broker.mock.bootstrap(), broker.mock.topic(),
                                              log.size(), std::chrono::seconds(10));
  CHECK(check_topic(messages, log) == 0);
  std::set<int> partitions;
  for (const auto& m : messages) partitions.insert(m.partition);
  CHECK(partitions.size() > 16);  // most partitions hold an event, so each is read
}

// A data dir restored from an older backup published its new events under sequence numbers the
// topic already held: a review saw two events 4 on the topic, both after hash 3, and nothing said
// so. Each new producer now reads the topic's newest event first; the mirror halts when the topic
// holds one this log does not, and another topic gets the log from its first event.
TEST_CASE("a data dir behind its topic, restored from an older backup, publishes nothing to it") {
  Broker broker;
  Server server(broker.flags());
  Api api(server, kTeamA);
  testing::TempDir parent;
  const std::string backup = parent.file("backup");
  for (int n = 0; n < 5; ++n) {
    REQUIRE(api.post("/v1/webhook", webhook_body(kTeamA, "w" + std::to_string(n))).status == 201);
    if (n == 2) {  // a backup of events 1 to 3
      testing::CommandResult made = testing::run_command(
          {GATEWAYCTL_PATH, "backup", "--data-dir", server.data_dir(), "--out", backup}, {},
          std::chrono::seconds(60));
      REQUIRE_MESSAGE(made.status.success(), made.out, made.err);
    }
  }
  wait_mirrored(server);
  const std::vector<std::string> log = all_events(api);
  REQUIRE(log.size() == 5);
  REQUIRE(server.stop().success());

  // The backup, restored and mirrored to the same topic, against the same cluster.
  std::vector<std::string> flags = broker.flags();
  flags.insert(flags.end(), {"--tokens-file", server.tokens_file()});
  testing::Gatewayd restored;
  restored.start(GATEWAYD_PATH, backup, flags, {"GATEWAY_DNS_SERVERS=127.0.0.1:1"});
  const std::string topic = broker.mock.topic();
  CHECK(restored.wait_for_line("gatewayd: mirror: topic " + topic +
                                   " holds event 5, beyond this log's end (3): this data dir is "
                                   "behind what was published to it",
                               std::chrono::seconds(20)));
  // Its API goes on: events 4 and 5 of its own log.
  testing::HttpClient http;
  const testing::Headers as_a = {{"Authorization", "Bearer " + server.token(kTeamA)},
                                 {"X-Tenant-ID", std::string(kTeamA)},
                                 {"Content-Type", "application/json"}};
  for (const char* workload : {"restored-1", "restored-2"}) {
    CHECK(http.request("POST", restored.base_url() + "/v1/webhook", as_a,
                       webhook_body(kTeamA, workload))
              .status == 201);
  }
  auto gauge = [&](std::string_view series) {
    return testing::sample(http.request("GET", restored.base_url() + "/metrics").body, series)
        .value_or(-1);
  };
  CHECK(gauge("gatewayd_mirror_halted") == 1);
  CHECK(gauge("gatewayd_mirror_delivered_total") == 0);
  // Started again, its log as long as the topic's: event 5 is another one than the topic's.
  REQUIRE(restored.stop().success());
  restored.start(GATEWAYD_PATH, backup, flags, {"GATEWAY_DNS_SERVERS=127.0.0.1:1"});
  CHECK(restored.wait_for_line("gatewayd: mirror: topic " + topic +
                                   " holds another event 5 "
                                   "than this log (hash ",
                               std::chrono::seconds(20)));
  CHECK(gauge("gatewayd_mirror_halted") == 1);
  // The topic holds the first server's five events, each once: nothing of the restored log.
  std::vector<testing::KafkaMessage> messages =
      testing::kcat_read_all(broker.mock.bootstrap(), topic);
  CHECK(messages.size() == log.size());
  CHECK(check_topic(messages, log) == 0);

  // Mirrored to another topic, the restored log is published from its first event.
  REQUIRE(restored.stop().success());
  restored.start(GATEWAYD_PATH, backup,
                 {"--kafka-brokers", broker.mock.bootstrap(), "--kafka-topic", "restored.events",
                  "--tokens-file", server.tokens_file()},
                 {"GATEWAY_DNS_SERVERS=127.0.0.1:1"});
  for (int i = 0; i < 300 && gauge("gatewayd_mirror_lag_events") != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(gauge("gatewayd_mirror_halted") == 0);
  CHECK(gauge("gatewayd_mirror_checkpoint_seq") == 5);
  CHECK(testing::kcat_read_at_least(broker.mock.bootstrap(), "restored.events", 5,
                                    std::chrono::seconds(10))
            .size() == 5);
  CHECK(restored.stop().success());
}

}  // namespace
}  // namespace gw::itest::mirror_test
