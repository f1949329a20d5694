#pragma once

#include <string>
#include <string_view>

#include "core/error.h"

namespace gw {

// Makes a new directory <$TMPDIR>/<prefix>XXXXXX (mkdtemp: a unique name, mode 0700; $TMPDIR
// defaults to /tmp) and returns its path. kUnavailable, saying why, when $TMPDIR names no
// directory or mkdtemp fails: never a directory made elsewhere instead.
Result<std::string> make_scratch_dir(std::string_view prefix);

}  // namespace gw
