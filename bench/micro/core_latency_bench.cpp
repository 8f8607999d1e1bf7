// Core-to-core round trip: two threads, pinned to CPUs 0 and 1, bounce one
// atomic flag. On this project's 2-vCPU machines the answer changes while
// they run (the host moves the vCPUs): 70-100 ns in good windows, 350-430 ns
// in bad ones, where two threads are no faster than one on a frame. Run it
// before and after a scaling measurement to know which window it was in:
//
//   build/release/bench/bp_micro_bench --benchmark_filter=CoreRoundTrip
#include <benchmark/benchmark.h>

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <thread>

namespace {

bool pinTo(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

void CoreRoundTrip(benchmark::State& state) {
  if (std::thread::hardware_concurrency() < 2) {
    state.SkipWithError("needs two CPUs");
    return;
  }
  constexpr int kTrips = 100000;
  alignas(128) std::atomic<int> flag{0};
  std::atomic<bool> stop{false};
  std::thread echo([&] {
    pinTo(1);
    while (!stop.load(std::memory_order_relaxed))
      if (flag.load(std::memory_order_acquire) == 1) flag.store(0, std::memory_order_release);
  });
  pinTo(0);
  for (auto _ : state) {
    for (int i = 0; i < kTrips; ++i) {
      flag.store(1, std::memory_order_release);
      while (flag.load(std::memory_order_acquire) != 0) {
      }
    }
  }
  stop.store(true);
  echo.join();
  state.SetItemsProcessed(state.iterations() * kTrips);
  state.counters["ns_per_round_trip"] =
      benchmark::Counter(double(state.iterations()) * kTrips,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(CoreRoundTrip)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
