// Looking up the CNAME of a name. The Resolver interface is the DNS edge; AresResolver
// (ares_resolver.h) is the real one, tests use their own. Implementations are thread-safe.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace gw {

struct CnameAnswer {
  enum class Status {
    kFound,        // `target` holds the CNAME's target as given (case and trailing dot kept)
    kNoCname,      // the name exists but has no CNAME record
    kNxdomain,     // the name does not exist
    kServfail,     // the server answered with an error (SERVFAIL, REFUSED, a malformed reply)
    kTimeout,      // no answer within the timeout and retries
    kUnreachable,  // no server could be reached: nothing listens there, or a TCP connection
                   // (after a truncated UDP answer) ended without an answer
    kCancelled,    // the resolver shut down before an answer; nothing is known
    kSkipped,      // not looked up: the lookup was no longer wanted when its turn came
  };
  Status status = Status::kTimeout;
  std::string target;
  std::string detail;  // the resolver's own words, for humans
};

class Resolver {
 public:
  using Callback = std::function<void(CnameAnswer)>;
  // Whether a lookup is still wanted; asked on the resolver's own thread right before the lookup
  // starts (it may have waited in a queue), so it must be quick and thread-safe.
  using Wanted = std::function<bool()>;
  virtual ~Resolver() = default;
  // Looks up the CNAME record of `name` for `owner` (a tenant). `callback` runs exactly once, on
  // the resolver's own thread, and must not block; with kSkipped, sending no query, if `wanted`
  // is given and says no when the lookup's turn comes. Lookups that wait for room take turns by
  // owner, so one owner's many lookups do not hold back another owner's.
  virtual void lookup_cname(std::string name, std::string owner, Callback callback,
                            Wanted wanted) = 0;
  // Lookups queued and waiting for room to start (for /metrics).
  virtual size_t waiting() const = 0;
};

// What a DNS response message (wire format, RFC 1035) says of the CNAME of `owner`.
enum class CnameInMessage {
  kFound,      // *target holds the first CNAME of `owner`, as given
  kNone,       // no CNAME answer of `owner` (answers of other names are ignored)
  kMalformed,  // a record the header counts cannot be read, before the answer or after it: cut
               // short, a name that does not expand (a compression loop), or an answer's CNAME
               // whose data is not exactly one name
  kErrorCode,  // the header's RCODE is not NOERROR: the reply answers nothing, whatever its
               // records (c-ares reports some codes as a success)
};
// Pure; thread-safe.
CnameInMessage cname_in_message(const unsigned char* message, int length, std::string_view owner,
                                std::string* target);

// Whether the message holds one question, and its name is `name` letter for letter (case kept;
// one trailing dot of `name` ignored). Pure; thread-safe.
bool question_is(const unsigned char* message, int length, std::string_view name);

// Whether two DNS names are the same: ASCII case ignored, one trailing dot ignored.
bool same_dns_name(std::string_view a, std::string_view b);

}  // namespace gw
