// Hex encoding and SHA-256 (OpenSSL). Pure functions, thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace gw {

std::string to_hex(std::string_view bytes);
// The value of a hex digit, either case; -1 for any other character.
int hex_digit(char c);
// The bytes an even number of hex digits (either case) spell; nullopt for anything else.
std::optional<std::string> from_hex(std::string_view hex);
// Raw 32-byte SHA-256 digest of `data`, or of `first` followed by `second` (no copy joins them).
std::string sha256(std::string_view data);
std::string sha256(std::string_view first, std::string_view second);
inline std::string sha256_hex(std::string_view data) { return to_hex(sha256(data)); }
// Constant-time equality of two equally sized byte strings (false if sizes differ).
bool constant_time_equal(std::string_view a, std::string_view b);

}  // namespace gw
