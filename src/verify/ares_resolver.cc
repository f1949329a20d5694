#include "verify/ares_resolver.h"

#include <ares.h>
#include <arpa/nameser.h>
#include <openssl/rand.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "core/taking_turns.h"
#include "core/thread_name.h"

namespace gw {

namespace {

// `name` with the case of each letter chosen at random (DNS 0x20, draft-vixie-dnsext-dns0x20).
// A server copies the question into its reply letter for letter, so a forged reply must guess
// one bit per letter besides c-ares's 16-bit query id and the lookup's source port.
std::string mixed_case(std::string_view name) {
  std::string out(name);
  std::vector<unsigned char> bits((out.size() + 7) / 8);
  if (RAND_bytes(bits.data(), static_cast<int>(bits.size())) != 1) return out;
  for (size_t i = 0; i < out.size(); ++i) {
    const char c = out[i];
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (letter && (bits[i / 8] >> (i % 8) & 1) != 0) out[i] = static_cast<char>(c ^ 0x20);
  }
  return out;
}

// What a lookup of the CNAME of `name` found; `asked`, when given, is the name as sent, which
// the reply's question must repeat letter for letter.
CnameAnswer answer_of(int status, const unsigned char* abuf, int alen, std::string_view name,
                      const std::string* asked) {
  CnameAnswer a;
  a.detail = ares_strerror(status);
  const bool replied = status == ARES_SUCCESS || status == ARES_ENODATA || status == ARES_ENOTFOUND;
  if (asked != nullptr && replied && abuf != nullptr && !question_is(abuf, alen, *asked)) {
    a.status = CnameAnswer::Status::kServfail;
    a.detail = "its reply did not repeat the name asked letter for letter (asked " + *asked +
               "): a forged reply, or a server that changes the case of names (--dns-0x20 off)";
    return a;
  }
  switch (status) {
    case ARES_SUCCESS:
      switch (cname_in_message(abuf, alen, name, &a.target)) {
        case CnameInMessage::kFound:
          a.status = CnameAnswer::Status::kFound;
          break;
        case CnameInMessage::kNone:
          a.status = CnameAnswer::Status::kNoCname;
          break;
        case CnameInMessage::kMalformed:
          a.status = CnameAnswer::Status::kServfail;
          a.detail = "malformed reply";
          break;
        case CnameInMessage::kErrorCode:
          a.status = CnameAnswer::Status::kServfail;
          a.detail =
              "the reply's error code is " + std::to_string(abuf[3] & 0x0f) + ", not NOERROR";
          break;
      }
      break;
    case ARES_ENODATA: a.status = CnameAnswer::Status::kNoCname; break;
    case ARES_ENOTFOUND: a.status = CnameAnswer::Status::kNxdomain; break;
    case ARES_ETIMEOUT: a.status = CnameAnswer::Status::kTimeout; break;
    case ARES_ECONNREFUSED: a.status = CnameAnswer::Status::kUnreachable; break;
    case ARES_ECANCELLED:
    case ARES_EDESTRUCTION: a.status = CnameAnswer::Status::kCancelled; break;
    default: a.status = CnameAnswer::Status::kServfail; break;
  }
  return a;
}

}  // namespace

// c-ares 1.18 asks a server from one UDP socket for as long as any lookup to it is in flight (a
// review saw 300 queries leave from one port), so a forged reply had only the query id and the
// name's case to guess; its ARES_OPT_UDP_MAX_QUERIES came in 1.20. So every lookup has a channel
// of its own, a copy of `model` (ares_dup), whose socket the kernel binds to a port of its own: no
// two lookups in flight share a port, and each port is one of the ephemeral range's, at random.
struct AresResolver::State {
  struct Query {
    std::string name;
    Resolver::Callback callback;
    Resolver::Wanted wanted;  // may be empty: always wanted
  };

  ares_channel model = nullptr;  // configured once; never asks anything itself
  int wake_fd = -1;
  int max_in_flight = 100;
  bool mixed_case = true;
  std::mutex mu;
  TakingTurns<Query> waiting;  // lookups waiting for a slot; GUARDED_BY(mu)
  bool stopping = false;       // GUARDED_BY(mu)

  ~State() {
    if (model != nullptr) ares_destroy(model);
    if (wake_fd >= 0) ::close(wake_fd);
  }
};

Result<std::unique_ptr<AresResolver>> AresResolver::create(const ResolverConfig& config) {
  static const int library = ares_library_init(ARES_LIB_INIT_ALL);
  if (library != ARES_SUCCESS) return make_error(Code::kUnavailable, ares_strerror(library));
  auto state = std::make_unique<State>();
  state->max_in_flight = config.max_in_flight;
  state->mixed_case = config.mixed_case;
  ares_options options{};
  options.timeout = config.timeout_ms;
  options.tries = config.tries;
  // NOSEARCH: the name is absolute, no search domains. NOCHECKRESP: report SERVFAIL and REFUSED
  // as such; without it c-ares 1.18 turns both into ECONNREFUSED (at the cost of not moving on to
  // the next server after such an answer).
  options.flags = ARES_FLAG_NOSEARCH | ARES_FLAG_NOCHECKRESP;
  int mask = ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES | ARES_OPT_FLAGS;
  int rc = ares_init_options(&state->model, &options, mask);
  if (rc != ARES_SUCCESS) return make_error(Code::kUnavailable, ares_strerror(rc));
  if (!config.servers.empty()) {
    rc = ares_set_servers_ports_csv(state->model, config.servers.c_str());
    if (rc != ARES_SUCCESS) {
      return make_error(Code::kValidationFailed,
                        "cannot use DNS servers '" + config.servers + "': " + ares_strerror(rc));
    }
  }
  state->wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (state->wake_fd < 0) return make_error(Code::kUnavailable, "eventfd failed");
  std::unique_ptr<AresResolver> r(new AresResolver(std::move(state)));
  r->thread_ = std::thread([p = r.get()] { p->run(); });
  return r;
}

AresResolver::AresResolver(std::unique_ptr<State> state) : state_(std::move(state)) {}

AresResolver::~AresResolver() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->stopping = true;
  }
  uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(state_->wake_fd, &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
}

void AresResolver::lookup_cname(std::string name, std::string owner, Callback callback,
                                Wanted wanted) {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (!state_->stopping) {
      state_->waiting.push(std::move(owner),
                           State::Query{std::move(name), std::move(callback), std::move(wanted)});
      uint64_t one = 1;
      [[maybe_unused]] auto n = ::write(state_->wake_fd, &one, sizeof(one));
      return;
    }
  }
  callback(CnameAnswer{CnameAnswer::Status::kCancelled, "", "resolver stopped"});
}

size_t AresResolver::waiting() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->waiting.size();
}

void AresResolver::run() {
  name_this_thread("gw-dns");
  State& s = *state_;
  // A lookup in flight, on its own channel; its callback runs once, then the channel goes.
  struct Lookup {
    std::string name;
    std::string asked;  // the name as sent: mixed case, or empty when case is not checked
    Callback callback;
    ares_channel channel = nullptr;
    bool done = false;
  };
  // In flight, but for those answered since the loop last let them go (at its top, none).
  std::vector<std::unique_ptr<Lookup>> live;
  auto answer = [](void* arg, int status, int /*timeouts*/, unsigned char* abuf, int alen) {
    auto* l = static_cast<Lookup*>(arg);
    l->done = true;
    l->callback(answer_of(status, abuf, alen, l->name, l->asked.empty() ? nullptr : &l->asked));
  };
  for (;;) {
    // Start waiting lookups while there is room, in turns by owner.
    std::vector<State::Query> starting;
    bool stopping = false;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      stopping = s.stopping;
      while (!s.waiting.empty() &&
             static_cast<int>(live.size() + starting.size()) < s.max_in_flight) {
        starting.push_back(s.waiting.pop());
      }
    }
    if (stopping) break;
    bool skipped = false;
    for (auto& q : starting) {
      // A lookup that waited its turn may no longer be wanted (a later request for the same
      // domain came meanwhile): it takes no slot and sends no query.
      if (q.wanted && !q.wanted()) {
        q.callback(CnameAnswer{CnameAnswer::Status::kSkipped, "", "no longer wanted"});
        skipped = true;
        continue;
      }
      ares_channel channel = nullptr;
      const int rc = ares_dup(&channel, s.model);
      if (rc != ARES_SUCCESS) {
        q.callback(CnameAnswer{CnameAnswer::Status::kUnreachable, "",
                               std::string("cannot start a lookup: ") + ares_strerror(rc)});
        skipped = true;
        continue;
      }
      auto l =
          std::make_unique<Lookup>(Lookup{q.name, s.mixed_case ? mixed_case(q.name) : std::string(),
                                          std::move(q.callback), channel});
      ares_query(channel, l->asked.empty() ? l->name.c_str() : l->asked.c_str(), ns_c_in,
                 ns_t_cname, answer, l.get());
      live.push_back(std::move(l));
    }
    // Lookups answered at once (a channel that could not send) are let go before waiting.
    std::erase_if(live, [](const std::unique_ptr<Lookup>& l) {
      if (l->done) ares_destroy(l->channel);
      return l->done;
    });
    // Lookups skipped left room: the queue is looked at again before waiting.
    if (skipped) continue;
    // Wait for the lookups' sockets, the wake-up fd or the first c-ares timeout.
    std::vector<pollfd> fds;
    std::vector<Lookup*> owners;  // owners[i] asks through fds[i + 1]
    fds.push_back(pollfd{s.wake_fd, POLLIN, 0});
    timeval max{1, 0};
    for (const auto& l : live) {
      ares_socket_t socks[ARES_GETSOCK_MAXNUM];
      const int bits = ares_getsock(l->channel, socks, ARES_GETSOCK_MAXNUM);
      for (int i = 0; i < ARES_GETSOCK_MAXNUM; ++i) {
        short events = 0;
        if (ARES_GETSOCK_READABLE(bits, i)) events |= POLLIN;
        if (ARES_GETSOCK_WRITABLE(bits, i)) events |= POLLOUT;
        if (events == 0) continue;
        fds.push_back(pollfd{socks[i], events, 0});
        owners.push_back(l.get());
      }
      timeval tv{};
      max = *ares_timeout(l->channel, &max, &tv);
    }
    ::poll(fds.data(), fds.size(), static_cast<int>(max.tv_sec * 1000 + max.tv_usec / 1000));
    if (fds[0].revents & POLLIN) {
      uint64_t count = 0;
      [[maybe_unused]] auto n = ::read(s.wake_fd, &count, sizeof(count));
    }
    for (size_t i = 1; i < fds.size(); ++i) {
      ares_socket_t r =
          (fds[i].revents & (POLLIN | POLLERR | POLLHUP)) ? fds[i].fd : ARES_SOCKET_BAD;
      ares_socket_t w = (fds[i].revents & POLLOUT) ? fds[i].fd : ARES_SOCKET_BAD;
      Lookup* l = owners[i - 1];
      if ((r != ARES_SOCKET_BAD || w != ARES_SOCKET_BAD) && !l->done)
        ares_process_fd(l->channel, r, w);
    }
    // Timeouts, and the channels of lookups answered.
    std::erase_if(live, [](const std::unique_ptr<Lookup>& l) {
      if (!l->done) ares_process_fd(l->channel, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
      if (l->done) ares_destroy(l->channel);
      return l->done;
    });
  }
  // Answer what is still waiting; cancelling a lookup in flight answers it kCancelled.
  TakingTurns<State::Query> left;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    std::swap(left, s.waiting);
  }
  while (!left.empty())
    left.pop().callback(CnameAnswer{CnameAnswer::Status::kCancelled, "", "resolver stopped"});
  for (const auto& l : live) {
    ares_cancel(l->channel);
    ares_destroy(l->channel);
  }
}

}  // namespace gw
