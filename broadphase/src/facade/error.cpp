#include <broadphase/error.h>

namespace bp {

const char* toString(ErrorCode code) {
  switch (code) {
    case ErrorCode::invalidBox: return "invalid box";
    case ErrorCode::invalidRay: return "invalid ray";
    case ErrorCode::staleHandle: return "stale handle";
    case ErrorCode::invalidArgument: return "invalid argument";
    case ErrorCode::capacityExceeded: return "capacity exceeded";
  }
  return "unknown error";
}

Error::Error(ErrorCode code, const std::string& message)
    : std::runtime_error(std::string("broadphase: ") + toString(code) + ": " + message),
      code_(code) {}

void throwError(ErrorCode code, const std::string& message) { throw Error(code, message); }

}  // namespace bp
