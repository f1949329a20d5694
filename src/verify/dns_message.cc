#include <ares.h>

#include <cstdlib>
#include <optional>

#include "core/text.h"
#include "verify/resolver.h"

namespace gw {

namespace {

constexpr int kHeaderBytes = 12;
constexpr int kTypeCname = 5;
constexpr int kClassIn = 1;

int u16(const unsigned char* p) { return (p[0] << 8) | p[1]; }

// Reads a (possibly compressed) name at `p` into *out; the number of bytes it takes at `p`, or
// -1 if it does not expand.
long expand_name(const unsigned char* p, const unsigned char* message, int length,
                 std::string* out) {
  char* name = nullptr;
  long used = 0;
  if (ares_expand_name(p, message, length, &name, &used) != ARES_SUCCESS) return -1;
  *out = name;
  ares_free_string(name);
  return used;
}

}  // namespace

CnameInMessage cname_in_message(const unsigned char* message, int length, std::string_view owner,
                                std::string* target) {
  if (message == nullptr || length < kHeaderBytes) return CnameInMessage::kMalformed;
  // RFC 1035 4.1.1: a reply whose RCODE is not 0 (NOERROR) failed, whatever records it holds.
  if ((message[3] & 0x0f) != 0) return CnameInMessage::kErrorCode;
  const unsigned char* end = message + length;
  const int questions = u16(message + 4);
  const int answers = u16(message + 6);
  // Every record the header counts, in the answer, authority and additional sections, is read
  // through: a reply damaged after the CNAME sought (a count past its records, a name that loops)
  // is as malformed as one damaged before it.
  const int records = answers + u16(message + 8) + u16(message + 10);
  const unsigned char* p = message + kHeaderBytes;
  std::string name;
  for (int i = 0; i < questions; ++i) {
    long n = expand_name(p, message, length, &name);
    if (n < 0 || end - p < n + 4) return CnameInMessage::kMalformed;
    p += n + 4;  // name, type, class
  }
  std::optional<std::string> found;
  for (int i = 0; i < records; ++i) {
    long n = expand_name(p, message, length, &name);
    if (n < 0 || end - p < n + 10) return CnameInMessage::kMalformed;
    p += n;
    const int type = u16(p);
    const int record_class = u16(p + 2);
    const int rdlength = u16(p + 8);
    p += 10;  // type, class, ttl, rdlength
    if (end - p < rdlength) return CnameInMessage::kMalformed;
    // The question asks for class IN: a CNAME of another class (CH, ANY) is no answer to it.
    if (i < answers && type == kTypeCname && record_class == kClassIn) {
      std::string cname;
      if (expand_name(p, message, length, &cname) != rdlength) return CnameInMessage::kMalformed;
      // Of several (a name has one CNAME, RFC 2181 10.1), the first counts.
      if (!found && same_dns_name(name, owner)) found = std::move(cname);
    }
    p += rdlength;
  }
  if (!found) return CnameInMessage::kNone;
  *target = std::move(*found);
  return CnameInMessage::kFound;
}

bool question_is(const unsigned char* message, int length, std::string_view name) {
  if (message == nullptr || length < kHeaderBytes || u16(message + 4) != 1) return false;
  std::string asked;
  if (expand_name(message + kHeaderBytes, message, length, &asked) < 0) return false;
  if (!name.empty() && name.back() == '.') name.remove_suffix(1);
  return asked == name;
}

bool same_dns_name(std::string_view a, std::string_view b) {
  auto without_dot = [](std::string_view s) {
    if (!s.empty() && s.back() == '.') s.remove_suffix(1);
    return s;
  };
  return ascii_iequals(without_dot(a), without_dot(b));
}

}  // namespace gw
