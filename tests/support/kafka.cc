#include "support/kafka.h"

#include <rapidjson/document.h>

#include <csignal>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "core/flags.h"

namespace gw::testing {

KafkaMock::KafkaMock(std::string binary, std::string topic, int partitions, int clusters_before,
                     int port, bool same_id, int brokers)
    : binary_(std::move(binary)),
      topic_(std::move(topic)),
      partitions_(partitions),
      clusters_before_(clusters_before),
      port_(port),
      same_id_(same_id),
      brokers_(brokers) {}

KafkaMock::~KafkaMock() {
  if (proc_ && proc_->running()) proc_->kill();
}

void KafkaMock::start() {
  proc_ = std::make_unique<ChildProcess>();
  taken_down_ = 0;
  std::vector<std::string> argv = {binary_,
                                   "--brokers",
                                   std::to_string(brokers_),
                                   "--topic",
                                   topic_,
                                   "--partitions",
                                   std::to_string(partitions_),
                                   "--clusters-before",
                                   std::to_string(clusters_before_),
                                   "--port",
                                   std::to_string(port_),
                                   "--hold-ms",
                                   std::to_string(hold_.count())};
  if (same_id_) argv.insert(argv.begin(), {"/usr/bin/setarch", "-R"});
  proc_->spawn(argv);
  auto line = proc_->wait_for_line("bootstrap ", std::chrono::seconds(10) + hold_);
  if (!line) throw std::runtime_error("kafka_mock did not start: " + proc_->output());
  bootstrap_ = trim(line->substr(line->find(' ') + 1));
  std::string host;
  uint16_t port = 0;
  if (!gw::split_host_port(bootstrap_.substr(0, bootstrap_.find(',')), &host, &port)) {
    throw std::runtime_error("kafka_mock printed a bad bootstrap address: " + bootstrap_);
  }
  listening_port_ = port;
}

void KafkaMock::pause() { proc_->freeze(); }

void KafkaMock::resume() { proc_->send_signal(SIGCONT); }

int KafkaMock::take_down_broker() {
  const int broker = brokers_ - taken_down_;
  proc_->send_signal(SIGUSR1);
  if (!proc_->wait_for_line("down: broker " + std::to_string(broker), std::chrono::seconds(10))) {
    throw std::runtime_error("kafka_mock did not take broker " + std::to_string(broker) +
                             " down: " + proc_->output());
  }
  ++taken_down_;
  return broker;
}

std::optional<std::string> KafkaMessage::header(std::string_view name) const {
  for (const auto& [n, v] : headers) {
    if (n == name) return v;
  }
  return std::nullopt;
}

std::vector<KafkaMessage> kcat_read_all(const std::string& bootstrap, const std::string& topic) {
  auto r = run_command(
      {"/usr/bin/kcat", "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-J", "-q"},
      {}, std::chrono::seconds(30));
  if (!r.status.success()) {
    throw std::runtime_error("kcat failed (" + r.status.describe() + "): " + r.err);
  }
  std::vector<KafkaMessage> out;
  std::istringstream lines(r.out);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    rapidjson::Document doc;
    doc.Parse(line.data(), line.size());
    if (doc.HasParseError() || !doc.IsObject()) throw std::runtime_error("kcat printed " + line);
    KafkaMessage m;
    m.partition = doc["partition"].GetInt();
    m.offset = doc["offset"].GetInt64();
    if (doc["key"].IsString()) m.key = doc["key"].GetString();
    if (doc["payload"].IsString()) m.payload = doc["payload"].GetString();
    if (doc.HasMember("headers") && doc["headers"].IsArray()) {
      const auto& h = doc["headers"].GetArray();
      for (rapidjson::SizeType i = 0; i + 1 < h.Size(); i += 2) {
        m.headers.emplace_back(h[i].GetString(), h[i + 1].IsString() ? h[i + 1].GetString() : "");
      }
    }
    out.push_back(std::move(m));
  }
  return out;
}

std::vector<KafkaMessage> kcat_read_at_least(const std::string& bootstrap, const std::string& topic,
                                             size_t count, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto messages = kcat_read_all(bootstrap, topic);
    if (messages.size() >= count || std::chrono::steady_clock::now() >= deadline) return messages;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace gw::testing
