#include "sandbox/waf_check.h"

#include <cstdio>

namespace gw::sandbox {

std::string waf_task(std::string_view text) {
  fields::Problem problem = fields::waf_directives(text);
  return problem ? "1" + *problem : std::string("0");
}

Result<fields::Problem> waf_problem(const Outcome& outcome) {
  using Kind = Outcome::Kind;
  if (outcome.kind == Kind::kDone && outcome.output == "0") return fields::Problem();
  if (outcome.kind == Kind::kDone && outcome.output.starts_with('1'))
    return fields::Problem(outcome.output.substr(1));
  if (outcome.kind == Kind::kTimedOut) {
    return fields::Problem(
        "must be valid ModSecurity directives: the WAF engine did not finish parsing them");
  }
  std::fprintf(
      stderr, "gatewayd: waf sandbox: %s\n",
      outcome.kind == Kind::kDone ? "an answer waf_task does not give" : outcome.detail.c_str());
  if (outcome.kind == Kind::kUnavailable) {
    Error e = make_error(Code::kUnavailable,
                         "waf_custom_directives cannot be checked right now; try again");
    e.shown = Shown::kDetail;  // said as it is: writes go on (it said they could not)
    return e;
  }
  return fields::Problem(
      "must be valid ModSecurity directives: the WAF engine could not parse them");
}

Result<std::unique_ptr<Sandbox>> start_waf_sandbox(Limits limits) {
  return Sandbox::start(kWafTask, limits);
}

}  // namespace gw::sandbox
