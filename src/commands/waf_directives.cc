// waf_custom_directives (CONTRACT.md section 3): our own tenant-escape scan (waf_scan.h), then a
// parse by libmodsecurity, then an audit of what the engine built. This file holds the last two
// steps and fields::waf_directives; the tenant policy is described at the top of waf_scan.h.
//
// Why three steps: libmodsecurity acts on some directives while it parses (Include and
// SecRemoteRules read files and URLs, @pmFromFile and @ipMatchFromFile read files or download them,
// exec and @inspectFile load Lua scripts) and copies what it read into its error messages, so
// nothing it would act on may reach it. Its flex lexer also differs from any simple tokenizer
// (several directives may share a line; where a quoted string ends depends on lexer state), so the
// scan is stricter than the engine wherever the two could disagree, a raw keyword net catches the
// load-time I/O features anywhere in the text, and the audit compares the engine's rules and
// settings with what the scan saw. Where the scan and the engine still read a text differently
// with equal counts (three such families were found by fuzzing, each a setvar of a shared
// collection hidden in another action's value), the audit's last step runs every setvar the engine
// built against write traps (setvars_stay_in_tx).
//
// libmodsecurity's rule parser keeps global state, so parses are serialised by one mutex (any
// other code in the process that parses ModSecurity rules must not run concurrently with it).
#include <modsecurity/actions/action.h>
#include <modsecurity/audit_log.h>
#include <modsecurity/collection/collection.h>
#include <modsecurity/modsecurity.h>
#include <modsecurity/rule_marker.h>
#include <modsecurity/rule_with_operator.h>
#include <modsecurity/rules_set.h>
#include <modsecurity/transaction.h>

#include <strings.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iterator>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

#include "commands/fields.h"
#include "commands/waf_scan.h"
#include "core/expose.h"
#include "core/text.h"

// libmodsecurity's flex lexer (C++ linkage, exported from libmodsecurity.so.3): where it writes
// the characters no rule of the current lexer state matches.
FILE* yyget_out();
void yyset_out(FILE* out);

namespace gw::fields {
namespace {

constexpr size_t kMaxDirectivesBytes = 65536;
constexpr std::string_view kReference = "waf_custom_directives";

// The audit reads what the engine keeps private: a rule's action lists, the removals
// SecRuleRemoveById recorded and the audit log's engine switch, each through a member pointer
// (GW_EXPOSE, core/expose.h).
GW_EXPOSE(RuntimeList, &modsecurity::RuleWithActions::m_actionsRuntimePos);
GW_EXPOSE(TransformationList, &modsecurity::RuleWithActions::m_transformations);
GW_EXPOSE(SetVarList, &modsecurity::RuleWithActions::m_actionsSetVar);
GW_EXPOSE(TagList, &modsecurity::RuleWithActions::m_actionsTag);
GW_EXPOSE(RemovedRanges, &modsecurity::RulesExceptions::m_ranges);
GW_EXPOSE(RemovedIds, &modsecurity::RulesExceptions::m_numbers);
GW_EXPOSE(AuditStatus, &modsecurity::audit_log::AuditLog::m_status);
GW_EXPOSE(VariableList, &modsecurity::RuleWithOperator::m_variables);
GW_EXPOSE(OperatorOf, &modsecurity::RuleWithOperator::m_operator);
GW_EXPOSE(MsgOf, &modsecurity::RuleWithActions::m_msg);
GW_EXPOSE(LogDataOf, &modsecurity::RuleWithActions::m_logData);
GW_EXPOSE(DisruptiveOf, &modsecurity::RuleWithActions::m_disruptiveAction);

// The class of one of libmodsecurity's objects with virtual functions, as its type_info names it
// (mangled). libmodsecurity installs no header for its variables, so they cannot be named in
// C++ here; the Itanium C++ ABI puts the object's virtual table address in its first word and
// the type_info pointer in the slot before the table.
std::string_view engine_class_name(const void* object) {
  const auto* vtable = *static_cast<const std::type_info* const* const*>(object);
  return vtable[-1]->name();
}

// libmodsecurity 3.0.9's class for ENV (variables::Env), mangled.
constexpr std::string_view kEnvClass = "N11modsecurity9variables3EnvE";

// The variables the engine built for a rule link, none for a SecAction. variables::Variables is
// a std::vector<Variable *> and adds nothing to it.
const std::vector<const void*>& engine_variables(modsecurity::RuleWithActions& link) {
  static const std::vector<const void*> none;
  auto* rule = dynamic_cast<modsecurity::RuleWithOperator*>(&link);
  if (rule == nullptr || rule->*member_of(VariableList{}) == nullptr) return none;
  return *reinterpret_cast<const std::vector<const void*>*>(rule->*member_of(VariableList{}));
}

// Whether SecRuleRemoveById recorded an id or range outside 1..99999 (the scan allows only
// those, so any such removal is one the scan did not see).
bool removes_outside_local_range(modsecurity::RulesExceptions& ex) {
  auto local = [](int id) { return id >= 1 && id <= waf::kMaxLocalId; };
  const auto& ids = ex.*member_of(RemovedIds{});
  const auto& ranges = ex.*member_of(RemovedRanges{});
  return !std::all_of(ids.begin(), ids.end(), local) ||
         !std::all_of(ranges.begin(), ranges.end(),
                      [&](const auto& r) { return local(r.first) && local(r.second); });
}

// The engine's parser message without file references, pointers and line breaks.
std::string engine_message(std::string raw) {
  size_t file = raw.find("File: ");
  size_t line = raw.find("Line: ", file == std::string::npos ? 0 : file);
  size_t at_line = raw.find(" at line: ");
  if (file != std::string::npos && line != std::string::npos)
    raw.erase(file, line - file);
  else if (file != std::string::npos)
    raw.erase(file, at_line == std::string::npos ? std::string::npos : at_line + 1 - file);
  std::string out;
  for (char c : raw) {
    char d = (c >= 0x20 && c < 0x7f) ? c : ' ';
    if (d != ' ' || (!out.empty() && out.back() != ' ')) out.push_back(d);
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  if (out.starts_with("Rules error. ")) out.erase(0, 13);
  if (out.size() > 300) out = out.substr(0, 300) + "...";
  return out.empty() ? "rejected by the WAF engine" : out;
}

bool settings_untouched(modsecurity::RulesSet& rs) {
  using P = modsecurity::RulesSetProperties;
  bool booleans = rs.m_secRequestBodyAccess == P::PropertyNotSetConfigBoolean &&
                  rs.m_secResponseBodyAccess == P::PropertyNotSetConfigBoolean &&
                  rs.m_secXMLExternalEntity == P::PropertyNotSetConfigBoolean &&
                  rs.m_tmpSaveUploadedFiles == P::PropertyNotSetConfigBoolean &&
                  rs.m_uploadKeepFiles == P::PropertyNotSetConfigBoolean;
  bool values = !rs.m_argumentsLimit.m_set && !rs.m_requestBodyJsonDepthLimit.m_set &&
                !rs.m_requestBodyLimit.m_set && !rs.m_requestBodyNoFilesLimit.m_set &&
                !rs.m_responseBodyLimit.m_set && !rs.m_uploadFileLimit.m_set &&
                !rs.m_uploadFileMode.m_set && !rs.m_responseBodyTypeToBeInspected.m_set &&
                !rs.m_httpblKey.m_set && !rs.m_uploadDirectory.m_set &&
                !rs.m_uploadTmpDirectory.m_set && !rs.m_secArgumentSeparator.m_set &&
                !rs.m_secWebAppId.m_set && !rs.m_unicodeMapTable.m_set && rs.m_components.empty();
  bool engine = rs.m_secRuleEngine == P::PropertyNotSetRuleEngine &&
                rs.m_requestBodyLimitAction == P::PropertyNotSetBodyLimitAction &&
                rs.m_responseBodyLimitAction == P::PropertyNotSetBodyLimitAction &&
                rs.m_remoteRulesActionOnFailed == P::PropertyNotSetRemoteRulesAction;
  bool logs =
      !rs.m_debugLog->isLogFileSet() && rs.m_auditLog->m_path1.empty() &&
      rs.m_auditLog->m_path2.empty() && rs.m_auditLog->m_storage_dir.empty() &&
      rs.m_auditLog->*member_of(AuditStatus{}) == modsecurity::audit_log::AuditLog::NotSetLogStatus;
  bool defaults = std::all_of(std::begin(rs.m_defaultActions), std::end(rs.m_defaultActions),
                              [](const auto& v) { return v.empty(); });
  const auto& ex = rs.m_exceptions;
  auto local = [](const auto& map) {
    return std::all_of(map.begin(), map.end(), [](const auto& kv) {
      return kv.first >= 1 && kv.first <= waf::kMaxLocalId;
    });
  };
  bool exceptions =
      ex.m_remove_rule_by_msg.empty() && ex.m_remove_rule_by_tag.empty() &&
      ex.m_variable_update_target_by_tag.empty() && ex.m_variable_update_target_by_msg.empty() &&
      local(ex.m_variable_update_target_by_id) && local(ex.m_action_pre_update_target_by_id) &&
      local(ex.m_action_pos_update_target_by_id);
  return booleans && values && engine && logs && defaults && exceptions;
}

constexpr std::string_view kAmbiguous =
    "could not be read unambiguously by the WAF engine; simplify quoting and line breaks";

// A marker the check puts on the line after the text. A directive that reads on over a line
// break (an unquoted value taking the next lines in, a rule link whose actions would be the next
// line) moves it to an earlier line or takes it in: the first hides text from the scan, the
// second would take the first line of whatever the gateway loads after the text. Its name has a
// character SecMarker names in tenant rules may not have (waf_scan.cc), so no text names it.
constexpr std::string_view kEndMarker = "gw:end";
constexpr std::string_view kRunsOn =
    "could not be read unambiguously by the WAF engine: a directive runs on over a line break "
    "(an unquoted value, a line continuation inside a quoted value, which the engine keeps in "
    "the value, or a rule without actions at the end)";

// What the engine's lexer drops while it parses: in a lexer state with no rule for the next
// character, flex's default rule writes it to the lexer's output (stdout) and goes on. Every
// bypass of the scan found so far made the engine drop text that way (after an operator's name,
// a tab and what followed up to the next space, line ends included), so that the scan and the
// engine read the rest differently. Collects it instead, for the span of a parse, so that a
// text the engine dropped any character of is refused. Parser mutex held.
class DroppedText {
 public:
  DroppedText() : before_(yyget_out()), sink_(open_memstream(&buf_, &size_)) {
    if (sink_ != nullptr) yyset_out(sink_);
  }
  ~DroppedText() {
    // Before the lexer's first run its output is unset (it then picks stdout itself); a lexer
    // that ran must not be left writing to nothing.
    yyset_out(before_ != nullptr ? before_ : stdout);
    if (sink_ != nullptr) std::fclose(sink_);
    std::free(buf_);
  }
  DroppedText(const DroppedText&) = delete;
  DroppedText& operator=(const DroppedText&) = delete;
  // What was dropped so far; "?" when it could not be collected (no memory for the stream).
  std::string take() {
    if (sink_ == nullptr) return "?";
    std::fflush(sink_);
    return std::string(buf_ == nullptr ? "" : buf_, size_);
  }

 private:
  FILE* before_;
  char* buf_ = nullptr;
  size_t size_ = 0;
  FILE* sink_;
};

// What the audit reads of libmodsecurity 3.0.9's run-time strings (RunTimeString: a value that
// may hold macros, such as an operator's parameter or a msg) and of the objects that hold one. No
// header of theirs is installed, so these mirror the first members of each, up to the one read;
// the tests pin each layout (tests/commands/fields_test.cc), and the operator's is checked against
// the operator's name at every use.
struct EngineRunTimeElement {  // RunTimeElementHolder
  const void* variable;        // std::unique_ptr<variables::Variable>; null for text
  std::string text;
};
struct EngineRunTimeString {  // RunTimeString
  bool contains_macro;
  std::list<const EngineRunTimeElement*> elements;  // of std::unique_ptr<RunTimeElementHolder>
};
// Plain mirrors, not classes with virtual functions (UBSan's vptr check would take a member read
// through one for a wrong dynamic type): the engine object's own first word, its virtual table
// address, is `vtable` or the bytes of the actions::Action base.
struct EngineOperator {  // operators::Operator
  const void* vtable;
  std::string match_message;
  bool negation;
  std::string name;
  std::string param;
  const EngineRunTimeString* string;  // std::unique_ptr<RunTimeString>
};
using ActionBytes = std::array<unsigned char, sizeof(modsecurity::actions::Action)>;
struct EngineStringAction {  // actions::Msg, LogData, Tag
  alignas(modsecurity::actions::Action) ActionBytes action;
  const EngineRunTimeString* string;
};
struct EngineRedirect {  // actions::disruptive::Redirect
  alignas(modsecurity::actions::Action) ActionBytes action;
  int status;
  const EngineRunTimeString* string;
};
struct EngineSetVar {  // actions::SetVar
  alignas(modsecurity::actions::Action) ActionBytes action;
  int operation;
  const void* variable;  // std::unique_ptr<variables::Variable>, the one it sets
  const EngineRunTimeString* string;
};

bool is_env(const void* variable) {
  return variable != nullptr && engine_class_name(variable) == kEnvClass;
}

// Whether a run-time string reads ENV when it is expanded.
bool reads_env(const EngineRunTimeString* s) {
  return s != nullptr &&
         std::any_of(s->elements.begin(), s->elements.end(),
                     [](const EngineRunTimeElement* e) { return is_env(e->variable); });
}

// Whether an action reads ENV: a msg, logdata, tag, redirect or setvar whose value does.
// `a` is an actions::Action of any class, most of them without an installed header.
bool action_reads_env(const void* a) {
  if (a == nullptr) return false;
  const std::string_view name = engine_class_name(a);
  if (name == "N11modsecurity7actions3MsgE" || name == "N11modsecurity7actions7LogDataE" ||
      name == "N11modsecurity7actions3TagE") {
    return reads_env(static_cast<const EngineStringAction*>(a)->string);
  }
  if (name == "N11modsecurity7actions10disruptive8RedirectE")
    return reads_env(static_cast<const EngineRedirect*>(a)->string);
  if (name == "N11modsecurity7actions6SetVarE") {
    const auto* setvar = static_cast<const EngineSetVar*>(a);
    return is_env(setvar->variable) || reads_env(setvar->string);
  }
  return false;
}

// Whether a rule link reads ENV as the engine built it, whatever the text looked like to the
// scan: in its variables, its operator's parameter (where the text after a variable list went
// that the engine's lexer split off, in four of the five ways past the scan found so far; the
// fifth added an update's target, see engine_updates), its msg, logdata, tags, redirect or
// setvars. Not seen: ENV under a count (`&ENV`, a wrapper of another class),
// which the scan refuses.
Problem reads_env(modsecurity::RuleWithActions& link) {
  const int line = link.getLineNumber();
  const auto& variables = engine_variables(link);
  if (std::any_of(variables.begin(), variables.end(), is_env))
    return waf::refused("variable ENV", line);
  if (auto* rule = dynamic_cast<modsecurity::RuleWithOperator*>(&link)) {
    const auto* op = reinterpret_cast<const EngineOperator*>(rule->*member_of(OperatorOf{}));
    if (op == nullptr || op->name != rule->getOperatorName()) return std::string(kAmbiguous);
    if (reads_env(op->string)) return waf::refused("variable ENV", line);
  }
  bool found = action_reads_env(link.*member_of(MsgOf{})) ||
               action_reads_env(link.*member_of(LogDataOf{})) ||
               action_reads_env(link.*member_of(DisruptiveOf{}));
  for (const void* a : link.*member_of(TagList{})) found = found || action_reads_env(a);
  for (const void* a : link.*member_of(SetVarList{})) found = found || action_reads_env(a);
  if (found) return waf::refused("variable ENV", line);
  return std::nullopt;
}

// An operator whose cost the policy bounds, as the engine built it: an @rx (or a regex without an
// operator name) whose parameter holds a macro, compiled anew from the macro's value at every
// match; a substring search with a macro or a long parameter (waf::substring_search_problem). The
// scan refuses such text; this stands behind it, as the ENV checks do, should the engine's lexer
// put a macro or more text into a parameter than the scan saw there.
Problem costly_operator(modsecurity::RuleWithActions& link) {
  auto* rule = dynamic_cast<modsecurity::RuleWithOperator*>(&link);
  if (rule == nullptr) return std::nullopt;
  const auto* op = reinterpret_cast<const EngineOperator*>(rule->*member_of(OperatorOf{}));
  if (op == nullptr || op->name != rule->getOperatorName()) return std::string(kAmbiguous);
  const bool has_macro = op->string != nullptr && op->string->contains_macro;
  if (strcasecmp(op->name.c_str(), "rx") == 0 && has_macro)
    return waf::rx_with_macro(link.getLineNumber());
  return waf::substring_search_problem(op->name, op->param, has_macro, link.getLineNumber());
}

// The name of a transformation as the scan keeps it ("lowercase"), from the engine's
// ("t:lowerCase", as written); nullopt if the action is no transformation.
std::optional<std::string> transformation_name(const modsecurity::actions::Action* t) {
  const std::string_view name =
      t != nullptr && t->m_name ? std::string_view(*t->m_name) : std::string_view();
  if (!name.starts_with("t:")) return std::nullopt;
  return ascii_lower(name.substr(2));
}

// One link of a rule as the engine built it: its action counts, after checking what only the
// engine's copy can show (a runtime action or ctl value the policy refuses, a rev or ver that
// ran past a quote or a line end).
Problem engine_link(modsecurity::RuleWithActions& r, waf::LinkActions* counts) {
  for (const std::string* s : {&r.m_rev, &r.m_ver}) {
    if (s->find_first_of("\"'\r\n") != std::string::npos) return std::string(kAmbiguous);
  }
  const int line = r.getLineNumber();
  if (auto p = reads_env(r)) return p;
  if (auto p = costly_operator(r)) return p;
  if (auto* rule = dynamic_cast<modsecurity::RuleWithOperator*>(&r)) {
    // An operator is one quoted string on one line: a parameter with a line break in it is text
    // the engine's lexer swallowed past the operator's end (a comment line's, or the actions'
    // that the scan read).
    const auto* op = reinterpret_cast<const EngineOperator*>(rule->*member_of(OperatorOf{}));
    if (op == nullptr || op->param.find_first_of("\r\n") != std::string::npos)
      return std::string(kAmbiguous);
  }
  for (modsecurity::actions::Action* a : r.*member_of(RuntimeList{})) {
    std::string_view name = a->m_name ? std::string_view(*a->m_name) : std::string_view();
    if (!waf::allowed_runtime_action(name))
      return waf::refused("action " + std::string(name), line);
    if (name == "ctl") {
      if (auto p = waf::check_ctl(a->m_parser_payload, line)) return p;
    }
  }
  counts->line = line;
  counts->variables = engine_variables(r).size();
  counts->runtime = (r.*member_of(RuntimeList{})).size();
  for (const auto* transformation : r.*member_of(TransformationList{})) {
    // actions::transformations::Transformation, whose header libmodsecurity does not install,
    // derives from Action alone.
    auto name =
        transformation_name(reinterpret_cast<const modsecurity::actions::Action*>(transformation));
    if (!name) return std::string(kAmbiguous);
    counts->transformations.push_back(std::move(*name));
  }
  counts->setvars = (r.*member_of(SetVarList{})).size();
  counts->tags = (r.*member_of(TagList{})).size();
  return std::nullopt;
}

// Adds the names of a rule link's skipAfter actions to `out` (the engine skips to the next marker
// of that name in the rule's phase, or past every later rule if there is none).
void skip_targets(modsecurity::RuleWithActions& r, std::set<std::string>* out) {
  for (modsecurity::actions::Action* a : r.*member_of(RuntimeList{})) {
    if (a->m_name && ascii_iequals(*a->m_name, "skipAfter")) out->insert(a->m_parser_payload);
  }
}

// What SecRuleUpdate*ById added (ids were checked with the settings): as many variables,
// transformations and actions as the scan counted, and only actions the policy allows.
// The engine keeps no line numbers for them, so messages name none (line 0).
Problem engine_updates(const modsecurity::RulesExceptions& ex, const waf::ScanResult& scan) {
  for (const auto& [id, a] : ex.m_action_pos_update_target_by_id) {
    std::string_view name = a->m_name ? std::string_view(*a->m_name) : std::string_view();
    if (!waf::allowed_update_action(name)) return waf::refused("action " + std::string(name), 0);
    if (name == "ctl") {
      if (auto p = waf::check_ctl(a->m_parser_payload, 0)) return p;
    }
    if (action_reads_env(a.get())) return waf::refused("variable ENV", 0);
    // An update's skipAfter would apply to a rule whose position the audit does not know.
    if (ascii_iequals(name, "skipAfter")) return std::string(kAmbiguous);
  }
  for (const auto& [id, variable] : ex.m_variable_update_target_by_id) {
    if (is_env(variable.get())) return waf::refused("variable ENV", 0);
  }
  // The transformations the updates add, by name (as a rule's own are, engine_link).
  std::vector<std::string> transformations;
  for (const auto& [id, t] : ex.m_action_pre_update_target_by_id) {
    auto name = transformation_name(t.get());
    if (!name) return std::string(kAmbiguous);
    transformations.push_back(std::move(*name));
  }
  std::sort(transformations.begin(), transformations.end());
  if (ex.m_variable_update_target_by_id.size() != scan.updates.targets ||
      transformations != scan.updates.transformations ||
      ex.m_action_pos_update_target_by_id.size() != scan.updates.actions) {
    return std::string(kAmbiguous);
  }
  return std::nullopt;
}

// A collection that keeps nothing and remembers whether anything was written to it.
class WriteTrap final : public modsecurity::collection::Collection {
 public:
  explicit WriteTrap(const std::string& name) : Collection(name) {}
  bool written = false;
  void store(std::string, std::string) override { written = true; }
  bool storeOrUpdateFirst(const std::string&, const std::string&) override {
    written = true;
    return true;
  }
  bool updateFirst(const std::string&, const std::string&) override {
    written = true;
    return true;
  }
  void del(const std::string&) override { written = true; }
  std::unique_ptr<std::string> resolveFirst(const std::string&) override { return nullptr; }
  void resolveSingleMatch(const std::string&,
                          std::vector<const modsecurity::VariableValue*>*) override {}
  void resolveMultiMatches(const std::string&, std::vector<const modsecurity::VariableValue*>*,
                           modsecurity::variables::KeyExclusions&) override {}
  void resolveRegularExpression(const std::string&, std::vector<const modsecurity::VariableValue*>*,
                                modsecurity::variables::KeyExclusions&) override {}
};

// An engine whose shared collections (GLOBAL, IP, SESSION, USER, RESOURCE) are write traps.
// Made once and never freed: in gatewayd, in the sandbox's zygote before its workers are confined
// (prepare_engine; the ModSecurity constructor reads the machine's identity, which a worker may
// not), so that each worker inherits it.
struct TrapEngine {
  modsecurity::ModSecurity ms;
  std::array<WriteTrap*, 5> traps{};
  TrapEngine() {
    modsecurity::collection::Collection** slots[] = {
        &ms.m_global_collection, &ms.m_ip_collection, &ms.m_session_collection,
        &ms.m_user_collection, &ms.m_resource_collection};
    for (size_t i = 0; i < traps.size(); ++i) {
      auto* trap = new WriteTrap((*slots[i])->m_name);
      delete *slots[i];
      *slots[i] = trap;  // ModSecurity's destructor deletes its collections (never run here)
      traps[i] = trap;
    }
  }
};

TrapEngine& trap_engine() {
  static TrapEngine* const engine = new TrapEngine();
  return *engine;
}

// Third line of defence, for the setvars: whatever the engine read a text as, each setvar it
// built writes TX only. Each one runs once, on a transaction of the trap engine, and a write to a
// shared collection refuses the text. Two texts accepted by the scan and the counts of the audit
// wrote GLOBAL, IP, SESSION, USER or RESOURCE all the same (an expirevar value and a setvar name
// in slashes, each of which the engine read on over later actions, turning a msg into a setvar).
Problem setvars_stay_in_tx(modsecurity::RulesSet& rs) {
  TrapEngine& engine = trap_engine();
  for (WriteTrap* trap : engine.traps) trap->written = false;
  modsecurity::Transaction tx(&engine.ms, &rs, nullptr);
  std::map<int64_t, modsecurity::RuleWithActions*> by_id;
  for (int phase = 0; phase < modsecurity::Phases::NUMBER_OF_PHASES; ++phase) {
    const modsecurity::Rules* list = rs.m_rulesSetPhases.at(phase);
    for (size_t i = 0; i < list->size(); ++i) {
      auto* head = dynamic_cast<modsecurity::RuleWithActions*>(list->at(static_cast<int>(i)).get());
      if (head == nullptr) continue;
      by_id.emplace(head->m_ruleId, head);
      for (modsecurity::RuleWithActions* r = head; r != nullptr; r = r->m_chainedRuleChild.get()) {
        // The engine's headers only declare SetVar; its one base is Action (libmodsecurity
        // 3.0.9, src/actions/set_var.h), the object's first and only base subobject.
        for (auto* setvar : r->*member_of(SetVarList{})) {
          static_cast<modsecurity::actions::Action*>(static_cast<void*>(setvar))->evaluate(r, &tx);
        }
      }
    }
  }
  for (const auto& [id, a] : rs.m_exceptions.m_action_pos_update_target_by_id) {
    if (a->m_name == nullptr || !ascii_iequals(*a->m_name, "setvar")) continue;
    const auto rule = by_id.find(static_cast<int64_t>(id));
    if (rule == by_id.end()) return std::string(kAmbiguous);
    a->evaluate(rule->second, &tx);
  }
  for (WriteTrap* trap : engine.traps) {
    if (trap->written) {
      return "setvar may only change TX variables (the WAF engine read one of " + trap->m_name +
             ")";
    }
  }
  return std::nullopt;
}

// Second line of defence: the engine's own view must match the scan's. `end_line` is the line of
// the marker put after the text (kEndMarker).
Problem audit(modsecurity::RulesSet& rs, const waf::ScanResult& scan, int end_line) {
  std::vector<waf::ScannedRule> rules;
  std::set<std::string> markers;
  bool end_seen = false;
  for (int phase = 0; phase < modsecurity::Phases::NUMBER_OF_PHASES; ++phase) {
    const modsecurity::Rules* list = rs.m_rulesSetPhases.at(phase);
    // skipAfter targets of this phase's rules so far; each must be met by a later marker.
    std::set<std::string> awaited;
    for (size_t i = 0; i < list->size(); ++i) {
      modsecurity::Rule* rule = list->at(static_cast<int>(i)).get();
      if (auto* marker = dynamic_cast<modsecurity::RuleMarker*>(rule)) {
        if (*marker->getName() == kEndMarker) {
          if (marker->getLineNumber() != end_line) return std::string(kRunsOn);
          end_seen = true;
          continue;
        }
        markers.insert(*marker->getName());
        awaited.erase(*marker->getName());
        continue;
      }
      auto* head = dynamic_cast<modsecurity::RuleWithActions*>(rule);
      if (head == nullptr) return std::string(kAmbiguous);
      waf::ScannedRule seen{head->m_ruleId, {}};
      for (modsecurity::RuleWithActions* r = head; r != nullptr; r = r->m_chainedRuleChild.get()) {
        auto* op = dynamic_cast<modsecurity::RuleWithOperator*>(r);
        if (op != nullptr && waf::denied_engine_operator(op->getOperatorName())) {
          return waf::refused("operator @" + op->getOperatorName(), r->getLineNumber());
        }
        // A chain left open would take the next rule loaded after these as its follow-up.
        if (r->isChained() && r->m_chainedRuleChild == nullptr) return std::string(kAmbiguous);
        if (auto p = engine_link(*r, &seen.links.emplace_back())) return p;
        skip_targets(*r, &awaited);
      }
      rules.push_back(std::move(seen));
    }
    if (!awaited.empty()) return std::string(kAmbiguous);
  }
  if (!end_seen) return std::string(kRunsOn);
  auto expected = scan.rules;
  auto by_id = [](const waf::ScannedRule& a, const waf::ScannedRule& b) { return a.id < b.id; };
  std::sort(rules.begin(), rules.end(), by_id);
  std::sort(expected.begin(), expected.end(), by_id);
  if (rules != expected || markers != scan.markers) return std::string(kAmbiguous);
  if (!settings_untouched(rs) || removes_outside_local_range(rs.m_exceptions))
    return "must not change engine-wide settings or rules outside ids 1..99999";
  if (auto p = engine_updates(rs.m_exceptions, scan)) return p;
  return setvars_stay_in_tx(rs);
}

}  // namespace

namespace waf {

void prepare_engine() { trap_engine(); }

// A parse that clears the lexer state a parse may leave behind (see engine_check).
void reset_parser() {
  try {
    modsecurity::RulesSet reset;
    reset.load("SecRuleUpdateTargetById 1 ARGS\n");
  } catch (const std::exception&) {
    // Nothing to report: the reset parse is ours, and the client's answer is known already.
  }
}

// Parses under a process-wide lock: the engine's flex lexer keeps its state in globals. One of
// them (set by SecRuleUpdateTargetById, cleared only by the blank that follows its targets) even
// outlives a parse and breaks the next one, so every parse ends with a parse that clears it.
Problem engine_check(std::string_view text, const ScanResult& scan) {
  static std::mutex parser_mutex;
  std::lock_guard<std::mutex> lock(parser_mutex);
  Problem problem;
  DroppedText dropped;
  try {
    modsecurity::RulesSet rules;
    // The marker's line as the engine counts lines (see ScanResult::uncounted_line_breaks).
    const int end_line = static_cast<int>(std::count(text.begin(), text.end(), '\n') + 2 -
                                          scan.uncounted_line_breaks);
    const std::string loaded = std::string(text) + "\nSecMarker " + std::string(kEndMarker) + "\n";
    if (rules.load(loaded.c_str(), std::string(kReference)) < 0) {
      // The engine's message is the text's own unless the marker made the parse fail (a rule
      // link without actions took its line): then the text alone parses.
      reset_parser();
      modsecurity::RulesSet alone;
      problem =
          alone.load((std::string(text) + "\n").c_str(), std::string(kReference)) < 0
              ? "must be valid ModSecurity directives: " + engine_message(alone.getParserError())
              : std::string(kRunsOn);
    } else if (std::string d = dropped.take(); !d.empty()) {
      problem = std::string(kAmbiguous) + " (the engine skipped \"" + client_text(d, 40) + "\")";
    } else {
      problem = audit(rules, scan, end_line);
    }
  } catch (const std::exception&) {
    problem = "must be valid ModSecurity directives: the WAF engine could not parse them";
  }
  reset_parser();
  return problem;
}

}  // namespace waf

Problem waf_directives(std::string_view text) {
  if (text.size() > kMaxDirectivesBytes) return "must be at most 65536 bytes";
  waf::ScanResult scan;
  if (auto p = waf::scan_directives(text, &scan)) return p;
  if (scan.directives == 0) return std::nullopt;
  return waf::engine_check(text, scan);
}

}  // namespace gw::fields
