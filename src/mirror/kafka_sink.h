// The Kafka edge of the mirror: one librdkafka idempotent producer.
//
// Settings that make the mirror's guarantees hold (see README "Kafka mirror"):
//  - enable.idempotence: the broker stores each message once and in produce order per partition,
//    across retries and reconnects;
//  - enable.gapless.guarantee: a failure that could leave a gap in a partition stops the producer
//    (broken()) instead of letting later messages through;
//  - message.timeout.ms=0: a message waits for the broker as long as it takes (a broker outage
//    delays delivery, it never fails it);
//  - partitioner=murmur2_random: the Java client's key hashing, so every Kafka tool agrees on a
//    key's partition.
// Delivery reports are served only inside poll(), on the calling thread. Not thread-safe: one
// thread (the publisher's) uses a KafkaSink.
#pragma once

#include <librdkafka/rdkafka.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "core/error.h"
#include "mirror/sink.h"

namespace gw::mirror {

struct KafkaConfig {
  std::string brokers;  // bootstrap servers, "host:port[,host:port...]"
  std::string topic;
  size_t max_message_bytes = 1000000;  // librdkafka's message.max.bytes
};

class KafkaSink : public Sink {
 public:
  // kValidationFailed with librdkafka's message when a setting is refused; kUnavailable when the
  // producer cannot be created.
  static Result<std::unique_ptr<KafkaSink>> create(const KafkaConfig& config);
  // Purges everything queued or in flight (no reports) and destroys the producer.
  ~KafkaSink() override;
  KafkaSink(const KafkaSink&) = delete;
  KafkaSink& operator=(const KafkaSink&) = delete;

  Sent send(const OutboundMessage& message) override;
  void poll(std::chrono::milliseconds timeout, const DeliveryFn& on_delivery) override;
  bool broken() const override { return broken_; }
  // The cluster id from the producer's metadata (rd_kafka_clusterid without waiting).
  std::optional<std::string> cluster_id() override;
  // The last message of each of the topic's partitions, read by a consumer of its own; the one
  // with the highest `ce_sequence` among those that carry one.
  Result<Tail> tail(std::chrono::milliseconds timeout) override;
  // True from the start of the destructor (librdkafka's threads read it to silence its close).
  bool closing() const { return closing_.load(); }

 private:
  KafkaSink() = default;
  static void on_report(rd_kafka_t* rk, const rd_kafka_message_t* message, void* opaque);
  static void on_error(rd_kafka_t* rk, int err, const char* reason, void* opaque);

  KafkaConfig config_;
  rd_kafka_t* rk_ = nullptr;
  rd_kafka_topic_t* topic_ = nullptr;
  const DeliveryFn* reports_ = nullptr;  // set only while poll() runs
  bool broken_ = false;
  std::atomic<bool> closing_{false};
};

}  // namespace gw::mirror
