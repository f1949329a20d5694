// API tokens. The tokens file holds one line per token: `<sha256-hex of token> <tenant> <name>`
// (blank lines and lines starting with '#' are ignored); tokens themselves are never stored.
// TokenStore re-reads the file when it changes (checked at most every 250 ms, and at once when a
// presented token is unknown, so a token created with gatewayctl works immediately; a file it
// could not read is tried again at every check; while it cannot be read for want of descriptors or
// memory, the tokens read before stay accepted, for at most kKeepLastFor: a token removed meanwhile
// is not accepted for longer than that). It accepts no token from a file that group or
// others may write or that a user other than root or its own owns: they could add one for any
// tenant. A digest on two lines that disagree on the tenant or name is accepted from neither.
// Thread-safe: lookups read an immutable snapshot published through an atomic shared_ptr.
#pragma once

#include <atomic>
#include <chrono>
#include <istream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/error.h"

namespace gw::http {

struct TokenInfo {
  std::string tenant;
  std::string name;
};

class TokenStore {
 public:
  // How long the tokens read before stay accepted while the file cannot be read for want of
  // descriptors or memory; after that, none is until it can be read.
  static constexpr std::chrono::milliseconds kKeepLastFor{60'000};

  explicit TokenStore(std::string path, std::chrono::milliseconds keep_last_for = kKeepLastFor);

  // The token's owner, if the token (the raw secret, as presented) is known.
  std::optional<TokenInfo> find(std::string_view token);

 private:
  struct Entry {
    std::string digest;  // raw 32-byte SHA-256
    TokenInfo info;
  };
  using Map = std::unordered_map<std::string, Entry>;  // keyed by digest
  void maybe_reload(bool force);
  // Opens the tokens file, checks the file opened (untrusted_file_problem) and reads it whole into
  // *text; *stamp becomes the opened file's. Returns why no token may come from it, or "": a failed
  // open or read sets *error to its errno and *read_again.
  std::string read_checked(std::string* stamp, std::string* text, int* error,
                           bool* read_again) const;
  void read_lines(std::istream& in, Map* map) const;
  // The tokens now, as the calling thread last took them: valid until its next call.
  const Map& current_map();
  void replace_map(std::shared_ptr<const Map> map);

  std::string path_;
  int64_t keep_last_ms_;
  // Lookups take no lock: each thread keeps the map it last took and takes map_mu_ only when
  // map_generation_, a number no other map of any TokenStore had, says a reload replaced it.
  // (std::atomic<std::shared_ptr> raced there: in libstdc++ 12 its load releases its lock bit
  // with a relaxed store, which orders nothing; helper 120's ThreadSanitizer report.)
  std::mutex map_mu_;
  std::shared_ptr<const Map> map_;  // GUARDED_BY(map_mu_)
  std::atomic<uint64_t> map_generation_{0};
  std::atomic<int64_t> last_check_ms_{0};
  std::mutex reload_mu_;            // serializes reloads only; never held by lookups
  std::string file_stamp_;          // GUARDED_BY(reload_mu_): what tells a change (stamp_of)
  std::string problem_;             // GUARDED_BY(reload_mu_): why no token is accepted, or ""
  std::string problem_stamp_;       // GUARDED_BY(reload_mu_): the stamp problem_ was said for
  int64_t short_since_ms_ = -1;     // GUARDED_BY(reload_mu_): since when reads have run short
};

// Appends a new token for `tenant` to the tokens file (created 0600 if missing; an existing file
// keeps its mode), under a lock on the file (flock) taken once the path still names the file
// locked, and returns the token. Fails with kValidationFailed for a bad tenant or name
// (its field errors name `tenant` and `name`), kUnavailable if the file cannot be written or may
// be written by group or others (TokenStore accepts no token from such a file).
Result<std::string> create_token(const std::string& path, const std::string& tenant,
                                 const std::string& name);

// Removes every token of `tenant` named `name` from the tokens file and returns how many there
// were: the file is written anew to `scratch` (a new file's path in its directory) and renamed
// over it, under the lock create_token takes, keeping every other line, its mode and its owner.
// Fails with kValidationFailed for a bad tenant or name, kNotFound if it holds no such token
// (nothing is written), kUnavailable if it cannot be read or written (nothing is revoked) or may
// be written by group or others.
Result<size_t> revoke_tokens(const std::string& path, const std::string& tenant,
                             const std::string& name, const std::string& scratch);

// Parses "Bearer <token>" (scheme case-insensitive); nullopt if malformed.
std::optional<std::string_view> bearer_token(std::string_view header);

// Whether the header sends something as a bearer token, well formed or not ("Bearer" and
// anything but blanks): what RFC 6750 3.1 answers with `error="invalid_token"` when refused.
bool sends_bearer_token(std::string_view header);

}  // namespace gw::http
