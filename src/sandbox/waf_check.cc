#include "sandbox/waf_check.h"

#include <cstdio>

namespace gw::sandbox {

std::string waf_task(std::string_view text) {
  fields::Problem problem = fields::waf_directives(text);
  return problem ? "1" + *problem : std::string("0");
}

Result<fields::Problem> waf_problem(const Outcome& outcome) {
  switch (outcome.kind) {
    case Outcome::Kind::kDone:
      if (outcome.output == "0") return fields::Problem();
      if (outcome.output.starts_with('1')) return fields::Problem(outcome.output.substr(1));
      std::fprintf(stderr, "gatewayd: waf sandbox: an answer waf_task does not give\n");
      return fields::Problem(
          "must be valid ModSecurity directives: the WAF engine could not parse them");
    case Outcome::Kind::kCrashed:
      break;
    case Outcome::Kind::kTimedOut:
      return fields::Problem(
          "must be valid ModSecurity directives: the WAF engine did not finish parsing them");
    case Outcome::Kind::kUnavailable:
      std::fprintf(stderr, "gatewayd: waf sandbox: %s\n", outcome.detail.c_str());
      return make_error(Code::kUnavailable,
                        "waf_custom_directives cannot be checked right now; try again");
  }
  std::fprintf(stderr, "gatewayd: waf sandbox: %s\n", outcome.detail.c_str());
  return fields::Problem(
      "must be valid ModSecurity directives: the WAF engine could not parse them");
}

Result<std::unique_ptr<Sandbox>> start_waf_sandbox(Limits limits) {
  return Sandbox::start(&waf_task, limits);
}

}  // namespace gw::sandbox
