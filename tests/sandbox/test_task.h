// The task of the sandbox tests (tests/sandbox/sandbox_test.cc), which unit_tests' main passes to
// zygote_main_if_asked.
#pragma once

#include <string>
#include <string_view>

#include "sandbox/sandbox.h"

namespace gw::sandbox {

// Crashes, aborts, exits, loops or answers, as `in` says.
std::string test_task(std::string_view in);
inline constexpr NamedTask kTestTask{"test", &test_task};

}  // namespace gw::sandbox
