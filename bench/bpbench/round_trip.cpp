#include "round_trip.h"

#include "stats.h"

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace bpbench {

bool firstTwoCpus(int cpus[2]) {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return false;
  int found = 0;
  for (int c = 0; c < CPU_SETSIZE && found < 2; ++c)
    if (CPU_ISSET(c, &allowed)) cpus[found++] = c;
  return found == 2;
}

bool pinTo(pthread_t thread, int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(thread, sizeof set, &set) == 0;
}

double measureCoreRoundTripNs() {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return -1;
  int cpus[2];
  if (!firstTwoCpus(cpus)) return -1;

  constexpr int kBatches = 9, kTrips = 2000;
  // 0: the caller's turn is over (echo must answer); 1: echo answered; -1: stop.
  alignas(128) std::atomic<int> flag{1};
  std::thread echo([&] {
    for (;;) {
      const int v = flag.load(std::memory_order_acquire);
      if (v < 0) return;
      if (v == 0) flag.store(1, std::memory_order_release);
    }
  });
  pinTo(echo.native_handle(), cpus[1]);
  const pthread_t self = pthread_self();
  pinTo(self, cpus[0]);
  std::vector<double> batches;
  for (int b = 0; b < kBatches; ++b) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kTrips; ++i) {
      flag.store(0, std::memory_order_release);
      while (flag.load(std::memory_order_acquire) != 1) {
      }
    }
    const std::chrono::duration<double, std::nano> dt = std::chrono::steady_clock::now() - t0;
    batches.push_back(dt.count() / kTrips);
  }
  flag.store(-1, std::memory_order_release);
  echo.join();
  pthread_setaffinity_np(self, sizeof allowed, &allowed);  // the caller's mask again
  return median(batches);
}

}  // namespace bpbench
