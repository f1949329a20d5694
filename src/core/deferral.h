// Work a thread puts off to the end of what it is doing at the moment.
//
// The writer's finish thread answers a whole batch of requests at once, each answer queued for an
// HTTP thread that is woken by a write to an eventfd: one system call per answer, each of which
// may wake a thread waiting in epoll_wait. Inside a DeferralScope the wake-ups wait for the end
// of the batch and each HTTP thread is woken once.
#pragma once

namespace gw {

// While one lives on a thread, run_at_scope_end() on that thread waits for the end of the
// outermost one. Not copyable; on the stack of the thread it is for.
class DeferralScope {
 public:
  DeferralScope();
  ~DeferralScope();  // the outermost one runs what was put off, in the order it was first asked
  DeferralScope(const DeferralScope&) = delete;
  DeferralScope& operator=(const DeferralScope&) = delete;
};

// Calls fn(arg) at the end of this thread's DeferralScope, once however often the same pair is
// asked for before then; at once when the thread is in none. `fn` must not throw.
void run_at_scope_end(void (*fn)(void*) noexcept, void* arg);

}  // namespace gw
