// unit_tests' main: doctest's, except in a sandbox zygote that a test started (a run of this
// binary, see sandbox/sandbox.h), which runs one of the tasks below instead.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "sandbox/test_task.h"
#include "sandbox/waf_check.h"

int main(int argc, char** argv) {
  if (auto code = gw::sandbox::zygote_main_if_asked(
          argc, argv, {gw::sandbox::kTestTask, gw::sandbox::kWafTask})) {
    return *code;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
