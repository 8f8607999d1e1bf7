// The core round trip: how long a cache line takes to go from one CPU to
// another and back. On this project's 2-vCPU machines it tells a good window
// (70-130 ns: the vCPUs sit on near host cores) from a bad one (300 ns to
// tens of microseconds: shared or distant cores, where two threads are no
// faster than one). `bpbench scaling` reads it before and after each round
// so that it can keep only the rounds measured in a good window.
#pragma once

#include <pthread.h>

namespace bpbench {

// The first two CPUs of this process's affinity mask; false with fewer.
bool firstTwoCpus(int cpus[2]);

// Pins `thread` to `cpu`; false when the system refuses.
bool pinTo(pthread_t thread, int cpu);

// Median ns of a flag bounced between the first two CPUs of this process's
// affinity mask (a few milliseconds of spinning); -1 with fewer than two.
double measureCoreRoundTripNs();

}  // namespace bpbench
