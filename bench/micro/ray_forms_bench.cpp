// Micro-benchmarks of every ray form of BroadPhase (automatic structure) on
// a standard scene's frame 0 with the rays of SCENES.md over its domain:
// the batch (closest), one castRay at a time (closest), the callback form
// clipping to the nearest hit (the narrowphase-in-the-loop use), and every
// hit (castRayAll). Each with the rays' own tree (RayTreeMode::always; made
// before the clock starts) and without it (never: rays walk the sweep).
// Arguments: (scene, log10 N, tree 0/1). Reported: Mrays/s.
#include <broadphase/broad_phase.h>
#include <broadphase/testkit/scene.h>

#include <benchmark/benchmark.h>

#include <cmath>
#include <memory>

namespace bp {
namespace {

constexpr uint32_t kRays = 20000;

struct World {
  std::unique_ptr<BroadPhase> bp;
  std::vector<Ray> rays;
};

World makeWorld(const benchmark::State& state) {
  const SceneKind kind = kAllScenes[state.range(0)];
  const uint32_t n = static_cast<uint32_t>(std::pow(10.0, double(state.range(1))));
  const Scene scene = makeScene(kind, n);
  World w;
  w.bp = std::make_unique<BroadPhase>(BroadPhaseConfig{
      .threads = 1, .rayTree = state.range(2) ? RayTreeMode::always : RayTreeMode::never});
  for (uint32_t i = 0; i < n; ++i)
    w.bp->add({scene.boxes[i], scene.isStatic[i] ? MotionType::staticBody : MotionType::dynamic});
  w.bp->update();
  w.rays = makeRaysIn(scene.bounds, kRays);
  w.bp->castRay(w.rays[0]);  // makes the tree (always) outside the timed loop
  return w;
}

void report(benchmark::State& state, uint64_t hits) {
  state.counters["Mrays/s"] = benchmark::Counter(double(kRays) * double(state.iterations()) / 1e6,
                                                 benchmark::Counter::kIsRate);
  state.counters["hits"] = double(hits);
  state.SetLabel(sceneName(kAllScenes[state.range(0)]));
}

void BM_RayBatchClosest(benchmark::State& state) {
  World w = makeWorld(state);
  std::vector<RayHit> out(w.rays.size());
  uint64_t hits = 0;
  for (auto _ : state) {
    w.bp->castRays(w.rays, out);
    benchmark::DoNotOptimize(out.data());
  }
  for (const RayHit& h : out) hits += h.hit();
  report(state, hits);
}

void BM_RayOneByOneClosest(benchmark::State& state) {
  World w = makeWorld(state);
  uint64_t hits = 0;
  for (auto _ : state) {
    hits = 0;
    for (const Ray& r : w.rays) hits += w.bp->castRay(r).hit();
  }
  report(state, hits);
}

void BM_RayCallbackClipped(benchmark::State& state) {
  World w = makeWorld(state);
  uint64_t hits = 0;
  for (auto _ : state) {
    hits = 0;
    for (const Ray& r : w.rays) {
      RayHit best;
      w.bp->castRay(r.origin, r.direction, r.maxT, [&](uint32_t p, float t) {
        if (!best.hit() || hitBefore({p, t}, best)) best = {p, t};
        return best.t;
      });
      hits += best.hit();
    }
  }
  report(state, hits);
}

void BM_RayAllHits(benchmark::State& state) {
  World w = makeWorld(state);
  std::vector<RayHit> all;
  uint64_t hits = 0;
  for (auto _ : state) {
    hits = 0;
    for (const Ray& r : w.rays) {
      w.bp->castRayAll(r, all);
      hits += all.size();
    }
  }
  report(state, hits);
}

void BM_RayBatchAllHits(benchmark::State& state) {
  World w = makeWorld(state);
  std::vector<RayHit> all;
  std::vector<size_t> offsets;
  for (auto _ : state) {
    w.bp->castRaysAll(w.rays, all, offsets);
    benchmark::DoNotOptimize(all.data());
  }
  report(state, all.size());
}

#define BP_RAY_FORM(fn)                             \
  BENCHMARK(fn)                                     \
      ->ArgsProduct({{0, 1, 2, 3, 4}, {5}, {0, 1}}) \
      ->ArgNames({"scene", "log10n", "tree"})       \
      ->Unit(benchmark::kMillisecond)

BP_RAY_FORM(BM_RayBatchClosest);
BP_RAY_FORM(BM_RayOneByOneClosest);
BP_RAY_FORM(BM_RayCallbackClipped);
BP_RAY_FORM(BM_RayAllHits);
BP_RAY_FORM(BM_RayBatchAllHits);

}  // namespace
}  // namespace bp
