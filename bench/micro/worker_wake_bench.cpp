// How late a sleeping worker joins a fork: the calling thread spins for a
// serial gap (the benchmark argument, in us), then forks 64 parts worth
// 40 us in all; the time until another worker starts a part is the wake-up
// latency that docs/threading.md ("Sleeping workers") tabulates. Parts the
// caller finishes alone count as "missed".
// WakeCall: what waking costs the thread that wakes: after the same serial
// gap, the time Scheduler::wake() takes to return (an enqueue, after which
// oneTBB wakes a sleeping worker). On the project's Zen 5 VM: 0.1 us after gaps
// of 10-100 us (the worker still spinning), 7.3-8.0 us (p50) after 1-10 ms,
// in most runs (one early run read 0.17 us at 1 ms). Inside a two-thread
// `static` 10^5 frame the first fork's entry took the caller 25-31 k TSC
// cycles (12-15 us) before its first part when the worker slept (rdtsc
// trace, docs/threading.md "Sleeping workers"): the price of waking falls
// on the thread that wakes.
//
//   build/release/bench/bp_micro_bench --benchmark_filter='WorkerWake|WakeCall'
#include "../bpbench/stats.h"

#include <broadphase/jobs/scheduler.h>

#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

void spinFor(std::chrono::nanoseconds d) {
  const auto until = Clock::now() + d;
  while (Clock::now() < until) {
  }
}

void WorkerWake(benchmark::State& state) {
  bp::Scheduler scheduler(2);
  const std::chrono::microseconds gap(state.range(0));
  std::vector<double> joinUs;
  int missed = 0;
  for (auto _ : state) {
    spinFor(gap);
    std::atomic<int64_t> joined{0};
    const auto t0 = Clock::now();
    scheduler.forEach(0, 64, 1, [&](uint32_t b, uint32_t e) {
      if (bp::Scheduler::workerIndex() != 0) {
        int64_t none = 0;
        joined.compare_exchange_strong(none, (Clock::now() - t0).count());
      }
      spinFor(std::chrono::nanoseconds(625) * (e - b));  // 40 us over the 64 parts
    });
    if (joined.load() != 0)
      joinUs.push_back(double(joined.load()) / 1000.0);
    else
      ++missed;
  }
  // -1: the worker never joined.
  state.counters["join_us_p50"] = joinUs.empty() ? -1.0 : bpbench::percentile(joinUs, 50);
  state.counters["join_us_p90"] = joinUs.empty() ? -1.0 : bpbench::percentile(joinUs, 90);
  state.counters["missed"] = missed;
}
BENCHMARK(WorkerWake)->Arg(10)->Arg(30)->Arg(100)->Arg(1000)->Iterations(200)->UseRealTime();

void WakeCall(benchmark::State& state) {
  bp::Scheduler scheduler(2);
  const std::chrono::microseconds gap(state.range(0));
  std::vector<double> callUs;
  for (auto _ : state) {
    spinFor(gap);
    const auto t0 = Clock::now();
    scheduler.wake();
    callUs.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  state.counters["call_us_p50"] = bpbench::percentile(callUs, 50);
  state.counters["call_us_p90"] = bpbench::percentile(callUs, 90);
}
BENCHMARK(WakeCall)
    ->Arg(10)
    ->Arg(100)
    ->Arg(1000)
    ->Arg(3000)
    ->Arg(10000)
    ->Iterations(100)
    ->UseRealTime();

}  // namespace
