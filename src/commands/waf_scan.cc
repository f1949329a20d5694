// waf_scan: the tokenizer and the tenant policy scan declared in waf_scan.h (the policy itself is
// described there). Pure: only constant tables and the caller's arguments, no libmodsecurity.
#include "commands/waf_scan.h"

#include <arpa/inet.h>
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/text.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace gw::fields::waf {
namespace {

// Allow-lists, lower case, each name between blanks.
constexpr std::string_view kDirectives =
    " secrule secaction secmarker secruleremovebyid secruleupdatetargetbyid "
    "secruleupdateactionbyid ";
constexpr std::string_view kActions =
    " accuracy allow auditlog block capture chain ctl deny drop id log "
    "logdata"
    " maturity msg noauditlog nolog pass phase redirect rev sanitisearg sanitisematched"
    " sanitisematchedbytes sanitiserequestheader sanitiseresponseheader setvar severity"
    " skipafter status t tag ver xmlns ";
// Actions a rule (or a link of a chain) may give once.
constexpr std::string_view kOnceInARule = " logdata msg severity ";
// Actions whose value the engine's lexer also reads up to a closing single quote. Elsewhere it
// stops at a comma (`skipAfter:'x,setenv:a'` runs setenv), so a quoted value would hide actions.
constexpr std::string_view kQuotable =
    " accuracy id logdata maturity msg redirect rev setvar severity tag ver ";
// Actions whose unquoted value the engine's lexer reads on over blanks (up to a comma or a double
// quote); every other action's unquoted value ends at a blank for it.
constexpr std::string_view kBlanksInValue = " logdata msg redirect setvar tag ";
// Actions whose unquoted value the engine's lexer reads past the closing double quote and the end
// of the line (waf_scan.h), so their values must be quoted.
constexpr std::string_view kQuotedOnly = " accuracy maturity rev ";
// Actions the engine keeps in a rule's runtime list (RuleWithActions::m_actionsRuntimePos), by
// the engine's name lower-cased; each one counts in LinkActions::runtime.
constexpr std::string_view kRuntimeActions =
    " auditlog block ctl log noauditlog nolog sanitisearg sanitisematched"
    " sanitisematchedbytes sanitiserequestheader sanitiseresponseheader skipafter status xmlns ";
// Actions the engine takes as configuration of a rule (Action::ConfigurationKind): in
// SecRuleUpdateActionById it drops them, printing a line on stdout.
constexpr std::string_view kConfigurationActions = " accuracy chain id maturity phase rev ver ";
// The operators of libmodsecurity 3.0.9's lexer (seclang-scanner.ll), lower-cased.
constexpr std::string_view kOperators =
    " beginswith contains containsword detectsqli detectxss endswith eq fuzzyhash ge geolookup"
    " gsblookup gt inspectfile ipmatch ipmatchf ipmatchfromfile le lt pm pmf pmfromfile rbl rsub"
    " rx rxglobal streq strmatch unconditionalmatch validatebyterange validatedtd validatehash"
    " validateschema validateurlencoding validateutf8encoding verifycc verifycpf verifyssn"
    " verifysvnr within ";
// Transformations whose output is longer than their input.
constexpr std::string_view kGrowingTransformations =
    " base64encode hexencode urlencode utf8tounicode ";
// How many times longer a link's transformations (lower-cased names) make a value, at most:
// t:hexEncode and t:base64Encode (4/3, rounded up) twice, t:urlEncode and t:utf8toUnicode three
// times.
size_t growth_of(const std::vector<std::string>& transformations) {
  size_t growth = 1;
  for (const std::string& t : transformations) {
    if (t == "hexencode" || t == "base64encode") growth *= 2;
    if (t == "urlencode" || t == "utf8tounicode") growth *= 3;
  }
  return growth;
}
// Variables whose values a rule's own output reaches: a capture's TX:0..9, a setvar's TX, the
// last match's MATCHED_VAR(S) and their names, and RULE (its msg and logdata, their macros
// expanded: `%{TX.0}` there carries the last capture; helper 96). A transformation that
// lengthens a value, run on one of these, lengthens an earlier rule's output again at every
// rule.
constexpr std::string_view kCarrierVariables =
    " tx matched_var matched_vars matched_var_name matched_vars_names rule ";
constexpr size_t kMaxGrowingTransformations = 2;
// The list of a request's matches so far, and its names: a rule's every match adds to it (a rule
// that does not match empties it), so a rule that reads it and matches doubles it.
constexpr std::string_view kMatchListVariables = " matched_vars matched_vars_names ";
// Every header line of a multipart body's parts (part_headers), lower-cased.
constexpr std::string_view kPartHeaders = "multipart_part_headers";
// Variables of one value a request (the rest may hold one for each argument, header, cookie,
// part, match or variable): a rule's actions run once a request for each (Reach::runs).
constexpr std::string_view kSingleValueVariables =
    " args_combined_size auth_type duration files_combined_size full_request full_request_length"
    " highest_severity inbound_data_error matched_var matched_var_name modsec_build"
    " multipart_boundary_quoted multipart_boundary_whitespace multipart_crlf_lf_lines"
    " multipart_data_after multipart_data_before multipart_file_limit_exceeded"
    " multipart_header_folding multipart_invalid_header_folding multipart_invalid_part"
    " multipart_invalid_quoting multipart_lf_line multipart_missing_semicolon"
    " multipart_semicolon_missing multipart_strict_error multipart_unmatched_boundary"
    " outbound_data_error path_info query_string remote_addr remote_host remote_port remote_user"
    " reqbody_error reqbody_error_msg reqbody_processor reqbody_processor_error"
    " reqbody_processor_error_msg request_basename request_body request_body_length"
    " request_filename request_line request_method request_protocol request_uri request_uri_raw"
    " response_body response_content_length response_content_type response_protocol"
    " response_status server_addr server_name server_port sessionid status status_line time"
    " time_day time_epoch time_hour time_min time_mon time_sec time_wday time_year unique_id"
    " urlencoded_error userid webappid ";
// Collections whose keys are unique: one read by a plain key holds one value (ARGS:a, a request's
// headers and cookies by a name, may hold several).
constexpr std::string_view kUniqueKeyCollections = " tx ip global session user resource geo rule ";
// Variables that hold a whole body: no macro may copy one (check_percent).
constexpr std::string_view kWholeBodyVariables = " request_body full_request response_body ";
// Operators libmodsecurity 3.0.9 runs as std::string::find (substring_search_problem).
constexpr std::string_view kSubstringOperators = " contains containsword strmatch within ";
// Operators that take no parameter.
constexpr std::string_view kNoParameterOperators =
    " detectsqli detectxss geolookup unconditionalmatch validateurlencoding validateutf8encoding ";
// The variables of libmodsecurity 3.0.9's parser (seclang-parser.yy), lower-cased, but ENV (the
// gateway's environment). A variable in a rule's list or a macro is one of these exactly, with a
// key only after ':' or '.': the engine's lexer reads a name with more letters after it as that
// name and what follows, so `REQUEST_LINEENV:X` and `%{REMOTE_USERENV.X}` read the environment
// variable X.
constexpr std::string_view kVariables =
    " args args_combined_size args_get args_get_names args_names args_post args_post_names"
    " auth_type duration files files_combined_size files_names files_sizes files_tmp_content"
    " files_tmpnames full_request full_request_length geo global highest_severity"
    " inbound_data_error ip matched_var matched_var_name matched_vars matched_vars_names"
    " modsec_build multipart_boundary_quoted multipart_boundary_whitespace"
    " multipart_crlf_lf_lines multipart_data_after multipart_data_before"
    " multipart_file_limit_exceeded multipart_filename multipart_header_folding"
    " multipart_invalid_header_folding multipart_invalid_part multipart_invalid_quoting"
    " multipart_lf_line multipart_missing_semicolon multipart_name multipart_part_headers"
    " multipart_semicolon_missing multipart_strict_error multipart_unmatched_boundary"
    " outbound_data_error path_info query_string remote_addr remote_host remote_port remote_user"
    " reqbody_error reqbody_error_msg reqbody_processor reqbody_processor_error"
    " reqbody_processor_error_msg request_basename request_body request_body_length"
    " request_cookies request_cookies_names request_filename request_headers"
    " request_headers_names request_line request_method request_protocol request_uri"
    " request_uri_raw resource response_body response_content_length response_content_type"
    " response_headers response_headers_names response_protocol response_status rule server_addr"
    " server_name server_port session sessionid status status_line time time_day time_epoch"
    " time_hour time_min time_mon time_sec time_wday time_year tx unique_id urlencoded_error user"
    " userid webappid xml ";
constexpr std::string_view kCtlOptions =
    " requestbodyprocessor requestbodyaccess forcerequestbodyvariable ruleremovebyid"
    " ruleremovetargetbyid ";
// Operator name prefixes (lower case, without '@'); the engine's lexer matches by longest prefix.
// Files and network lookups; and the operators whose cost grows with the square of a value's
// length in libmodsecurity 3.0.9, for any parameter (a review: @verifyCPF took 28 s on a 1 MB
// argument; @rxGlobal with a regex that can match empty text 6.3 s on 120 KB), @rxGlobal also
// crashing on a regex that does not compile, a macro's included; @verifyCC too (a later review:
// 17.4 s on a 320 KB argument).
constexpr std::array<std::string_view, 13> kDeniedOperators = {
    "pmf",       "ipmatchf", "inspectfile", "fuzzyhash", "validatedtd", "validateschema", "rbl",
    "gsblookup", "rxglobal", "verifycpf",   "verifyssn", "verifysvnr",  "verifycc"};
// The same operators as the engine names them (RuleWithOperator::getOperatorName, lower-cased).
constexpr std::array<std::string_view, 13> kDeniedEngineOperators = {
    "pmfromfile", "ipmatchfromfile", "inspectfile", "fuzzyhash", "validatedtd", "validateschema",
    "rbl",        "gsblookup",       "rxglobal",    "verifycpf", "verifyssn",   "verifysvnr",
    "verifycc"};
constexpr std::array<std::pair<std::string_view, std::string_view>, 16> kRawNet = {
    {{"secremoterules", "directive SecRemoteRules"},
     {"secauditlog", "directive SecAuditLog"},
     {"secdebuglog", "directive SecDebugLog"},
     {"secunicodemapfile", "directive SecUnicodeMapFile"},
     {"secgeolookupdb", "directive SecGeoLookupDb"},
     {"secgsblookupdb", "directive SecGsbLookupDb"},
     {"secrulescript", "directive SecRuleScript"},
     {"@pmf", "operator @pmFromFile"},
     {"@ipmatchf", "operator @ipMatchFromFile"},
     {"@inspectfile", "operator @inspectFile"},
     {"@fuzzyhash", "operator @fuzzyHash"},
     {"@validatedtd", "operator @validateDTD"},
     {"@validateschema", "operator @validateSchema"},
     {"fromfile", "file operators"},
     {"exec:", "action exec"},
     {"%{env", "variable ENV"}}};

template <size_t N>
bool contains(const std::array<std::string_view, N>& list, std::string_view s) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

bool listed(std::string_view list, std::string_view name) {
  return !name.empty() && name.find(' ') == std::string_view::npos &&
         list.find(" " + std::string(name) + " ") != std::string_view::npos;
}

// Client text for a message: at most 40 bytes, printable ASCII only.
std::string shown(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 40)) out.push_back(c >= 0x20 && c < 0x7f ? c : '?');
  return s.size() > 40 ? out + "..." : out;
}

// Where a message points; the audit of what the engine keeps without a line passes 0.
std::string at(int line) { return line > 0 ? " (line " + std::to_string(line) + ")" : ""; }

// A rule id in 1..99999 written as plain digits.
bool local_id(std::string_view s, long* id) {
  if (s.empty() || s.size() > 5 || !std::all_of(s.begin(), s.end(), ascii_digit)) return false;
  *id = std::stol(std::string(s));
  return *id >= 1 && *id <= kMaxLocalId;
}

// An id or an id range "a-b" inside 1..99999.
bool local_id_or_range(std::string_view s, long* first) {
  size_t dash = s.find('-');
  if (dash == std::string_view::npos) return local_id(s, first);
  long last = 0;
  return local_id(s.substr(0, dash), first) && local_id(s.substr(dash + 1), &last) &&
         *first <= last;
}

struct Arg {
  std::string text;    // without surrounding quotes
  std::string blanks;  // the blanks before it
  size_t blanks_at = 0;      // where those blanks start in the directive's joined line
  int breaks_in_blanks = 0;  // line continuations among them (see split_directives)
  bool quoted = false;
  bool escaped_quote = false;    // holds a \"
  bool ambiguous_quote = false;  // holds a \" that the engine's lexer may take as the closing quote
};

struct Directive {
  int line = 0;
  int end_line = 0;  // the last line it runs on (line continuations)
  std::string name;
  std::vector<Arg> args;
};

struct Action {
  std::string name;  // lower case
  std::string value;
  bool quoted = false;
};

// What a text's regexes compiled to so far: all of them (PCRE2_INFO_SIZE and PCRE2_INFO_JITSIZE),
// and those with recursions or subroutine calls (PCRE2_INFO_SIZE).
struct RegexBytes {
  size_t all = 0;
  size_t calling = 0;
};

// What the scan saw, for cross-checks after the scan and (rules) against the engine.
struct Scan {
  // Per SecRule/SecAction that starts a rule: its id and the actions of each link.
  std::vector<ScannedRule> rules;
  std::map<std::string, int> markers;  // name -> line of its last SecMarker
  std::vector<std::pair<std::string, int>> skip_targets;
  int open_chain_line = 0;  // line of a rule ending in `chain`, 0 when none is open
  UpdateCounts updates;
  size_t setvar_bytes = 0;  // the text of every setvar so far (name and value, as written)
  // Entries the rules so far may add for each argument to the request's list of matches and to
  // TX (kMaxMatches), and the most of one link; what updates add, counted at the end (the scan
  // does not know which rule an update changes).
  size_t matches = 0;
  size_t tx_variables = 0;
  size_t most_link_matches = 0;
  size_t most_link_macro_setvars = 0;
  struct {
    size_t targets = 0;        // but those below
    size_t list_readings = 0;  // MATCHED_VARS(_NAMES)
    size_t tx_readings = 0;    // TX whole or by a regex key
    size_t setvars = 0;        // but those below
    size_t macro_setvars = 0;  // named by a macro
    size_t copying_setvars = 0;  // whose value holds a macro (kMaxCopyingSetvarRuns)
    size_t growth_bytes = 0;     // of those copying TX, their text outside macros (growing_copy)
  } update_matches;
  // Runs for each argument of setvars whose value holds a macro, but sums (kMaxCopyingSetvarRuns);
  // in the link being checked, such setvars; the most of one link.
  size_t copying_runs = 0;
  size_t link_copying_setvars = 0;
  size_t most_link_copying_setvars = 0;
  // Runs a request of those setvars for variables of one value, and in SecActions
  // (kMaxRequestCopyingRuns); what those copying TX but a capture append for each argument
  // (kMaxGrowthPerArgument), and in the link being checked, their text outside macros; the most
  // runs for each argument, and for variables of one value, of a link.
  size_t request_copying_runs = 0;
  size_t growth_per_argument = 0;
  size_t link_growth_bytes = 0;
  size_t most_link_runs = 0;
  size_t most_link_single_values = 0;
  size_t most_link_growth_bytes = 0;
  size_t message_macros = 0;  // in msg, logdata and tag (kMaxMessageMacros)
  // Whether a link reads TX whole or by a regex key; the first SecRuleUpdateTargetById that does,
  // and the first SecRuleUpdateActionById with a setvar named by a macro (0: none); in the link
  // being checked, its setvars named by a macro (a link's so far: most_link_macro_setvars).
  bool reads_tx_collection = false;
  int tx_collection_update_line = 0;
  int macro_setvar_update_line = 0;
  size_t link_macro_setvars = 0;
  RegexBytes regex_bytes;
  size_t variables = 0;  // in every rule's variable list so far, exclusions included
  // Transformations applied to a value the variables of every link so far hold (a link's
  // variables times its transformations, summed), and the most variables and transformations of
  // one link, which bound what the updates add (too_many_transformations).
  size_t transformation_steps = 0;
  size_t most_link_variables = 0;
  size_t most_link_transformations = 0;  // times the link's growth (growth_of)
  size_t most_link_growth = 1;
  // The first line of a rule with transformations that lengthen values, and of a
  // SecRuleUpdateTargetById adding a variable of kCarrierVariables (0: none).
  int growing_line = 0;
  int carrier_update_line = 0;
  // Line breaks before the directive being checked that the engine's line count misses
  // (uncounted_breaks): the engine numbers its lines that many lower.
  int line_shift = 0;
};

Problem split_args(std::string_view s, int line, std::vector<Arg>* args) {
  size_t i = 0;
  while (true) {
    size_t blanks = i;
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
    if (i == s.size()) return std::nullopt;
    Arg a;
    a.blanks = std::string(s.substr(blanks, i - blanks));
    a.blanks_at = blanks;
    size_t j = i;
    if (s[i] == '"') {
      a.quoted = true;
      for (j = i + 1; j < s.size() && s[j] != '"'; ++j) {
        if (s[j] != '\\') continue;
        size_t run = j;
        while (j + 1 < s.size() && s[j + 1] == '\\') ++j;
        if (j + 1 < s.size() && s[j + 1] == '"' && (j + 1 - run) % 2 == 1) {
          char before = run > i + 1 ? s[run - 1] : '"';
          a.escaped_quote = true;
          // The engine reads '!' as a token of its own and '%' with the character after it as
          // one, so after those its quote may end where the scan's does not.
          a.ambiguous_quote |=
              std::string_view("\" \t%}!").find(before) != std::string_view::npos ||
              (run >= i + 3 && s[run - 2] == '%');
          ++j;
        }
      }
      if (j == s.size()) return "has an unterminated quoted string" + at(line);
      a.text = std::string(s.substr(i + 1, j - i - 1));
      ++j;
      if (j < s.size() && s[j] != ' ' && s[j] != '\t')
        return "needs a blank after a closing quote" + at(line);
    } else {
      while (j < s.size() && s[j] != ' ' && s[j] != '\t') ++j;
      a.text = std::string(s.substr(i, j - i));
      if (a.text.find('"') != std::string::npos)
        return "has a quote inside an unquoted argument" + at(line);
    }
    args->push_back(std::move(a));
    i = j;
  }
}

// Why `name` (a variable's name, without its key) may not be read, or nothing.
Problem variable_name(std::string_view name, int line) {
  const std::string lower = ascii_lower(name);
  if (lower == "env") return refused("variable ENV", line);
  if (!listed(kVariables, lower)) {
    return "unknown variable '" + shown(name) +
           "' (a variable is one of the WAF engine's names, with a key only after ':' or '.')" +
           at(line);
  }
  return std::nullopt;
}

// A '%' and what follows it, anywhere in the text. The engine's lexer reads '%' and the next
// character as one unit wherever it expands macros (action values, operator arguments), so `%"`
// does not end a quoted string there, nor `%'` or `%,` a value: text the scan takes for a comment
// line after it ran as directives. So '%' is followed by a character that delimits nothing, or
// opens a macro `%{NAME}` whose name delimits nothing either.
Problem check_percent(std::string_view s, int line) {
  auto plain = [](char c) {
    return isalnum(static_cast<unsigned char>(c)) ||
           std::string_view("[()].*+?^$-_/:;!@#&~<>").find(c) != std::string_view::npos;
  };
  if (s.size() < 2 || (s[1] != '{' && !plain(s[1]))) {
    return "must follow % with {, a letter, a digit or one of [()].*+?^$-_/:;!@#&~<> (the WAF "
           "engine reads % and the character after it as one)" +
           at(line);
  }
  if (s[1] != '{') return std::nullopt;
  size_t close = s.find('}', 2);
  std::string_view name = s.substr(2, close == std::string_view::npos ? 0 : close - 2);
  if (close == std::string_view::npos || name.empty() ||
      !std::all_of(name.begin(), name.end(), [](char c) {
        return isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == ':' ||
               c == '-';
      })) {
    return "needs macros written %{NAME}, NAME of letters, digits, '_', '.', ':' and '-'" +
           at(line);
  }
  // The engine reads several variables glued together in one macro and joins their values.
  const std::string_view variable = name.substr(0, name.find_first_of(".:"));
  if (auto p = variable_name(variable, line)) return p;
  const std::string lower = ascii_lower(name);
  const std::string_view lower_variable = std::string_view(lower).substr(0, variable.size());
  // A rule's msg and logdata may join several values, and a setvar or another msg or logdata
  // holding them would join them again at every rule (helper 100: setvar:tx.a=%{RULE.logdata}
  // after logdata:'%{tx.a}%{tx.a}' doubled at every rule); a macro of the list of matches copies
  // the whole list at every expansion (19 SecActions of 100 such macros in logdata took 19.7 s
  // on 100 arguments, against 0.14 s without).
  if (lower == "rule.msg" || lower == "rule:msg" || lower == "rule.logdata" ||
      lower == "rule:logdata" || listed(kMatchListVariables, lower_variable)) {
    return "must not use the macro %{" + std::string(name) +
           "}: RULE's msg and logdata may join several values, which would be joined again, and "
           "a macro of MATCHED_VARS copies the list of matches at every expansion" +
           at(line);
  }
  // Each expansion builds the whole collection of a multipart body's header lines, thousands
  // (part_headers): 490 rules `@streq %{MULTIPART_PART_HEADERS}` took 4.4 s on 62 KB (helper 114).
  if (lower_variable == kPartHeaders) {
    return "must not use the macro %{" + std::string(name) +
           "}: each expansion builds the list of every header line of a multipart body's parts, "
           "which nothing in the WAF engine bounds" +
           at(line);
  }
  // A msg or logdata of 1,990 of them held 260 MB on a request of 64 KB (the engine keeps every
  // matched rule's msg, logdata and tags, expanded, until the request ends; helper 101).
  if (listed(kWholeBodyVariables, lower_variable)) {
    return "must not use the macro %{" + std::string(name) +
           "}: it copies a whole body at every expansion" + at(line);
  }
  return std::nullopt;
}

// Splits the text into directives, dropping comment lines and joining continued lines.
Problem split_directives(std::string_view text, std::vector<Directive>* out) {
  int line = 1;
  size_t macros = 0;
  size_t part_header_names = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c == '\n') ++line;
    // Every naming of MULTIPART_PART_HEADERS but an exclusion, comment lines included: the
    // reads and macros other checks refuse, and the counts, each of which builds the collection
    // (part_headers; helper 114: 1,000 counts took 5.0 s on a 62 KB body).
    if ((c | 0x20) == kPartHeaders[0] && (i == 0 || text[i - 1] != '!') &&
        ascii_iequals(text.substr(i, kPartHeaders.size()), kPartHeaders) &&
        ++part_header_names > kMaxPartHeaderCounts) {
      return "may name MULTIPART_PART_HEADERS at most " + std::to_string(kMaxPartHeaderCounts) +
             " times in all, but in exclusions, and only to count it: each count builds the list "
             "of every header line of a multipart body's parts, which nothing in the WAF engine "
             "bounds" +
             at(line);
    }
    if (c == '\r' && (i + 1 == text.size() || text[i + 1] != '\n'))
      return "must not contain a carriage return outside CRLF" + at(line);
    if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f)
      return "must not contain control characters" + at(line);
    if (c == '%') {
      if (auto p = check_percent(text.substr(i), line)) return p;
      // The engine keeps about 1.07 KB for each macro, wherever it stands: 9,356 in one msg took
      // 10 MB (helper 47). Those in comment lines are counted too.
      if (text[i + 1] == '{' && ++macros > kMaxMacros) {
        return "may hold at most " + std::to_string(kMaxMacros) +
               " macros (%{...}) in all: the WAF engine keeps about 1 KB for each" + at(line);
      }
    }
  }
  std::string logical;
  std::vector<size_t> joins;  // where in `logical` a continued line's backslash was (now a blank)
  int logical_line = 0;
  line = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = std::min(text.find('\n', pos), text.size());
    std::string_view phys = text.substr(pos, end - pos);
    pos = end + 1;
    ++line;
    if (phys.ends_with('\r')) phys.remove_suffix(1);
    bool continued = phys.ends_with('\\');
    if (logical_line == 0) {
      size_t first = phys.find_first_not_of(" \t");
      if (first != std::string_view::npos && phys[first] == '#') {
        // The engine's lexer takes a comment that starts with SecRule or SecAction and ends in a
        // backslash (blanks after it included) as continued, and skips the next line with it;
        // and it counted `#SecAction a\ b` (a backslash, blanks and a character) as two lines,
        // which made up for a line it swallowed elsewhere (helper 39). Other comments may hold a
        // backslash (`# blocks /admin\.php`), but not at their end.
        const size_t last = phys.find_last_not_of(" \t");
        const std::string lower = ascii_lower(phys);
        const bool names_rule = lower.find("secrule") != std::string::npos ||
                                lower.find("secaction") != std::string::npos;
        if (phys[last] == '\\' || (names_rule && phys.find('\\') != std::string_view::npos))
          return "must not put a backslash at the end of a comment, or in one that names "
                 "SecRule or SecAction" +
                 at(line);
        continue;
      }
      logical_line = line;
    }
    if (continued) {
      // A continued line with nothing on it but blanks: after one such line, the engine's lexer
      // read a quoted operator up to the next blank, quotes and line ends included, and took the
      // next comment line's text for the rule's actions (helper 39).
      if (phys.find_first_not_of(" \t") == phys.size() - 1)
        return "must not continue a line that holds nothing but blanks" + at(line);
      logical.append(phys.substr(0, phys.size() - 1));
      joins.push_back(logical.size());
      logical.push_back(' ');
      continue;
    }
    logical.append(phys);
    std::vector<Arg> args;
    if (auto p = split_args(logical, logical_line, &args)) return p;
    // `joins` grows: each argument's are found by a binary search, not a pass over all of them
    // (a directive of 21,826 continued one-character arguments took 0.27 s that way).
    for (Arg& a : args) {
      const auto from = std::lower_bound(joins.begin(), joins.end(), a.blanks_at);
      const auto to = std::lower_bound(from, joins.end(), a.blanks_at + a.blanks.size());
      a.breaks_in_blanks = static_cast<int>(to - from);
    }
    joins.clear();
    if (!args.empty()) {
      if (args[0].quoted) return "must not quote a directive name" + at(logical_line);
      out->push_back(
          {logical_line, line, args[0].text, std::vector<Arg>(args.begin() + 1, args.end())});
    }
    logical.clear();
    logical_line = 0;
  }
  if (logical_line != 0) return "must not end with a line continuation" + at(logical_line);
  return std::nullopt;
}

Problem split_actions(std::string_view s, int line, std::vector<Action>* out) {
  for (size_t k = 0; k + 1 < s.size(); ++k) {
    if (s[k] == '\\' && (s[k + 1] == '\'' || s[k + 1] == '"'))
      return "must not use escaped quotes in actions" + at(line);
  }
  auto blank = [&](size_t k) { return k < s.size() && (s[k] == ' ' || s[k] == '\t'); };
  size_t i = 0;
  while (true) {
    while (blank(i)) ++i;
    size_t start = i;
    while (i < s.size() && s[i] != ':' && s[i] != ',') ++i;
    Action a{ascii_lower(s.substr(start, i - start)), "", false};
    while (!a.name.empty() && (a.name.back() == ' ' || a.name.back() == '\t')) a.name.pop_back();
    if (a.name.empty()) return "has an empty action" + at(line);
    const bool has_value = i < s.size() && s[i] == ':';
    if (has_value) {
      ++i;
      if (i < s.size() && s[i] == '\'') {
        size_t close = s.find('\'', i + 1);
        if (close == std::string_view::npos)
          return "has an unterminated quoted action value" + at(line);
        a.value = std::string(s.substr(i + 1, close - i - 1));
        a.quoted = true;
        for (i = close + 1; blank(i);) ++i;
        if (i < s.size() && s[i] != ',') return "has text after a quoted action value" + at(line);
      } else {
        size_t end = std::min(s.find(',', i), s.size());
        a.value = std::string(s.substr(i, end - i));
        while (!a.value.empty() && (a.value.back() == ' ' || a.value.back() == '\t'))
          a.value.pop_back();
        if (a.value.find('\'') != std::string::npos)
          return "must quote whole action values only" + at(line);
        i = end;
      }
    }
    // An empty value: a double quote right after `msg:` opens a value that runs on to the next
    // double quote, the lines after it included.
    if (has_value && a.value.empty()) return "needs a value after " + a.name + ":" + at(line);
    out->push_back(std::move(a));
    if (i >= s.size()) return std::nullopt;
    ++i;  // the comma
  }
}

enum class Role { kHead, kLink, kUpdate };

}  // namespace

Problem check_ctl(std::string_view value, int line) {
  size_t eq = value.find('=');
  std::string option = ascii_lower(value.substr(0, eq));
  std::string_view arg = eq == std::string_view::npos ? std::string_view() : value.substr(eq + 1);
  if (!listed(kCtlOptions, option)) return refused("ctl:" + shown(value.substr(0, eq)), line);
  // libxml2 keeps a DTD's entities unexpanded in the document, and every reading of XML:/* or
  // XML://@* expands them: one reading of a 63 KB body took 5 s and 1.6 GB, an attribute 171 s
  // (helper 101). Which bodies are parsed as XML is the platform's choice.
  // The engine names a JSON value by the whole path of keys above it, so one long key is copied
  // into the name of every value under it: SecArgumentsLimit counts names, not their bytes, and
  // 100 names of a 62 KB body made 6 MB of names, which 20 rules matching them copied into
  // MATCHED_VARS: 3.4 s and 900 MB (helper 107). Which bodies are parsed as JSON is the
  // platform's choice too.
  if (option == "requestbodyprocessor") {
    const std::string processor = ascii_lower(arg);
    if (processor.find("xml") != std::string::npos) {
      return "ctl:requestBodyProcessor may not be XML: a body's DTD makes every reading of XML:/* "
             "expand its entities (seconds of CPU and gigabytes on a 63 KB body); which bodies "
             "are parsed as XML is the platform's choice" +
             at(line);
    }
    if (processor.find("json") != std::string::npos) {
      return "ctl:requestBodyProcessor may not be JSON: the engine names each value by the whole "
             "path of keys above it, so a 62 KB body makes megabytes of argument names (20 rules "
             "matching them took 3.4 s and 900 MB); which bodies are parsed as JSON is the "
             "platform's choice" +
             at(line);
    }
  }
  long id = 0;
  if (option == "ruleremovebyid" && !local_id_or_range(arg, &id))
    return "ctl:ruleRemoveById may only name rule ids in 1..99999" + at(line);
  if (option == "ruleremovetargetbyid") {
    size_t semi = arg.find(';');
    if (!local_id(arg.substr(0, semi), &id))
      return "ctl:ruleRemoveTargetById may only name rule ids in 1..99999" + at(line);
    if (semi != std::string_view::npos && ascii_lower(arg.substr(semi + 1)).starts_with("env"))
      return refused("variable ENV", line);
  }
  return std::nullopt;
}

// libmodsecurity 3.0.9's parse_pm_content (src/utils/acmp.cc), then Pm::init's split of what it
// returns at blanks (an istream's >>). It strips one pair of double quotes, makes a byte of two hex
// digits between '|' (it takes a-f, A-F and the bytes 1 to 9 for digits, and drops everything
// else there), and keeps the character after a backslash if it is one of : ; \\ ". It writes what
// it makes over the front of its copy of the parameter but never ends the text there: what it
// returns goes on with the copy's last characters, as many as it made fewer. So "ab|ab|" makes
// "ab\xAB" and then "b|", one phrase "ab\xABb|"; pipes alone make nothing and come back whole. On
// an escape it does not know, or with nothing left after the quotes, it returns nothing, and
// Pm::init splits the parameter as it is.
std::vector<std::string> pm_phrases(std::string_view param) {
  param = param.substr(0, param.find('\0'));  // the engine reads the parameter as a C string
  std::string_view text = param.substr(std::min(param.find_first_not_of(" \t"), param.size()));
  if (text.size() >= 2 && text.front() == '"' && text.back() == '"')
    text = text.substr(1, text.size() - 2);
  std::string made(text);
  size_t x = 0;
  bool hex = false, escaped = false, known = !made.empty();
  std::array<char, 3> digits{};  // two digits and the end of the C string strtol reads
  size_t held = 0;
  for (size_t i = 0; i < made.size() && known; ++i) {
    const char c = made[i];
    if (c == '|') {
      hex = !hex;
    } else if (!escaped && c == '\\') {
      escaped = true;
    } else if (hex) {
      // Its digits: '0' to '9' are not among them, the bytes 1 to 9 are (it compares with 1..9).
      if ((c >= 1 && c <= 9) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')) {
        digits[held++] = c;
        if (held == 2) {
          made[x++] = static_cast<char>(strtol(digits.data(), nullptr, 16) & 0xff);
          held = 0;
        }
      }
    } else if (escaped) {
      known = c == ':' || c == ';' || c == '\\' || c == '"';
      made[x++] = c;
      escaped = false;
    } else {
      made[x++] = c;
    }
  }
  if (!known) made = param;
  made.resize(std::min(made.find('\0'), made.size()));  // a byte 0 it made ends its C string
  std::vector<std::string> phrases;
  size_t start = 0;
  auto blank = [](char c) { return isspace(static_cast<unsigned char>(c)) != 0; };
  while (start < made.size()) {
    while (start < made.size() && blank(made[start])) ++start;
    size_t end = start;
    while (end < made.size() && !blank(made[end])) ++end;
    if (end > start) phrases.emplace_back(made.substr(start, end - start));
    start = end;
  }
  return phrases;
}

namespace {

// A macro of a text: its name, lower-cased, and the bytes it takes, `%{` to `}`.
struct Macro {
  std::string name;
  size_t bytes = 0;
};

// The macros of `text` (each well formed: check_percent), in order.
std::vector<Macro> macros_in(std::string_view text) {
  std::vector<Macro> out;
  for (size_t at = text.find("%{"); at != std::string_view::npos; at = text.find("%{", at + 2)) {
    const size_t end = std::min(text.find('}', at), text.size() - 1) + 1;
    out.push_back(Macro{ascii_lower(text.substr(at + 2, end - at - 3)), end - at});
  }
  return out;
}

// Whether every macro in `text` names what matched: MATCHED_VAR or MATCHED_VAR_NAME, and with
// `rule_too` RULE's fields as well.
bool macros_of_the_match(std::string_view text, bool rule_too) {
  return std::ranges::all_of(macros_in(text), [rule_too](const Macro& m) {
    return m.name == "matched_var" || m.name == "matched_var_name" ||
           (rule_too && (m.name.starts_with("rule.") || m.name.starts_with("rule:")));
  });
}

// The name a setvar of TX sets (after `tx.` or `tx:`, up to `=`): letters, digits, '_', '.', '-'
// and %{...} macros only. After `tx.` the engine's lexer reads a name in slashes as a regex, from
// the first '/' to a later one followed by a comma, blank or '|', commas and quotes included, so
// `setvar:tx./a,setvar:tx.b,msg:'q/,setvar:global.y=1,msg:z'` was one setvar of TX to the engine,
// and the text the scan read as a msg ran as a setvar of GLOBAL (the setvar counts stayed equal).
Problem setvar_name(std::string_view value, int line) {
  std::string_view name = value.substr(value.starts_with('!') ? 4 : 3);
  name = name.substr(0, name.find('='));
  auto plain = [](char c) {
    return isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
  };
  for (size_t i = 0; i < name.size(); ++i) {
    if (name[i] == '%' && i + 1 < name.size() && name[i + 1] == '{') {
      const size_t close = name.find('}', i);
      if (close != std::string_view::npos) {
        i = close;  // the macro's name is checked with every '%' (check_percent)
        continue;
      }
    }
    if (!plain(name[i])) {
      return "setvar names may hold only letters, digits, '_', '.', '-' and %{...} macros (the "
             "WAF engine reads a name in slashes as a regex that runs on over later actions)" +
             at(line);
    }
  }
  if (name.empty()) return "needs a variable name after setvar:tx." + at(line);
  return std::nullopt;
}

// The bytes of a setvar's value (after '=') outside its macros: what a run appends to the
// values the macros copy.
size_t text_outside_macros(std::string_view value) {
  size_t bytes = value.size();
  for (const Macro& m : macros_in(value)) bytes -= m.bytes;
  return bytes;
}

// Whether a setvar's value (after '=') holds a macro of TX but a capture (TX.0 to TX.9), which
// holds at most what a rule matched.
bool copies_tx(std::string_view value) {
  return std::ranges::any_of(macros_in(value), [](const Macro& m) {
    const std::string_view name = m.name;
    if (name.substr(0, name.find_first_of(".:")) != "tx") return false;
    const std::string_view key = name.substr(std::min<size_t>(name.size(), 3));
    return key.size() != 1 || !ascii_digit(key[0]);
  });
}

Problem check_actions(const Arg& arg, int line, Role role, Scan* scan, long* id, bool* chain,
                      LinkActions* counts) {
  std::vector<Action> actions;
  if (auto p = split_actions(arg.text, line, &actions)) return p;
  size_t growing = 0;                // transformations whose output is longer than their input
  std::set<std::string_view> given;  // of kOnceInARule
  for (const Action& a : actions) {
    // The engine keeps one msg, logdata and severity for a rule, and drops the one before
    // without freeing it: 10,916 msg:a in one rule lost 3 MB at every load of the text, a msg
    // of 9,356 macros followed by msg:a 8.8 MB (helper 47).
    if (listed(kOnceInARule, a.name) && !given.insert(a.name).second)
      return "may give " + a.name + " once in a rule" + at(line);
    // The engine keeps every matched rule's msg, logdata and tags, expanded, until the request
    // ends: their memory is their macros times the values these expand to (helper 101: 1,990
    // macros of the body held 260 MB on a request of 64 KB; helper 105: 2,000 in tags, 2.7 GB).
    if (a.name == "msg" || a.name == "logdata" || a.name == "tag") {
      scan->message_macros += macros_in(a.value).size();
      if (scan->message_macros > kMaxMessageMacros) {
        return "may hold at most " + std::to_string(kMaxMessageMacros) +
               " macros (%{...}) in msg, logdata and tag in all: the WAF engine keeps every "
               "matched rule's msg, logdata and tags, expanded, until the request ends" +
               at(line);
      }
    }
    // Each of these multiplies a value's length (hexEncode by 2, urlEncode and utf8toUnicode by up
    // to 3, base64Encode by 4/3), and the engine applies them in turn: 27 t:hexEncode on any
    // request took 17.8 s and 2 GB, 32 ended the process (std::bad_alloc). At most two to a rule,
    // none added to one by an update (which the scan cannot add up with the rule's own).
    if (a.name == "t" && listed(kGrowingTransformations, ascii_lower(a.value))) {
      if (role == Role::kUpdate)
        return "must not add t:" + a.value + " with SecRuleUpdateActionById" + at(line);
      if (++growing > kMaxGrowingTransformations) {
        return "may use at most " + std::to_string(kMaxGrowingTransformations) +
               " of t:hexEncode, t:urlEncode, t:utf8toUnicode and t:base64Encode in a rule "
               "(each link of a chain): "
               "each multiplies the length of what it transforms" +
               at(line);
      }
    }
    // skip:N counts the rules after it, the platform's included, and libmodsecurity 3.0.9 carries
    // the count over markers and into later phases.
    if (a.name == "skip") return refused("action skip (use skipAfter and a SecMarker)", line);
    // With multiMatch the engine runs the operator after each transformation, and its record of
    // a rule's matches grows with each match and is copied at each: memory and time growing with
    // the square of the matches, which a client multiplies with its arguments (libmodsecurity
    // 3.0.9: 1,000 arguments of 10 bytes under one rule of 8 transformations took 733 MB and
    // 1 s, 3,000 took 6.6 GB and 27 s; 3,000 under a rule of one, 272 MB; helper 90).
    if (a.name == "multimatch") {
      return refused(
          "action multiMatch (the WAF engine's record of a rule's matches grows with each one "
          "and is copied at each, so its memory grows with the square of the request's "
          "arguments; write a rule for each transformation instead)",
          line);
    }
    if (a.name == "expirevar" || a.name == "deprecatevar") {
      return refused("action " + a.name +
                         " (it acts on shared collections only; a TX variable ends with its "
                         "request)",
                     line);
    }
    if (!listed(kActions, a.name)) return refused("action " + shown(a.name), line);
    if (a.quoted && !listed(kQuotable, a.name))
      return "must not quote the value of " + a.name + at(line);
    // The engine's lexer ends an unquoted value at a blank, except those of msg, logdata, tag,
    // redirect and setvar; a blank the scan reads inside one came from a line continuation after a
    // value character, which the engine takes as part of the value and then ends the actions at
    // the line break (the next line ran as directives of its own: a review smuggled a setvar of
    // GLOBAL that way, after an xmlns value).
    if (!a.quoted && a.value.find_first_of(" \t") != std::string::npos &&
        !listed(kBlanksInValue, a.name)) {
      return "must not put blanks or line continuations in the value of " + a.name + at(line);
    }
    if (!a.quoted && listed(kQuotedOnly, a.name))
      return "must quote the value of " + a.name + ", as in " + a.name + ":'1'" + at(line);
    if ((a.name == "setvar" || a.name == "rev") && a.value.find(',') != std::string::npos) {
      return "must not put commas in " + a.name + " values" +
             at(line);  // the engine splits quoted setvar at commas and has no rev with one
    }
    if (listed(kRuntimeActions, a.name)) ++counts->runtime;
    if (a.name == "t") {
      counts->transformations.push_back(ascii_lower(a.value));
      // A rule's cost grows faster than its transformations (helper 92: 1,000 t:lowercase took
      // 1.6 ms on one argument, 2,000 7.3 ms, 4,000 22 to 44 ms).
      if (role != Role::kUpdate && counts->transformations.size() > kMaxLinkTransformations) {
        return "may apply at most " + std::to_string(kMaxLinkTransformations) +
               " transformations in a rule (each link of a chain): the WAF engine's cost of a rule "
               "grows faster than their number" +
               at(line);
      }
    }
    if (a.name == "setvar") ++counts->setvars;
    if (a.name == "tag") ++counts->tags;
    if (a.name == "id") {
      if (role == Role::kLink) return "must not give an id to a chained follow-up rule" + at(line);
      if (role == Role::kUpdate)
        return "must not change ids with SecRuleUpdateActionById" + at(line);
      if (*id != 0) return "must give a rule one id only" + at(line);
      if (!local_id(a.value, id)) return "needs rule ids in 1..99999" + at(line);
    } else if (a.name == "chain") {
      if (role == Role::kUpdate)
        return "must not add chain with SecRuleUpdateActionById" + at(line);
      *chain = true;
    } else if (role == Role::kUpdate && listed(kConfigurationActions, a.name)) {
      return "must not change " + a.name + " with SecRuleUpdateActionById (the engine ignores it)" +
             at(line);
    } else if (a.name == "ctl") {
      if (auto p = check_ctl(a.value, line)) return p;
    } else if (a.name == "setvar") {
      std::string target = ascii_lower(a.value);
      if (!(target.starts_with("tx.") || target.starts_with("!tx.") || target.starts_with("tx:"))) {
        return a.name + " may only change TX variables" + at(line);
      }
      if (auto p = setvar_name(a.value, line)) return p;
      if (a.value.substr(0, a.value.find('=')).find("%{") != std::string::npos) {
        if (role == Role::kUpdate) {
          ++scan->update_matches.macro_setvars;
          if (scan->macro_setvar_update_line == 0) scan->macro_setvar_update_line = line;
        } else {
          ++scan->link_macro_setvars;
        }
      } else if (role == Role::kUpdate) {
        ++scan->update_matches.setvars;
      }
      // A value built of two copies (`tx.e=%{TX.e}%{TX.e}x`) doubles at every run: a review's
      // rule took 2 GB in 5 s on a request with 40 arguments. With one macro a value grows by
      // its own text at most, as the Core Rule Set's `=+%{tx.critical_anomaly_score}` does.
      const size_t eq = a.value.find('=');
      const size_t first = eq == std::string::npos ? eq : a.value.find("%{", eq);
      // A value holding a macro is copied at each run, and one that appends to a variable
      // (`tx.a=%{tx.a}<text>`) copies all that was appended before: in a rule of ARGS named 30
      // times, 2,000 bytes so took 8.2 s on 100 arguments (helper 101). A sum (=+, =-) stays a
      // number. Their runs are bounded (too_many_copies).
      if (first != std::string::npos && a.value[eq + 1] != '+' && a.value[eq + 1] != '-') {
        const std::string_view value = std::string_view(a.value).substr(eq + 1);
        const size_t grows = copies_tx(value) ? text_outside_macros(value) : 0;
        if (role == Role::kUpdate) {
          ++scan->update_matches.copying_setvars;
          scan->update_matches.growth_bytes += grows;
        } else {
          ++scan->link_copying_setvars;
          scan->link_growth_bytes += grows;
        }
      }
      if (first != std::string::npos && a.value.find("%{", first + 2) != std::string::npos) {
        return "setvar values may hold at most one macro (%{...}): a value made of two copies "
               "of variables can double at every run" +
               at(line);
      }
      // A setvar named by a macro sets a variable of its own for each name it expands to, each
      // holding its value. With a macro of one fixed value there (`tx.%{MATCHED_VAR}=%{ARGS.a}`),
      // a client's 64,000 bytes kept once for each of 7,500 arguments took 499 MB (a review,
      // libmodsecurity 3.0.9); with a name counting the matches (`tx.v%{tx.n}=%{MATCHED_VAR}`
      // after `tx.n=+1`) a rule reading REQUEST_BODY 500 times kept 500 copies of the body. So
      // when both hold macros, the name is made of what matched and the rule (a name per
      // matched variable) and the value of what matched, which grows with the request.
      if (first != std::string::npos && a.value.find("%{") < eq) {
        const std::string_view setvar(a.value);
        if (!macros_of_the_match(setvar.substr(eq), false) ||
            !macros_of_the_match(setvar.substr(0, eq), true)) {
          return "setvars whose name and value both hold macros may use only %{MATCHED_VAR} "
                 "and %{MATCHED_VAR_NAME} (and %{RULE...} in the name): the WAF engine keeps "
                 "the value once for each name the macros make" +
                 at(line);
        }
      }
      // A setvar runs once per matched variable: one that appends its text to a variable
      // (`tx.a=%{tx.a}<text>`, or two that append to each other) copies all that was appended
      // before at each run, and one named by a macro (`tx.%{MATCHED_VAR_NAME}=<text>`) keeps a
      // copy of its text for each. With 60,000 bytes of text, 1,000 arguments took 69 s and
      // 8,000 arguments 499 MB (libmodsecurity 3.0.9, in my test program). So their text is
      // bounded for the whole of a tenant's rules, the Core Rule Set's longest (901200) 3 times.
      scan->setvar_bytes += a.value.size();
      if (scan->setvar_bytes > kMaxSetvarBytes) {
        return "setvars may hold at most " + std::to_string(kMaxSetvarBytes) +
               " bytes of text in all (names and values, as written): a setvar runs once per "
               "matched variable and may copy its text each time" +
               at(line);
      }
    } else if (a.name == "phase") {
      std::string phase = ascii_lower(a.value);
      if ((phase.size() != 1 || phase[0] < '1' || phase[0] > '5') && phase != "request" &&
          phase != "response" && phase != "logging") {
        return "needs phase 1-5, request, response or logging" +
               at(line);  // larger numbers crash the engine
      }
    } else if (a.name == "skipafter") {
      // The scan knows where the update is, not where the rule it changes is.
      if (role == Role::kUpdate)
        return "must not add skipAfter with SecRuleUpdateActionById" + at(line);
      scan->skip_targets.emplace_back(a.value, line);
    }
    if (role == Role::kUpdate && a.name == "t") {
      const std::string name = ascii_lower(a.value);
      auto& names = scan->updates.transformations;
      names.insert(std::upper_bound(names.begin(), names.end(), name), name);
    } else if (role == Role::kUpdate) {
      ++scan->updates.actions;
    }
  }
  return std::nullopt;
}

// How many recursions and subroutine calls `pattern` holds, counted in its text (an upper
// bound: one in a character class or after an escaped backslash counts too): (?R), (?0), (?1),
// (?+1), (?-1), (?&name), (?P>name), \g<...> and \g'...'.
size_t regex_calls(std::string_view pattern) {
  size_t calls = 0;
  for (size_t i = 0; i + 2 < pattern.size(); ++i) {
    const char a = pattern[i], b = pattern[i + 1], c = pattern[i + 2];
    const char d = i + 3 < pattern.size() ? pattern[i + 3] : '\0';
    if (a == '(' && b == '?') {
      if (c == 'R' || c == '&' || ascii_digit(c) || ((c == '+' || c == '-') && ascii_digit(d)) ||
          (c == 'P' && d == '>')) {
        ++calls;
      }
    } else if (a == '\\' && b == 'g' && (c == '<' || c == '\'')) {
      ++calls;
    }
  }
  return calls;
}

// Why `pattern` does not compile as the engine compiles its regexes (PCRE2, DOTALL | MULTILINE,
// plus `options`), or nothing; or that it holds too many recursions to compile at every load, or
// takes the text's compiled regexes (`spent`, what they compiled to so far) past their bounds.
Problem regex_problem(std::string_view pattern, uint32_t options, int line, RegexBytes* spent) {
  // PCRE2 10.42's JIT compile of a recursion into a group takes time growing with the number of
  // calls times the group's size: 9,285 alternatives of \S(?R) took 3 s at each load of the text.
  const size_t calls = regex_calls(pattern);
  if (calls > kMaxRegexCalls) {
    return "needs a regular expression with at most " + std::to_string(kMaxRegexCalls) +
           " recursions or subroutine calls ((?R), (?1), (?&name), \\g<...>): compiling one "
           "takes time growing with their number times the size of what they call" +
           at(line);
  }
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                    PCRE2_DOTALL | PCRE2_MULTILINE | options, &error, &offset, nullptr);
  if (code != nullptr) {
    size_t size = 0;
    pcre2_pattern_info(code, PCRE2_INFO_SIZE, &size);
    // A repeat copies what it repeats into the compiled regex: 13 bytes of (?:a|b){5000} compile
    // to 64 KB, which the engine keeps (and its JIT code) for as long as the text is loaded;
    // 1,500 of them took 100 MB. And the count of calls in the text misses those a repeat copies:
    // (?R){21000} is one call written and 21,000 compiled, whose JIT compile took 3.2 s at every
    // load. The compiled size bounds both: each call takes bytes of it. Checked before the JIT
    // compile below, which would take that time here.
    if (calls > 0) spent->calling += size;
    if (spent->calling > kMaxCallingRegexBytes) {
      pcre2_code_free(code);
      return "needs its regular expressions with recursions or subroutine calls to compile to "
             "at most " +
             std::to_string(kMaxCallingRegexBytes >> 10) +
             " KiB in all: compiling one takes time growing with its calls times its size, and a "
             "repeat makes copies of the calls it repeats ((?R){21000} makes 21,000)" +
             at(line);
    }
    // The engine JIT-compiles each regex as well and keeps the machine code, 30 to 50 times the
    // compiled size for a lookbehind: 16 rules of (*UTF)(*UCP)(?<=\w\w...){1100}x, 1.3 KB of
    // text, took 52 MB (helper 47). Where JIT is not to be had, the engine has no such code.
    size_t machine_code = 0;
    if (pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0)
      pcre2_pattern_info(code, PCRE2_INFO_JITSIZE, &machine_code);
    // UTF-8 mode, which only the pattern can switch on ((*UTF) among the options at its start;
    // the engine sets none): the engine matches with pcre2_jit_match, which skips PCRE2's check
    // that the subject is UTF-8, and a (*UTF) regex read past an invalid byte from a client.
    // `?a=%FF` crashed the gateway on (*UTF)\X, (*UTF)\p{L} or (*UTF)(*UCP)\w (libpcre2-8
    // 10.42, SIGSEGV; pcre2_match gives -23, a bad UTF-8 subject).
    uint32_t all_options = 0;
    pcre2_pattern_info(code, PCRE2_INFO_ALLOPTIONS, &all_options);
    pcre2_code_free(code);
    spent->all += size + machine_code;
    if (spent->all > kMaxRegexBytes) {
      return "needs its regular expressions to compile to at most " +
             std::to_string(kMaxRegexBytes >> 10) +
             " KiB in all, JIT code included: the WAF engine keeps each compiled, a repeat makes "
             "copies of what it repeats ((?:a|b){5000} compiles to 64 KB), and a lookbehind's "
             "JIT code can take 50 times its size" +
             at(line);
    }
    if ((all_options & PCRE2_UTF) != 0) {
      return "needs a regular expression without (*UTF): the WAF engine matches with PCRE2's "
             "JIT, which does not check that a value is UTF-8, and one invalid byte from a "
             "client crashes the gateway" +
             at(line);
    }
    return std::nullopt;
  }
  PCRE2_UCHAR message[256] = {};
  if (pcre2_get_error_message(error, message, sizeof message) < 0) message[0] = 0;
  return "needs a regular expression that compiles, not " + shown(pattern) + " (" +
         reinterpret_cast<const char*>(message) + " at offset " + std::to_string(offset) + ")" +
         at(line);
}

// A variable's key, after the ':'. The engine's lexer ends a plain key at '}', '=' or '"', and
// reads one in slashes as a regex up to its closing '/': whichever is longer. So in
// `ARGS:/a}/ENV:X` the regex `/a}/` was the key and `ENV:X` another variable, with no '|'
// between (the environment variable X then began the rule's regex). Such characters may
// only stand in a regex key that ends the variable.
Problem variable_key(std::string_view key, int line) {
  if (key.find_first_of("}=\"") == std::string_view::npos) return std::nullopt;
  const bool whole_regex = key.size() >= 2 && key.front() == '/' && key.back() == '/' &&
                           key.substr(1, key.size() - 2).find('/') == std::string_view::npos;
  if (whole_regex) return std::nullopt;
  return "a variable's key may hold '}', '=' or '\"' only inside a regex key /.../ that ends the "
         "variable (the WAF engine ends other keys there and reads what follows as another "
         "variable)" +
         at(line);
}

// The engine evaluates an XML variable's key as an XPath expression over the request body's
// document, for every request whose body it parsed as XML (a platform rule or the tenant's
// ctl:requestBodyProcessor=XML), under a count (`&XML:...`) too: `XML://*//*//*//*//*` took 50 s
// of CPU on an 888-byte body (libmodsecurity 3.0.9 and libxml2, in my test program). The two keys
// the Core Rule Set reads, the root element and every attribute, cost one walk of the document.
// An exclusion (`!XML:...`) is compared by name, not evaluated. A lower-cased `name` and `key`.
Problem xml_key(std::string_view name, std::string_view key, int line) {
  if (name != "xml" || key == "/*" || key == "//@*") return std::nullopt;
  return "may read XML only whole (XML), as its root element (XML:/*) or its attributes "
         "(XML://@*): the WAF engine evaluates any other key as an XPath expression over the "
         "body for every request, and some take a minute on a 1 KB body" +
         at(line);
}

// MULTIPART_PART_HEADERS holds every header line of a multipart body's parts, and nothing in
// libmodsecurity 3.0.9 bounds how many a part has (SecArgumentsLimit counts parts): about 7,000
// fit in a 62 KB body, and a rule reading them (by a part's name too) adds each to the request's
// list of matches, which the bounds above count as one value per argument. Ten rules of
// `MULTIPART_PART_HEADERS "@rx ."` took 19.3 s on 100 parts of 68 headers, a rule naming it 499
// times ended the engine with std::bad_alloc (helper 111). An exclusion (`!`) reads none; a count
// (`&`) builds the whole collection too, so a text counts it at most kMaxPartHeaderCounts times
// (split_directives), and no macro names it (check_percent). A lower-cased `name`.
Problem part_headers(std::string_view name, int line) {
  if (name != kPartHeaders) return std::nullopt;
  return "may read MULTIPART_PART_HEADERS only as a count (&MULTIPART_PART_HEADERS): nothing in "
         "the WAF engine bounds a multipart part's headers, and a rule reading them takes "
         "seconds on a 50 KB body" +
         at(line);
}

// Whether the key at `vars[key_at]` ends where the scan ends its variable (`end`, the next ',' or
// '|') as the engine's lexer reads it. A key starting with '/' may be read as a regex key: from
// that '/' to the last '/' before a blank, '=', '|' or '"' (commas included), taken when longer
// than the plain key, which ends at a blank, '|', ',', '}', '=' or '"'. So in `ARGS:/a,TX:/ENV:X`
// the regex /a,TX:/ was the key and ENV:X another variable (the environment variable then began
// the rule's regex).
bool regex_key_ends_at(std::string_view vars, size_t key_at, size_t end) {
  if (key_at >= vars.size() || vars[key_at] != '/') return true;
  const size_t limit = std::min(vars.find_first_of(" \t=|\"", key_at), vars.size());
  const size_t last_slash = vars.substr(0, limit).rfind('/');
  if (last_slash == key_at) return true;  // no regex reading
  const size_t plain_end = std::min(vars.find_first_of("\"|,\n \t}=", key_at), vars.size());
  return last_slash + 1 <= plain_end || last_slash + 1 == end;
}

// What a variable list reads of what rules' own output reaches, but in exclusions (`!`) and
// counts (`&`), and the entries it may add to the request's list of matches for each argument.
struct Reach {
  size_t list_before = 0;    // in: entries the list of matches may hold before the list
  size_t tx_before = 0;      // in: variables TX may hold before it
  bool carrier = false;      // a variable of kCarrierVariables
  size_t list_readings = 0;  // variables of kMatchListVariables
  size_t tx_readings = 0;    // TX whole or by a regex key: as many values as TX holds
  size_t plain = 0;          // the other variables
  size_t matches = 0;        // each variable 1, but those two: as many as the list or TX holds
  size_t runs = 0;           // as matches, but a variable of kSingleValueVariables none
  size_t single_values = 0;  // variables of kSingleValueVariables (each runs once a request)
};

// `count` gets each variable; `kept`, if given, each but the exclusions (`!`), which the engine
// keeps apart from a rule's variables.
Problem check_variables(const Arg& arg, int line, RegexBytes* spent, size_t* count,
                        size_t* kept = nullptr, Reach* reach = nullptr) {
  if (arg.escaped_quote) return "must not use escaped quotes in variables" + at(line);
  // A blank ends the variables for the engine even inside quotes; what follows may be a directive.
  if (arg.text.find_first_of(" \t") != std::string::npos)
    return "must not put blanks in variables" + at(line);
  // So does a backslash: the engine read the operator right after `ARGS\`, and the scan's
  // operator and actions became that operator's parameter.
  if (arg.text.find('\\') != std::string::npos)
    return "must not put backslashes in variables" + at(line);
  // The engine's lexer reads a single-quoted key on over '|' ("ARGS:'/a|TX:/'ENV:X").
  if (arg.text.find('\'') != std::string::npos)
    return "must not put single quotes in variables" + at(line);
  std::string vars = ascii_lower(arg.text);
  size_t start = 0;
  while (start <= vars.size()) {
    size_t end = std::min(vars.find_first_of("|,", start), vars.size());
    std::string_view piece(vars.data() + start, end - start);
    bool excluded = false;
    bool counted = false;  // &NAME: the number of values, not their text
    while (!piece.empty() &&
           std::string_view("!&\" \t").find(piece.front()) != std::string_view::npos) {
      excluded = excluded || piece.front() == '!';
      counted = counted || piece.front() == '&';
      piece.remove_prefix(1);
    }
    const size_t colon = piece.find(':');
    if (reach != nullptr && !excluded && !counted) {
      const std::string_view name = piece.substr(0, colon);
      const std::string_view key =
          colon == std::string_view::npos ? std::string_view() : piece.substr(colon + 1);
      if (listed(kCarrierVariables, name)) reach->carrier = true;
      // A rule's msg and logdata may join several values (`logdata:'%{MATCHED_VAR}%{TX.0}'`): a
      // rule reading them and logging them twice doubled a value at every rule (helper 100: 27
      // rules took 12.2 s and 2.2 GB on a request without arguments).
      if (name == "rule" &&
          (key.empty() || key.starts_with('/') || key == "msg" || key == "logdata")) {
        return "may read RULE only by a key other than msg and logdata: a rule's msg and logdata "
               "may join several values, which another rule would read back and join again" +
               at(line);
      }
      const size_t matches_before = reach->matches;
      if (listed(kMatchListVariables, name)) {
        ++reach->list_readings;
        reach->matches += reach->list_before + reach->matches;
      } else if (name == "tx" && (key.empty() || key.starts_with('/'))) {
        ++reach->tx_readings;
        reach->matches += reach->tx_before;
      } else {
        ++reach->plain;
        ++reach->matches;
      }
      // A collection of unique keys read by one plain key (TX:anomaly_score) holds one value.
      const bool one_key =
          !key.empty() && !key.starts_with('/') && listed(kUniqueKeyCollections, name);
      if (listed(kSingleValueVariables, name) || one_key) {
        ++reach->single_values;
      } else {
        reach->runs += reach->matches - matches_before;
      }
      // Past the bound the count stays there: doubled 64 times, a size_t wraps to 0.
      reach->matches = std::min(reach->matches, kMaxMatches + 1);
      reach->runs = std::min(reach->runs, kMaxMatches + 1);
    }
    // The name as written, for the message (`vars` is lower-cased).
    const std::string_view written = std::string_view(arg.text).substr(
        static_cast<size_t>(piece.data() - vars.data()), std::min(colon, piece.size()));
    if (auto p = variable_name(written, line)) return p;
    if (!excluded && !counted) {
      if (auto p = part_headers(piece.substr(0, colon), line)) return p;
    }
    if (colon != std::string_view::npos) {
      if (auto p = variable_key(piece.substr(colon + 1), line)) return p;
      if (!excluded) {
        if (auto p = xml_key(piece.substr(0, colon), piece.substr(colon + 1), line)) return p;
      }
      const size_t key_at = static_cast<size_t>(piece.data() - vars.data()) + colon + 1;
      if (!regex_key_ends_at(vars, key_at, end)) {
        return "a regex key /.../ must end its variable: the WAF engine reads it on over ',' to "
               "the last '/' before a blank, '|', '=' or '\"', and what follows as another "
               "variable" +
               at(line);
      }
      // A regex key the engine cannot compile is loaded all the same, and the first request
      // that reads the variable crashes the engine (it matches with no compiled pattern).
      const std::string_view key = std::string_view(arg.text).substr(key_at, end - key_at);
      if (key.size() >= 2 && key.front() == '/' && key.back() == '/') {
        if (auto p = regex_problem(key.substr(1, key.size() - 2), PCRE2_CASELESS, line, spent))
          return p;
      }
    }
    ++*count;
    if (kept != nullptr && !excluded) ++*kept;
    start = end + 1;
  }
  return std::nullopt;
}

// "9,10,32-126": the engine writes out of bounds for bytes above 255, so check them here.
bool byte_ranges(std::string_view s) {
  s = trim_blanks(s);
  auto byte = [](std::string_view b, int* v) {
    if (b.empty() || b.size() > 3 || !std::all_of(b.begin(), b.end(), ascii_digit)) return false;
    *v = std::stoi(std::string(b));
    return *v <= 255;
  };
  size_t start = 0;
  while (true) {
    size_t comma = std::min(s.find(',', start), s.size());
    std::string_view item = s.substr(start, comma - start);
    size_t dash = item.find('-');
    int lo = 0;
    int hi = 0;
    if (dash == std::string_view::npos
            ? !byte(item, &lo)
            : !byte(item.substr(0, dash), &lo) || !byte(item.substr(dash + 1), &hi) || lo > hi) {
      return false;
    }
    if (comma == s.size()) return true;
    start = comma + 1;
  }
}

// The engine compiles an @rx parameter (and a rule's operator without a name, which is one)
// when it loads the rule, as utils/regex.cc does: PCRE2 with PCRE2_DOTALL | PCRE2_MULTILINE. It
// loads a rule whose regex does not compile, and the rule then never matches: the tenant's rule
// would look in place and protect nothing.
// An @rx with a macro the engine compiles anew from the macro's value at every match
// (libmodsecurity 3.0.9's Rx::evaluate), for every request and variable: with `%{ARGS.a}` a
// client's value is the regex, and one request of 50 KB of recursions took 42 s of CPU in
// libmodsecurity 3.0.9.
Problem check_regex(std::string_view pattern, int line, RegexBytes* spent) {
  if (pattern.find("%{") != std::string_view::npos) return rx_with_macro(line);
  return regex_problem(pattern, 0, line, spent);
}

// The longest phrase @pm's parameter makes, as the engine makes them (pm_phrases).
size_t longest_pm_phrase(std::string_view param) {
  size_t longest = 0;
  for (const std::string& phrase : pm_phrases(param)) longest = std::max(longest, phrase.size());
  return longest;
}

// libmodsecurity 3.0.9 (msc_tree.cc) keeps an @ipMatch entry as its address masked to its
// netmask, one tree node per masked address. An entry whose masked address is in the tree with
// the same netmask allocates that node's list of netmasks anew, one byte longer, and never frees
// the old one: 13,000 repeats of ::/1 (65 KB) took 87 MB, lost again at every load of the text
// (helper 46). With another netmask, the engine ignores the entry: 10.0.0.0/16,10.0.0.0/8 matches
// 10.0.0.0/16 only. So each masked address may be listed once, and an entry is ADDRESS or
// ADDRESS/BITS as inet_pton reads it (what the engine reads between commas and line ends: an
// address with a ':' as IPv6). Anything else is refused here rather than left to the engine,
// which reads some of it otherwise (helper 47: it drops what follows a '#' on a line).
Problem ip_match_problem(std::string_view param, int line) {
  std::set<std::string> networks;
  size_t start = 0;
  while (start < param.size()) {
    const size_t end = std::min(param.find_first_of(",\n", start), param.size());
    const std::string_view entry = param.substr(start, end - start);
    start = end + 1;
    if (entry.empty()) continue;  // strtok_r skips empty entries
    const bool v6 = entry.find(':') != std::string_view::npos;
    const size_t slash = entry.find('/');
    const std::string_view bits = slash == std::string_view::npos ? "" : entry.substr(slash + 1);
    const std::string address(entry.substr(0, slash));
    std::array<unsigned char, 16> bytes{};
    int mask = v6 ? 128 : 32;
    // Plain digits only, so that the engine's atoi reads the netmask as this does.
    bool readable = slash == std::string_view::npos ||
                    (!bits.empty() && bits.size() <= 3 &&
                     bits.find_first_not_of("0123456789") == std::string_view::npos);
    if (readable && slash != std::string_view::npos) mask = std::stoi(std::string(bits));
    readable = readable && mask >= 1 && mask <= (v6 ? 128 : 32) &&
               ::inet_pton(v6 ? AF_INET6 : AF_INET, address.c_str(), bytes.data()) == 1;
    if (!readable) {
      return "needs @ipMatch entries as ADDRESS or ADDRESS/BITS (1 to 32, or 1 to 128 for IPv6), "
             "not " +
             shown(entry) + at(line);
    }
    for (int bit = mask; bit < 128; ++bit)
      bytes[bit / 8] &= static_cast<unsigned char>(~(0x80 >> (bit % 8)));
    std::string network(v6 ? "6" : "4");
    network.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    if (!networks.insert(network).second) {
      return "needs @ipMatch to list each address once, masked to its bits, not " + shown(entry) +
             " again: the WAF engine ignores a second netmask for one address, and keeps memory "
             "growing with the square of the repeats of one network, never freed" +
             at(line);
    }
  }
  return std::nullopt;
}

Problem check_operator(const Arg& arg, int line, RegexBytes* spent) {
  if (arg.ambiguous_quote)
    return "must put an ordinary character before an escaped quote (\\\") in an operator" +
           at(line);
  // Unquoted, the engine reads the operator's parameter up to the next blank, line breaks and
  // quotes included.
  if (!arg.quoted) return "must put the operator in double quotes" + at(line);
  std::string_view op = arg.text;
  // Before the operator's name (and around its `!`), the engine's lexer skips two or more blanks
  // and line continuations, so `"  @rx ..."` is an operator to it and not a regex, and what
  // follows the name is read as above. One blank it keeps, as the start of a regex; that is
  // refused as well, so that the rule is one and not two.
  auto opens_with_blank = [](std::string_view t) {
    return t.starts_with(' ') || t.starts_with('\t') || t.starts_with("\\\n") ||
           t.starts_with("\\\r\n");
  };
  if (opens_with_blank(op) || (op.starts_with('!') && opens_with_blank(op.substr(1))))
    return "must not start the operator with a blank or a line continuation" + at(line);
  if (op.starts_with('!')) op.remove_prefix(1);
  if (!op.starts_with('@')) return check_regex(op, line, spent);
  size_t end = 1;
  while (end < op.size() && isalnum(static_cast<unsigned char>(op[end]))) ++end;
  std::string_view name = op.substr(1, end - 1);
  std::string_view rest = op.substr(end);
  std::string lowered = ascii_lower(name);
  // The engine's lexer takes the longest operator name that fits ("@containsq" is @contains
  // and a 'q') and then expects exactly one space: after any other character it drops the text
  // up to the next space, the closing quote and line ends included.
  if (!listed(kOperators, lowered)) return "needs a known operator, not @" + shown(name) + at(line);
  if (listed(kNoParameterOperators, lowered)) {
    if (rest.find_first_not_of(' ') != std::string_view::npos)
      return "must not give @" + shown(name) + " a parameter" + at(line);
    return std::nullopt;
  }
  // Without its parameter, the engine takes what follows the closing quote for it.
  if (trim_blanks(rest).empty()) return "needs a parameter after @" + shown(name) + at(line);
  if (rest[0] != ' ') return "needs one space after @" + shown(name) + at(line);
  for (auto denied : kDeniedOperators) {
    if (lowered.starts_with(denied)) return refused("operator @" + shown(name), line);
  }
  if (lowered == "validatebyterange" && !byte_ranges(op.substr(1 + name.size()))) {
    return "needs @validateByteRange with bytes or byte ranges in 0..255, e.g. 9,10,32-126" +
           at(line);
  }
  if (lowered == "rx") return check_regex(rest.substr(1), line, spent);
  // The engine builds these two from their parameter once, at load, each macro read as nothing
  // (helper 47): the macro matches nothing the tenant meant, and what the engine reads is not the
  // text the checks below count (an escape `\%{TX.x}:` became `\:`).
  if ((lowered == "pm" || lowered == "ipmatch") && rest.find("%{") != std::string_view::npos) {
    return "must not use a macro in @" + shown(name) +
           ": the WAF engine reads its parameter once, when it loads the rule, with every macro "
           "empty" +
           at(line);
  }
  if (auto p = substring_search_problem(name, rest.substr(1),
                                        rest.find("%{") != std::string_view::npos, line))
    return p;
  if (lowered == "ipmatch") return ip_match_problem(rest.substr(1), line);
  // Each phrase takes the engine memory growing with the square of its length (its trie keeps a
  // copy of the phrase's whole length at every letter): one of 14,000 bytes took 190 MB in the
  // gateway that loads it, one of 15,000 more than the check's 256 MiB.
  if (lowered == "pm" && longest_pm_phrase(rest.substr(1)) > kMaxPmPhraseBytes) {
    return "needs @pm with phrases of at most " + std::to_string(kMaxPmPhraseBytes) +
           " bytes: the WAF engine's memory for a phrase grows with the square of its length" +
           at(line);
  }
  return std::nullopt;
}

// Each variable of a rule, or target an update adds, takes the engine about 1.8 KB (`&TX`; 16,365
// of them in 64 KB of SecRuleUpdateTargetById took 29.7 MB, helper 46).
Problem too_many_variables(const Scan& scan, int line) {
  if (scan.variables + scan.updates.targets <= kMaxVariables) return std::nullopt;
  return "may name at most " + std::to_string(kMaxVariables) +
         " variables in all, in rules and in SecRuleUpdateTargetById (the WAF engine keeps about "
         "2 KB for each)" +
         at(line);
}

// The entries a text's rules may add, for each argument of a request, to its list of matches and
// to TX (kMaxMatches). The engine adds each match of a rule to the list (MATCHED_VARS and its
// names) and empties it only after a rule that does not match, so a rule that reads the list and
// matches doubles it: one rule of ARGS and 20 MATCHED_VARS took 70 s of CPU and 1.9 GB on an
// argument of 10 bytes, 20 rules of MATCHED_VARS after one of ARGS 18 s (helper 98). And each
// entry of the list, and of TX, costs more than the one before (the engine hashes a name by the
// sum of its characters, so the names of a request's arguments share few hashes): one rule of
// ARGS named 1,990 times took 118 s on 100 arguments of 10 bytes, 1,000 times 20.4 s, 400 times
// 2.9 s, 100 times 0.18 s; a setvar named by a counter (`tx.v%{tx.n}`) on ARGS named 1,000 times
// 51 s (helper 100; libmodsecurity 3.0.9 for all). The Core Rule Set 3.3.4's largest file, 942,
// names 229 variables, and it reads the list 4 times in all its files. What updates add counts
// as if it all went to the rule of the most matches, or of the most setvars named by macros.
// A count over the links, `total`, with what updates add to it, as if it all went to one rule:
// each of their `update_items` (setvars) runs as often as the link of the most `most_link_runs`,
// and each target they add runs the `most_link_items` of a link and theirs.
size_t with_updates(size_t total, size_t update_items, size_t most_link_items,
                    size_t most_link_runs, size_t targets) {
  return total + update_items * most_link_runs + (most_link_items + update_items) * targets;
}

size_t all_matches(const Scan& scan) {
  const auto& u = scan.update_matches;
  const size_t named = scan.most_link_macro_setvars + u.macro_setvars;
  size_t list = scan.matches + u.targets;
  size_t tx = with_updates(scan.tx_variables + u.setvars, u.macro_setvars,
                           scan.most_link_macro_setvars, scan.most_link_matches, u.targets);
  list += u.tx_readings * tx;
  for (size_t i = 0; i < u.list_readings && list + tx <= kMaxMatches; ++i) {
    tx += named * list;
    list *= 2;
  }
  return list + tx;
}

// A setvar that runs for each argument and copies TX (but a capture) may copy what its earlier
// runs appended (`tx.a=%{tx.a}<text>`, or two that append to each other): the value grows by its
// text at every run, and each run copies it whole (helper 105: 1,900 bytes at two runs a cookie
// took 4.0 s on 1,000 cookies). The Core Rule Set's 903.9004 appends 25 bytes for each cookie of
// a name.
Problem growing_copy(int line) {
  return "may append at most " + std::to_string(kMaxGrowthPerArgument) +
         " bytes for each argument of a request through setvars that copy TX (but a capture, TX.0 "
         "to TX.9), in all (each such setvar's text outside macros, times its rule's runs for "
         "each argument): each run copies all that the runs before it appended" +
         at(line);
}

// The runs, for each argument of a request, of the setvars whose value holds a macro, but sums
// (kMaxCopyingSetvarRuns): each link's such setvars times its runs (Reach::runs). What updates
// add counts as if it all went to one rule (with_updates); a reading of the list or of TX an
// update adds, as the most there is.
size_t all_copying_runs(const Scan& scan) {
  const auto& u = scan.update_matches;
  size_t runs = with_updates(scan.copying_runs, u.copying_setvars, scan.most_link_copying_setvars,
                             scan.most_link_matches, u.targets);
  if (scan.most_link_copying_setvars + u.copying_setvars > 0 &&
      u.list_readings + u.tx_readings > 0) {
    runs += kMaxCopyingSetvarRuns + 1;
  }
  return runs;
}

Problem too_many_copies(const Scan& scan, int line) {
  const auto& u = scan.update_matches;
  // Updates count as if they went to the rule of the most runs, or of the most such setvars.
  const size_t growth = with_updates(scan.growth_per_argument, u.growth_bytes,
                                     scan.most_link_growth_bytes, scan.most_link_runs, u.targets);
  if (growth > kMaxGrowthPerArgument) return growing_copy(line);
  const size_t request_runs =
      with_updates(scan.request_copying_runs, u.copying_setvars, scan.most_link_copying_setvars,
                   scan.most_link_single_values, u.targets);
  if (request_runs > kMaxRequestCopyingRuns) {
    return "may run setvars whose value holds a macro (but sums, =+ and =-) at most " +
           std::to_string(kMaxRequestCopyingRuns) +
           " times a request for variables of one value (such as REQUEST_FILENAME, each time a "
           "rule names one) and in SecActions, in all: a setvar that appends to a variable "
           "copies all that was appended before" +
           at(line);
  }
  if (all_copying_runs(scan) <= kMaxCopyingSetvarRuns) return std::nullopt;
  return "may run setvars whose value holds a macro (but sums, =+ and =-) at most " +
         std::to_string(kMaxCopyingSetvarRuns) +
         " times for each argument of a request, in all (a setvar runs once for each variable "
         "of its rule, but one of a single value such as REQUEST_FILENAME, and for a reading of "
         "MATCHED_VARS as many times as the list holds): each run "
         "copies the value, and one that appends to a variable copies all that was appended "
         "before" +
         at(line);
}

Problem too_many_matches(const Scan& scan, int line) {
  if (all_matches(scan) <= kMaxMatches) return std::nullopt;
  return "may add at most " + std::to_string(kMaxMatches) +
         " entries for each argument of a request to its list of matches and to TX, in all (each "
         "variable of a rule one, a reading of MATCHED_VARS or MATCHED_VARS_NAMES as many as the "
         "list holds then, of TX whole as many as TX holds, a setvar one, and one named by a "
         "macro one for each match of its rule): the WAF engine's cost of each entry grows with "
         "the entries before it" +
         at(line);
}

// A setvar named by a macro (`tx.%{MATCHED_VAR_NAME}_a=1`) sets a variable for each match, so in
// a link that reads TX whole (or by a regex key) and matches, it doubles TX: 13 such rules after
// one setvar took 12.9 s on a request without arguments (libmodsecurity 3.0.9), and the cost
// grows with the power of the rules. The Core Rule Set 3.3.4 names setvars by macros in three
// rules, none of which reads TX so (920450 reads TX:/^HEADER_NAME_/ in its chained rule, whose
// setvars are not named by macros).
std::string doubled_tx(int line) {
  return "must not name a setvar by a macro (%{...}) in a rule that reads TX whole or by a regex "
         "key: each match would add a variable to TX, so TX could double at every such rule" +
         at(line);
}

// A rule that lengthens values (t:hexEncode, ...) must not read what another rule's output
// reaches: each such rule would lengthen the last one's output again, so the cost grows with the
// power of the rules (helper 95: 13 rules of two t:hexEncode, each reading the last one's capture
// TX:0, took 12.7 s and 2.3 GB on every request, 14 ended the engine with std::bad_alloc; 1.2 KB
// of text).
std::string lengthened_output(int line) {
  return "must not apply t:hexEncode, t:urlEncode, t:utf8toUnicode or t:base64Encode to TX, "
         "MATCHED_VAR, MATCHED_VARS, their names or RULE: each such rule could lengthen another "
         "rule's output again, and a few rules make every request's values exponentially long" +
         at(line);
}

// The engine transforms each value a rule's variable holds with each of the rule's
// transformations in turn (a variable repeated runs them again), so a value costs a link's
// variables times its transformations (times how many times longer a lengthening one makes the
// value), and a text's links add up: 2,000 variables of one rule and 4,500 transformations took
// 22 s of a gateway's CPU on one argument of 100 bytes (helper 90); 1,000 such steps (100 rules
// of 10 t:lowercase on ARGS) took 1.9 s on 1,000 arguments of 100 bytes, where 2,000 rules of
// no transformation took 1.0 s. The transformations an update adds count as if every link had
// the most variables and the most lengthening of one link, the variables it adds as if every
// link had the most (weighted) transformations, and both as if added to one rule.
Problem too_many_transformations(const Scan& scan, int line) {
  // A rule of V variables and T transformations that updates give A more variables and B more
  // transformations costs (V + A)(T + B): V T is in transformation_steps, the rest is at most
  // what follows (helper 92: without the A B term, 1,998 targets and 1,998 t: added to one rule
  // passed, 29 to 41 s of CPU on one argument).
  const size_t added_t = scan.updates.transformations.size() * scan.most_link_growth;
  const size_t steps = scan.transformation_steps + added_t * scan.most_link_variables +
                       scan.updates.targets * scan.most_link_transformations +
                       scan.updates.targets * added_t;
  if (steps <= kMaxTransformationSteps) return std::nullopt;
  return "may apply at most " + std::to_string(kMaxTransformationSteps) +
         " transformations to a value in all (each rule's variables times its t: actions, "
         "summed over the rules): the WAF engine runs them for every variable of a rule that "
         "holds the value" +
         at(line);
}

Problem check_directive(const Directive& d, Scan* scan) {
  std::string name = ascii_lower(d.name);
  int line = d.line;
  if (!listed(kDirectives, name)) return refused("directive " + shown(d.name), line);
  bool link = scan->open_chain_line != 0;
  if (link && name != "secrule")
    return "needs a SecRule after the chained rule of line " +
           std::to_string(scan->open_chain_line) + at(line);
  const auto& args = d.args;
  if (name != "secrule" && name != "secaction" && !args.empty() && args[0].blanks != " ") {
    return "needs exactly one space after " + d.name +
           at(line);  // the engine crashes on a tab here
  }
  long id = 0;
  bool chain = false;
  if (name == "secrule" || name == "secaction") {
    bool rule = name == "secrule";
    if (rule ? args.size() < 2 || args.size() > 3 : args.size() != 1) {
      return rule ? "needs SecRule VARIABLES OPERATOR ACTIONS" + at(line)
                  : "needs SecAction ACTIONS" + at(line);
    }
    LinkActions counts;
    counts.line = line - scan->line_shift;  // as the engine numbers it
    Reach reach{.list_before = scan->matches, .tx_before = scan->tx_variables};
    if (rule) {
      size_t all = 0;
      if (auto p =
              check_variables(args[0], line, &scan->regex_bytes, &all, &counts.variables, &reach))
        return p;
      scan->variables += all;
      if (auto p = too_many_variables(*scan, line)) return p;
      if (auto p = check_operator(args[1], line, &scan->regex_bytes)) return p;
    }
    scan->link_macro_setvars = 0;
    scan->link_copying_setvars = 0;
    scan->link_growth_bytes = 0;
    if (args.size() == 1 || args.size() == 3) {
      // Unquoted, the engine skips ahead to the next double quote, the next lines included.
      if (!args.back().quoted) return "must put the actions in double quotes" + at(line);
      if (auto p = check_actions(args.back(), line, link ? Role::kLink : Role::kHead, scan, &id,
                                 &chain, &counts))
        return p;
    }
    if (chain && !rule) return "must not chain a SecAction" + at(line);
    if (reach.tx_readings > 0) {
      if (scan->link_macro_setvars > 0) return doubled_tx(line);
      scan->reads_tx_collection = true;
    }
    // A setvar sets one variable; one named by a macro one for each match (a SecAction runs once).
    const size_t runs = std::max<size_t>(reach.matches, 1);
    scan->matches += reach.matches;
    scan->tx_variables +=
        counts.setvars - scan->link_macro_setvars + scan->link_macro_setvars * runs;
    scan->most_link_matches = std::max(scan->most_link_matches, runs);
    scan->most_link_macro_setvars =
        std::max(scan->most_link_macro_setvars, scan->link_macro_setvars);
    if (auto p = too_many_matches(*scan, line)) return p;
    scan->copying_runs += scan->link_copying_setvars * reach.runs;
    scan->most_link_copying_setvars =
        std::max(scan->most_link_copying_setvars, scan->link_copying_setvars);
    // A rule of no variable but counts (&TX:x), as a SecAction, runs once a request.
    scan->request_copying_runs +=
        scan->link_copying_setvars *
        (reach.runs == 0 && reach.single_values == 0 ? 1 : reach.single_values);
    scan->most_link_runs = std::max(scan->most_link_runs, reach.runs);
    scan->most_link_single_values =
        std::max(scan->most_link_single_values, std::max<size_t>(reach.single_values, 1));
    scan->growth_per_argument += scan->link_growth_bytes * reach.runs;
    scan->most_link_growth_bytes = std::max(scan->most_link_growth_bytes, scan->link_growth_bytes);
    if (auto p = too_many_copies(*scan, line)) return p;
    const size_t growth = growth_of(counts.transformations);
    if (growth > 1) {
      if (reach.carrier) return lengthened_output(line);
      if (scan->growing_line == 0) scan->growing_line = line;
    }
    // Transformations after one that lengthens a value run on the longer value (helper 95:
    // t:urlEncode,t:hexEncode before 30 others took 4.6 times as long as 32 t:lowercase).
    scan->transformation_steps += counts.variables * counts.transformations.size() * growth;
    scan->most_link_variables = std::max(scan->most_link_variables, counts.variables);
    scan->most_link_transformations =
        std::max(scan->most_link_transformations, counts.transformations.size() * growth);
    scan->most_link_growth = std::max(scan->most_link_growth, growth);
    if (auto p = too_many_transformations(*scan, line)) return p;
    scan->open_chain_line = chain ? line : 0;
    if (link) {
      scan->rules.back().links.push_back(counts);
      return std::nullopt;
    }
    if (id == 0) return "needs an id in 1..99999 on every rule" + at(line);
    for (const auto& r : scan->rules) {
      if (r.id == id) return "uses rule id " + std::to_string(id) + " twice" + at(line);
    }
    scan->rules.push_back({id, {counts}});
  } else if (name == "secmarker") {
    // Quoted or not (the Core Rule Set quotes its markers): the engine keeps the name without
    // its quotes, and the audit compares that with the scan's.
    if (args.size() != 1 || args[0].text.empty() || args[0].text.size() > 128 ||
        !std::all_of(args[0].text.begin(), args[0].text.end(), [](char c) {
          return isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
        })) {
      return "needs SecMarker NAME (letters, digits, '_', '.', '-')" + at(line);
    }
    scan->markers[args[0].text] = line;
  } else if (name == "secruleremovebyid") {
    if (args.empty()) return "needs SecRuleRemoveById ID..." + at(line);
    for (const Arg& a : args) {
      // The engine splits its value at spaces alone: `1<tab>99998-99999` is one range to it,
      // 1..99999 (the text's own rules among them), where the scan read three ids.
      if (&a != &args.front() && a.blanks.find('\t') != std::string::npos) {
        return "SecRuleRemoveById takes ids separated by spaces (a tab joins two for the WAF "
               "engine)" +
               at(line);
      }
      if (a.quoted || !local_id_or_range(a.text, &id))
        return "SecRuleRemoveById may only name rule ids in 1..99999" + at(line);
    }
  } else {
    if (args.size() != 2)
      return "needs " + d.name + " ID " +
             (name == "secruleupdatetargetbyid" ? "TARGETS" : "ACTIONS") + at(line);
    if (args[0].quoted || !local_id(args[0].text, &id))
      return shown(d.name) + " may only name one rule id in 1..99999 (no range)" + at(line);
    if (name == "secruleupdatetargetbyid") {
      // Unquoted, the targets end the line, and the engine's lexer reads a regex key on over the
      // line break to a '/' on a later line: `ARGS:/a,TX` followed by the comment line
      // `#/|ENV:X #x` added the target ENV:X, and what followed the blank ran as directives.
      if (!args[1].quoted && args[1].text.find(":/") != std::string::npos)
        return "must put SecRuleUpdateTargetById's targets in double quotes when a key is a "
               "regex /.../ (unquoted, the WAF engine reads it on over the line break)" +
               at(line);
      Reach reach;
      if (auto p = check_variables(args[1], line, &scan->regex_bytes, &scan->updates.targets,
                                   nullptr, &reach))
        return p;
      if (reach.carrier && scan->carrier_update_line == 0) scan->carrier_update_line = line;
      if (reach.tx_readings > 0 && scan->tx_collection_update_line == 0) {
        scan->tx_collection_update_line = line;
      }
      auto& u = scan->update_matches;
      u.list_readings += reach.list_readings;
      u.tx_readings += reach.tx_readings;
      u.targets += reach.plain;
      if (auto p = too_many_variables(*scan, line)) return p;
      if (auto p = too_many_matches(*scan, line)) return p;
      if (auto p = too_many_copies(*scan, line)) return p;
      return too_many_transformations(*scan, line);
    }
    // Unquoted, the engine reads a value (msg:x) on over line breaks to the next comma or
    // quote, so a line the scan takes for a comment added actions (setvar:ip.x=1).
    if (!args[1].quoted) return "must put the actions in double quotes" + at(line);
    long unused = 0;
    LinkActions uncounted;  // an update's actions join exceptions, not a rule's lists
    if (auto p = check_actions(args[1], line, Role::kUpdate, scan, &unused, &chain, &uncounted))
      return p;  // (its t: count against kMaxLinkTransformations below, all updates together)
    if (auto p = too_many_copies(*scan, line)) return p;
    if (scan->updates.transformations.size() > kMaxLinkTransformations) {
      return "may add at most " + std::to_string(kMaxLinkTransformations) +
             " transformations with SecRuleUpdateActionById in all (they may all go to one rule)" +
             at(line);
    }
    return too_many_transformations(*scan, line);
  }
  return std::nullopt;
}

// Keywords of load-time file and network access, found anywhere (the raw net of waf_scan.h).
Problem raw_net(std::string_view text) {
  std::string s = ascii_lower(text);
  int line = 1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\n') {
      ++line;
      continue;
    }
    std::string_view rest(s.data() + i, s.size() - i);
    for (const auto& [keyword, what] : kRawNet) {
      if (rest.starts_with(keyword)) return refused(what, line);
    }
    if (rest.starts_with("include")) {
      size_t k = i + 7;
      size_t blanks = k;
      while (k < s.size() && (s[k] == ' ' || s[k] == '\t')) ++k;
      bool path = k > blanks && k < s.size() &&
                  (isalnum(static_cast<unsigned char>(s[k])) ||
                   std::string_view("\"_/.-*:").find(s[k]) != std::string_view::npos);
      if (path) return refused("directive Include", line);
    }
  }
  return std::nullopt;
}
}  // namespace

std::string refused(std::string_view what, int line) {
  return std::string(what) + " is not allowed in tenant rules" + at(line);
}

std::string rx_with_macro(int line) {
  return "needs @rx with a regular expression without macros (%{...}): the WAF engine would "
         "compile one from the macro's value for every request, so a client could send the "
         "regex; write a literal '%{' as \\x25{" +
         at(line);
}

Problem substring_search_problem(std::string_view engine_name, std::string_view param,
                                 bool has_macro, int line) {
  const std::string name = ascii_lower(engine_name);
  if (!listed(kSubstringOperators, name)) return std::nullopt;
  const std::string search =
      name == "within" ? "the value in the parameter" : "the parameter in the value";
  if (has_macro) {
    return "must not use a macro in @" + shown(engine_name) + ": the WAF engine searches for " +
           search +
           ", in time growing with the product of their lengths, and with a macro a "
           "client sends both" +
           at(line);
  }
  if (param.size() > kMaxSubstringParameterBytes) {
    return "needs @" + shown(engine_name) + " with a parameter of at most " +
           std::to_string(kMaxSubstringParameterBytes) + " bytes: the WAF engine searches for " +
           search + ", in time growing with the product of their lengths" + at(line);
  }
  return std::nullopt;
}

bool denied_engine_operator(std::string_view engine_name) {
  return contains(kDeniedEngineOperators, ascii_lower(engine_name));
}

bool allowed_runtime_action(std::string_view engine_name) {
  return listed(kRuntimeActions, ascii_lower(engine_name));
}

bool allowed_update_action(std::string_view engine_name) {
  std::string name = ascii_lower(engine_name);
  if (name == "redirert") name = "redirect";  // libmodsecurity 3.0.9's name of it
  return listed(kActions, name) && !listed(kConfigurationActions, name) && name != "t";
}

// The line breaks of `d` that libmodsecurity 3.0.9's line count misses (`blank`: which lines of
// the text are empty): the first of a line continuation between SecAction and its actions, or
// between a SecRule's variables and its operator (the CRS's layouts; a second one there makes the
// lexer drop text, which is refused); and the one that ends a SecRuleUpdateTargetById's targets,
// with the empty lines after it.
int uncounted_breaks(const Directive& d, const std::vector<bool>& blank) {
  if (ascii_iequals(d.name, "SecAction") && !d.args.empty())
    return std::min(d.args[0].breaks_in_blanks, 1);
  if (ascii_iequals(d.name, "SecRule") && d.args.size() >= 2)
    return std::min(d.args[1].breaks_in_blanks, 1);
  if (!ascii_iequals(d.name, "SecRuleUpdateTargetById")) return 0;
  int breaks = 1;
  for (size_t next = static_cast<size_t>(d.end_line); next < blank.size() && blank[next]; ++next)
    ++breaks;
  return breaks;
}

Problem scan_directives(std::string_view text, ScanResult* result) {
  std::vector<Directive> directives;
  if (auto p = split_directives(text, &directives)) return p;
  // Which lines of the text followed by a line break are empty but for a carriage return (its
  // last line is empty when the text ends with a line break).
  std::vector<bool> blank;
  for (size_t pos = 0;;) {
    const size_t end = std::min(text.find('\n', pos), text.size());
    const std::string_view line = text.substr(pos, end - pos);
    blank.push_back(line.find_first_not_of('\r') == std::string_view::npos);
    if (end == text.size()) break;
    pos = end + 1;
  }
  Scan scan;
  for (const Directive& d : directives) {
    if (auto p = check_directive(d, &scan)) return p;
    scan.line_shift += uncounted_breaks(d, blank);
  }
  if (scan.open_chain_line != 0)
    return "needs a SecRule after the chained rule" + at(scan.open_chain_line);
  // The engine skips to the next marker of that name; with none after the rule, it skips every
  // rule after it, the platform's included.
  for (const auto& [marker, line] : scan.skip_targets) {
    auto m = scan.markers.find(marker);
    if (m == scan.markers.end() || m->second < line)
      return "needs skipAfter to name a SecMarker that follows it in these directives" + at(line);
  }
  // A variable added to a rule that lengthens values (the scan does not know which rule an update
  // changes).
  if (scan.carrier_update_line != 0 && scan.growing_line != 0) {
    return "must not add TX, MATCHED_VAR, MATCHED_VARS, their names or RULE with "
           "SecRuleUpdateTargetById to a text whose rules use t:hexEncode, t:urlEncode, "
           "t:utf8toUnicode or t:base64Encode: a rule could lengthen another rule's output "
           "again" +
           at(scan.carrier_update_line);
  }
  // TX read whole, and a setvar named by a macro, one of them added by an update to a rule that
  // may have the other.
  const int tx_update = scan.tx_collection_update_line;
  const int setvar_update = scan.macro_setvar_update_line;
  if ((tx_update != 0 && (scan.most_link_macro_setvars > 0 || setvar_update != 0)) ||
      (setvar_update != 0 && scan.reads_tx_collection)) {
    return "must not add TX (whole or by a regex key) with SecRuleUpdateTargetById, or a setvar "
           "named by a macro with SecRuleUpdateActionById, to a text with the other: a rule could "
           "add a variable to TX for each one it reads, and TX double at every such rule" +
           at(tx_update == 0       ? setvar_update
              : setvar_update == 0 ? tx_update
                                   : std::min(tx_update, setvar_update));
  }
  if (auto p = raw_net(text)) return p;
  result->uncounted_line_breaks = static_cast<size_t>(scan.line_shift);
  result->rules = std::move(scan.rules);
  for (auto& [marker, line] : scan.markers) result->markers.insert(marker);
  result->directives = directives.size();
  result->updates = scan.updates;
  return std::nullopt;
}

}  // namespace gw::fields::waf
