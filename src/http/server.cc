#include "http/server.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pistache/endpoint.h>
#include <pistache/errors.h>
#include <pistache/http.h>
#include <pistache/listener.h>
#include <pistache/peer.h>
#include <pistache/transport.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/expose.h"
#include "core/hex.h"
#include "core/text.h"
#include "http/chunked.h"
#include "http/head_check.h"
#include "http/linger.h"
#include "http/problem.h"
#include "http/transport.h"

namespace gw::http {

namespace P = Pistache;

struct Server::State {
  std::shared_ptr<Api> api;
  size_t max_request_bytes = 0;
  std::unique_ptr<Linger> linger;
  std::atomic<bool> draining{false};
  std::atomic<int64_t> in_flight{0};
  // The open connections, from Pistache's onConnection to its onDisconnection: a stop ends them
  // once their answers are written.
  struct Connection {
    std::weak_ptr<P::Tcp::Peer> peer;
  };
  std::mutex connections_mutex;
  std::unordered_map<const P::Tcp::Peer*, Connection> connections;
  size_t connections_sweep_at = 64;
  // A copy of the descriptor of each connection the stop ended (its own, so that it cannot be
  // another file's once Pistache closes the connection's), for drop_unread_input.
  std::vector<int> ended_copies;

  State() = default;
  State(const State&) = delete;
  State& operator=(const State&) = delete;
  ~State() {
    for (const int fd : ended_copies) ::close(fd);
  }
};

namespace {

enum class Part { kPath, kQuery };

// The path of a request target. A server must take the absolute form too (RFC 9112 3.2.2), which
// clients send to proxies: "http://host:port/v1/webhook" is "/v1/webhook" (`target` without its
// query); an absolute form with no path is "/".
std::string_view origin_path(std::string_view target) {
  for (std::string_view scheme : {"http://", "https://"}) {
    if (target.size() >= scheme.size() && ascii_iequals(target.substr(0, scheme.size()), scheme)) {
      const size_t path = target.find('/', scheme.size());
      return path == std::string_view::npos ? std::string_view("/") : target.substr(path);
    }
  }
  return target;
}

// Percent-decoding of the path and of query parameters. In a query, '+' is a
// space. In a path, "%2F" stays as it is: an escaped slash is part of a segment, and decoding it
// would make "/v1/webhook/ID%2Fhistory" the history's path. An invalid escape stays as it is
// (parse_head refuses a request target with one).
std::string percent_decode(std::string_view in, Part part) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const int high = in[i] == '%' && i + 2 < in.size() ? hex_digit(in[i + 1]) : -1;
    const int low = high >= 0 ? hex_digit(in[i + 2]) : -1;
    const int escaped = low >= 0 ? high * 16 + low : -1;
    if (part == Part::kQuery && in[i] == '+') {
      out.push_back(' ');
    } else if (escaped >= 0 && (part == Part::kQuery || escaped != '/')) {
      out.push_back(static_cast<char>(escaped));
      i += 2;
    } else {
      out.push_back(in[i]);
    }
  }
  return out;
}

// A query's parameters, in the URL's order: `&` separates them and the first `=` splits a name
// from its value (no `=`: an empty value). An empty one (`?&a=1`, `a=1&&b=2`, a trailing `&`,
// `=`) names nothing and is skipped.
void read_query(std::string_view query, Request* out) {
  while (true) {
    const size_t amp = query.find('&');
    const std::string_view param = query.substr(0, amp);
    const size_t eq = param.find('=');
    const std::string_view name = param.substr(0, eq);
    const std::string_view value =
        eq == std::string_view::npos ? std::string_view() : param.substr(eq + 1);
    if (!name.empty() || !value.empty()) {
      out->query.emplace_back(percent_decode(name, Part::kQuery),
                              percent_decode(value, Part::kQuery));
    }
    if (amp == std::string_view::npos) return;
    query.remove_prefix(amp + 1);
  }
}

// The name of the mark a connection gets once nothing more is to be read from it: a reply on it
// closed it (Handler::serve), or its request was refused before it was read whole
// (Handler::refuse). Only the connection's own HTTP thread reads or sets it.
constexpr const char* kClosingMark = "gw.closing";

bool marked_closing(const P::Tcp::Peer& peer) { return peer.tryGetData(kClosingMark) != nullptr; }

// The value of every answer's Date header: an origin server with a clock sends one in each 2xx,
// 3xx and 4xx answer (RFC 9110 6.6.1), and gatewayd in its 5xx ones too. Formatted once a second
// on each thread that answers.
const std::string& date_now() {
  thread_local int64_t second = -1;
  thread_local std::string text;
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  if (now.tv_sec != second) {
    second = now.tv_sec;
    text = http_date(now.tv_sec);
  }
  return text;
}

// Whether `kept` (an entry's connection) is `peer`, not a connection that ended before it at the
// same address.
bool same_connection(const std::weak_ptr<P::Tcp::Peer>& kept,
                     const std::shared_ptr<P::Tcp::Peer>& peer) {
  return !kept.owner_before(peer) && !peer.owner_before(kept);
}

// Pistache tells of each connection that ends (onDisconnection), whose entries in a handler's
// maps by connection are erased then; should it miss one, its entry in `entries` (whose values
// hold the connection as `peer`) is dropped here, once the map holds as many as twice its count
// after the last such sweep (`*sweep_at`).
template <typename Map>
void sweep_ended(Map& entries, size_t* sweep_at) {
  if (entries.size() < *sweep_at) return;
  std::erase_if(entries, [](const auto& entry) { return entry.second.peer.expired(); });
  *sweep_at = std::max<size_t>(64, 2 * entries.size());
}

void mark_closing(const std::shared_ptr<P::Tcp::Peer>& peer) {
  if (marked_closing(*peer)) return;  // Pistache refuses a second value under one name
  // One marker for every connection, never freed: Pistache frees a connection's data on
  // whichever of its threads drops the connection last, out of ThreadSanitizer's sight.
  static const auto* const marker = new std::shared_ptr<bool>(std::make_shared<bool>(true));
  peer->putData(kClosingMark, *marker);
}

// Pistache's Http::Handler::onConnection, which makes a connection's parser: private, so a
// handler that overrides it calls it by its symbol, as a function whose first argument is the
// handler (the Itanium C++ ABI's `this`), as accept_connection calls Pistache's accept below.
using OnConnection = void (*)(P::Http::Handler*, const std::shared_ptr<P::Tcp::Peer>&);
constexpr char kOnConnectionSymbol[] =
    "_ZN8Pistache4Http7Handler12onConnectionERKSt10shared_ptrINS_3Tcp4PeerEE";

// nullptr if this program was linked against a libpistache without it (Server::start refuses).
OnConnection pistache_on_connection() {
  static const auto found =
      reinterpret_cast<OnConnection>(::dlsym(RTLD_DEFAULT, kOnConnectionSymbol));
  return found;
}

// The idle timeout of the server started last (ServerConfig::idle_timeout), for the words of
// its 408.
std::atomic<int64_t> idle_timeout_ms{60000};

class Handler final : public P::Http::Handler {
 public:
  HTTP_PROTOTYPE(Handler)

  // gatewayd's 408 in place of Pistache's own (answer_timeouts_with).
  static std::string timeout_answer() {
    return wire(
        request_timeout(std::chrono::milliseconds(idle_timeout_ms.load(std::memory_order_relaxed))),
        /*close=*/true, /*with_body=*/true);
  }

  explicit Handler(std::shared_ptr<Server::State> state) : state_(std::move(state)) {}
  // A clone, one per HTTP thread, holds requests of its own connections.
  Handler(const Handler& other) : P::Http::Handler(other), state_(other.state_) {}

  // Pistache hands requests its parser read to onRequest; its parser is never given a byte.
  void onRequest(const P::Http::Request&, P::Http::ResponseWriter) override {}

  // Every read of a connection comes here. A request that came whole in one read (the usual
  // case) is served from the read's bytes; one that has not all come is held until it has: its
  // head up to kMaxHeadBytes (431 past that), then checked (head_check.h), then its body up to
  // the Content-Length the head gave, which is at most --max-request-bytes (413 past that).
  void onInput(const char* data, size_t len, const std::shared_ptr<P::Tcp::Peer>& peer) override {
    if (marked_closing(*peer)) {
      // Dropped: the rest of a refused request, or what came after a closing answer.
      try {
        if (len > 0) {
          dropped(peer);
        } else {
          end_after_answer(peer);
        }
      } catch (const std::exception&) {
        // Out of memory: the connection is not watched, and ends with its client's end or
        // Pistache's own idle limit.
      }
      return;
    }
    try {
      read(data, len, peer);
    } catch (const std::exception&) {
      // Out of memory while holding a request: it is dropped, and nothing more is read from the
      // connection, whose write side is shut once what is queued on it is written.
      held_.erase(peer.get());
      mark_closing(peer);
      shut_when_written(peer);
    }
    pause_while_held(peer);
  }

  void onConnection(const std::shared_ptr<P::Tcp::Peer>& peer) override {
    pistache_on_connection()(this, peer);
    std::lock_guard lock(state_->connections_mutex);
    sweep_ended(state_->connections, &state_->connections_sweep_at);
    state_->connections[peer.get()] = {peer};
  }

  void onDisconnection(const std::shared_ptr<P::Tcp::Peer>& peer) override {
    held_.erase(peer.get());
    lingering_.erase(peer.get());
    {
      std::lock_guard lock(state_->connections_mutex);
      state_->connections.erase(peer.get());
    }
    P::Tcp::Handler::onDisconnection(peer);
  }

 private:
  void read(const char* data, size_t len, const std::shared_ptr<P::Tcp::Peer>& peer) {
    auto held = held_.empty() ? held_.end() : held_.find(peer.get());
    if (held != held_.end() && !same_connection(held->second.peer, peer)) {
      held_.erase(held);  // left by a connection gone before this one, at the same address
      held = held_.end();
    }
    if (len == 0) {
      // The answer that bytes were held behind is taken (wait_for_answer): they are read now, as
      // if they had just come.
      if (held == held_.end() || !held->second.wait.after_answer) return;
      const std::string bytes = std::move(held->second.bytes);
      held_.erase(held);
      if (!bytes.empty()) read(bytes.data(), bytes.size(), peer);
      return;
    }
    // While an answer waits for the socket (a client that does not read it), what comes is held,
    // and nothing more read (pause_while_held), until it is written: served at once, each answer
    // was queued in memory behind the one waiting, without bound. A request held in part before
    // is read again from its start then (a second `100 Continue` may go out for it, which RFC 9110
    // 15.2 allows).
    const bool socket_full = answer_waits_for_socket(*peer);
    if (socket_full && held != held_.end() && !held->second.wait.after_answer) {
      held->second.wait = Wait{.after_answer = true};
      wait_for_answer(*peer);
    }
    if (held == held_.end()) {
      std::string_view bytes(data, len);
      bytes.remove_prefix(empty_lines(bytes));
      if (bytes.empty()) return;
      if (answer_pending(*peer) || socket_full) {
        // Sent before the answer to the request before it, in a read of its own: read once that
        // answer is on its way, so that answers go out in the order of their requests (RFC 9112
        // 9.3.2). Read at once, a GET was answered before a POST sent ahead of it.
        hold_behind_answer(peer, bytes);
        return;
      }
      const Taken taken = take(peer, bytes, 0, Wait{});
      if (taken.wait) hold(peer, bytes, *taken.wait);
      if (taken.cr_left) hold_cr(peer);
      if (taken.next != 0) hold_next(peer, bytes.substr(taken.next));
      return;
    }
    Held& h = held->second;
    if (h.wait.after_answer) {
      // Reading pauses once bytes are held behind an answer (pause_while_held), so this comes
      // only for the read in which a request held in part met an answer waiting for the socket.
      // Held within a request's worth all the same (a head, a body, a chunked body's framing);
      // past that the connection is read no more, and ends once the answer it waits for is written
      // (end_after_answer). Left open, it answered that request with keep-alive and then nothing
      // more, until the idle timeout's 408.
      // One empty line before the next request (the CRLF after the one answered) is no part of
      // it: counted, a request of the largest size after one was dropped. Only one: uncounted,
      // empty lines piled up without bound behind a slow answer.
      std::string first = h.bytes.substr(0, 2);
      first.append(data, std::min(len, 2 - first.size()));
      const size_t empty = first == "\r\n" ? 2 : 0;
      if (h.bytes.size() + len - empty > kMaxHeadBytes + state_->max_request_bytes +
                                             max_chunk_framing_bytes(state_->max_request_bytes)) {
        std::string().swap(h.bytes);
        h.overflowed = true;
        mark_closing(peer);
        return;
      }
      h.bytes.append(data, len);
      return;
    }
    size_t searched = h.bytes.size();
    h.bytes.append(data, len);
    if (const size_t empty = h.wait.head_end == 0 ? empty_lines(h.bytes) : 0; empty > 0) {
      // An empty line before the request line whose CR and LF came in two reads: skipped, as one
      // that comes whole is.
      h.bytes.erase(0, empty);
      searched = 0;
      if (h.bytes.empty()) {
        held_.erase(held);
        return;
      }
    }
    if (h.wait.head_end != 0 && h.bytes.size() < h.wait.head_end + h.wait.body_bytes) return;
    const Taken taken = take(peer, h.bytes, searched, h.wait);
    if (taken.wait) {
      h.wait = *taken.wait;
      h.bytes.reserve(h.wait.head_end + h.wait.body_bytes);  // what is still to come, at once
      return;
    }
    const std::string next = taken.next != 0 ? h.bytes.substr(taken.next) : std::string();
    held_.erase(held);
    if (taken.cr_left) hold_cr(peer);
    if (taken.next != 0) hold_next(peer, next);
  }

  // What came behind a request just served, in its read: the next request of a pipeline, read once
  // the answer to the one before is taken (a read of no bytes, which reads what is held as if it
  // had just come), so that answers go out in the order of their requests (RFC 9112 9.3.2). It is
  // part of one read (reading pauses while it is held: pause_while_held), so each request served
  // from it copies at most that much. Behind an answer that closes the connection, nothing more is
  // read.
  void hold_next(const std::shared_ptr<P::Tcp::Peer>& peer, std::string_view bytes) {
    if (marked_closing(*peer)) {
      read_no_more(peer);
      return;
    }
    hold_behind_answer(peer, bytes);
  }

  // Nothing more is read from a connection while a request is held behind an answer not yet on
  // its way: what its client sends meanwhile waits in the kernel's buffers (pause_reading), and
  // it is read again once the requests held are served. Read on, a client that pipelined requests
  // and read no answer made gatewayd hold a request's worth behind each answer, and about twice
  // that in memory (helper 132: 270 MB for one connection at --max-request-bytes 64 MiB).
  void pause_while_held(const std::shared_ptr<P::Tcp::Peer>& peer) {
    const auto held = held_.empty() ? held_.end() : held_.find(peer.get());
    const bool behind = held != held_.end() && held->second.wait.after_answer &&
                        !held->second.overflowed && !marked_closing(*peer);
    try {
      pause_reading(*peer, behind);
    } catch (const std::exception&) {
      // Out of memory: the connection is read on, within the bound on what is held.
    }
  }

  // Holds `bytes` until the answer pending on the connection is on its way (wait_for_answer).
  void hold_behind_answer(const std::shared_ptr<P::Tcp::Peer>& peer, std::string_view bytes) {
    hold(peer, bytes, Wait{.after_answer = true});
    wait_for_answer(*peer);
  }

  // A CR after a request served, the last byte of its read: the first half of an empty line
  // whose LF comes in the next read, which is skipped once it has (RFC 9112 2.2). Dropped, the
  // LF started the next request, refused as a bare LF.
  void hold_cr(const std::shared_ptr<P::Tcp::Peer>& peer) {
    if (marked_closing(*peer)) return;  // its answer closes: nothing more is read
    if (answer_pending(*peer)) {
      hold_behind_answer(peer, "\r");
    } else {
      hold(peer, "\r", Wait{});
    }
  }

  // A request whose answer closes the connection, with more from its client behind it: in its
  // read (a pipelined request, see hold_next) or in reads of its own since (dropped). Nothing more
  // is read. The client may still be sending, so the connection does not end as that answer is
  // written: what came next would reset it, which can take the answer with it (RFC 9112 9.6). As
  // when too much came behind an answer, its client's end is waited for once the answer is taken
  // (end_after_answer).
  void read_no_more(const std::shared_ptr<P::Tcp::Peer>& peer) {
    sweep_ended(held_, &sweep_at_);
    held_.insert_or_assign(peer.get(),
                           Held{peer, {}, Wait{.after_answer = true}, /*overflowed=*/true});
    wait_for_answer(*peer);
    client_sends_more(*peer);
  }

  // The answer that a connection read no more (too much sent behind it, or more behind an answer
  // that closes) waited for has been taken: its write side is shut once that answer is written, and
  // its client's end is waited for, as after a refusal.
  void end_after_answer(const std::shared_ptr<P::Tcp::Peer>& peer) {
    const auto held = held_.find(peer.get());
    if (held == held_.end() || !held->second.overflowed) return;
    const bool same = same_connection(held->second.peer, peer);
    held_.erase(held);
    if (!same) return;  // left by a connection gone before this one, at the same address
    shut_when_written(peer);
    linger(peer);
  }

  // What a held request waits for: its head's end, or once the head has come and was checked,
  // the body's bytes after it.
  struct Wait {
    size_t head_end = 0;  // 0: the head has not all come
    // The bytes after the head that must have come before the request is read again: all of a
    // Content-Length body; of a chunked one, as far as its reading so far says.
    uint64_t body_bytes = 0;
    bool after_answer = false;  // nothing is read before the answer pending on the connection
    std::optional<ChunkedBody> chunked = std::nullopt;  // how far a chunked body was read
  };

  // A request that has not all come yet, of one connection.
  struct Held {
    std::weak_ptr<P::Tcp::Peer> peer;
    std::string bytes;
    Wait wait;
    bool overflowed = false;  // more came behind the answer than is held: read no more
  };

  // What take() leaves: the rest of a request still to come (`wait`); or, once it served one,
  // whether its read ended in a CR after it (`cr_left`, see hold_cr) or held more after it: where
  // the next request starts in the bytes given (`next`, see hold_next; 0: none).
  struct Taken {
    std::optional<Wait> wait = std::nullopt;
    bool cr_left = false;
    size_t next = 0;
  };

  // Reads a connection's request from `bytes`, all that has come of it (`searched` of them were
  // searched for the head's end before; `wait` is what the reading before found: where the head,
  // read and checked, ends, and how far a chunked body was read). Serves or refuses the request
  // once it has all come; otherwise returns what it waits for. Bytes after a whole request are a
  // pipelined request, read once this one's answer is taken (hold_next).
  Taken take(const std::shared_ptr<P::Tcp::Peer>& peer, std::string_view bytes, size_t searched,
             const Wait& wait) {
    const size_t head_end_at = wait.head_end;
    // A chunked body read before is read on first, from where its reading stopped; its head is
    // read again only once the body has ended or is refused. Read again for every read of the
    // body, a head of 60 KB took gatewayd's CPU from 0.2 s to 0.85 s for a chunk-size line of
    // 20,000 bytes sent a byte at a time.
    std::optional<ChunkedBody> chunked = wait.chunked;
    std::optional<Result<ChunkedBody::Progress>> body_read;
    if (chunked) {
      body_read = chunked->read(bytes.substr(head_end_at));
      if (body_read->ok() && !body_read->value().done) {
        return {Wait{head_end_at, body_read->value().bytes, false, chunked}};
      }
    }
    size_t end = head_end_at;
    if (end == 0) {
      end = head_end(bytes, searched);
      if (end == std::string_view::npos && bare_line_feed(bytes, searched)) {
        refuse(peer, bytes,
               problem(make_error(Code::kBadRequest,
                                  "the lines of a request head must end in CRLF, not a bare LF")));
        return {};
      }
      if (end == std::string_view::npos && bytes.size() <= kMaxHeadBytes) return {Wait{}};
      if (end == std::string_view::npos || end > kMaxHeadBytes) {
        // RFC 9112 3: a request-target longer than the server takes is 414; 431 told the client
        // to shorten headers it may not have sent (helper 170). The line is too long where it
        // leaves no room for the Host header HTTP/1.1 needs: its CRLF, `Host: x` and CRLF, and
        // the empty line that ends a head.
        constexpr size_t kLineRoom = kMaxHeadBytes - (2 + 9 + 2);
        const size_t line_end = bytes.find("\r\n");
        const bool line_too_long = line_end == std::string_view::npos || line_end > kLineRoom;
        refuse(peer, bytes,
               problem(line_too_long
                           ? make_error(Code::kUriTooLong, "the request line exceeds " +
                                                               std::to_string(kLineRoom) +
                                                               " bytes: send a shorter target")
                           : make_error(Code::kHeadersTooLarge,
                                        "the request line and headers exceed " +
                                            std::to_string(kMaxHeadBytes) + " bytes")));
        return {};
      }
    }
    auto head = parse_head(bytes.substr(0, end));
    if (!head.ok()) {
      refuse(peer, bytes, problem(head.error()));
      return {};
    }
    // The body as sent: Content-Length bytes, or a chunked body up to its end.
    uint64_t body_bytes = head.value().content_length;
    std::optional<Wait> more;
    if (head.value().chunked) {
      if (!chunked) {  // the head has just come
        chunked.emplace(state_->max_request_bytes);
        body_read = chunked->read(bytes.substr(end));
      }
      if (!body_read->ok()) {
        refuse(peer, bytes, problem(body_read->error()));
        return {};
      }
      body_bytes = body_read->value().bytes;
      if (!body_read->value().done) more = Wait{end, body_bytes, false, chunked};
    } else if (body_bytes > state_->max_request_bytes) {
      refuse(peer, bytes, body_too_large(state_->max_request_bytes));
      return {};
    } else if (bytes.size() - end < body_bytes) {
      more = Wait{end, body_bytes};
    }
    if (more) {
      // Once, when the head has just come: a client that asked waits for this before it sends
      // the body (RFC 9110 10.1.1; curl waits a second, then sends it anyway).
      if (head_end_at == 0 && head.value().expect_continue && head.value().http11) {
        std::string write = start_write(25);
        write += "HTTP/1.1 100 Continue\r\n\r\n";
        queue_write(peer, std::move(write), /*shut_after=*/false);
      }
      return {std::move(more)};
    }
    // An empty line after it is not a request (see onInput).
    const std::string_view after = bytes.substr(end + body_bytes);
    const bool pipelined = after.find_first_not_of("\r\n") != std::string_view::npos;
    serve(peer, head.value(),
          chunked ? ChunkedBody::decode(bytes.substr(end, body_bytes))
                  : std::string(bytes.substr(end, body_bytes)));
    // Pistache keeps a parser for each connection (Http::Handler::onConnection) that is never
    // given a byte, but whose clock its transport still reads once a second: it ends a connection
    // (408) once the idle timeout (ServerConfig::idle_timeout, 60 s) has passed since the parser
    // was made or last reset, which it was after each request it read. Reset here, that is the
    // idle timeout from the last request served (to within a second: a reset makes a new Pistache
    // Request, a few percent of a request's time, so it is done at most once a second): an idle
    // connection, or one whose next request has not all come by then. An answer that takes over
    // a second resets it again as it is written (transport.cc, deliver).
    const auto parser = getParser(peer);
    if (std::chrono::steady_clock::now() - parser->time() > std::chrono::seconds(1)) {
      parser->reset();
    }
    return {.cr_left = !pipelined && after.ends_with('\r'),
            .next = pipelined ? end + body_bytes : 0};
  }

  void hold(const std::shared_ptr<P::Tcp::Peer>& peer, std::string_view bytes, Wait wait) {
    sweep_ended(held_, &sweep_at_);
    std::string copy;
    copy.reserve(std::max<size_t>(bytes.size(), wait.head_end + wait.body_bytes));
    copy.append(bytes);
    held_.emplace(peer.get(), Held{peer, std::move(copy), wait});
  }

  void serve(const std::shared_ptr<P::Tcp::Peer>& peer, const Head& head, std::string body) {
    // HTTP/1.0 closes unless asked for keep-alive.
    const bool close = head.close || (!head.http11 && !head.keep_alive);
    // One allocation holds what the reply needs; exactly one reply goes out, even if the Api
    // answered and then something threw.
    auto exchange = std::make_shared<Exchange>(peer, head.method == "HEAD", close, state_);
    // A connection whose reply said `Connection: close` takes no further request (RFC 9112 9.6):
    // any sent on it after that one is neither applied nor answered. Only the connection's own
    // HTTP thread reads or sets the mark.
    struct MarkIfClosing {
      const std::shared_ptr<P::Tcp::Peer>& peer;
      const Exchange& exchange;
      // Replies that close are given before serve returns (the early answer below and the
      // Api's 413), or the request asked for the close itself. A write answered as the server
      // drains (its 503 closes, from the writer's thread) is marked after serve returned: a
      // request pipelined behind it is answered 503 too, which its shut connection drops; it
      // is never run.
      ~MarkIfClosing() {
        if (exchange.closing.load(std::memory_order_acquire)) mark_closing(peer);
      }
    } mark_if_closing{peer, *exchange};
    // Whatever happens below, one answer is queued: a client that has ended its side of the
    // connection meanwhile still gets it (transport.h).
    expect_answer(*peer);
    // Sequentially consistent, with shutdown()'s store of `draining` and load of `in_flight`:
    // each side writes one flag and then reads the other's, and with release and acquire alone
    // both could read the old values (the store still in a write buffer), so that shutdown saw
    // nothing in flight while this request went on to the writer unseen.
    state_->in_flight.fetch_add(1, std::memory_order_seq_cst);
    try {
      Request request;
      request.method = head.method;
      const size_t query = head.target.find('?');
      request.path = percent_decode(origin_path(head.target.substr(0, query)), Part::kPath);
      if (query != std::string_view::npos) read_query(head.target.substr(query + 1), &request);
      if (state_->draining.load(std::memory_order_seq_cst)) {
        answer_early(request, *exchange, shutting_down());
        return;
      }
      auto copy = [](const std::optional<std::string_view>& v) {
        return v ? std::optional<std::string>(*v) : std::nullopt;
      };
      request.authorization = copy(head.authorization);
      request.tenant = copy(head.tenant);
      request.content_type = copy(head.content_type);
      request.content_encoding = std::move(head.content_encoding);
      request.idempotency_key = copy(head.idempotency_key);
      request.if_match = head.if_match;
      request.if_none_match = head.if_none_match;
      request.body = std::move(body);
      state_->api->handle(std::move(request),
                          [exchange](Reply reply) { answer(*exchange, std::move(reply)); });
    } catch (const std::exception&) {
      // Nothing from inside escapes to the client.
      answer(*exchange, problem(make_error(Code::kInternal, "unexpected exception")));
    }
  }

  // Answers a request refused before it was read whole (its head, or the body it declares),
  // and ends the connection: what follows the head (a body, or the rest of a head too long)
  // is never read.
  void refuse(const std::shared_ptr<P::Tcp::Peer>& peer, std::string_view head, Reply reply) {
    mark_closing(peer);
    try {
      expect_answer(*peer);
      count_refused(head, reply.status);
      // Sent as every other answer is; the write side is shut once it is written. An answer to
      // HEAD has no body (RFC 9110 9.3.2), refusals included: a client reads none.
      send(peer, std::move(reply), /*close=*/true,
           /*with_body=*/!head.starts_with("HEAD "), /*end_at_once=*/false);
      // Its client's end is waited for, within the bounds of Linger.
      linger(peer);
    } catch (const std::exception&) {
      // Out of memory: the connection is marked, nothing more is read from it.
      shut_when_written(peer);
    }
  }

  // Shuts the connection's write side once what is queued on it is written (an empty write is
  // queued behind it; writes go out in order), so the client reads the end of the stream after
  // the answer. Only the write side: a close with bytes still unread, such as a refused body,
  // would reset the connection and could take the answer with it.
  static void shut_when_written(const std::shared_ptr<P::Tcp::Peer>& peer) {
    try {
      queue_write(peer, start_write(0), /*shut_after=*/true);
    } catch (const std::exception&) {
      // Out of memory, or the connection broke: it is marked, nothing more is read from it.
    }
  }

  struct Exchange {
    Exchange(std::weak_ptr<P::Tcp::Peer> p, bool h, bool c, std::shared_ptr<Server::State> s)
        : peer(std::move(p)), head_request(h), closing(c), state(std::move(s)) {}
    const std::weak_ptr<P::Tcp::Peer> peer;
    // A HEAD request: its answer has the head an answer to GET would have, and no body
    // (RFC 9110 9.3.2); the client reads none.
    const bool head_request;
    // The request asked for the connection to close, or its reply does.
    std::atomic<bool> closing;
    std::atomic<bool> answered{false};
    const std::shared_ptr<Server::State> state;
  };

  // Counts a refused request in the metrics under the route its request line names, if any.
  void count_refused(std::string_view head, int status) {
    try {
      const std::string_view line = head.substr(0, std::min(head.find("\r\n"), size_t{8192}));
      const size_t sp1 = line.find(' ');
      const std::string_view method = line.substr(0, sp1);
      const std::string_view target =
          sp1 == std::string_view::npos ? std::string_view() : line.substr(sp1 + 1);
      const std::string_view path = target.substr(0, target.find_first_of(" ?"));
      state_->api->count_early_answer(std::string(method),
                                      percent_decode(origin_path(path), Part::kPath), status);
    } catch (const std::exception&) {
      // Out of memory while counting: the answer still goes out.
    }
  }

  // An answer given here, before the Api: counted in the metrics as the Api counts its own.
  void answer_early(const Request& request, Exchange& exchange, Reply reply) {
    try {
      state_->api->count_early_answer(request.method, request.path, reply.status);
    } catch (const std::exception&) {
      // Out of memory while counting: the answer still goes out.
    }
    answer(exchange, std::move(reply));
  }

  static void answer(Exchange& exchange, Reply reply) {
    if (exchange.answered.exchange(true)) return;
    // While draining, every answer closes its connection: one that said keep-alive had its
    // client send the next request on it, which the end of the drain then cut unanswered (a
    // review's SIGTERM under load: 61 requests reset in 8 stops).
    if (reply.close || exchange.state->draining.load(std::memory_order_seq_cst)) {
      exchange.closing.store(true, std::memory_order_release);
    }
    // A 304 has no body (RFC 9110 15.4.5); its Content-Length is the 200's.
    const bool with_body = !exchange.head_request && reply.status != 304;
    send(exchange.peer, std::move(reply), exchange.closing.load(std::memory_order_acquire),
         with_body);
    exchange.state->in_flight.fetch_sub(1, std::memory_order_acq_rel);
  }

  // An answer's bytes, as Pistache's ResponseWriter::send lays them out (status line, the
  // headers, Content-Length, the body), built in one string (a write, transport.h): Pistache
  // formats them through an ostream into a buffer of its own, from a header map of one heap
  // object per header, and copies the body in. Without `with_body`, the body is left out (its
  // Content-Length stays). The status line says HTTP/1.1 to HTTP/1.0 requests too, the highest
  // version gatewayd is conformant to (RFC 9110 6.2; Pistache repeated the request's).
  static std::string wire(const Reply& reply, bool close, bool with_body) {
    const std::string_view connection = close ? "close" : "keep-alive";
    const char* reason = P::Http::codeString(static_cast<P::Http::Code>(reply.status));
    const std::string length = std::to_string(reply.body.size());
    // RFC 9111 4.2.2 lets a cache reuse a 200, 404, 405 or 501 without an expiry for as long as
    // it guesses: a shared cache in front could have answered /readyz 200 after writes stopped
    // (helper 170). No shared cache keeps an answer, and a client's own revalidates each use
    // (a record's with its ETag).
    constexpr std::string_view kCacheControl = "no-cache, private";
    // "HTTP/1.1 200 " and CRLF, the names of the five headers below with ": " and CRLF, their
    // fixed value, and the blank line: what is not counted below, so that the string is
    // allocated once.
    constexpr size_t kFixed =
        13 + 2 + (4 + 4) + (13 + 4) + kCacheControl.size() + (12 + 4) + (10 + 4) + (14 + 4) + 2;
    const std::string& date = date_now();
    size_t size = kFixed + std::strlen(reason) + date.size() + reply.content_type.size() +
                  length.size() + connection.size() + (with_body ? reply.body.size() : 0);
    for (const auto& [name, value] : reply.headers) size += name.size() + value.size() + 4;
    std::string out = start_write(size);
    out += "HTTP/1.1 ";
    out += std::to_string(reply.status);
    out += ' ';
    out += reason;
    out += "\r\n";
    auto header = [&out](std::string_view name, std::string_view value) {
      out += name;
      out += ": ";
      out += value;
      out += "\r\n";
    };
    header("Date", date);
    header("Cache-Control", kCacheControl);
    for (const auto& [name, value] : reply.headers) header(name, value);
    // A 304 carries no body, nor the metadata of one (RFC 9110 15.4.5); its Content-Length is the
    // 200's, as 8.6 allows.
    if (reply.status != 304) header("Content-Type", reply.content_type);
    header("Connection", connection);
    header("Content-Length", length);
    out += "\r\n";
    if (with_body) out += reply.body;
    return out;
  }

  // From any thread. Pistache keeps the connection after a reply that says `Connection: close`;
  // once such a reply is written, the write side is shut, so the client reads the end of the
  // stream and closes, and Pistache then closes its side. With `end_at_once` (a request read
  // whole), the connection then ends at once if the client sent nothing more (client_sends_more);
  // a refusal waits for the client's end, since the rest of what it refused (a body) may still
  // come.
  static void send(const std::weak_ptr<P::Tcp::Peer>& to, Reply reply, bool close,
                   bool with_body = true, bool end_at_once = true) {
    try {
      const std::shared_ptr<P::Tcp::Peer> peer = to.lock();
      if (!peer) return;  // the client went away
      queue_write(peer, wire(reply, close, with_body), /*shut_after=*/close,
                  /*answer=*/true, /*end_after=*/end_at_once);
    } catch (const std::exception&) {
      // The connection broke while answering; nothing more can be done for this client.
    }
  }

  // A connection refused (refuse) whose client's end is waited for: when its client last sent
  // something, for the linger thread to read.
  struct Lingering {
    std::weak_ptr<P::Tcp::Peer> peer;
    std::shared_ptr<Linger::LastInput> last_input;
  };

  // The client of `peer`, a connection that reads no more, has just sent something, which was
  // dropped. A refused one's end is waited for already; after a request whose answer closes
  // (`Connection: close`, HTTP/1.0), the client's end is waited for once that answer is taken,
  // or from now if it was (read_no_more, Linger): the connection did not end once the answer was
  // written, or the client went on sending behind a request that asked for the close.
  void dropped(const std::shared_ptr<P::Tcp::Peer>& peer) {
    // Whatever waits for its client's end below, the connection does not end at once as a closing
    // answer is written: an answer taken and still waiting for the socket as this came was not
    // pending below, and its connection ended once written, resetting the client that went on
    // sending (helper 57).
    client_sends_more(*peer);
    const auto found = lingering_.empty() ? lingering_.end() : lingering_.find(peer.get());
    if (found != lingering_.end() && same_connection(found->second.peer, peer)) {
      found->second.last_input->store(Linger::now(), std::memory_order_relaxed);
      return;
    }
    if (const auto held = held_.find(peer.get()); held != held_.end() && held->second.overflowed &&
                                                  same_connection(held->second.peer, peer)) {
      return;  // waits for its answer (end_after_answer)
    }
    if (answer_pending(*peer)) {
      read_no_more(peer);
    } else {
      linger(peer);
    }
  }

  // Has the linger thread watch the refused connection `peer`.
  void linger(const std::shared_ptr<P::Tcp::Peer>& peer) {
    sweep_ended(lingering_, &linger_sweep_at_);
    auto last_input = state_->linger->watch(peer);
    lingering_.insert_or_assign(peer.get(), Lingering{peer, std::move(last_input)});
  }

  std::shared_ptr<Server::State> state_;
  std::unordered_map<const P::Tcp::Peer*, Held> held_;
  std::unordered_map<const P::Tcp::Peer*, Lingering> lingering_;
  size_t linger_sweep_at_ = 64;
  size_t sweep_at_ = 64;
};

}  // namespace

// The listener thread's accept (the definition of Pistache's below).
namespace {

// How long the listener waits before it tries to accept again after accepting failed for want of
// a descriptor (or of memory): at most this long a connection waits in the backlog once another
// one has closed.
constexpr std::chrono::milliseconds kAcceptPause{50};

// How long a stop waits at most, after the drain's deadline and the last WAF checks, for a request
// still in flight once the writer has no job left unfinished (one on its way to the writer).
constexpr std::chrono::milliseconds kAnswersAfterWrites{5000};

// After how long of waiting for writes past the drain a stop says so on stderr.
constexpr std::chrono::milliseconds kSayWaitingForWrites{5000};

// How long a stop waits at least for the answers queued to be written, even past the drain's
// deadline: those of the last moment (the 503s of the writes left waiting for a check) are
// written in well under this.
constexpr std::chrono::milliseconds kQueuedWrites{20};

// How many bytes of one ended connection's input the exit reads and drops at most: more than a
// socket's receive buffer holds (Linux's largest by default is 6 MB, net.ipv4.tcp_rmem).
constexpr size_t kMostDroppedAtExit = size_t{8} << 20;

// Set once accepting a connection fails for want of a descriptor (or of memory), or waits because
// the descriptors left are kept back, cleared by the next accept that succeeds: each such spell is
// told on stderr once, at its start and at its end.
std::atomic<bool> out_of_descriptors{false};

// Connections never take the last descriptors under the open-file limit: those are kept for the
// store's files (RocksDB opens a new write-ahead log and table files as it goes, and a write it
// cannot make stops every write until gatewayd restarts), the WAF checks' socket pairs and the
// tokens file. Without this, a client that opened connections up to the limit stopped every
// write for good (measured: under a limit of 400, 450 idle connections and a few seconds of
// creates gave "writes stopped: ... 000012.log: Too many open files"). Descriptors are given
// lowest first, so while the lowest free one is at or above the ceiling, every one below it is
// taken, and a new connection waits in the listen backlog until one closes.
std::atomic<int64_t> descriptor_limit{0};  // the soft open-file limit; 0: none known, no ceiling
std::atomic<int64_t> descriptors_kept{0};  // how many under it connections may not take

// Sets the ceiling from the process's open-file limit now: a quarter of the limit is kept back,
// at least 16 and at most 4096 descriptors.
void keep_descriptors_back() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return;
  const auto soft = static_cast<int64_t>(std::min<rlim_t>(limit.rlim_cur, INT32_MAX));
  descriptors_kept.store(std::clamp<int64_t>(soft / 4, 16, 4096), std::memory_order_relaxed);
  descriptor_limit.store(soft, std::memory_order_relaxed);
}

// Whether the lowest free descriptor, the one an accept would take, is one kept back.
bool at_descriptor_ceiling(int listen_fd) {
  const int64_t limit = descriptor_limit.load(std::memory_order_relaxed);
  if (limit == 0) return false;
  // (ThreadSanitizer does not see Pistache close a connection, scripts/tsan.supp says why, and
  // takes the number's next use here for a race with that connection's last read.)
  const int lowest = ::fcntl(listen_fd, F_DUPFD_CLOEXEC, 0);
  if (lowest < 0) return false;  // none free at all: the accept fails and says why
  ::close(lowest);
  return lowest >= limit - descriptors_kept.load(std::memory_order_relaxed);
}

// The endpoint's listener and its listening socket, which Server::shutdown shuts.
GW_EXPOSE(EndpointListenerTag, &P::Http::Endpoint::listener);
GW_EXPOSE(ListenFdTag, &P::Tcp::Listener::listen_fd);
GW_EXPOSE(ListenerPollerTag, &P::Tcp::Listener::poller);

// Pistache's own Listener::acceptConnection, found past this program's definition below; called
// as a function whose first argument is the listener, which is how the Itanium C++ ABI passes
// `this` to a member function.
using AcceptConnection = int (*)(const P::Tcp::Listener*, sockaddr_storage&);
constexpr char kAcceptConnectionSymbol[] =
    "_ZNK8Pistache3Tcp8Listener16acceptConnectionER16sockaddr_storage";

// nullptr if this program was linked against a libpistache without it (Server::start refuses).
AcceptConnection pistache_accept() {
  static const auto found =
      reinterpret_cast<AcceptConnection>(::dlsym(RTLD_NEXT, kAcceptConnectionSymbol));
  return found;
}

int accept_connection(const P::Tcp::Listener& listener, sockaddr_storage& peer_addr) {
  const AcceptConnection pistache = pistache_accept();
  if (pistache == nullptr) throw std::logic_error("Pistache's Listener::acceptConnection is gone");
  const int listen_fd = listener.*member_of(ListenFdTag{});
  if (at_descriptor_ceiling(listen_fd)) {
    if (!out_of_descriptors.exchange(true, std::memory_order_relaxed)) {
      std::fprintf(stderr,
                   "gatewayd: cannot accept connections: the descriptors left are the last %lld "
                   "under the open-file limit (%lld), kept for the store and the WAF checks; new "
                   "connections wait until others close\n",
                   static_cast<long long>(descriptors_kept.load(std::memory_order_relaxed)),
                   static_cast<long long>(descriptor_limit.load(std::memory_order_relaxed)));
    }
    std::this_thread::sleep_for(kAcceptPause);
    throw P::Tcp::SocketError("the descriptors left are kept back");
  }
  try {
    const int fd = pistache(&listener, peer_addr);
    // Each answer goes out as soon as it is written, not held by Nagle's algorithm until the one
    // before it is acknowledged: a client that sent a pipeline acknowledges the first answer only
    // after its delayed-ACK timer (about 40 ms on Linux), since it has nothing to send until all
    // have come (helper 132: 44 ms for two pipelined GETs, 0.1 ms for one). Pistache sets no
    // option on the sockets it accepts. A failure leaves the connection as it was.
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (out_of_descriptors.exchange(false, std::memory_order_relaxed)) {
      std::fprintf(stderr, "gatewayd: accepting connections again\n");
    }
    return fd;
  } catch (const P::Tcp::SocketError&) {
    // accept4's error, which Pistache read to make the exception (no call on the exception
    // itself: at the open-file limit, UndefinedBehaviorSanitizer's check of its dynamic type
    // cannot open the pipe it checks memory with, and fails the call).
    const int error = errno;
    int listening = 1;
    socklen_t size = sizeof listening;
    if (::getsockopt(listen_fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &size) == 0 &&
        listening == 0) {
      // The listening socket was shut (Server::shutdown) as the listener was about to accept on
      // it, and accept fails on it. The listener's loop no longer watches it, so this comes once
      // at most; the pause is kept all the same.
      std::this_thread::sleep_for(kAcceptPause);
      throw;
    }
    if (error != EMFILE && error != ENFILE && error != ENOBUFS && error != ENOMEM) throw;
    if (!out_of_descriptors.exchange(true, std::memory_order_relaxed)) {
      rlimit limit{};
      const std::string cap =
          error == EMFILE && ::getrlimit(RLIMIT_NOFILE, &limit) == 0
              ? " (this process may have " + std::to_string(limit.rlim_cur) + " open files)"
              : "";
      std::fprintf(stderr,
                   "gatewayd: cannot accept connections: %s%s; new connections wait until others "
                   "close\n",
                   std::system_category().message(error).c_str(), cap.c_str());
    }
    std::this_thread::sleep_for(kAcceptPause);
    throw;  // Pistache's own exception, which its listener catches and goes on
  }
}

}  // namespace

Server::Server(ServerConfig config, std::shared_ptr<Api> api)
    : config_(std::move(config)), state_(std::make_shared<State>()) {
  state_->api = std::move(api);
  state_->max_request_bytes = config_.max_request_bytes;
  state_->linger = std::make_unique<Linger>(config_.lingering_timeout, config_.lingering_time);
}

Server::~Server() = default;

Result<uint16_t> Server::start() {
  if (pistache_accept() == nullptr) {
    return make_error(Code::kInternal, std::string("libpistache has no ") +
                                           kAcceptConnectionSymbol +
                                           " (gatewayd is built for Pistache 0.0.5)");
  }
  if (pistache_on_connection() == nullptr) {
    return make_error(Code::kInternal, std::string("libpistache has no ") + kOnConnectionSymbol +
                                           " (gatewayd is built for Pistache 0.0.5)");
  }
  try {
    P::Address addr(config_.host, P::Port(config_.port));
    endpoint_ = std::make_unique<P::Http::Endpoint>(addr);
    // Pistache's timer ends a connection once no whole request has come on it for the header
    // timeout (or the body one: it checks both), with a 408 that is gatewayd's (Handler::read
    // restarts that clock as it serves a request).
    idle_timeout_ms.store(config_.idle_timeout.count(), std::memory_order_relaxed);
    keep_descriptors_back();
    answer_timeouts_with(&Handler::timeout_answer);
    auto opts = P::Http::Endpoint::options()
                    .threads(config_.threads)
                    .flags(P::Tcp::Options::ReuseAddr)
                    .headerTimeout(config_.idle_timeout)
                    .bodyTimeout(config_.idle_timeout);
    endpoint_->init(opts);
    endpoint_->setHandler(P::Http::make_handler<Handler>(state_));
    state_->linger->start();
    endpoint_->serveThreaded();
    return static_cast<uint16_t>(endpoint_->getPort());
  } catch (const std::exception& e) {
    const bool v6 = config_.host.find(':') != std::string::npos;
    const std::string where =
        (v6 ? "[" + config_.host + "]" : config_.host) + ":" + std::to_string(config_.port);
    return make_error(Code::kUnavailable, "cannot listen on " + where + ": " + e.what());
  }
}

void Server::shutdown(int drain_ms) {
  state_->draining.store(true, std::memory_order_seq_cst);  // see Handler::serve
  // No new connection is taken while the requests in flight are answered: the listening socket
  // is shut, so a client's connect is refused at once (the port is free for another gatewayd),
  // and a connection not yet accepted is reset. Left open, it was accepted for the whole drain,
  // and each client that kept connecting had its last request, sent whole, cut by a reset as the
  // listener closed.
  //
  // The listener's thread stops watching the socket first: shut, it is a hang-up to epoll, not
  // readable, so Pistache's loop never calls accept on it and went round again at once, a whole
  // core spinning for the whole drain (lifecycle_test).
  if (endpoint_) {
    P::Tcp::Listener& listener = *endpoint_.*member_of(EndpointListenerTag{});
    const int listen_fd = listener.*member_of(ListenFdTag{});
    if (listen_fd >= 0) {
      try {
        (listener.*member_of(ListenerPollerTag{})).removeFd(listen_fd);
      } catch (const std::exception&) {
        // Not watched (never served): nothing spins on it.
      }
      ::shutdown(listen_fd, SHUT_RDWR);
    }
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(drain_ms);
  // Polls `busy` until it is false or `until` has passed.
  auto wait_while = [](auto busy, std::chrono::steady_clock::time_point until) {
    while (busy() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  };
  auto wait_in_flight = [this, &wait_while](std::chrono::steady_clock::time_point until) {
    wait_while([this] { return state_->in_flight.load(std::memory_order_seq_cst) > 0; }, until);
  };
  wait_in_flight(deadline);
  // Writes still waiting for a WAF check are answered 503, those being checked finish (bounded by
  // the sandbox's limits), while their connections are open; no check runs past this.
  state_->api->stop();
  // A write whose check just finished is with the writer now, as is any write whose batch is slow
  // to be durable, and answered once it is. Its answer is waited for as long as the writer has
  // jobs unfinished, without a bound: the writer's stop waits for those jobs anyway, so a bound
  // here made the stop no shorter and lost the answer (with 5 s, a batch held longer was applied
  // by the writer's stop and its 201 queued for a connection no HTTP thread served any more;
  // lifecycle_test holds the commit thread 6.5 s). A request not with the writer gets
  // kAnswersAfterWrites.
  const auto waits_from = std::chrono::steady_clock::now();
  const auto others_until = waits_from + kAnswersAfterWrites;
  bool said = false;
  while (state_->in_flight.load(std::memory_order_seq_cst) > 0) {
    const bool writes = config_.writes_unfinished && config_.writes_unfinished();
    const auto now = std::chrono::steady_clock::now();
    if (!writes && now >= others_until) break;
    if (writes && !said && now - waits_from >= kSayWaitingForWrites) {
      std::fprintf(stderr, "gatewayd: the stop waits for writes not yet durable\n");
      said = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // Every connection ends behind what is queued on it. Pistache's shutdown below stops the HTTP
  // threads but leaves the connections open, unread, until the process exits: a request a client
  // sent on one meanwhile (the rest of the stop: the verifier, the mirror's flush of up to 3 s, the
  // writer) was never answered, and its connection was reset at the exit (helper 109). Ended now,
  // a client sees the end of the stream as the stop begins. A quiet end, not end_connection's: shut
  // both ways, a connection whose client sent anything more was reset at once, which took the part
  // of an answer still in the socket's buffers with it (helper 110: 24 KB of a 645 KB page read
  // slowly, with a request sent behind it after the signal).
  std::vector<std::shared_ptr<P::Tcp::Peer>> open;
  {
    std::lock_guard lock(state_->connections_mutex);
    for (const auto& [key, connection] : state_->connections) {
      if (auto live = connection.peer.lock()) open.push_back(std::move(live));
    }
  }
  std::vector<int>& copies = state_->ended_copies;
  try {
    copies.reserve(open.size());
  } catch (const std::exception&) {
    // Out of memory: no copies, and what clients send once the HTTP threads have stopped resets
    // their connections at the exit.
  }
  for (const auto& peer : open) {
    try {
      stop_connection(peer);
    } catch (const std::exception&) {
      // Out of memory: this connection ends at the process's exit, as before.
      continue;
    }
    if (copies.size() == copies.capacity()) continue;
    // None if the descriptors have run out: as without copies. A connection that ended meanwhile
    // may have left its number to another file; its copy is then that file's, from which the exit
    // reads nothing (not a socket) or what nothing reads any more (the resolver and the mirror
    // have stopped).
    const int copy = ::fcntl(peer->fd(), F_DUPFD_CLOEXEC, 0);
    if (copy < 0) continue;
    // Not one of the descriptors kept back for the store, the resolver and the mirror, which the
    // rest of the stop may need (helper 114: 250 connections under a limit of 256 took all 256).
    // Given lowest first, every one after it would be kept back too.
    const int64_t limit = descriptor_limit.load(std::memory_order_relaxed);
    if (limit != 0 && copy >= limit - descriptors_kept.load(std::memory_order_relaxed)) {
      ::close(copy);
      break;
    }
    copies.push_back(copy);
  }
  open.clear();
  // Every answer given is written whole before the connections go, up to the drain's deadline:
  // one that waited for a client reading it (a page of megabytes) was cut as the drain ended, 20
  // ms after the last answer was queued (helper 68: 7 MB of 18 read, then the end of the stream).
  // A client that does not read holds the stop that long at most.
  const auto written_by = std::max(deadline, std::chrono::steady_clock::now() + kQueuedWrites);
  wait_while([] { return unwritten_writes() > 0; }, written_by);
  // Before the transports go: the linger thread queues writes on them.
  state_->linger->stop();
  if (endpoint_) endpoint_->shutdown();
}

void Server::drop_unread_input() {
  // A close with bytes unread resets the connection (RFC 2525 2.17), and the reset takes with it
  // what of the connection's last answer the kernel has not yet sent. A client that reads a large
  // answer slowly, and sent its next request after the HTTP threads stopped (the rest of the
  // stop: the verifier, the mirror's flush of up to 3 s, the writer), had that answer cut at the
  // exit (lifecycle_test). Read and dropped here, its bytes leave nothing unread; the kernel goes
  // on sending the answer after the exit.
  std::array<char, 64 * 1024> buffer;
  for (const int fd : state_->ended_copies) {
    // At most what a receive buffer holds, so that a client sending without pause cannot hold
    // the exit.
    for (size_t dropped = 0; dropped < kMostDroppedAtExit;) {
      const ssize_t n = ::recv(fd, buffer.data(), buffer.size(), MSG_DONTWAIT);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      dropped += static_cast<size_t>(n);
    }
    ::close(fd);
  }
  state_->ended_copies.clear();
}

bool Server::join(std::chrono::milliseconds limit) {
  if (!endpoint_) return true;
  // The endpoint's destruction joins its threads; one busy for good would hold it, and the stop,
  // forever. So another thread destroys it, and is waited for up to `limit`.
  auto joined = std::make_shared<std::promise<void>>();
  std::future<void> done = joined->get_future();
  std::thread([endpoint = std::move(endpoint_), joined]() mutable {
    endpoint.reset();
    joined->set_value();
  }).detach();
  return done.wait_for(limit) == std::future_status::ready;
}

}  // namespace gw::http

// Pistache 0.0.5's listener thread polls the listening socket level-triggered and accepts one
// connection per turn. When accept4 fails for want of a descriptor (the process's open-file
// limit, EMFILE, or the system's, ENFILE), the socket stays readable, and the next turn tried
// again at once, for as long as the limit held: a core busy (2.0 s of CPU in 2 s, limit 64, 100
// connections). This definition takes the place of Pistache's (called from libpistache through the
// PLT, as in transport.cc) and calls it (gw::http::accept_connection): after such a failure it
// waits kAcceptPause before Pistache's exception goes on to the listener's loop, so the
// connections wait in the listen backlog until others close, and stderr says so once. Pistache's
// own accept and exceptions are kept: a descriptor accepted in this program's code and read in
// transport.cc was a race to ThreadSanitizer, which skips libpistache's calls (scripts/tsan.supp)
// and so does not see how Pistache hands the connection over; and Pistache's exception types made
// here failed UndefinedBehaviorSanitizer's check of their dynamic type at the open-file limit.
namespace Pistache::Tcp {

int Listener::acceptConnection(struct sockaddr_storage& peer_addr) const {
  return gw::http::accept_connection(*this, peer_addr);
}

}  // namespace Pistache::Tcp
