#include <doctest/doctest.h>

#include <atomic>
#include <sstream>
#include <string>
#include <thread>

#include "core/histogram.h"

namespace gw {
namespace {

TEST_CASE("a latency histogram renders cumulative buckets, +Inf, sum and count") {
  LatencyHistogram h;
  h.observe(0.0004);  // first bucket
  h.observe(0.003);   // le=0.005
  h.observe(10.0);    // only +Inf
  std::ostringstream labelled;
  h.render(labelled, "x_seconds", "route=\"get\"");
  const std::string text = labelled.str();
  CHECK(text.find("x_seconds_bucket{route=\"get\",le=\"0.0005\"} 1\n") != std::string::npos);
  CHECK(text.find("x_seconds_bucket{route=\"get\",le=\"0.0025\"} 1\n") != std::string::npos);
  CHECK(text.find("x_seconds_bucket{route=\"get\",le=\"0.005\"} 2\n") != std::string::npos);
  CHECK(text.find("x_seconds_bucket{route=\"get\",le=\"2.5\"} 2\n") != std::string::npos);
  CHECK(text.find("x_seconds_bucket{route=\"get\",le=\"+Inf\"} 3\n") != std::string::npos);
  CHECK(text.find("x_seconds_sum{route=\"get\"} 10.003400\n") != std::string::npos);
  CHECK(text.find("x_seconds_count{route=\"get\"} 3\n") != std::string::npos);
  std::ostringstream bare;
  h.render(bare, "y", "");
  CHECK(bare.str().find("y_bucket{le=\"+Inf\"} 3\ny_sum 10.003400\ny_count 3\n") !=
        std::string::npos);
}

// rate(_sum) / rate(_count) is the mean latency: the sum must keep every microsecond however
// long the server has run, not six significant digits (1.23457e+06 after two weeks of seconds).
TEST_CASE("a histogram's sum is written to the microsecond, however large") {
  LatencyHistogram h;
  h.observe(1234567.891234);
  h.observe(0.000001);
  std::ostringstream out;
  h.render(out, "x", "");
  CHECK(out.str().find("\nx_sum 1234567.891235\n") != std::string::npos);
  LatencyHistogram small;
  small.observe(0.25);
  std::ostringstream out_small;
  small.render(out_small, "y", "");
  CHECK(out_small.str().find("\ny_sum 0.250000\n") != std::string::npos);
}

// Prometheus requires the +Inf bucket to equal _count in every scrape; observe() updates the
// bucket and the count one after the other, so a render must not read them separately.
TEST_CASE("a histogram rendered while it is observed has a +Inf bucket equal to its count") {
  LatencyHistogram h;
  std::atomic<bool> stop{false};
  std::thread observer([&] {
    while (!stop.load(std::memory_order_relaxed)) h.observe(0.003);
  });
  int torn = 0;
  for (int i = 0; i < 2000; ++i) {
    std::ostringstream out;
    h.render(out, "x", "");
    const std::string text = out.str();
    const auto inf = text.find("x_bucket{le=\"+Inf\"} ");
    const auto count = text.find("x_count ");
    REQUIRE(inf != std::string::npos);
    REQUIRE(count != std::string::npos);
    const auto value = [&](size_t at) {
      return std::stoull(text.substr(text.find(' ', at) + 1));
    };
    if (value(inf) != value(count)) ++torn;
  }
  stop = true;
  observer.join();
  CHECK(torn == 0);
}

}  // namespace
}  // namespace gw
