#include "http/transport.h"

#include <linux/tcp.h>  // TCP_INFO with tcpi_bytes_acked (glibc's netinet/tcp.h has no such member)
#include <pistache/http.h>
#include <pistache/peer.h>
#include <pistache/stream.h>
#include <pistache/transport.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cassert>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <utility>
#include <vector>

#include "core/deferral.h"
#include "core/expose.h"

namespace gw::http {

namespace {

// The bytes, size and resume offset of a write queued on a connection (Transport's BufferHolder, a
// private type), which its only accessors copy (raw()) or copy from an offset on (detach()).
GW_EXPOSE(BufferBytesTag, &Pistache::Tcp::Transport::BufferHolder::_raw);
GW_EXPOSE(BufferOffsetTag, &Pistache::Tcp::Transport::BufferHolder::offset_);
GW_EXPOSE(BufferSizeTag, &Pistache::Tcp::Transport::BufferHolder::size_);

// The transport's queue of writes from other threads, its write queues per connection and its
// connections; and the transport a connection belongs to.
GW_EXPOSE(WritesQueueTag, &Pistache::Tcp::Transport::writesQueue);
GW_EXPOSE(ToWriteTag, &Pistache::Tcp::Transport::toWrite);
GW_EXPOSE(ToWriteLockTag, &Pistache::Tcp::Transport::toWriteLock);
GW_EXPOSE(PeersTag, &Pistache::Tcp::Transport::peers);
GW_EXPOSE(AsyncWriteImplTag, &Pistache::Tcp::Transport::asyncWriteImpl);
GW_EXPOSE(PeerTransportTag, &Pistache::Tcp::Peer::transport_);
GW_EXPOSE(HandlerTag, &Pistache::Tcp::Transport::handler_);

// Transport's write entry (a private type), named through the queue that holds them.
template <typename T>
T entry_of(Pistache::PollableQueue<T> Pistache::Tcp::Transport::*);
using WriteEntry = decltype(entry_of(member_of(WritesQueueTag{})));
using WriteQueue = Pistache::PollableQueue<WriteEntry>;
using BufferHolder = decltype(WriteEntry::buffer);
GW_EXPOSE(EventFdTag, &WriteQueue::event_fd);

// Marks in a queued write's flags (Pistache passes them on to send(2) as they are; these are
// taken off before it is called): kIdentified, the bytes start with the Peer::getID() of the
// connection they are for; kShutAfter, the write side is shut once they are written; kEndAfter,
// then the connection ends if nothing it was sent is unread; kAnswer, they answer a request
// expect_answer() was told of; kEndNow, the connection is shut both ways once they are written and
// ends at its HTTP thread's next read, whatever its client sent that was not read (end_connection);
// kWaited, set as they wait for the socket to take more (a client that reads slowly); kQuietAfter,
// the write side is shut once they are written, and what its client sends from then on is read
// and dropped until its end (stop_connection).
constexpr int kQuietAfter = 1 << 24;
constexpr int kWaited = 1 << 25;
constexpr int kEndNow = 1 << 26;
constexpr int kEndAfter = 1 << 27;
constexpr int kAnswer = 1 << 28;
constexpr int kIdentified = 1 << 29;
constexpr int kShutAfter = 1 << 30;
constexpr int kOurFlags =
    kQuietAfter | kWaited | kEndNow | kEndAfter | kAnswer | kIdentified | kShutAfter;

// A monotonic clock in milliseconds, read cheaply (to within a few): it tells whether an answer
// took more than a second.
int64_t coarse_ms() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
  return static_cast<int64_t>(now.tv_sec) * 1000 + now.tv_nsec / 1000000;
}

// The answers this HTTP thread's connections wait for (expect_answer), by descriptor number, and
// whether the client has ended its sending side meanwhile. An entry is the connection's whose
// Peer::getID() it holds: a number is given again to a later connection, whose first
// expect_answer() starts the entry afresh, and an entry left by an ended connection is never
// taken for another's.
struct Expected {
  size_t id = SIZE_MAX;  // no connection's
  uint32_t answers = 0;
  bool read_ended = false;
  bool input_waits = false;  // the handler holds bytes until the answers are taken
  bool ending = false;       // to end at its next read (kEndNow)
  bool write_shut = false;   // its sending side shut after a closing answer (kShutAfter)
  bool quiet = false;        // its input is dropped until its client's end (kQuietAfter)
  bool sends_more = false;   // no end at once after a closing answer (client_sends_more)
  bool paused = false;       // nothing more is read for now (pause_reading)
  // A write waits for the socket to take more (EAGAIN: a client that reads slowly, or not at all):
  // nothing more is served meanwhile (answer_waits_for_socket). A 408 of Pistache's timer is
  // dropped while it waits, unless the one before was dropped too and the client has
  // acknowledged no byte more since (`acked_at_timeout`, TCP_INFO, set at the 408 dropped).
  bool blocked = false;
  std::optional<uint64_t> acked_at_timeout = std::nullopt;
  int64_t asked_ms = 0;  // when the last answer was expected (coarse_ms)

  // Whether a closing answer shut its sending side (kShutAfter, kQuietAfter, kEndNow): it
  // lingers for its client's end, or ends.
  bool sending_shut() const { return write_shut || quiet || ending; }
};

thread_local std::vector<Expected> expected;

// TCP_INFO's tcpi_state of a socket reset by its peer (or closed): glibc's netinet/tcp.h names the
// states (TCP_CLOSE), but cannot be included beside linux/tcp.h.
constexpr uint8_t kTcpClose = 7;

// The entry of the connection `id` on descriptor `fd`, or nullptr if it has none.
Expected* expected_of(int fd, size_t id) {
  if (fd < 0 || static_cast<size_t>(fd) >= expected.size()) return nullptr;
  Expected& e = expected[static_cast<size_t>(fd)];
  return e.id == id ? &e : nullptr;
}

// The entry of the connection `peer`, made (in place of another connection's) if it has none.
Expected& entry_of(const Pistache::Tcp::Peer& peer) {
  const auto fd = static_cast<size_t>(peer.fd());  // a connection's descriptor is never negative
  if (fd >= expected.size()) expected.resize(fd + 1);
  Expected& e = expected[fd];
  if (e.id != peer.getID()) e = Expected{.id = peer.getID()};
  return e;
}

// The writes made by make_entry whose entries are still there: queued for a connection's HTTP
// thread, or on a connection and not yet written whole (see unwritten_writes).
std::atomic<int64_t> unwritten{0};

// One for each write, from its making to the end of its entry, whichever way that comes: written
// whole, dropped as its connection ended (in this program's code or in Pistache's), or destroyed
// with its transport. Copies count too, so the count is 0 exactly when none is left.
struct Unwritten {
  Unwritten() { unwritten.fetch_add(1, std::memory_order_relaxed); }
  Unwritten(const Unwritten&) : Unwritten() {}
  Unwritten& operator=(const Unwritten&) = delete;
  ~Unwritten() { unwritten.fetch_sub(1, std::memory_order_release); }
};

// A write entry for the connection on descriptor `fd` holding `bytes` (moved in, not copied as
// Pistache's constructor would). Nothing waits for its promise but an Unwritten: the promise's
// state, held by the entry alone, keeps it until the entry goes.
WriteEntry make_entry(Pistache::Fd fd, std::string bytes, int flags) {
  std::optional<WriteEntry> entry;
  // Pistache's promise hands its resolver to this function before its constructor returns.
  Pistache::Async::Promise<ssize_t> promise([&](Pistache::Async::Deferred<ssize_t> deferred) {
    entry.emplace(std::move(deferred), BufferHolder(Pistache::RawBuffer()), fd, flags);
  });
  assert(entry.has_value());
  promise.then([counted = Unwritten()](ssize_t) {}, [](std::exception_ptr) {});
  const size_t size = bytes.size();
  entry->buffer.*member_of(BufferBytesTag{}) = Pistache::RawBuffer(std::move(bytes), size);
  entry->buffer.*member_of(BufferSizeTag{}) = size;
  return std::move(*entry);
}

// What Pistache's own 408 is replaced with (answer_timeouts_with); nullptr: kept as it is.
std::atomic<TimeoutAnswer> timeout_answer{nullptr};
// The 408s of Pistache's timer let go out (timeout_answers).
std::atomic<uint64_t> timeouts_answered{0};

// On a transport's own thread: whether bytes are queued on descriptor `fd`, still to be written.
bool writing(Pistache::Tcp::Transport& transport, Pistache::Fd fd) {
  std::lock_guard<std::mutex> guard(transport.*member_of(ToWriteLockTag{}));
  auto& to_write = transport.*member_of(ToWriteTag{});
  const auto queued = to_write.find(fd);
  return queued != to_write.end() && !queued->second.empty();
}

// On the transport's own thread, for a write of Pistache's own (one that names no connection) on
// the connection `peer`: whether it is to be written. The 408 of Pistache's timer
// (Http::TransportImpl::closePeer, Pistache's only answer once gatewayd reads requests itself),
// on which Pistache then ends the connection (its promise's continuation), gets the bytes of
// timeout_answer instead; or, while an answer is still expected on the connection (a request
// served whose answer takes longer than the timeout, such as a write whose WAF check waits) or
// still being written (a client that reads a large answer slowly), it is dropped, since the
// connection is not idle: Pistache's clock of it restarts, and its mark of the connection as
// idle, set as it made the 408, is taken back (marked, the connection would get Pistache's
// keep-alive limit of 300 s, ended without an answer, instead of the timeout).
//
// A connection whose answer waits for the socket is ended instead (shut both ways, and ended at
// its HTTP thread's next read, as kEndNow does) once a whole timeout has passed since the 408
// dropped before, without a byte more taken by its client: a client that never read its answer
// held the connection, and the answer's memory, for good (nothing else bounds that wait; no 408
// can be written behind it).
bool take_own_write(Pistache::Tcp::Transport& transport,
                    const std::shared_ptr<Pistache::Tcp::Peer>& peer, WriteEntry& write) {
  if (!write.buffer.isRaw()) return true;
  const Pistache::RawBuffer& bytes = write.buffer.*member_of(BufferBytesTag{});
  if (!std::string_view(bytes.data()).starts_with("HTTP/1.1 408 ")) return true;
  const Expected* e = expected_of(peer->fd(), peer->getID());
  if (e != nullptr && e->sending_shut()) {
    // A closing answer shut its sending side: it lingers for its client's end, or ends. No 408
    // can be written there (it was counted, and failed with EPIPE); the connection's end is the
    // lingering's, as if the timer had not fired.
    peer->setIdle(false);
    return false;
  }
  const bool waited_for = e != nullptr && e->answers > 0;
  const bool waits = writing(transport, peer->fd());
  if (waits && !waited_for) {
    // What the client took shows in the bytes it acknowledged. A write going on shows no more
    // than that (the socket has room only for what was acknowledged), and less: it goes on only
    // once there is room for a good part of the socket's buffer (EPOLLOUT), so a client reading a
    // few KB per timeout did not show in the writes.
    tcp_info info{};
    socklen_t info_size = sizeof info;
    const uint64_t acked =
        ::getsockopt(peer->fd(), IPPROTO_TCP, TCP_INFO, &info, &info_size) == 0 &&
                info_size >= offsetof(tcp_info, tcpi_bytes_acked) + sizeof info.tcpi_bytes_acked
            ? info.tcpi_bytes_acked
            : 0;
    Expected& w = entry_of(*peer);
    if (w.acked_at_timeout == acked) {
      w.ending = true;
      ::shutdown(peer->fd(), SHUT_RDWR);
      return false;
    }
    w.acked_at_timeout = acked;
  }
  if (waited_for || waits) {
    peer->setIdle(false);
    Pistache::Http::Handler::getParser(peer)->reset();
    return false;
  }
  timeouts_answered.fetch_add(1, std::memory_order_relaxed);
  const TimeoutAnswer answer = timeout_answer.load(std::memory_order_acquire);
  if (answer == nullptr) return true;
  try {
    std::string ours = answer();
    const size_t size = ours.size();
    write.buffer.*member_of(BufferBytesTag{}) = Pistache::RawBuffer(std::move(ours), size);
    write.buffer.*member_of(BufferSizeTag{}) = size;
    write.buffer.*member_of(BufferOffsetTag{}) = static_cast<off_t>(kWriteIdentityBytes);
  } catch (const std::exception&) {
    // Out of memory: Pistache's own 408 goes out.
  }
  return true;
}

// On the transport's own thread: puts a write on its connection's write queue and writes it at
// once if nothing is waiting before it there; or drops it. A connection that ends frees its
// descriptor number (Pistache closes it on this thread) for the next one accepted, which comes
// to this same thread; so a write gatewayd queued for a connection that has ended since is
// dropped unless the connection registered under that number is the one it names (queue_write),
// and, as in Pistache, a write for a number no connection has is dropped. Pistache's own writes
// (its error answers, made on this thread as it reads the connection) name none.
void deliver(Pistache::Tcp::Transport& transport, WriteEntry write) {
  auto& peers = transport.*member_of(PeersTag{});
  const Pistache::Fd fd = write.peerFd;
  const auto peer = peers.find(fd);
  if (peer == peers.end()) return;
  bool resume = false;
  if ((write.flags & kIdentified) == 0) {
    if (!take_own_write(transport, peer->second, write)) return;
  } else {
    size_t id = 0;
    std::memcpy(&id, (write.buffer.*member_of(BufferBytesTag{})).data().data(), sizeof id);
    if (peer->second->getID() != id) return;
    write.buffer.*member_of(BufferOffsetTag{}) = static_cast<off_t>(sizeof id);
    // Taken: the connection waits for this answer no more. (One dropped above was for a
    // connection that has ended, whose entry no other connection takes.)
    if (Expected* e = (write.flags & kAnswer) != 0 ? expected_of(fd, id) : nullptr) {
      if (e->answers > 0) --e->answers;
      resume = e->answers == 0 && std::exchange(e->input_waits, false);
      // Pistache's idle timer counts from the last request served (Handler::read restarts it):
      // after an answer that took longer than a second, it counts from the answer, so that a
      // client that waited for a slow answer has the whole timeout for its next request.
      if (e->answers == 0 && coarse_ms() - e->asked_ms > 1000) {
        Pistache::Http::Handler::getParser(peer->second)->reset();
      }
    }
  }
  bool first = false;
  {
    std::lock_guard<std::mutex> guard(transport.*member_of(ToWriteLockTag{}));
    std::deque<WriteEntry>& queue = (transport.*member_of(ToWriteTag{}))[fd];
    first = queue.empty();
    queue.push_back(std::move(write));
  }
  // The handler goes on with the bytes it held behind this answer, now queued before whatever it
  // answers them with (which goes through the queue drain() is taking writes from). Before the
  // write: once it is out, a half-closed connection with no answer expected would be ended
  // (end_if_answered), and the answer to a request read now would be lost.
  // The connection as Pistache holds it, not a copy: gatewayd's code never takes a reference to
  // a connection on the HTTP thread, whose count libpistache changes out of ThreadSanitizer's
  // sight (a copy released here was reported as racing with the finish thread's last release).
  // Nothing in the handler's read removes it from the transport's connections.
  if (resume) (transport.*member_of(HandlerTag{}))->onInput(nullptr, 0, peer->second);
  if (first) (transport.*member_of(AsyncWriteImplTag{}))(fd);
}

// On the transport's own thread: delivers every write other threads have queued on it, in the
// order they were queued.
void drain(Pistache::Tcp::Transport& transport) {
  WriteQueue& queue = transport.*member_of(WritesQueueTag{});
  // The wake-ups are taken before the writes: one queued after this read wakes the thread again.
  // (Pistache read it again for every write taken, until a read found it empty.)
  // EAGAIN when none is pending (Transport::flush drains without one).
  uint64_t wakes = 0;
  [[maybe_unused]] const ssize_t taken =
      ::read(queue.*member_of(EventFdTag{}), &wakes, sizeof wakes);
  // Only the writes queued before this turn are delivered in it. Delivering an answer can give
  // its connection's handler the request held behind it (a pipeline), whose answer is queued at
  // once; taken in the same loop, it gave the next request, and so on, so that one connection's
  // pipeline held its HTTP thread until all it had sent was answered, and no other connection of
  // that thread was read meanwhile (helper 132: 60 MB of pipelined GETs, 6.4 s). Such a write
  // waits for the next turn, which its wake-up asks for: a pipeline is served one request a turn.
  // (The vector is taken from the thread's spare one, so that the turn allocates nothing once it
  // has grown; a nested drain would find none and use its own.)
  thread_local std::vector<WriteEntry> spare;
  std::vector<WriteEntry> writes = std::move(spare);
  writes.clear();
  for (;;) {
    // The queue's own pop, not PollableQueue's, which reads the eventfd again.
    std::unique_ptr<WriteQueue::Entry> entry(queue.Pistache::Queue<WriteEntry>::pop());
    if (!entry) break;
    writes.push_back(std::move(entry->data()));
    entry->data().~WriteEntry();
  }
  // A write that cannot be delivered (out of memory) does not drop the ones after it, which
  // stayed queued when the loop delivered as it popped.
  std::exception_ptr failed;
  for (WriteEntry& write : writes) {
    try {
      deliver(transport, std::move(write));
    } catch (...) {
      if (!failed) failed = std::current_exception();
    }
  }
  writes.clear();
  spare = std::move(writes);
  if (failed) std::rethrow_exception(failed);
}

// On a transport's own thread, as its connection on descriptor `fd` reads the end of its client's
// stream: whether the connection is to stay until an answer expected on it (expect_answer), or
// bytes already queued on it (`writing`), are written; it then ends in end_if_answered().
bool stay_for_answers(const Pistache::Tcp::Peer& peer, bool writing) {
  const Expected* e = expected_of(peer.fd(), peer.getID());
  if ((e == nullptr || e->answers == 0) && !writing) return false;
  entry_of(peer).read_ended = true;
  return true;
}

// On a transport's own thread: the entry of the connection on descriptor `fd` if its `flag` is
// set; else nullptr. The connection is looked up only when the descriptor's entry has the flag:
// this runs after every answer written, and before every read.
const Expected* flagged(Pistache::Tcp::Transport& transport, Pistache::Fd fd,
                        bool Expected::*flag) {
  if (fd < 0 || static_cast<size_t>(fd) >= expected.size()) return nullptr;
  if (!(expected[static_cast<size_t>(fd)].*flag)) return nullptr;
  auto& peers = transport.*member_of(PeersTag{});
  const auto peer = peers.find(fd);
  if (peer == peers.end()) return nullptr;
  const Expected* e = expected_of(fd, peer->second->getID());
  return e != nullptr && e->*flag ? e : nullptr;
}

// On a transport's own thread: the entry of the connection on descriptor `fd` if it stays only
// for its answers, its client's sending side having ended (stay_for_answers); else nullptr.
const Expected* read_ended(Pistache::Tcp::Transport& transport, Pistache::Fd fd) {
  return flagged(transport, fd, &Expected::read_ended);
}

// On a transport's own thread: whether the connection on descriptor `fd` is paused
// (pause_reading).
bool reading_paused(Pistache::Tcp::Transport& transport, Pistache::Fd fd) {
  return flagged(transport, fd, &Expected::paused) != nullptr;
}

// On a transport's own thread, once nothing is left to write on descriptor `fd` (all written, or
// the connection broke): a connection that stayed for its answers (stay_for_answers) and has none
// left to wait for is shut both ways. That wakes its HTTP thread, whose next read of it finds the
// end and ends it there (Transport::handleIncoming), where Pistache ends connections: this may run
// while the transport drains its queue of writes (deliver), which goes on to other connections.
void end_if_answered(Pistache::Tcp::Transport& transport, Pistache::Fd fd) {
  const Expected* e = read_ended(transport, fd);
  if (e != nullptr && e->answers == 0) ::shutdown(fd, SHUT_RDWR);
}

// On a transport's own thread, once a write with kEndNow or kQuietAfter is written on descriptor
// `fd`: sets the connection's `mark` and shuts its socket `how`.
// - kEndNow: `ending`, shut both ways, which wakes its HTTP thread, and its next read ends it
//   (Transport::handleIncoming) before reading what its client sent.
// - kQuietAfter: `quiet`, the write side shut (the client reads the end of the stream after what
//   was written), and what the client sends is dropped from now on (Transport::handleIncoming).
void mark_and_shut(Pistache::Tcp::Transport& transport, Pistache::Fd fd, bool Expected::*mark,
                   int how) {
  auto& peers = transport.*member_of(PeersTag{});
  const auto peer = peers.find(fd);
  if (peer == peers.end()) return;
  entry_of(*peer->second).*mark = true;
  ::shutdown(fd, how);
}

// On a transport's own thread: whether a closing answer shut descriptor `fd`'s sending side
// (Expected::sending_shut).
bool write_side_shut(Pistache::Tcp::Transport& transport, Pistache::Fd fd) {
  auto& peers = transport.*member_of(PeersTag{});
  const auto peer = peers.find(fd);
  if (peer == peers.end()) return false;
  const Expected* e = expected_of(fd, peer->second->getID());
  return e != nullptr && e->sending_shut();
}

// On a transport's own thread, as a closing answer with kEndAfter is written on descriptor `fd`:
// whether its client sent more behind the request (client_sends_more).
bool sends_more(Pistache::Tcp::Transport& transport, Pistache::Fd fd) {
  auto& peers = transport.*member_of(PeersTag{});
  const auto peer = peers.find(fd);
  if (peer == peers.end()) return false;
  const Expected* e = expected_of(fd, peer->second->getID());
  return e != nullptr && e->sends_more;
}

// On a transport's own thread, once a write on descriptor `fd` that waited for the socket
// (kWaited) is all written: the connection's idle clock (Pistache's parser's) restarts, so that a
// client that read a large answer slowly has the whole idle timeout for its next request, counted
// from the answer's end.
void written_after_wait(Pistache::Tcp::Transport& transport, Pistache::Fd fd) {
  auto& peers = transport.*member_of(PeersTag{});
  const auto peer = peers.find(fd);
  if (peer != peers.end()) Pistache::Http::Handler::getParser(peer->second)->reset();
}

// On a transport's own thread, as a write on descriptor `fd` finds the socket full (EAGAIN): the
// connection serves nothing more until it is written (answer_waits_for_socket).
void write_waits(Pistache::Tcp::Transport& transport, Pistache::Fd fd) {
  auto& peers = transport.*member_of(PeersTag{});
  const auto peer = peers.find(fd);
  if (peer != peers.end()) entry_of(*peer->second).blocked = true;
}

// On a transport's own thread, once nothing is left to write on descriptor `fd` (all written, or,
// `broken`, the connection broke): a connection that served nothing more while a write waited for
// its socket goes on with what its handler held (as deliver() does once an answer is taken). A
// broken one does not: what it held is dropped as it ends, not served.
// Only the descriptor's entry is looked at unless it is marked, so this costs next to nothing
// after every write.
void written_all(Pistache::Tcp::Transport& transport, Pistache::Fd fd, bool broken) {
  if (fd < 0 || static_cast<size_t>(fd) >= expected.size()) return;
  if (!expected[static_cast<size_t>(fd)].blocked) return;
  auto& peers = transport.*member_of(PeersTag{});
  const auto peer = peers.find(fd);
  if (peer == peers.end()) return;
  Expected* e = expected_of(fd, peer->second->getID());
  if (e == nullptr) return;
  e->blocked = false;
  e->acked_at_timeout.reset();
  if (broken) {
    e->input_waits = false;
    return;
  }
  if (e->answers != 0 || !std::exchange(e->input_waits, false)) return;
  (transport.*member_of(HandlerTag{}))->onInput(nullptr, 0, peer->second);
}

// On a connection's HTTP thread: whether its end was queued (end_connection) and written.
bool ending(const Pistache::Tcp::Peer& peer) {
  const Expected* e = expected_of(peer.fd(), peer.getID());
  return e != nullptr && e->ending;
}

// On a connection's HTTP thread: whether its quiet end was queued (stop_connection) and written.
bool quiet(const Pistache::Tcp::Peer& peer) {
  const Expected* e = expected_of(peer.fd(), peer.getID());
  return e != nullptr && e->quiet;
}

// Wakes a transport's thread to drain what was queued on it.
void wake(void* transport) noexcept {
  WriteQueue& queue =
      static_cast<Pistache::Tcp::Transport*>(transport)->*member_of(WritesQueueTag{});
  const int fd = queue.*member_of(EventFdTag{});
  if (fd < 0) return;  // not bound yet, so no connection yet either (bound as Pistache starts it)
  const uint64_t one = 1;
  // An eventfd's count cannot overflow short of 2^64 - 2 pending wake-ups.
  [[maybe_unused]] const ssize_t written = ::write(fd, &one, sizeof one);
}

// Queues `write` (from start_write) on `peer`'s connection with `flags` (kIdentified and more).
void queue_flagged(const std::shared_ptr<Pistache::Tcp::Peer>& peer, std::string write, int flags) {
  assert(write.size() >= kWriteIdentityBytes);  // begun by start_write
  const size_t id = peer->getID();
  std::memcpy(write.data(), &id, sizeof id);
  Pistache::Tcp::Transport* transport = (*peer).*member_of(PeerTransportTag{});
  if (transport == nullptr) throw std::runtime_error("the connection has no transport");
  WriteEntry entry = make_entry(peer->fd(), std::move(write), flags);
  (transport->*member_of(WritesQueueTag{})).Pistache::Queue<WriteEntry>::push(std::move(entry));
  // Inside a batch of answers (the writer's finish thread), once per transport at its end.
  run_at_scope_end(&wake, transport);
}

}  // namespace

int64_t unwritten_writes() { return unwritten.load(std::memory_order_acquire); }

std::string start_write(size_t payload_bytes) {
  std::string write;
  write.reserve(kWriteIdentityBytes + payload_bytes);
  write.append(kWriteIdentityBytes, '\0');
  return write;
}

void expect_answer(const Pistache::Tcp::Peer& peer) {
  Expected& e = entry_of(peer);
  ++e.answers;
  e.asked_ms = coarse_ms();
}

bool answer_pending(const Pistache::Tcp::Peer& peer) {
  const Expected* e = expected_of(peer.fd(), peer.getID());
  return e != nullptr && e->answers > 0;
}

void wait_for_answer(const Pistache::Tcp::Peer& peer) { entry_of(peer).input_waits = true; }

void client_sends_more(const Pistache::Tcp::Peer& peer) { entry_of(peer).sends_more = true; }

void pause_reading(const Pistache::Tcp::Peer& peer, bool paused) {
  Expected* e = expected_of(peer.fd(), peer.getID());
  if (e == nullptr && !paused) return;
  if (e == nullptr) e = &entry_of(peer);
  if (e->paused == paused) return;
  e->paused = paused;
  // Paused, the connection stays watched for reading: an event for it is taken as nothing
  // (Transport::handleIncoming). Read again, it is watched anew, which reports at once what came
  // meanwhile: edge-triggered, epoll would report only what comes from now on.
  if (paused) return;
  Pistache::Tcp::Transport* transport = peer.*member_of(PeerTransportTag{});
  if (transport == nullptr) return;
  try {
    transport->reactor()->modifyFd(
        transport->key(), peer.fd(),
        e->blocked ? Pistache::Polling::NotifyOn::Read | Pistache::Polling::NotifyOn::Write
                   : Pistache::Polling::NotifyOn::Read,
        Pistache::Polling::Mode::Edge);
  } catch (const std::exception&) {
    // The descriptor left the poller already; the connection's end is handled there.
  }
}

bool answer_waits_for_socket(const Pistache::Tcp::Peer& peer) {
  const Expected* e = expected_of(peer.fd(), peer.getID());
  return e != nullptr && e->blocked;
}

void queue_write(const std::shared_ptr<Pistache::Tcp::Peer>& peer, std::string write,
                 bool shut_after, bool answer, bool end_after) {
  queue_flagged(peer, std::move(write),
                kIdentified | (shut_after ? kShutAfter : 0) | (answer ? kAnswer : 0) |
                    (shut_after && end_after ? kEndAfter : 0));
}

uint64_t timeout_answers() { return timeouts_answered.load(std::memory_order_relaxed); }

void answer_timeouts_with(TimeoutAnswer answer) {
  timeout_answer.store(answer, std::memory_order_release);
}

void end_connection(const std::shared_ptr<Pistache::Tcp::Peer>& peer) {
  queue_flagged(peer, start_write(0), kIdentified | kEndNow);
}

void stop_connection(const std::shared_ptr<Pistache::Tcp::Peer>& peer) {
  queue_flagged(peer, start_write(0), kIdentified | kQuietAfter);
}

}  // namespace gw::http

// Pistache 0.0.5 writes a connection's queued writes in Transport::asyncWriteImpl. When the socket
// takes no more (EAGAIN, a client that does not read an answer larger than the socket buffers),
// it arms EPOLLOUT and then tries the write again at once, in a loop that ends only once the
// client reads or goes: its HTTP thread spun at full CPU (a copy of the whole rest of the answer
// at each turn), and every other connection of that thread went unanswered, for as long as that
// client stayed connected. This definition takes the place of Pistache's (calls into it from
// libpistache go through the PLT, so the program's own definition is the one bound): it writes
// each queued write as far as the socket takes it, and on EAGAIN keeps where it stopped, arms
// EPOLLOUT and returns to the event loop, which calls it again once the socket can take more. It
// copies no answer (Pistache copied each one to write it, and the rest of it at each EAGAIN). It
// keeps Pistache's contract: entries go out in order, each one's promise is resolved with the
// bytes written once it is all written (outside the lock, as Pistache does), and once the queue is
// empty its entry is erased and the connection is watched for reading only.
namespace Pistache::Tcp {

void Transport::asyncWriteImpl(Fd fd) {
  using gw::http::BufferBytesTag;
  using gw::http::BufferOffsetTag;
  std::unique_lock<std::mutex> lock(toWriteLock);
  for (;;) {
    auto it = toWrite.find(fd);
    if (it == toWrite.end() || it->second.empty()) {
      lock.unlock();
      gw::http::written_all(*this, fd, /*broken=*/false);
      gw::http::end_if_answered(*this, fd);
      return;
    }
    std::deque<WriteEntry>& queue = it->second;
    WriteEntry& entry = queue.front();
    const size_t size = entry.buffer.size();
    size_t written = entry.buffer.offset();
    const char* bytes =
        entry.buffer.isRaw() ? (entry.buffer.*member_of(BufferBytesTag{})).data().data() : nullptr;
    const int flags = entry.flags & ~gw::http::kOurFlags;
    while (written < size) {
      const ssize_t n = bytes != nullptr ? sendRawBuffer(fd, bytes + written, size - written, flags)
                                         : sendFile(fd, entry.buffer.fd(),
                                                    static_cast<off_t>(written), size - written);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) break;
      written += static_cast<size_t>(n);
    }
    if (written >= size) {
      if (entry.buffer.isFile()) ::close(entry.buffer.fd());
      if ((entry.flags & gw::http::kShutAfter) != 0) {
        gw::http::mark_and_shut(*this, fd, &gw::http::Expected::write_shut, SHUT_WR);
      }
      if ((entry.flags & gw::http::kEndAfter) != 0) {
        // Shut for reading too, unless the client sent something not read yet or dropped
        // (closed with bytes unread, the connection would be reset, which could take the answer
        // with it): the next read finds the end and the connection ends there (handleIncoming),
        // instead of waiting for a client that keeps its side open until Pistache's 300 s idle
        // limit. One that sent more is waited for by the handler (client_sends_more).
        int unread = 0;
        if (!gw::http::sends_more(*this, fd) && ::ioctl(fd, FIONREAD, &unread) == 0 &&
            unread == 0) {
          ::shutdown(fd, SHUT_RD);
        }
      }
      if ((entry.flags & gw::http::kEndNow) != 0) {
        gw::http::mark_and_shut(*this, fd, &gw::http::Expected::ending, SHUT_RDWR);
      }
      if ((entry.flags & gw::http::kQuietAfter) != 0) {
        gw::http::mark_and_shut(*this, fd, &gw::http::Expected::quiet, SHUT_WR);
      }
      if ((entry.flags & gw::http::kWaited) != 0) gw::http::written_after_wait(*this, fd);
      Async::Deferred<ssize_t> done = std::move(entry.deferred);
      queue.pop_front();
      // Drained: the connection is watched for reading only already. This call comes either from
      // deliver() (handleWriteQueue), for a queue that was empty (EPOLLOUT is armed only while a
      // queue holds an entry), or from Pistache's write-ready event, which re-arms for reading
      // before it calls here.
      if (queue.empty()) toWrite.erase(it);
      lock.unlock();
      done.resolve(static_cast<ssize_t>(written));
      lock.lock();
      continue;
    }
    const int error = errno;
    if (error == EAGAIN || error == EWOULDBLOCK) {
      entry.buffer.*member_of(BufferOffsetTag{}) = static_cast<off_t>(written);
      entry.flags |= gw::http::kWaited;
      gw::http::write_waits(*this, fd);
      // A connection whose client has ended its side is readable for good (the end of the
      // stream), and Pistache takes an event that is both readable and writable as a read: it is
      // watched for writing only, or the rest of the answer would never be written. So is one
      // whose reading is paused, whose unread bytes keep it readable.
      try {
        reactor()->modifyFd(
            key(), fd,
            gw::http::read_ended(*this, fd) != nullptr || gw::http::reading_paused(*this, fd)
                ? Polling::NotifyOn::Write
                : Polling::NotifyOn::Read | Polling::NotifyOn::Write,
            Polling::Mode::Edge);
      } catch (const std::exception&) {
        // Not watched for the socket's room (the descriptor left the poller): the rest cannot
        // be written, so the connection ends (the exception ended the HTTP thread, and gatewayd).
        gw::http::mark_and_shut(*this, fd, &gw::http::Expected::ending, SHUT_RDWR);
      }
      return;
    }
    // The connection is broken (reset, closed by the client, or its descriptor already closed):
    // nothing queued on it will be written. Its promises are rejected, as Pistache rejects a
    // write that fails.
    std::vector<Async::Deferred<ssize_t>> failed;
    failed.reserve(queue.size());
    for (WriteEntry& e : queue) {
      if (e.buffer.isFile()) ::close(e.buffer.fd());
      failed.push_back(std::move(e.deferred));
    }
    toWrite.erase(it);
    if (error != EBADF) {
      // Ended, so that its client sees the answer lost (the end of the stream, or a reset), not
      // a 408 a timeout later for a request that was run (an error such as ENOBUFS left the
      // connection open); unless a closing answer shut its sending side before, whose
      // lingering for the client's end goes on (ended now, a reset could take that answer).
      if (!gw::http::write_side_shut(*this, fd)) {
        gw::http::mark_and_shut(*this, fd, &gw::http::Expected::ending, SHUT_RDWR);
      }
      try {
        reactor()->modifyFd(key(), fd, Polling::NotifyOn::Read, Polling::Mode::Edge);
      } catch (const std::exception&) {
        // The descriptor left the poller already; the connection's end is handled there.
      }
    }
    lock.unlock();
    for (auto& d : failed) {
      errno = error;
      d.reject(Pistache::Error::system("Could not write data"));
    }
    gw::http::written_all(*this, fd, /*broken=*/true);
    gw::http::end_if_answered(*this, fd);
    return;
  }
}

// Pistache 0.0.5 moves each write queued from another thread (through the transport's queue and
// its eventfd) to the connection's write queue and arms EPOLLOUT; the write happens at the next
// turn of the event loop, when epoll reports the socket writable, after two more epoll_ctl calls
// (re-arm for reading, then again once written): three epoll_ctl calls and one more turn of the
// event loop per answer. This definition takes the place of Pistache's (called from libpistache
// through the PLT, as asyncWriteImpl above) and writes at once when nothing of that connection is
// waiting to be written; behind a write that is waiting for the socket (EAGAIN), it is queued and
// follows it, in order, once epoll reports the socket writable. See deliver() for the writes it
// drops.
void Transport::handleWriteQueue(bool /*flush: always*/) { gw::http::drain(*this); }

// Pistache 0.0.5 reads a connection until its socket has nothing more (EAGAIN) and hands each
// read to the handler; once a read finds the end of the client's stream, it ends the connection at
// once. A client may shut its sending side right after its request (a half-close) and still wait
// for the answer, which was then lost (the request itself ran: a POST was applied). This
// definition takes the place of Pistache's (called from libpistache through the PLT, as
// asyncWriteImpl above): it reads as Pistache did, but at the end of the stream a connection with
// an answer still expected on it, or bytes still to write, stays until they are written
// (gw::http::stay_for_answers, end_if_answered), and ends then. A read interrupted by a signal
// is tried again (Pistache ended the connection). gatewayd serves no TLS, so there is no SSL_read
// path.
void Transport::handleIncoming(const std::shared_ptr<Peer>& peer) {
  const Fd fd = peer->fd();
  if (gw::http::ending(*peer)) {
    // Its end was queued (end_connection) and written: what its client sent is not read.
    handlePeerDisconnection(peer);
    return;
  }
  const bool quiet = gw::http::quiet(*peer);
  char buffer[Const::MaxBuffer];
  for (;;) {
    if (!quiet && gw::http::reading_paused(*this, fd)) {
      // A connection its client reset meanwhile ends now, as the read that would have found the
      // reset ends it: its held requests are dropped unrun, and its descriptor is freed. Left
      // paused, it stayed until Pistache's keep-alive limit (300 s; a client that reset
      // connections it had stopped reading leaked about 54 descriptors a second), and the
      // requests held behind an answer still ran after the client had gone (helper 133).
      tcp_info info{};
      socklen_t size = sizeof info;
      if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &size) == 0 &&
          info.tcpi_state == gw::http::kTcpClose) {
        handlePeerDisconnection(peer);
        return;
      }
      // Nothing more is read for now (pause_reading): what came stays unread. An event that is
      // both readable and writable is taken as a read, so the room for a write that waits for the
      // socket is watched for alone, and reported anew (watched for reading too, the unread
      // bytes would report it as a read again at once).
      if (gw::http::answer_waits_for_socket(*peer)) {
        try {
          reactor()->modifyFd(key(), fd, Polling::NotifyOn::Write, Polling::Mode::Edge);
        } catch (const std::exception&) {
          // The descriptor left the poller already; the connection's end is handled there.
        }
      }
      return;
    }
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n > 0) {
      // A quiet end's (stop_connection): read, so that closing at the client's end resets
      // nothing, and dropped.
      if (!quiet) handler_->onInput(buffer, static_cast<size_t>(n), peer);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      // Pistache takes an event that is both readable and writable as a read: the socket's room
      // for a write that waits for it (EPOLLOUT, edge-triggered) came with bytes from the client
      // and was not seen, and the answer stalled for good (a client sending behind an answer it
      // was reading, under AddressSanitizer's slower timing). The connection is watched anew, which
      // reports the room at once if there is any (the write then goes through the event loop;
      // written from here, inside the read, a closing answer ended the connection before the
      // client's end was waited for, in 3 of 6 release runs).
      if (gw::http::answer_waits_for_socket(*peer)) {
        try {
          reactor()->modifyFd(key(), fd, Polling::NotifyOn::Read | Polling::NotifyOn::Write,
                              Polling::Mode::Edge);
        } catch (const std::exception&) {
          // The descriptor left the poller already; the connection's end is handled there.
        }
      }
      return;
    }
    if (n == 0) {
      const bool writing = gw::http::writing(*this, fd);
      if (gw::http::stay_for_answers(*peer, writing)) {
        // The end of the stream stays readable, and Pistache takes an event that is both
        // readable and writable as a read: a connection with an answer waiting for the socket
        // is watched for writing only from now on (asyncWriteImpl too), or the rest of it would
        // never be written. Watched anew, it is reported at once if the socket takes more.
        if (writing) {
          try {
            reactor()->modifyFd(key(), fd, Polling::NotifyOn::Write, Polling::Mode::Edge);
          } catch (const std::exception&) {
            // The descriptor left the poller already; the connection's end is handled there.
          }
        }
        return;
      }
    }
    handlePeerDisconnection(peer);
    return;
  }
}

}  // namespace Pistache::Tcp
