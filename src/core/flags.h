// Command-line flags with environment fallbacks: `--name VALUE` or `--name=VALUE`; a flag given on
// the command line wins over its environment variable, which wins over the default.
// Not thread-safe (used at start-up only).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace gw {

struct FlagSpec {
  std::string name;     // without the leading dashes
  std::string env;      // environment variable, or empty
  std::string value;    // default ("" = none)
  std::string help;
};

class Flags {
 public:
  explicit Flags(std::vector<FlagSpec> specs) : specs_(std::move(specs)) {}
  // Parses argv[first..argc). Fails (kValidationFailed) on an unknown flag or a missing value.
  // `--help` sets help_requested().
  Result<bool> parse(int argc, char** argv, int first);
  const std::string& get(const std::string& name) const;
  // How to name flag `name` in a message about its value: "--name", or "GATEWAY_X (--name)" when
  // the value came from its environment variable.
  std::string named(const std::string& name) const;
  // Whether flag `name` was given, on the command line or by its environment variable.
  bool given(const std::string& name) const { return given_.count(name) != 0; }
  bool help_requested() const { return help_; }
  std::string usage() const;

 private:
  std::vector<FlagSpec> specs_;
  std::map<std::string, std::string> values_;
  std::map<std::string, std::string> from_env_;  // flag -> its variable, for values read from one
  std::set<std::string> given_;                  // flags given on the command line or by variable
  bool help_ = false;
};

// "HOST:PORT" -> host and port (port 0..65535). An IPv6 address is in brackets ("[::1]:8080");
// a host with a colon outside brackets is refused.
bool split_host_port(const std::string& in, std::string* host, uint16_t* port);
// A whole decimal number in [min, max].
std::optional<int64_t> parse_int(const std::string& in, int64_t min, int64_t max);
// Decimal digits only (no sign), a number in [min, max]: sequence numbers go up to 2^64 - 1.
std::optional<uint64_t> parse_uint(std::string_view in, uint64_t min, uint64_t max);

}  // namespace gw
