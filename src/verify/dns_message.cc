#include <ares.h>

#include <cstdlib>

#include "verify/resolver.h"

namespace gw {

namespace {

constexpr int kHeaderBytes = 12;
constexpr int kTypeCname = 5;

int u16(const unsigned char* p) { return (p[0] << 8) | p[1]; }

// Skips a (possibly compressed) name at `p`; the number of bytes it takes, or -1.
long name_length(const unsigned char* p, const unsigned char* message, int length) {
  char* name = nullptr;
  long used = 0;
  if (ares_expand_name(p, message, length, &name, &used) != ARES_SUCCESS) return -1;
  ares_free_string(name);
  return used;
}

}  // namespace

bool first_cname_target(const unsigned char* message, int length, std::string* target) {
  if (message == nullptr || length < kHeaderBytes) return false;
  const unsigned char* end = message + length;
  int questions = u16(message + 4);
  int answers = u16(message + 6);
  const unsigned char* p = message + kHeaderBytes;
  for (int i = 0; i < questions; ++i) {
    long n = name_length(p, message, length);
    if (n < 0 || end - p < n + 4) return false;
    p += n + 4;  // name, type, class
  }
  for (int i = 0; i < answers; ++i) {
    long n = name_length(p, message, length);
    if (n < 0 || end - p < n + 10) return false;
    p += n;
    int type = u16(p);
    int rdlength = u16(p + 8);
    p += 10;  // type, class, ttl, rdlength
    if (end - p < rdlength) return false;
    if (type == kTypeCname) {
      char* name = nullptr;
      long used = 0;
      if (ares_expand_name(p, message, length, &name, &used) != ARES_SUCCESS) return false;
      *target = name;
      ares_free_string(name);
      return true;
    }
    p += rdlength;
  }
  return false;
}

}  // namespace gw
