// Writing on a connection: gatewayd's writes go through Pistache's per-thread write queue, tagged
// with the connection they belong to, and Pistache's writing of that queue is replaced (see
// transport.cc) so that a write reaches only that connection and is written as soon as its HTTP
// thread takes it.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace Pistache::Tcp {
class Peer;
}

namespace gw::http {

// A write's bytes start with room for the identity of the connection it is for: bytes a write
// is built in come from start_write, and what is appended to it is what the connection gets.
constexpr size_t kWriteIdentityBytes = sizeof(size_t);
std::string start_write(size_t payload_bytes);

// Queues `write` (from start_write) on `peer`'s connection, after everything queued on it
// before, for its HTTP thread to write. Pistache queues a write by descriptor number alone, so a
// write queued as a connection ended could have gone to the next connection given that number
// on that thread; this one is dropped unless the connection registered under the number is still
// `peer` when the HTTP thread takes it. With `shut_after`, the connection's write side is shut
// once the bytes are written (the client reads the end of the stream); with `end_after` as well,
// the connection then ends at once if nothing its client sent is unread (the client need not close
// its side first). With `answer`, the write is the answer to a request expect_answer() was told
// of. Callable from any thread; inside a DeferralScope (core/deferral.h), the HTTP thread is woken
// once, at the scope's end, for all the writes queued on it meanwhile. Throws std::bad_alloc or
// Pistache's errors if the write cannot be queued.
void queue_write(const std::shared_ptr<Pistache::Tcp::Peer>& peer, std::string write,
                 bool shut_after, bool answer = false, bool end_after = false);

// The writes queue_write and end_connection queued that are not yet written whole nor dropped
// (their connection ended): 0 once every answer given is out. Callable from any thread.
int64_t unwritten_writes();

// Pistache's timer ends a connection on which no whole request came within its header timeout
// (--idle-timeout-ms) with a 408 of its own: no Date, no body, no `Connection: close`. Each
// such answer is replaced with the bytes `answer` returns (begun by start_write), made on the
// connection's HTTP thread. Set before serving; nullptr keeps Pistache's.
using TimeoutAnswer = std::string (*)();
void answer_timeouts_with(TimeoutAnswer answer);
// The 408s of Pistache's timer written so far, in this process (for /metrics: they answer no
// request the server read whole, so no Api counted them). Callable from any thread.
uint64_t timeout_answers();

// Queues the end of `peer`'s connection behind everything queued on it: once that is written, the
// connection is shut both ways and its HTTP thread ends it at its next turn, without reading
// what its client sent meanwhile (a close with bytes unread resets the connection). Callable from
// any thread; throws as queue_write does.
void end_connection(const std::shared_ptr<Pistache::Tcp::Peer>& peer);

// Queues the quiet end of `peer`'s connection behind everything queued on it: once that is
// written, the write side is shut (its client reads the end of the stream), and what the client
// sends from then on is read and dropped until its own end, when the connection ends. Unlike
// end_connection, nothing the client sends resets the connection while the process runs (once
// its HTTP threads have stopped, Server::drop_unread_input drops what came at the exit), so the
// answers written
// before it reach a client that reads them slowly and sent more meanwhile. Callable from any
// thread; throws as queue_write does.
void stop_connection(const std::shared_ptr<Pistache::Tcp::Peer>& peer);

// On `peer`'s HTTP thread, as a request on it is taken: an answer to it will be queued
// (queue_write with `answer`). A client may shut its sending side right after its request (a
// half-close) and still read the answer; Pistache ended such a connection as soon as it read the
// end, and the answer was lost. A connection whose client has ended its side now stays until
// every answer expected on it is written (or cannot be), and ends then.
void expect_answer(const Pistache::Tcp::Peer& peer);

// On `peer`'s HTTP thread: whether an answer expect_answer() was told of has not been taken by
// that thread yet. Answers go out in the order their requests came (RFC 9112 9.3.2), so bytes
// that come meanwhile are held (wait_for_answer), not read.
bool answer_pending(const Pistache::Tcp::Peer& peer);

// On `peer`'s HTTP thread: its client sent something behind a request whose answer closes the
// connection (dropped unread, or left behind the request in its read). Once that answer is
// written, the connection does not end at once, even if nothing is left unread then: what the
// client sends next would reset it, which can take the answer with it (RFC 9112 9.6). Its end is
// waited for instead (the handler's lingering close).
void client_sends_more(const Pistache::Tcp::Peer& peer);

// On `peer`'s HTTP thread: whether a write on it waits for the socket to take more (a client that
// reads slowly, or not at all). Nothing more is served on the connection meanwhile: the handler
// holds what comes within a request's worth (wait_for_answer), and past that drops it and ends the
// connection after the answer, so that answers do not pile up in memory behind one the client
// does not read. Once everything is written, the handler is given the connection again as
// wait_for_answer() says.
bool answer_waits_for_socket(const Pistache::Tcp::Peer& peer);

// On `peer`'s HTTP thread: nothing more is read from the connection while `paused` (what its
// client sends waits in the kernel's buffers, and TCP's flow control holds the client back once
// they are full), or it is read again from now on, what came meanwhile first. The handler pauses a
// connection while it holds a request behind an answer not yet on its way (a pipeline), so that
// what it holds stays within a read's bytes instead of growing with what the client sends.
void pause_reading(const Pistache::Tcp::Peer& peer, bool paused);

// On `peer`'s HTTP thread: once the pending answer is taken (queued to be written, after
// everything before it), the thread's handler is given the connection again as a read of no
// bytes (Tcp::Handler::onInput with length 0), so that it goes on with what it held.
void wait_for_answer(const Pistache::Tcp::Peer& peer);

}  // namespace gw::http
