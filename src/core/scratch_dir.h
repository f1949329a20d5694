#pragma once

#include <string>
#include <string_view>

#include "core/error.h"

namespace gw {

// Makes a new directory <$TMPDIR>/<prefix>XXXXXX (mkdtemp: a unique name, mode 0700; in the first
// of $TMPDIR, $TMP, $TEMP and $TEMPDIR that is set and not empty, else /tmp, as
// std::filesystem::temp_directory_path() finds it but for an empty one) and returns its path.
// kUnavailable, saying why, when that names no directory (the error names the variable and its
// value) or mkdtemp fails in it (the error names the directory): never a directory made elsewhere
// instead.
Result<std::string> make_scratch_dir(std::string_view prefix);

}  // namespace gw
