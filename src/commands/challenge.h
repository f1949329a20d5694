// The ownership challenge of a domain: the CNAME a team must publish to prove it controls a name.
// Pure apart from the injected randomness; thread-safe.
#pragma once

#include <string>

#include "core/clock.h"

namespace gw {

// The DNS name that must carry the CNAME: an underscore label under the hostname.
std::string verification_hostname(const std::string& hostname);

// An unguessable CNAME target under `verification_domain`: 128 random bits, hex, as one label.
std::string make_verification_value(IdGenerator& ids, const std::string& verification_domain);

}  // namespace gw
