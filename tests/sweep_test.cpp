// SweepGrid against the brute-force oracle and the reference data: standard
// scenes, rays and queries, thread counts, bad input.
#include <broadphase/error.h>
#include <broadphase/testkit/brute_force.h>
#include <broadphase/testkit/scene.h>
#include "sweep/sweep_grid.h"

#include "error_capture.h"
#include "test_support.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <mutex>
#include <random>

namespace bp {
namespace {

std::vector<ProxyId> addScene(SweepGrid& grid, const Scene& scene) {
  std::vector<ProxyId> ids;
  for (uint32_t i = 0; i < scene.n; ++i) ids.push_back(grid.add(scene.boxes[i], scene.isStatic[i]));
  return ids;
}

void moveScene(SweepGrid& grid, const Scene& scene, const std::vector<ProxyId>& ids) {
  std::vector<ProxyId> moved;
  std::vector<Aabb> boxes;
  for (uint32_t i = 0; i < scene.n; ++i)
    if (!scene.isStatic[i]) {
      moved.push_back(ids[i]);
      boxes.push_back(scene.boxes[i]);
    }
  grid.move(moved, boxes);
}

std::vector<Pair> streamedPairs(SweepGrid& grid, Scheduler& s) {
  std::vector<Pair> all;
  std::mutex m;
  grid.findPairs(s, [&](std::span<const Pair> chunk) {
    std::lock_guard<std::mutex> lock(m);
    all.insert(all.end(), chunk.begin(), chunk.end());
  });
  std::sort(all.begin(), all.end());
  return all;
}

TEST(SweepGrid, FreshGridIssuesIndicesInOrder) {
  SweepGrid grid;
  for (uint32_t i = 0; i < 5; ++i) {
    const ProxyId id = grid.add(Aabb{Vec3(0, 0, 0), Vec3(1, 1, 1)});
    EXPECT_EQ(id.index, i);
  }
  EXPECT_EQ(grid.proxyCount(), 5u);
  EXPECT_EQ(grid.capacity(), 5u);
  Scheduler s(1);
  std::vector<Pair> pairs;
  grid.findPairs(s, pairs);
  EXPECT_EQ(pairs.size(), 10u);
  EXPECT_EQ(grid.validate(), "");
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

// Cells stretched along x (the default 16, and 4), cubic, and by 13: the
// ray walk and the ring search take each axis's own cell side.
class SweepGridStretch : public ::testing::TestWithParam<float> {
 protected:
  SweepGridConfig config() const {
    SweepGridConfig c;
    c.cellStretchX = GetParam();
    return c;
  }
};
INSTANTIATE_TEST_SUITE_P(Stretch, SweepGridStretch, ::testing::Values(16.0f, 4.0f, 1.0f, 13.0f));

// Every standard scene, frames 0, 1, 10 and 30: the oracle and the reference
// hash. The O(N^2) oracle runs on every checked frame when `withOracle` (and,
// under the slow sanitizer builds, on frames 0 and 30 only: the reference
// hash, which the oracle reproduces in scene_test, covers the others).
void checkStandardScene(SceneKind kind, const SweepGridConfig& config, bool withOracle) {
  const auto reference = test::loadReferencePairs();
  ASSERT_EQ(reference.size(), 20u);
  Scheduler s(2);
  Scene scene = makeScene(kind, 10000);
  SweepGrid grid(config);
  const auto ids = addScene(grid, scene);
  int checked = 0;
  for (const auto& ref : reference) {
    if (ref.scene != sceneName(kind)) continue;
    while (scene.frame < ref.frame) {
      scene.step();
      moveScene(grid, scene, ids);
      // Also exercise frames in between, as an engine would.
      if (scene.frame % 3 == 0) grid.update(s);
    }
    std::vector<Pair> pairs;
    grid.findPairs(s, pairs);
    ASSERT_EQ(grid.validate(), "") << ref.scene << " frame " << ref.frame;
    if (withOracle && (!kSanitized || ref.frame == 0 || ref.frame == 30)) {
      EXPECT_TRUE(test::samePairs(brute::findPairs(scene.boxes, scene.isStatic), pairs))
          << ref.scene << " frame " << ref.frame;
    }
    EXPECT_EQ(pairs.size(), ref.pairs) << ref.scene << " frame " << ref.frame;
    EXPECT_EQ(hashPairs(pairs), ref.hash) << ref.scene << " frame " << ref.frame;
    ++checked;
  }
  EXPECT_EQ(checked, 4) << sceneName(kind);
}

TEST(SweepGrid, StandardScenesMatchOracleAndReference) {
  for (SceneKind kind : kAllScenes) checkStandardScene(kind, SweepGridConfig{}, true);
}

TEST_P(SweepGridStretch, StandardScenesMatchReference) {
  for (SceneKind kind : kAllScenes) checkStandardScene(kind, config(), /*withOracle=*/false);
}

// The 8-lane and the 16-lane kernels on every cell (automatic mixes them by
// cell crowding): the oracle and the reference hash on every scene. Without
// AVX-512, `wide` is reported rather than dropped silently (and with a
// handler that returns, the kernel falls back to the default, automatic).
TEST(SweepGrid, EachKernelMatchesOracleAndReference) {
  SweepGridConfig narrow;
  narrow.kernel = SweepKernel::narrow;
  EXPECT_FALSE(SweepGrid(narrow).wideKernelEnabled());
  for (SceneKind kind : kAllScenes) checkStandardScene(kind, narrow, true);
  SweepGridConfig wide;
  wide.kernel = SweepKernel::wide;
  if (!SweepGrid().wideKernelEnabled()) {
    test::expectError(ErrorCode::invalidArgument, [&] {
      const SweepGrid rejected(wide);
      EXPECT_FALSE(rejected.wideKernelEnabled());
    });
    GTEST_SKIP() << "no AVX-512 on this CPU: the 16-lane kernel is not run";
  }
  EXPECT_TRUE(SweepGrid(wide).wideKernelEnabled());
  for (SceneKind kind : kAllScenes) checkStandardScene(kind, wide, true);
}

// Small cells: many boxes span several cells (the dedup rule at work) and the
// large boxes of `sizes` go to the overflow set.
TEST(SweepGrid, StandardScenesWithSmallCellsAndOverflow) {
  SweepGridConfig config;
  config.cellSizeFactor = 2.0f;
  config.targetBoxesPerCell = 0.0f;
  config.maxCellsPerProxy = 27;
  for (SceneKind kind : {SceneKind::sizes, SceneKind::clustered})
    checkStandardScene(kind, config, /*withOracle=*/false);
  Scene scene = makeScene(SceneKind::sizes, 10000);
  SweepGrid grid(config);
  addScene(grid, scene);
  Scheduler s(1);
  grid.update(s);
  EXPECT_GT(grid.overflowCount(), 10u);
}

// On several threads the sweep of a crowded cell (a pile centre) runs as
// several tasks over ranges of its entries (findPairsInto). The piles of
// `clustered`, with a third of the boxes static so that ranges also sweep
// against static twins: the pairs match the oracle for 1, 2 and 8 threads,
// and the split happens (on one thread never). Both kernels.
void checkCrowdedCells(const SweepGridConfig& config) {
  Scene scene = makeScene(SceneKind::clustered, 10000);
  for (uint32_t i = 0; i < scene.n; ++i) scene.isStatic[i] = i % 3 == 0;
  std::vector<std::unique_ptr<SweepGrid>> grids;
  std::vector<std::vector<ProxyId>> ids;
  for (int k = 0; k < 3; ++k) {
    grids.push_back(std::make_unique<SweepGrid>(config));
    ids.push_back(addScene(*grids.back(), scene));
  }
  const int threads[3] = {1, 2, 8};
  for (int f = 0; f < 3; ++f) {
    const std::vector<Pair> expected = brute::findPairs(scene.boxes, scene.isStatic);
    for (int k = 0; k < 3; ++k) {
      Scheduler s(threads[k]);
      std::vector<Pair> pairs;
      grids[size_t(k)]->findPairs(s, pairs);
      EXPECT_TRUE(test::samePairs(expected, pairs)) << "threads " << threads[k] << " frame " << f;
      EXPECT_EQ(streamedPairs(*grids[size_t(k)], s), pairs) << "threads " << threads[k];
      if (threads[k] == 1)
        EXPECT_EQ(grids[size_t(k)]->splitCellCount(), 0u);
      else
        EXPECT_GT(grids[size_t(k)]->splitCellCount(), 0u)
            << "threads " << threads[k] << " frame " << f;
      ASSERT_EQ(grids[size_t(k)]->validate(), "");
    }
    scene.step();
    for (int k = 0; k < 3; ++k) moveScene(*grids[size_t(k)], scene, ids[size_t(k)]);
  }
}

TEST(SweepGrid, CrowdedCellsSweptInRangesMatchOracle) {
  for (SweepKernel kernel : {SweepKernel::automatic, SweepKernel::narrow}) {
    SCOPED_TRACE(kernel == SweepKernel::narrow ? "narrow kernel" : "automatic kernel");
    SweepGridConfig config;
    config.kernel = kernel;
    checkCrowdedCells(config);
  }
}

TEST(SweepGrid, SameResultsForAnyThreadCount) {
  for (SceneKind kind : {SceneKind::clustered, SceneKind::sizes, SceneKind::staticScene}) {
    std::vector<Pair> first;
    for (int threads : {1, 2, 8}) {
      Scheduler s(threads);
      Scene scene = makeScene(kind, 6000);
      SweepGrid grid;
      const auto ids = addScene(grid, scene);
      for (int f = 0; f < 3; ++f) {
        scene.step();
        moveScene(grid, scene, ids);
      }
      std::vector<Pair> pairs;
      grid.findPairs(s, pairs);
      EXPECT_EQ(streamedPairs(grid, s), pairs) << sceneName(kind) << " threads " << threads;
      if (first.empty())
        first = pairs;
      else
        EXPECT_EQ(pairs, first) << sceneName(kind) << " threads " << threads;
      std::vector<RayHit> hits(300), hits1(300);
      const auto rays = makeRays(6000, 300);
      grid.castRays(s, rays, hits, RayQuery::closest);
      for (size_t r = 0; r < rays.size(); ++r) hits1[r] = grid.castRay(rays[r], RayQuery::closest);
      EXPECT_EQ(hits, hits1);
    }
    EXPECT_FALSE(first.empty());
  }
}

TEST(SweepGrid, ReferenceClosestHits) {
  const auto reference = test::loadReferenceRays();
  ASSERT_EQ(reference.size(), 1000u);
  const Scene scene = makeScene(SceneKind::uniform, 10000);
  const auto rays = makeRays(10000, 1000);
  SweepGrid grid;
  addScene(grid, scene);
  Scheduler s(2);
  grid.update(s);
  std::vector<RayHit> batch(rays.size());
  grid.castRays(s, rays, batch, RayQuery::closest);
  for (const auto& ref : reference) {
    const RayHit hit = grid.castRay(rays[ref.ray], RayQuery::closest);
    ASSERT_EQ(hit.hit() ? int64_t(hit.proxy) : -1, ref.box) << "ray " << ref.ray;
    EXPECT_EQ(batch[ref.ray], hit);
    if (!hit.hit()) continue;
    char printed[32];
    std::snprintf(printed, sizeof printed, "%.6g", double(hit.t));
    EXPECT_EQ(std::stod(printed), ref.t) << "ray " << ref.ray;
  }
}

// Every ray query against the oracle on scenes with overflow boxes, wide flat
// worlds and dense piles.
TEST_P(SweepGridStretch, RayQueriesMatchOracle) {
  Scheduler s(2);
  for (SceneKind kind : kAllScenes) {
    const uint32_t n = 4000;
    Scene scene = makeScene(kind, n);
    scene.step();
    SweepGrid grid(config());
    addScene(grid, scene);
    grid.update(s);
    auto rays = makeRays(n, 300, 5);
    if (kind == SceneKind::plane)  // aim the rays along the plane too
      for (size_t r = 0; r < 100; ++r) {
        Ray& ray = rays[r];
        ray.origin.y() = 2.0f;
        ray = makeRay(ray.origin, Vec3(ray.direction.x(), 0.0f, ray.direction.z()), ray.maxT * 4);
      }
    // Axis-aligned rays, rays on cell boundaries, a ray from far outside.
    const float c = grid.cellSize();
    rays.push_back(makeRay(Vec3(2 * c, 2 * c, 2 * c), Vec3(1, 0, 0), scene.worldSide));
    rays.push_back(makeRay(Vec3(3 * c, 0, 3 * c), Vec3(0, 1, 1), scene.worldSide));
    rays.push_back(makeRay(Vec3(-100, -100, -100), Vec3(1, 1, 1), 4 * scene.worldSide));
    // Very long rays, from inside and from far outside the boxes.
    rays.push_back(makeRay(Vec3(c, c, c), Vec3(0.3f, 1, 0.2f), 1e30f));
    rays.push_back(makeRay(Vec3(-1e6f, 3, 2e5f), Vec3(1, 0, -0.2f), 1e30f));
    std::vector<RayHit> batch(rays.size()), batchAny(rays.size());
    grid.castRays(s, rays, batch, RayQuery::closest);
    grid.castRays(s, rays, batchAny, RayQuery::any);
    std::vector<RayHit> all;
    for (size_t r = 0; r < rays.size(); ++r) {
      const Ray& ray = rays[r];
      const RayHit expected = brute::castRayClosest(scene.boxes, ray);
      ASSERT_EQ(grid.castRay(ray, RayQuery::closest), expected) << sceneName(kind) << " ray " << r;
      EXPECT_EQ(batch[r], expected);
      const RayHit any = grid.castRay(ray, RayQuery::any);
      EXPECT_EQ(any.hit(), expected.hit());
      EXPECT_EQ(batchAny[r].hit(), expected.hit());
      if (any.hit()) {
        float t;
        EXPECT_TRUE(intersectRayAabb(ray, scene.boxes[any.proxy], t));
        EXPECT_EQ(t, any.t);
      }
      grid.castRayAll(ray, all);
      EXPECT_EQ(all, brute::castRayAll(scene.boxes, ray)) << sceneName(kind) << " ray " << r;
      // Callback that keeps the ray: every hit exactly once.
      std::vector<RayHit> seen;
      grid.castRay(ray, [&](uint32_t proxy, float t) {
        seen.push_back({proxy, t});
        return std::numeric_limits<float>::infinity();
      });
      std::sort(seen.begin(), seen.end(), hitBefore);
      EXPECT_EQ(seen, all) << sceneName(kind) << " ray " << r;
      // Callback that clips: the last accepted hit is the closest.
      RayHit best;
      grid.castRay(ray, [&](uint32_t proxy, float t) {
        const RayHit h{proxy, t};
        if (!best.hit() || hitBefore(h, best)) best = h;
        return t;
      });
      EXPECT_EQ(best, expected) << sceneName(kind) << " ray " << r;
      // Callback that stops at once.
      int calls = 0;
      grid.castRay(ray, [&](uint32_t, float) {
        ++calls;
        return -1.0f;
      });
      EXPECT_EQ(calls, expected.hit() ? 1 : 0);
    }
  }
}

TEST_P(SweepGridStretch, BoxPointNearestAndSweptQueriesMatchOracle) {
  Scheduler s(1);
  for (SceneKind kind : kAllScenes) {
    const uint32_t n = 3000;
    Scene scene = makeScene(kind, n, 3);
    SweepGrid grid(config());
    addScene(grid, scene);
    grid.update(s);
    SceneRng rng(11);
    const float L = scene.worldSide;
    for (int q = 0; q < 60; ++q) {
      const Vec3 p(rng.uniform() * scene.bounds.x(), rng.uniform() * scene.bounds.y(),
                   rng.uniform() * scene.bounds.z());
      const float size = q % 10 == 0 ? L : 4.0f * rng.uniform();
      const Aabb query{p, p + Vec3(size, size * rng.uniform(), size)};
      std::vector<uint32_t> got;
      grid.queryBox(query, [&](uint32_t id) {
        got.push_back(id);
        return true;
      });
      std::sort(got.begin(), got.end());
      EXPECT_EQ(got, brute::queryBox(scene.boxes, query)) << sceneName(kind) << " q " << q;
      got.clear();
      grid.queryPoint(p, [&](uint32_t id) {
        got.push_back(id);
        return true;
      });
      std::sort(got.begin(), got.end());
      EXPECT_EQ(got, brute::queryPoint(scene.boxes, p)) << sceneName(kind) << " q " << q;

      const uint32_t k = q % 7 == 0 ? 40 : 1 + q % 5;
      std::vector<Neighbour> near;
      grid.nearest(p, k, near);
      EXPECT_EQ(near, brute::nearest(scene.boxes, p, k)) << sceneName(kind) << " q " << q;
      // A point far outside the world.
      const Vec3 far = p + Vec3(10 * L, -3 * L, 0);
      grid.nearest(far, k, near);
      EXPECT_EQ(near, brute::nearest(scene.boxes, far, k)) << sceneName(kind) << " q " << q;

      const Vec3 dir(rng.normal(), rng.normal(), rng.normal());
      const Ray ray = makeRay(p, dir, L / 3);
      const Vec3 half(0.5f * rng.uniform(), 2.0f * rng.uniform(),
                      q % 4 == 0 ? 8.0f : (q % 9 == 0 ? L : 0.1f));
      EXPECT_EQ(grid.castBox(half, ray), brute::castBox(scene.boxes, half, ray))
          << sceneName(kind) << " q " << q;
    }
    // Early stop of overlap callbacks.
    int calls = 0;
    grid.queryBox(Aabb{Vec3(0, 0, 0), scene.bounds}, [&](uint32_t) { return ++calls < 3; });
    EXPECT_EQ(calls, 3);
  }
}

TEST(SweepGrid, StaticPairsNeverReported) {
  SweepGrid grid;
  const Aabb b{Vec3(0, 0, 0), Vec3(1, 1, 1)};
  grid.add(b, true);
  grid.add(b, true);
  grid.add(b, false);
  Scheduler s(1);
  std::vector<Pair> pairs;
  grid.findPairs(s, pairs);
  EXPECT_EQ(pairs, (std::vector<Pair>{{0, 2}, {1, 2}}));
}

TEST(SweepGrid, TouchingBoxesOverlapAcrossCellBoundaries) {
  SweepGridConfig config;
  config.cellSize = 1.0f;
  SweepGrid grid(config);
  // Faces exactly on a cell boundary, and a shared corner.
  grid.add(Aabb{Vec3(0, 0, 0), Vec3(1, 1, 1)});
  grid.add(Aabb{Vec3(1, 0, 0), Vec3(2, 1, 1)});
  grid.add(Aabb{Vec3(1, 1, 1), Vec3(2, 2, 2)});
  grid.add(Aabb{Vec3(-2, -2, -2), Vec3(-1, -1, -1)});
  Scheduler s(1);
  std::vector<Pair> pairs;
  grid.findPairs(s, pairs);
  EXPECT_EQ(pairs, (std::vector<Pair>{{0, 1}, {0, 2}, {1, 2}}));
  EXPECT_EQ(grid.validate(), "");
}

TEST(SweepGrid, QueriesWithPendingChangesAreRejected) {
  SweepGrid grid;
  const ProxyId id = grid.add(Aabb{Vec3(0, 0, 0), Vec3(1, 1, 1)});
  const Ray ray = makeRay(Vec3(-1, 0.5f, 0.5f), Vec3(1, 0, 0), 10);
  auto expectPending = [&](auto&& fn) { test::expectError(ErrorCode::invalidArgument, fn); };
  std::vector<RayHit> hits;
  std::vector<Neighbour> near;
  expectPending([&] { grid.castRay(ray, RayQuery::closest); });
  expectPending([&] { grid.castRayAll(ray, hits); });
  expectPending([&] {
    grid.queryBox(Aabb{Vec3(0, 0, 0), Vec3(1, 1, 1)}, [](uint32_t) { return true; });
  });
  expectPending([&] { grid.queryPoint(Vec3(0, 0, 0), [](uint32_t) { return true; }); });
  expectPending([&] { grid.nearest(Vec3(0, 0, 0), 1, near); });
  expectPending([&] { grid.castBox(Vec3(1, 1, 1), ray); });
  Scheduler s(1);
  grid.update(s);
  EXPECT_EQ(grid.castRay(ray, RayQuery::closest).proxy, id.index);
  grid.move(id, Aabb{Vec3(5, 5, 5), Vec3(6, 6, 6)});
  expectPending([&] { grid.castRay(ray, RayQuery::any); });
  grid.update(s);
  EXPECT_FALSE(grid.castRay(ray, RayQuery::any).hit());
}

TEST(SweepGrid, BadInputIsRejectedAndChangesNothing) {
  SweepGrid grid;
  Scheduler s(1);
  const ProxyId a = grid.add(Aabb{Vec3(0, 0, 0), Vec3(1, 1, 1)});
  const ProxyId b = grid.add(Aabb{Vec3(0.5f, 0, 0), Vec3(2, 1, 1)});
  grid.update(s);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const Aabb bad[] = {{Vec3(nan, 0, 0), Vec3(1, 1, 1)},
                      {Vec3(0, 0, 0), Vec3(inf, 1, 1)},
                      {Vec3(0, 2, 0), Vec3(1, 1, 1)},
                      {Vec3(0, 0, 0), Vec3(1, 1, 2 * kMaxCoordinate)}};
  auto expectCode = [&](ErrorCode code, auto&& fn) {
    test::expectError(code, fn);
    EXPECT_EQ(grid.validate(), "");
    EXPECT_EQ(grid.proxyCount(), 2u);
    EXPECT_FALSE(grid.hasPendingChanges());
  };
  for (const Aabb& box : bad) {
    expectCode(ErrorCode::invalidBox, [&] { grid.add(box); });
    expectCode(ErrorCode::invalidBox, [&] { grid.move(a, box); });
    const ProxyId ids[] = {a, b};
    const Aabb boxes[] = {Aabb{Vec3(9, 9, 9), Vec3(10, 10, 10)}, box};
    expectCode(ErrorCode::invalidBox, [&] { grid.move(ids, boxes); });
    expectCode(ErrorCode::invalidBox, [&] { grid.queryBox(box, [](uint32_t) { return true; }); });
  }
  // Stale handles: removed, never issued, from another grid, wrong generation.
  SweepGrid other;
  const ProxyId foreign = other.add(Aabb{Vec3(0, 0, 0), Vec3(1, 1, 1)});
  const ProxyId c = grid.add(Aabb{Vec3(0, 0, 0), Vec3(1, 1, 1)});
  grid.remove(c);
  grid.update(s);
  const Aabb ok{Vec3(0, 0, 0), Vec3(1, 1, 1)};
  for (const ProxyId stale : {c, ProxyId{77, 0}, foreign, ProxyId{a.index, a.generation + 1}}) {
    expectCode(ErrorCode::staleHandle, [&] { grid.remove(stale); });
    expectCode(ErrorCode::staleHandle, [&] { grid.move(stale, ok); });
    const ProxyId ids[] = {a, stale};
    const Aabb boxes[] = {Aabb{Vec3(9, 9, 9), Vec3(10, 10, 10)}, ok};
    expectCode(ErrorCode::staleHandle, [&] { grid.move(ids, boxes); });
    EXPECT_FALSE(grid.contains(stale));
  }
  expectCode(ErrorCode::staleHandle, [&] { grid.box(c.index); });
  expectCode(ErrorCode::staleHandle, [&] { grid.handleOf(1000); });
  const ProxyId ids[] = {a, b};
  const Aabb one[] = {ok};
  expectCode(ErrorCode::invalidArgument, [&] { grid.move(ids, one); });
  // Rays and queries.
  Ray badRay = makeRay(Vec3(0, 0, 0), Vec3(1, 0, 0), 1);
  badRay.maxT = -1;
  expectCode(ErrorCode::invalidRay, [&] { grid.castRay(badRay, RayQuery::closest); });
  std::vector<RayHit> hits(1);
  const Ray rays[] = {badRay};
  expectCode(ErrorCode::invalidRay, [&] { grid.castRays(s, rays, hits, RayQuery::closest); });
  const Ray good[] = {makeRay(Vec3(0, 0, 0), Vec3(1, 0, 0), 1)};
  expectCode(ErrorCode::invalidArgument, [&] { grid.castRays(s, good, hits, RayQuery::all); });
  std::vector<RayHit> two(2);
  expectCode(ErrorCode::invalidArgument, [&] { grid.castRays(s, good, two, RayQuery::any); });
  std::vector<Neighbour> near;
  expectCode(ErrorCode::invalidArgument, [&] { grid.nearest(Vec3(0, 0, 0), 0, near); });
  expectCode(ErrorCode::invalidArgument, [&] { grid.castBox(Vec3(-1, 0, 0), good[0]); });
  EXPECT_EQ(grid.box(a.index).max.x(), 1.0f);
  EXPECT_EQ(grid.box(b.index).min.x(), 0.5f);
  std::vector<Pair> pairs;
  grid.findPairs(s, pairs);
  EXPECT_EQ(pairs, (std::vector<Pair>{{0, 1}}));
}

TEST(SweepGrid, ConfigIsValidated) {
  auto expectRejected = [](const SweepGridConfig& config) {
    test::expectError(ErrorCode::invalidArgument, [&] { SweepGrid grid(config); });
  };
  SweepGridConfig config;
  config.cellSize = -1;
  expectRejected(config);
  config.cellSize = 0;
  config.maxCellsPerProxy = 0;
  expectRejected(config);
  config = SweepGridConfig{};
  config.cellStretchX = 0.5f;
  expectRejected(config);
  config.cellStretchX = std::numeric_limits<float>::quiet_NaN();
  expectRejected(config);
}

}  // namespace
}  // namespace bp

namespace bp {
namespace {

// The batch move with a scheduler: checks in parallel chunks; writes in
// parallel when the handles come in increasing order, serially otherwise
// (shuffled, or a handle given twice: its last box wins). Every form must
// leave the grid as the one-thread form does. Statics move too (90 % of the
// `static` scene's boxes: their own cell layer is re-sorted).
TEST(SweepGrid, ParallelBatchMoveMatchesSerial) {
  const uint32_t n = 30000;
  Scene scene = makeScene(SceneKind::staticScene, n);
  Scheduler one(1), two(2);
  SweepGrid serial, parallel;
  const auto a = addScene(serial, scene), b = addScene(parallel, scene);
  std::vector<Pair> pa, pb;
  serial.findPairs(one, pa);
  parallel.findPairs(two, pb);
  std::mt19937 rng(7);
  for (int frame = 0; frame < 6; ++frame) {
    for (uint32_t i = 0; i < n; ++i) {
      const Vec3 d(float(int(rng() % 5) - 2) * 0.3f, 0.1f, float(frame % 2) * 0.2f);
      scene.boxes[i] = {scene.boxes[i].min + d, scene.boxes[i].max + d};
    }
    std::vector<uint32_t> order(n);
    for (uint32_t i = 0; i < n; ++i) order[i] = i;
    if (frame % 3 == 1) std::shuffle(order.begin(), order.end(), rng);
    std::vector<ProxyId> ia, ib;
    std::vector<Aabb> boxes;
    for (uint32_t i : order) {
      ia.push_back(a[i]);
      ib.push_back(b[i]);
      boxes.push_back(scene.boxes[i]);
    }
    if (frame % 3 == 2) {  // a handle given twice, the first time with a stale box
      ia.insert(ia.begin(), a[5]);
      ib.insert(ib.begin(), b[5]);
      boxes.insert(boxes.begin(), Aabb{Vec3(0, 0, 0), Vec3(1, 1, 1)});
    }
    serial.move(ia, boxes, one);
    parallel.move(ib, boxes, two);
    // Pending: these batches count their staying proxies, unlisted.
    ASSERT_EQ(serial.validate(), "") << "frame " << frame;
    ASSERT_EQ(parallel.validate(), "") << "frame " << frame;
    serial.findPairs(one, pa);
    parallel.findPairs(two, pb);
    ASSERT_EQ(serial.validate(), "") << "frame " << frame;
    ASSERT_EQ(parallel.validate(), "") << "frame " << frame;
    ASSERT_EQ(pa, pb) << "frame " << frame;
    EXPECT_TRUE(test::samePairs(brute::findPairs(scene.boxes, scene.isStatic), pb))
        << "frame " << frame;
  }
  // A bad entry anywhere in a parallel batch: rejected whole, nothing changes.
  std::vector<ProxyId> ids(b.begin(), b.end());
  std::vector<Aabb> boxes(scene.boxes.begin(), scene.boxes.end());
  boxes[n - 3].min.x() = std::numeric_limits<float>::quiet_NaN();
  test::expectError(ErrorCode::invalidBox, [&] { parallel.move(ids, boxes, two); });
  EXPECT_FALSE(parallel.hasPendingChanges());
  EXPECT_EQ(parallel.validate(), "");
  // A stale handle (wrong generation, or an index past the pool) in the
  // first, a middle and the last chunk of 8192: the same.
  boxes.assign(scene.boxes.begin(), scene.boxes.end());
  for (const size_t at : {size_t(0), size_t(n / 2), size_t(n - 1)})
    for (const ProxyId bad :
         {ProxyId{ids[at].index, ids[at].generation + 1}, ProxyId{n + 100, ids[at].generation}}) {
      std::vector<ProxyId> withBad = ids;
      withBad[at] = bad;
      SCOPED_TRACE("entry " + std::to_string(at));
      test::expectError(ErrorCode::staleHandle, [&] { parallel.move(withBad, boxes, two); });
      EXPECT_FALSE(parallel.hasPendingChanges());
    }
  EXPECT_EQ(parallel.validate(), "");
  // A batch on an empty grid names no live proxy.
  SweepGrid empty;
  test::expectError(ErrorCode::staleHandle, [&] {
    empty.move(std::span<const ProxyId>(ids.data(), 1), std::span<const Aabb>(boxes.data(), 1),
               two);
  });
}

// A batch large enough that move() counts the proxies that stay in their
// cells rather than listing them, but made of one handle given again and
// again: update() then finds it should not refresh every cell, and must list
// the staying proxy from its state so that its cell is still refreshed. Box
// a moves inside its cell until it overlaps box b; the other boxes, far off,
// only make many cells.
TEST(SweepGrid, RepeatedHandleInALargeBatchStillRefreshesItsCell) {
  for (const uint32_t threads : {1u, 2u}) {
    Scheduler scheduler(threads);
    SweepGridConfig config;
    config.cellSize = 8.0f;
    config.cellStretchX = 1.0f;
    SweepGrid grid(config);
    const ProxyId a = grid.add({Vec3(1, 1, 1), Vec3(2, 2, 2)}, false);
    grid.add({Vec3(3, 1, 1), Vec3(4, 2, 2)}, false);
    std::vector<Aabb> all = {{Vec3(1, 1, 1), Vec3(2, 2, 2)}, {Vec3(3, 1, 1), Vec3(4, 2, 2)}};
    for (uint32_t k = 0; k < 2000; ++k) {
      const Vec3 at(100.0f + 9.0f * float(k % 40), 9.0f * float(k / 40), 0.0f);
      all.push_back({at, at + Vec3(1, 1, 1)});
      grid.add(all.back(), false);
    }
    std::vector<Pair> pairs;
    grid.findPairs(scheduler, pairs);
    ASSERT_TRUE(pairs.empty());
    ASSERT_GT(grid.cellCount(), 1000u);
    // 9000 entries: over 2 x the cells and over 1/16 of the proxies, and
    // past one chunk of the parallel check.
    std::vector<ProxyId> ids(9000, a);
    std::vector<Aabb> boxes(ids.size());
    for (size_t k = 0; k < boxes.size(); ++k) {
      const float dx = 1.5f * float(k) / float(boxes.size() - 1);  // to 1.5: overlaps b
      boxes[k] = {Vec3(1 + dx, 1, 1), Vec3(2 + dx, 2, 2)};
    }
    grid.move(ids, boxes, scheduler);
    EXPECT_EQ(grid.validate(), "") << threads << " threads";
    all[0] = boxes.back();
    grid.findPairs(scheduler, pairs);
    EXPECT_EQ(grid.validate(), "") << threads << " threads";
    EXPECT_TRUE(test::samePairs(brute::findPairs(all, std::vector<uint8_t>(all.size(), 0)), pairs))
        << threads << " threads";
    EXPECT_EQ(pairs.size(), 1u) << threads << " threads";
  }
}

// The batch move tests "still in its cells" on 16-bit cell coordinates
// (StayKey): a proxy registered beyond them must relink whenever it moves,
// and one on the last coordinate that fits must see a move to the first
// that does not. Each case moves box A out across a cell face onto box B
// (A's cells change, the pair appears); a wrongly kept "stayed" leaves A in
// its old cell and loses the pair.
TEST(SweepGrid, MovesBeyond16BitCellCoordinatesRelink) {
  for (const float base : {32766.0f, 40000.0f, -40001.0f, 70000.0f}) {
    SweepGridConfig config;
    config.cellSize = 1.0f;
    config.cellStretchX = 1.0f;
    SweepGrid grid(config);
    std::vector<Aabb> all = {{Vec3(0, base + 0.25f, 0), Vec3(1, base + 0.5f, 1)},
                             {Vec3(0, base + 1.25f, 0), Vec3(1, base + 1.5f, 1)}};
    const ProxyId a = grid.add(all[0]);
    grid.add(all[1]);
    Scheduler scheduler(1);
    std::vector<Pair> pairs;
    grid.findPairs(scheduler, pairs);
    ASSERT_TRUE(pairs.empty()) << base;
    all[0] = {Vec3(0, base + 0.75f, 0), Vec3(1, base + 1.375f, 1)};
    const std::vector<ProxyId> ids = {a};
    grid.move(ids, std::span<const Aabb>(all.data(), 1));
    EXPECT_EQ(grid.validate(), "") << base;
    grid.findPairs(scheduler, pairs);
    EXPECT_EQ(pairs, (std::vector<Pair>{{0, 1}})) << base;
    EXPECT_EQ(grid.validate(), "") << base;
  }
}

// The first update of a large world plans a relink for every proxy, in
// about one plan a thousand proxies; once updates relink few again, those
// plans are released (about 50 bytes a proxy kept otherwise), and the grid
// stays exact (its pairs those of a grid made from the moved boxes).
TEST(SweepGrid, TheRelinkPlansOfALargeUpdateAreReleased) {
  constexpr uint32_t n = 200000;
  for (const int threads : {1, 2}) {
    Scene scene = makeScene(SceneKind::uniform, n);
    SweepGrid grid;
    const std::vector<ProxyId> ids = addScene(grid, scene);
    Scheduler scheduler(threads);
    std::vector<Pair> pairs;
    grid.findPairs(scheduler, pairs);
    const size_t loaded = grid.memoryBytes();
    for (int frame = 0; frame < 2; ++frame) {
      for (uint32_t i = 0; i < n; i += 100) {
        scene.boxes[i] = scene.boxes[(i + 7 * 100) % n];
        grid.move(ids[i], scene.boxes[i]);
      }
      grid.findPairs(scheduler, pairs);
    }
    EXPECT_LT(grid.memoryBytes() + 30 * size_t(n), loaded) << threads << " threads";
    EXPECT_EQ(grid.validate(), "");
    SweepGrid fresh;  // the same boxes in a grid that never had the large update
    addScene(fresh, scene);
    std::vector<Pair> expected;
    fresh.findPairs(scheduler, expected);
    EXPECT_EQ(pairs, expected) << threads << " threads";
  }
}

// Ranges of cells beyond 16-bit coordinates live in wide slots beside the
// range keys: boxes on both sides of the limit move across it every frame
// (most relink, on one thread and on two, where the relinks are planned in
// parallel chunks and the slots given out in plan order), some are removed
// and re-added (indices and slots reused), and the grid stays exact against
// brute force, every slot held once or free (validate()).
TEST(SweepGrid, WideCellRangesStayExactUnderChurn) {
  constexpr uint32_t n = 3000;
  for (const int threads : {1, 2}) {
    SweepGridConfig config;
    config.cellSize = 1.0f;
    config.cellStretchX = 1.0f;
    SweepGrid grid(config);
    Scheduler scheduler(threads);
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> across(-4.0f, 4.0f), onAxis(32700.0f, 32830.0f);
    auto boxAt = [](float x, float y, float z) {
      return Aabb{Vec3(x, y, z), Vec3(x + 0.7f, y + 0.6f, z + 0.8f)};
    };
    std::vector<Aabb> boxes(n);
    std::vector<ProxyId> ids(n);
    for (uint32_t i = 0; i < n; ++i) {
      // y beyond the limit for about half; x or z far out for a few more.
      const float far = i % 7 == 0 ? -40000.0f : 0.0f;
      boxes[i] = boxAt(across(rng) + far, onAxis(rng), across(rng));
      ids[i] = grid.add(boxes[i]);
    }
    std::vector<Pair> pairs;
    for (int frame = 0; frame < 6; ++frame) {
      grid.findPairs(scheduler, pairs);
      ASSERT_EQ(grid.validate(), "") << threads << " threads, frame " << frame;
      std::vector<Pair> expected = brute::findPairs(boxes, std::vector<uint8_t>(n, 0));
      std::vector<Pair> mapped;  // grid indices to box indices
      std::vector<uint32_t> boxOf(grid.capacity(), kNullIndex);
      for (uint32_t i = 0; i < n; ++i) boxOf[ids[i].index] = i;
      for (const Pair& p : pairs) mapped.push_back(makePair(boxOf[p.a], boxOf[p.b]));
      EXPECT_TRUE(test::samePairs(expected, mapped)) << threads << " threads, frame " << frame;
      for (uint32_t i = 0; i < n; ++i) {
        const float far = i % 7 == 0 ? -40000.0f : 0.0f;
        boxes[i] = boxAt(across(rng) + far, onAxis(rng), across(rng));
        if (i % 19 == uint32_t(frame)) {  // remove and re-add: the index and its slot reused
          grid.remove(ids[i]);
          ids[i] = grid.add(boxes[i]);
        }
      }
      grid.move(ids, boxes, scheduler);
    }
  }
}

// The cell layout itself (which cells exist, in which order, each member
// where) is the same for any thread count, not only the sorted pairs:
// grids on 1, 2 and 8 threads run in lock step through frames with more
// dirty proxies than one chunk of the relink plans (8192), adds and removes
// that reuse indices and flip the static flag, teleports, and shuffled
// batches; a box query over the world visits cells and members in layout
// order, and must visit them in the same order on every grid.
TEST(SweepGrid, CellLayoutIsTheSameForAnyThreadCount) {
  constexpr uint32_t n = 20000;
  Scene scene = makeScene(SceneKind::uniform, n);
  Scheduler one(1), two(2), eight(8);
  Scheduler* schedulers[3] = {&one, &two, &eight};
  SweepGrid grids[3];
  std::vector<ProxyId> ids[3];
  for (int g = 0; g < 3; ++g) ids[g] = addScene(grids[g], scene);
  std::mt19937 rng(21);
  const float side = scene.worldSide;
  auto layout = [](const SweepGrid& grid) {
    std::vector<uint32_t> visits;
    grid.queryBox({Vec3(-1e6f, -1e6f, -1e6f), Vec3(1e6f, 1e6f, 1e6f)}, [&](uint32_t proxy) {
      visits.push_back(proxy);
      return true;
    });
    return visits;
  };
  for (int frame = 0; frame < 8; ++frame) {
    scene.step();
    std::vector<uint32_t> order(n);
    for (uint32_t i = 0; i < n; ++i) order[i] = i;
    if (frame % 2 == 1) std::shuffle(order.begin(), order.end(), rng);
    // Teleport a few boxes across the world.
    for (int t = 0; t < 50; ++t) {
      const uint32_t i = uint32_t(rng() % n);
      const Vec3 to(float(rng() % 1000) * side / 1000, float(rng() % 1000) * side / 1000,
                    float(rng() % 1000) * side / 1000);
      const Vec3 half = scene.boxes[i].extent() * 0.5f;
      scene.boxes[i] = {to - half, to + half};
    }
    std::vector<Aabb> boxes;
    for (const uint32_t i : order) boxes.push_back(scene.boxes[i]);
    for (int g = 0; g < 3; ++g) {
      std::vector<ProxyId> batch;
      for (const uint32_t i : order) batch.push_back(ids[g][i]);
      grids[g].move(batch, boxes, *schedulers[g]);
      // Remove and re-add some (their indices are reused, static flipped).
      for (uint32_t k = 0; k < 40; ++k) {
        const uint32_t i = (uint32_t(frame) * 977 + k * 131) % n;
        grids[g].remove(ids[g][i]);
        ids[g][i] = grids[g].add(scene.boxes[i], (frame + k) % 3 == 0);
      }
    }
    std::vector<Pair> pairs[3];
    std::vector<uint32_t> visits[3];
    for (int g = 0; g < 3; ++g) {
      grids[g].findPairs(*schedulers[g], pairs[g]);
      ASSERT_EQ(grids[g].validate(), "") << "frame " << frame << " grid " << g;
      visits[g] = layout(grids[g]);
    }
    for (int g = 1; g < 3; ++g) {
      EXPECT_EQ(pairs[g], pairs[0]) << "frame " << frame << " grid " << g;
      EXPECT_EQ(grids[g].cellCount(), grids[0].cellCount()) << "frame " << frame;
      EXPECT_TRUE(visits[g] == visits[0]) << "frame " << frame << " grid " << g;
    }
  }
}

}  // namespace
}  // namespace bp
