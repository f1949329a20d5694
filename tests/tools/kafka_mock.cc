// kafka_mock: librdkafka's mock cluster (rdkafka_mock.h) in a process of its own, so tests talk to
// a real Kafka-protocol broker over TCP and can freeze it (SIGSTOP) or kill it like a real one.
//
//   kafka_mock [--brokers N] [--topic NAME --partitions P] [--clusters-before K]
//
// Creates the cluster (N brokers on 127.0.0.1, random ports), creates the topic if given, prints
// one line `bootstrap HOST:PORT[,HOST:PORT...]` and serves until SIGTERM or SIGINT.
// With K, it first makes K other clusters (kept, unused), so that its cluster's id differs from
// that of a run with another K: librdkafka 2.0.2 derives a mock cluster's id from the cluster's
// address, which is the same in every run of a sanitizer build (its heap is not randomized), and
// tests of another cluster behind the mirror need two ids.
// The mock keeps messages in memory (about 5 MiB per partition at most, see PITFALLS).
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: kafka_mock [--brokers N] [--topic NAME --partitions P] "
               "[--clusters-before K]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  int brokers = 1;
  int partitions = 1;
  int clusters_before = 0;
  std::string topic;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (i + 1 >= argc) return usage();
    std::string value = argv[++i];
    if (arg == "--brokers") {
      brokers = std::atoi(value.c_str());
    } else if (arg == "--topic") {
      topic = value;
    } else if (arg == "--partitions") {
      partitions = std::atoi(value.c_str());
    } else if (arg == "--clusters-before") {
      clusters_before = std::atoi(value.c_str());
    } else {
      return usage();
    }
  }
  if (brokers < 1 || partitions < 1 || clusters_before < 0) return usage();

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);  // before librdkafka starts its threads

  char why[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  if (rd_kafka_conf_set(conf, "log_level", "3", why, sizeof why) != RD_KAFKA_CONF_OK) {
    std::fprintf(stderr, "kafka_mock: %s\n", why);
    return 1;
  }
  // The mock cluster needs a client handle to live in; this producer never produces.
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, why, sizeof why);
  if (rk == nullptr) {
    std::fprintf(stderr, "kafka_mock: %s\n", why);
    return 1;
  }
  std::vector<rd_kafka_mock_cluster_t*> before;
  for (int i = 0; i < clusters_before; ++i) before.push_back(rd_kafka_mock_cluster_new(rk, 1));
  rd_kafka_mock_cluster_t* cluster = rd_kafka_mock_cluster_new(rk, brokers);
  if (cluster == nullptr) {
    std::fprintf(stderr, "kafka_mock: cannot create the mock cluster\n");
    return 1;
  }
  if (!topic.empty()) {
    auto err = rd_kafka_mock_topic_create(cluster, topic.c_str(), partitions, 1);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      std::fprintf(stderr, "kafka_mock: cannot create topic %s: %s\n", topic.c_str(),
                   rd_kafka_err2str(err));
      return 1;
    }
  }
  std::printf("bootstrap %s\n", rd_kafka_mock_cluster_bootstraps(cluster));
  std::fflush(stdout);

  int sig = 0;
  sigwait(&signals, &sig);
  rd_kafka_mock_cluster_destroy(cluster);
  for (rd_kafka_mock_cluster_t* c : before) {
    if (c != nullptr) rd_kafka_mock_cluster_destroy(c);
  }
  rd_kafka_destroy(rk);
  return 0;
}
