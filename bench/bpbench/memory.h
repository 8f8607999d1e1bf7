// Process memory from /proc/self: resident set now and its high-water mark;
// and the process's page faults so far.
#pragma once

#include <cstdint>

namespace bpbench {

double currentRssMib();  // VmRSS
double peakRssMib();     // VmHWM: the peak resident set of this process so far
// Minor page faults of this process so far, all its threads (getrusage):
// each a first touch of a fresh page, about 11 us on the project's VMs.
uint64_t minorFaults();

}  // namespace bpbench
