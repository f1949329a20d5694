// Helpers for tests that drive the Service on a real Writer.
#pragma once

#include <doctest/doctest.h>

#include <cstddef>
#include <functional>
#include <future>
#include <string>
#include <vector>

#include "service/service.h"

namespace gw::testing {

// Makes one Service call, `submit(done)`, and waits for its answer.
template <typename Submit>
Result<Written> call_one(Submit submit) {
  std::promise<Result<Written>> answer;
  auto got = answer.get_future();
  submit([&answer](Result<Written> r) { answer.set_value(std::move(r)); });
  return got.get();
}

// Makes the Service calls `call(i, done)` for i in [0, n) at once (they share the writer's
// batches, in call order) and waits for every answer; each must succeed. Returns the records'
// ids, in call order (the first member of each answer's JSON).
inline std::vector<std::string> call_all(size_t n, const std::function<void(size_t, Done)>& call) {
  std::vector<std::promise<Result<Written>>> done(n);
  for (size_t i = 0; i < n; ++i) {
    call(i, [&p = done[i]](Result<Written> r) { p.set_value(std::move(r)); });
  }
  std::vector<std::string> ids;
  for (auto& p : done) {
    auto r = p.get_future().get();
    REQUIRE(r.ok());
    const std::string& json = r.value().json;
    const size_t at = json.find(":\"") + 2;  // {"<kind>_id":"<30 characters>"
    ids.push_back(json.substr(at, 30));
  }
  return ids;
}

}  // namespace gw::testing
