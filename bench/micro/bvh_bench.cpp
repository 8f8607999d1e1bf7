// Micro-benchmarks of the Bvh: a full frame (moves + sorted pairs) on the
// standard scenes, and the pieces: insert, remove, refit, rebuild, rays.
// Arguments are (scene, log10 N, threads) for frames, (log10 N, threads) otherwise.
#include "../bpbench/stats.h"

#include <broadphase/testkit/scene.h>
#include "bvh/bvh.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>

namespace bp {
namespace {

uint32_t sizeOf(int64_t log10n) { return static_cast<uint32_t>(std::pow(10.0, double(log10n))); }

std::vector<ProxyId> addAll(Bvh& bvh, const Scene& scene) {
  std::vector<ProxyId> ids;
  ids.reserve(scene.n);
  for (uint32_t i = 0; i < scene.n; ++i) ids.push_back(bvh.add(scene.boxes[i], scene.isStatic[i]));
  return ids;
}

// One frame as SCENES.md defines it: apply every box's move, then the complete
// sorted pair set. The scene's own stepping is outside the timed region.
void BM_BvhFrame(benchmark::State& state) {
  const SceneKind kind = kAllScenes[state.range(0)];
  Scheduler scheduler(static_cast<int>(state.range(2)));
  Scene scene = makeScene(kind, sizeOf(state.range(1)));
  Bvh bvh;
  const auto ids = addAll(bvh, scene);
  std::vector<Pair> pairs;
  for (int f = 0; f < 2; ++f) {  // frames 0 and 1 are warm-up, as in SCENES.md
    bvh.findPairs(scheduler, pairs);
    scene.step();
    bvh.move(ids, scene.boxes);
  }
  std::vector<double> seconds;
  for (auto _ : state) {
    scene.step();
    const auto start = std::chrono::steady_clock::now();
    bvh.move(ids, scene.boxes);
    bvh.findPairs(scheduler, pairs);
    const auto stop = std::chrono::steady_clock::now();
    seconds.push_back(std::chrono::duration<double>(stop - start).count());
    state.SetIterationTime(seconds.back());
  }
  // SCENES.md reports the median frame (the mean includes rebuild frames).
  state.counters["median_ms"] = seconds.empty() ? 0.0 : 1e3 * bpbench::median(seconds);
  state.SetLabel(sceneName(kind));
  state.counters["pairs"] = double(pairs.size());
  state.counters["rebuilds"] = double(bvh.dynamicStats().rebuildCount);
}
BENCHMARK(BM_BvhFrame)
    ->ArgsProduct({{0, 1, 2, 3, 4}, {5}, {1, 2}})
    ->ArgNames({"scene", "log10n", "threads"})
    ->UseManualTime()
    ->Iterations(28)
    ->Unit(benchmark::kMillisecond);

void BM_BvhInsert(benchmark::State& state) {
  Scheduler scheduler(static_cast<int>(state.range(1)));
  const Scene scene = makeScene(SceneKind::uniform, sizeOf(state.range(0)));
  for (auto _ : state) {
    Bvh bvh;
    addAll(bvh, scene);
    bvh.update(scheduler);
    benchmark::DoNotOptimize(bvh.dynamicStats().cost);
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * scene.n);
}
BENCHMARK(BM_BvhInsert)->ArgsProduct({{5}, {1, 2}})->Unit(benchmark::kMillisecond);

// Remove 1 % of the proxies and re-add them: the incremental path.
void BM_BvhRemoveReinsert(benchmark::State& state) {
  Scheduler scheduler(static_cast<int>(state.range(1)));
  const Scene scene = makeScene(SceneKind::uniform, sizeOf(state.range(0)));
  Bvh bvh;
  auto ids = addAll(bvh, scene);
  bvh.update(scheduler);
  for (auto _ : state) {
    for (uint32_t i = 0; i < scene.n; i += 100) bvh.remove(ids[i]);
    for (uint32_t i = 0; i < scene.n; i += 100) ids[i] = bvh.add(scene.boxes[i]);
    bvh.update(scheduler);
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * (scene.n / 100));
}
BENCHMARK(BM_BvhRemoveReinsert)->ArgsProduct({{5}, {1, 2}})->Unit(benchmark::kMicrosecond);

// Every box moves out of its fat box: slot writes plus a refit of every node.
void BM_BvhRefit(benchmark::State& state) {
  Scheduler scheduler(static_cast<int>(state.range(1)));
  Scene scene = makeScene(SceneKind::uniform, sizeOf(state.range(0)));
  Bvh bvh(BvhConfig{.margin = 0.0f, .extendByDisplacement = false, .rebuildRatio = 1e9f});
  const auto ids = addAll(bvh, scene);
  bvh.update(scheduler);
  for (auto _ : state) {
    scene.step();
    bvh.move(ids, scene.boxes);
    bvh.update(scheduler);
  }
}
BENCHMARK(BM_BvhRefit)->ArgsProduct({{5}, {1, 2}})->Unit(benchmark::kMillisecond);

void BM_BvhRebuild(benchmark::State& state) {
  Scheduler scheduler(static_cast<int>(state.range(1)));
  const Scene scene = makeScene(SceneKind::uniform, sizeOf(state.range(0)));
  Bvh bvh;
  addAll(bvh, scene);
  bvh.update(scheduler);
  for (auto _ : state) bvh.rebuild(scheduler);
  state.SetItemsProcessed(int64_t(state.iterations()) * scene.n);
}
BENCHMARK(BM_BvhRebuild)->ArgsProduct({{5, 6}, {1, 2}})->Unit(benchmark::kMillisecond);

// Closest-hit rays of SCENES.md against `uniform` (frame 0); items = rays.
void BM_BvhRays(benchmark::State& state) {
  Scheduler scheduler(static_cast<int>(state.range(1)));
  const uint32_t n = sizeOf(state.range(0));
  const Scene scene = makeScene(SceneKind::uniform, n);
  const auto rays = makeRays(n, 1000000);
  Bvh bvh;
  addAll(bvh, scene);
  bvh.update(scheduler);
  std::vector<RayHit> hits(rays.size());
  for (auto _ : state) {
    bvh.castRays(scheduler, rays, hits, RayQuery::closest);
    benchmark::DoNotOptimize(hits.data());
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * int64_t(rays.size()));
}
BENCHMARK(BM_BvhRays)->ArgsProduct({{4, 6}, {1, 2}})->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace bp
