// The most two threads can gain on this machine for a sweep frame, with no
// data shared between them: two independent worlds, each a standard scene of
// N/2 boxes (the same density as N, since L = 4 cbrt(N)) in a SweepGrid of
// its own with a one-thread Scheduler, run one after the other on one pinned
// CPU (`serial`) or at the same time on two pinned CPUs (`parallel`: a
// helper thread spins on the frame counter, so no wake-up is timed). Frames
// alternate between the two modes over the same worlds, so both see the same
// state of the machine. The counters are medians in ms a frame (the move of
// every moving box and findPairs, both worlds); `ceiling` is serial over
// parallel: what a perfect split of the work and the data would give, next
// to `bpbench scaling` for the library's own two-thread frame.
//
//   build/release/bench/bp_micro_bench --benchmark_filter=ParallelCeiling
#include "../bpbench/round_trip.h"
#include "../bpbench/stats.h"
#include "sweep_scene.h"

#include <broadphase/jobs/scheduler.h>
#include <broadphase/testkit/scene.h>
#include "sweep/sweep_grid.h"

#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace bp {
namespace {

// One scene in its own grid, driven by one thread.
struct World {
  Scene scene;
  SweepGrid grid;
  Scheduler scheduler{1};
  std::vector<ProxyId> all;
  MovingSet moving;
  std::vector<Pair> pairs;

  World(SceneKind kind, uint32_t n, uint64_t seed) : scene(makeScene(kind, n, seed)) {
    all = addAll(grid, scene);
    grid.findPairs(scheduler, pairs);
  }

  // The untimed part: the scene's motion and the gathering of the moves.
  void step() {
    scene.step();
    gatherMoving(scene, all, moving);
  }

  void frame() {
    grid.move(moving.ids, moving.boxes);
    grid.findPairs(scheduler, pairs);
    benchmark::DoNotOptimize(pairs.data());
  }
};

void spinPause() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

double msSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void ParallelCeiling(benchmark::State& state) {
  int cpus[2];
  if (!bpbench::firstTwoCpus(cpus)) {
    state.SkipWithError("needs two CPUs");
    return;
  }
  const auto kind = SceneKind(state.range(0));
  const auto half = uint32_t(state.range(1)) / 2;
  cpu_set_t callerCpus;
  pthread_getaffinity_np(pthread_self(), sizeof callerCpus, &callerCpus);
  bpbench::pinTo(pthread_self(), cpus[0]);
  World w0(kind, half, 1), w1(kind, half, 2);

  // The helper runs w1's frame each time `go` passes `done`.
  std::atomic<int> go{0}, done{0};
  std::atomic<bool> quit{false};
  std::thread helper([&] {
    bpbench::pinTo(pthread_self(), cpus[1]);
    int seen = 0;
    while (!quit.load(std::memory_order_acquire)) {
      if (go.load(std::memory_order_acquire) == seen) {
        spinPause();
        continue;
      }
      ++seen;
      w1.frame();
      done.store(seen, std::memory_order_release);
    }
  });

  std::vector<double> serial, parallel;
  int frames = 0;
  bool parallelTurn = false;
  for (auto _ : state) {
    w0.step();
    w1.step();
    const auto t0 = std::chrono::steady_clock::now();
    if (parallelTurn) {
      go.store(++frames, std::memory_order_release);
      w0.frame();
      while (done.load(std::memory_order_acquire) != frames) spinPause();
      parallel.push_back(msSince(t0));
    } else {
      w0.frame();
      w1.frame();
      serial.push_back(msSince(t0));
    }
    parallelTurn = !parallelTurn;
  }
  quit.store(true, std::memory_order_release);
  helper.join();
  pthread_setaffinity_np(pthread_self(), sizeof callerCpus, &callerCpus);

  const double s = bpbench::median(serial), p = bpbench::median(parallel);
  state.counters["serial_ms"] = s;
  state.counters["parallel_ms"] = p;
  state.counters["ceiling"] = s / p;
}
BENCHMARK(ParallelCeiling)
    ->ArgNames({"scene", "n"})
    ->Args({int(SceneKind::uniform), 100000})
    ->Args({int(SceneKind::sizes), 100000})
    ->Args({int(SceneKind::staticScene), 100000})
    ->Iterations(60)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace bp
