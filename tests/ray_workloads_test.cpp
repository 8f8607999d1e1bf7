// The ray workloads of docs/scenes.md (testkit's makeWorkloadRays): each
// gives the rays its definition says, the same from the same seed, and the
// facade's batches answer them as the brute-force oracle does on every
// standard scene and structure, closest and any.
#include <broadphase/broad_phase.h>
#include <broadphase/testkit/brute_force.h>
#include <broadphase/testkit/ray_workloads.h>
#include <broadphase/testkit/scene.h>

#include "test_support.h"

#include <cmath>
#include <string>
#include <vector>

namespace bp {
namespace {

bool sameRays(const std::vector<Ray>& a, const std::vector<Ray>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].origin != b[i].origin || a[i].direction != b[i].direction || a[i].maxT != b[i].maxT)
      return false;
  return true;
}

bool isValid(const Ray& r) {
  return r.maxT > 0 && std::isfinite(r.maxT) && r.origin.allFinite() &&
         std::abs(r.direction.norm() - 1.0f) < 1e-5f;
}

TEST(RayWorkloads, NamesRoundTrip) {
  for (RayWorkload w : kAllRayWorkloads) EXPECT_EQ(parseRayWorkload(rayWorkloadName(w)), w);
  EXPECT_FALSE(parseRayWorkload("laser").has_value());
}

TEST(RayWorkloads, SameSeedSameRaysEveryRayValid) {
  for (SceneKind kind : kAllScenes) {
    const Scene scene = makeScene(kind, 3000);
    for (RayWorkload w : kAllRayWorkloads) {
      SCOPED_TRACE(std::string(sceneName(kind)) + " " + rayWorkloadName(w));
      const std::vector<Ray> rays = makeWorkloadRays(w, scene, 5000);
      EXPECT_EQ(rays.size(), 5000u);
      EXPECT_TRUE(sameRays(rays, makeWorkloadRays(w, scene, 5000)));
      // A shorter batch is the longer one's start (bpbench's oracle check
      // makes only the rays it checks).
      EXPECT_TRUE(sameRays({rays.begin(), rays.begin() + 1000}, makeWorkloadRays(w, scene, 1000)));
      for (const Ray& r : rays) ASSERT_TRUE(isValid(r));
    }
  }
  const Scene scene = makeScene(SceneKind::uniform, 3000);
  EXPECT_TRUE(
      sameRays(makeWorkloadRays(RayWorkload::random, scene, 100), makeRaysIn(scene.bounds, 100)));
  EXPECT_FALSE(sameRays(makeWorkloadRays(RayWorkload::lidar, scene, 100, 2),
                        makeWorkloadRays(RayWorkload::lidar, scene, 100, 3)));
}

// A scan is one origin for kLidarRows x kLidarColumns rays, rows from low
// to high elevation, columns around the vertical axis; the next scan moves.
TEST(RayWorkloads, LidarScansShareTheirOrigin) {
  const Scene scene = makeScene(SceneKind::uniform, 3000);
  const uint32_t scan = kLidarRows * kLidarColumns;
  const std::vector<Ray> rays = makeWorkloadRays(RayWorkload::lidar, scene, scan + 10);
  for (uint32_t k = 1; k < scan; ++k) ASSERT_EQ(rays[k].origin, rays[0].origin);
  EXPECT_NE(rays[scan].origin, rays[0].origin);
  EXPECT_LT(rays[0].direction.z(), 0.0f);         // the lowest row looks down
  EXPECT_GT(rays[scan - 1].direction.z(), 0.0f);  // the highest up
  EXPECT_NEAR(rays[kLidarColumns / 4].direction.y(), std::cos(25.0f * 3.14159265f / 180.0f), 1e-5f);
  EXPECT_FLOAT_EQ(rays[0].maxT, scene.bounds.maxCoeff() / 4.0f);
}

// A probe starts just below its moving box, points down, and never hits
// the box it probes from.
TEST(RayWorkloads, ProbesStartBelowTheirMovingBox) {
  const Scene scene = makeScene(SceneKind::staticScene, 3000);
  std::vector<uint32_t> moving;
  for (uint32_t i = 0; i < scene.n; ++i)
    if (!scene.isStatic[i]) moving.push_back(i);
  const std::vector<Ray> rays = makeWorkloadRays(RayWorkload::probes, scene, 400);
  for (uint32_t k = 0; k < rays.size(); ++k) {
    const Aabb& own = scene.boxes[moving[k % moving.size()]];
    ASSERT_EQ(rays[k].direction, Vec3(0, 0, -1));
    ASSERT_FLOAT_EQ(rays[k].origin.z(), own.min.z() - kProbeGap);
    ASSERT_EQ(rays[k].maxT, kProbeLength);
    const std::vector<Aabb> alone{own};
    ASSERT_FALSE(brute::castRayClosest(alone, rays[k]).hit()) << "probe " << k;
  }
}

// A line of sight runs between two boxes and touches neither.
TEST(RayWorkloads, LinesOfSightMissTheirEndBoxes) {
  const Scene scene = makeScene(SceneKind::uniform, 3000);
  const std::vector<Ray> rays = makeWorkloadRays(RayWorkload::sight, scene, 300);
  const float reach = scene.bounds.maxCoeff() / 4.0f;
  size_t within = 0;
  for (const Ray& r : rays) {
    // Its ends lie just outside two boxes whose centres are on the line.
    const Vec3 end = r.origin + r.maxT * r.direction;
    uint32_t nearStart = 0, nearEnd = 0;
    for (uint32_t i = 0; i < scene.n; ++i) {
      const Aabb grown{scene.boxes[i].min - Vec3::Constant(0.02f),
                       scene.boxes[i].max + Vec3::Constant(0.02f)};
      const Vec3 c = 0.5f * (scene.boxes[i].min + scene.boxes[i].max);
      const Vec3 toC = c - r.origin;
      const float offLine = (toC - toC.dot(r.direction) * r.direction).norm();
      if (offLine > 1e-3f * (1.0f + toC.norm())) continue;
      nearStart += containsPoint(grown, r.origin) && !containsPoint(scene.boxes[i], r.origin);
      nearEnd += containsPoint(grown, end) && !containsPoint(scene.boxes[i], end);
    }
    ASSERT_GE(nearStart, 1u);
    ASSERT_GE(nearEnd, 1u);
    within += r.maxT <= reach;
  }
  // b is drawn again until its centre is within reach, at most 64 times.
  EXPECT_GE(within, rays.size() * 9 / 10);
}

// The facade's batches against the oracle: every workload, scene and
// structure, closest (with the distance) and any.
TEST(RayWorkloads, FacadeBatchesMatchBruteForce) {
  for (SceneKind kind : kAllScenes) {
    const Scene scene = makeScene(kind, 2000);
    for (Structure s : {Structure::bvh, Structure::sweep, Structure::automatic}) {
      BroadPhaseConfig config;
      config.structure = s;
      config.threads = 2;
      BroadPhase bp(config);
      for (uint32_t i = 0; i < scene.n; ++i)
        bp.add({scene.boxes[i], scene.isStatic[i] ? MotionType::staticBody : MotionType::dynamic});
      bp.update();
      for (RayWorkload w : kAllRayWorkloads) {
        SCOPED_TRACE(std::string(sceneName(kind)) + " " + rayWorkloadName(w) + " structure " +
                     std::to_string(int(s)));
        const std::vector<Ray> rays = makeWorkloadRays(w, scene, 3000);
        std::vector<RayHit> closest(rays.size()), any(rays.size());
        bp.castRays(rays, closest, RayQuery::closest);
        bp.castRays(rays, any, RayQuery::any);
        for (size_t r = 0; r < rays.size(); ++r) {
          const RayHit e = brute::castRayClosest(scene.boxes, rays[r]);
          ASSERT_EQ(closest[r].proxy, e.proxy) << "ray " << r;
          if (e.hit()) {
            ASSERT_EQ(closest[r].t, e.t) << "ray " << r;
          }
          ASSERT_EQ(any[r].hit(), e.hit()) << "ray " << r;
        }
      }
    }
  }
}

// Batches answer the same, bit for bit (an any hit's proxy too), for any
// thread count and through the query structure of concurrentQueries, whose
// rays run on the calling thread: packets are taken at fixed positions of
// the batch, not by how the batch is split.
TEST(RayWorkloads, BatchesAreTheSameForAnyThreadCount) {
  const Scene scene = makeScene(SceneKind::uniform, 3000);
  std::vector<std::vector<RayHit>> answers;
  for (int threads : {1, 2})
    for (bool concurrentQueries : {false, true}) {
      BroadPhaseConfig config;
      config.threads = threads;
      config.concurrentQueries = concurrentQueries;
      BroadPhase bp(config);
      for (uint32_t i = 0; i < scene.n; ++i) bp.add({scene.boxes[i]});
      bp.update();
      for (RayWorkload w : kAllRayWorkloads) {
        const std::vector<Ray> rays = makeWorkloadRays(w, scene, 5000);
        for (RayQuery kind : {RayQuery::closest, RayQuery::any}) {
          std::vector<RayHit> out(rays.size());
          bp.castRays(rays, out, kind);
          answers.push_back(std::move(out));
        }
      }
    }
  const size_t perRun = answers.size() / 4;
  for (size_t run = 1; run < 4; ++run)
    for (size_t k = 0; k < perRun; ++k)
      ASSERT_TRUE(answers[run * perRun + k] == answers[k]) << "run " << run << " batch " << k;
}

}  // namespace
}  // namespace bp
