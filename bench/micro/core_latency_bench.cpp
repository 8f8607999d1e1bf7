// Core-to-core round trip: two threads, pinned to the first two CPUs, bounce
// one atomic flag (bpbench's measureCoreRoundTripNs, the same measurement
// `bpbench scaling --max-round-trip` gates its rounds on). On this project's
// 2-vCPU machines the answer changes while they run (the host moves the
// vCPUs): 70-100 ns in good windows, 350-430 ns in bad ones, where two
// threads are no faster than one on a frame. Run it before and after a
// scaling measurement to know which window it was in:
//
//   build/release/bench/bp_micro_bench --benchmark_filter=CoreRoundTrip
#include "../bpbench/round_trip.h"
#include "../bpbench/stats.h"

#include <benchmark/benchmark.h>

#include <vector>

namespace {

void CoreRoundTrip(benchmark::State& state) {
  std::vector<double> ns;
  for (auto _ : state) {
    const double v = bpbench::measureCoreRoundTripNs();
    if (v < 0) {
      state.SkipWithError("needs two CPUs");
      return;
    }
    ns.push_back(v);
  }
  state.counters["ns_per_round_trip"] = bpbench::median(ns);
}
BENCHMARK(CoreRoundTrip)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
