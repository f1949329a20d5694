// The dnsmasq harness itself (tests/support/dnsmasq.h): what the verification tests rely on it to
// serve, checked with a raw DNS query, no gatewayd involved.
#include <doctest/doctest.h>

#include <chrono>
#include <string>

#include "support/dnsmasq.h"

namespace gw::testing {
namespace {

using std::chrono::milliseconds;

TEST_CASE("dnsmasq harness: CNAME, A, NXDOMAIN, raw case, SERVFAIL, pause, stop, restart") {
  ServfailZone servfail("servfail.example.net");
  Dnsmasq dns;
  DnsRecords records;
  records.cname("_gateway-verify.shop.example.com", "gv-0123.verify.platform.test")
      .cname("_gateway-verify.upper.example.com", "GV-Upper.Verify.Platform.Test.")
      .raw_cname("_gateway-verify.raw.example.com", "GV-Raw.Verify.Platform.Test")
      .host("_gateway-verify.a-only.example.com", "127.0.0.2");
  records.extra.push_back(servfail.forward_line());
  dns.start(records);
  INFO(dns.output());
  REQUIRE(dns.port() > 0);
  CHECK(dns.server() == "127.0.0.1:" + std::to_string(dns.port()));

  DnsAnswer a = dns_query(dns.port(), "_gateway-verify.shop.example.com");
  INFO(describe(a));
  CHECK(a.status == DnsAnswer::Status::kAnswered);
  CHECK(a.rcode == 0);
  REQUIRE(a.cnames.size() == 1);
  CHECK(a.cnames[0] == "gv-0123.verify.platform.test");

  // The target is unknown to dnsmasq; a query for A still gets the CNAME alone.
  a = dns_query(dns.port(), "_gateway-verify.shop.example.com", kDnsTypeA);
  CHECK(a.rcode == 0);
  CHECK(a.cnames == std::vector<std::string>{"gv-0123.verify.platform.test"});

  // dnsmasq lower-cases `cname=` targets and drops the dot; `dns-rr` keeps the bytes.
  a = dns_query(dns.port(), "_gateway-verify.upper.example.com");
  CHECK(a.cnames == std::vector<std::string>{"gv-upper.verify.platform.test"});
  a = dns_query(dns.port(), "_gateway-verify.raw.example.com");
  CHECK(a.rcode == 0);
  CHECK(a.cnames == std::vector<std::string>{"GV-Raw.Verify.Platform.Test"});

  a = dns_query(dns.port(), "_gateway-verify.a-only.example.com");
  CHECK(a.rcode == 0);
  CHECK(a.cnames.empty());
  a = dns_query(dns.port(), "_gateway-verify.a-only.example.com", kDnsTypeA);
  CHECK(a.addresses == std::vector<std::string>{"127.0.0.2"});

  a = dns_query(dns.port(), "_gateway-verify.nobody.example.com");
  CHECK(a.status == DnsAnswer::Status::kAnswered);
  CHECK(a.rcode == 3);

  a = dns_query(dns.port(), "_gateway-verify.x.servfail.example.net", kDnsTypeCname,
                milliseconds(3000));
  INFO(describe(a), "\n", dns.output());
  CHECK(a.status == DnsAnswer::Status::kAnswered);
  CHECK(a.rcode == 2);

  dns.pause();
  a = dns_query(dns.port(), "_gateway-verify.shop.example.com", kDnsTypeCname, milliseconds(300));
  CHECK(a.status == DnsAnswer::Status::kTimedOut);
  dns.resume();
  a = dns_query(dns.port(), "_gateway-verify.shop.example.com");
  CHECK(a.cnames.size() == 1);

  int port = dns.port();
  dns.restart(DnsRecords{}.cname("_gateway-verify.shop.example.com", "changed.example.org"));
  CHECK(dns.port() == port);
  a = dns_query(dns.port(), "_gateway-verify.shop.example.com");
  CHECK(a.cnames == std::vector<std::string>{"changed.example.org"});

  dns.stop();
  CHECK_FALSE(dns.running());
  a = dns_query(port, "_gateway-verify.shop.example.com");
  CHECK(a.status == DnsAnswer::Status::kRefused);

  // A stopped dnsmasq can be started again on its port, paused or not when destroyed.
  dns.start(DnsRecords{}.cname("_gateway-verify.shop.example.com", "again.example.org"));
  CHECK(dns.port() == port);
  CHECK(dns_query(port, "_gateway-verify.shop.example.com").cnames ==
        std::vector<std::string>{"again.example.org"});
  dns.pause();
}

TEST_CASE("dnsmasq harness: a thousand records from the conf file") {
  Dnsmasq dns;
  DnsRecords records;
  for (int i = 0; i < 1000; ++i) {
    records.cname("_gateway-verify.bench-" + std::to_string(i) + ".example.net",
                  "gv-" + std::to_string(i) + ".verify.platform.test");
  }
  dns.start(records);
  for (int i : {0, 499, 999}) {
    DnsAnswer a =
        dns_query(dns.port(), "_gateway-verify.bench-" + std::to_string(i) + ".example.net");
    CHECK(a.cnames ==
          std::vector<std::string>{"gv-" + std::to_string(i) + ".verify.platform.test"});
  }
}

TEST_CASE("dnsmasq harness: two instances get different ports") {
  Dnsmasq one;
  Dnsmasq two;
  one.start();
  two.start();
  CHECK(one.port() != two.port());
}

}  // namespace
}  // namespace gw::testing
