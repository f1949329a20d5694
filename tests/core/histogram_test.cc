#include <doctest/doctest.h>

#include <sstream>

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
  CHECK(text.find("x_seconds_sum{route=\"get\"} 10.0034\n") != std::string::npos);
  CHECK(text.find("x_seconds_count{route=\"get\"} 3\n") != std::string::npos);
  std::ostringstream bare;
  h.render(bare, "y", "");
  CHECK(bare.str().find("y_bucket{le=\"+Inf\"} 3\ny_sum 10.0034\ny_count 3\n") !=
        std::string::npos);
}

}  // namespace
}  // namespace gw
