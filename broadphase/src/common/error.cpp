#include <broadphase/error.h>

#include "common/report_error.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace bp {

const char* toString(ErrorCode code) {
  switch (code) {
    case ErrorCode::invalidBox: return "invalid box";
    case ErrorCode::invalidRay: return "invalid ray";
    case ErrorCode::staleHandle: return "stale handle";
    case ErrorCode::invalidArgument: return "invalid argument";
    case ErrorCode::capacityExceeded: return "capacity exceeded";
    case ErrorCode::invalidState: return "invalid state";
  }
  return "unknown error";
}

Error::Error(ErrorCode code, const std::string& message)
    : std::runtime_error(std::string("broadphase: ") + toString(code) + ": " + message),
      code_(code) {}

namespace {

// The handler and its context change together: a mutex guards the pair. Only
// setErrorHandler and the error paths take it, never a call that succeeds.
struct HandlerSlot {
  std::mutex mutex;
  ErrorHandler handler = nullptr;
  void* context = nullptr;
};

HandlerSlot& handlerSlot() {
  static HandlerSlot slot;
  return slot;
}

}  // namespace

void setErrorHandler(ErrorHandler handler, void* context) {
  HandlerSlot& slot = handlerSlot();
  const std::lock_guard lock(slot.mutex);
  slot.handler = handler;
  slot.context = context;
}

ErrorHandler errorHandler() {
  HandlerSlot& slot = handlerSlot();
  const std::lock_guard lock(slot.mutex);
  return slot.handler;
}

void* errorHandlerContext() {
  HandlerSlot& slot = handlerSlot();
  const std::lock_guard lock(slot.mutex);
  return slot.context;
}

void reportError(ErrorCode code, const std::string& message) {
  ErrorHandler handler;
  void* context;
  {
    HandlerSlot& slot = handlerSlot();
    const std::lock_guard lock(slot.mutex);
    handler = slot.handler;
    context = slot.context;
  }
  // Called without the lock: the handler may install another handler.
  if (handler != nullptr) {
    handler(code, message.c_str(), context);
    return;
  }
#if BP_HAS_EXCEPTIONS
  throw Error(code, message);
#else
  std::fprintf(stderr, "broadphase: %s: %s\n", toString(code), message.c_str());
  std::fflush(stderr);
  std::abort();
#endif
}

}  // namespace bp
