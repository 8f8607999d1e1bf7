// The scene generator and the brute-force oracle together reproduce the
// reference answers of ../shared/bench/reference (copied to tests/data).
#include <broadphase/testkit/brute_force.h>
#include <broadphase/testkit/scene.h>

#include "test_support.h"

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace bp {
namespace {

TEST(Scene, ReferencePairCountsAndHashes) {
  const auto reference = test::loadReferencePairs();
  ASSERT_EQ(reference.size(), 20u);
  for (SceneKind kind : kAllScenes) {
    Scene scene = makeScene(kind, 10000);
    for (const auto& ref : reference) {
      if (ref.scene != sceneName(kind)) continue;
      while (scene.frame < ref.frame) scene.step();
      const auto pairs = brute::findPairs(scene.boxes, scene.isStatic);
      EXPECT_EQ(pairs.size(), ref.pairs) << ref.scene << " frame " << ref.frame;
      EXPECT_EQ(hashPairs(pairs), ref.hash) << ref.scene << " frame " << ref.frame;
    }
  }
}

TEST(Scene, ReferenceClosestHits) {
  const auto reference = test::loadReferenceRays();
  ASSERT_EQ(reference.size(), 1000u);
  const Scene scene = makeScene(SceneKind::uniform, 10000);
  const auto rays = makeRays(10000, 1000);
  for (const auto& ref : reference) {
    const RayHit hit = brute::castRayClosest(scene.boxes, rays[ref.ray]);
    ASSERT_EQ(hit.hit() ? int64_t(hit.proxy) : -1, ref.box) << "ray " << ref.ray;
    if (!hit.hit()) continue;
    char printed[32];
    std::snprintf(printed, sizeof printed, "%.6g", double(hit.t));
    EXPECT_EQ(std::stod(printed), ref.t) << "ray " << ref.ray;
  }
}

TEST(Scene, SameSeedSameScene) {
  const Scene a = makeScene(SceneKind::clustered, 500, 7);
  const Scene b = makeScene(SceneKind::clustered, 500, 7);
  const Scene c = makeScene(SceneKind::clustered, 500, 8);
  EXPECT_EQ(hashPairs(brute::findPairs(a.boxes)), hashPairs(brute::findPairs(b.boxes)));
  EXPECT_NE(hashPairs(brute::findPairs(a.boxes)), hashPairs(brute::findPairs(c.boxes)));
}

TEST(Scene, MotionStaysInsideTheDomain) {
  for (SceneKind kind : kAllScenes) {
    Scene scene = makeScene(kind, 2000);
    for (int f = 0; f < 200; ++f) scene.step();
    for (const Vec3& c : scene.centers)
      for (int a = 0; a < 3; ++a) {
        EXPECT_GE(c[a], 0.0f) << sceneName(kind);
        EXPECT_LT(c[a], scene.bounds[a]) << sceneName(kind);
      }
  }
}

// stepRange over ranges that cover the scene, in any order, is step(): the
// benchmark steps its scene this way on the workers.
TEST(Scene, StepInRangesIsStep) {
  for (SceneKind kind : kAllScenes) {
    Scene whole = makeScene(kind, 3000);
    Scene ranged = whole;
    for (int f = 0; f < 20; ++f) {
      whole.step();
      const uint32_t cut1 = 1000 + 37 * uint32_t(f), cut2 = 2500;
      ranged.stepRange(cut2, ranged.n);
      ranged.stepRange(0, cut1);
      ranged.stepRange(cut1, cut2);
      ++ranged.frame;
    }
    ASSERT_EQ(whole.frame, ranged.frame);
    for (uint32_t i = 0; i < whole.n; ++i) {
      ASSERT_EQ(std::memcmp(&whole.boxes[i], &ranged.boxes[i], sizeof(Aabb)), 0)
          << sceneName(kind) << " box " << i;
      ASSERT_EQ(std::memcmp(&whole.velocities[i], &ranged.velocities[i], sizeof(Vec3)), 0);
    }
  }
}

TEST(Scene, StaticSceneMovesOnlyOneInTen) {
  const Scene s = makeScene(SceneKind::staticScene, 1000);
  EXPECT_EQ(s.movingCount(), 100u);
  for (uint32_t i = 0; i < s.n; ++i) EXPECT_EQ(s.isStatic[i] == 0, i % 10 == 0);
}

TEST(Scene, ParseNames) {
  for (SceneKind k : kAllScenes) EXPECT_EQ(parseScene(sceneName(k)), k);
  EXPECT_FALSE(parseScene("unifrom").has_value());
}

TEST(PairHash, EmptyListIsTheOffsetBasis) { EXPECT_EQ(hashPairs({}), 14695981039346656037ull); }

}  // namespace
}  // namespace bp
