// fail(): how the MPI layer rejects a call. It throws the library's own
// bp::Error, so that a caller catches one type whether the check was made by
// a rank's BroadPhase or by the layer above it.
#pragma once

#include <broadphase/error.h>

#include <string>

namespace bp::mpi::detail {

[[noreturn]] inline void fail(ErrorCode code, const std::string& message) {
  throw Error(code, message);
}

}  // namespace bp::mpi::detail
