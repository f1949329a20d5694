// Looking up the CNAME of a name. The Resolver interface is the DNS edge; AresResolver
// (ares_resolver.h) is the real one, tests use their own. Implementations are thread-safe.
#pragma once

#include <functional>
#include <string>

namespace gw {

struct CnameAnswer {
  enum class Status {
    kFound,        // `target` holds the CNAME's target as given (case and trailing dot kept)
    kNoCname,      // the name exists but has no CNAME record
    kNxdomain,     // the name does not exist
    kServfail,     // the server answered with an error (SERVFAIL, REFUSED, a malformed reply)
    kTimeout,      // no answer within the timeout and retries
    kUnreachable,  // the server refused the connection (nothing listens there)
    kCancelled,    // the resolver shut down before an answer; nothing is known
  };
  Status status = Status::kTimeout;
  std::string target;
  std::string detail;  // the resolver's own words, for humans
};

class Resolver {
 public:
  using Callback = std::function<void(CnameAnswer)>;
  virtual ~Resolver() = default;
  // Looks up the CNAME record of `name`. `callback` runs exactly once, on the resolver's own
  // thread, and must not block.
  virtual void lookup_cname(std::string name, Callback callback) = 0;
};

// The first CNAME target in a DNS response message, if it has one (DNS wire format, RFC 1035).
// False when the message has no CNAME answer or cannot be read. Pure; thread-safe.
bool first_cname_target(const unsigned char* message, int length, std::string* target);

}  // namespace gw
