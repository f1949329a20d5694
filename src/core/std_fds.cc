#include "core/std_fds.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace gw {

unsigned occupy_closed_std_fds(int output_flags) {
  unsigned closed = 0;
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    closed |= 1U << fd;
    // Not close-on-exec, as a standard descriptor the process was given. The lowest free
    // descriptor is `fd`, those below it being open by now.
    const int opened = ::open("/dev/null", fd == 0 ? O_RDONLY : output_flags);  // NOLINT
    if (opened < 0 || opened == fd) continue;
    ::dup2(opened, fd);
    ::close(opened);
  }
  return closed;
}

}  // namespace gw
