#include "core/fair_pool.h"

#include <doctest/doctest.h>

#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace gw {
namespace {

// A pool of one thread held by a job of owner "a" until `release` is set; `order` gets each later
// job's name as it runs.
struct HeldPool {
  std::promise<void> started, release;
  std::mutex mu;
  std::vector<std::string> order;
  std::unique_ptr<FairPool> pool = std::make_unique<FairPool>("test-pool", 1, 4);

  HeldPool() {
    std::shared_future<void> go = release.get_future().share();
    REQUIRE(pool->post("a", [this, go] {
      started.set_value();
      go.wait();
    }));
    started.get_future().wait();
  }
  bool post(const std::string& owner, const std::string& name) {
    return pool->post(owner, [this, name] {
      std::lock_guard<std::mutex> lock(mu);
      order.push_back(name);
    });
  }
};

TEST_CASE("a fair pool's jobs take turns by owner, each owner's in the order posted") {
  std::vector<std::string> order;
  {
    HeldPool held;
    for (const char* name : {"a1", "a2", "a3", "a4"}) REQUIRE(held.post("a", name));
    REQUIRE(held.post("b", "b1"));
    REQUIRE(held.post("c", "c1"));
    REQUIRE(held.post("b", "b2"));
    held.release.set_value();
    while (held.pool->counts().waiting + held.pool->counts().running > 0) std::this_thread::yield();
    std::lock_guard<std::mutex> lock(held.mu);
    order = held.order;
  }
  // Owner a's four came first, yet b and c wait one of a's jobs, not four.
  CHECK(order == std::vector<std::string>{"a1", "b1", "c1", "a2", "b2", "a3", "a4"});
}

TEST_CASE("a fair pool refuses a post whose owner has the most waiting, and no other owner's") {
  HeldPool held;
  for (int i = 0; i < 4; ++i) CHECK(held.post("a", "a" + std::to_string(i)));
  CHECK_FALSE(held.post("a", "a4"));  // four waiting; the running one does not count
  CHECK(held.post("b", "b0"));
  FairPool::Counts c = held.pool->counts();
  CHECK(c.running == 1);
  CHECK(c.waiting == 5);
  CHECK(c.refused == 1);
  held.release.set_value();
}

TEST_CASE("a fair pool runs every job still waiting before its destruction ends") {
  std::vector<std::string> order;
  {
    HeldPool held;
    for (const char* name : {"a1", "a2", "a3"}) REQUIRE(held.post("a", name));
    held.release.set_value();
    held.pool.reset();  // at once: what waits still runs
    order = held.order;
  }
  CHECK(order == std::vector<std::string>{"a1", "a2", "a3"});
}

}  // namespace
}  // namespace gw
