#pragma once

namespace gw {

// Puts /dev/null on each of the standard descriptors 0, 1 and 2 that is closed, opened with
// `output_flags` for 1 and 2 (O_WRONLY: what is written there goes nowhere; O_RDONLY: writes
// there fail with EBADF, as on the closed descriptor) and O_RDONLY for 0. Left closed, the first
// files and sockets the process opened took them: gatewayd started with `>&-` wrote its
// `listening on` line into the WAF sandbox's socket, and with `2>&-` its stderr into RocksDB's
// LOG. Returns a bit for each that was closed (1 << fd).
unsigned occupy_closed_std_fds(int output_flags);

}  // namespace gw
