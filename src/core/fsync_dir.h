#pragma once

#include <string>

namespace gw {

// Makes the entries of directory `dir` durable (a file created, renamed or removed in it): its
// fsync. False if it cannot be opened or synced.
bool fsync_dir(const std::string& dir);

}  // namespace gw
