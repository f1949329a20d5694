// The Kafka mirror: an outbox publisher that tails the event log and sends every event, in log
// order, to a Sink (Kafka). Its checkpoint is the highest sequence number up to which every event's
// delivery was confirmed; it advances only over confirmed deliveries, never past a gap, so nothing
// is skipped. After a restart, or after a failed delivery, sending starts again at checkpoint + 1:
// events that were delivered but not yet checkpointed are sent again (duplicates, in order;
// consumers drop them by `ce_id`).
//
// A checkpoint belongs to one destination: it is kept per topic (`mirror/checkpoint/<topic>` in
// the store's kMeta column family), with the id of the Kafka cluster it was confirmed by. Another
// topic starts from the first event; so does another cluster (one rebuilt or replaced behind the
// same addresses): nothing is sent until the producer knows the cluster's id, and a cluster that
// changes while sending starts the log over. (A data dir from before keeps its one checkpoint,
// `mirror/checkpoint`, as the checkpoint of the topic it is first started with.)
//
// The API never waits on the mirror: the publisher reads committed events from the store on its
// own thread, wakes on the writer's commits, and keeps at most `max_in_flight` events queued in
// the sink. With the broker down, events wait in the log, not in memory.
//
// Before sending anything to a topic, each new sink reads the topic's newest event: if the topic
// holds an event this log does not (its sequence number beyond the log's end, or other bytes at
// that number), the data dir is behind what was published to that topic (restored from an older
// backup, or another gatewayd's), and its new events would take sequence numbers the topic already
// holds. The mirror then halts: nothing more is sent to that topic, and stderr and
// gatewayd_mirror_halted say so. The API goes on.
//
// A failed delivery or a broken sink replaces the sink (a fresh idempotent producer) after a
// backoff of 100 ms doubling to 10 s; an event that can never be delivered (too large for the
// broker) therefore stalls the mirror, visibly in the metrics and the log, rather than being lost.
//
// Thread-safe: start() and stop() from one thread; render_metrics() from any.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "core/clock.h"
#include "core/error.h"
#include "mirror/sink.h"
#include "store/store.h"
#include "store/writer.h"

namespace gw::mirror {

struct PublisherConfig {
  size_t max_in_flight = 50000;  // events queued in the sink and not yet confirmed
  // And their stored bytes (one event at least, however large): a profile event can be about
  // 2 MB, so 50,000 of them would be about 100 GB (librdkafka's own bound, 1 GiB, was reached).
  size_t max_in_flight_bytes = 64 << 20;
  std::chrono::milliseconds backoff_min{100};
  std::chrono::milliseconds backoff_max{10000};
  // How long stop() waits for confirmations of what is in flight.
  std::chrono::milliseconds flush_timeout{3000};
  // The topic: the checkpoint is this destination's.
  std::string destination;
};

// Makes a new sink; kUnavailable (or another error) when it cannot right now.
using SinkFactory = std::function<Result<std::unique_ptr<Sink>>()>;

class Publisher {
 public:
  // `store`, `writer` and `clock` must outlive the Publisher.
  Publisher(Store& store, Writer& writer, const Clock& clock, SinkFactory make_sink,
            PublisherConfig config = {});
  ~Publisher();  // stop()
  Publisher(const Publisher&) = delete;
  Publisher& operator=(const Publisher&) = delete;

  // Reads the checkpoint and starts the publishing thread. kUnavailable if the checkpoint cannot
  // be read.
  Result<bool> start();
  // Waits up to flush_timeout for what is in flight, saves the checkpoint, stops the thread.
  void stop();

  // Highest sequence number up to which every event is confirmed delivered.
  uint64_t checkpoint() const { return checkpoint_.load(std::memory_order_acquire); }
  // Prometheus text: enabled, checkpoint, lag in events and seconds, in flight, counters.
  std::string render_metrics() const;
  // What /metrics shows when mirroring is off: gatewayd_mirror_enabled 0.
  static std::string render_disabled_metrics();

 private:
  struct Slot {
    uint64_t seq;
    bool confirmed;
    size_t bytes;
  };

  void run();
  // Sends events after the last one sent, up to the writer's last_seq(), while there is room;
  // false if the sink refused one.
  bool fill();
  void on_delivery(uint64_t seq, bool ok, std::string_view error);
  void advance();
  // Drops the sink and everything in flight; sending resumes at checkpoint + 1 after a backoff.
  void start_over(const std::string& why);
  // The sink knows its cluster: false if nothing may be sent yet (its id is not known) or sending
  // starts over (another cluster than the checkpoint's).
  bool same_cluster();
  // The topic's newest event against this log, before the first send of each sink: true if
  // sending may go on from the checkpoint (lowered by resume_after); false to try again later, or
  // when the topic holds an event this log does not (halted_).
  bool check_tail();
  // After check_tail() found the topic's newest event at `newest` (0: none): a topic that holds
  // fewer events than the checkpoint says were confirmed lost them, and they are sent again
  // from newest + 1 (said on stderr).
  void resume_after(uint64_t newest);
  void save_checkpoint(bool force);

  Store& store_;
  Writer& writer_;
  const Clock& clock_;
  SinkFactory make_sink_;
  PublisherConfig config_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};

  // Publisher thread only:
  std::unique_ptr<Sink> sink_;
  std::deque<Slot> window_;  // sent and not yet advanced over, in seq order
  size_t window_bytes_ = 0;  // their stored bytes
  uint64_t next_ = 1;        // next seq to send
  bool failed_ = false;      // a delivery failed since the last start_over
  std::string failure_;
  std::chrono::milliseconds backoff_{0};
  std::chrono::steady_clock::time_point retry_at_{};
  std::string key_;            // the checkpoint's key in kMeta
  std::string cluster_;        // the cluster the checkpoint was confirmed by ("" not known yet)
  bool cluster_seen_ = false;  // the current sink has said its cluster's id
  bool tail_checked_ = false;  // the current sink's topic has passed check_tail()
  uint64_t saved_ = 0;
  std::string saved_cluster_;
  std::chrono::steady_clock::time_point saved_at_{};

  // Read by render_metrics():
  std::atomic<uint64_t> checkpoint_{0};
  std::atomic<uint64_t> in_flight_{0};
  std::atomic<uint64_t> delivered_{0};
  std::atomic<uint64_t> failures_{0};
  std::atomic<uint64_t> restarts_{0};
  // The topic holds events this log does not: nothing more is sent to it (check_tail).
  std::atomic<bool> halted_{false};
};

}  // namespace gw::mirror
