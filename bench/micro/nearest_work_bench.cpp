// The weights by which a search of a structure's own nearest counts toward
// the rays' tree (BroadPhase::Impl::Side::nearestAsRays): the time of a search of
// the BVH and of the sweep with the work each reports (nodes visited; boxes
// ranked + 16 a cell looked at), and the time the rays' tree takes to build
// a slot, the unit of its price. `uniform`'s boxes, or points at their
// centres; 20 000 points drawn over the scene's domain as `bpbench nearest`
// draws them (bpbench/query_points.h); one thread.
// Arguments are (structure: 0 bvh, 1 sweep, log10 N, k, points: 0 boxes, 1 points).
#include <broadphase/testkit/scene.h>
#include "../bpbench/query_points.h"
#include "bvh/bvh.h"
#include "raytree/ray_tree.h"
#include "sweep/sweep_grid.h"

#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>

namespace bp {
namespace {

std::vector<Aabb> boxesOf(const Scene& scene, bool points) {
  std::vector<Aabb> boxes = scene.boxes;
  if (points)
    for (Aabb& b : boxes) b = Aabb{b.center(), b.center()};
  return boxes;
}

template <class Structure>
void searchAll(benchmark::State& state, const std::vector<Aabb>& boxes,
               const std::vector<Vec3>& points) {
  Structure structure;
  for (const Aabb& b : boxes) structure.add(b, false);
  Scheduler scheduler(1);
  structure.update(scheduler);
  const uint32_t k = uint32_t(state.range(2));
  std::vector<Neighbour> out;
  uint64_t work = 0, searches = 0;
  double seconds = 0.0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    for (const Vec3& p : points) structure.nearest(p, k, out, &work);
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    searches += points.size();
  }
  state.counters["us_a_search"] = seconds * 1e6 / double(std::max<uint64_t>(searches, 1));
  state.counters["work_a_search"] = double(work) / double(std::max<uint64_t>(searches, 1));
}

void BM_NearestWork(benchmark::State& state) {
  const uint32_t n = uint32_t(std::pow(10.0, double(state.range(1))));
  const Scene scene = makeScene(SceneKind::uniform, n);
  const std::vector<Aabb> boxes = boxesOf(scene, state.range(3) != 0);
  const std::vector<Vec3> points = bpbench::makeQueryPoints(scene, 20000, 1);
  if (state.range(0) == 0)
    searchAll<Bvh>(state, boxes, points);
  else
    searchAll<SweepGrid>(state, boxes, points);
  // The unit: the rays' tree built over the same boxes, a slot.
  std::vector<uint32_t> keys(n);
  for (uint32_t i = 0; i < n; ++i) keys[i] = i;
  RayTree tree;
  const auto start = std::chrono::steady_clock::now();
  tree.build(nullptr, boxes, keys, keys);
  state.counters["build_us_a_slot"] =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() /
      n;
  state.SetLabel(state.range(0) == 0 ? "bvh" : "sweep");
}
BENCHMARK(BM_NearestWork)
    ->ArgsProduct({{0, 1}, {5, 6}, {1, 8, 64}, {0, 1}})
    ->ArgNames({"structure", "log10n", "k", "points"})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

}  // namespace
}  // namespace bp
