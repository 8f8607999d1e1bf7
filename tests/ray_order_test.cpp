// mortonOrder (common/ray_order.h): a permutation of the batch, the same
// for any thread count, and rays of one cell in index order; points in the
// order of rays from them.
#include "common/ray_order.h"

#include <broadphase/testkit/scene.h>

#include <gtest/gtest.h>

#include <algorithm>

namespace bp {
namespace {

TEST(RayOrder, APermutationTheSameForAnyThreadCount) {
  const std::vector<Ray> rays = makeRaysIn(Vec3(100, 50, 80), 50000);
  const std::vector<uint32_t> serial = mortonOrder(nullptr, rays);
  std::vector<uint32_t> sorted = serial;
  std::sort(sorted.begin(), sorted.end());
  for (uint32_t k = 0; k < sorted.size(); ++k) ASSERT_EQ(sorted[k], k);
  for (int threads : {1, 2, 3, 8}) {
    Scheduler scheduler(threads);
    EXPECT_EQ(mortonOrder(&scheduler, rays), serial) << threads;
  }
  // Neighbours in the order are near: the mean step between origins is a
  // small part of the box the origins fill.
  double step = 0;
  for (size_t k = 1; k < serial.size(); ++k)
    step += (rays[serial[k]].origin - rays[serial[k - 1]].origin).norm();
  EXPECT_LT(step / double(serial.size()), 10.0);
}

TEST(RayOrder, PointsInTheOrderOfRaysFromThem) {
  const std::vector<Ray> rays = makeRaysIn(Vec3(100, 50, 80), 20000);
  std::vector<Vec3> points;
  for (const Ray& ray : rays) points.push_back(ray.origin);
  const std::vector<uint32_t> serial = mortonOrder(nullptr, points);
  EXPECT_EQ(serial, mortonOrder(nullptr, rays));
  Scheduler scheduler(3);
  EXPECT_EQ(mortonOrder(&scheduler, points), serial);
}

TEST(RayOrder, EmptyAndEqualOrigins) {
  EXPECT_TRUE(mortonOrder(nullptr, std::span<const Ray>{}).empty());
  EXPECT_TRUE(mortonOrder(nullptr, std::span<const Vec3>{}).empty());
  std::vector<Ray> same(100, makeRay(Vec3(1, 2, 3), Vec3(0, 0, 1), 5));
  const std::vector<uint32_t> order = mortonOrder(nullptr, same);
  for (uint32_t k = 0; k < order.size(); ++k) EXPECT_EQ(order[k], k);  // one cell: index order
}

}  // namespace
}  // namespace bp
