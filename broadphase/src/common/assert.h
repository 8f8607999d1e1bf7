// BP_ASSERT(condition): an invariant the code relies on, stated where it is
// relied on. Checked in Debug builds and in the sanitizer builds (CMake
// defines BP_CHECK_INVARIANTS with BP_SANITIZE, so CI's ASan, UBSan and TSan
// runs of every test check them); compiled out of Release builds, where the
// condition is not evaluated. A failed check names the condition, file and
// line on stderr and aborts: it is a bug in this library, never bad input
// (bad input is reported through error.h and leaves the state intact).
#pragma once

#include <cstdio>
#include <cstdlib>

#if !defined(NDEBUG) || defined(BP_CHECK_INVARIANTS)
#define BP_ASSERTS_ON 1
#define BP_ASSERT(condition)              \
  (static_cast<bool>(condition) ? void(0) \
                                : ::bp::detail::assertFailed(#condition, __FILE__, __LINE__))
#else
#define BP_ASSERTS_ON 0
#define BP_ASSERT(condition) static_cast<void>(0)
#endif

namespace bp::detail {

[[noreturn]] inline void assertFailed(const char* condition, const char* file, int line) {
  std::fprintf(stderr, "broadphase: invariant broken: %s (%s:%d)\n", condition, file, line);
  std::abort();
}

}  // namespace bp::detail
