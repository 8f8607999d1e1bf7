#include "memory.h"

#include <sys/resource.h>

#include <cstdio>
#include <cstring>

namespace bpbench {
namespace {

// The value of one "Key:   123 kB" line of /proc/self/status, in MiB.
double statusMib(const char* key) {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  double mib = 0;
  const size_t len = std::strlen(key);
  while (std::fgets(line, sizeof line, f)) {
    if (std::strncmp(line, key, len) == 0 && line[len] == ':') {
      unsigned long long kb = 0;
      if (std::sscanf(line + len + 1, "%llu", &kb) == 1) mib = double(kb) / 1024.0;
      break;
    }
  }
  std::fclose(f);
  return mib;
}

}  // namespace

double currentRssMib() { return statusMib("VmRSS"); }
double peakRssMib() { return statusMib("VmHWM"); }

uint64_t minorFaults() {
  rusage u{};
  if (getrusage(RUSAGE_SELF, &u) != 0) return 0;
  return uint64_t(u.ru_minflt);
}

}  // namespace bpbench
