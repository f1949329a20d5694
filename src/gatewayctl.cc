// gatewayctl: administration from the command line. Wiring only: flags in, reports out; the work
// is done by http/tokens.h and admin/.
#include <fcntl.h>
#include <stdio_ext.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <ext/stdio_filebuf.h>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "admin/backup.h"
#include "admin/check.h"
#include "admin/interrupt_cleanup.h"
#include "admin/log_export.h"
#include "admin/read_only.h"
#include "admin/rebuild.h"
#include "admin/waf_check.h"
#include "core/flags.h"
#include "core/fsync_dir.h"
#include "core/std_fds.h"
#include "core/unique_fd.h"
#include "http/tokens.h"
#include "sandbox/waf_check.h"
#include "service/idempotency.h"

namespace {

constexpr char kUsage[] =
    "usage:\n"
    "  gatewayctl token create --tokens-file FILE --tenant TEAM [--name NAME]\n"
    "      append a new token's hash to FILE and print the token\n"
    "  gatewayctl token revoke --tokens-file FILE --tenant TEAM --name NAME\n"
    "      remove every token of TEAM named NAME from FILE (a running gatewayd re-reads it)\n"
    "  gatewayctl events --data-dir D [--after SEQ]\n"
    "      the event log as NDJSON on stdout: the stored bytes of each event with seq > SEQ\n"
    "  gatewayctl replay --data-dir D --until-seq N --out FILE [--fold auto|memory|disk]\n"
    "      every record live right after event N, as JSON, into FILE\n"
    "  gatewayctl check --data-dir D [--fold auto|memory|disk]\n"
    "      exit 0 only if the hash chain is intact and the read model equals a fresh replay\n"
    "  gatewayctl backup --data-dir D --out DIR\n"
    "      a consistent copy of the database (not the tokens file) into a new or empty DIR;\n"
    "      restore by starting gatewayd with --data-dir DIR and the tokens file\n"
    "      (copied into DIR, or given with --tokens-file)\n"
    "  gatewayctl rebuild --data-dir D [--fold auto|memory|disk]\n"
    "      drop the read model and replay the whole log (gatewayd must be stopped)\n"
    "  gatewayctl waf-check --data-dir D [--fold auto|memory|disk]\n"
    "      check every live profile's waf_custom_directives against this release's policy;\n"
    "      exit 0 only if none is refused (a profile stored under an older one keeps its text)\n"
    "events, replay, check, backup and waf-check read a consistent view and work while gatewayd\n"
    "runs.\n"
    "--data-dir may also come from GATEWAY_DATA_DIR. --fold (GATEWAY_FOLD, default auto): where\n"
    "replay, check, rebuild and waf-check fold the log: in memory (fastest, about 1.2 KB per\n"
    "event, or 1.6 times the events' bytes if more), on disk (slower, about 150 MB plus 100\n"
    "bytes per event; rebuild's in <data-dir>/fold.tmp, the others' under $TMPDIR), or auto: in\n"
    "memory if that takes at most half of the memory available.\n";

int usage() {
  std::cerr << kUsage;
  return 2;
}

// Whether gatewayctl was started with stdout closed (main puts /dev/null there, read-only).
bool stdout_was_closed = false;

int fail(const std::string& message) {
  std::cerr << "gatewayctl: " << message << "\n";
  return 1;
}

// A flag value that is not what the flag takes: a usage error.
int bad_value(const std::string& message) {
  std::cerr << "gatewayctl: " << message << "\n";
  return 2;
}

// A command whose output's reader went away (`gatewayctl events | head`) ends with exit 1, as
// for any failed write, but without a line on stderr: the reader took what it wanted, and the
// line was noise in an ordinary pipeline (helper 78). Any other failure is told.
int fail_output(const std::string& command, const gw::Error& error) {
  if (error.detail == gw::admin::kReaderGone) return 1;
  return fail(command + ": " + error.detail);
}

const gw::FlagSpec kDataDir{"data-dir", "GATEWAY_DATA_DIR", "", "gatewayd's data directory"};
const gw::FlagSpec kFold{"fold", "GATEWAY_FOLD", "auto",
                         "where the log is folded: memory (fastest, about 1.2 KB per event, or 1.6 "
                         "times the events' bytes if more), disk "
                         "(a scratch database; slower, about 150 MB plus 100 bytes per event), "
                         "or auto (memory if that "
                         "takes at most half of the memory available)"};

// A --fold value that is not one the flag takes: the usage error's exit.
std::optional<int> bad_fold(const gw::Flags& flags) {
  if (gw::parse_fold_place(flags.get("fold"))) return std::nullopt;
  return bad_value(flags.named("fold") + " must be auto, memory or disk");
}

// The options of a valid --fold (see bad_fold); a fold on disk goes into `scratch_dir` (a
// read-only command's goes into its ReadOnlyStore's scratch directory) and says so on `notes`
// (stderr, unless the command's output goes there).
gw::FoldOptions fold_options(const gw::Flags& flags, const std::string& scratch_dir,
                             std::ostream& notes = std::cerr) {
  gw::FoldOptions options;
  options.place = *gw::parse_fold_place(flags.get("fold"));
  options.scratch_dir = scratch_dir;
  options.on_disk_note = [&notes](const std::string& note) {
    notes << "gatewayctl: " << note << std::endl;
  };
  return options;
}

// Parses argv[first..] into `flags`; an exit code when the command must not go on.
std::optional<int> parse(gw::Flags& flags, int argc, char** argv, int first,
                         const std::vector<std::string>& required) {
  auto parsed = flags.parse(argc, argv, first);
  if (!parsed.ok()) {
    std::cerr << "gatewayctl: " << parsed.error().detail << "\n" << flags.usage();
    return 2;
  }
  if (flags.help_requested()) {
    std::cout << kUsage << flags.usage();
    return 0;
  }
  for (const auto& name : required) {
    if (flags.get(name).empty()) {
      // Given empty (`--out ""`, or its variable set to nothing) is not the same as left out.
      std::cerr << "gatewayctl: " << flags.named(name)
                << (flags.given(name) ? " must not be empty\n" : " is required\n");
      return usage();
    }
  }
  return std::nullopt;
}

// The exit of a token create or revoke that failed: a flag value that is not what the flag takes
// (its field errors name the flags) is a usage error.
int failed_token_change(const gw::Error& error) {
  if (error.code != gw::Code::kValidationFailed) return fail(error.detail);
  for (const auto& e : error.errors)
    std::cerr << "gatewayctl: --" << e.field << " " << e.message << "\n";
  return 2;
}

// The text of the error of a write to stdout that failed (errno, as the failed write left it).
std::string stdout_error() { return errno != 0 ? std::strerror(errno) : "the write failed"; }

// Whether what was put on stdout is written (flushed). If not, it is dropped, so that the exit
// does not write it after the failure's message, and errno says why (stdout_error).
bool stdout_flushed() {
  errno = 0;
  if (std::cout.flush()) return true;
  __fpurge(stdout);
  return false;
}

// `code`, or a failure if the report on stdout could not be written (a full disk, a reader gone):
// check, backup, rebuild and waf-check exited 0 with their report lost.
int reported(const std::string& command, int code) {
  if (stdout_flushed()) return code;
  fail(command + ": cannot write its report: " + stdout_error());
  return code == 0 ? 1 : code;
}

int token_create(int argc, char** argv) {
  gw::Flags flags({
      {"tokens-file", "GATEWAY_TOKENS_FILE", "", "tokens file to append the token's hash to"},
      {"tenant", "", "", "tenant (team id) the token is bound to"},
      {"name", "", "default", "token name, recorded as the actor of its changes"},
  });
  if (auto exit = parse(flags, argc, argv, 3, {"tokens-file", "tenant"})) return *exit;
  if (stdout_was_closed) {
    return fail(
        "token create: stdout is closed, so the token could not be printed; nothing written");
  }
  auto token =
      gw::http::create_token(flags.get("tokens-file"), flags.get("tenant"), flags.get("name"));
  if (!token.ok()) return failed_token_change(token.error());
  // A token no one got: its line stays (see the README: taking it back would race a revoke), so
  // the message says how to take it away. Exit 0 before, with stdout on a full disk or a reader
  // gone, and the name could not be used again.
  std::cout << token.value() << '\n';
  if (!stdout_flushed()) {
    return fail("token create: cannot print the token: " + stdout_error() + "; its line stays in " +
                flags.get("tokens-file") +
                ", and no one has the token: take it away with gatewayctl token revoke "
                "--tokens-file " +
                flags.get("tokens-file") + " --tenant " + flags.get("tenant") + " --name " +
                flags.get("name"));
  }
  return 0;
}

int token_revoke(int argc, char** argv) {
  gw::Flags flags({
      {"tokens-file", "GATEWAY_TOKENS_FILE", "", "tokens file to remove the tokens from"},
      {"tenant", "", "", "tenant (team id) of the tokens"},
      {"name", "", "", "name of the tokens"},
  });
  if (auto exit = parse(flags, argc, argv, 3, {"tokens-file", "tenant", "name"})) return *exit;
  // The file a symlink leads to is the one replaced: a rename over the symlink itself would put
  // a file of its own in its place, and the file it led to would keep the tokens.
  std::error_code unresolved;
  const std::filesystem::path resolved =
      std::filesystem::canonical(flags.get("tokens-file"), unresolved);
  const std::string path = unresolved ? flags.get("tokens-file") : resolved.string();
  // The file's next version, renamed over it; removed if gatewayctl is stopped before that.
  const std::string scratch = path + ".revoke-" + std::to_string(::getpid());
  gw::admin::RemovedOnInterrupt removed(scratch);
  auto revoked = gw::http::revoke_tokens(path, flags.get("tenant"), flags.get("name"), scratch);
  if (!revoked.ok()) return failed_token_change(revoked.error());
  std::cout << "revoked " << revoked.value() << (revoked.value() == 1 ? " token" : " tokens")
            << " of tenant " << flags.get("tenant") << " named " << flags.get("name") << '\n';
  if (!stdout_flushed()) {
    return fail("token revoke: cannot write its report: " + stdout_error() +
                "; the tokens are revoked all the same");
  }
  return 0;
}

int events(int argc, char** argv) {
  gw::Flags flags({kDataDir, {"after", "", "0", "write the events with a greater seq"}});
  if (auto exit = parse(flags, argc, argv, 2, {"data-dir"})) return *exit;
  auto after = gw::parse_uint(flags.get("after"), 0, UINT64_MAX);
  if (!after) return bad_value("--after must be a whole number from 0 to 18446744073709551615");
  auto store = gw::admin::ReadOnlyStore::open(flags.get("data-dir"));
  if (!store.ok()) return fail("events: " + store.error().detail);
  std::ios::sync_with_stdio(false);
  auto written = gw::admin::write_events(store.value()->store(), *after, std::cout);
  if (!written.ok()) return fail_output("events", written.error());
  return 0;
}

// `path`, then the target of each of its symlinks in turn, as far as a path that is no symlink
// or does not exist yet (at most 40 links, as the kernel follows). Empty, with `ec`, on an error.
std::vector<std::filesystem::path> link_chain(std::filesystem::path path, std::error_code& ec) {
  namespace fs = std::filesystem;
  std::vector<fs::path> chain{path};
  for (int links = 0; links <= 40; ++links) {
    std::error_code absent;  // a path that does not exist is where the links end, not an error
    if (!fs::is_symlink(fs::symlink_status(path, absent))) return chain;
    fs::path target = fs::read_symlink(path, ec);
    if (ec) return {};
    path = target.is_absolute() ? target : path.parent_path() / target;
    chain.push_back(path);
  }
  ec = std::make_error_code(std::errc::too_many_symbolic_link_levels);
  return {};
}

// The descriptor of this process that `path` names, directly or through links: /dev/stdout,
// /dev/stderr, /dev/fd/N, /proc/self/fd/N. Opened by name, such a path is the file the
// descriptor is open on, anew: a regular file that stdout was redirected to (`>> log`) was
// replaced by the rename, or written from its start.
std::optional<int> named_descriptor(const std::string& path) {
  namespace fs = std::filesystem;
  // /dev/fd, /proc/self/fd and /proc/thread-self/fd are links to one of these.
  const std::string own = "/proc/" + std::to_string(getpid());
  std::error_code ec;
  for (const fs::path& link : link_chain(path, ec)) {
    const fs::path named = fs::absolute(link, ec).lexically_normal();
    const std::string dir = fs::canonical(named.parent_path(), ec).string();
    if (ec) return std::nullopt;
    if (dir == own + "/fd" || (dir.starts_with(own + "/task/") && dir.ends_with("/fd"))) {
      auto n = gw::parse_uint(named.filename().string(), 0, INT32_MAX);
      if (!n) return std::nullopt;
      return static_cast<int>(*n);
    }
  }
  return std::nullopt;
}

int replay(int argc, char** argv) {
  gw::Flags flags({kDataDir,
                   {"until-seq", "", "", "the event to stop after (0 = before the first)"},
                   {"out", "", "", "file to write the records to (replaced)"},
                   kFold});
  if (auto exit = parse(flags, argc, argv, 2, {"data-dir", "until-seq", "out"})) return *exit;
  auto until = gw::parse_uint(flags.get("until-seq"), 0, UINT64_MAX);
  if (!until) return bad_value("--until-seq must be a whole number from 0 to 18446744073709551615");
  if (auto exit = bad_fold(flags)) return *exit;
  std::string out_path = flags.get("out");
  std::error_code ec;
  // One of this process's descriptors is written through as it is open (its offset, O_APPEND):
  // one it had at its start, looked at before the store is opened (/dev/fd/3 named the store's
  // own LOG, into which the records went, and the command said it had written them).
  const std::optional<int> descriptor = named_descriptor(out_path);
  const int descriptor_copy = descriptor ? ::fcntl(*descriptor, F_DUPFD_CLOEXEC, 3) : -1;
  if (descriptor && descriptor_copy < 0) {
    return fail("replay: cannot write " + out_path + ": " + std::strerror(errno));
  }
  gw::UniqueFd descriptor_owner(descriptor_copy);
  const auto out_status = std::filesystem::status(out_path, ec);
  // So is a device, pipe or socket (`--out /dev/null`, a fifo): a rename would put a regular file
  // where the device's name was.
  const bool direct = descriptor || (std::filesystem::exists(out_status) &&
                                     !std::filesystem::is_regular_file(out_status) &&
                                     !std::filesystem::is_directory(out_status));
  if (!direct && std::filesystem::is_symlink(std::filesystem::symlink_status(out_path, ec))) {
    // A symlink's file is replaced (or made), not the link: a rename over the link replaced it
    // with a regular file when its file did not exist yet, or was a directory. Its directories
    // are made canonical.
    const auto chain = link_chain(out_path, ec);
    if (!chain.empty()) out_path = std::filesystem::weakly_canonical(chain.back(), ec).string();
    if (ec) return fail("replay: cannot write " + flags.get("out") + ": " + ec.message());
  }
  // Refused before the replay is written; the rename would refuse it after.
  if (std::filesystem::is_directory(out_status)) {
    return fail("replay: cannot write " + out_path + ": it is a directory");
  }
  // A file replaced inside the data dir could be one of the store's own (CURRENT, a MANIFEST):
  // the database was lost, and the command said it had written the records.
  if (!direct && gw::admin::inside_dir(flags.get("data-dir"), out_path)) {
    return fail("replay: " + out_path + " is inside the data dir " + flags.get("data-dir") +
                "; write it outside");
  }
  auto store = gw::admin::ReadOnlyStore::open(flags.get("data-dir"));
  if (!store.ok()) return fail("replay: " + store.error().detail);
  // Otherwise written next to FILE and renamed over it, so FILE is the old one or the whole new
  // one. The name is this process's own: two replays into one FILE do not write into one file.
  // One left by a process that died with this pid is stale.
  const std::string tmp_path = direct ? "" : out_path + ".tmp." + std::to_string(getpid());
  const gw::admin::RemovedOnInterrupt removed_on_interrupt(tmp_path);
  // Whatever goes wrong from here, the temporary file goes; once renamed, it is FILE.
  struct RemoveOnExit {
    const std::string& path;
    ~RemoveOnExit() {
      std::error_code ignored;
      if (!path.empty()) std::filesystem::remove(path, ignored);
    }
  } remove_tmp{tmp_path};
  const std::string& written = direct ? out_path : tmp_path;
  int fd = -1;
  if (descriptor) {
    fd = descriptor_owner.release();  // the copy taken before the store opened
  } else if (direct) {
    fd = ::open(out_path.c_str(), O_WRONLY | O_CLOEXEC);
  } else {
    std::filesystem::remove(tmp_path, ec);
    // Readable by its owner only: it holds every tenant's records.
    fd = ::open(tmp_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  }
  if (fd < 0) return fail("replay: cannot write " + written + ": " + std::strerror(errno));
  __gnu_cxx::stdio_filebuf<char> buffer(fd, std::ios::out, 1 << 16);  // closes `fd`
  std::ostream out(&buffer);
  // write_replay flushes what it wrote, so a reader gone is its error; the close can only fail.
  // The note of a fold on disk goes to stderr, or to stdout when the records go to stderr.
  std::ostream& notes = descriptor == STDERR_FILENO ? std::cout : std::cerr;
  auto records =
      gw::admin::write_replay(store.value()->store(), *until, out,
                              fold_options(flags, store.value()->scratch_dir() + "/fold", notes));
  // A file made here is synced before its rename, and the rename after it (helper 104: a power
  // loss could leave FILE empty or in part, where it was to be the old one or the whole new one).
  errno = 0;
  const bool closed =
      out.flush() && (direct || ::fsync(buffer.fd()) == 0) && buffer.close() != nullptr;
  const int close_error = errno;  // why, when the failing call said (an fsync's EIO)
  if (!records.ok()) return fail_output("replay", records.error());
  if (!closed) {
    return fail("replay: cannot write " + written +
                (close_error != 0 ? std::string(": ") + std::strerror(close_error) : ""));
  }
  if (!direct) {
    std::filesystem::rename(tmp_path, out_path, ec);
    if (ec) return fail("replay: cannot write " + out_path + ": " + ec.message());
    const std::string dir = std::filesystem::path(out_path).parent_path().string();
    if (!gw::fsync_dir(dir.empty() ? "." : dir)) {
      return fail("replay: cannot sync the directory of " + out_path);
    }
  }
  // Written into a descriptor or device (a terminal, stdout) the summary would run into the
  // records: it goes to stderr, or to stdout when the records go to stderr.
  (direct && descriptor != STDERR_FILENO ? std::cerr : std::cout)
      << "replay: " << records.value() << (records.value() == 1 ? " record" : " records")
      << " live after event " << *until << " written to " << out_path << "\n";
  return 0;
}

int check(int argc, char** argv) {
  gw::Flags flags({kDataDir, kFold});
  if (auto exit = parse(flags, argc, argv, 2, {"data-dir"})) return *exit;
  if (auto exit = bad_fold(flags)) return *exit;
  // A data dir that cannot be opened is a failure of the command (stderr), not a finding about a
  // store; one that cannot be read through (a corrupt block) is a finding.
  auto store = gw::admin::ReadOnlyStore::open(flags.get("data-dir"));
  if (!store.ok()) return fail("check: " + store.error().detail);
  auto report = gw::admin::check_store(store.value()->store(),
                                       fold_options(flags, store.value()->scratch_dir() + "/fold"));
  if (!report.ok()) {
    // The fold's own scratch database failed (its disk full, say): no finding about the store.
    if (report.error().detail.starts_with(gw::kFoldScratchFailed)) {
      return fail("check: " + report.error().detail);
    }
    std::cout << "check: FAIL: cannot read the store: " << report.error().detail << "\n";
    return 1;
  }
  const auto& r = report.value();
  if (!r.failure.empty()) {
    std::cout << "check: FAIL: " << r.failure << "\n";
    return 1;
  }
  std::cout << "check: OK: " << r.events << " events, hash chain intact; " << r.projection_keys
            << " projection keys equal a fresh replay";
  // So that the figure adds up with backup's, which copies these too.
  if (r.spent_counters != 0) std::cout << " (and " << r.spent_counters << " counters back at 0)";
  std::cout << "; " << gw::admin::describe(r.records) << "\n";
  return 0;
}

int backup(int argc, char** argv) {
  gw::Flags flags({kDataDir, {"out", "", "", "new or empty directory for the copy"}});
  if (auto exit = parse(flags, argc, argv, 2, {"data-dir", "out"})) return *exit;
  auto report = gw::admin::backup(flags.get("data-dir"), flags.get("out"));
  if (!report.ok()) return fail("backup: " + report.error().detail);
  const auto& r = report.value();
  std::cout << "backup: " << flags.get("out") << " holds "
            << (r.last_seq == 0 ? std::string("no events")
                                : "events 1.." + std::to_string(r.last_seq))
            << " (" << r.events << " events, " << r.projections << " projection keys, " << r.meta
            << " other keys); the tokens file is not included\n";
  return 0;
}

int rebuild(int argc, char** argv) {
  gw::Flags flags({kDataDir, kFold});
  if (auto exit = parse(flags, argc, argv, 2, {"data-dir"})) return *exit;
  if (auto exit = bad_fold(flags)) return *exit;
  // A fold on disk goes into <data-dir>/fold.tmp (gw::kFoldDir): on the data's disk, not $TMPDIR.
  auto report = gw::admin::rebuild(flags.get("data-dir"), fold_options(flags, ""));
  if (!report.ok()) return fail("rebuild: " + report.error().detail);
  const auto& r = report.value();
  if (!r.recovery_note.empty()) std::cerr << "gatewayctl: " << r.recovery_note << "\n";
  const double rate = r.seconds > 0 ? static_cast<double>(r.events) / r.seconds : 0;
  std::cout << std::fixed << std::setprecision(3) << "rebuild: " << r.events
            << " events replayed in " << r.seconds << " s (" << std::setprecision(0) << rate
            << " events/s, folded " << (r.on_disk ? "on disk" : "in memory") << ")\n"
            << "rebuild: " << gw::admin::describe(r.records) << "\n";
  if (r.answers_dropped != 0) {
    std::cout << "rebuild: " << gw::dropped_answers_note(r.answers_dropped) << "\n";
  }
  return 0;
}

int waf_check(int argc, char** argv) {
  gw::Flags flags({kDataDir, kFold});
  if (auto exit = parse(flags, argc, argv, 2, {"data-dir"})) return *exit;
  if (auto exit = bad_fold(flags)) return *exit;
  auto store = gw::admin::ReadOnlyStore::open(flags.get("data-dir"));
  if (!store.ok()) return fail("waf-check: " + store.error().detail);
  // Tenants' texts are parsed in the WAF sandbox's workers, as gatewayd parses them.
  auto sandbox = gw::sandbox::start_waf_sandbox();
  if (!sandbox.ok()) return fail("waf-check: " + sandbox.error().detail);
  auto report = gw::admin::waf_check(
      store.value()->store(),
      [&](std::string_view text) { return gw::sandbox::waf_problem(sandbox.value()->run(text)); },
      fold_options(flags, store.value()->scratch_dir() + "/fold"));
  if (!report.ok()) return fail("waf-check: " + report.error().detail);
  const auto& r = report.value();
  for (const auto& f : r.refused) {
    std::cout << "waf-check: REFUSED: " << f.profile_id << " (team " << f.team_id << ", hostname "
              << f.hostname << "): " << f.problem << "\n";
  }
  std::cout << "waf-check: " << (r.refused.empty() ? "OK" : "FAIL") << ": " << r.refused.size()
            << " of " << r.with_directives
            << " profiles with waf_custom_directives refused by this release's policy ("
            << r.profiles << " live profiles, events 1.." << r.last_seq << ")\n";
  return r.refused.empty() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  // In the WAF sandbox's zygote process (a run of this program that waf-check started), this is
  // all main() does.
  if (auto code = gw::sandbox::zygote_main_if_asked(argc, argv, {gw::sandbox::kWafTask})) {
    return *code;
  }
  // Before anything opens a file: a standard descriptor left closed would be the first one's.
  // /dev/null read-only, so that a write to a closed stdout still fails (EBADF).
  stdout_was_closed = (gw::occupy_closed_std_fds(O_RDONLY) & (1U << STDOUT_FILENO)) != 0;
  // A reader that goes away (`gatewayctl events | head`) is a failed write, not a signal that
  // would kill gatewayctl before it removes its scratch directory.
  signal(SIGPIPE, SIG_IGN);
  // A write past the file size limit (`ulimit -f`, systemd's LimitFSIZE) fails with EFBIG, which
  // the token commands answer by taking back what they wrote, instead of killing gatewayctl
  // halfway: a token create left part of a line in the file, a revoke its scratch file (helper 75).
  signal(SIGXFSZ, SIG_IGN);
  // Ctrl-C or a SIGTERM does not leave a scratch directory or a temporary file behind.
  gw::admin::remove_on_interrupt();
  const std::string command = argc >= 2 ? argv[1] : "";
  if (command == "token" && argc >= 3 && std::string(argv[2]) == "create") {
    return token_create(argc, argv);
  }
  if (command == "token" && argc >= 3 && std::string(argv[2]) == "revoke") {
    return token_revoke(argc, argv);
  }
  if (command == "events") return events(argc, argv);
  if (command == "replay") return replay(argc, argv);
  if (command == "check") return reported(command, check(argc, argv));
  if (command == "backup") return reported(command, backup(argc, argv));
  if (command == "rebuild") return reported(command, rebuild(argc, argv));
  if (command == "waf-check") return reported(command, waf_check(argc, argv));
  if (command == "--help" || command == "-h" || command == "help") {
    std::cout << kUsage;
    return 0;
  }
  if (!command.empty()) {
    std::string named = command;
    if (command == "token" && argc >= 3) named += std::string(" ") + argv[2];
    std::cerr << "gatewayctl: unknown command " << named << "\n";
  }
  return usage();
}
