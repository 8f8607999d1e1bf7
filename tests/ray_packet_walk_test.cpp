// RayPacketWalk (raytree/ray_packet_walk.h) against the brute-force oracle:
// packets of rays from one origin, closest hit with the distance's bits and
// any hit, on boxes with ties (equal boxes on an integer grid, origins on
// their planes and inside them) and directions with zero components.
#include <broadphase/testkit/brute_force.h>

#include "raytree/ray_packet_walk.h"
#include "raytree/ray_tree.h"
#include "test_support.h"

#include <algorithm>
#include <random>
#include <vector>

namespace bp {
namespace {

std::vector<Aabb> gridAndRandomBoxes(std::mt19937& rng, uint32_t count) {
  std::uniform_real_distribution<float> pos(0.0f, 40.0f), size(0.1f, 4.0f);
  std::vector<Aabb> boxes;
  for (uint32_t i = 0; i < count; ++i) {
    if (i % 2 == 0) {  // unit boxes on the integer grid, some repeated
      const Vec3 c(float(int(pos(rng))), float(int(pos(rng))), float(int(pos(rng))));
      boxes.push_back({c, c + Vec3::Constant(1.0f)});
      if (i % 6 == 0) boxes.push_back(boxes.back());
    } else {
      const Vec3 c(pos(rng), pos(rng), pos(rng));
      boxes.push_back({c, c + Vec3(size(rng), size(rng), size(rng))});
    }
  }
  return boxes;
}

// Packets of `count` rays from one origin: on grid planes and corners or
// anywhere, directions random or along axes and diagonals.
std::vector<Ray> packetFrom(std::mt19937& rng, int count) {
  std::uniform_real_distribution<float> pos(-2.0f, 42.0f), dir(-1.0f, 1.0f), len(0.5f, 60.0f);
  Vec3 o(pos(rng), pos(rng), pos(rng));
  if (rng() % 2) o = Vec3(float(int(o.x())), float(int(o.y())), o.z());
  std::vector<Ray> rays;
  for (int r = 0; r < count; ++r) {
    Vec3 d(dir(rng), dir(rng), dir(rng));
    if (r % 4 == 1) d[rng() % 3] = 0.0f;
    if (r % 8 == 3) d = Vec3(0, 0, 0), d[rng() % 3] = rng() % 2 ? 1.0f : -1.0f;
    if (d.cwiseAbs().maxCoeff() == 0.0f) d = Vec3(1, 0, 0);
    rays.push_back(makeRay(o, d, len(rng)));
  }
  return rays;
}

TEST(RayPacketWalk, ClosestAndAnyMatchBruteForce) {
  std::mt19937 rng(11);
  for (uint32_t n : {1u, 5u, 40u, 3000u}) {
    const std::vector<Aabb> boxes = gridAndRandomBoxes(rng, n);
    std::vector<uint32_t> keys(boxes.size()), ids(boxes.size());
    for (uint32_t i = 0; i < boxes.size(); ++i) keys[i] = ids[i] = i;
    RayTree tree;
    tree.build(nullptr, boxes, keys, ids);
    for (int trial = 0; trial < 200; ++trial) {
      const int count = 1 + int(rng() % kRayPacket);
      const std::vector<Ray> rays = packetFrom(rng, count);
      // Closest: every ray's own answer, ties to the lower index.
      RayHit best[kRayPacket];
      float reach[kRayPacket];
      for (int r = 0; r < count; ++r) reach[r] = rays[r].maxT;
      RayPacketWalk(tree, rays.data(), count).walk(reach, [&](int r, uint32_t id, float t) {
        const RayHit h{id, t};
        if (!best[r].hit() || hitBefore(h, best[r])) {
          best[r] = h;
          reach[r] = t;
        }
        return true;
      });
      // Any: the first leaf ends the ray; it must be one of its hits.
      RayHit any[kRayPacket];
      for (int r = 0; r < count; ++r) reach[r] = rays[r].maxT;
      RayPacketWalk(tree, rays.data(), count).walk(reach, [&](int r, uint32_t id, float t) {
        EXPECT_FALSE(any[r].hit()) << "ray " << r << " went on after it finished";
        any[r] = {id, t};
        return false;
      });
      for (int r = 0; r < count; ++r) {
        ASSERT_EQ(best[r], brute::castRayClosest(boxes, rays[r])) << "n " << n << " ray " << r;
        const std::vector<RayHit> all = brute::castRayAll(boxes, rays[r]);
        ASSERT_EQ(any[r].hit(), !all.empty()) << "n " << n << " ray " << r;
        if (any[r].hit()) {
          ASSERT_TRUE(std::find(all.begin(), all.end(), any[r]) != all.end());
        }
      }
    }
  }
}

}  // namespace
}  // namespace bp
