// Bvh against the brute-force oracle and the reference data.
#include "bvh/bvh.h"
#include <broadphase/error.h>
#include <broadphase/testkit/brute_force.h>
#include <broadphase/testkit/scene.h>
#include "bvh/bvh_stack.h"

#include "error_capture.h"
#include "test_support.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <mutex>

namespace bp {
namespace {

std::vector<ProxyId> addScene(Bvh& bvh, const Scene& scene) {
  std::vector<ProxyId> ids;
  for (uint32_t i = 0; i < scene.n; ++i) ids.push_back(bvh.add(scene.boxes[i], scene.isStatic[i]));
  return ids;
}

void moveScene(Bvh& bvh, const Scene& scene, const std::vector<ProxyId>& ids) {
  bvh.move(ids, scene.boxes);
}

std::vector<uint32_t> sorted(std::vector<uint32_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

std::vector<uint32_t> queryBoxAll(const Bvh& bvh, const Aabb& box) {
  std::vector<uint32_t> out;
  bvh.queryBox(box, [&](uint32_t p) {
    out.push_back(p);
    return true;
  });
  return sorted(out);
}

std::vector<uint32_t> queryPointAll(const Bvh& bvh, const Vec3& point) {
  std::vector<uint32_t> out;
  bvh.queryPoint(point, [&](uint32_t p) {
    out.push_back(p);
    return true;
  });
  return sorted(out);
}

std::string printed(float t) {
  char s[32];
  std::snprintf(s, sizeof s, "%.6g", double(t));
  return s;
}

TEST(Bvh, ReferencePairsOnEveryScene) {
  const auto reference = test::loadReferencePairs();
  ASSERT_EQ(reference.size(), 20u);
  Scheduler scheduler(2);
  for (SceneKind kind : kAllScenes) {
    Scene scene = makeScene(kind, 10000);
    Bvh bvh;
    const auto ids = addScene(bvh, scene);
    for (const auto& ref : reference) {
      if (ref.scene != sceneName(kind)) continue;
      while (scene.frame < ref.frame) {
        scene.step();
        moveScene(bvh, scene, ids);
        if (scene.frame % 3 == 0) bvh.update(scheduler);  // frames in between, as a game would
      }
      std::vector<Pair> pairs;
      bvh.findPairs(scheduler, pairs);
      ASSERT_EQ(bvh.validate(), "") << ref.scene << " frame " << ref.frame;
      EXPECT_EQ(pairs.size(), ref.pairs) << ref.scene << " frame " << ref.frame;
      EXPECT_EQ(hashPairs(pairs), ref.hash) << ref.scene << " frame " << ref.frame;
      if (ref.frame == 30) {  // brute force is O(N^2): once per scene
        EXPECT_TRUE(test::samePairs(brute::findPairs(scene.boxes, scene.isStatic), pairs))
            << ref.scene << " frame " << ref.frame;
      }
    }
  }
}

TEST(Bvh, ReferenceClosestHits) {
  const auto reference = test::loadReferenceRays();
  ASSERT_EQ(reference.size(), 1000u);
  const Scene scene = makeScene(SceneKind::uniform, 10000);
  const auto rays = makeRays(10000, 1000);
  Scheduler scheduler(2);
  Bvh bvh;
  addScene(bvh, scene);
  bvh.update(scheduler);
  std::vector<RayHit> batch(rays.size());
  bvh.castRays(scheduler, rays, batch, RayQuery::closest);
  for (const auto& ref : reference) {
    const RayHit hit = bvh.castRay(rays[ref.ray], RayQuery::closest);
    ASSERT_EQ(hit.hit() ? int64_t(hit.proxy) : -1, ref.box) << "ray " << ref.ray;
    EXPECT_EQ(batch[ref.ray], hit) << "ray " << ref.ray;
    if (hit.hit()) {
      EXPECT_EQ(std::stod(printed(hit.t)), ref.t) << "ray " << ref.ray;
    }
  }
}

// Ray queries of every kind against the oracle on every scene, after motion
// (so fat boxes and refits are exercised), statics included.
TEST(Bvh, RayQueriesMatchBruteForce) {
  Scheduler scheduler(2);
  for (SceneKind kind : kAllScenes) {
    Scene scene = makeScene(kind, 3000, 5);
    Bvh bvh;
    const auto ids = addScene(bvh, scene);
    for (int f = 0; f < 4; ++f) {
      scene.step();
      moveScene(bvh, scene, ids);
    }
    bvh.update(scheduler);
    auto rays = makeRays(3000, 300, 9);
    if (kind == SceneKind::plane)  // rays over the plane's wide extent
      for (Ray& r : rays)
        r = makeRay(Vec3(r.origin.x() * 16, r.origin.y() * 0.2f, r.origin.z() * 16), r.direction,
                    r.maxT * 4);
    std::vector<RayHit> closest(rays.size()), any(rays.size());
    bvh.castRays(scheduler, rays, closest, RayQuery::closest);
    bvh.castRays(scheduler, rays, any, RayQuery::any);
    for (size_t k = 0; k < rays.size(); ++k) {
      const Ray& ray = rays[k];
      const RayHit expected = brute::castRayClosest(scene.boxes, ray);
      ASSERT_EQ(bvh.castRay(ray, RayQuery::closest), expected) << sceneName(kind) << " ray " << k;
      ASSERT_EQ(closest[k], expected);
      const auto allExpected = brute::castRayAll(scene.boxes, ray);
      std::vector<RayHit> all;
      bvh.castRayAll(ray, all);
      ASSERT_EQ(all, allExpected) << sceneName(kind) << " ray " << k;
      // Any: some true hit, or none exactly when there is none.
      const RayHit a = bvh.castRay(ray, RayQuery::any);
      ASSERT_EQ(a.hit(), expected.hit());
      ASSERT_EQ(any[k], a);
      if (a.hit()) {
        ASSERT_NE(std::find(allExpected.begin(), allExpected.end(), a), allExpected.end());
      }
      // Callback clipping at tEntry finds the closest hit.
      RayHit best;
      bvh.castRay(ray, [&](uint32_t p, float t) {
        const RayHit h{p, t};
        if (!best.hit() || hitBefore(h, best)) best = h;
        return t;
      });
      ASSERT_EQ(best, expected) << sceneName(kind) << " ray " << k;
      // Callback never clipping sees every hit once.
      std::vector<RayHit> seen;
      bvh.castRay(ray, [&](uint32_t p, float t) {
        seen.push_back({p, t});
        return std::numeric_limits<float>::infinity();
      });
      std::sort(seen.begin(), seen.end(), hitBefore);
      ASSERT_EQ(seen, allExpected);
      // A negative return stops at once.
      int calls = 0;
      bvh.castRay(ray, [&](uint32_t, float) {
        ++calls;
        return -1.0f;
      });
      ASSERT_EQ(calls, allExpected.empty() ? 0 : 1);
    }
  }
}

TEST(Bvh, BoxPointNearestAndSweptQueriesMatchBruteForce) {
  Scheduler scheduler(1);
  for (SceneKind kind : kAllScenes) {
    Scene scene = makeScene(kind, 2000, 3);
    Bvh bvh;
    const auto ids = addScene(bvh, scene);
    for (int f = 0; f < 3; ++f) {
      scene.step();
      moveScene(bvh, scene, ids);
      bvh.update(scheduler);
    }
    SceneRng rng(77);
    const Vec3 b = scene.bounds;
    for (int q = 0; q < 150; ++q) {
      const Vec3 c(rng.uniform() * b.x(), rng.uniform() * b.y(), rng.uniform() * b.z());
      const Vec3 e(rng.uniform() * 6, rng.uniform() * 6, rng.uniform() * 6);
      const Aabb box{c - e, c + e};
      ASSERT_EQ(queryBoxAll(bvh, box), brute::queryBox(scene.boxes, box));
      ASSERT_EQ(queryPointAll(bvh, c), brute::queryPoint(scene.boxes, c));
      for (uint32_t k : {1u, 7u, 40u}) {
        std::vector<Neighbour> near;
        bvh.nearest(c, k, near);
        ASSERT_EQ(near, brute::nearest(scene.boxes, c, k)) << sceneName(kind) << " k " << k;
      }
      const Ray ray = makeRay(c, Vec3(rng.normal(), rng.normal(), rng.normal()), 20.0f);
      const Vec3 half(rng.uniform(), rng.uniform() * 2, rng.uniform() * 0.1f);
      ASSERT_EQ(bvh.castBox(half, ray), brute::castBox(scene.boxes, half, ray));
      ASSERT_EQ(bvh.castBox(Vec3::Zero(), ray), brute::castRayClosest(scene.boxes, ray));
    }
    // Early stop: the callback returning false ends the query.
    int calls = 0;
    bvh.queryBox({Vec3(-1e6f, -1e6f, -1e6f), Vec3(1e6f, 1e6f, 1e6f)}, [&](uint32_t) {
      ++calls;
      return calls < 5;
    });
    EXPECT_EQ(calls, 5);
    // More neighbours asked than proxies.
    std::vector<Neighbour> near;
    bvh.nearest(Vec3::Zero(), 5000, near);
    EXPECT_EQ(near, brute::nearest(scene.boxes, Vec3::Zero(), 5000));
  }
}

TEST(Bvh, IdenticalForAnyThreadCount) {
  struct Result {
    std::vector<Pair> pairs;
    std::vector<RayHit> closest, any;
    double cost;
  };
  auto run = [](int threads) {
    Scheduler scheduler(threads);
    Scene scene = makeScene(SceneKind::clustered, 6000, 11);
    Bvh bvh;
    const auto ids = addScene(bvh, scene);
    Result r;
    for (int f = 0; f < 6; ++f) {
      scene.step();
      moveScene(bvh, scene, ids);
      bvh.findPairs(scheduler, r.pairs);
    }
    const auto rays = makeRays(6000, 2000, 4);
    r.closest.resize(rays.size());
    r.any.resize(rays.size());
    bvh.castRays(scheduler, rays, r.closest, RayQuery::closest);
    bvh.castRays(scheduler, rays, r.any, RayQuery::any);
    r.cost = bvh.dynamicStats().cost;
    return r;
  };
  const Result one = run(1);
  for (int threads : {2, 8}) {
    const Result other = run(threads);
    EXPECT_TRUE(test::samePairs(one.pairs, other.pairs)) << threads << " threads";
    EXPECT_EQ(one.closest, other.closest) << threads << " threads";
    EXPECT_EQ(one.any, other.any) << threads << " threads";
    EXPECT_EQ(one.cost, other.cost) << threads << " threads";
  }
}

TEST(Bvh, StreamingPairsDeliverEachPairOnce) {
  Scheduler scheduler(2);
  Scene scene = makeScene(SceneKind::sizes, 5000, 2);
  Bvh bvh;
  const auto ids = addScene(bvh, scene);
  scene.step();
  moveScene(bvh, scene, ids);
  std::mutex mutex;
  std::vector<Pair> streamed;
  bvh.findPairs(scheduler, [&](std::span<const Pair> chunk) {
    std::lock_guard<std::mutex> lock(mutex);
    streamed.insert(streamed.end(), chunk.begin(), chunk.end());
  });
  std::sort(streamed.begin(), streamed.end());
  EXPECT_TRUE(test::samePairs(brute::findPairs(scene.boxes, scene.isStatic), streamed));
}

// The dynamic tree's SAH cost stays within a bounded factor of a fresh full
// build over a long run of motion (refits degrade it; rebuilds restore it).
TEST(Bvh, TreeQualityStaysBounded) {
  Scheduler scheduler(2);
  for (SceneKind kind : {SceneKind::uniform, SceneKind::clustered}) {
    Scene scene = makeScene(kind, 3000, 3);
    Bvh bvh;
    const auto ids = addScene(bvh, scene);
    double worst = 0;
    std::vector<Pair> pairs;
    for (int f = 0; f < 240; ++f) {
      scene.step();
      moveScene(bvh, scene, ids);
      bvh.findPairs(scheduler, pairs);
      if (f % 12 == 0) worst = std::max(worst, bvh.qualityRatio(scheduler));
    }
    EXPECT_LT(worst, 1.6) << sceneName(kind);
    EXPECT_GT(bvh.dynamicStats().rebuildCount, 1u) << sceneName(kind);
    EXPECT_TRUE(test::samePairs(brute::findPairs(scene.boxes, scene.isStatic), pairs));
    std::printf("[quality] %s: worst SAH ratio %.3f over 240 frames, %u rebuilds\n",
                sceneName(kind), worst, bvh.dynamicStats().rebuildCount);
  }
}

using test::expectError;

TEST(Bvh, BadInputIsRejectedAndChangesNothing) {
  Scheduler scheduler(2);
  Scene scene = makeScene(SceneKind::staticScene, 500, 4);
  Bvh bvh;
  auto ids = addScene(bvh, scene);
  std::vector<Pair> before;
  bvh.findPairs(scheduler, before);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const Aabb bad[] = {
      {Vec3(nan, 0, 0), Vec3(1, 1, 1)},
      {Vec3(0, 0, 0), Vec3(inf, 1, 1)},
      {Vec3(0, 2, 0), Vec3(1, 1, 1)},  // inverted
      {Vec3(0, 0, 0), Vec3(1, 1, 3e7f)},
  };
  const ProxyId removed = ids.back();
  bvh.remove(removed);
  ids.pop_back();
  bvh.update(scheduler);
  bvh.findPairs(scheduler, before);
  const ProxyId neverIssued{100000, 0};
  const ProxyId wrongGeneration{ids[3].index, ids[3].generation + 1};
  Bvh other;
  const ProxyId foreign = other.add(Aabb{Vec3::Zero(), Vec3::Ones()});

  auto unchanged = [&] {
    ASSERT_EQ(bvh.validate(), "");
    std::vector<Pair> after;
    bvh.findPairs(scheduler, after);
    EXPECT_TRUE(test::samePairs(before, after));
    EXPECT_EQ(bvh.proxyCount(), 499u);
  };
  for (const Aabb& b : bad) {
    expectError(ErrorCode::invalidBox, [&] { bvh.add(b); });
    expectError(ErrorCode::invalidBox, [&] { bvh.move(ids[0], b); });
    expectError(ErrorCode::invalidBox, [&] { bvh.queryBox(b, [](uint32_t) { return true; }); });
    // A batch with one bad box applies none of its moves.
    std::vector<Aabb> boxes(ids.size(), Aabb{Vec3(1000, 1000, 1000), Vec3(1001, 1001, 1001)});
    boxes[ids.size() / 2] = b;
    expectError(ErrorCode::invalidBox, [&] { bvh.move(ids, boxes); });
    unchanged();
  }
  for (const ProxyId id : {removed, neverIssued, wrongGeneration, foreign}) {
    expectError(ErrorCode::staleHandle, [&] { bvh.remove(id); });
    expectError(ErrorCode::staleHandle, [&] { bvh.move(id, scene.boxes[0]); });
    std::vector<ProxyId> batch(ids.begin(), ids.begin() + 10);
    batch.push_back(id);
    std::vector<Aabb> boxes(batch.size(), scene.boxes[0]);
    expectError(ErrorCode::staleHandle, [&] { bvh.move(batch, boxes); });
    unchanged();
  }
  expectError(ErrorCode::staleHandle, [&] { bvh.box(removed.index); });
  expectError(ErrorCode::invalidArgument, [&] {
    std::vector<Aabb> boxes(3, scene.boxes[0]);
    bvh.move(std::span<const ProxyId>(ids.data(), 4), boxes);
  });
  std::vector<Ray> rays = makeRays(500, 4);
  std::vector<RayHit> hits(3);
  expectError(ErrorCode::invalidArgument,
              [&] { bvh.castRays(scheduler, rays, hits, RayQuery::closest); });
  std::vector<Neighbour> near;
  expectError(ErrorCode::invalidArgument, [&] { bvh.nearest(Vec3::Zero(), 0, near); });
  Ray badRay = rays[0];
  badRay.maxT = -1;
  expectError(ErrorCode::invalidRay, [&] { bvh.castRay(badRay, RayQuery::closest); });
  badRay = rays[0];
  badRay.direction = Vec3::Zero();
  expectError(ErrorCode::invalidRay, [&] { bvh.castRay(badRay, RayQuery::any); });
  unchanged();

  // Double remove.
  bvh.remove(ids[7]);
  expectError(ErrorCode::staleHandle, [&] { bvh.remove(ids[7]); });
  EXPECT_EQ(bvh.validate(), "");
  // Queries with pending changes.
  expectError(ErrorCode::invalidArgument, [&] { bvh.castRay(rays[0], RayQuery::closest); });
  expectError(ErrorCode::invalidArgument,
              [&] { bvh.queryPoint(Vec3::Zero(), [](uint32_t) { return true; }); });
  bvh.update(scheduler);
  {
    test::ErrorCapture capture;
    bvh.castRay(rays[0], RayQuery::closest);
    EXPECT_EQ(capture.count(), 0u);
  }
  expectError(ErrorCode::invalidArgument, [] {
    const Bvh rejected(BvhConfig{.margin = -1.0f});
    EXPECT_EQ(rejected.config().margin, BvhConfig{}.margin);  // the default instead
  });
}

TEST(Bvh, EmptyAndTinyStructures) {
  Scheduler scheduler(2);
  Bvh bvh;
  std::vector<Pair> pairs;
  bvh.findPairs(scheduler, pairs);
  EXPECT_TRUE(pairs.empty());
  EXPECT_EQ(bvh.validate(), "");
  const Ray ray = makeRay(Vec3::Zero(), Vec3(1, 0, 0), 10);
  EXPECT_FALSE(bvh.castRay(ray, RayQuery::closest).hit());
  std::vector<Neighbour> near;
  bvh.nearest(Vec3::Zero(), 3, near);
  EXPECT_TRUE(near.empty());

  const ProxyId a = bvh.add({Vec3(1, -1, -1), Vec3(2, 1, 1)});
  bvh.findPairs(scheduler, pairs);
  EXPECT_TRUE(pairs.empty());
  EXPECT_EQ(bvh.validate(), "");
  EXPECT_EQ(bvh.castRay(ray, RayQuery::closest), (RayHit{a.index, 1.0f}));
  const ProxyId s = bvh.add({Vec3(1.5f, -1, -1), Vec3(3, 1, 1)}, true);
  bvh.findPairs(scheduler, pairs);
  EXPECT_EQ(pairs, (std::vector<Pair>{{a.index, s.index}}));
  bvh.nearest(Vec3(10, 0, 0), 3, near);
  EXPECT_EQ(near.size(), 2u);
  EXPECT_EQ(near[0].proxy, s.index);
  bvh.remove(a);
  bvh.findPairs(scheduler, pairs);
  EXPECT_TRUE(pairs.empty());
  EXPECT_EQ(bvh.validate(), "");
  bvh.remove(s);
  bvh.update(scheduler);
  EXPECT_EQ(bvh.validate(), "");
  EXPECT_EQ(bvh.proxyCount(), 0u);
  EXPECT_GT(bvh.memoryBytes(), 0u);
}

// Big batches on a big tree take the Morton-ordered path of castRays: each
// result must still land in its own ray's slot.
TEST(Bvh, BigRayBatchesInMortonOrder) {
  Scheduler scheduler(2);
  const Scene scene = makeScene(SceneKind::uniform, 40000, 6);
  Bvh bvh;
  addScene(bvh, scene);
  bvh.update(scheduler);
  ASSERT_GE(bvh.dynamicStats().nodes, 32768u);
  const auto rays = makeRays(40000, 6000, 7);
  std::vector<RayHit> closest(rays.size()), any(rays.size());
  bvh.castRays(scheduler, rays, closest, RayQuery::closest);
  bvh.castRays(scheduler, rays, any, RayQuery::any);
  for (size_t k = 0; k < rays.size(); ++k) {
    ASSERT_EQ(closest[k], bvh.castRay(rays[k], RayQuery::closest)) << "ray " << k;
    ASSERT_EQ(any[k], bvh.castRay(rays[k], RayQuery::any)) << "ray " << k;
    if (k < 100) {
      ASSERT_EQ(closest[k], brute::castRayClosest(scene.boxes, rays[k])) << "ray " << k;
    }
  }
}

TEST(Bvh, StackGrowsAndNeverTruncates) {
  BvhStack<uint32_t> stack;
  for (uint32_t i = 0; i < 10000; ++i) stack.push(i);
  EXPECT_EQ(stack.size(), 10000u);
  for (uint32_t i = 10000; i-- > 0;) ASSERT_EQ(stack.pop(), i);
  EXPECT_TRUE(stack.empty());
}

// Nested boxes inserted one per update, with rebuilds disabled, make a chain
// hundreds of levels deep: every walk must still be exact.
TEST(Bvh, DegenerateDeepTreeStaysExact) {
  Scheduler scheduler(2);
  Bvh bvh(BvhConfig{.rebuildRatio = 1e30f});
  std::vector<Aabb> boxes;
  for (int i = 0; i < 8; ++i) {
    const Aabb b{Vec3(float(i), 0, 0), Vec3(float(i) + 0.5f, 0.5f, 0.5f)};
    bvh.add(b);
    boxes.push_back(b);
  }
  bvh.update(scheduler);
  for (int i = 0; i < 400; ++i) {
    const float r = 10.0f + float(i);
    const Aabb b{Vec3(-r, -r, -r), Vec3(r + 0.01f * float(i % 7), r, r)};
    bvh.add(b, i % 5 == 0);
    boxes.push_back(b);
    bvh.update(scheduler);
  }
  ASSERT_EQ(bvh.validate(), "");
  std::vector<uint8_t> isStatic(boxes.size(), 0);
  for (size_t i = 8; i < boxes.size(); ++i) isStatic[i] = (i - 8) % 5 == 0;
  std::vector<Pair> pairs;
  bvh.findPairs(scheduler, pairs);
  EXPECT_TRUE(test::samePairs(brute::findPairs(boxes, isStatic), pairs));
  const Ray ray = makeRay(Vec3(3.2f, 0.2f, 0.2f), Vec3(1, 0.01f, 0), 500.0f);
  std::vector<RayHit> all;
  bvh.castRayAll(ray, all);
  EXPECT_EQ(all, brute::castRayAll(boxes, ray));
  EXPECT_EQ(bvh.castRay(ray, RayQuery::closest), brute::castRayClosest(boxes, ray));
  std::vector<Neighbour> near;
  bvh.nearest(Vec3(3.2f, 0.2f, 0.2f), 20, near);
  EXPECT_EQ(near, brute::nearest(boxes, Vec3(3.2f, 0.2f, 0.2f), 20));
  EXPECT_EQ(queryPointAll(bvh, Vec3(0.1f, 0.1f, 0.1f)),
            brute::queryPoint(boxes, Vec3(0.1f, 0.1f, 0.1f)));
}

// A move inside the fat box leaves the tree alone; one out of it refits.
TEST(Bvh, SmallMovesDoNotTouchTheTree) {
  Scheduler scheduler(1);
  Scene scene = makeScene(SceneKind::uniform, 2000, 8);
  Bvh bvh(BvhConfig{.margin = 0.5f});
  const auto ids = addScene(bvh, scene);
  bvh.update(scheduler);
  const BvhTreeStats before = bvh.dynamicStats();
  for (uint32_t i = 0; i < scene.n; ++i) {
    Aabb b = scene.boxes[i];
    b.min.x() += 0.3f;
    b.max.x() += 0.3f;
    bvh.move(ids[i], b);
    scene.boxes[i] = b;
  }
  std::vector<Pair> pairs;
  bvh.findPairs(scheduler, pairs);
  EXPECT_EQ(bvh.dynamicStats().cost, before.cost);  // no refit happened
  EXPECT_EQ(bvh.dynamicStats().rebuildCount, before.rebuildCount);
  EXPECT_TRUE(test::samePairs(brute::findPairs(scene.boxes, scene.isStatic), pairs));
  Aabb far = scene.boxes[0];
  far.min.x() += 3.0f;
  far.max.x() += 3.0f;
  bvh.move(ids[0], far);
  scene.boxes[0] = far;
  bvh.findPairs(scheduler, pairs);
  EXPECT_NE(bvh.dynamicStats().cost, before.cost);
  EXPECT_EQ(bvh.validate(), "");
  EXPECT_TRUE(test::samePairs(brute::findPairs(scene.boxes, scene.isStatic), pairs));
}

}  // namespace
}  // namespace bp
