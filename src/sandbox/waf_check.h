// fields::waf_directives run in the sandbox: the libmodsecurity parse of a tenant's directives
// happens in a worker process, so an engine crash or hang is a 422 for that request, not the end
// of gatewayd, and what the engine's lexer prints goes to /dev/null, not gatewayd's stdout.
#pragma once

#include <string>
#include <string_view>

#include "commands/fields.h"
#include "commands/waf_scan.h"
#include "core/error.h"
#include "sandbox/sandbox.h"

namespace gw::sandbox {

// The worker's task: fields::waf_directives(text), encoded for decode_waf_answer.
std::string waf_task(std::string_view text);

// What a run of waf_task means for the request: the field's problem (a crash or a run past the
// time limit is one: the text made the engine fail), or kUnavailable when no worker could run
// (the client may try again; the reason goes to stderr, not to the client).
Result<fields::Problem> waf_problem(const Outcome& outcome);

// waf_task under the name start_waf_sandbox gives it: main() passes it to zygote_main_if_asked.
inline constexpr NamedTask kWafTask{"waf", &waf_task, &fields::waf::prepare_engine};

// Starts a sandbox for waf_task.
Result<std::unique_ptr<Sandbox>> start_waf_sandbox(Limits limits = {});

}  // namespace gw::sandbox
