// gatewayctl's temporary files and directories (a read-only open's scratch directory, a replay's
// temporary output), removed also when gatewayctl is stopped by SIGINT, SIGTERM or SIGHUP, which
// would otherwise end it before any destructor runs.
#pragma once

#include <string>

namespace gw::admin {

// Once, at the start of main and before any other thread starts (threads inherit the signal
// mask): blocks those signals and starts a thread that waits for one. On one, it removes every
// registered path and ends the process by that signal, as its default action would have. A
// signal the process was started with ignored is left as it is, ignored.
void remove_on_interrupt();

// Registers `path` for removal on an interrupt while this object lives (an empty path registers
// nothing). It does not remove the path itself; its owner does, before this object goes.
class RemovedOnInterrupt {
 public:
  explicit RemovedOnInterrupt(std::string path);
  ~RemovedOnInterrupt();

  RemovedOnInterrupt(const RemovedOnInterrupt&) = delete;
  RemovedOnInterrupt& operator=(const RemovedOnInterrupt&) = delete;

 private:
  std::string path_;
};

}  // namespace gw::admin
