/// Errors. Every rejected call is reported before it touches any state, so
/// the structure is exactly as it was (the tests run the validator after each
/// rejected call to prove it). The code says what kind of misuse it was; the
/// message says which value and why.
///
/// How a rejected call is reported depends on two things (docs/errors.md,
/// "Without exceptions"):
///   1. An error handler is installed (setErrorHandler): it is called with the
///      code and the message. If it returns, the rejected call returns at once
///      without any effect, with the fallback value its documentation names
///      (an invalid ProxyId{}, a miss, an empty result...). The handler may
///      also throw (in a build with exceptions) or abort.
///   2. No handler, and the library was built with exceptions: the call
///      throws bp::Error.
///   3. No handler, and the library was built with -fno-exceptions: the call
///      prints "broadphase: <code>: <message>" to stderr and aborts.
///
/// Cheap checks for callers that would rather not be rejected at all:
/// isValid(box), describeInvalidRay(), and the structures' contains(ProxyId).
///
/// This header compiles with and without exceptions; which of modes 2 and 3
/// applies is decided when the library itself is built (CMake option
/// BP_EXCEPTIONS), not by the flags of the code that includes it.
#pragma once

#include <stdexcept>
#include <string>

namespace bp {

/// What kind of misuse a rejected call was.
enum class ErrorCode {
  invalidBox,        ///< NaN/inf, inverted, or beyond kMaxCoordinate
  invalidRay,        ///< zero/NaN direction, length <= 0 or not finite, bad origin
  staleHandle,       ///< removed, never issued, or from another structure
  invalidArgument,   ///< anything else: thread count, k = 0, span sizes differ...
  capacityExceeded,  ///< a bounded resource (pair budget, proxy count) ran out
  invalidState,      ///< bytes given to loadState that are not a whole, valid snapshot
};

/// The code in words ("invalid box", "stale handle"...): a static string.
const char* toString(ErrorCode code);

/// What a build with exceptions throws when no handler is installed. what()
/// reads "broadphase: <code>: <message>".
class Error : public std::runtime_error {
 public:
  /// what() becomes "broadphase: " + toString(code) + ": " + message.
  Error(ErrorCode code, const std::string& message);
  /// The kind of misuse.
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

/// Called for every rejected call, on the thread that made it, with the
/// message (valid during the call only) and the context given to
/// setErrorHandler. Several threads may call it at once (concurrent queries).
using ErrorHandler = void (*)(ErrorCode code, const char* message, void* context);

/// Installs the process-wide handler (nullptr: none, the default) and its
/// context. The pair is replaced atomically: a report sees either the old
/// pair or the new one. Meant to be set once at start-up.
void setErrorHandler(ErrorHandler handler, void* context = nullptr);
/// The handler installed now, or nullptr.
ErrorHandler errorHandler();
/// The context installed with it (so that a caller can put both back).
void* errorHandlerContext();

}  // namespace bp
