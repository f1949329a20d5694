#include "http/tokens.h"

#include <fcntl.h>
#include <openssl/rand.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <sstream>
#include <unordered_set>

#include "commands/decide.h"
#include "commands/parse.h"
#include "core/clock.h"
#include "core/fsync_dir.h"
#include "core/hex.h"
#include "core/text.h"
#include "core/unique_fd.h"

namespace gw::http {

namespace {

// What tells a changed file: a `chmod` or `chown` changes the mode or owner and the status change
// time, not the modification time, and an edit in place that keeps the size and puts the
// modification time back still changes the status change time.
std::string stamp_of(const struct stat& st) {
  return std::to_string(st.st_ino) + ":" + std::to_string(st.st_size) + ":" +
         std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec) + ":" +
         std::to_string(st.st_ctim.tv_sec) + "." + std::to_string(st.st_ctim.tv_nsec) + ":" +
         std::to_string(st.st_mode) + ":" + std::to_string(st.st_uid);
}

// Why no token may come from a file of status `st` (whoever may write the tokens file can add a
// token for any tenant), or "". With `owner`, the file must also be owned by root or by the user
// this program runs as (gatewayd; gatewayctl, which only appends, may run as another user).
std::string untrusted_file_problem(const std::string& path, const struct stat& st, bool owner) {
  if (!S_ISREG(st.st_mode)) return path + " is not a regular file";
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return path +
           " may be written by group or others, who could add a token for any tenant (chmod go-w " +
           path + ")";
  }
  if (owner && st.st_uid != 0 && st.st_uid != ::geteuid()) {
    return path + " is owned by user " + std::to_string(st.st_uid) +
           ", who could add a token for any tenant; it must be owned by root or by user " +
           std::to_string(::geteuid()) + ", who runs this program (chown)";
  }
  return "";
}

// A failure that comes from the process or the machine running short, not from the file.
bool is_resource_shortage(int error) {
  return error == EMFILE || error == ENFILE || error == ENOMEM || error == EINTR || error == EAGAIN;
}

// Why `name` cannot name a token ("must be ..."); nullptr when it can. The verifier's actor is
// reserved; `any_case`, in any case (gatewayctl makes no `Verifier`, whose events would pass for
// the verifier's at a glance; gatewayd still takes one an earlier release made).
const char* name_problem(std::string_view name, bool any_case = false) {
  if (any_case ? ascii_iequals(name, kVerifierActor) : name == kVerifierActor) {
    return any_case ? "verifier is reserved, in any case: the verifier's events carry that actor"
                    : "verifier is reserved: the verifier's events carry that actor";
  }
  bool charset = !name.empty() && name.size() <= 64;
  for (char c : name) {
    charset = charset &&
              (std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '.' || c == '-');
  }
  return charset ? nullptr : "must be 1-64 characters of A-Z a-z 0-9 _ . -";
}

// The raw SHA-256 digest a line's first field spells in hex, either case (`sha256sum` writes
// lower case, other tools upper); nullopt if it is not one.
std::optional<std::string> digest_of(std::string_view field) {
  if (field.size() != 64) return std::nullopt;
  return from_hex(field);
}

// A line of the tokens file that names a token.
struct TokenLine {
  std::string digest;  // raw 32-byte SHA-256
  std::string tenant;
  std::string name;
};

// `line` (without its newline) as gatewayd reads it: the token it names, or nullopt with *why
// empty for a comment or an empty line, or saying why for a damaged one.
std::optional<TokenLine> parse_token_line(std::string_view line, std::string* why) {
  why->clear();
  if (line.empty() || line[0] == '#') return std::nullopt;
  std::istringstream fields{std::string(line)};
  std::string digest, tenant, name, extra;
  std::optional<std::string> raw;
  if (!(fields >> digest >> tenant >> name) || (fields >> extra)) {
    *why = "expected three fields: <sha256 hex> <tenant> <name>";
  } else if (!(raw = digest_of(digest))) {
    *why = "the first field is not a SHA-256 digest in hex (64 characters 0-9 a-f)";
  } else if (!valid_tenant_id(tenant)) {
    *why = "the tenant is not " + std::string(kTenantIdRule);
  } else if (const char* bad = name_problem(name)) {
    *why = std::string("the name ") + bad;
  }
  if (!why->empty()) return std::nullopt;
  return TokenLine{std::move(*raw), std::move(tenant), std::move(name)};
}

// Reads `fd` from where it is to its end into *text; 0, or the errno of the failure.
int read_all(int fd, std::string* text) {
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n > 0) {
      text->append(buffer, static_cast<size_t>(n));
    } else if (n == 0) {
      return 0;
    } else if (errno != EINTR) {
      return errno;
    }
  }
}

}  // namespace

TokenStore::TokenStore(std::string path, std::chrono::milliseconds keep_last_for)
    : path_(std::move(path)), keep_last_ms_(keep_last_for.count()) {
  replace_map(std::make_shared<const Map>());
  maybe_reload(true);
}

void TokenStore::replace_map(std::shared_ptr<const Map> map) {
  static std::atomic<uint64_t> generations{0};
  std::lock_guard<std::mutex> lock(map_mu_);
  map_ = std::move(map);
  map_generation_.store(generations.fetch_add(1, std::memory_order_relaxed) + 1,
                        std::memory_order_release);
}

const TokenStore::Map& TokenStore::current_map() {
  struct Taken {
    uint64_t generation = 0;  // no map has 0
    std::shared_ptr<const Map> map;
  };
  thread_local Taken taken;
  if (taken.generation != map_generation_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(map_mu_);
    taken.map = map_;
    taken.generation = map_generation_.load(std::memory_order_relaxed);
  }
  return *taken.map;
}

// The tokens of the lines of `in` into *map. A line gatewayd cannot use is skipped and named on
// stderr with its number and why (an operator who edited the file by hand learns why a token is
// refused; the line itself may hold a secret, so only its number).
void TokenStore::read_lines(std::istream& in, Map* map) const {
  // Digests seen, with the line that gave each; a digest on two lines that disagree on the tenant
  // or the name is ambiguous and accepted from neither.
  std::unordered_map<std::string, size_t> lines;
  std::unordered_set<std::string> conflicting;
  std::string line;
  for (size_t number = 1; std::getline(in, line); ++number) {
    std::string why;
    const std::optional<TokenLine> token = parse_token_line(line, &why);
    if (!token && why.empty()) continue;  // a comment or an empty line
    if (token) {
      auto [seen, first] = lines.emplace(token->digest, number);
      // A digest seen before is in the map unless an earlier conflict took it out.
      if (!first && (conflicting.count(token->digest) != 0 ||
                     map->at(token->digest).info.tenant != token->tenant ||
                     map->at(token->digest).info.name != token->name)) {
        why = "the same token as line " + std::to_string(seen->second) +
              " with another tenant or name; neither line is accepted";
        conflicting.insert(token->digest);
        map->erase(token->digest);
      }
    }
    if (!why.empty()) {
      std::fprintf(stderr, "gatewayd: %s line %zu ignored: %s\n", path_.c_str(), number,
                   why.c_str());
      continue;
    }
    (*map)[token->digest] = Entry{token->digest, TokenInfo{token->tenant, token->name}};
  }
}

std::string TokenStore::read_checked(std::string* stamp, std::string* text, int* error,
                                     bool* read_again) const {
  const auto failed = [&](int errno_value) {
    *error = errno_value;
    *read_again = true;
    return "cannot read " + path_ + ": " + std::strerror(errno_value);
  };
  const UniqueFd fd(::open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (fd.get() < 0) return failed(errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return failed(errno);
  *stamp = stamp_of(st);
  if (std::string problem = untrusted_file_problem(path_, st, true); !problem.empty()) {
    return problem;
  }
  if (const int read_error = read_all(fd.get(), text); read_error != 0) {
    text->clear();
    return failed(read_error);
  }
  return "";
}

void TokenStore::maybe_reload(bool force) {
  const int64_t now = steady_millis();
  if (!force && now - last_check_ms_.load(std::memory_order_relaxed) < 250) return;
  std::lock_guard<std::mutex> lock(reload_mu_);
  last_check_ms_.store(now, std::memory_order_relaxed);
  struct stat st {};
  int stat_error = 0;
  std::string stamp = "missing";
  if (::stat(path_.c_str(), &st) == 0) {
    stamp = stamp_of(st);
  } else {
    stat_error = errno;
  }
  if (stamp == file_stamp_) return;
  auto map = std::make_shared<Map>();
  // Why no token is accepted now ("" when the file was read). Said once for each change of the
  // file or the reason. A missing file is said too (a restore that left the tokens file behind, or
  // a mistyped --tokens-file, would otherwise be 401s and nothing else); it may be created later.
  std::string problem;
  bool read_again = false;  // the file could not be read: try again at the next check
  int error = 0;            // the errno of a failed stat, open or read
  std::string text;
  if (stamp == "missing") {
    error = stat_error;
    problem = path_ + ": " + std::strerror(stat_error);
    if (stat_error == ENOENT)
      problem += " (gatewayctl token create --tokens-file " + path_ + " makes it)";
  } else {
    // Checked before it is opened (no FIFO or device is opened), and again as opened: the path
    // may name another file by then (a rename in a directory others may write), and the tokens
    // are read from the file checked, never from the path again. A FIFO renamed in between is
    // opened without waiting for a writer (O_NONBLOCK), then refused; opened blocking, it held
    // every request behind the reload for good (helper 156, as the check before took the tokens
    // of a file owned by another user, renamed in between).
    problem = untrusted_file_problem(path_, st, true);
    if (problem.empty()) problem = read_checked(&stamp, &text, &error, &read_again);
  }
  if (problem.empty()) {
    std::istringstream in(text);
    read_lines(in, map.get());
  }
  // Out of descriptors or memory for a moment (a flood of connections, say): that says nothing of
  // the file, so the tokens read before stay accepted until it can be read, but not for longer
  // than keep_last_ms_: the file may have changed to take a token away. Every other failure (the
  // file missing, unsafe, unreadable by its mode, damaged) accepts no token.
  bool keep_last = false;
  if (is_resource_shortage(error)) {
    read_again = true;
    if (short_since_ms_ < 0) short_since_ms_ = now;
    keep_last = now - short_since_ms_ <= keep_last_ms_;
    if (!keep_last) {
      problem +=
          " for over " + (keep_last_ms_ % 1000 == 0 ? std::to_string(keep_last_ms_ / 1000) + " s"
                                                    : std::to_string(keep_last_ms_) + " ms");
    }
  } else {
    short_since_ms_ = -1;
  }
  if (!problem.empty() && (stamp != problem_stamp_ || problem != problem_)) {
    if (keep_last) {
      std::fprintf(stderr,
                   "gatewayd: %s; the tokens read before (%zu) are still accepted until it can "
                   "be read\n",
                   problem.c_str(), current_map().size());
    } else {
      std::fprintf(stderr, "gatewayd: no token accepted: %s\n", problem.c_str());
    }
  }
  if (problem.empty() && !problem_.empty()) {
    // After a "no token accepted" (or tokens kept through a shortage): said, as the trouble was.
    std::fprintf(stderr, "gatewayd: tokens accepted again: %s read, %zu token%s\n", path_.c_str(),
                 map->size(), map->size() == 1 ? "" : "s");
  }
  problem_ = problem;
  problem_stamp_ = stamp;
  file_stamp_ = read_again ? std::string() : std::move(stamp);
  if (!keep_last) replace_map(std::move(map));
}

std::optional<TokenInfo> TokenStore::find(std::string_view token) {
  maybe_reload(false);
  const std::string digest = sha256(token);
  for (int attempt = 0; attempt < 2; ++attempt) {
    const Map& map = current_map();
    auto it = map.find(digest);
    // The hash-table lookup only narrows the candidates; equality is confirmed in constant time.
    if (it != map.end() && constant_time_equal(it->second.digest, digest)) return it->second.info;
    if (attempt == 0) maybe_reload(true);
  }
  return std::nullopt;
}

namespace {

// Opens the tokens file at `path` with `flags` (O_CREAT makes it 0600) and takes its lock, for
// one change at a time, once the path still names the file locked: a revoke replaces the file by
// a rename, so whoever waited for the lock meanwhile holds that of a file no path names any
// more, and looks again. (An append to it was lost: helper 74 saw 10 of 90 tokens printed, exit
// 0, and never accepted, beside revokes made with `sed -i`, which renames too.)
Result<int> open_locked(const std::string& path, int flags) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int fd = ::open(path.c_str(), flags | O_CLOEXEC, 0600);
    if (fd < 0) {
      return make_error(Code::kUnavailable, "cannot open " + path + ": " + std::strerror(errno));
    }
    if (::flock(fd, LOCK_EX) != 0) {
      const int error = errno;
      ::close(fd);
      return make_error(Code::kUnavailable, "cannot lock " + path + ": " + std::strerror(error));
    }
    struct stat locked {};
    struct stat named {};
    if (::fstat(fd, &locked) == 0 && ::stat(path.c_str(), &named) == 0 &&
        locked.st_dev == named.st_dev && locked.st_ino == named.st_ino) {
      return fd;
    }
    ::close(fd);
  }
  return make_error(Code::kUnavailable, path + " was replaced 100 times while this waited for it");
}

// Field errors for a bad tenant or name, as create_token (`any_case`: a new name) and
// revoke_tokens give them.
std::optional<Error> flag_problems(const std::string& tenant, const std::string& name,
                                   bool any_case) {
  FieldErrors errors;
  if (!valid_tenant_id(tenant)) errors.add("tenant", "must be " + std::string(kTenantIdRule));
  if (const char* why = name_problem(name, any_case)) errors.add("name", why);
  if (errors.empty()) return std::nullopt;
  return errors.to_error();
}

// Each line of `text` (its newline included, if it has one) with the token it names as gatewayd
// reads it (parse_token_line), or nullopt for a comment, an empty or a damaged line.
std::vector<std::pair<std::string_view, std::optional<TokenLine>>> token_lines(
    std::string_view text) {
  std::vector<std::pair<std::string_view, std::optional<TokenLine>>> lines;
  for (size_t at = 0; at < text.size();) {
    const size_t end = std::min(text.find('\n', at), text.size() - 1) + 1;
    const std::string_view line = text.substr(at, end - at);
    at = end;
    std::string why;
    lines.emplace_back(
        line, parse_token_line(line.substr(0, line.size() - (line.ends_with('\n') ? 1 : 0)), &why));
  }
  return lines;
}

// Writes all of `bytes` to `fd`; 0, or the errno of the failure.
int write_all(int fd, std::string_view bytes) {
  for (size_t done = 0; done < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n == 0) {
      return ENOSPC;
    } else if (errno != EINTR) {
      return errno;  // a write cut short is followed by one that says why
    }
  }
  return 0;
}

}  // namespace

Result<std::string> create_token(const std::string& path, const std::string& tenant,
                                 const std::string& name) {
  if (auto problems = flag_problems(tenant, name, true)) return *problems;
  unsigned char secret[32];
  if (RAND_bytes(secret, sizeof(secret)) != 1) return make_error(Code::kInternal, "no randomness");
  std::string token =
      "gw_" + to_hex(std::string_view(reinterpret_cast<const char*>(secret), sizeof(secret)));
  std::string line = sha256_hex(token) + " " + tenant + " " + name + "\n";
  // One change at a time: a failed append puts the file back to the size it had, which must not
  // cut off a line another gatewayctl appended meanwhile.
  auto locked = open_locked(path, O_RDWR | O_CREAT | O_APPEND);
  if (!locked.ok()) return locked.error();
  const int fd = locked.value();
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return make_error(Code::kUnavailable, "cannot stat " + path);
  }
  if (auto problem = untrusted_file_problem(path, st, false); !problem.empty()) {
    ::close(fd);
    return make_error(Code::kUnavailable, problem);
  }
  // A name is the actor of its token's events, so one names one token of its tenant: two of one
  // name wrote events no audit could tell apart (helper 103), and `token revoke` takes both.
  std::string text;
  if (const int error = read_all(fd, &text); error != 0) {
    ::close(fd);
    return make_error(Code::kUnavailable, "cannot read " + path + ": " + std::strerror(error));
  }
  for (const auto& entry : token_lines(text)) {
    const std::optional<TokenLine>& held = entry.second;
    if (held && held->tenant == tenant && held->name == name) {
      ::close(fd);
      return make_error(Code::kPreconditionFailed,
                        "tenant " + tenant + " has a token named " + name + " in " + path +
                            " already: give another --name (a name is the actor of its token's "
                            "events), or revoke that token first");
    }
  }
  // A file edited by hand may lack its last newline: the new line must not join the last one.
  char last = '\n';
  if (st.st_size > 0 && ::pread(fd, &last, 1, st.st_size - 1) == 1 && last != '\n')
    line.insert(line.begin(), '\n');
  int error = write_all(fd, line);
  if (error == 0 && ::fsync(fd) != 0) error = errno;
  // A file this made has its entry synced too, before the token is printed (helper 104): in the
  // directory it was made in, which for a path through symlinks is where they lead (the
  // descriptor's own path), not the one the path names first.
  std::error_code ec;
  const std::filesystem::path made =
      std::filesystem::read_symlink("/proc/self/fd/" + std::to_string(fd), ec);
  const std::string dir = (ec ? std::filesystem::path(path) : made).parent_path().string();
  const bool entry_synced = error != 0 || st.st_size > 0 || fsync_dir(dir.empty() ? "." : dir);
  if (error != 0) {
    // Part of a line (a full disk took the write up to the end of its last block) that gatewayd
    // would name at every read: the file is put back to what it was.
    const bool restored = ::ftruncate(fd, st.st_size) == 0 && ::fsync(fd) == 0;
    ::close(fd);
    return make_error(Code::kUnavailable,
                      "cannot write " + path + ": " + std::strerror(error) +
                          (restored ? "" : "; the file may end in part of a line"));
  }
  if (!entry_synced) {
    // The new file stays, with the line: its token is not printed, so no one can use it.
    ::close(fd);
    return make_error(Code::kUnavailable,
                      "cannot sync the directory of " + path +
                          ", which this made: no token was printed, and its line stays (revoke "
                          "it with token revoke --name " +
                          name + " before trying again)");
  }
  ::close(fd);
  return token;
}

Result<size_t> revoke_tokens(const std::string& path, const std::string& tenant,
                             const std::string& name, const std::string& scratch) {
  // A `Verifier` an earlier release made can be revoked.
  if (auto problems = flag_problems(tenant, name, false)) return *problems;
  // Without O_NONBLOCK a FIFO in the file's place held the open until a writer came.
  auto locked = open_locked(path, O_RDONLY | O_NONBLOCK);
  if (!locked.ok()) return locked.error();
  // Closing it lets the next change go on, so only once the file is in place.
  const UniqueFd held(locked.value());
  const int fd = held.get();
  struct stat st {};
  if (::fstat(fd, &st) != 0) return make_error(Code::kUnavailable, "cannot stat " + path);
  if (auto problem = untrusted_file_problem(path, st, false); !problem.empty()) {
    return make_error(Code::kUnavailable, problem);
  }
  std::string text;
  if (const int error = read_all(fd, &text); error != 0) {
    return make_error(Code::kUnavailable, "cannot read " + path + ": " + std::strerror(error));
  }
  const auto lines = token_lines(text);
  std::unordered_set<std::string> revoked_digests;
  for (const auto& [line, token] : lines) {
    if (token && token->tenant == tenant && token->name == name) {
      revoked_digests.insert(token->digest);
    }
  }
  if (revoked_digests.empty()) {
    return make_error(Code::kNotFound,
                      "no token of tenant " + tenant + " named " + name + " in " + path);
  }
  // Every line of a token revoked goes, whatever tenant and name it gives: gatewayd accepts a
  // digest from none of two lines that disagree, so leaving the other line would have made the
  // token work for its tenant (helper 75). Every other line is kept as it is: comments, blank
  // and damaged lines too.
  std::string kept;
  kept.reserve(text.size());
  for (const auto& [line, token] : lines) {
    if (!token || revoked_digests.count(token->digest) == 0) kept += line;
  }
  // The file is replaced whole by a rename, so gatewayd reads either the old file or the new one,
  // never a part; the new one has the old one's mode and owner.
  // A file already there by that name was left by a gatewayctl of the same process id that was
  // killed (in another PID namespace, say): only the holder of the lock writes one.
  ::unlink(scratch.c_str());
  const int out = ::open(scratch.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (out < 0) {
    return make_error(Code::kUnavailable, "cannot create " + scratch + ": " + std::strerror(errno));
  }
  int error = 0;
  if (::fchown(out, st.st_uid, st.st_gid) != 0 && st.st_uid != ::geteuid()) error = errno;
  if (error == 0 && ::fchmod(out, st.st_mode & 07777) != 0) error = errno;
  if (error == 0) error = write_all(out, kept);
  if (error == 0 && ::fsync(out) != 0) error = errno;
  ::close(out);
  if (error == 0 && ::rename(scratch.c_str(), path.c_str()) != 0) error = errno;
  if (error != 0) {
    ::unlink(scratch.c_str());
    return make_error(Code::kUnavailable, "cannot write " + path + ": " + std::strerror(error) +
                                              "; no token was revoked");
  }
  // The rename made durable: a crash now does not bring the tokens back.
  const std::string dir = std::filesystem::path(path).parent_path().string();
  if (!fsync_dir(dir.empty() ? "." : dir)) {
    return make_error(Code::kUnavailable,
                      "cannot sync the directory of " + path +
                          ": the tokens are revoked, but a crash now could bring them back");
  }
  return revoked_digests.size();
}

namespace {

// What follows "Bearer " (scheme case-insensitive), blanks trimmed; nullopt for another scheme.
std::optional<std::string_view> bearer_credentials(std::string_view header) {
  constexpr std::string_view kScheme = "bearer ";
  if (header.size() <= kScheme.size() ||
      !ascii_iequals(header.substr(0, kScheme.size()), kScheme)) {
    return std::nullopt;
  }
  return trim_blanks(header.substr(kScheme.size()));
}

}  // namespace

bool sends_bearer_token(std::string_view header) {
  const std::optional<std::string_view> credentials = bearer_credentials(header);
  return credentials && !credentials->empty();
}

std::optional<std::string_view> bearer_token(std::string_view header) {
  const std::optional<std::string_view> credentials = bearer_credentials(header);
  if (!credentials) return std::nullopt;
  std::string_view token = *credentials;
  if (token.empty() || token.size() > 512) return std::nullopt;
  for (char c : token) {
    if (c <= ' ' || c >= 127) return std::nullopt;
  }
  return token;
}

}  // namespace gw::http
