// A real Kafka-protocol broker for tests (tests/tools/kafka_mock: librdkafka's mock cluster in a
// child process, on loopback TCP) and a real consumer (Debian's kcat) to read a topic back.
// A KafkaMock is used from the test's main thread (children die with the thread that spawned
// them, see process.h).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "support/process.h"

namespace gw::testing {

class KafkaMock {
 public:
  // `binary` is the kafka_mock program; `topic` is created with `partitions` partitions. Mocks of
  // different `clusters_before` have different cluster ids (kafka_mock --clusters-before). With
  // `port`, the broker listens there (kafka_mock --port), else on a port the kernel picks.
  // `same_id`: the broker runs without address space randomization (`setarch -R`), so that two
  // mocks of the same `clusters_before` have the same cluster id (librdkafka's mock names its
  // cluster after the address of its state), as a broker that lost its data does. `brokers`: the
  // cluster's size (kafka_mock --brokers); the bootstrap address names them all.
  KafkaMock(std::string binary, std::string topic, int partitions, int clusters_before = 0,
            int port = 0, bool same_id = false, int brokers = 1);
  ~KafkaMock();  // SIGKILLs the broker if it still runs (paused or not)
  KafkaMock(const KafkaMock&) = delete;
  KafkaMock& operator=(const KafkaMock&) = delete;

  // The next start() has kafka_mock wait `hold` between making its cluster and creating the
  // topic (kafka_mock --hold-ms): clients that reach it meanwhile find a cluster being set up.
  void hold_setup(std::chrono::milliseconds hold) { hold_ = hold; }
  // Starts the broker; returns once it printed its bootstrap address. Throws std::runtime_error
  // with its output otherwise.
  void start();
  // SIGSTOP (returns once stopped) / SIGCONT: a frozen broker accepts nothing and answers nothing.
  void pause();
  void resume();
  // Takes the highest-numbered broker still up down, its partitions led by the others from then
  // on (kafka_mock's SIGUSR1); returns its number once it is down. Throws std::runtime_error if
  // the mock does not say it is within 10 s.
  int take_down_broker();

  const std::string& bootstrap() const { return bootstrap_; }
  // The port of the first broker of bootstrap() (the one `port` asked for): where a broker
  // started later with that `port` listens in its place.
  int port() const { return listening_port_; }
  const std::string& topic() const { return topic_; }

 private:
  std::string binary_;
  std::string topic_;
  int partitions_;
  int clusters_before_;
  int port_;
  bool same_id_;
  int brokers_;
  int taken_down_ = 0;
  std::chrono::milliseconds hold_{0};
  std::string bootstrap_;
  int listening_port_ = 0;
  std::unique_ptr<ChildProcess> proc_;
};

struct KafkaMessage {
  int partition = -1;
  long long offset = -1;
  std::string key;
  std::string payload;
  std::vector<std::pair<std::string, std::string>> headers;  // in the order they were sent
  // The value of the first header called `name`.
  std::optional<std::string> header(std::string_view name) const;
};

// Every message of `topic` from the beginning, read with `kcat -C -e -J` (partition by partition,
// each in offset order). Throws std::runtime_error with kcat's stderr if kcat fails.
std::vector<KafkaMessage> kcat_read_all(const std::string& bootstrap, const std::string& topic);

// Reads the topic until it holds at least `count` messages or `timeout` passes; returns the last
// read.
std::vector<KafkaMessage> kcat_read_at_least(const std::string& bootstrap, const std::string& topic,
                                             size_t count, std::chrono::milliseconds timeout);

}  // namespace gw::testing
