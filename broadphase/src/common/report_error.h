// The one place every rejected call of the library goes through (error.h
// describes the three modes). A call site reports, then returns its
// documented fallback value without changing anything:
//
//   if (!isValid(box)) {
//     reportError(ErrorCode::invalidBox, "move: " + describeInvalid(box));
//     return;
//   }
#pragma once

#include <broadphase/error.h>

#include <string>

// Whether this translation unit is compiled with exceptions (g++ and clang
// define __cpp_exceptions, and __EXCEPTIONS, unless -fno-exceptions).
#if defined(__cpp_exceptions) || defined(__EXCEPTIONS)
#define BP_HAS_EXCEPTIONS 1
#else
#define BP_HAS_EXCEPTIONS 0
#endif

namespace bp {

// Calls the installed handler and returns; with no handler, throws
// bp::Error (built with exceptions) or prints the error to stderr and aborts
// (built without). So it returns only when a handler returned.
void reportError(ErrorCode code, const std::string& message);

}  // namespace bp
