// Durability: SIGKILL gatewayd under load; every create it acknowledged must survive a restart
// byte-for-byte (same JSON, same ETag).
#include <atomic>
#include <chrono>
#include <map>
#include <thread>

#include "integration/fixture.h"

namespace gw::itest {
namespace {

struct Acked {
  const Kind* kind;
  std::string team;
  std::string id;
  std::string body;
  std::string etag;
};

struct Worker {
  std::vector<Acked> acked;
  size_t transport_errors = 0;
  long unexpected_status = 0;  // first status other than 201 (0 = none)
  std::string unexpected_body;
};

std::string crash_body(const Kind& kind, std::string_view team, int thread, int n) {
  std::string tag = "c" + std::to_string(thread) + "-" + std::to_string(n);
  if (&kind == &kProfile) return profile_body(team, tag + ".crash-profiles.example.com");
  if (&kind == &kDomain) return domain_body(team, tag + ".crash-domains.example.com");
  return webhook_body(team, "crash-" + tag);
}

void load(const Server& server, int thread, const std::atomic<bool>& stop, Worker* out) {
  std::string_view team = thread % 2 == 0 ? kTeamA : kTeamB;
  Api api(server, team);
  for (int n = 0; !stop.load(); ++n) {
    const Kind& kind = *kKinds[static_cast<size_t>(n) % 3];
    Response r = api.post(std::string(kind.path), crash_body(kind, team, thread, n));
    if (r.status == 201) {
      out->acked.push_back(Acked{&kind, std::string(team), str(json(r), kind.id_field), r.body,
                                 r.header("ETag").value_or("")});
    } else if (r.status == 0) {
      ++out->transport_errors;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    } else if (out->unexpected_status == 0) {
      out->unexpected_status = r.status;
      out->unexpected_body = r.body;
    }
  }
}

TEST_CASE("SIGKILL under load loses no acknowledged create") {
  Server server;
  constexpr int kThreads = 8;
  std::atomic<bool> stop{false};
  std::vector<Worker> workers(kThreads);
  std::vector<std::thread> pool;
  for (int t = 0; t < kThreads; ++t) {
    pool.emplace_back(load, std::cref(server), t, std::cref(stop),
                      &workers[static_cast<size_t>(t)]);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  testing::ExitStatus killed = server.kill();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the load runs on into the void
  stop = true;
  for (auto& th : pool) th.join();
  CHECK(killed.signal == SIGKILL);

  size_t acked = 0;
  size_t errors = 0;
  for (const Worker& w : workers) {
    INFO("unexpected response under load: ", w.unexpected_status, " ", w.unexpected_body);
    CHECK(w.unexpected_status == 0);
    acked += w.acked.size();
    errors += w.transport_errors;
  }
  MESSAGE("acknowledged creates before SIGKILL: ", acked, " (failed exchanges after it: ", errors,
          ")");
  REQUIRE(acked > 0);
  CHECK(errors > 0);

  server.restart();
  Api a(server, kTeamA);
  Api b(server, kTeamB);
  size_t lost = 0;
  size_t changed = 0;
  std::string first_problem;
  std::map<std::pair<std::string, const Kind*>, int64_t> per_list;
  for (const Worker& w : workers) {
    for (const Acked& rec : w.acked) {
      ++per_list[{rec.team, rec.kind}];
      Api& api = rec.team == kTeamA ? a : b;
      Response r = api.get(item_path(*rec.kind, rec.id));
      bool same = r.status == 200 && json(r) == testing::parse_json(rec.body) &&
                  r.header("ETag").value_or("") == rec.etag;
      if (same) continue;
      ++(r.status == 200 ? changed : lost);
      if (first_problem.empty()) {
        first_problem = item_path(*rec.kind, rec.id) + " acknowledged as " + rec.etag + " " +
                        rec.body + "; after restart " + std::to_string(r.status) + " " +
                        r.header("ETag").value_or("") + " " + r.body;
      }
    }
  }
  INFO("first problem: ", first_problem);
  CHECK(lost == 0);
  CHECK(changed == 0);
  for (const auto& [key, count] : per_list) {
    CAPTURE(key.first);
    CAPTURE(key.second->name);
    Api& api = key.first == kTeamA ? a : b;
    int64_t total = num(field(json(api.get(std::string(key.second->path))), "pagination"), "total");
    CHECK(total >= count);
  }
  Response fresh = a.post("/v1/webhook", webhook_body(kTeamA, "after-crash"));
  CHECK(fresh.status == 201);
}

}  // namespace
}  // namespace gw::itest
