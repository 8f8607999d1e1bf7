// The two structures agree with each other: identical pair sets on every
// standard scene for 30 frames of motion, and identical ray hits (closest,
// all) at the first and last frame. Each is also checked against brute force
// in its own test; this one proves they are interchangeable.
#include <broadphase/testkit/brute_force.h>
#include <broadphase/testkit/scene.h>
#include "bvh/bvh.h"
#include "sweep/sweep_grid.h"

#include "test_support.h"

#include <algorithm>
#include <random>

namespace bp {
namespace {

template <class Structure>
std::vector<ProxyId> addScene(Structure& s, const Scene& scene) {
  std::vector<ProxyId> ids(scene.n);
  for (uint32_t i = 0; i < scene.n; ++i) ids[i] = s.add(scene.boxes[i], scene.isStatic[i] != 0);
  return ids;
}

TEST(CrossStructure, SamePairsAndHitsOnEveryScene) {
  Scheduler scheduler(2);
  for (SceneKind kind : kAllScenes) {
    Scene scene = makeScene(kind, 6000);
    Bvh bvh;
    SweepGrid sweep;
    const std::vector<ProxyId> bvhIds = addScene(bvh, scene);
    const std::vector<ProxyId> sweepIds = addScene(sweep, scene);
    std::vector<ProxyId> movingBvh, movingSweep;
    for (uint32_t i = 0; i < scene.n; ++i)
      if (!scene.isStatic[i]) {
        movingBvh.push_back(bvhIds[i]);
        movingSweep.push_back(sweepIds[i]);
      }
    std::vector<Aabb> boxes(movingBvh.size());
    std::vector<Pair> a, b;
    const auto rays = makeRays(scene.n, 300);
    auto compareRays = [&] {
      std::vector<RayHit> ha(rays.size()), hb(rays.size());
      bvh.castRays(scheduler, rays, ha, RayQuery::closest);
      sweep.castRays(scheduler, rays, hb, RayQuery::closest);
      EXPECT_EQ(ha, hb) << sceneName(kind) << " frame " << scene.frame;
      std::vector<RayHit> alla, allb;
      for (const Ray& r : rays) {
        bvh.castRayAll(r, alla);
        sweep.castRayAll(r, allb);
        ASSERT_EQ(alla, allb) << sceneName(kind) << " frame " << scene.frame;
      }
    };
    for (int frame = 0; frame <= 30; ++frame) {
      if (frame > 0) {
        scene.step();
        for (size_t k = 0; k < movingBvh.size(); ++k) boxes[k] = scene.boxes[movingBvh[k].index];
        bvh.move(movingBvh, boxes);
        sweep.move(movingSweep, boxes);
      }
      bvh.findPairs(scheduler, a);
      sweep.findPairs(scheduler, b);
      ASSERT_TRUE(test::samePairs(a, b)) << sceneName(kind) << " frame " << frame;
      if (frame == 0 || frame == 30) compareRays();
    }
  }
}

// The unchecked batch move by index (boxes read at each index of an array
// kept by index, as BroadPhase hands its moves over) leaves a structure as
// the batch move by handle does, and both match brute force: frames in
// index order (the sweep's parallel write) and shuffled with repeats.
template <class Structure>
void expectMoveByIndexAsByHandle(const char* which) {
  Scheduler scheduler(2);
  Scene scene = makeScene(SceneKind::uniform, 20000);
  Structure byHandle, byIndex;
  const std::vector<ProxyId> ids = addScene(byHandle, scene);
  addScene(byIndex, scene);
  std::vector<Aabb> held = scene.boxes;  // what both structures hold, by index
  std::mt19937 rng(11);
  std::vector<Pair> a, b;
  for (int frame = 1; frame <= 6; ++frame) {
    scene.step();
    std::vector<uint32_t> indices;
    for (uint32_t i = 0; i < scene.n; ++i)
      if (frame % 2 == 1 || rng() % 3 == 0) indices.push_back(i);
    if (frame % 2 == 0) {
      std::shuffle(indices.begin(), indices.end(), rng);
      for (size_t k = 0; k < 500; ++k) indices.push_back(indices[rng() % indices.size()]);
    }
    std::vector<ProxyId> handles;
    std::vector<Aabb> boxes;
    for (const uint32_t i : indices) {
      held[i] = scene.boxes[i];
      handles.push_back(ids[i]);
      boxes.push_back(held[i]);
    }
    byHandle.move(handles, boxes, scheduler);
    byIndex.moveUnchecked(std::span<const uint32_t>(indices), held, scheduler);
    byHandle.findPairs(scheduler, a);
    byIndex.findPairs(scheduler, b);
    ASSERT_EQ(byIndex.validate(), "") << which << " frame " << frame;
    ASSERT_TRUE(test::samePairs(a, b)) << which << " frame " << frame;
    ASSERT_TRUE(test::samePairs(brute::findPairs(held), b)) << which << " frame " << frame;
  }
}

TEST(CrossStructure, MoveByIndexAsByHandle) {
  expectMoveByIndexAsByHandle<Bvh>("bvh");
  expectMoveByIndexAsByHandle<SweepGrid>("sweep");
}

}  // namespace
}  // namespace bp
