#include "verify/verifier.h"

#include <rapidjson/document.h>

#include <algorithm>
#include <chrono>
#include <iterator>
#include <memory>
#include <sstream>

#include "projections/keys.h"
#include "core/thread_name.h"

namespace gw {

namespace {

using Status = CnameAnswer::Status;

// The result of checking `name` against `expected` from what DNS answered.
CheckResult check(const CnameAnswer& a, const std::string& name, const std::string& expected) {
  switch (a.status) {
    case Status::kFound:
      if (same_dns_name(a.target, expected)) return CheckResult{true, "", ""};
      return CheckResult{false, "wrong_value",
                         "the CNAME of " + name + " points to " + a.target + ", expected " +
                             expected};
    case Status::kNoCname: return {false, "no_cname", name + " has no CNAME record"};
    case Status::kNxdomain: return {false, "nxdomain", name + " does not exist (NXDOMAIN)"};
    case Status::kServfail: return {false, "servfail", "the DNS server failed: " + a.detail};
    case Status::kTimeout: return {false, "timeout", "no answer from the DNS server for " + name};
    case Status::kUnreachable:
      return {false, "unreachable",
              "the DNS server could not be reached (nothing listens there, or it closed the "
              "connection without an answer)"};
    case Status::kCancelled:
    case Status::kSkipped:
      break;
  }
  return {false, "cancelled", ""};
}

// Whether request `request_seq` of `domain_id` has been superseded: a later verify of the same
// domain is its latest open request (keys::open_request). Its outcome is `superseded` then,
// whatever DNS says, so it is not looked up. A read that fails says no.
bool superseded(const Store& store, const std::string& domain_id, uint64_t request_seq) {
  auto latest = store.get(Cf::kProjections, keys::open_request(domain_id));
  return latest.ok() && latest.value() && latest.value()->size() == 8 &&
         decode_u64(*latest.value()) > request_seq;
}

}  // namespace

Verifier::Verifier(const Store& store, Service& service, Resolver& resolver)
    : store_(store), service_(service), resolver_(resolver) {}

Verifier::~Verifier() { stop(); }

void Verifier::start() { thread_ = std::thread([this] { run(); }); }

void Verifier::stop() {
  stopping_.store(true);
  if (thread_.joinable()) thread_.join();
}

void Verifier::run() {
  name_this_thread("gw-verify");
  EventCount& requests = service_.verification_requests();
  uint64_t seen = requests.current();  // read before the scan: a request committed after it
                                       // raises the count, so the wait below returns at once
  const std::string prefix = keys::request_prefix();
  while (!stopping_.load()) {
    scans_.fetch_add(1, std::memory_order_relaxed);
    auto it = store_.iterate_under(Cf::kProjections, prefix);
    for (it->Seek(prefix + encode_u64(dispatched_up_to_ + 1));
         it->Valid() && it->key().starts_with(prefix); it->Next()) {
      uint64_t seq = decode_u64(std::string_view(it->key().data() + prefix.size(), 8));
      dispatch(seq, it->value().ToString(), 0);
      dispatched_up_to_ = seq;
    }
    dispatch_due_retries();
    // Wake when a new request is durable, or now and then to notice a stop. Not on every commit:
    // a scan opens an iterator, which cost about a microsecond per create when creates came in
    // small batches.
    seen = requests.wait_beyond(seen, std::chrono::milliseconds(200));
  }
}

void Verifier::dispatch(uint64_t request_seq, const std::string& domain_id, int attempt) {
  if (attempt == 0) open_.fetch_add(1, std::memory_order_relaxed);
  auto raw = store_.get(Cf::kProjections, keys::record(domain_id));
  if (!raw.ok()) {
    // The store could not be read: not a deleted domain (answered `superseded` before, which
    // the decision, finding the request open, wrote as a failure). Tried again later.
    retry_later(request_seq, domain_id, attempt + 1);
    return;
  }
  keys::RecordHeader header;
  std::string_view json;
  rapidjson::Document doc;
  if (raw.value() && keys::decode_record(*raw.value(), &header, &json)) {
    doc.Parse(json.data(), json.size());
  }
  auto is_string = [&doc](const char* name) {
    return doc.IsObject() && doc.HasMember(name) && doc[name].IsString();
  };
  if (!doc.IsObject() || header.deleted || !is_string("verification_hostname") ||
      !is_string("verification_value")) {
    // Deleted: nothing to look up; the decision answers the request as superseded.
    record(request_seq, domain_id, attempt, CheckResult{false, "superseded", ""});
    return;
  }
  std::string name = doc["verification_hostname"].GetString();
  std::string expected = doc["verification_value"].GetString();
  // Lookups waiting for a slot of the resolver take turns by team.
  std::string team = doc.HasMember("team_id") && doc["team_id"].IsString()
                         ? doc["team_id"].GetString()
                         : std::string();
  // When the lookup started, set as it starts: the latency histogram is the lookup's own time,
  // not the wait for a slot of the resolver before it (a full queue read as a slow DNS server:
  // lookups of a 1.5 s bound counted at 2.9 s). Both callbacks run on the resolver's thread.
  auto started =
      std::make_shared<std::chrono::steady_clock::time_point>(std::chrono::steady_clock::now());
  // Asked when the lookup starts, at once or after a wait for a slot: a request verify was called
  // for again since is not looked up.
  auto wanted = [this, domain_id, request_seq, started] {
    *started = std::chrono::steady_clock::now();
    return !superseded(store_, domain_id, request_seq);
  };
  resolver_.lookup_cname(
      name, std::move(team),
      [this, request_seq, domain_id, attempt, name, expected, started](CnameAnswer answer) {
        double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - *started).count();
        if (answer.status == Status::kCancelled) {
          // Shutting down: the request stays open in the store and is checked after a restart.
          open_.fetch_sub(1, std::memory_order_relaxed);
          return;
        }
        if (answer.status == Status::kSkipped) {
          // Superseded while it waited for a slot of the resolver.
          record(request_seq, domain_id, attempt, CheckResult{false, "superseded", ""});
          return;
        }
        CheckResult result = check(answer, name, expected);
        lookups_.add(result.ok ? std::string_view("verified") : std::string_view(result.code));
        latency_.observe(seconds);
        record(request_seq, domain_id, attempt, std::move(result));
      },
      std::move(wanted));
}

void Verifier::record(uint64_t request_seq, const std::string& domain_id, int attempt,
                      CheckResult result) {
  service_.record_outcome(
      domain_id, request_seq, std::move(result),
      [this, request_seq, domain_id, attempt](Result<Written> written, const std::string& outcome) {
        // Refused while writes go on (the decision's read of the store failed): the request is
        // still open, and is tried again. Once writes stopped, or at a stop, it stays open for
        // the restart that is needed, which looks it up again.
        if (!written.ok() && service_.writable() && !stopping_.load()) {
          retry_later(request_seq, domain_id, attempt + 1);
          return;
        }
        outcomes_.add(outcome);
        open_.fetch_sub(1, std::memory_order_relaxed);
      });
}

void Verifier::retry_later(uint64_t request_seq, const std::string& domain_id, int attempt) {
  retries_total_.fetch_add(1, std::memory_order_relaxed);
  const auto backoff = std::chrono::seconds(1) * (1 << std::min(attempt - 1, 6));
  std::lock_guard<std::mutex> lock(retry_mu_);
  retries_.push_back(
      Retry{request_seq, domain_id, attempt,
            std::chrono::steady_clock::now() +
                std::min<std::chrono::steady_clock::duration>(backoff, std::chrono::seconds(60))});
}

void Verifier::dispatch_due_retries() {
  std::vector<Retry> due;
  {
    std::lock_guard<std::mutex> lock(retry_mu_);
    const auto now = std::chrono::steady_clock::now();
    auto later = std::partition(retries_.begin(), retries_.end(),
                                [now](const Retry& r) { return r.due <= now; });
    due.assign(std::make_move_iterator(retries_.begin()), std::make_move_iterator(later));
    retries_.erase(retries_.begin(), later);
  }
  for (const Retry& r : due) dispatch(r.request_seq, r.domain_id, r.attempt);
}

std::string Verifier::render_metrics() const {
  std::ostringstream out;
  out << "# HELP gatewayd_verifier_queue_depth Verification requests seen and not yet answered.\n"
      << "# TYPE gatewayd_verifier_queue_depth gauge\n"
      << "gatewayd_verifier_queue_depth " << queue_depth() << "\n"
      << "# HELP gatewayd_verifier_lookups_waiting DNS lookups waiting for one of the resolver's "
         "slots.\n"
      << "# TYPE gatewayd_verifier_lookups_waiting gauge\n"
      << "gatewayd_verifier_lookups_waiting " << resolver_.waiting() << "\n"
      << "# HELP gatewayd_verifier_scans_total Scans of the open-request queue.\n"
      << "# TYPE gatewayd_verifier_scans_total counter\n"
      << "gatewayd_verifier_scans_total " << scans_.load(std::memory_order_relaxed) << "\n"
      << "# HELP gatewayd_verifier_retries_total Requests tried again after the store could not "
         "be read for them.\n"
      << "# TYPE gatewayd_verifier_retries_total counter\n"
      << "gatewayd_verifier_retries_total " << retries_total_.load(std::memory_order_relaxed)
      << "\n";
  lookups_.render(out, "gatewayd_verifier_lookups_total",
                  "DNS lookups by their result (verified: the CNAME is right).");
  outcomes_.render(out, "gatewayd_verifier_outcomes_total", "Outcome events written, by outcome.");
  out << "# HELP gatewayd_verifier_lookup_duration_seconds DNS lookup latency, from the "
         "lookup's start (a wait for a resolver slot is not counted).\n"
      << "# TYPE gatewayd_verifier_lookup_duration_seconds histogram\n";
  latency_.render(out, "gatewayd_verifier_lookup_duration_seconds", "");
  return out.str();
}

}  // namespace gw
