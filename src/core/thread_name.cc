#include "core/thread_name.h"

#include <pthread.h>

#include <cstring>
#include <string>

namespace gw {

void name_this_thread(const char* name) {
  // Linux takes at most 15 bytes and fails on more; cut rather than leave the thread unnamed.
  std::string cut(name, strnlen(name, 15));
  pthread_setname_np(pthread_self(), cut.c_str());
}

}  // namespace gw
