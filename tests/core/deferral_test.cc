#include "core/deferral.h"

#include <doctest/doctest.h>

#include <string>
#include <thread>

namespace gw {
namespace {

void note(void* log) noexcept { static_cast<std::string*>(log)->push_back('a'); }
void other(void* log) noexcept { static_cast<std::string*>(log)->push_back('b'); }

TEST_CASE("work put off runs once at the end of the outermost scope, in the order first asked") {
  std::string log;
  {
    DeferralScope outer;
    run_at_scope_end(&note, &log);
    {
      DeferralScope inner;
      run_at_scope_end(&other, &log);
      run_at_scope_end(&note, &log);
    }
    CHECK(log.empty());  // an inner scope's end is not the end
    run_at_scope_end(&other, &log);
    CHECK(log.empty());
  }
  CHECK(log == "ab");

  // The same function for another argument is other work.
  std::string second;
  {
    DeferralScope scope;
    run_at_scope_end(&note, &log);
    run_at_scope_end(&note, &second);
  }
  CHECK(log == "aba");
  CHECK(second == "a");
}

TEST_CASE("outside a scope, or on another thread than the scope's, work runs at once") {
  std::string log;
  run_at_scope_end(&note, &log);
  CHECK(log == "a");

  DeferralScope scope;
  std::string theirs;
  std::thread([&] { run_at_scope_end(&note, &theirs); }).join();
  CHECK(theirs == "a");
  run_at_scope_end(&other, &log);
  CHECK(log == "a");  // this thread's scope has not ended
}

}  // namespace
}  // namespace gw
