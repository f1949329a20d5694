// Where the mirror publishes: an asynchronous, ordered-per-key message queue with delivery
// reports. KafkaSink (kafka_sink.h) is the real one; tests use a fake beside it.
// A Sink is used by one thread at a time (the publisher's).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "core/error.h"
#include "mirror/cloud_event.h"

namespace gw::mirror {

// One delivery report: the message with sequence number `seq` was stored by the broker (`ok`) or
// will never be (`error` says why).
using DeliveryFn = std::function<void(uint64_t seq, bool ok, std::string_view error)>;

class Sink {
 public:
  virtual ~Sink() = default;  // drops whatever is still queued, without reports

  enum class Sent {
    kQueued,     // a delivery report follows from poll()
    kQueueFull,  // nothing queued: poll, then send again
    kRefused,    // can never be queued as it is (e.g. larger than the producer allows)
  };
  virtual Sent send(const OutboundMessage& message) = 0;
  // Serves the delivery reports that are ready, waiting up to `timeout` for the first one.
  virtual void poll(std::chrono::milliseconds timeout, const DeliveryFn& on_delivery) = 0;
  // True once the sink can no longer deliver anything (a fatal producer error) or should not go on
  // (it lost its connection to the cluster, which may be another one when it reconnects): the
  // caller replaces it with a new one and sends again from its checkpoint.
  virtual bool broken() const = 0;
  // Without waiting: the id of the cluster the sink delivers to once it knows it, nullopt before.
  // Empty for a destination without such an identity. A checkpoint is kept per cluster: another
  // cluster (a new or rebuilt one behind the same addresses) has none of the events sent before.
  virtual std::optional<std::string> cluster_id() { return std::string(); }

  // The newest event the destination holds, read from it: its sequence number and its stored
  // bytes (seq 0 when it holds none). Waits up to `timeout`; kUnavailable when it cannot be read.
  struct Tail {
    uint64_t seq = 0;
    std::string event;
  };
  // A destination that holds fewer events than were confirmed to it lost them (Publisher), so
  // every sink says what it holds.
  virtual Result<Tail> tail(std::chrono::milliseconds timeout) = 0;
};

}  // namespace gw::mirror
