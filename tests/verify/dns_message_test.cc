// Reading CNAME answers from DNS wire-format messages, and comparing names.
#include <doctest/doctest.h>

#include <vector>

#include "verify/resolver.h"
#include "verify/verifier.h"

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

// A response to a CNAME query for `qname` with the given answers (type, rdata name).
std::vector<unsigned char> response(const std::string& qname,
                                    const std::vector<std::pair<int, std::string>>& answers) {
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
  for (const auto& [type, target] : answers) {
    m.push_back(0xc0);  // compressed pointer to the question name at offset 12
    m.push_back(12);
    put16(&m, type);
    put16(&m, 1);
    put16(&m, 0);
    put16(&m, 60);
    std::vector<unsigned char> rdata;
    if (type == 1) {
      rdata = {127, 0, 0, 1};
    } else {
      put_name(&rdata, target);
    }
    put16(&m, static_cast<int>(rdata.size()));
    m.insert(m.end(), rdata.begin(), rdata.end());
  }
  return m;
}

TEST_CASE("the first CNAME answer is read, compressed owner names included") {
  auto m = response("_gateway-verify.shop.example.com", {{5, "gv-1.verify.platform.test"}});
  std::string target;
  REQUIRE(first_cname_target(m.data(), static_cast<int>(m.size()), &target));
  CHECK(target == "gv-1.verify.platform.test");
}

TEST_CASE("an answer without a CNAME, or a truncated message, yields none") {
  auto a_only = response("x.example.com", {{1, ""}});
  std::string target;
  CHECK_FALSE(first_cname_target(a_only.data(), static_cast<int>(a_only.size()), &target));
  auto m = response("x.example.com", {{5, "t.example.net"}});
  for (size_t cut : {size_t{0}, size_t{5}, size_t{20}, m.size() - 3}) {
    CAPTURE(cut);
    CHECK_FALSE(first_cname_target(m.data(), static_cast<int>(cut), &target));
  }
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
