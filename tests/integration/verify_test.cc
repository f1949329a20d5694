// Domain verification end to end: the real gatewayd asks a real dnsmasq (tests/support/dnsmasq.h)
// for the CNAME of each domain's verification_hostname. Outcomes are read from the event feed with
// a deadline, never after a fixed sleep; "nothing more happened" is checked behind a barrier (a
// later verification of another domain whose outcome has arrived).
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <thread>

#include "integration/fixture.h"
#include "support/dnsmasq.h"

namespace gw::itest::verify_test {
namespace {

using testing::Dnsmasq;
using testing::DnsRecords;
using testing::json_with;
using testing::ServfailZone;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr std::string_view kRequested = "domain.verification_requested";
constexpr std::string_view kVerified = "domain.verified";
constexpr std::string_view kFailed = "domain.verification_failed";
constexpr std::string_view kSuperseded = "domain.verification_superseded";
constexpr std::string_view kInherited = "domain.verification_inherited";
constexpr std::string_view kRevoked = "domain.verification_revoked";

constexpr milliseconds kDeadline{10000};
constexpr milliseconds kStep{50};

bool is_outcome(std::string_view type) {
  return type == kVerified || type == kFailed || type == kSuperseded;
}

// One event of the feed, with the members these tests look at.
struct Event {
  int64_t seq = -1;
  std::string type;
  std::string aggregate_id;
  int64_t caused_by = -1;  // -1 when the member is absent
  int64_t aggregate_version = -1;
  std::string status;  // data.status and friends
  int64_t verified_at = -1;
  std::string error;
  std::string parent_id;
  std::string text;  // the whole event, for messages
};

using Events = std::vector<Event>;

std::string dump(const Events& events) {
  std::string out;
  for (const auto& e : events) out += e.text + "\n";
  return out;
}

// Every event of the api's tenant (fixture's all_events), with the members these tests look at.
Events feed(Api& api) {
  Events out;
  for (const std::string& text : all_events(api)) {
    rapidjson::Document v;
    v.Parse(text.c_str());
    Event e;
    e.seq = num(v, "seq");
    e.type = str(v, "type");
    e.aggregate_id = str(v, "aggregate_id");
    e.caused_by = num(v, "caused_by");
    e.aggregate_version = num(v, "aggregate_version");
    const rapidjson::Value& rec = field(v, "data");
    e.status = str(rec, "status");
    e.verified_at = num(rec, "verified_at");
    e.error = str(rec, "verification_error");
    e.parent_id = str(rec, "verification_parent_id");
    e.text = text;
    out.push_back(std::move(e));
  }
  return out;
}

// The events of `id`, optionally only those of `type`.
Events of(const Events& events, std::string_view id, std::string_view type = "") {
  Events out;
  for (const auto& e : events) {
    if (e.aggregate_id == id && (type.empty() || e.type == type)) out.push_back(e);
  }
  return out;
}

Events outcomes_of(const Events& events, std::string_view id) {
  Events out;
  for (const auto& e : of(events, id)) {
    if (is_outcome(e.type)) out.push_back(e);
  }
  return out;
}

// Polls the feed until `done(events)` or the deadline; returns the last feed read. A timeout fails
// the check with the feed and `what`.
Events wait_until(Api& api, const std::function<bool(const Events&)>& done, std::string_view what) {
  auto deadline = Clock::now() + kDeadline;
  while (true) {
    Events events = feed(api);
    if (done(events)) return events;
    if (Clock::now() >= deadline) {
      FAIL_CHECK("timed out waiting for ", what, "; events:\n", dump(events));
      return events;
    }
    std::this_thread::sleep_for(kStep);
  }
}

// Waits until `id` has at least `n` outcome events; returns the feed.
Events wait_outcomes(Api& api, const std::string& id, size_t n = 1) {
  return wait_until(
      api, [&](const Events& ev) { return outcomes_of(ev, id).size() >= n; },
      std::to_string(n) + " outcome(s) of " + id);
}

Events wait_event(Api& api, const std::string& id, std::string_view type, size_t n = 1) {
  return wait_until(
      api, [&](const Events& ev) { return of(ev, id, type).size() >= n; },
      std::to_string(n) + " " + std::string(type) + " event(s) of " + id);
}

struct Domain {
  std::string id;
  std::string hostname;
  std::string vhost;   // verification_hostname
  std::string vvalue;  // verification_value
};

Domain create_domain(Api& api, std::string_view hostname) {
  Response r = api.post("/v1/domain", domain_body(api.team(), hostname));
  INFO("create domain ", hostname, ": ", r.status, " ", r.body, r.error);
  REQUIRE(r.status == 201);
  rapidjson::Document d = json(r);
  Domain out{str(d, "domain_id"), str(d, "hostname"), str(d, "verification_hostname"),
             str(d, "verification_value")};
  CHECK(out.vhost == "_gateway-verify." + out.hostname);
  CHECK_FALSE(out.vvalue.empty());
  return out;
}

rapidjson::Document get_domain(Api& api, const std::string& id) {
  Response r = api.get("/v1/domain/" + id);
  INFO("GET domain ", id, ": ", r.status, " ", r.body);
  CHECK(r.status == 200);
  return json(r);
}

// POST verify; expects 200 and the domain itself back.
rapidjson::Document request_verify(Api& api, const Domain& d) {
  Response r = verify(api, d.id);
  INFO("verify ", d.hostname, ": ", r.status, " ", r.body, r.error);
  CHECK(r.status == 200);
  rapidjson::Document doc = json(r);
  CHECK(str(doc, "domain_id") == d.id);
  return doc;
}

// The seq of the last verification_requested event of `id`; -1 if none.
int64_t last_request_seq(const Events& events, const std::string& id) {
  Events req = of(events, id, kRequested);
  return req.empty() ? -1 : req.back().seq;
}

// `id` has exactly one request and one outcome, of `type`, caused by that request. Returns the
// outcome (or an empty Event).
Event single_outcome(const Events& events, const std::string& id, std::string_view type) {
  INFO("events:\n", dump(events));
  Events req = of(events, id, kRequested);
  Events out = outcomes_of(events, id);
  CHECK(req.size() == 1);
  REQUIRE(out.size() == 1);
  CHECK(out[0].type == type);
  if (!req.empty()) {
    CHECK(out[0].caused_by == req[0].seq);
    CHECK(out[0].seq > req[0].seq);
  }
  return out[0];
}

// A verified domain, as an event's data and as GET shows it now.
void check_verified(Api& api, const Event& e, const std::string& id,
                    const std::string& parent = "") {
  INFO("event: ", e.text);
  CHECK(e.status == "verified");
  CHECK(e.verified_at >= unix_now() - 300);
  CHECK(e.error == "");
  CHECK(e.parent_id == parent);
  rapidjson::Document now = get_domain(api, id);
  INFO("now: ", testing::to_json(now));
  CHECK(str(now, "status") == "verified");
  CHECK(num(now, "verified_at") == e.verified_at);
  CHECK(str(now, "verification_error") == "");
  CHECK(str(now, "verification_parent_id") == parent);
}

// A failed verification with `code`: pending, verified_at 0, "<code>: <detail>".
void check_failed(Api& api, const Event& e, const std::string& id, std::string_view code) {
  INFO("event: ", e.text);
  CHECK(e.type == kFailed);
  CHECK(e.status == "pending");
  CHECK(e.verified_at == 0);
  CHECK(e.parent_id == "");
  CHECK(e.error.starts_with(std::string(code) + ": "));
  CHECK(e.error.size() > code.size() + 2);
  rapidjson::Document now = get_domain(api, id);
  CHECK(str(now, "status") == "pending");
  CHECK(num(now, "verified_at") == 0);
  CHECK(str(now, "verification_error") == e.error);
}

// Pending with no trace of a verification (created, or revoked).
void check_plain_pending(const rapidjson::Value& d) {
  INFO(testing::to_json(d));
  CHECK(str(d, "status") == "pending");
  CHECK(num(d, "verified_at") == 0);
  CHECK(str(d, "verification_parent_id") == "");
}

std::string lookups(std::string_view outcome) {
  return R"(gatewayd_verifier_lookups_total{outcome=")" + std::string(outcome) + R"("})";
}

std::string outcomes(std::string_view outcome) {
  return R"(gatewayd_verifier_outcomes_total{outcome=")" + std::string(outcome) + R"("})";
}

// /metrics once `holds` is true of it, or after 10 s.
std::string metrics_when(const Server& server,
                         const std::function<bool(const std::string&)>& holds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    std::string text = metrics(server);
    if (holds(text) || std::chrono::steady_clock::now() > deadline) return text;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// The verifier counts an outcome once its write is durable, which may be a moment after the event
// can be read. /metrics once each `series` is at least its value, or after 10 s.
std::string metrics_once(const Server& server,
                         const std::vector<std::pair<std::string, double>>& at_least) {
  return metrics_when(server, [&](const std::string& text) {
    return std::all_of(at_least.begin(), at_least.end(), [&](const auto& want) {
      return sample(text, want.first).value_or(-1) >= want.second;
    });
  });
}

// /metrics once the lookups waiting for a resolver slot are exactly `n`, or after 10 s. The count
// passes through other values on its way: the verifier can queue several lookups before the
// resolver's thread starts them.
std::string metrics_waiting(const Server& server, double n) {
  return metrics_when(server, [&](const std::string& text) {
    return sample(text, "gatewayd_verifier_lookups_waiting") == n;
  });
}

// Verifies `d` (whose record resolves to nothing) and waits for its outcome: after it, every
// outcome of requests made before has had its chance to arrive.
void barrier(Api& api, const Domain& d) {
  size_t before = outcomes_of(feed(api), d.id).size();
  request_verify(api, d);
  wait_outcomes(api, d.id, before + 1);
}

// A dnsmasq on a free port, and gatewayd asking it.
struct Env {
  explicit Env(std::vector<std::string> extra = {}) {
    dns.start();
    std::vector<std::string> args = {"--dns-servers", dns.server()};
    args.insert(args.end(), extra.begin(), extra.end());
    server = std::make_unique<Server>(args);
  }
  Dnsmasq dns;
  std::unique_ptr<Server> server;
};

// A new domain `host` whose correct CNAME the Env's dnsmasq now serves.
Domain publish(Env& env, Api& api, const std::string& host) {
  Domain d = create_domain(api, host);
  env.dns.restart(DnsRecords{}.cname(d.vhost, d.vvalue));
  return d;
}

TEST_CASE(
    "verify: verified, wrong_value, no_cname, nxdomain, servfail, case and dot of the target") {
  ServfailZone servfail("servfail.example.net");
  Env env;
  Api api(*env.server, kTeamA);
  Domain ok = create_domain(api, "ok.example.com");
  Domain wrong = create_domain(api, "wrong.example.com");
  Domain no_cname = create_domain(api, "a-only.example.com");
  Domain nx = create_domain(api, "nx.example.com");
  Domain sf = create_domain(api, "x.servfail.example.net");
  Domain upper = create_domain(api, "upper.example.com");
  Domain dotted = create_domain(api, "dotted.example.com");

  std::string upper_value = upper.vvalue;
  std::transform(upper_value.begin(), upper_value.end(), upper_value.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  DnsRecords records;
  records.cname(ok.vhost, ok.vvalue)
      .cname(wrong.vhost, "gv-00000000000000000000000000000000.verify.platform.test")
      .host(no_cname.vhost, "127.0.0.1")
      // dnsmasq normalizes `cname=` targets (lower case, no dot), so this checks the config form
      // end to end; the raw record below carries the upper-case bytes on the wire.
      .cname(dotted.vhost, dotted.vvalue + ".")
      .raw_cname(upper.vhost, upper_value);
  records.extra.push_back(servfail.forward_line());
  env.dns.restart(records);
  {
    auto a = testing::dns_query(env.dns.port(), upper.vhost);
    INFO(testing::describe(a));
    REQUIRE(a.cnames == std::vector<std::string>{upper_value});
  }

  for (const Domain* d : {&ok, &wrong, &no_cname, &nx, &sf, &upper, &dotted}) {
    rapidjson::Document r = request_verify(api, *d);
    CHECK(str(r, "status") == "pending");
  }
  Events events = wait_until(
      api,
      [&](const Events& ev) {
        for (const Domain* d : {&ok, &wrong, &no_cname, &nx, &sf, &upper, &dotted}) {
          if (outcomes_of(ev, d->id).empty()) return false;
        }
        return true;
      },
      "all seven outcomes");

  {
    INFO("ok");
    check_verified(api, single_outcome(events, ok.id, kVerified), ok.id);
  }
  {
    INFO("upper-case target");
    check_verified(api, single_outcome(events, upper.id, kVerified), upper.id);
  }
  {
    INFO("target configured with a trailing dot");
    check_verified(api, single_outcome(events, dotted.id, kVerified), dotted.id);
  }
  check_failed(api, single_outcome(events, wrong.id, kFailed), wrong.id, "wrong_value");
  check_failed(api, single_outcome(events, no_cname.id, kFailed), no_cname.id, "no_cname");
  check_failed(api, single_outcome(events, nx.id, kFailed), nx.id, "nxdomain");
  check_failed(api, single_outcome(events, sf.id, kFailed), sf.id, "servfail");

  // The verifier's series.
  std::string text = metrics_once(*env.server, {{outcomes("verified"), 3},
                                                {outcomes("wrong_value"), 1},
                                                {outcomes("no_cname"), 1},
                                                {outcomes("nxdomain"), 1},
                                                {outcomes("servfail"), 1}});
  INFO(text);
  CHECK(text.find("# TYPE gatewayd_verifier_queue_depth gauge") != std::string::npos);
  CHECK(sample(text, "gatewayd_verifier_queue_depth").has_value());
  CHECK(text.find("# TYPE gatewayd_verifier_lookups_waiting gauge") != std::string::npos);
  CHECK(sample(text, "gatewayd_verifier_lookups_waiting") == 0);  // all answered
  CHECK(text.find("# TYPE gatewayd_verifier_lookups_total counter") != std::string::npos);
  CHECK(sample(text, lookups("verified")).value_or(-1) >= 3);
  CHECK(sample(text, outcomes("verified")).value_or(-1) >= 3);
  for (std::string outcome : {"wrong_value", "no_cname", "nxdomain", "servfail"}) {
    CAPTURE(outcome);
    CHECK(sample(text, lookups(outcome)).value_or(-1) >= 1);
    CHECK(sample(text, outcomes(outcome)).value_or(-1) >= 1);
  }
  CHECK(text.find("# TYPE gatewayd_verifier_lookup_duration_seconds histogram") !=
        std::string::npos);
  CHECK(sample(text, "gatewayd_verifier_lookup_duration_seconds_count").value_or(-1) >= 7);
  CHECK(
      sample(text, R"(gatewayd_verifier_lookup_duration_seconds_bucket{le="+Inf"})").value_or(-1) >=
      7);
  CHECK(sample(text, "gatewayd_verifier_lookup_duration_seconds_sum").has_value());
}

// Requests verification of `d` while dnsmasq is paused, checks that the one outcome is a timeout,
// and returns how long it took to arrive.
milliseconds verify_with_dns_paused(Env& env, Api& api, const Domain& d) {
  env.dns.pause();
  auto asked = Clock::now();
  request_verify(api, d);
  Events events = wait_outcomes(api, d.id);
  auto waited = std::chrono::duration_cast<milliseconds>(Clock::now() - asked);
  env.dns.resume();
  check_failed(api, single_outcome(events, d.id, kFailed), d.id, "timeout");
  return waited;
}

TEST_CASE("verify: a silent DNS server is a timeout, a dead one unreachable") {
  Env env;
  Api api(*env.server, kTeamA);
  Domain d = publish(env, api, "slow.example.com");

  // --dns-timeout-ms 500 and --dns-tries 2 by default: about 1.5 s.
  CHECK(verify_with_dns_paused(env, api, d) >= milliseconds(900));

  env.dns.stop();
  // The request changes the version only: its answer still shows the last failure, and the
  // outcome moves the ETag on from the answer's (README, Domain verification).
  Response asked = verify(api, d.id);
  REQUIRE(asked.status == 200);
  CHECK(str(json(asked), "verification_error").starts_with("timeout: "));
  REQUIRE(asked.header("ETag"));
  Events events = wait_outcomes(api, d.id, 2);
  CHECK(api.get("/v1/domain/" + d.id).header("ETag") != asked.header("ETag"));
  Events out = outcomes_of(events, d.id);
  REQUIRE(out.size() == 2);
  CHECK(out[1].caused_by == last_request_seq(events, d.id));
  INFO("the outcome with dnsmasq killed: ", out[1].error);
  MESSAGE("dnsmasq killed -> ", out[1].error);
  CHECK(out[1].error.starts_with("unreachable: "));
  check_failed(api, out[1], d.id, "unreachable");

  // Once DNS answers again, a new request verifies and clears the error.
  env.dns.start(DnsRecords{}.cname(d.vhost, d.vvalue));
  request_verify(api, d);
  events = wait_outcomes(api, d.id, 3);
  out = outcomes_of(events, d.id);
  REQUIRE(out.size() == 3);
  CHECK(out[2].type == kVerified);
  CHECK(out[2].caused_by == last_request_seq(events, d.id));
  check_verified(api, out[2], d.id);

  std::string text = metrics(*env.server);
  CHECK(sample(text, lookups("timeout")).value_or(-1) >= 1);
  CHECK(sample(text, lookups("unreachable")).value_or(-1) >= 1);
}

TEST_CASE("verify: --dns-timeout-ms and --dns-tries bound the wait on a silent server") {
  Env env({"--dns-timeout-ms", "100", "--dns-tries", "1"});
  Api api(*env.server, kTeamA);
  Domain d = create_domain(api, "quick.example.com");
  verify_with_dns_paused(env, api, d);
  // The lookup's own time as the verifier measured it, from its start to the timeout: the test's
  // clock also held the request's and the outcome's fsyncs and the polling of the feed, which
  // passed a second on a loaded machine. The histogram is observed before the outcome is written.
  const std::optional<double> took =
      sample(metrics(*env.server), "gatewayd_verifier_lookup_duration_seconds_sum");
  REQUIRE(took.has_value());
  CHECK(*took >= 0.09);
  CHECK(*took < 1.0);
}

TEST_CASE("verify: a request accepted before a crash is checked after restart") {
  Env env;
  Api api(*env.server, kTeamA);
  Domain d = publish(env, api, "durable.example.com");
  Domain other = create_domain(api, "other.example.com");  // no record: for barrier()

  env.dns.pause();
  request_verify(api, d);
  // The lookup hangs on the paused dnsmasq (1.5 s before it could time out).
  testing::ExitStatus killed = env.server->kill();
  CHECK(killed.signal == SIGKILL);
  env.dns.resume();
  env.server->restart();

  Events events = wait_outcomes(api, d.id);
  barrier(api, other);
  events = feed(api);
  INFO(dump(events));
  Event outcome = single_outcome(events, d.id, kVerified);
  check_verified(api, outcome, d.id);
  CHECK(of(events, d.id).size() == 3);  // created, verification_requested, verified
}

// A domain created before a restart reserved its namespace (another --platform-domain) keeps its
// name. It verified all the same, with the request it had open and with a new one, and a parent
// outside the namespace passed its verification down into it: a team's claim inside the
// platform's own namespace (helper 166).
TEST_CASE("verify: a domain in a namespace reserved since it was created is never verified") {
  Env env;
  Api api(*env.server, kTeamA);
  Domain plat = create_domain(api, "plat.example.com");
  Domain app = create_domain(api, "app.plat.example.com");
  Domain parent = create_domain(api, "example.com");       // a registrable name: scope subtree
  Domain other = create_domain(api, "other.example.org");  // no record: for barrier()
  env.dns.restart(DnsRecords{}
                      .cname(plat.vhost, plat.vvalue)
                      .cname(app.vhost, app.vvalue)
                      .cname(parent.vhost, parent.vvalue));
  env.dns.pause();
  request_verify(api, plat);  // open while gatewayd stops: its lookup hangs
  CHECK(env.server->kill().signal == SIGKILL);
  env.dns.resume();
  env.server->restart_with(
      {"--dns-servers", env.dns.server(), "--platform-domain", "plat.example.com"});

  // The request it had open fails, although its CNAME is right.
  Events events = wait_outcomes(api, plat.id);
  Event outcome = single_outcome(events, plat.id, kFailed);
  check_failed(api, outcome, plat.id, "reserved_for_platform");
  CHECK(outcome.error ==
        "reserved_for_platform: plat.example.com is reserved for platform-managed routes "
        "(plat.example.com, run.plat.example.com) since it was created");
  // A new request is refused, and appends nothing.
  Response refused = verify(api, app.id);
  CHECK(refused.status == 422);
  rapidjson::Document problem = json(refused);
  CHECK(str(problem, "code") == "validation_failed");
  REQUIRE(items(field(problem, "errors")).size() == 1);
  CHECK(str(*items(field(problem, "errors"))[0], "field") == "hostname");
  CHECK(str(*items(field(problem, "errors"))[0], "message") ==
        "is reserved for platform-managed routes (plat.example.com, run.plat.example.com), so "
        "app.plat.example.com cannot be verified; this domain can only be deleted");
  // The parent outside the namespace verifies, and passes nothing down into it.
  request_verify(api, parent);
  events = wait_outcomes(api, parent.id);
  check_verified(api, single_outcome(events, parent.id, kVerified), parent.id);
  barrier(api, other);
  events = feed(api);
  INFO(dump(events));
  CHECK(of(events, app.id).size() == 1);  // created, and nothing since
  check_plain_pending(get_domain(api, app.id));
  check_plain_pending(get_domain(api, plat.id));
  // Deleting them still works.
  CHECK(api.del("/v1/domain/" + app.id).status == 200);
  std::string text = metrics_once(*env.server, {{outcomes("reserved_for_platform"), 1}});
  CHECK(sample(text, outcomes("reserved_for_platform")) == 1);
  CHECK(sample(text, lookups("verified")) >= 2);
}

TEST_CASE("verify: the verifier scans for requests when one is durable, not on every commit") {
  Env env;
  Api api(*env.server, kTeamA);
  auto scans = [&env] {
    return sample(metrics(*env.server), "gatewayd_verifier_scans_total").value_or(-1);
  };
  // The scan at start: the verifier starts once gatewayd serves (a start that fails appends
  // nothing), so it may come just after the `listening on` line.
  double before = scans();
  for (int i = 0; i < 500 && before < 1; ++i) {
    std::this_thread::sleep_for(milliseconds(10));
    before = scans();
  }
  REQUIRE(before >= 1);
  // One at a time: each create is a batch, a commit of its own.
  constexpr int kCreates = 100;
  const auto started = Clock::now();
  for (int i = 0; i < kCreates; ++i) CHECK_FALSE(create(api, kWebhook, i).empty());
  const double after_creates = scans();
  // The scans the verifier makes now and then (every 200 ms) to notice a stop, at most one more
  // than the periods that passed (and one in progress at the start). Taken off, so that a slow
  // machine or a sanitizer build does not make the bound fail.
  const auto elapsed = std::chrono::duration_cast<milliseconds>(Clock::now() - started);
  const double periodic = static_cast<double>(elapsed / milliseconds(200)) + 2;
  INFO("scans: " << after_creates - before << ", periodic allowance: " << periodic);
  // A scan on every commit made this at least kCreates.
  CHECK(after_creates - before - periodic < kCreates / 2);

  // A request is still answered. (That the write of one wakes the verifier is checked without
  // timing in tests/service/service_test.cc; the verifier's 200 ms rescan would answer it too.)
  Domain d = publish(env, api, "scanned.example.com");
  request_verify(api, d);
  Events events = wait_outcomes(api, d.id);
  check_verified(api, single_outcome(events, d.id, kVerified), d.id);
}

TEST_CASE("verify: verifying a verified domain appends nothing") {
  Env env;
  Api api(*env.server, kTeamA);
  Domain d = publish(env, api, "done.example.com");
  Domain other = create_domain(api, "other.example.com");  // no record: for barrier()
  request_verify(api, d);
  Events events = wait_outcomes(api, d.id);
  check_verified(api, single_outcome(events, d.id, kVerified), d.id);
  size_t count = of(events, d.id).size();
  rapidjson::Document before = get_domain(api, d.id);

  rapidjson::Document again = request_verify(api, d);
  CHECK(testing::to_json(again) == testing::to_json(before));
  barrier(api, other);
  events = feed(api);
  INFO(dump(events));
  CHECK(of(events, d.id).size() == count);
  CHECK(testing::to_json(get_domain(api, d.id)) == testing::to_json(before));
}

TEST_CASE("verify: a second request supersedes the first one's outcome") {
  Env env;
  Api api(*env.server, kTeamA);
  Domain d = publish(env, api, "twice.example.com");
  Domain other = create_domain(api, "other.example.com");  // no record: for barrier()

  env.dns.pause();
  CHECK(str(request_verify(api, d), "status") == "pending");
  CHECK(str(request_verify(api, d), "status") == "pending");
  env.dns.resume();
  Events events = wait_outcomes(api, d.id, 2);
  barrier(api, other);
  events = feed(api);
  INFO(dump(events));
  Events req = of(events, d.id, kRequested);
  REQUIRE(req.size() == 2);
  Events out = outcomes_of(events, d.id);
  REQUIRE(out.size() == 2);
  Events superseded = of(events, d.id, kSuperseded);
  Events verified = of(events, d.id, kVerified);
  REQUIRE(superseded.size() == 1);
  REQUIRE(verified.size() == 1);
  CHECK(superseded[0].caused_by == req[0].seq);
  CHECK(verified[0].caused_by == req[1].seq);
  check_verified(api, verified[0], d.id);
  // Superseded leaves the record as it was when the outcome was written.
  CHECK(superseded[0].error == "");
  CHECK((superseded[0].status == "pending" || superseded[0].status == "verified"));
}

// Every request was looked up, superseded or not, so one tenant that asked again and again for a
// domain whose DNS is slow filled the resolver's 100 slots and its queue, and every other
// tenant's verification waited behind them (a review measured 21.6 s after 1,500 requests).
TEST_CASE("verify: a request superseded before its lookup starts is not looked up") {
  Env env({"--dns-timeout-ms", "60000", "--dns-tries", "1"});
  Api api(*env.server, kTeamA);
  Domain d = publish(env, api, "again.example.com");
  // The DNS server holds the first 100 lookups (the resolver's slots) until it goes on; the
  // later requests wait for a slot, and all but the last are superseded by then.
  constexpr size_t kRequests = 150;
  env.dns.pause();
  for (size_t i = 0; i < kRequests; ++i) CHECK(request_verify(api, d).IsObject());
  env.dns.resume();
  Events events = wait_outcomes(api, d.id, kRequests);
  Events out = outcomes_of(events, d.id);
  REQUIRE(out.size() == kRequests);
  CHECK(of(events, d.id, kSuperseded).size() == kRequests - 1);
  Events verified = of(events, d.id, kVerified);
  REQUIRE(verified.size() == 1);
  CHECK(verified[0].caused_by == last_request_seq(events, d.id));
  const std::string text = metrics(*env.server);
  double looked_up = 0;
  for (const char* outcome :
       {"verified", "no_cname", "wrong_value", "nxdomain", "servfail", "timeout", "unreachable"}) {
    looked_up += sample(text, lookups(outcome)).value_or(0);
  }
  INFO("lookups: ", looked_up);
  CHECK(looked_up >= 1);
  CHECK(looked_up <= 101);  // at most the 100 started while DNS held them, and the last request
}

// Lookups that waited for one of the resolver's 100 slots started in the order they were asked
// for, so one team's many pending domains held back every other team's verification (a review
// saw 21.6 s behind 1,500 of one team's lookups). They now take turns by team.
TEST_CASE("verify: lookups waiting for a slot take turns by team") {
  Env env({"--dns-timeout-ms", "60000", "--dns-tries", "1"});
  Api a(*env.server, kTeamA);
  Api b(*env.server, kTeamB);
  Domain mine = publish(env, a, "fair.example.com");
  // team_b's domains have no record: each lookup is answered NXDOMAIN once DNS goes on.
  constexpr size_t kFlood = 300;
  std::vector<Domain> flood;
  for (size_t i = 0; i < kFlood; ++i)
    flood.push_back(create_domain(b, "d" + std::to_string(i) + ".flood.example.com"));
  // The DNS server holds team_b's first 100 lookups (all the slots); its other 200 and then
  // team_a's one wait for a slot.
  env.dns.pause();
  for (const Domain& d : flood) request_verify(b, d);
  request_verify(a, mine);
  // Every lookup is with the resolver before DNS goes on: 100 held, 201 waiting. A verifier
  // behind the requests (a loaded machine) had team_a's lookup queued only after more of team_b's
  // had started, and 201 of their outcomes came first.
  const std::string waiting = metrics_waiting(*env.server, kFlood - 100 + 1);
  REQUIRE(sample(waiting, "gatewayd_verifier_lookups_waiting") == kFlood - 100 + 1);
  // Held a second more, for the latency histogram below: the held lookups took over a second,
  // the waiting ones as long as dnsmasq takes once they start.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  env.dns.resume();
  Events events = wait_outcomes(a, mine.id);
  Events out = outcomes_of(events, mine.id);
  REQUIRE(out.size() == 1);
  check_verified(a, out[0], mine.id);
  Events theirs = wait_until(
      b,
      [&](const Events& ev) {
        size_t n = 0;
        for (const Event& e : ev) n += is_outcome(e.type) ? 1 : 0;
        return n >= kFlood;
      },
      "team_b's outcomes");
  size_t before = 0;
  for (const Event& e : theirs) before += is_outcome(e.type) && e.seq < out[0].seq ? 1 : 0;
  // In turns, team_a's lookup takes the first or second slot to free: it starts once at least one
  // of team_b's held lookups is answered, and about 100 of their outcomes come before its own. How
  // many exactly depends on how the resolver's thread reads the held answers: when it starts
  // lookups slowly, team_a's answer is read with the last of them (about 50 came first when each
  // start took 2 ms). In arrival order it came after all 300.
  INFO("team_b outcomes before team_a's: ", before);
  CHECK(before >= 1);
  CHECK(before <= 150);

  // The latency histogram times each lookup from its start, not from its request: the 201 that
  // waited over a second for a slot were counted at their wait too, as if DNS had been slow.
  const std::string text = metrics(*env.server);
  const auto bucket = [&](const char* le) {
    return sample(text, std::string(R"(gatewayd_verifier_lookup_duration_seconds_bucket{le=")") +
                            le + "\"}")
        .value_or(-1);
  };
  CHECK(bucket("+Inf") == kFlood + 1);
  CHECK(bucket("0.5") == kFlood - 100 + 1);  // the waiting ones; the 100 held took over a second
}

// c-ares 1.18 asks a server from one port for as long as lookups are in flight, so a forged
// reply had only the 16-bit query id to guess. Each name is now asked in a random mix of upper and
// lower case (DNS 0x20), and a reply counts only if it repeats the name letter for letter.
TEST_CASE("verify: names are asked in mixed case; a reply must repeat the name letter for letter") {
  Dnsmasq dns;
  dns.start();
  testing::DnsRelay keeps(dns.port(), /*fold_case=*/false);
  testing::DnsRelay folds(dns.port(), /*fold_case=*/true);
  testing::DnsRelay folds_too(dns.port(), /*fold_case=*/true);
  // One try each, with time to spare: a relay slower than the default 500 ms (a loaded machine)
  // was asked twice, and the test counts what each relay was asked.
  const std::vector<std::string> once = {"--dns-timeout-ms", "5000", "--dns-tries", "1"};
  auto flags = [&](std::vector<std::string> f) {
    f.insert(f.end(), once.begin(), once.end());
    return f;
  };
  Server keeping(flags({"--dns-servers", keeps.server()}));
  Server folding(flags({"--dns-servers", folds.server()}));
  Server folding_off(flags({"--dns-servers", folds_too.server(), "--dns-0x20", "off"}));
  Api a(keeping, kTeamA);
  Api b(folding, kTeamA);
  Api c(folding_off, kTeamA);
  const std::string host = "case.example.com";
  Domain da = create_domain(a, host);
  Domain db = create_domain(b, host);
  Domain dc = create_domain(c, host);
  // Each server's domain has a verification value of its own; the name is the same.
  DnsRecords records;
  records.raw_cnames = {{da.vhost, da.vvalue}};
  dns.restart(records);
  // dnsmasq serves one CNAME for a name, and the three values differ: each in its turn.
  request_verify(a, da);
  Event ok = single_outcome(wait_outcomes(a, da.id), da.id, kVerified);
  check_verified(a, ok, da.id);

  records.raw_cnames = {{db.vhost, db.vvalue}};
  dns.restart(records);
  request_verify(b, db);
  Event refused = single_outcome(wait_outcomes(b, db.id), db.id, kFailed);
  check_failed(b, refused, db.id, "servfail");
  CHECK(refused.error.find("did not repeat the name asked letter for letter") != std::string::npos);

  records.raw_cnames = {{dc.vhost, dc.vvalue}};
  dns.restart(records);
  request_verify(c, dc);
  Event off = single_outcome(wait_outcomes(c, dc.id), dc.id, kVerified);
  check_verified(c, off, dc.id);

  // What the relays were asked: the name, in mixed case with 0x20 on (its 27 letters all in
  // lower case has a chance of 2^-27), as it is with 0x20 off.
  auto lower = [](std::string s) {
    for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return s;
  };
  for (const auto* relay : {&keeps, &folds}) {
    const std::vector<std::string> names = relay->names();
    REQUIRE(names.size() == 1);
    INFO(names[0]);
    CHECK(lower(names[0]) == da.vhost);
    CHECK(names[0] != da.vhost);
  }
  const std::vector<std::string> plain = folds_too.names();
  REQUIRE(plain.size() == 1);
  CHECK(plain[0] == dc.vhost);
}

// c-ares 1.18 asks a server from one UDP port for as long as any lookup is in flight: a review saw
// 300 queries leave from one port, so a forger had only the query id and the name's case to
// guess. Every lookup now asks from a socket of its own. dnsmasq logs each query's source port.
TEST_CASE("verify: lookups in flight together ask from ports of their own") {
  Env env({"--dns-timeout-ms", "60000", "--dns-tries", "1"});
  Api api(*env.server, kTeamA);
  // One lookup more than the resolver's 100 slots: once one waits, the other 100 are in flight.
  constexpr size_t kDomains = 101;
  std::vector<Domain> domains;
  for (size_t i = 0; i < kDomains; ++i)
    domains.push_back(create_domain(api, "p" + std::to_string(i) + ".ports.example.com"));
  DnsRecords records;
  records.extra.push_back("log-queries=extra");  // "N 127.0.0.1/PORT query[CNAME] NAME from ..."
  env.dns.restart(records);
  env.dns.pause();
  for (const Domain& d : domains) request_verify(api, d);
  const std::string held = metrics_waiting(*env.server, 1);
  REQUIRE(sample(held, "gatewayd_verifier_lookups_waiting") == 1);
  env.dns.resume();
  for (const Domain& d : domains) wait_outcomes(api, d.id);
  // The source port of each query dnsmasq logged, in the order it read them: the first 100 were
  // all in flight at once. Its log reaches the test through a thread of its own, so the last lines
  // are waited for.
  auto queries = [](const std::string& text) {
    size_t n = 0;
    for (size_t at = text.find("query[CNAME]"); at != std::string::npos;
         at = text.find("query[CNAME]", at + 1)) {
      ++n;
    }
    return n;
  };
  std::string log = env.dns.output();
  for (int i = 0; i < 100 && queries(log) < kDomains; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    log = env.dns.output();
  }
  std::vector<int> ports;
  for (size_t at = log.find("query[CNAME]"); at != std::string::npos;
       at = log.find("query[CNAME]", at + 1)) {
    const size_t slash = log.rfind("127.0.0.1/", at);
    REQUIRE(slash != std::string::npos);
    ports.push_back(std::atoi(log.c_str() + slash + 10));
  }
  INFO(log);
  REQUIRE(ports.size() == kDomains);
  const std::set<int> distinct(ports.begin(), ports.begin() + 100);
  CHECK(distinct.size() == 100);
}

TEST_CASE("verify: a deleted domain's outcome is superseded") {
  Env env;
  Api api(*env.server, kTeamA);
  Domain d = publish(env, api, "gone.example.com");
  env.dns.pause();
  request_verify(api, d);
  REQUIRE(api.del("/v1/domain/" + d.id).status == 200);
  env.dns.resume();
  Events events = wait_outcomes(api, d.id);
  INFO(dump(events));
  single_outcome(events, d.id, kSuperseded);
  check_problem(api.get("/v1/domain/" + d.id), 404, "not_found");
}

TEST_CASE("verify: a verified subtree domain is inherited under it; other teams are kept out") {
  Env env;
  Api a(*env.server, kTeamA);
  Api b(*env.server, kTeamB);
  Domain parent = create_domain(a, "example.com");
  CHECK(str(get_domain(a, parent.id), "scope") == "subtree");
  Domain shop = create_domain(a, "shop.example.com");
  CHECK(str(get_domain(a, shop.id), "scope") == "exact");
  Domain theirs = create_domain(b, "x.example.com");  // before example.com is verified
  Domain other = create_domain(a, "other.example.org");
  // A profile needs no proof: team B puts one on a name under example.com first.
  Response early = b.post("/v1/gateway_security_profile", profile_body(kTeamB, "q.example.com"));
  REQUIRE(early.status == 201);
  const std::string early_id = str(json(early), "profile_id");
  env.dns.restart(
      DnsRecords{}.cname(parent.vhost, parent.vvalue).cname(theirs.vhost, theirs.vvalue));

  request_verify(a, parent);
  Events events = wait_outcomes(a, parent.id);
  check_verified(a, single_outcome(events, parent.id, kVerified), parent.id);

  // The pending child of the same team inherits, with one event and no request of its own.
  events = wait_event(a, shop.id, kInherited);
  {
    INFO(dump(events));
    Events inherited = of(events, shop.id, kInherited);
    REQUIRE(inherited.size() == 1);
    CHECK(of(events, shop.id, kRequested).empty());
    CHECK(outcomes_of(events, shop.id).empty());
    CHECK(inherited[0].seq > of(events, parent.id, kVerified).at(0).seq);
    // It names the event it follows from (it had no caused_by before, helper 103).
    CHECK(inherited[0].caused_by == of(events, parent.id, kVerified).at(0).seq);
    check_verified(a, inherited[0], shop.id, parent.id);
  }

  // A new domain under it is born verified.
  Response born = a.post("/v1/domain", domain_body(kTeamA, "a.example.com"));
  INFO(born.body);
  REQUIRE(born.status == 201);
  std::string born_id = str(json(born), "domain_id");
  CHECK(str(json(born), "status") == "verified");
  CHECK(str(json(born), "verification_parent_id") == parent.id);
  CHECK(num(json(born), "verified_at") > 0);

  // Team B: its pending domain stays pending and cannot verify, though its CNAME is right.
  check_plain_pending(get_domain(b, theirs.id));
  const std::string metrics_before = metrics(*env.server);
  request_verify(b, theirs);
  events = wait_outcomes(b, theirs.id);
  check_failed(b, single_outcome(events, theirs.id, kFailed), theirs.id, "claimed_by_another_team");
  {
    // The DNS lookup found the right CNAME; the outcome written is the guard's failure.
    const std::string claimed = outcomes("claimed_by_another_team");
    const std::string text =
        metrics_once(*env.server, {{claimed, sample(metrics_before, claimed).value_or(0) + 1}});
    INFO(metrics_before, "\n---\n", text);
    auto delta = [&](const std::string& series) {
      return sample(text, series).value_or(-1) - sample(metrics_before, series).value_or(-1);
    };
    CHECK(delta(lookups("verified")) == 1);
    CHECK(delta(outcomes("verified")) == 0);
    CHECK(delta(outcomes("claimed_by_another_team")) == 1);
  }
  // ...and cannot create anything equal to or under it, domain or profile.
  for (std::string host : {"b.example.com", "example.com", "deep.b.example.com"}) {
    CAPTURE(host);
    check_problem(b.post("/v1/domain", domain_body(kTeamB, host)), 409, "hostname_conflict");
  }
  for (std::string host : {"p.example.com", "example.com"}) {
    CAPTURE(host);
    check_problem(b.post("/v1/gateway_security_profile", profile_body(kTeamB, host)), 409,
                  "hostname_conflict");
  }
  CHECK(a.post("/v1/gateway_security_profile", profile_body(kTeamA, "p.example.com")).status ==
        201);
  // B's profile from before the verification is covered now: it can be deleted, not changed
  // (it stayed editable before), and then the name is A's.
  {
    const std::string path = "/v1/gateway_security_profile/" + early_id;
    Response changed =
        b.put(path, json_with(profile_body(kTeamB, "q.example.com"), "waf_mode", R"("monitor")"));
    check_problem(changed, 409, "hostname_conflict");
    CHECK(str(json(changed), "detail") ==
          "hostname q.example.com is covered by a domain another team has verified since this "
          "profile was created; the profile can be deleted or moved to another hostname, not "
          "changed on this one");
    CHECK(b.get(path).status == 200);
    check_problem(a.post("/v1/gateway_security_profile", profile_body(kTeamA, "q.example.com")),
                  409, "hostname_conflict");
    REQUIRE(b.del(path).status == 200);
    CHECK(a.post("/v1/gateway_security_profile", profile_body(kTeamA, "q.example.com")).status ==
          201);
  }

  // Deleting the parent revokes what was inherited from it, one event per child.
  REQUIRE(a.del("/v1/domain/" + parent.id).status == 200);
  events = wait_until(
      a,
      [&](const Events& ev) {
        return !of(ev, shop.id, kRevoked).empty() && !of(ev, born_id, kRevoked).empty();
      },
      "both revocations");
  barrier(a, other);
  events = feed(a);
  INFO(dump(events));
  const Events deleted = of(events, parent.id, "domain.deleted");
  REQUIRE(deleted.size() == 1);
  for (const std::string& id : {shop.id, born_id}) {
    CAPTURE(id);
    Events revoked = of(events, id, kRevoked);
    REQUIRE(revoked.size() == 1);
    CHECK(revoked[0].caused_by == deleted[0].seq);
    CHECK(revoked[0].status == "pending");
    CHECK(revoked[0].verified_at == 0);
    CHECK(revoked[0].parent_id == "");
    check_plain_pending(get_domain(a, id));
  }
  // With no verified domain covering it any more, team B may use the name.
  CHECK(b.post("/v1/domain", domain_body(kTeamB, "b.example.com")).status == 201);
}

// Before subtree verification looked at the claims under the name, team A's example.net became
// verified over team B's verified b.example.net: B then got 409 for a profile on its own verified
// name (A's subtree covered it), and A's pending c.example.net stayed pending after B let go.
TEST_CASE("verify: a subtree does not verify over a name another team has verified") {
  Env env;
  Api a(*env.server, kTeamA);
  Api b(*env.server, kTeamB);
  Domain theirs = create_domain(b, "b.example.net");
  Domain parent = create_domain(a, "example.net");
  Domain child = create_domain(a, "c.example.net");
  env.dns.restart(
      DnsRecords{}.cname(theirs.vhost, theirs.vvalue).cname(parent.vhost, parent.vvalue));
  request_verify(b, theirs);
  check_verified(b, single_outcome(wait_outcomes(b, theirs.id), theirs.id, kVerified), theirs.id);

  request_verify(a, parent);
  Events events = wait_outcomes(a, parent.id);
  Event failed = single_outcome(events, parent.id, kFailed);
  check_failed(a, failed, parent.id, "claimed_by_another_team");
  CHECK(failed.error.find("b.example.net") != std::string::npos);
  check_plain_pending(get_domain(a, child.id));
  CHECK(b.post("/v1/gateway_security_profile", profile_body(kTeamB, "b.example.net")).status ==
        201);

  // Once B lets go of the name, A's subtree verifies and passes it down.
  REQUIRE(b.del("/v1/domain/" + theirs.id).status == 200);
  request_verify(a, parent);
  events = wait_outcomes(a, parent.id, 2);
  CHECK(outcomes_of(events, parent.id).back().type == kVerified);
  events = wait_event(a, child.id, kInherited);
  check_verified(a, of(events, child.id, kInherited).at(0), child.id, parent.id);
  check_problem(b.post("/v1/gateway_security_profile", profile_body(kTeamB, "x.example.net")), 409,
                "hostname_conflict");
}

TEST_CASE(
    "verify: narrowing a verified parent to scope exact revokes its children, widening passes it "
    "down") {
  Env env;
  Api a(*env.server, kTeamA);
  Api b(*env.server, kTeamB);
  Domain parent = create_domain(a, "example.org");
  Domain shop = create_domain(a, "shop.example.org");
  env.dns.restart(DnsRecords{}.cname(parent.vhost, parent.vvalue));
  request_verify(a, parent);
  wait_outcomes(a, parent.id);
  Events events = wait_event(a, shop.id, kInherited);
  check_verified(a, of(events, shop.id, kInherited).at(0), shop.id, parent.id);

  // PUT answers with the record it was sent to, whatever else the change touched.
  auto put_scope = [&](std::string_view scope) {
    Response put = a.put("/v1/domain/" + parent.id, json_with(domain_body(kTeamA, "example.org"),
                                                              "scope", testing::json_quote(scope)));
    INFO("PUT scope ", scope, ": ", put.status, " ", put.body);
    REQUIRE(put.status == 200);
    rapidjson::Document d = json(put);
    CHECK(str(d, "domain_id") == parent.id);
    CHECK(str(d, "hostname") == "example.org");
    CHECK(str(d, "scope") == scope);
    CHECK(str(d, "status") == "verified");
    Response got = a.get("/v1/domain/" + parent.id);
    CHECK(put.header("ETag").value_or("none") == got.header("ETag").value_or("none"));
    CHECK(testing::to_json(d) == testing::to_json(json(got)));
  };

  put_scope("exact");
  events = wait_event(a, shop.id, kRevoked);
  {
    INFO(dump(events));
    Events revoked = of(events, shop.id, kRevoked);
    REQUIRE(revoked.size() == 1);
    CHECK(revoked[0].status == "pending");
    CHECK(revoked[0].verified_at == 0);
    CHECK(revoked[0].parent_id == "");
    const Events narrowed = of(events, parent.id, "domain.updated");
    REQUIRE(narrowed.size() == 1);
    CHECK(revoked[0].caused_by == narrowed[0].seq);
  }
  check_plain_pending(get_domain(a, shop.id));
  CHECK(str(get_domain(a, parent.id), "status") == "verified");

  // An exact domain covers only itself: new names under it are neither inherited nor claimed.
  Response child = a.post("/v1/domain", domain_body(kTeamA, "new.example.org"));
  REQUIRE(child.status == 201);
  check_plain_pending(json(child));
  std::string child_id = str(json(child), "domain_id");
  CHECK(b.post("/v1/domain", domain_body(kTeamB, "b.example.org")).status == 201);
  check_problem(b.post("/v1/domain", domain_body(kTeamB, "example.org")), 409, "hostname_conflict");

  // Widening it again passes the verification down to the pending domains under it.
  put_scope("subtree");
  events = wait_until(
      a,
      [&](const Events& ev) {
        return of(ev, shop.id, kInherited).size() == 2 && of(ev, child_id, kInherited).size() == 1;
      },
      "inheritance after widening");
  check_verified(a, of(events, shop.id, kInherited).back(), shop.id, parent.id);
  check_verified(a, of(events, child_id, kInherited).back(), child_id, parent.id);
  const Events widened = of(events, parent.id, "domain.updated");
  REQUIRE(widened.size() == 2);
  CHECK(of(events, shop.id, kInherited).back().caused_by == widened[1].seq);
  CHECK(of(events, child_id, kInherited).back().caused_by == widened[1].seq);
  // Only outcomes and what a change brings about name a cause.
  for (const Event& e : events) {
    CAPTURE(e.seq);
    if (e.type == kInherited || e.type == kRevoked || e.type == kVerified) continue;
    CHECK(e.caused_by == -1);
  }
}

}  // namespace
}  // namespace gw::itest::verify_test
