#include "error_capture.h"

namespace bp::test {

ErrorCapture::ErrorCapture() : previous_(errorHandler()), previousContext_(errorHandlerContext()) {
  setErrorHandler(&ErrorCapture::record, this);
}

ErrorCapture::~ErrorCapture() { setErrorHandler(previous_, previousContext_); }

void ErrorCapture::record(ErrorCode code, const char* message, void* self) {
  ErrorCapture& capture = *static_cast<ErrorCapture*>(self);
  const std::lock_guard lock(capture.mutex_);
  capture.errors_.push_back({code, message});
}

size_t ErrorCapture::count() const {
  const std::lock_guard lock(mutex_);
  return errors_.size();
}

std::vector<ReportedError> ErrorCapture::errors() const {
  const std::lock_guard lock(mutex_);
  return errors_;
}

void ErrorCapture::clear() {
  const std::lock_guard lock(mutex_);
  errors_.clear();
}

std::string ErrorCapture::unlessOnly(ErrorCode code) const {
  const std::lock_guard lock(mutex_);
  if (errors_.size() == 1 && errors_[0].code == code) return {};
  std::string why = "expected one report of " + std::string(toString(code)) + ", got " +
                    std::to_string(errors_.size());
  for (const ReportedError& e : errors_)
    why += std::string("\n  ") + toString(e.code) + ": " + e.message;
  return why;
}

}  // namespace bp::test
