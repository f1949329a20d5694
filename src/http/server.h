// The HTTP server: Pistache 0.0.5 accepts connections and reads and writes their bytes; gatewayd
// reads each request itself (http/head_check.h), hands it to the Api and writes the answer
// (http/transport.h). Keep-alive for HTTP/1.1, request size limits, and no exception reaches the
// client.
// Not copyable; start() once, then shutdown() from the thread that started it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "http/api.h"

namespace Pistache::Http {
class Endpoint;
}

namespace gw::http {

struct ServerConfig {
  std::string host = "127.0.0.1";
  uint16_t port = 8080;
  int threads = 2;
  size_t max_request_bytes = 1 << 20;
  // After a refusal (400, 413, 414, 431, 501, 505), the connection waits for its client's end until
  // its client has sent nothing for `lingering_timeout`, and at most `lingering_time` (linger.h).
  std::chrono::milliseconds lingering_timeout{5000};
  std::chrono::milliseconds lingering_time{30000};
  // A connection on which no whole request has come for this long is answered 408 and closed:
  // an idle keep-alive connection, or one whose request is still coming. Pistache checks once a
  // second, and the clock restarts at a served request at most once a second: at least 3 s.
  std::chrono::milliseconds idle_timeout{60000};
  // Whether the writer has jobs it has not finished (Writer::has_unfinished); a stop waits for
  // the requests in flight while it does. Unset: none.
  std::function<bool()> writes_unfinished;
};

class Server {
 public:
  Server(ServerConfig config, std::shared_ptr<Api> api);
  ~Server();

  // Binds and starts serving on background threads; returns the bound port. kUnavailable if the
  // address cannot be bound.
  Result<uint16_t> start();
  // Refuses new connections and new requests (503, connection closed) and waits up to `drain_ms`
  // for the requests in flight to be answered; then answers 503 the writes still waiting for a
  // WAF check, waits for the requests left in flight (while the writer has jobs unfinished, and
  // 5 s more at most) and, until the drain's deadline or 20 ms at least, for the answers given
  // to be written; then tells the listener and its threads to stop.
  void shutdown(int drain_ms);
  // After shutdown(), once no more answers can come (the writer stopped): waits up to `limit`
  // for the listener's threads to end, and frees them. False if one had not ended by then (busy
  // for good on one connection): it goes on running and may still call the Api, so the caller
  // must then end the process with _Exit, destroying nothing.
  bool join(std::chrono::milliseconds limit);
  // Last, just before the process exits: reads and drops what the clients of the connections the
  // stop ended have sent since the HTTP threads stopped, so that the exit does not reset those
  // connections and cut an answer their clients are still reading. Bytes that come after this
  // still reset a connection (the kernel's answer to input for a closed socket).
  void drop_unread_input();

  struct State;

 private:
  ServerConfig config_;
  std::shared_ptr<State> state_;
  std::unique_ptr<Pistache::Http::Endpoint> endpoint_;
};

}  // namespace gw::http
