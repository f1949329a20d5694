// Reading CNAME answers from DNS wire-format messages, and comparing names.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "verify/resolver.h"

namespace gw {
namespace {

void put_name(std::vector<unsigned char>* m, const std::string& name) {
  size_t start = 0;
  while (start < name.size()) {
    size_t dot = name.find('.', start);
    if (dot == std::string::npos) dot = name.size();
    m->push_back(static_cast<unsigned char>(dot - start));
    for (size_t i = start; i < dot; ++i) m->push_back(static_cast<unsigned char>(name[i]));
    start = dot + 1;
  }
  m->push_back(0);
}

void put16(std::vector<unsigned char>* m, int v) {
  m->push_back(static_cast<unsigned char>(v >> 8));
  m->push_back(static_cast<unsigned char>(v & 0xff));
}

struct Answer {
  int type;            // 1 (A) or 5 (CNAME)
  std::string target;  // a CNAME's target
  std::string owner;   // empty: a compressed pointer to the question's name
  int record_class = 1;  // IN
};

// A response to a CNAME query for `qname` with the given answers.
std::vector<unsigned char> response(const std::string& qname, const std::vector<Answer>& answers) {
  std::vector<unsigned char> m;
  put16(&m, 0x1234);
  put16(&m, 0x8180);
  put16(&m, 1);
  put16(&m, static_cast<int>(answers.size()));
  put16(&m, 0);
  put16(&m, 0);
  put_name(&m, qname);
  put16(&m, 5);
  put16(&m, 1);
  for (const auto& a : answers) {
    if (a.owner.empty()) {
      m.push_back(0xc0);  // compressed pointer to the question name at offset 12
      m.push_back(12);
    } else {
      put_name(&m, a.owner);
    }
    put16(&m, a.type);
    put16(&m, a.record_class);
    put16(&m, 0);
    put16(&m, 60);
    std::vector<unsigned char> rdata;
    if (a.type == 1) {
      rdata = {127, 0, 0, 1};
    } else {
      put_name(&rdata, a.target);
    }
    put16(&m, static_cast<int>(rdata.size()));
    m.insert(m.end(), rdata.begin(), rdata.end());
  }
  return m;
}

CnameInMessage read(const std::vector<unsigned char>& m, std::string_view owner,
                    std::string* target, size_t length = SIZE_MAX) {
  return cname_in_message(m.data(), static_cast<int>(std::min(length, m.size())), owner, target);
}

// A CNAME of class CH or ANY counted as the proof (helper 53): only class IN, which the question
// asks for, does.
TEST_CASE("only a CNAME of class IN counts") {
  const std::string q = "_gateway-verify.shop.example.com";
  std::string target;
  for (const int record_class : {3, 4, 254, 255}) {
    CAPTURE(record_class);
    CHECK(read(response(q, {{5, "gv-1.verify.platform.test", "", record_class}}), q, &target) ==
          CnameInMessage::kNone);
  }
  // An IN one after one of another class is the one read.
  auto m = response(
      q, {{5, "gv-ch.verify.platform.test", "", 3}, {5, "gv-in.verify.platform.test", "", 1}});
  REQUIRE(read(m, q, &target) == CnameInMessage::kFound);
  CHECK(target == "gv-in.verify.platform.test");
}

TEST_CASE("the CNAME of the asked name is read, compressed owner names included") {
  const std::string q = "_gateway-verify.shop.example.com";
  auto m = response(q, {{5, "gv-1.verify.platform.test", ""}});
  std::string target;
  REQUIRE(read(m, q, &target) == CnameInMessage::kFound);
  CHECK(target == "gv-1.verify.platform.test");
  // Owners compare as DNS names do.
  target.clear();
  REQUIRE(read(m, "_GATEWAY-verify.Shop.example.com.", &target) == CnameInMessage::kFound);
  CHECK(target == "gv-1.verify.platform.test");
}

// A CNAME of another owner was taken as the asked name's (the domain verified).
TEST_CASE("a CNAME of another name is not the asked name's") {
  const std::string q = "_gateway-verify.owner.example.com";
  std::string target;
  auto other = response(q, {{5, "gv-1.verify.platform.test", "unrelated.example"}});
  CHECK(read(other, q, &target) == CnameInMessage::kNone);
  CHECK(target.empty());
  auto both = response(q, {{5, "gv-1.verify.platform.test", "unrelated.example"},
                           {5, "gv-2.verify.platform.test", ""}});
  REQUIRE(read(both, q, &target) == CnameInMessage::kFound);
  CHECK(target == "gv-2.verify.platform.test");
  auto a_only = response(q, {{1, "", ""}});
  CHECK(read(a_only, q, &target) == CnameInMessage::kNone);
}

// A reply cut short or with a looping name was "no CNAME" (the README has it as servfail).
// c-ares gives its own status for NOERROR, FORMERR, SERVFAIL, NXDOMAIN, NOTIMP and REFUSED only:
// a reply with any other error code (YXDOMAIN, NOTAUTH, NOTZONE, 11 to 15) came as a success, and
// a right CNAME in it verified the domain (helper 178).
TEST_CASE("a reply whose error code is not NOERROR answers nothing, whatever it holds") {
  for (int rcode = 1; rcode <= 15; ++rcode) {
    CAPTURE(rcode);
    auto m = response("shop.example.com", {{5, "gv-1.verify.example.net", ""}});
    m[3] = static_cast<unsigned char>((m[3] & 0xf0) | rcode);
    std::string target;
    CHECK(read(m, "shop.example.com", &target) == CnameInMessage::kErrorCode);
  }
  std::string target;
  CHECK(read(response("shop.example.com", {{5, "gv-1.verify.example.net", ""}}), "shop.example.com",
             &target) == CnameInMessage::kFound);
}

TEST_CASE("a reply that cannot be read is malformed, not a name without a CNAME") {
  const std::string q = "x.example.com";
  std::string target;
  auto m = response(q, {{5, "t.example.net", ""}});
  for (size_t cut : {size_t{0}, size_t{5}, size_t{20}, m.size() - 3}) {
    CAPTURE(cut);
    CHECK(read(m, q, &target, cut) == CnameInMessage::kMalformed);
  }
  CHECK(cname_in_message(nullptr, 0, q, &target) == CnameInMessage::kMalformed);

  // RDLENGTH claims more bytes than the message has.
  auto longer = m;
  const size_t rdlength_at = m.size() - 15 - 2;  // "t.example.net" takes 15 bytes
  REQUIRE(longer[rdlength_at + 1] == 15);
  longer[rdlength_at + 1] = 64;
  CHECK(read(longer, q, &target) == CnameInMessage::kMalformed);

  // The CNAME's data is a compression pointer to itself.
  auto loop = m;
  loop.resize(rdlength_at);
  put16(&loop, 2);
  loop.push_back(static_cast<unsigned char>(0xc0 | ((rdlength_at + 2) >> 8)));
  loop.push_back(static_cast<unsigned char>((rdlength_at + 2) & 0xff));
  CHECK(read(loop, q, &target) == CnameInMessage::kMalformed);

  // Bytes after the name, inside RDLENGTH.
  auto padded = m;
  padded[rdlength_at + 1] = 16;
  padded.push_back(0);
  CHECK(read(padded, q, &target) == CnameInMessage::kMalformed);
  CHECK(target.empty());
}

// The reading stopped at the CNAME sought: a reply damaged after it verified the domain, where
// the README has such a reply as servfail (helper 40).
TEST_CASE("a reply damaged after the CNAME sought is malformed too") {
  const std::string q = "_gateway-verify.shop.example.com";
  const std::string value = "gv-1.verify.platform.test";
  std::string target;
  auto m = response(q, {{5, value, ""}});
  REQUIRE(read(m, q, &target) == CnameInMessage::kFound);

  // The header counts two answers; the message holds one.
  auto counted = m;
  counted[7] = 2;
  CHECK(read(counted, q, &target) == CnameInMessage::kMalformed);
  // Or an authority or additional record it does not hold.
  for (size_t count_at : {size_t{9}, size_t{11}}) {
    CAPTURE(count_at);
    auto more = m;
    more[count_at] = 1;
    CHECK(read(more, q, &target) == CnameInMessage::kMalformed);
  }

  // A second answer whose owner name is a compression pointer to itself.
  auto loop = m;
  loop[7] = 2;
  const size_t at = loop.size();
  const std::vector<unsigned char> looping = {static_cast<unsigned char>(0xc0 | (at >> 8)),
                                              static_cast<unsigned char>(at & 0xff),
                                              0,
                                              1,
                                              0,
                                              1,
                                              0,
                                              0,
                                              0,
                                              60,
                                              0,
                                              4,
                                              127,
                                              0,
                                              0,
                                              1};  // type A, class IN, TTL 60, 4 bytes
  loop.insert(loop.end(), looping.begin(), looping.end());
  CHECK(read(loop, q, &target) == CnameInMessage::kMalformed);

  // Whole records after it, in every section, are read through and change nothing.
  auto whole = response(q, {{5, value, ""}, {1, "", "other.example"}});
  whole[7] = 1;   // one answer,
  whole[11] = 1;  // then an additional record
  target.clear();
  REQUIRE(read(whole, q, &target) == CnameInMessage::kFound);
  CHECK(target == value);
}

TEST_CASE("a reply's question is the name asked only letter for letter") {
  const std::string asked = "_GaTeway-veRify.sHop.example.COM";
  auto m = response(asked, {{5, "gv-1.verify.platform.test", ""}});
  auto n = [](const std::vector<unsigned char>& v) { return static_cast<int>(v.size()); };
  CHECK(question_is(m.data(), n(m), asked));
  CHECK(question_is(m.data(), n(m), asked + "."));
  CHECK_FALSE(question_is(m.data(), n(m), "_gateway-verify.shop.example.com"));
  CHECK_FALSE(question_is(m.data(), n(m), "_GaTeway-veRify.sHop.example.CO"));
  CHECK_FALSE(question_is(m.data(), n(m), ""));
  CHECK_FALSE(question_is(m.data(), 14, asked));  // cut inside the name
  CHECK_FALSE(question_is(nullptr, 0, asked));
  auto two = m;
  two[5] = 2;  // QDCOUNT 2
  CHECK_FALSE(question_is(two.data(), n(two), asked));
  auto none = m;
  none[5] = 0;
  CHECK_FALSE(question_is(none.data(), n(none), asked));
}

TEST_CASE("CNAME targets compare without case and one trailing dot") {
  CHECK(same_dns_name("GV-1.Verify.Platform.Test.", "gv-1.verify.platform.test"));
  CHECK(same_dns_name("gv-1.verify.platform.test", "gv-1.verify.platform.test."));
  CHECK_FALSE(same_dns_name("gv-1.verify.platform.test..", "gv-1.verify.platform.test"));
  CHECK_FALSE(same_dns_name("gv-2.verify.platform.test", "gv-1.verify.platform.test"));
  CHECK_FALSE(same_dns_name("", "gv-1.verify.platform.test"));
}

}  // namespace
}  // namespace gw
