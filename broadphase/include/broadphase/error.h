/// Errors. Every rejected call throws bp::Error before touching any state, so
/// the structure is exactly as it was (the tests run the validator after each
/// rejected call to prove it). The code says what kind of misuse it was; the
/// message says which value and why.
///
/// Cheap checks for release builds that would rather not throw: isValid(box),
/// describeInvalidRay(), and the structures' contains(ProxyId).
#pragma once

#include <stdexcept>
#include <string>

namespace bp {

enum class ErrorCode {
  invalidBox,        ///< NaN/inf, inverted, or beyond kMaxCoordinate
  invalidRay,        ///< zero/NaN direction, length <= 0 or not finite, bad origin
  staleHandle,       ///< removed, never issued, or from another structure
  invalidArgument,   ///< anything else: thread count, k = 0, span sizes differ...
  capacityExceeded,  ///< a bounded resource (pair budget, proxy count) ran out
};

const char* toString(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message);
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

[[noreturn]] void throwError(ErrorCode code, const std::string& message);

}  // namespace bp
