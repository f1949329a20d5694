#pragma once

#include <optional>
#include <string>
#include <vector>

namespace gw {

// Makes the entries of directory `dir` durable (a file created, renamed or removed in it): its
// fsync. False if it cannot be opened or synced, with errno saying why.
bool fsync_dir(const std::string& dir);

// The directories std::filesystem::create_directories(dir) would make: `dir` and each of its
// missing parents, deepest first (none if `dir` exists).
std::vector<std::string> missing_directories(const std::string& dir);

// Makes the entries of the directories `made` (as missing_directories named them, then made)
// durable, each in the directory that holds it: a directory made is lost to a power cut with
// what it holds until the one it was made in is synced. What failed (`cannot sync P, the
// directory M was made in: <errno's text>`); nullopt if nothing did. After a failure the
// directories of `made` that are still empty are removed, deepest first, so that the next try
// makes them, and syncs them, again: left in place, they would exist, and be synced by none
// (helper 124).
std::optional<std::string> sync_made_directories(const std::vector<std::string>& made);

}  // namespace gw
