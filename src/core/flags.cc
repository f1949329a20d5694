#include "core/flags.h"

#include <charconv>
#include <cstdlib>
#include <set>

namespace gw {

Result<bool> Flags::parse(int argc, char** argv, int first) {
  for (const auto& s : specs_) {
    // An empty variable counts as unset (compose files and unit files often pass VAR= through).
    const char* env = s.env.empty() ? nullptr : std::getenv(s.env.c_str());
    values_[s.name] = env != nullptr && *env != '\0' ? env : s.value;
    if (env != nullptr && *env != '\0') {
      from_env_[s.name] = s.env;
      given_.insert(s.name);
    }
  }
  std::set<std::string> on_command_line;
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      help_ = true;
      continue;
    }
    if (arg.rfind("--", 0) != 0)
      return make_error(Code::kValidationFailed, "unexpected argument " + arg);
    std::string name = arg.substr(2);
    std::optional<std::string> value;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (values_.count(name) == 0)
      return make_error(Code::kValidationFailed, "unknown flag --" + name);
    // Of two values, which one was meant is a guess; a script that repeats a flag is wrong.
    if (!on_command_line.insert(name).second) {
      return make_error(Code::kValidationFailed, "--" + name + " is given more than once");
    }
    if (!value) {
      if (i + 1 >= argc) return make_error(Code::kValidationFailed, "--" + name + " needs a value");
      value = argv[++i];
    }
    values_[name] = *value;
    from_env_.erase(name);
    given_.insert(name);
  }
  return true;
}

const std::string& Flags::get(const std::string& name) const { return values_.at(name); }

std::string Flags::named(const std::string& name) const {
  auto env = from_env_.find(name);
  return env == from_env_.end() ? "--" + name : env->second + " (--" + name + ")";
}

std::string Flags::usage() const {
  std::string out;
  for (const auto& s : specs_) {
    out += "  --" + s.name;
    if (!s.env.empty()) out += " (" + s.env + ")";
    out += "\n      " + s.help;
    if (!s.value.empty()) out += " [default: " + s.value + "]";
    out += "\n";
  }
  return out;
}

bool split_host_port(const std::string& in, std::string* host, uint16_t* port) {
  auto colon = in.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  const std::string_view h(in.data(), colon);
  const bool bracketed = h.size() > 2 && h.front() == '[' && h.back() == ']';
  if (!bracketed && h.find_first_of(":[]") != std::string_view::npos) return false;
  auto p = parse_int(in.substr(colon + 1), 0, 65535);
  if (!p) return false;
  *host = in.substr(0, colon);
  *port = static_cast<uint16_t>(*p);
  return true;
}

namespace {

// Decimal digits (a '-' first for a signed T), all of `in`, within [min, max].
template <typename T>
std::optional<T> parse_whole(std::string_view in, T min, T max) {
  T v = 0;
  auto [ptr, ec] = std::from_chars(in.data(), in.data() + in.size(), v);
  if (in.empty() || ec != std::errc() || ptr != in.data() + in.size() || v < min || v > max) {
    return std::nullopt;
  }
  return v;
}

}  // namespace

std::optional<uint64_t> parse_uint(std::string_view in, uint64_t min, uint64_t max) {
  return parse_whole<uint64_t>(in, min, max);
}

std::optional<int64_t> parse_int(const std::string& in, int64_t min, int64_t max) {
  return parse_whole<int64_t>(in, min, max);
}

}  // namespace gw
