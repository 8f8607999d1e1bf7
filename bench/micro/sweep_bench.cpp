// Micro-benchmarks of SweepGrid (Google Benchmark).
//
//   SweepFrame/<scene>/<N>/<threads>: one standard frame, the batch move of
//     every moving box + findPairs (sorted). The scene's own motion step is
//     excluded from the timing.
//   SweepRebuildFrame/<scene>/<N>: the same frame with a fresh grid each
//     time (no coherence): what keeping cell order between frames saves.
//   SweepCellKernel/<scene>/<N>: findPairs with nothing moved: the cell sweeps
//     plus the merge. SweepPairStream: the same without the sort/merge.
//   SweepRayClosest/<N>: closest-hit rays of SCENES.md, rays/s in items/s.
//   PerWorkerBuffers/<padded>: workers appending pairs to their own vectors,
//     with the vector headers padded (PerWorker) or packed side by side.
#include "sweep_scene.h"

#include <broadphase/jobs/per_worker.h>
#include <broadphase/jobs/scheduler.h>
#include <broadphase/testkit/scene.h>
#include "sweep/sweep_grid.h"

#include <benchmark/benchmark.h>

#include <vector>

namespace bp {
namespace {

void SweepFrame(benchmark::State& state) {
  const auto kind = SceneKind(state.range(0));
  const auto n = uint32_t(state.range(1));
  Scheduler scheduler(int(state.range(2)));
  Scene scene = makeScene(kind, n);
  SweepGrid grid;
  const auto ids = addAll(grid, scene);
  std::vector<Pair> pairs;
  grid.findPairs(scheduler, pairs);
  MovingSet moving;
  for (auto _ : state) {
    state.PauseTiming();
    scene.step();
    gatherMoving(scene, ids, moving);
    state.ResumeTiming();
    grid.move(moving.ids, moving.boxes);
    grid.findPairs(scheduler, pairs);
    benchmark::DoNotOptimize(pairs.data());
  }
  state.counters["pairs"] = double(pairs.size());
  state.counters["cells"] = double(grid.cellCount());
  state.counters["overflow"] = double(grid.overflowCount());
  state.counters["cellSize"] = grid.cellSize();
  state.counters["MB"] = double(grid.memoryBytes()) / 1e6;
}

void SweepRebuildFrame(benchmark::State& state) {
  const auto kind = SceneKind(state.range(0));
  const auto n = uint32_t(state.range(1));
  Scheduler scheduler(1);
  Scene scene = makeScene(kind, n);
  float cellSize;
  {
    SweepGrid probe;
    addAll(probe, scene);
    probe.update(scheduler);
    cellSize = probe.cellSize();
  }
  SweepGridConfig config;
  config.cellSize = cellSize;
  std::vector<Pair> pairs;
  for (auto _ : state) {
    state.PauseTiming();
    scene.step();
    state.ResumeTiming();
    SweepGrid grid(config);
    addAll(grid, scene);
    grid.findPairs(scheduler, pairs);
    benchmark::DoNotOptimize(pairs.data());
  }
  state.counters["pairs"] = double(pairs.size());
}

void SweepCellKernel(benchmark::State& state) {
  Scheduler scheduler(1);
  Scene scene = makeScene(SceneKind(state.range(0)), uint32_t(state.range(1)));
  SweepGrid grid;
  addAll(grid, scene);
  std::vector<Pair> pairs;
  grid.findPairs(scheduler, pairs);
  for (auto _ : state) {
    grid.findPairs(scheduler, pairs);
    benchmark::DoNotOptimize(pairs.data());
  }
  state.counters["pairs"] = double(pairs.size());
}

void SweepPairStream(benchmark::State& state) {
  Scheduler scheduler(1);
  Scene scene = makeScene(SceneKind(state.range(0)), uint32_t(state.range(1)));
  SweepGrid grid;
  addAll(grid, scene);
  grid.update(scheduler);
  size_t count = 0;
  for (auto _ : state) {
    count = 0;
    grid.findPairs(scheduler, [&](std::span<const Pair> chunk) { count += chunk.size(); });
    benchmark::DoNotOptimize(count);
  }
  state.counters["pairs"] = double(count);
}

void SweepRayClosest(benchmark::State& state) {
  const auto n = uint32_t(state.range(0));
  Scheduler scheduler(1);
  const Scene scene = makeScene(SceneKind::uniform, n);
  SweepGrid grid;
  addAll(grid, scene);
  grid.update(scheduler);
  const auto rays = makeRays(n, 100000);
  std::vector<RayHit> hits(rays.size());
  for (auto _ : state) {
    grid.castRays(scheduler, rays, hits, RayQuery::closest);
    benchmark::DoNotOptimize(hits.data());
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * int64_t(rays.size()));
}

// Two workers push 2^20 pairs each into their own vector; packed puts the two
// vector headers (begin/end/capacity, written on every push) in one line.
void PerWorkerBuffers(benchmark::State& state) {
  const bool padded = state.range(0) != 0;
  Scheduler scheduler(2);
  PerWorker<std::vector<Pair>> paddedBuffers(2);
  std::vector<std::vector<Pair>> packedBuffers(2);
  constexpr uint32_t kPerTask = 1u << 20;
  for (auto _ : state) {
    scheduler.forEach(0, 2, 1, [&](uint32_t begin, uint32_t end) {
      for (uint32_t t = begin; t < end; ++t) {
        std::vector<Pair>& out =
            padded ? paddedBuffers.local() : packedBuffers[size_t(Scheduler::workerIndex())];
        out.clear();
        for (uint32_t i = 0; i < kPerTask; ++i) out.push_back({i, i + t});
        benchmark::DoNotOptimize(out.data());
      }
    });
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * 2 * kPerTask);
}

void sceneArgs(benchmark::internal::Benchmark* b) {
  for (SceneKind k : kAllScenes)
    for (int threads : {1, 2}) b->Args({int64_t(k), 100000, threads});
  b->Args({int64_t(SceneKind::uniform), 1000000, 1});
  b->Args({int64_t(SceneKind::uniform), 1000000, 2});
}

BENCHMARK(SweepFrame)->Apply(sceneArgs)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(SweepRebuildFrame)
    ->Args({int64_t(SceneKind::uniform), 100000})
    ->Args({int64_t(SceneKind::clustered), 100000})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(SweepCellKernel)
    ->Args({int64_t(SceneKind::uniform), 100000})
    ->Args({int64_t(SceneKind::clustered), 100000})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(SweepPairStream)
    ->Args({int64_t(SceneKind::uniform), 100000})
    ->Args({int64_t(SceneKind::clustered), 100000})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(SweepRayClosest)->Arg(10000)->Arg(1000000)->Unit(benchmark::kMillisecond);
BENCHMARK(PerWorkerBuffers)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace bp
