#include "http/transport.h"

#include <pistache/peer.h>
#include <pistache/stream.h>
#include <pistache/transport.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cassert>
#include <cerrno>
#include <cstring>
#include <deque>
#include <mutex>
#include <utility>
#include <vector>

#include "http/expose.h"

namespace gw::http {

namespace {

// The bytes and the resume offset of a write queued on a connection (Transport's BufferHolder, a
// private type), which its only accessors copy (raw()) or copy from an offset on (detach()).
struct BufferBytesTag {
  friend auto member_of(BufferBytesTag);
};
template struct Expose<BufferBytesTag, &Pistache::Tcp::Transport::BufferHolder::_raw>;
struct BufferOffsetTag {
  friend auto member_of(BufferOffsetTag);
};
template struct Expose<BufferOffsetTag, &Pistache::Tcp::Transport::BufferHolder::offset_>;

// Marks in a queued write's flags (Pistache passes them on to send(2) as they are; these are
// taken off before it is called): kIdentified, the bytes start with the Peer::getID() of the
// connection they are for; kShutAfter, the write side is shut once they are written.
constexpr int kIdentified = 1 << 29;
constexpr int kShutAfter = 1 << 30;
constexpr int kOurFlags = kIdentified | kShutAfter;

}  // namespace

std::string start_write(size_t payload_bytes) {
  std::string write;
  write.reserve(kWriteIdentityBytes + payload_bytes);
  write.append(kWriteIdentityBytes, '\0');
  return write;
}

void queue_write(const std::shared_ptr<Pistache::Tcp::Peer>& peer, std::string write,
                 bool shut_after) {
  assert(write.size() >= kWriteIdentityBytes);  // begun by start_write
  const size_t id = peer->getID();
  std::memcpy(write.data(), &id, sizeof id);
  const size_t size = write.size();
  peer->send(Pistache::RawBuffer(std::move(write), size),
             kIdentified | (shut_after ? kShutAfter : 0));
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
    if (it == toWrite.end() || it->second.empty()) return;
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
      if ((entry.flags & gw::http::kShutAfter) != 0) ::shutdown(fd, SHUT_WR);
      Async::Deferred<ssize_t> done = std::move(entry.deferred);
      queue.pop_front();
      // Drained: the connection is watched for reading only already. This call comes either from
      // handleWriteQueue below, for a queue that was empty (EPOLLOUT is armed only while a queue
      // holds an entry), or from Pistache's write-ready event, which re-arms for reading before
      // it calls here.
      if (queue.empty()) toWrite.erase(it);
      lock.unlock();
      done.resolve(static_cast<ssize_t>(written));
      lock.lock();
      continue;
    }
    const int error = errno;
    if (error == EAGAIN || error == EWOULDBLOCK) {
      entry.buffer.*member_of(BufferOffsetTag{}) = static_cast<off_t>(written);
      reactor()->modifyFd(key(), fd, Polling::NotifyOn::Read | Polling::NotifyOn::Write,
                          Polling::Mode::Edge);
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
    return;
  }
}

// Pistache 0.0.5 moves each write queued by Peer::send (from any thread, through the transport's
// queue and its eventfd) to the connection's write queue and arms EPOLLOUT; the write happens at
// the next turn of the event loop, when epoll reports the socket writable, after two more
// epoll_ctl calls (re-arm for reading, then again once written): three epoll_ctl calls and one
// more turn of the event loop per answer. This definition takes the place of Pistache's (called
// from libpistache through the PLT, as asyncWriteImpl above) and writes at once when nothing of
// that connection is waiting to be written; behind a write that is waiting for the socket
// (EAGAIN), it is queued and follows it, in order, once epoll reports the socket writable.
//
// A write is queued by descriptor number, and a connection that ends frees its number (Pistache
// closes it on this thread) for the next one accepted, which goes to this same thread. So a write
// gatewayd queued for a connection that ended since is dropped unless the connection registered
// under that number is the one it names (queue_write); as in Pistache, any write for a number no
// connection has is dropped. Pistache's own writes (its error answers, made on this thread as it
// reads the connection) name none.
void Transport::handleWriteQueue(bool /*flush: always*/) {
  using gw::http::BufferBytesTag;
  using gw::http::BufferOffsetTag;
  for (;;) {
    std::unique_ptr<WriteEntry> write = writesQueue.popSafe();
    if (!write) return;
    const Fd fd = write->peerFd;
    const auto peer = peers.find(fd);
    if (peer == peers.end()) continue;
    if ((write->flags & gw::http::kIdentified) != 0) {
      size_t id = 0;
      std::memcpy(&id, (write->buffer.*member_of(BufferBytesTag{})).data().data(), sizeof id);
      if (peer->second->getID() != id) continue;
      write->buffer.*member_of(BufferOffsetTag{}) = static_cast<off_t>(sizeof id);
    }
    bool first = false;
    {
      std::lock_guard<std::mutex> guard(toWriteLock);
      std::deque<WriteEntry>& queue = toWrite[fd];
      first = queue.empty();
      queue.push_back(std::move(*write));
    }
    if (first) asyncWriteImpl(fd);
  }
}

}  // namespace Pistache::Tcp
