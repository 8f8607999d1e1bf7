// Process memory from /proc/self: resident set now and its high-water mark.
#pragma once

namespace bpbench {

double currentRssMib();  // VmRSS
double peakRssMib();     // VmHWM: the peak resident set of this process so far

}  // namespace bpbench
