// Decomposition: the regions tile space (each point has exactly one owner,
// the region that contains it), ranksTouching finds exactly the regions a
// box touches, and build() balances weighted points and is deterministic.
#include <broadphase/mpi/decomposition.h>
#include <broadphase/testkit/scene.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace bp::mpi {
namespace {

std::vector<Vec3> centres(const Scene& scene) {
  std::vector<Vec3> out;
  for (const Aabb& b : scene.boxes) out.push_back(b.center());
  return out;
}

// Every rank's count of points.
std::vector<int> counts(const Decomposition& d, const std::vector<Vec3>& points) {
  std::vector<int> c(size_t(d.ranks()), 0);
  for (const Vec3& p : points) ++c[size_t(d.ownerOf(p))];
  return c;
}

void expectTiles(const Decomposition& d, const std::vector<Vec3>& points) {
  for (const Vec3& p : points) {
    int inside = 0;
    for (int r = 0; r < d.ranks(); ++r) inside += d.region(r).contains(p);
    ASSERT_EQ(inside, 1);
    ASSERT_TRUE(d.region(d.ownerOf(p)).contains(p));
  }
}

TEST(Decomposition, PlaceholderTilesSpace) {
  for (int ranks : {1, 2, 3, 4, 5, 8, 13}) {
    const Decomposition d(ranks);
    EXPECT_EQ(d.ranks(), ranks);
    std::vector<Vec3> points;
    SceneRng rng(7);
    for (int k = 0; k < 2000; ++k)
      points.emplace_back(rng.uniform() * 20 - 10, rng.uniform() * 20 - 10,
                          rng.uniform() * 20 - 10);
    points.emplace_back(0, 0, 0);  // on every cut
    expectTiles(d, points);
  }
}

TEST(Decomposition, BalancesEveryScene) {
  for (SceneKind kind : kAllScenes) {
    const Scene scene = makeScene(kind, 10000);
    const std::vector<Vec3> points = centres(scene);
    const std::vector<double> weights(points.size(), 1.0);
    for (int ranks : {2, 3, 4, 7, 16}) {
      const Decomposition d = Decomposition::build(ranks, points, weights);
      expectTiles(d, points);
      const std::vector<int> c = counts(d, points);
      const double mean = double(points.size()) / ranks;
      // Distinct coordinates: every cut can split its points to one point
      // of the ideal share, so each rank is within a point per level.
      for (int r = 0; r < ranks; ++r)
        EXPECT_NEAR(c[size_t(r)], mean, 8.0) << sceneName(kind) << " ranks " << ranks;
      // The same input gives the same cuts.
      EXPECT_TRUE(d == Decomposition::build(ranks, points, weights));
    }
  }
}

TEST(Decomposition, WeightsCountAsPoints) {
  // Two clusters; the right one's points weigh 3: a 2-rank cut puts the
  // weight, not the count, in halves.
  std::vector<Vec3> points;
  std::vector<double> weights;
  for (int k = 0; k < 400; ++k) {
    points.emplace_back(float(k), 0, 0);
    weights.push_back(k < 200 ? 1.0 : 3.0);
  }
  const Decomposition d = Decomposition::build(2, points, weights);
  double left = 0;
  for (size_t k = 0; k < points.size(); ++k)
    if (d.ownerOf(points[k]) == 0) left += weights[k];
  EXPECT_NEAR(left, 400.0, 3.0);
}

TEST(Decomposition, EqualPointsStayTogether) {
  const std::vector<Vec3> points(100, Vec3(1, 2, 3));
  const std::vector<double> weights(points.size(), 1.0);
  const Decomposition d = Decomposition::build(4, points, weights);
  const std::vector<int> c = counts(d, points);
  EXPECT_EQ(*std::max_element(c.begin(), c.end()), 100);
  expectTiles(d, points);
}

TEST(Decomposition, NoPoints) {
  const Decomposition d = Decomposition::build(3, {}, {});
  expectTiles(d, {Vec3(0, 0, 0), Vec3(-5, 1, 2), Vec3(1e6f, -1e6f, 3)});
}

TEST(Decomposition, RanksTouchingMatchesRegions) {
  const Scene scene = makeScene(SceneKind::sizes, 4000);
  const std::vector<Vec3> points = centres(scene);
  const std::vector<double> weights(points.size(), 1.0);
  std::vector<int> found, expected;
  for (int ranks : {1, 2, 5, 8}) {
    const Decomposition d = Decomposition::build(ranks, points, weights);
    SceneRng rng(3);
    std::vector<Aabb> boxes = scene.boxes;
    // Boxes of every size, points and flat boxes on a cut among them.
    for (int k = 0; k < 300; ++k) {
      const Vec3 c(rng.uniform() * scene.worldSide, rng.uniform() * scene.worldSide,
                   rng.uniform() * scene.worldSide);
      const float h = rng.uniform() * scene.worldSide * (k % 3 == 0 ? 1.0f : 0.1f);
      boxes.push_back({c - Vec3(h, h, h), c + Vec3(h, h, h)});
      boxes.push_back({c, c});
    }
    for (int r = 0; r < ranks; ++r) {
      const Region& g = d.region(r);
      for (int a = 0; a < 3; ++a)
        if (std::isfinite(g.lo[a])) boxes.push_back({g.lo, g.lo});
    }
    for (const Aabb& b : boxes) {
      d.ranksTouching(b, found);
      expected.clear();
      for (int r = 0; r < ranks; ++r)
        if (d.region(r).touches(b)) expected.push_back(r);
      ASSERT_EQ(found, expected);
      // The owner of the box's centre is always among them.
      ASSERT_TRUE(std::binary_search(found.begin(), found.end(), d.ownerOf(b.center())));
    }
  }
}

}  // namespace
}  // namespace bp::mpi
