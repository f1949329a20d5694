// The ownership challenge of a domain: the CNAME a team must publish to prove it controls a name.
// Pure apart from the injected randomness; thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "core/clock.h"

namespace gw {

// The DNS name that must carry the CNAME: an underscore label under the hostname.
inline constexpr std::string_view kVerificationLabel = "_gateway-verify.";
std::string verification_hostname(const std::string& hostname);
// The longest domain hostname whose verification_hostname is still a DNS name (253 bytes).
inline constexpr size_t kMaxDomainHostnameBytes = 253 - kVerificationLabel.size();

// The longest verification domain whose verification_values are still DNS names (253 bytes):
// each is "gv-", 32 hex digits and a dot before it.
inline constexpr size_t kMaxVerificationDomainBytes = 253 - 36;

// An unguessable CNAME target under `verification_domain`: 128 random bits, hex, as one label.
std::string make_verification_value(IdGenerator& ids, const std::string& verification_domain);

}  // namespace gw
