// wide::available (wide_available.h).
#include "common/wide_available.h"

namespace bp::wide {

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

bool available() {
  static const bool yes = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  }();
  return yes;
}

#else

bool available() { return false; }

#endif

}  // namespace bp::wide
