// Rejected calls in tests, the same way in a build with exceptions and in one
// without (-fno-exceptions): an ErrorCapture installs an error handler that
// records each report, so that a rejected call returns its fallback value
// instead of throwing or aborting, and the test checks the code.
//
//   expectError(ErrorCode::staleHandle, [&] { bp.remove(stale); });
//   const ProxyId id = expectError(ErrorCode::invalidBox, [&] { return bp.add(bad); });
//   EXPECT_EQ(id, ProxyId{});
//
// The throwing path (no handler, exceptions on) is tested under
// #if BP_TEST_EXCEPTIONS; the abort path (no handler, exceptions off) with
// death tests under #if !BP_TEST_EXCEPTIONS.
#pragma once

#include <broadphase/error.h>

#include <gtest/gtest.h>

#include <cstddef>
#include <mutex>
#include <source_location>
#include <string>
#include <type_traits>
#include <vector>

#if defined(__cpp_exceptions) || defined(__EXCEPTIONS)
#define BP_TEST_EXCEPTIONS 1
#else
#define BP_TEST_EXCEPTIONS 0
#endif

namespace bp::test {

struct ReportedError {
  ErrorCode code;
  std::string message;
};

// While alive, every rejected call is recorded here and returns its
// fallback. Restores the handler (and context) it replaced. Not nestable
// across threads: one capture at a time, as the handler is process-wide.
class ErrorCapture {
 public:
  ErrorCapture();
  ~ErrorCapture();
  ErrorCapture(const ErrorCapture&) = delete;
  ErrorCapture& operator=(const ErrorCapture&) = delete;

  size_t count() const;
  std::vector<ReportedError> errors() const;
  void clear();
  // Empty unless exactly one error with `code` was reported: then what was
  // reported otherwise, for a failure message.
  std::string unlessOnly(ErrorCode code) const;

 private:
  static void record(ErrorCode code, const char* message, void* self);

  mutable std::mutex mutex_;  // reports may come from several threads
  std::vector<ReportedError> errors_;
  ErrorHandler previous_;
  void* previousContext_;
};

// Runs fn() under an ErrorCapture and expects exactly one report, with
// `code`; returns what fn() returned (the call's fallback value).
template <class Fn>
auto expectError(ErrorCode code, Fn&& fn,
                 std::source_location where = std::source_location::current()) {
  ErrorCapture capture;
  auto check = [&] {
    if (std::string why = capture.unlessOnly(code); !why.empty())
      ADD_FAILURE_AT(where.file_name(), int(where.line())) << why;
  };
  if constexpr (std::is_void_v<std::invoke_result_t<Fn&>>) {
    fn();
    check();
  } else {
    auto result = fn();
    check();
    return result;
  }
}

#if BP_TEST_EXCEPTIONS
// No handler installed: fn() must throw bp::Error with `code`.
template <class Fn>
void expectThrow(ErrorCode code, Fn&& fn,
                 std::source_location where = std::source_location::current()) {
  try {
    fn();
    ADD_FAILURE_AT(where.file_name(), int(where.line()))
        << "no bp::Error thrown, expected " << toString(code);
  } catch (const Error& e) {
    if (e.code() != code)
      ADD_FAILURE_AT(where.file_name(), int(where.line()))
          << "expected " << toString(code) << ", got: " << e.what();
  }
}
#endif

}  // namespace bp::test
