#include "commands/challenge.h"

namespace gw {

std::string verification_hostname(const std::string& hostname) {
  return std::string(kVerificationLabel) + hostname;
}

std::string make_verification_value(IdGenerator& ids, const std::string& verification_domain) {
  return "gv-" + ids.random_hex(16) + "." + verification_domain;
}

}  // namespace gw
