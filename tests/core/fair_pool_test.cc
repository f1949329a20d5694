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
// job's name as it runs, or its name and " cancelled" when it does not.
struct HeldPool {
  std::promise<void> started, release;
  std::mutex mu;
  std::vector<std::string> order;
  std::unique_ptr<FairPool> pool = std::make_unique<FairPool>("test-pool", 1, 4);

  HeldPool() {
    std::shared_future<void> go = release.get_future().share();
    REQUIRE(pool->post("a", [this, go](bool) {
      started.set_value();
      go.wait();
    }));
    started.get_future().wait();
  }
  bool post(const std::string& owner, const std::string& name) {
    return pool->post(owner, [this, name](bool run) {
      std::lock_guard<std::mutex> lock(mu);
      order.push_back(run ? name : name + " cancelled");
    });
  }
  std::vector<std::string> seen() {
    std::lock_guard<std::mutex> lock(mu);
    return order;
  }
};

TEST_CASE("a fair pool's jobs take turns by owner, each owner's in the order posted") {
  HeldPool held;
  for (const char* name : {"a1", "a2", "a3", "a4"}) REQUIRE(held.post("a", name));
  REQUIRE(held.post("b", "b1"));
  REQUIRE(held.post("c", "c1"));
  REQUIRE(held.post("b", "b2"));
  held.release.set_value();
  while (held.pool->counts().waiting + held.pool->counts().running > 0) std::this_thread::yield();
  // Owner a's four came first, yet b and c wait one of a's jobs, not four.
  CHECK(held.seen() == std::vector<std::string>{"a1", "b1", "c1", "a2", "b2", "a3", "a4"});
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

// gatewayd stops its pool of WAF checks when it drains: the writes still waiting are told so (a
// 503), those being checked finish. Before, nothing stopped it, and checks that ended after main
// returned used the sandbox it had destroyed.
TEST_CASE("a fair pool's stop cancels what waits, waits for what runs, and cancels later posts") {
  HeldPool held;
  for (const char* name : {"a1", "a2"}) REQUIRE(held.post("a", name));
  REQUIRE(held.post("b", "b1"));
  std::thread stopper([&] { held.pool->stop(); });
  // The waiting jobs are cancelled at once, the running one still holding the only thread.
  while (held.seen().size() < 3) std::this_thread::yield();
  CHECK(held.seen() == std::vector<std::string>{"a1 cancelled", "b1 cancelled", "a2 cancelled"});
  CHECK(held.pool->counts().running == 1);
  held.release.set_value();
  stopper.join();  // returned once the running job ended
  CHECK(held.pool->counts().running == 0);
  CHECK(held.post("c", "c1"));
  CHECK(held.seen().back() == "c1 cancelled");
  held.pool->stop();  // again: returns at once
  held.pool.reset();
  CHECK(held.seen().size() == 4);
}

}  // namespace
}  // namespace gw
