#include "http/server.h"

#include <pistache/endpoint.h>
#include <pistache/http.h>
#include <pistache/peer.h>
#include <pistache/transport.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <functional>
#include <future>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/expose.h"
#include "core/text.h"
#include "http/head_check.h"
#include "http/problem.h"
#include "http/transport.h"

namespace gw::http {

namespace P = Pistache;

struct Server::State {
  std::shared_ptr<Api> api;
  std::atomic<bool> draining{false};
  std::atomic<int64_t> in_flight{0};
};

namespace {

// Pistache parses Content-Type eagerly and answers a plain-text 415 for values it cannot parse
// (e.g. "application/jsonp"). Registered in its place, this header keeps the raw value so the Api
// decides, with a problem+json reply.
class RawContentType final : public P::Http::Header::Header {
 public:
  NAME("Content-Type")
  void parse(const std::string& data) override { value_ = data; }
  void parseRaw(const char* str, size_t len) override { value_.assign(str, len); }
  void write(std::ostream& os) const override { os << value_; }
  const std::string& value() const { return value_; }

 private:
  std::string value_;
};

// Some of Pistache's private members are reached through GW_EXPOSE (core/expose.h); each tag
// below names one.
//
// Pistache's header Registry refuses a second registration of a name and offers no way to remove
// one, so its map is swapped through this, once, before any connection is served.
GW_EXPOSE(RegistryMapTag, &P::Http::Header::Registry::registry);

// A Tcp::Handler's transport, which Pistache sets only on the handler it was given; see
// PistacheParser.
GW_EXPOSE(HandlerTransportTag, &P::Tcp::Handler::transport_);

// The largest body a request may declare (--max-request-bytes of the server being started).
std::atomic<uint64_t> max_declared_body{0};

// Pistache reserved a body as large as a request's Content-Length before a byte of it came (a
// declared 10 TB took 10 TB of address space, so a few connections could take all of it), and
// read the value with std::stoull, which takes "5abc" as 5 and answered "-5" or "x" with a
// plain-text 500 naming the exception. This parser takes digits alone. A declaration over the
// limit, or one that is no number, reads no body: onRequest answers it (413 or 400, with
// Connection: close, before anything else is checked) from what this header kept.
class CheckedContentLength final : public P::Http::Header::ContentLength {
 public:
  enum class Verdict { kFine, kTooLarge, kInvalid };
  void parse(const std::string& data) override {
    std::string_view v = data;
    while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
    while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
    const bool digits = !v.empty() && v.size() <= 19 && std::all_of(v.begin(), v.end(), [](char c) {
      return c >= '0' && c <= '9';
    });
    uint64_t n = 0;
    if (digits) std::from_chars(v.data(), v.data() + v.size(), n);
    verdict_ = !digits                                                 ? Verdict::kInvalid
               : n > max_declared_body.load(std::memory_order_relaxed) ? Verdict::kTooLarge
                                                                       : Verdict::kFine;
    ContentLength::parse(verdict_ == Verdict::kFine ? std::string(v) : std::string("0"));
  }
  Verdict verdict() const { return verdict_; }

 private:
  Verdict verdict_ = Verdict::kFine;
};

// Pistache's decoder of chunked request bodies spun for good on a chunk whose closing CRLF came
// split across two reads (one HTTP thread at 100% CPU, its connections unanswered, from about 100
// bytes and no token), and a chunked body could run to 16 MiB past --max-request-bytes before
// it was refused. Registered in Pistache's place, this header never reads as chunked, so Pistache
// never decodes such a body: it answers every request with a Transfer-Encoding as it answered
// those with a coding other than chunked, with its plain-text 501 (RFC 9112 6.3 lets a server
// require Content-Length).
class RefusedTransferEncoding final : public P::Http::Header::TransferEncoding {
 public:
  void parse(const std::string&) override {}
  void parseRaw(const char*, size_t) override {}
};

void use_checked_headers() {
  auto& registry = P::Http::Header::Registry::instance();
  auto& map = registry.*member_of(RegistryMapTag{});
  map.erase("Content-Type");
  registry.registerHeader<RawContentType>();
  map.erase("Content-Length");
  registry.registerHeader<CheckedContentLength>();
  map.erase("Transfer-Encoding");
  registry.registerHeader<RefusedTransferEncoding>();
}

// The answer to a request whose Content-Length CheckedContentLength refused, if it did.
std::optional<Reply> refused_length(const P::Http::Request& req) {
  auto header = req.headers().tryGet<P::Http::Header::ContentLength>();
  const auto* checked = dynamic_cast<const CheckedContentLength*>(header.get());
  if (checked == nullptr || checked->verdict() == CheckedContentLength::Verdict::kFine) return {};
  if (checked->verdict() == CheckedContentLength::Verdict::kTooLarge) {
    return body_too_large(max_declared_body.load(std::memory_order_relaxed));
  }
  Reply r =
      problem(make_error(Code::kBadRequest, "Content-Length must be a decimal number of bytes"));
  r.close = true;  // the body, if one follows, is never read
  return r;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

enum class Part { kPath, kQuery };

// The path of a request target. A server must take the absolute form too (RFC 9112 3.2.2), which
// clients send to proxies: "http://host:port/v1/webhook" is "/v1/webhook". Pistache hands it over
// as it came (the query already split off); an absolute form with no path is "/".
std::string_view origin_path(std::string_view target) {
  for (std::string_view scheme : {"http://", "https://"}) {
    if (target.size() >= scheme.size() && ascii_iequals(target.substr(0, scheme.size()), scheme)) {
      const size_t path = target.find('/', scheme.size());
      return path == std::string_view::npos ? std::string_view("/") : target.substr(path);
    }
  }
  return target;
}

// Percent-decoding (Pistache decodes neither the path nor query parameters). In a query, '+' is a
// space. In a path, "%2F" stays as it is: an escaped slash is part of a segment, and decoding it
// would make "/v1/webhook/ID%2Fhistory" the history's path. Invalid escapes stay as they are.
std::string percent_decode(std::string_view in, Part part) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const int escaped = (in[i] == '%' && i + 2 < in.size() && hex_value(in[i + 1]) >= 0 &&
                         hex_value(in[i + 2]) >= 0)
                            ? hex_value(in[i + 1]) * 16 + hex_value(in[i + 2])
                            : -1;
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

// The request headers the Api reads. Pistache keeps the headers it registers typed (of ours,
// Authorization, and Content-Type as a RawContentType) and all others raw, in maps whose every
// lookup lower-cases the name into a new string; so the typed ones are looked up once each and
// the raw ones are picked out in one pass. Pistache drops the blanks before a value but keeps
// those after it, which are not part of it either (RFC 9110 5.5). Of a repeated header, Pistache
// keeps only the first.
void read_headers(const P::Http::Header::Collection& headers, Request* out) {
  auto value = [](std::string_view v) { return std::string(trim_blanks(v)); };
  if (auto auth = std::dynamic_pointer_cast<const P::Http::Header::Authorization>(
          headers.tryGet(P::Http::Header::Authorization::Name))) {
    out->authorization = value(auth->value());
  }
  if (auto type = std::dynamic_pointer_cast<const RawContentType>(
          headers.tryGet(RawContentType::Name))) {
    out->content_type = value(type->value());
  }
  for (const auto& [name, raw] : headers.rawList()) {
    if (ascii_iequals(name, "X-Tenant-ID")) {
      out->tenant = value(raw.value());
    } else if (ascii_iequals(name, "If-Match")) {
      out->if_match = value(raw.value());
    } else if (ascii_iequals(name, "Idempotency-Key")) {
      out->idempotency_key = value(raw.value());
    }
  }
}

// Connection is a list of options (RFC 9110 7.6.1): `close` among them closes the connection
// (RFC 9112 9.6); Pistache's typed header reads only the first. HTTP/1.0 closes unless asked
// for keep-alive.
bool wants_close(const P::Http::Request& req) {
  bool keep_alive = false;
  for (const auto& [name, raw] : req.headers().rawList()) {
    if (!ascii_iequals(name, "Connection")) continue;
    const std::string value = raw.value();  // a copy, not a reference
    std::string_view options = value;
    while (!options.empty()) {
      const size_t comma = options.find(',');
      const std::string_view option = trim_blanks(options.substr(0, comma));
      if (ascii_iequals(option, "close")) return true;
      if (ascii_iequals(option, "keep-alive")) keep_alive = true;
      options = comma == std::string_view::npos ? std::string_view() : options.substr(comma + 1);
    }
  }
  return req.version() != P::Http::Version::Http11 && !keep_alive;
}

// Pistache counts a request's head and body, as it buffers them before handing the request over,
// against a limit of its own, past which it answers a plain-text 413. A head it is given is at
// most kMaxHeadBytes and the read it ended in (Handler::onInput), and a body at most the
// Content-Length that CheckedContentLength let through; so its limit sits above both, with room
// for the reads of up to 4 KiB it buffers whole, and is never reached. It bounds what one
// connection may make gatewayd hold (it was 16 MiB over --max-request-bytes before heads were
// bounded).
size_t pistache_request_limit(size_t max_request_bytes) {
  return max_request_bytes + kMaxHeadBytes + (64 << 10);
}

// The name of the mark a connection gets once nothing more is to be read from it: a reply on it
// closed it (Handler::onRequest), or its request was refused before it was parsed whole
// (Handler::onInput). Only the connection's own HTTP thread reads or sets it.
constexpr const char* kClosingMark = "gw.closing";

bool marked_closing(const P::Tcp::Peer& peer) { return peer.tryGetData(kClosingMark) != nullptr; }

void mark_closing(const std::shared_ptr<P::Tcp::Peer>& peer) {
  if (marked_closing(*peer)) return;  // Pistache refuses a second value under one name
  // One marker for every connection, never freed: Pistache frees a connection's data on
  // whichever of its threads drops the connection last, out of ThreadSanitizer's sight.
  static const auto* const marker = new std::shared_ptr<bool>(std::make_shared<bool>(true));
  peer->putData(kClosingMark, *marker);
}

// Pistache's own parsing of requests (Http::Handler::onInput, private there), for the Handler in
// front of it: a second Http::Handler, on the front one's transport, that hands each request it
// parses back to the front one.
class PistacheParser final : public P::Http::Handler {
 public:
  HTTP_PROTOTYPE(PistacheParser)

  explicit PistacheParser(P::Http::Handler* front) : front_(front) {}

  void parse(const char* data, size_t len, const std::shared_ptr<P::Tcp::Peer>& peer,
             P::Tcp::Transport* transport, size_t max_response_bytes) {
    this->*member_of(HandlerTransportTag{}) = transport;
    setMaxResponseSize(max_response_bytes);
    static_cast<P::Tcp::Handler&>(*this).onInput(data, len, peer);
  }

  void onRequest(const P::Http::Request& req, P::Http::ResponseWriter response) override {
    front_->onRequest(req, std::move(response));
  }

 private:
  P::Http::Handler* front_;
};

class Handler final : public P::Http::Handler {
 public:
  HTTP_PROTOTYPE(Handler)

  explicit Handler(std::shared_ptr<Server::State> state)
      : state_(std::move(state)), parser_(this) {}
  // A clone, one per HTTP thread, has a parser and held heads of its own.
  Handler(const Handler& other) : P::Http::Handler(other), state_(other.state_), parser_(this) {}

  // Every read of a connection comes here first. Pistache parses a head again from its start
  // each time more of it comes (a header of megabytes sent in pieces kept a thread busy for
  // minutes) and lets through heads that a server must refuse (head_check.h). So a head is held
  // here until it has all come, up to kMaxHeadBytes (431 past that), checked (400), and only
  // then given to Pistache's parser, in one piece; a body goes straight on.
  void onInput(const char* data, size_t len, const std::shared_ptr<P::Tcp::Peer>& peer) override {
    if (marked_closing(*peer)) return;
    const std::shared_ptr<P::Http::RequestParser> pistache = getParser(peer);
    if (pistache->step()->id() == P::Http::Private::BodyStep::Id) {
      parse(data, len, peer, *pistache);
      return;
    }
    auto held = held_.empty() ? held_.end() : held_.find(peer.get());
    if (held != held_.end() &&
        (held->second.peer.owner_before(peer) || peer.owner_before(held->second.peer))) {
      held_.erase(held);  // left by a connection gone before this one, at the same address
      held = held_.end();
    }
    std::string_view bytes(data, len);
    size_t searched = 0;
    if (held != held_.end()) {
      searched = held->second.head.size();
      held->second.head.append(data, len);
      bytes = held->second.head;
    }
    const size_t end = head_end(bytes, searched);
    if (end == std::string_view::npos && bytes.size() <= kMaxHeadBytes) {
      if (held == held_.end()) hold(peer, bytes);
      return;
    }
    std::optional<Error> refused;
    if (end == std::string_view::npos || end > kMaxHeadBytes) {
      refused = make_error(Code::kHeadersTooLarge, "the request line and headers exceed " +
                                                       std::to_string(kMaxHeadBytes) + " bytes");
    } else {
      refused = check_head(bytes.substr(0, end));
    }
    if (refused) {
      refuse(peer, bytes, *refused);
    } else {
      parse(bytes.data(), bytes.size(), peer, *pistache);
    }
    if (held != held_.end()) held_.erase(held);
  }

  void onDisconnection(const std::shared_ptr<P::Tcp::Peer>& peer) override {
    held_.erase(peer.get());
    P::Tcp::Handler::onDisconnection(peer);
  }

  void onRequest(const P::Http::Request& req, P::Http::ResponseWriter response) override {
    handed_over_ = true;
    // A connection whose reply said `Connection: close` takes no further request (RFC 9112 9.6):
    // any sent on it after that one is neither applied nor answered. Pistache hands a
    // connection's requests over one after another on one thread, which is the only one that
    // reads or sets the mark.
    const std::shared_ptr<P::Tcp::Peer> peer = response.getPeer();
    if (peer == nullptr || marked_closing(*peer)) return;
    // One allocation holds what the reply needs; exactly one reply goes out, even if the Api
    // answered and then something threw.
    auto exchange = std::make_shared<Exchange>(peer, req.version(), wants_close(req), state_);
    struct MarkIfClosing {
      const std::shared_ptr<P::Tcp::Peer>& peer;
      const Exchange& exchange;
      // Replies that close are given before onRequest returns (the early answers below and
      // the Api's 413), or the request asked for the close itself.
      ~MarkIfClosing() {
        if (exchange.closing.load(std::memory_order_acquire)) mark_closing(peer);
      }
    } mark_if_closing{peer, *exchange};
    // Sequentially consistent, with shutdown()'s store of `draining` and load of `in_flight`:
    // each side writes one flag and then reads the other's, and with release and acquire alone
    // both could read the old values (the store still in a write buffer), so that shutdown saw
    // nothing in flight while this request went on to the writer unseen.
    state_->in_flight.fetch_add(1, std::memory_order_seq_cst);
    if (state_->draining.load(std::memory_order_seq_cst)) {
      Reply r = problem(make_error(Code::kUnavailable, "shutting down"), kShuttingDown);
      r.close = true;
      answer_early(req, *exchange, std::move(r));
      return;
    }
    if (auto refused = refused_length(req)) {
      answer_early(req, *exchange, std::move(*refused));
      return;
    }
    try {
      Request request;
      request.method = P::Http::methodString(req.method());
      request.path = percent_decode(origin_path(req.resource()), Part::kPath);
      for (auto it = req.query().parameters_begin(); it != req.query().parameters_end(); ++it) {
        // An empty segment (`?&a=1`, `a=1&&b=2`, a trailing `&`) names nothing: skipped.
        if (it->first.empty() && it->second.empty()) continue;
        request.query.emplace_back(percent_decode(it->first, Part::kQuery),
                                   percent_decode(it->second, Part::kQuery));
      }
      read_headers(req.headers(), &request);
      request.body = req.body();
      state_->api->handle(std::move(request),
                          [exchange](Reply reply) { answer(*exchange, std::move(reply)); });
    } catch (const std::exception&) {
      // Nothing from inside escapes to the client; Pistache would send the exception text.
      answer(*exchange, problem(make_error(Code::kInternal, "unexpected exception")));
    }
  }

 private:
  // A head that has not all come yet, of one connection.
  struct Held {
    std::weak_ptr<P::Tcp::Peer> peer;
    std::string head;
  };

  void hold(const std::shared_ptr<P::Tcp::Peer>& peer, std::string_view bytes) {
    // Pistache tells of each connection that ends (onDisconnection); should it miss one, its
    // held head is dropped here, once as many heads are held as twice the count after the last
    // such sweep.
    if (held_.size() >= sweep_at_) {
      std::erase_if(held_, [](const auto& entry) { return entry.second.peer.expired(); });
      sweep_at_ = std::max<size_t>(64, 2 * held_.size());
    }
    held_.emplace(peer.get(), Held{peer, std::string(bytes)});
  }

  // Gives bytes to Pistache's parser, which hands a request it completes to onRequest.
  void parse(const char* data, size_t len, const std::shared_ptr<P::Tcp::Peer>& peer,
             P::Http::RequestParser& pistache) {
    handed_over_ = false;
    parser_.parse(data, len, peer, transport(), getMaxResponseSize());
    // Pistache answered with an error of its own (a Transfer-Encoding, a header value it could
    // not parse, a request over its size limit) and dropped what it had read: where that request
    // ends is not known, so nothing more is read from the connection, and once Pistache's answer
    // is written (writes go out in the order they were queued), its write side is shut.
    if (!handed_over_ && pistache.step()->id() == P::Http::Private::RequestLineStep::Id) {
      mark_closing(peer);
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

  // Answers a head refused before Pistache saw it, and ends the connection: what follows the
  // head (a body, or the rest of a head too long) is never read.
  void refuse(const std::shared_ptr<P::Tcp::Peer>& peer, std::string_view head,
              const Error& error) {
    mark_closing(peer);
    try {
      Reply reply = problem(error);
      count_refused(head, reply.status);
      // Sent as every other answer is; the write side is shut once it is written.
      send(peer, P::Http::Version::Http11, std::move(reply), /*close=*/true);
    } catch (const std::exception&) {
      // Out of memory: the connection is marked, nothing more is read from it.
      shut_when_written(peer);
    }
  }

  // Counts a refused head in the metrics under the route its request line names, if any.
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

  struct Exchange {
    Exchange(std::weak_ptr<P::Tcp::Peer> p, P::Http::Version v, bool c,
             std::shared_ptr<Server::State> s)
        : peer(std::move(p)), version(v), closing(c), state(std::move(s)) {}
    const std::weak_ptr<P::Tcp::Peer> peer;
    const P::Http::Version version;  // the request's, which the status line repeats
    // The request asked for the connection to close, or its reply does.
    std::atomic<bool> closing;
    std::atomic<bool> answered{false};
    const std::shared_ptr<Server::State> state;
  };

  // An answer given here, before the Api: counted in the metrics as the Api counts its own.
  void answer_early(const P::Http::Request& req, Exchange& exchange, Reply reply) {
    try {
      const std::string path = percent_decode(origin_path(req.resource()), Part::kPath);
      state_->api->count_early_answer(P::Http::methodString(req.method()), path, reply.status);
    } catch (const std::exception&) {
      // Out of memory while counting: the answer still goes out.
    }
    answer(exchange, std::move(reply));
  }

  static void answer(Exchange& exchange, Reply reply) {
    if (exchange.answered.exchange(true)) return;
    if (reply.close) exchange.closing.store(true, std::memory_order_release);
    send(exchange.peer, exchange.version, std::move(reply),
         exchange.closing.load(std::memory_order_acquire));
    exchange.state->in_flight.fetch_sub(1, std::memory_order_acq_rel);
  }

  // An answer's bytes, as Pistache's ResponseWriter::send lays them out (status line in the
  // request's version, the headers, Content-Length, the body), built in one string (a write,
  // transport.h): Pistache formats them through an ostream into a buffer of its own, from a
  // header map of one heap object per header, and copies the body in.
  static std::string wire(P::Http::Version version, const Reply& reply, bool close) {
    const std::string_view connection = close ? "close" : "keep-alive";
    const char* reason = P::Http::codeString(static_cast<P::Http::Code>(reply.status));
    const std::string length = std::to_string(reply.body.size());
    // "HTTP/1.1 200 " and CRLF, the names of the three headers below with ": " and CRLF, and the
    // blank line: what is not counted below, so that the string is allocated once.
    constexpr size_t kFixed = 13 + 2 + (12 + 4) + (10 + 4) + (14 + 4) + 2;
    size_t size = kFixed + std::strlen(reason) + reply.content_type.size() + length.size() +
                  connection.size() + reply.body.size();
    for (const auto& [name, value] : reply.headers) size += name.size() + value.size() + 4;
    std::string out = start_write(size);
    out += version == P::Http::Version::Http10 ? "HTTP/1.0 " : "HTTP/1.1 ";
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
    for (const auto& [name, value] : reply.headers) header(name, value);
    header("Content-Type", reply.content_type);
    header("Connection", connection);
    header("Content-Length", length);
    out += "\r\n";
    out += reply.body;
    return out;
  }

  // From any thread. Pistache keeps the connection after a reply that says `Connection: close`;
  // once such a reply is written, the write side is shut, so the client reads the end of the
  // stream and closes, and Pistache then closes its side.
  static void send(const std::weak_ptr<P::Tcp::Peer>& to, P::Http::Version version, Reply reply,
                   bool close) {
    try {
      const std::shared_ptr<P::Tcp::Peer> peer = to.lock();
      if (!peer) return;  // the client went away
      queue_write(peer, wire(version, reply, close), /*shut_after=*/close);
    } catch (const std::exception&) {
      // The connection broke while answering; nothing more can be done for this client.
    }
  }

  std::shared_ptr<Server::State> state_;
  PistacheParser parser_;
  std::unordered_map<const P::Tcp::Peer*, Held> held_;
  size_t sweep_at_ = 64;
  bool handed_over_ = false;  // parse() handed a request over
};

}  // namespace

Server::Server(ServerConfig config, std::shared_ptr<Api> api)
    : config_(std::move(config)), state_(std::make_shared<State>()) {
  state_->api = std::move(api);
}

Server::~Server() = default;

Result<uint16_t> Server::start() {
  try {
    max_declared_body.store(config_.max_request_bytes, std::memory_order_relaxed);
    static std::once_flag checked_headers;
    std::call_once(checked_headers, use_checked_headers);
    P::Address addr(config_.host, P::Port(config_.port));
    endpoint_ = std::make_unique<P::Http::Endpoint>(addr);
    auto opts = P::Http::Endpoint::options()
                    .threads(config_.threads)
                    .flags(P::Tcp::Options::ReuseAddr)
                    .maxRequestSize(pistache_request_limit(config_.max_request_bytes))
                    .maxResponseSize(max_response_bytes(config_.max_request_bytes));
    endpoint_->init(opts);
    endpoint_->setHandler(P::Http::make_handler<Handler>(state_));
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
  state_->draining.store(true, std::memory_order_seq_cst);  // see Handler::onRequest
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(drain_ms);
  while (state_->in_flight.load(std::memory_order_seq_cst) > 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // Let the transports flush what was just queued.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (endpoint_) endpoint_->shutdown();
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
