// Linked into the ThreadSanitizer build only (GATEWAY_TSAN, CMakeLists.txt): C11 thread creation
// and join through pthreads, for librdkafka.
//
// librdkafka starts its threads with C11's thrd_create. glibc implements it on its internal
// pthread_create, which ThreadSanitizer (GCC 12's runtime) does not intercept, so such a thread
// runs with no ThreadSanitizer state and takes a SEGV at its first intercepted call: the Kafka
// producer in gatewayd and the mock broker both died as they started. Defined here, in the
// executable, these two take precedence over glibc's and go through the intercepted
// pthread_create and pthread_join, so ThreadSanitizer knows the thread and its join. (librdkafka's
// mutexes and condition variables, C11's mtx_* and cnd_*, stay invisible to it; tsan.supp has
// it skip what librdkafka calls.)
#include <pthread.h>
#include <threads.h>

#include <cerrno>
#include <cstdint>
#include <new>

namespace {

struct Start {
  thrd_start_t func;
  void* arg;
};

void* run(void* p) {
  Start start = *static_cast<Start*>(p);
  delete static_cast<Start*>(p);
  return reinterpret_cast<void*>(static_cast<intptr_t>(start.func(start.arg)));
}

}  // namespace

extern "C" int thrd_create(thrd_t* thread, thrd_start_t func, void* arg) {
  auto* start = new (std::nothrow) Start{func, arg};
  if (start == nullptr) return thrd_nomem;
  int rc = pthread_create(thread, nullptr, run, start);
  if (rc == 0) return thrd_success;
  delete start;
  return rc == EAGAIN ? thrd_nomem : thrd_error;
}

extern "C" int thrd_join(thrd_t thread, int* result) {
  void* value = nullptr;
  if (pthread_join(thread, &value) != 0) return thrd_error;
  if (result != nullptr) *result = static_cast<int>(reinterpret_cast<intptr_t>(value));
  return thrd_success;
}
