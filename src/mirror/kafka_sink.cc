#include "mirror/kafka_sink.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace gw::mirror {

namespace {

void log_line(const rd_kafka_t* rk, int /*level*/, const char* facility, const char* text) {
  // CONFWARN only says that enable.gapless.guarantee is experimental: we chose it knowingly.
  if (std::strcmp(facility, "CONFWARN") == 0) return;
  // Purging on close makes the gapless guarantee raise a fatal error: expected, not news.
  const auto* sink = static_cast<const KafkaSink*>(rd_kafka_opaque(rk));
  if (sink != nullptr && sink->closing()) return;
  std::fprintf(stderr, "gatewayd: kafka: %s: %s\n", facility, text);
}

using Settings = std::initializer_list<std::pair<const char*, const char*>>;

// Sets each of `settings` on `conf`; on the first one refused, destroys `conf` and says why.
std::optional<std::string> configure(rd_kafka_conf_t* conf, Settings settings) {
  char why[512];
  for (const auto& [name, value] : settings) {
    if (rd_kafka_conf_set(conf, name, value, why, sizeof why) != RD_KAFKA_CONF_OK) {
      rd_kafka_conf_destroy(conf);
      return std::string(name) + ": " + why;
    }
  }
  return std::nullopt;
}

}  // namespace

Result<std::unique_ptr<KafkaSink>> KafkaSink::create(const KafkaConfig& config) {
  std::unique_ptr<KafkaSink> sink(new KafkaSink());
  sink->config_ = config;
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  char why[512];
  const std::string max_bytes = std::to_string(config.max_message_bytes);
  if (auto refused = configure(conf, {
                                         {"bootstrap.servers", config.brokers.c_str()},
                                         {"client.id", "gatewayd"},
                                         {"enable.idempotence", "true"},
                                         {"enable.gapless.guarantee", "true"},
                                         {"message.timeout.ms", "0"},
                                         {"linger.ms", "5"},
                                         {"compression.type", "lz4"},
                                         {"partitioner", "murmur2_random"},
                                         {"message.max.bytes", max_bytes.c_str()},
                                         {"queue.buffering.max.messages", "100000"},
                                         {"reconnect.backoff.max.ms", "1000"},
                                         {"log.connection.close", "false"},
                                     })) {
    return make_error(Code::kValidationFailed, "kafka setting " + *refused);
  }
  rd_kafka_conf_set_opaque(conf, sink.get());
  rd_kafka_conf_set_dr_msg_cb(conf, &KafkaSink::on_report);
  rd_kafka_conf_set_error_cb(conf, &KafkaSink::on_error);
  rd_kafka_conf_set_log_cb(conf, &log_line);
  sink->rk_ = rd_kafka_new(RD_KAFKA_PRODUCER, conf, why, sizeof why);
  if (sink->rk_ == nullptr) {  // on failure the conf is still ours
    rd_kafka_conf_destroy(conf);
    return make_error(Code::kUnavailable, std::string("kafka producer: ") + why);
  }
  sink->topic_ = rd_kafka_topic_new(sink->rk_, config.topic.c_str(), nullptr);
  if (sink->topic_ == nullptr) {
    return make_error(Code::kUnavailable, "kafka topic " + config.topic + ": " +
                                              rd_kafka_err2str(rd_kafka_last_error()));
  }
  return sink;
}

KafkaSink::~KafkaSink() {
  if (rk_ == nullptr) return;
  reports_ = nullptr;
  closing_.store(true);
  rd_kafka_purge(rk_, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
  rd_kafka_poll(rk_, 0);
  if (topic_ != nullptr) rd_kafka_topic_destroy(topic_);
  rd_kafka_destroy(rk_);
}

Sink::Sent KafkaSink::send(const OutboundMessage& m) {
  rd_kafka_headers_t* headers = rd_kafka_headers_new(m.headers.size());
  for (const auto& [name, value] : m.headers) {
    rd_kafka_header_add(headers, name.data(), static_cast<ssize_t>(name.size()), value.data(),
                        static_cast<ssize_t>(value.size()));
  }
  // The opaque is the sequence number itself, not a pointer.
  auto err = rd_kafka_producev(
      rk_, RD_KAFKA_V_RKT(topic_), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
      RD_KAFKA_V_KEY(m.key.data(), m.key.size()),
      RD_KAFKA_V_VALUE(const_cast<char*>(m.value.data()), m.value.size()),
      RD_KAFKA_V_HEADERS(headers), RD_KAFKA_V_TIMESTAMP(m.time * 1000),
      RD_KAFKA_V_OPAQUE(reinterpret_cast<void*>(static_cast<uintptr_t>(m.seq))), RD_KAFKA_V_END);
  if (err == RD_KAFKA_RESP_ERR_NO_ERROR) return Sent::kQueued;  // librdkafka owns the headers
  rd_kafka_headers_destroy(headers);
  if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL) return Sent::kQueueFull;
  std::fprintf(stderr, "gatewayd: kafka: cannot queue event %llu: %s\n",
               static_cast<unsigned long long>(m.seq), rd_kafka_err2str(err));
  return Sent::kRefused;
}

std::optional<std::string> KafkaSink::cluster_id() {
  char* id = rd_kafka_clusterid(rk_, 0);
  if (id == nullptr) return std::nullopt;
  std::string out(id);
  rd_kafka_mem_free(rk_, id);
  return out;
}

namespace {

void quiet_log(const rd_kafka_t* /*rk*/, int /*level*/, const char* /*facility*/,
               const char* /*text*/) {}

struct Consumer {
  rd_kafka_t* rk = nullptr;
  rd_kafka_topic_t* topic = nullptr;
  rd_kafka_queue_t* queue = nullptr;  // where the started partitions' messages come
  std::vector<int32_t> started;       // partitions consumed into `queue`
  ~Consumer() {
    for (int32_t partition : started) rd_kafka_consume_stop(topic, partition);
    if (queue != nullptr) rd_kafka_queue_destroy(queue);
    if (topic != nullptr) rd_kafka_topic_destroy(topic);
    if (rk != nullptr) rd_kafka_destroy(rk);
  }
};

// The sequence number in a message's `ce_sequence` header (to_cloud_event's), 0 without one.
uint64_t sequence_of(rd_kafka_message_t* m) {
  rd_kafka_headers_t* headers = nullptr;
  const void* value = nullptr;
  size_t size = 0;
  if (rd_kafka_message_headers(m, &headers) != RD_KAFKA_RESP_ERR_NO_ERROR ||
      rd_kafka_header_get_last(headers, "ce_sequence", &value, &size) !=
          RD_KAFKA_RESP_ERR_NO_ERROR ||
      value == nullptr) {
    return 0;
  }
  const char* text = static_cast<const char*>(value);
  uint64_t seq = 0;
  auto [end, error] = std::from_chars(text, text + size, seq);
  return error == std::errc() && end == text + size ? seq : 0;
}

}  // namespace

Result<Sink::Tail> KafkaSink::tail(std::chrono::milliseconds timeout) {
  // Every call below waits for what is left of `timeout`, at least 1 ms.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto left = [deadline] {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    return static_cast<int>(std::max<int64_t>(1, ms.count()));
  };
  auto unavailable = [this](const std::string& what) {
    return make_error(Code::kUnavailable,
                      "cannot read the newest event of topic " + config_.topic + ": " + what);
  };
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  if (auto refused = configure(conf, {
                                         {"bootstrap.servers", config_.brokers.c_str()},
                                         {"client.id", "gatewayd-tail"},
                                         {"enable.partition.eof", "true"},
                                         {"log.connection.close", "false"},
                                         // A fetch finds its message at once; a broker holds one
                                         // that finds none for this long (500 ms by default).
                                         {"fetch.wait.max.ms", "10"},
                                     })) {
    return unavailable(*refused);
  }
  char why[512];
  rd_kafka_conf_set_log_cb(conf, &quiet_log);
  Consumer c;
  c.rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, why, sizeof why);
  if (c.rk == nullptr) {
    rd_kafka_conf_destroy(conf);
    return unavailable(why);
  }
  c.topic = rd_kafka_topic_new(c.rk, config_.topic.c_str(), nullptr);
  if (c.topic == nullptr) return unavailable(rd_kafka_err2str(rd_kafka_last_error()));
  const rd_kafka_metadata_t* metadata = nullptr;
  rd_kafka_resp_err_t err = rd_kafka_metadata(c.rk, 0, c.topic, &metadata, left());
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) return unavailable(rd_kafka_err2str(err));
  std::unique_ptr<const rd_kafka_metadata_t, void (*)(const rd_kafka_metadata_t*)> held(
      metadata, &rd_kafka_metadata_destroy);
  Tail newest;
  if (metadata->topic_cnt != 1) return unavailable("no metadata for the topic");
  const rd_kafka_metadata_topic_t& topic = metadata->topics[0];
  if (topic.err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) return newest;  // none yet
  if (topic.err != RD_KAFKA_RESP_ERR_NO_ERROR) return unavailable(rd_kafka_err2str(topic.err));
  // Each partition's first and next offset, asked as offsets for the times -2 and -1 (earliest
  // and latest). rd_kafka_query_watermark_offsets, which asks the same, does not end at its
  // timeout in librdkafka 2.0.2 once a partition's leader does not answer (fixed in 2.3.0,
  // librdkafka#4460): the mirror's thread, and gatewayd's shutdown with it, waited until the
  // broker came back.
  auto offsets = [&](int64_t which) -> Result<std::vector<int64_t>> {
    std::unique_ptr<rd_kafka_topic_partition_list_t, void (*)(rd_kafka_topic_partition_list_t*)>
        list(rd_kafka_topic_partition_list_new(topic.partition_cnt),
             &rd_kafka_topic_partition_list_destroy);
    for (int i = 0; i < topic.partition_cnt; ++i) {
      rd_kafka_topic_partition_list_add(list.get(), config_.topic.c_str(), topic.partitions[i].id)
          ->offset = which;
    }
    const rd_kafka_resp_err_t asked = rd_kafka_offsets_for_times(c.rk, list.get(), left());
    if (asked != RD_KAFKA_RESP_ERR_NO_ERROR) return unavailable(rd_kafka_err2str(asked));
    std::vector<int64_t> out;
    for (int i = 0; i < topic.partition_cnt; ++i) {
      const rd_kafka_topic_partition_t& p = list->elems[i];
      if (p.err != RD_KAFKA_RESP_ERR_NO_ERROR) return unavailable(rd_kafka_err2str(p.err));
      out.push_back(p.offset);
    }
    return out;
  };
  auto lows = offsets(RD_KAFKA_OFFSET_BEGINNING);
  if (!lows.ok()) return lows.error();
  auto highs = offsets(RD_KAFKA_OFFSET_END);
  if (!highs.ok()) return highs.error();
  // Every partition's last message at once, into one queue: read one partition after another,
  // each took a fetch round of its own, and a fetch the broker held for its wait (500 ms by
  // default) came between them, so 16 partitions took about 7.5 s, past `timeout`, at every try,
  // and nothing more was sent (helper 102).
  c.queue = rd_kafka_queue_new(c.rk);
  std::set<int32_t> waiting;
  for (int i = 0; i < topic.partition_cnt; ++i) {
    const int32_t partition = topic.partitions[i].id;
    const int64_t low = lows.value()[i];
    const int64_t high = highs.value()[i];
    if (high <= low) continue;  // an empty partition
    if (rd_kafka_consume_start_queue(c.topic, partition, high - 1, c.queue) != 0)
      return unavailable(rd_kafka_err2str(rd_kafka_last_error()));
    c.started.push_back(partition);
    waiting.insert(partition);
  }
  while (!waiting.empty()) {
    // Messages of partitions already read (their ends, or events sent since) must not hold the
    // read past its time.
    rd_kafka_message_t* m = std::chrono::steady_clock::now() < deadline
                                ? rd_kafka_consume_queue(c.queue, left())
                                : nullptr;
    if (m == nullptr)
      return unavailable("no answer from partition " + std::to_string(*waiting.begin()));
    std::unique_ptr<rd_kafka_message_t, void (*)(rd_kafka_message_t*)> held_message(
        m, &rd_kafka_message_destroy);
    // What comes after a partition's last message (its end, or a message sent since) is not read.
    if (waiting.erase(m->partition) == 0) continue;
    if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) return unavailable(rd_kafka_message_errstr(m));
    if (const uint64_t seq = sequence_of(m); seq > newest.seq) {
      newest.seq = seq;
      newest.event.assign(static_cast<const char*>(m->payload), m->payload ? m->len : 0);
    }
  }
  return newest;
}

void KafkaSink::poll(std::chrono::milliseconds timeout, const DeliveryFn& on_delivery) {
  reports_ = &on_delivery;
  rd_kafka_poll(rk_, static_cast<int>(timeout.count()));
  reports_ = nullptr;
}

void KafkaSink::on_report(rd_kafka_t* /*rk*/, const rd_kafka_message_t* message, void* opaque) {
  auto* self = static_cast<KafkaSink*>(opaque);
  if (self->reports_ == nullptr) return;
  uint64_t seq = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(message->_private));
  bool ok = message->err == RD_KAFKA_RESP_ERR_NO_ERROR;
  (*self->reports_)(seq, ok, ok ? std::string_view() : rd_kafka_err2str(message->err));
}

void KafkaSink::on_error(rd_kafka_t* rk, int err, const char* /*reason*/, void* opaque) {
  auto* self = static_cast<KafkaSink*>(opaque);
  if (err == RD_KAFKA_RESP_ERR__FATAL && !self->closing()) {
    char why[512];
    rd_kafka_fatal_error(rk, why, sizeof why);
    self->broken_ = true;
    std::fprintf(stderr, "gatewayd: kafka: fatal producer error: %s\n", why);
    return;
  }
  // A connection to a broker lost (or none to be had): librdkafka would reconnect to the same
  // address and go on producing, and the cluster there may be another one now (rebuilt, replaced),
  // which has none of the events sent before. Its cached cluster id changes only at its next
  // metadata refresh (up to 5 minutes later), so a review saw events written after a swap reach
  // the new cluster before the earlier ones were sent again. So the producer is replaced: a new
  // one learns the cluster's id before anything is sent to it (Publisher::same_cluster). Other
  // transient errors are retried by librdkafka and logged through the log callback; the
  // publisher reports failed deliveries itself.
  // Connections refused or lost while the producer has no metadata from its cluster yet (a start
  // during an outage, a producer made while the broker was frozen) lose nothing: it sends nothing
  // until it has the cluster's id. Counted, they had it replaced right after its first sends, and
  // its whole backlog published twice (helper 149).
  if ((err == RD_KAFKA_RESP_ERR__TRANSPORT || err == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN) &&
      !self->closing() && self->cluster_id()) {
    self->broken_ = true;
  }
}

}  // namespace gw::mirror
