#include "mirror/publisher.h"

#include <rapidjson/document.h>

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "core/metric_text.h"
#include "core/thread_name.h"

namespace gw::mirror {

namespace {

// The checkpoint of a data dir from before checkpoints were kept per topic.
constexpr char kOneCheckpointKey[] = "mirror/checkpoint";
constexpr auto kSaveEvery = std::chrono::milliseconds(100);
// How long check_tail() waits for the topic's newest event (a stop waits for it too).
constexpr auto kTailTimeout = std::chrono::milliseconds(2000);

std::string enabled_metric(uint64_t enabled) {
  std::ostringstream out;
  write_metric(out, "gatewayd_mirror_enabled", "gauge", "1 when events are mirrored to Kafka.",
               enabled);
  return out.str();
}

}  // namespace

Publisher::Publisher(Store& store, Writer& writer, const Clock& clock, SinkFactory make_sink,
                     PublisherConfig config)
    : store_(store),
      writer_(writer),
      clock_(clock),
      make_sink_(std::move(make_sink)),
      config_(std::move(config)),
      key_(std::string(kOneCheckpointKey) + "/" + config_.destination) {}

Publisher::~Publisher() { stop(); }

Result<bool> Publisher::start() {
  auto saved = store_.get(Cf::kMeta, key_);
  if (!saved.ok()) return saved.error();
  uint64_t checkpoint = 0;
  if (saved.value() && saved.value()->size() >= 8) {
    checkpoint = decode_u64(std::string_view(*saved.value()).substr(0, 8));
    cluster_ = saved.value()->substr(8);
  } else {
    // A data dir from before: its one checkpoint becomes this topic's, and no other's.
    auto one = store_.get(Cf::kMeta, kOneCheckpointKey);
    if (!one.ok()) return one.error();
    if (one.value() && one.value()->size() == 8) {
      checkpoint = decode_u64(*one.value());
      // In one write: a crash between the two would leave the one checkpoint to the next topic.
      if (!store_.put_meta({{key_, *one.value()}, {kOneCheckpointKey, ""}}).ok())
        return make_error(Code::kUnavailable, "cannot keep the mirror's checkpoint");
    }
  }
  saved_cluster_ = cluster_;
  const uint64_t last = writer_.last_seq();
  if (checkpoint > last) {
    // A data dir restored from an older backup: the broker has events this log does not.
    std::fprintf(stderr, "gatewayd: mirror: checkpoint %llu is beyond the log's end %llu\n",
                 static_cast<unsigned long long>(checkpoint),
                 static_cast<unsigned long long>(last));
    checkpoint = last;
  }
  checkpoint_.store(checkpoint, std::memory_order_release);
  saved_ = checkpoint;
  next_ = checkpoint + 1;
  thread_ = std::thread([this] { run(); });
  return true;
}

void Publisher::stop() {
  stopping_.store(true);
  if (thread_.joinable()) thread_.join();
}

void Publisher::run() {
  name_this_thread("gw-mirror");
  const DeliveryFn report = [this](uint64_t seq, bool ok, std::string_view error) {
    on_delivery(seq, ok, error);
  };
  while (!stopping_.load()) {
    if (halted_.load(std::memory_order_relaxed)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    if (!sink_) {
      if (std::chrono::steady_clock::now() < retry_at_) {
        std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(
            std::chrono::duration_cast<std::chrono::milliseconds>(
                retry_at_ - std::chrono::steady_clock::now()) +
                std::chrono::milliseconds(1),
            std::chrono::milliseconds(50)));
        continue;
      }
      auto made = make_sink_();
      if (!made.ok()) {
        start_over("cannot create the producer: " + made.error().detail);
        continue;
      }
      sink_ = std::move(made.value());
      cluster_seen_ = false;
      tail_checked_ = false;
    }
    if (!same_cluster()) {
      // Waiting for the producer to learn the cluster's id (serving its callbacks meanwhile).
      if (sink_) sink_->poll(std::chrono::milliseconds(10), report);
      continue;
    }
    if (!tail_checked_) {
      if (!check_tail()) continue;
      tail_checked_ = true;
    }
    const bool sent_all = fill();
    // Caught up and idle: no need to wait here (the wait below sleeps until the next commit).
    const bool idle = sent_all && window_.empty();
    sink_->poll(idle ? std::chrono::milliseconds(0) : std::chrono::milliseconds(10), report);
    advance();
    if (failed_ || sink_->broken()) {
      start_over(failed_ ? failure_
                         : "the producer stopped (a fatal error, or the connection to the "
                           "broker was lost)");
      continue;
    }
    save_checkpoint(false);
    // Caught up with the log and nothing in flight: sleep until the writer commits more.
    if (idle) writer_.wait_beyond(next_ - 1, std::chrono::milliseconds(200));
  }
  // Stopping: give what is in flight a bounded time to be confirmed.
  if (sink_) {
    auto deadline = std::chrono::steady_clock::now() + config_.flush_timeout;
    while (!window_.empty() && !failed_ && !sink_->broken() &&
           std::chrono::steady_clock::now() < deadline) {
      sink_->poll(std::chrono::milliseconds(10), report);
      advance();
    }
    sink_.reset();
  }
  save_checkpoint(true);
}

bool Publisher::fill() {
  if (window_.size() >= config_.max_in_flight) return false;
  // Only events the writer has reported written: their bytes in the memtable were inserted before
  // it published the sequence number (an acquire here). A later batch's, being inserted now, are
  // left to the next round; RocksDB makes reading them safe, but not in a way ThreadSanitizer sees.
  const uint64_t last = writer_.last_seq();
  auto it = store_.iterate(Cf::kEvents);
  for (it->Seek(encode_u64(next_)); it->Valid(); it->Next()) {
    if (window_.size() >= config_.max_in_flight) return false;
    const uint64_t seq = decode_u64(std::string_view(it->key().data(), it->key().size()));
    if (seq > last) break;
    const size_t bytes = it->value().size();
    if (!window_.empty() && window_bytes_ + bytes > config_.max_in_flight_bytes) return false;
    auto message = to_cloud_event(seq, std::string_view(it->value().data(), it->value().size()));
    if (!message.ok()) {
      // A stored event we cannot read: never skip it; retry (and say so) until someone looks.
      failed_ = true;
      failure_ = message.error().detail;
      return false;
    }
    switch (sink_->send(message.value())) {
      case Sink::Sent::kQueued:
        break;
      case Sink::Sent::kQueueFull:
        return false;
      case Sink::Sent::kRefused:
        failed_ = true;
        failure_ = "the producer refused event " + std::to_string(seq);
        return false;
    }
    window_.push_back(Slot{seq, false, bytes});
    window_bytes_ += bytes;
    in_flight_.store(window_.size(), std::memory_order_relaxed);
    next_ = seq + 1;
  }
  if (!it->status().ok()) {
    failed_ = true;
    failure_ = "cannot read the log: " + it->status().ToString();
    return false;
  }
  return true;
}

void Publisher::on_delivery(uint64_t seq, bool ok, std::string_view error) {
  if (!ok) {
    failures_.fetch_add(1, std::memory_order_relaxed);
    if (!failed_)
      failure_ = "delivery of event " + std::to_string(seq) + " failed: " + std::string(error);
    failed_ = true;
    return;
  }
  if (window_.empty() || seq < window_.front().seq) return;  // from before a start_over
  const uint64_t index = seq - window_.front().seq;
  if (index >= window_.size()) return;
  window_[index].confirmed = true;
  delivered_.fetch_add(1, std::memory_order_relaxed);
}

void Publisher::advance() {
  uint64_t checkpoint = checkpoint_.load(std::memory_order_relaxed);
  while (!window_.empty() && window_.front().confirmed) {
    checkpoint = window_.front().seq;
    window_bytes_ -= window_.front().bytes;
    window_.pop_front();
  }
  if (checkpoint != checkpoint_.load(std::memory_order_relaxed)) {
    backoff_ = std::chrono::milliseconds(0);  // progress: the next failure starts a new backoff
    checkpoint_.store(checkpoint, std::memory_order_release);
  }
  in_flight_.store(window_.size(), std::memory_order_relaxed);
}

void Publisher::start_over(const std::string& why) {
  restarts_.fetch_add(1, std::memory_order_relaxed);
  sink_.reset();
  window_.clear();
  window_bytes_ = 0;
  in_flight_.store(0, std::memory_order_relaxed);
  next_ = checkpoint_.load(std::memory_order_relaxed) + 1;
  failed_ = false;
  backoff_ = std::clamp(backoff_ * 2, config_.backoff_min, config_.backoff_max);
  retry_at_ = std::chrono::steady_clock::now() + backoff_;
  std::fprintf(stderr, "gatewayd: mirror: %s; sending again from event %llu in %lld ms\n",
               why.c_str(), static_cast<unsigned long long>(next_),
               static_cast<long long>(backoff_.count()));
  save_checkpoint(true);
}

bool Publisher::same_cluster() {
  const std::optional<std::string> id = sink_->cluster_id();
  if (!id) return cluster_seen_;  // known before: the producer's metadata is being refreshed
  cluster_seen_ = true;
  if (id->empty() || *id == cluster_) return true;
  if (cluster_.empty()) {
    cluster_ = *id;  // the first cluster this checkpoint is confirmed by
    save_checkpoint(true);
    return true;
  }
  const std::string why = "the Kafka cluster changed (id " + cluster_ + ", now " + *id +
                          "): it has none of the events sent before, so the whole log is sent to " +
                          config_.destination;
  cluster_ = *id;
  checkpoint_.store(0, std::memory_order_release);
  start_over(why);
  return false;
}

bool Publisher::check_tail() {
  auto read = sink_->tail(kTailTimeout);
  if (!read.ok()) {
    start_over(read.error().detail);
    return false;
  }
  const Sink::Tail& tail = read.value();
  if (tail.seq == 0) {  // the topic holds no event
    resume_after(0);
    return true;
  }
  // Events are sent only once they are durable, so a topic this log published to holds none
  // beyond its end, and each of its events is this log's at that number.
  const uint64_t last = writer_.last_seq();
  const std::string seq = std::to_string(tail.seq);
  std::string problem;
  if (tail.seq > last) {
    problem = "holds event " + seq + ", beyond this log's end (" + std::to_string(last) + ")";
  } else {
    auto stored = store_.get(Cf::kEvents, encode_u64(tail.seq));
    if (!stored.ok()) {
      start_over("cannot read event " + seq + ": " + stored.error().detail);
      return false;
    }
    // Sent as stored, byte for byte (to_cloud_event).
    if (stored.value() && *stored.value() == tail.event) {
      resume_after(tail.seq);
      return true;
    }
    auto hash = [](std::optional<std::string> h) { return h ? *h : std::string("none"); };
    problem = "holds another event " + seq + " than this log (hash " +
              hash(event_hash(tail.event)) + ", here " +
              hash(stored.value() ? event_hash(*stored.value()) : std::nullopt) + ")";
  }
  // Halted before it is said: whoever reads the line then sees gatewayd_mirror_halted 1.
  halted_.store(true, std::memory_order_release);
  std::fprintf(stderr,
               "gatewayd: mirror: topic %s %s: this data dir is behind what was published to it "
               "(restored from an older backup, or another gatewayd's), and its events would take "
               "sequence numbers the topic already holds. Nothing is sent to %s; to publish this "
               "log, mirror it to a new topic (--kafka-topic), which gets it from its first "
               "event\n",
               config_.destination.c_str(), problem.c_str(), config_.destination.c_str());
  sink_.reset();
  return false;
}

void Publisher::resume_after(uint64_t newest) {
  const uint64_t checkpoint = checkpoint_.load(std::memory_order_relaxed);
  if (newest >= checkpoint) return;
  // The broker confirmed every event up to the checkpoint, and a topic keeps its newest ones
  // longest, so the topic lost events (deleted and made again, or emptied: a cluster that lost
  // its data under the same id, which a new id would have told). They are sent again.
  std::fprintf(stderr,
               "gatewayd: mirror: topic %s holds events up to %llu, but every event up to %llu "
               "was confirmed to it (the topic was deleted or emptied, or the cluster lost its "
               "data): sending again from event %llu\n",
               config_.destination.c_str(), static_cast<unsigned long long>(newest),
               static_cast<unsigned long long>(checkpoint),
               static_cast<unsigned long long>(newest + 1));
  checkpoint_.store(newest, std::memory_order_release);
  next_ = newest + 1;
  save_checkpoint(true);
}

void Publisher::save_checkpoint(bool force) {
  const uint64_t checkpoint = checkpoint_.load(std::memory_order_relaxed);
  if (checkpoint == saved_ && cluster_ == saved_cluster_) return;
  auto now = std::chrono::steady_clock::now();
  if (!force && now - saved_at_ < kSaveEvery) return;
  if (!store_.put_meta(key_, encode_u64(checkpoint) + cluster_).ok()) return;  // tried again later
  saved_ = checkpoint;
  saved_cluster_ = cluster_;
  saved_at_ = now;
}

std::string Publisher::render_metrics() const {
  const uint64_t checkpoint = this->checkpoint();
  const uint64_t last = std::max(writer_.last_seq(), checkpoint);
  // The age of the oldest event not yet confirmed (0 when caught up).
  int64_t lag_seconds = 0;
  if (last > checkpoint) {
    auto raw = store_.get(Cf::kEvents, encode_u64(checkpoint + 1));
    rapidjson::Document doc;
    if (raw.ok() && raw.value()) doc.Parse(raw.value()->data(), raw.value()->size());
    if (doc.IsObject() && doc.HasMember("time") && doc["time"].IsInt64()) {
      lag_seconds = std::max<int64_t>(0, clock_.now_seconds() - doc["time"].GetInt64());
    }
  }
  std::ostringstream out;
  out << enabled_metric(1);
  auto metric = [&out](const char* name, const char* type, const char* help, uint64_t value) {
    write_metric(out, name, type, help, value);
  };
  metric("gatewayd_mirror_checkpoint_seq", "gauge",
         "Highest sequence number up to which every event is confirmed by Kafka.", checkpoint);
  metric("gatewayd_mirror_lag_events", "gauge", "Events in the log not yet confirmed by Kafka.",
         last - checkpoint);
  metric("gatewayd_mirror_lag_seconds", "gauge",
         "Age of the oldest event not yet confirmed by Kafka (0 when caught up).",
         static_cast<uint64_t>(lag_seconds));
  metric("gatewayd_mirror_in_flight", "gauge", "Events sent and awaiting confirmation.",
         in_flight_.load(std::memory_order_relaxed));
  metric("gatewayd_mirror_delivered_total", "counter", "Deliveries confirmed by Kafka.",
         delivered_.load(std::memory_order_relaxed));
  metric("gatewayd_mirror_delivery_failures_total", "counter", "Deliveries that failed.",
         failures_.load(std::memory_order_relaxed));
  metric("gatewayd_mirror_halted", "gauge",
         "1 when the topic holds an event this log does not, and nothing more is sent to it.",
         halted_.load(std::memory_order_acquire) ? 1 : 0);
  metric("gatewayd_mirror_restarts_total", "counter",
         "Times the producer was replaced and sending restarted from the checkpoint.",
         restarts_.load(std::memory_order_relaxed));
  return out.str();
}

std::string Publisher::render_disabled_metrics() { return enabled_metric(0); }

}  // namespace gw::mirror
