// waf_scan: our own tokenizer and tenant-escape policy scan of ModSecurity directive text, the
// first step of fields::waf_directives (waf_directives.cc holds the libmodsecurity parse and audit
// that follow, and says why there are three steps). The scan is pure: it reads only its arguments
// and constant tables, touches no global state and never calls libmodsecurity, so it is
// thread-safe and needs no lock. It is stricter than the engine wherever the two could disagree.
//
// Tenant policy, deny by default (these rules run in a gateway shared by all tenants):
// - Directives: SecRule, SecAction, SecMarker, SecRuleRemoveById, SecRuleUpdateTargetById,
//   SecRuleUpdateActionById. Everything else is refused, in particular Include, SecRemoteRules*,
//   SecRuleEngine, SecAuditLog*, Sec*Dir, SecDebugLog*, every engine-wide setting, SecDefaultAction
//   (it changes the defaults of every rule in its phase, platform rules included) and
//   SecRuleRemoveByTag/ByMsg, SecRuleUpdateTargetByTag/ByMsg (they reach rules of any id).
// - Ids: every SecRule/SecAction has id:N, N in 1..99999, unique in the text; the follow-up rules
//   of a chain have none. Ids named by SecRuleRemoveById, SecRuleUpdate*ById, ctl:ruleRemoveById
//   and ctl:ruleRemoveTargetById must lie in 1..99999 as well.
// - Operators: all but @pmFromFile/@pmf, @ipMatchFromFile/@ipMatchF, @inspectFile, @fuzzyHash,
//   @validateDTD, @validateSchema (files), @rbl, @gsbLookup (network lookups), and @rxGlobal,
//   @verifyCPF, @verifySSN, @verifySVNR, @verifyCC (time growing with the square of a value's
//   length; @rxGlobal also crashes on a regex that does not compile). A setvar's value holds at
//   most one macro (two copies double at every run).
// - Costs: no macro in @rx (the engine compiles the macro's value at every match); no macro in
//   @contains, @containsWord, @strmatch or @within, and a parameter of at most
//   kMaxSubstringParameterBytes (a substring search, time growing with the product of the
//   parameter's and the value's lengths); @pm phrases of
//   at most kMaxPmPhraseBytes; at most kMaxRegexCalls recursions in a regex compiled at load,
//   such regexes compiled to at most kMaxCallingRegexBytes in all, and every regex compiled at
//   load (JIT code included) to at most kMaxRegexBytes in all; no macro in @pm or @ipMatch, and
//   each masked address once in an @ipMatch; at most kMaxVariables variables in all; msg, logdata
//   and severity once in a rule; at most kMaxMacros macros in all; at
//   most two of t:hexEncode, t:urlEncode, t:utf8toUnicode, t:base64Encode in a rule (each link of a
//   chain), none added by SecRuleUpdateActionById; at most kMaxLinkTransformations t: in a rule
//   (its cost grows faster than their number) and in all updates, and kMaxTransformationSteps
//   transformations of a value in all (variables times transformations, summed over the rules,
//   those after a lengthening one counted as many times over); no lengthening transformation in a
//   rule that reads TX, MATCHED_VAR(S), their names or RULE, which another rule's output reaches
//   (nor such variables added by updates to a text with one); no multiMatch (memory growing with
//   the square of a rule's matches); XML read only whole, as XML:/* or as XML://@* (any other key
//   is an XPath expression evaluated at every request), but in an exclusion; MULTIPART_PART_HEADERS
//   read only in an exclusion or as a count, kMaxPartHeaderCounts times in all, and in no macro
//   (nothing bounds a part's header lines, and each count builds them all); at most
//   kMaxSetvarBytes of setvar text in all (a setvar may copy its text once per matched variable); a
//   setvar whose name and value both hold macros uses only MATCHED_VAR, MATCHED_VAR_NAME (and RULE
//   in the name); at most kMaxMatches entries added to the request's list of matches and to TX
//   for each argument (a reading of MATCHED_VARS(_NAMES) adds as many as the list holds); no
//   setvar named by a macro in a link that reads TX whole or by a regex key (each match would add
//   a variable to TX), nor such a setvar and such a TX added by updates to a text with the other;
//   RULE read only by a key other than msg and logdata, and no macro of RULE's msg or logdata, nor
//   of MATCHED_VARS(_NAMES) (a rule's msg and logdata may join several values, which a later rule
//   would read back and join again; a macro of the list copies it at every expansion); setvars
//   whose value holds a macro (but sums, =+ and =-) run at most kMaxCopyingSetvarRuns times for
//   each argument in all (each run copies the value, and one that appends to a variable copies
//   all that was appended before), at most kMaxRequestCopyingRuns times a request for variables
//   of one value and in SecActions, and appending at most kMaxGrowthPerArgument bytes for each
//   argument where they copy TX but a capture (what a setvar appends grows at every run); at most
//   kMaxMessageMacros macros in msg, logdata and tag in all (the engine keeps every matched rule's,
//   expanded, until the request ends), and no macro of REQUEST_BODY, FULL_REQUEST or RESPONSE_BODY
//   anywhere (each holds a whole body).
// - Actions (allow-list): accuracy allow auditlog block capture chain ctl deny drop id log logdata
//   maturity msg noauditlog nolog pass phase redirect rev sanitise* setvar severity
//   skipAfter status t tag ver xmlns. Not skip: it counts the rules after it, the platform's
//   included, and the engine carries the count over markers and phases. setvar may only touch TX
//   (IP, GLOBAL, SESSION, USER, RESOURCE are shared by all tenants). Not expirevar or
//   deprecatevar: they act on the shared collections only (a TX variable ends with its request),
//   and the engine's lexer reads an expirevar's value on over the actions after it, up to the last
//   '=' before a blank or a double quote, quoted or not, so an expirevar could hide the text of a
//   setvar of a shared collection in another action's value (a msg) and swallow one of TX to keep
//   the audit's counts equal. ctl may only set requestBodyProcessor (not to XML: a body's DTD
//   makes every reading of XML:/* expand its entities; nor to JSON: the engine names each value
//   by the whole path of keys above it, so a long key makes megabytes of names; the platform
//   decides which bodies are parsed as XML or JSON), requestBodyAccess, forceRequestBodyVariable,
//   ruleRemoveById, ruleRemoveTargetById. So exec, setenv, initcol, setsid, setuid, setrsc,
//   ctl:ruleEngine, ctl:auditEngine, ctl:auditLogParts and ctl:ruleRemove*ByTag are refused.
//   SecRuleUpdateActionById takes no id, chain, phase, rev, ver, maturity or accuracy (the engine
//   drops those there). phase takes no quotes (the engine reads phase:'request' as allow).
// - ENV (as a variable or a %{ENV...} macro) is refused: it would expose the gateway's environment.
//   A variable, in a list or a macro, is exactly one of the engine's names, with a key only after
//   ':' or '.': the engine's lexer reads `REQUEST_LINEENV:X` as REQUEST_LINE and ENV:X, and the
//   macro `%{REMOTE_USERENV.X}` as both variables, their values joined. A key holds '}', '='
//   or '"' only inside a regex key /.../ that is the whole key: the lexer ends a plain key there
//   and reads `ARGS:/a}/ENV:X` as the regex key /a}/ and a variable ENV:X. A regex key ends its
//   variable as the lexer reads it (to the last '/' before a blank, '|', '=' or '"', commas
//   included: `ARGS:/a,TX:/ENV:X` is the key /a,TX:/ and ENV:X), and variables hold no single
//   quotes.
// - skipAfter must name a SecMarker that follows the rule in the same text (the engine skips to
//   the next marker of that name, and past every rule, the platform's included, if there is none),
//   and SecRuleUpdateActionById cannot add one (the rule it changes may follow the marker).
// - '%' is followed by '{' (a macro %{NAME}, NAME of letters, digits, '_', '.', ':', '-') or by a
//   character that delimits nothing: the engine reads '%' and the next character as one where it
//   expands macros, so `%"` did not end a quoted action list for it, and a line the scan took for
//   a comment ran as directives.
// - Unambiguous syntax: comments on lines of their own, not ending in a backslash (the engine
//   takes a comment starting with SecRule or SecAction that ends in a backslash and blanks as
//   continued); one directive per line; operators and actions in double quotes (unquoted, the
//   engine reads on over line breaks); a parameter after every operator that takes one and a
//   value after every action with a ':' (the engine took the text after the closing quote for
//   them); no escaped quotes in variables or actions; in an operator, \" must follow an ordinary
//   character (not '!', '%X', a blank or a quote); no blanks or backslashes in variables;
//   single-quoted values only for actions whose value the engine also reads to the closing quote,
//   and no commas in setvar or rev values. rev, accuracy and maturity take quoted values only: the
//   engine reads an unquoted one past the closing double quote and the line's end (rev up to the
//   next comma, accuracy and maturity up to the next single quote), so `rev:1"` followed by
//   `#,ctl:ruleEngine=Off"` on a comment line ran the ctl.
// - Operators: a known operator name, then exactly one space and a parameter, or nothing but
//   spaces for those that take none. After any other character the engine's lexer drops the text
//   up to the next space, quotes and line ends included, so `"@rx\tz"` ran a comment line's
//   actions and directives.
// - Regexes (an @rx parameter, or an operator with no name) compile as the engine compiles them
//   (PCRE2, DOTALL | MULTILINE): the engine loads a rule whose regex does not, and the rule never
//   matches. One with a macro (%{...}) is compiled per request and not checked.
// - Engine bugs kept away: phase outside 1-5/request/response/logging (crash), @validateByteRange
//   beyond 0..255 (out-of-bounds write), a tab after SecMarker/SecRuleRemoveById/SecRuleUpdate*
//   (crash), so those take exactly one space.
// - Raw net, anywhere in the text, comment lines included: Include followed by blanks and a
//   name, SecRemoteRules, SecAuditLog, SecDebugLog, SecUnicodeMapFile, SecGeoLookupDb,
//   SecGsbLookupDb, SecRuleScript, the file operators, "exec:" and "%{env". So `@pm include
//   require` and "# include the admin paths" are refused: a comment line is only a comment if
//   the engine agrees, and `Include tokens` read the gateway's file of that name into its error.
#pragma once

#include <cstddef>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "commands/fields.h"

namespace gw::fields::waf {

// Tenant rule ids lie in 1..kMaxLocalId.
inline constexpr long kMaxLocalId = 99999;
// The longest phrase of an @pm, in bytes.
inline constexpr size_t kMaxPmPhraseBytes = 128;
// The most recursions and subroutine calls ((?R), (?1), ...) in one regex the engine compiles.
inline constexpr size_t kMaxRegexCalls = 64;
// The most bytes PCRE2 compiles a text's regexes to (PCRE2_INFO_SIZE and PCRE2_INFO_JITSIZE), in
// all; and the most its regexes with recursions or subroutine calls compile to (PCRE2_INFO_SIZE),
// in all.
inline constexpr size_t kMaxRegexBytes = 1 << 20;
inline constexpr size_t kMaxCallingRegexBytes = 8 << 10;
// The most variables a text's rules name (exclusions included) and its SecRuleUpdateTargetById
// add, in all.
inline constexpr size_t kMaxVariables = 2000;
// The most transformations a text's rules apply to one value, in all: the sum over the links of
// rules of their variables times their t: actions (see too_many_transformations).
inline constexpr size_t kMaxTransformationSteps = 1000;
// The most t: actions in one link of a rule, and in all of a text's SecRuleUpdateActionById.
inline constexpr size_t kMaxLinkTransformations = 32;
// The most entries a text's rules can add, for each argument of a request, to the request's list
// of matches (MATCHED_VARS) and to TX, in all: a variable one, a reading of MATCHED_VARS or
// MATCHED_VARS_NAMES as many as the list may hold then, a reading of TX whole or by a regex key
// as many as TX may hold then, a setvar one, and one named by a macro one for each of its rule's
// (link's) entries. The engine's tables of both grow slower than their entries at every insert.
inline constexpr size_t kMaxMatches = 500;
// The most macros (%{...}) in a text's directives, in all.
inline constexpr size_t kMaxMacros = 2000;
// The most times a text names MULTIPART_PART_HEADERS (but in exclusions): each count builds the
// list of a multipart body's header lines, about 5 ms for 7,000 (helper 114). The Core Rule
// Set's 922 counts it twice.
inline constexpr size_t kMaxPartHeaderCounts = 8;
// The most macros in a text's msg, logdata and tag actions, in all (the Core Rule Set 3.3.4's 942
// file has 147).
inline constexpr size_t kMaxMessageMacros = 256;
// The most runs, for each argument of a request, of a text's setvars whose value holds a macro
// (but sums, =+ and =-), in all: a setvar runs once for each match of its rule (link), as the
// matches count them (kMaxMatches), but a variable of one value a request (REQUEST_FILENAME) and
// a SecAction, once a request, count none.
// At the bound, 2,000 bytes appended by a rule of ARGS named twice took 0.022 s on 100 arguments
// and 3.2 s on 1,000 (4 times: 0.096 s and 15.5 s).
inline constexpr size_t kMaxCopyingSetvarRuns = 2;
// The most runs a request of a text's setvars whose value holds a macro (but sums) for variables
// of one value (each time a rule names one) and in SecActions and rules of counts alone, in all:
// a value that appends to itself grows by its text at each (helper 105: REQUEST_FILENAME named
// 499 times built a value of 950 KB, which tags then copied 2,000 times: 5.8 s and 2.7 GB).
inline constexpr size_t kMaxRequestCopyingRuns = 32;
// The most bytes a text's setvars that copy TX (but a capture) may append for each argument of a
// request, in all: each one's text outside macros times its rule's runs for each argument.
inline constexpr size_t kMaxGrowthPerArgument = 64;
// The most text in all of a text's setvar actions (name=value, macros as written).
inline constexpr size_t kMaxSetvarBytes = 2048;
// The longest parameter of an operator the engine runs as a substring search (@contains,
// @containsWord, @strmatch, @within), in bytes.
inline constexpr size_t kMaxSubstringParameterBytes = 1024;

// The actions of one link of a rule (a SecRule, SecAction or chained follow-up rule) that the
// engine keeps in lists of their own, counted alike by the scan and by the audit of what the
// engine built: an action the two read differently (the engine's lexer swallowing text the scan
// took for something else) shows up as counts that differ.
struct LinkActions {
  int line = 0;        // the line the link starts on
  size_t variables = 0;  // in its variable list, but exclusions (`!`); a SecAction has none
  size_t runtime = 0;  // what the engine runs after a match: ctl, log, skip, status, block, ...
  // The names of its t: actions (lower case), in order: a hidden action list with as many
  // transformations (t:hexEncode in place of t:lowercase) shows up as names that differ.
  std::vector<std::string> transformations = {};
  size_t setvars = 0;
  size_t tags = 0;
  bool operator==(const LinkActions&) const = default;
};

struct ScannedRule {
  long id = 0;
  std::vector<LinkActions> links;  // the rule itself, then each chained follow-up rule
  bool operator==(const ScannedRule&) const = default;
};

// What the SecRuleUpdate*ById directives add, counted as the engine keeps them.
struct UpdateCounts {
  size_t targets = 0;  // variables of SecRuleUpdateTargetById
  // The names of the t: of SecRuleUpdateActionById (lower case), of every update, sorted.
  std::vector<std::string> transformations = {};
  size_t actions = 0;          // its other actions
};

// What the scan saw, for the cross-check against the engine.
struct ScanResult {
  // Per SecRule/SecAction that starts a rule, in text order.
  std::vector<ScannedRule> rules;
  // Names of the SecMarkers.
  std::set<std::string> markers;
  // Number of directives (comment lines and blank lines are not directives).
  size_t directives = 0;
  UpdateCounts updates;
  // Line breaks the engine's line count misses in the text followed by a line break (the text
  // as engine_check parses it): after SecRuleUpdateTargetById's targets, libmodsecurity 3.0.9's
  // lexer skips the line break and the empty lines that follow without counting them; nor does it
  // count a line continuation between SecAction and its actions, or the first one between a
  // SecRule's variables and its operator.
  size_t uncounted_line_breaks = 0;
};

// Checks `text` against the tenant policy above. Returns the first problem found, as a message
// for the client ("... (line N)"), or std::nullopt with *result filled in. Does not limit the
// size of `text`; the caller does.
Problem scan_directives(std::string_view text, ScanResult* result);

// Whether the engine's name of an operator (RuleWithOperator::getOperatorName, any case) is one
// the policy refuses.
bool denied_engine_operator(std::string_view engine_name);

// What the policy finds wrong with an operator that libmodsecurity 3.0.9 runs as a substring
// search (std::string::find): @contains, @containsWord and @strmatch look for their parameter in
// the value, @within for the value in its parameter, in time growing with the product of the two
// lengths. So the parameter holds no macro (with one, a client sends both: 2.5 s of the gateway's
// CPU for a 400 KB argument and half of it as the macro's) and at most kMaxSubstringParameterBytes
// (a tenant's 60,000 bytes took 4.5 s on a 1 MB argument). `engine_name` is the operator's name in
// any case, `param` its parameter as written or as the engine keeps it. nullopt for any other
// operator.
Problem substring_search_problem(std::string_view engine_name, std::string_view param,
                                 bool has_macro, int line);

// Whether the engine's name of an action it keeps in a rule's runtime list (Action::m_name, any
// case) is one the policy allows; such actions are counted in LinkActions::runtime.
bool allowed_runtime_action(std::string_view engine_name);

// Whether the engine's name of an action (Action::m_name, any case) is one the policy allows in
// SecRuleUpdateActionById, where the engine keeps every action but transformations in one list.
bool allowed_update_action(std::string_view engine_name);

// Checks the value of a ctl action as the policy does ("ruleRemoveById=5"), for the audit of the
// engine's own copy of it.
Problem check_ctl(std::string_view value, int line);

// The phrases the engine makes of an @pm's parameter (the text after "@pm "), in order, as
// libmodsecurity 3.0.9 does: not always the parameter's words (a hex block's pipes can make it
// repeat the parameter's end). Each costs the engine memory growing with the square of its length.
std::vector<std::string> pm_phrases(std::string_view param);

// The second and third steps of fields::waf_directives (waf_directives.cc): parses `text` with
// libmodsecurity and audits what the engine built against `scan`, the scan's result for the
// same text. Tests call it with a scan result of their own to reach the audit directly.
Problem engine_check(std::string_view text, const ScanResult& scan);

// Makes the engine engine_check runs each text's setvars on, once; engine_check makes it itself if
// this was not called. The sandbox's zygote calls it before its workers are confined: making it
// reads the machine's identity, which a confined worker may not.
void prepare_engine();

// The message for a refused feature: "<what> is not allowed in tenant rules (line N)".
std::string refused(std::string_view what, int line);

// The message for an @rx (or a regex without an operator name) that holds a macro, which the
// engine compiles anew from the macro's value at every match.
std::string rx_with_macro(int line);

}  // namespace gw::fields::waf
