// Whether this test program is built with AddressSanitizer or ThreadSanitizer (scripts/test.sh's
// second and third builds). A case whose size is there only to make a rare outcome likely (many
// rounds of a race, a long random log) runs smaller in those builds, where each step costs several
// times more; the release build keeps the full size, and the sanitizers still see every path.
#pragma once

namespace gw::testing {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

// Whether it is the ThreadSanitizer build. A case that only moves many bytes through paths other
// cases take under ThreadSanitizer with the same threads (see its skip) runs in the other two
// builds: ThreadSanitizer's cost there is its shadow memory, page by page, not a race it could see.
#if defined(__SANITIZE_THREAD__)
inline constexpr bool kThreadSanitized = true;
#else
inline constexpr bool kThreadSanitized = false;
#endif

}  // namespace gw::testing
