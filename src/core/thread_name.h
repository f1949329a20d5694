#pragma once

namespace gw {

// Names the calling thread (at most 15 characters are kept), so that `top -H`, `ps -L` and
// perf tell gatewayd's threads apart.
void name_this_thread(const char* name);

}  // namespace gw
