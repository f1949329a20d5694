// kafka_mock: librdkafka's mock cluster (rdkafka_mock.h) in a process of its own, so tests talk to
// a real Kafka-protocol broker over TCP and can freeze it (SIGSTOP) or kill it like a real one.
//
//   kafka_mock [--brokers N] [--topic NAME --partitions P] [--clusters-before K] [--port PORT]
//              [--leader-down 1] [--hold-ms MS]
//
// Creates the cluster (N brokers on 127.0.0.1, random ports), creates the topic if given, prints
// one line `bootstrap HOST:PORT[,HOST:PORT...]` and serves until SIGTERM or SIGINT.
// With K, it first makes K other clusters (kept, unused), so that its cluster's id differs from
// that of a run with another K: librdkafka 2.0.2 derives a mock cluster's id from the cluster's
// address, which is the same in every run of a sanitizer build (its heap is not randomized), and
// tests of another cluster behind the mirror need two ids. With PORT, the cluster's first broker
// listens on that port of 127.0.0.1 (librdkafka's mock picks one itself; `bind` below gives it
// PORT instead): a test replaces one cluster with another behind the same address.
// With --leader-down 1 (N at least 2, a topic), the last broker leads every partition of the topic
// and is down from the start: the others answer metadata, naming it, and it refuses connections.
// SIGUSR1 takes a broker down while it runs (N at least 2, a topic): B, the highest-numbered
// broker still up, leads nothing from then on (every partition p gets broker 1 + p % (B - 1) as
// leader, as a real cluster elects new leaders from the replicas of a node that failed; the mock
// keeps a partition's messages apart from its brokers, so none is lost), then closes its
// connections and refuses new ones. It prints `down: broker B` once done.
// Until the cluster is set up (its topic made, its leaders set), each connection it accepts is
// reset at once, and a client retries as after a refusal: librdkafka's mock makes any topic a
// client's metadata request names (with 4 partitions), and a producer retrying against a cluster
// replaced behind its address (--port) made the topic first now and then, so that kafka_mock's
// own making of it failed ("Topic already exists"). With --hold-ms MS, it waits MS ms between
// making the cluster and setting it up, so that a test can have clients reach it meanwhile.
// The mock keeps messages in memory (about 5 MiB per partition at most, see PITFALLS).
#include <dlfcn.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: kafka_mock [--brokers N] [--topic NAME --partitions P] "
               "[--clusters-before K] [--port PORT] [--leader-down 1] [--hold-ms MS]\n");
  return 2;
}

// --port: the listening socket of the cluster's first broker is the bind_at-th TCP socket bound
// to a port the kernel picks (each cluster made before has one broker, so one such bind).
int fixed_port = 0;
int bind_at = 0;
std::atomic<int> binds{0};

// False until the cluster is set up; `accept` below resets each connection until then.
std::atomic<bool> set_up{false};

// librdkafka's log, as its own default prints it, less the failed accepts that `accept` below
// makes (the mock logs each one it gets).
void log_line(const rd_kafka_t*, int level, const char* facility, const char* line) {
  if (std::strstr(line, "Failed to accept") != nullptr &&
      std::strstr(line, std::strerror(ECONNABORTED)) != nullptr) {
    return;
  }
  std::fprintf(stderr, "%%%d|%s| %s\n", level, facility, line);
}

}  // namespace

// Takes the place of libc's bind for librdkafka's calls (an executable's definition comes first).
extern "C" int bind(int fd, const sockaddr* addr, socklen_t len) {
  using Bind = int (*)(int, const sockaddr*, socklen_t);
  static const Bind real = reinterpret_cast<Bind>(dlsym(RTLD_NEXT, "bind"));
  if (fixed_port != 0 && addr->sa_family == AF_INET && len >= sizeof(sockaddr_in)) {
    sockaddr_in in;
    std::memcpy(&in, addr, sizeof in);
    int type = 0;
    socklen_t type_len = sizeof type;
    if (in.sin_port == 0 && getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &type_len) == 0 &&
        type == SOCK_STREAM && ++binds == bind_at) {
      const int one = 1;
      setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);  // the last cluster's sockets
      in.sin_port = htons(static_cast<uint16_t>(fixed_port));
      return real(fd, reinterpret_cast<const sockaddr*>(&in), sizeof in);
    }
  }
  return real(fd, addr, len);
}

// Takes the place of libc's accept for the mock's listening sockets: before the cluster is set
// up, the connection is closed with a reset (SO_LINGER 0) and the mock told it was aborted.
extern "C" int accept(int fd, sockaddr* addr, socklen_t* len) {
  using Accept = int (*)(int, sockaddr*, socklen_t*);
  static const Accept real = reinterpret_cast<Accept>(dlsym(RTLD_NEXT, "accept"));
  const int s = real(fd, addr, len);
  if (s < 0 || set_up.load()) return s;
  const linger reset{1, 0};
  setsockopt(s, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
  close(s);
  errno = ECONNABORTED;
  return -1;
}

int main(int argc, char** argv) {
  int brokers = 1;
  int partitions = 1;
  int clusters_before = 0;
  int hold_ms = 0;
  bool leader_down = false;
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
    } else if (arg == "--port") {
      fixed_port = std::atoi(value.c_str());
    } else if (arg == "--hold-ms") {
      hold_ms = std::atoi(value.c_str());
    } else if (arg == "--leader-down" && value == "1") {
      leader_down = true;
    } else {
      return usage();
    }
  }
  if (brokers < 1 || partitions < 1 || clusters_before < 0 || fixed_port < 0 ||
      fixed_port > 65535 || hold_ms < 0 || (leader_down && (brokers < 2 || topic.empty()))) {
    return usage();
  }
  bind_at = clusters_before + 1;

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);  // before librdkafka starts its threads

  char why[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  if (rd_kafka_conf_set(conf, "log_level", "3", why, sizeof why) != RD_KAFKA_CONF_OK) {
    std::fprintf(stderr, "kafka_mock: %s\n", why);
    return 1;
  }
  rd_kafka_conf_set_log_cb(conf, log_line);
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
  if (hold_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms));
  if (!topic.empty()) {
    auto err = rd_kafka_mock_topic_create(cluster, topic.c_str(), partitions, 1);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      std::fprintf(stderr, "kafka_mock: cannot create topic %s: %s\n", topic.c_str(),
                   rd_kafka_err2str(err));
      return 1;
    }
  }
  // Partition p is led by broker 1 + p % N (the mock's own choice is random), so that each broker
  // leads one of the first N partitions, and one taken down (SIGUSR1) was in use.
  for (int p = 0; !topic.empty() && p < partitions; ++p) {
    rd_kafka_mock_partition_set_leader(cluster, topic.c_str(), p,
                                       leader_down ? brokers : 1 + p % brokers);
  }
  if (leader_down) rd_kafka_mock_broker_set_down(cluster, brokers);
  set_up = true;
  std::printf("bootstrap %s\n", rd_kafka_mock_cluster_bootstraps(cluster));
  std::fflush(stdout);

  int up = leader_down ? brokers - 1 : brokers;  // brokers 1..up are up
  for (;;) {
    int sig = 0;
    sigwait(&signals, &sig);
    if (sig != SIGUSR1) break;
    if (up < 2 || topic.empty()) {
      std::fprintf(stderr, "kafka_mock: SIGUSR1 needs a topic and two brokers up; ignored\n");
      continue;
    }
    for (int p = 0; p < partitions; ++p) {
      rd_kafka_mock_partition_set_leader(cluster, topic.c_str(), p, 1 + p % (up - 1));
    }
    rd_kafka_mock_broker_set_down(cluster, up);
    std::printf("down: broker %d\n", up);
    std::fflush(stdout);
    --up;
  }
  rd_kafka_mock_cluster_destroy(cluster);
  for (rd_kafka_mock_cluster_t* c : before) {
    if (c != nullptr) rd_kafka_mock_cluster_destroy(c);
  }
  rd_kafka_destroy(rk);
  return 0;
}
