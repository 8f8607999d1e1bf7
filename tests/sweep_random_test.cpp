// Random operation sequences on SweepGrid: adds, moves (small, teleports),
// batch moves, removes, updates and every query, with validate() after each
// step and the brute-force oracle as the reference.
#include <broadphase/error.h>
#include <broadphase/testkit/brute_force.h>
#include <broadphase/testkit/scene.h>
#include "sweep/sweep_grid.h"

#include "error_capture.h"
#include "test_support.h"

#include <algorithm>
#include <limits>

namespace bp {
namespace {

class Generator {
 public:
  Generator(uint64_t seed, float world) : rng_(seed), world_(world) {}
  float u() { return rng_.uniform(); }
  uint32_t below(uint32_t n) { return uint32_t(rng_.next() % n); }

  Aabb box() {
    Vec3 c(u() * world_, u() * world_, u() * world_);
    if (below(20) == 0) c *= 1000.0f;  // far-apart coordinates
    if (below(40) == 0) c = -c;
    Vec3 e;
    switch (below(8)) {
      case 0: e = Vec3(1e-4f, 1e-4f, 1e-4f) * u(); break;                 // tiny
      case 1: e = Vec3(world_ * u(), world_ * u(), world_ * u()); break;  // huge
      case 2: e = Vec3(world_ * u(), 0.0f, world_ * u()); break;          // flat
      case 3: e = Vec3(0, 0, 0); break;                                   // point
      case 4: e = Vec3(world_ * 4, 0.5f, 0.5f); break;                    // long thin
      default: e = Vec3(0.5f + 3 * u(), 0.5f + 3 * u(), 0.5f + 3 * u()); break;
    }
    // Snap some boxes to integer coordinates so faces land on cell boundaries.
    if (below(4) == 0) {
      c = Vec3(std::round(c.x()), std::round(c.y()), std::round(c.z()));
      e = Vec3(std::round(e.x()), std::round(e.y()), std::round(e.z()));
    }
    return {c, c + e};
  }
  Aabb nudge(const Aabb& b) {
    const Vec3 d((u() - 0.5f) * 0.6f, (u() - 0.5f) * 0.6f, (u() - 0.5f) * 0.6f);
    return {b.min + d, b.max + d};
  }

 private:
  SceneRng rng_;
  float world_;
};

void checkAgainstOracle(const SweepGrid& grid, SweepGrid& mutableGrid, Scheduler& s,
                        const test::ProxyMirror& m, Generator& gen, float world) {
  std::vector<Pair> pairs;
  mutableGrid.findPairs(s, pairs);
  ASSERT_TRUE(test::samePairs(brute::findPairs(m.boxes, m.isStatic, m.live), pairs));
  for (int q = 0; q < 3; ++q) {
    const Aabb query = gen.box();
    std::vector<uint32_t> got;
    grid.queryBox(query, [&](uint32_t id) {
      got.push_back(id);
      return true;
    });
    std::sort(got.begin(), got.end());
    ASSERT_EQ(got, brute::queryBox(m.boxes, query, m.live));
    got.clear();
    const Vec3 p = query.center();
    grid.queryPoint(p, [&](uint32_t id) {
      got.push_back(id);
      return true;
    });
    std::sort(got.begin(), got.end());
    ASSERT_EQ(got, brute::queryPoint(m.boxes, p, m.live));
    std::vector<Neighbour> near;
    const uint32_t k = 1 + gen.below(6);
    grid.nearest(p, k, near);
    ASSERT_EQ(near, brute::nearest(m.boxes, p, k, m.live));
    const Vec3 dir(gen.u() - 0.5f, gen.u() - 0.5f, gen.u() - 0.5f);
    const Vec3 axisDir = gen.below(2) ? Vec3(1, 0, 0) : Vec3(0, 0, -1);
    const Ray ray = makeRay(query.min, gen.below(3) ? dir : axisDir, world * (0.1f + gen.u()));
    ASSERT_EQ(grid.castRay(ray, RayQuery::closest), brute::castRayClosest(m.boxes, ray, m.live));
    ASSERT_EQ(grid.castRay(ray, RayQuery::any).hit(),
              brute::castRayClosest(m.boxes, ray, m.live).hit());
    std::vector<RayHit> all;
    grid.castRayAll(ray, all);
    ASSERT_EQ(all, brute::castRayAll(m.boxes, ray, m.live));
    const Vec3 half(gen.u(), gen.u() * 2, gen.u() * 0.1f);
    ASSERT_EQ(grid.castBox(half, ray), brute::castBox(m.boxes, half, ray, m.live));
  }
}

void runSequence(uint64_t seed, const SweepGridConfig& config, int steps) {
  SCOPED_TRACE("seed " + std::to_string(seed));
  const float world = 40.0f;
  Generator gen(seed, world);
  SweepGrid grid(config);
  test::ProxyMirror m;
  Scheduler s(seed % 2 ? 2 : 1);
  std::vector<uint32_t> liveList;
  auto rebuildLive = [&] {
    liveList.clear();
    for (uint32_t i = 0; i < m.live.size(); ++i)
      if (m.live[i]) liveList.push_back(i);
  };
  for (int step = 0; step < steps; ++step) {
    rebuildLive();
    const uint32_t op = gen.below(100);
    if (op < 30 || liveList.size() < 4) {
      const bool st = gen.below(3) == 0;
      const Aabb b = gen.box();
      m.set(grid.add(b, st), b, st);
    } else if (op < 55) {
      const uint32_t i = liveList[gen.below(uint32_t(liveList.size()))];
      const Aabb b = gen.below(4) ? gen.nudge(m.boxes[i]) : gen.box();  // or teleport
      grid.move(m.handles[i], b);
      m.boxes[i] = b;
    } else if (op < 65) {
      std::vector<ProxyId> ids;
      std::vector<Aabb> boxes;
      for (uint32_t i : liveList)
        if (gen.below(2)) {
          ids.push_back(m.handles[i]);
          boxes.push_back(gen.below(10) ? gen.nudge(m.boxes[i]) : gen.box());
        }
      if (!ids.empty() && gen.below(5) == 0) {
        // A batch with one bad entry is rejected as a whole.
        boxes.back().min.x() = boxes.back().max.x() + 1.0f;
        test::expectError(ErrorCode::invalidBox, [&] { grid.move(ids, boxes); });
      } else {
        grid.move(ids, boxes);
        for (size_t k = 0; k < ids.size(); ++k) m.boxes[ids[k].index] = boxes[k];
      }
    } else if (op < 80) {
      const uint32_t i = liveList[gen.below(uint32_t(liveList.size()))];
      grid.remove(m.handles[i]);
      m.live[i] = 0;
      test::expectError(ErrorCode::staleHandle, [&] { grid.remove(m.handles[i]); });
    } else if (op < 90) {
      grid.update(s);
      ASSERT_EQ(grid.validate(), "") << "step " << step;
      checkAgainstOracle(grid, grid, s, m, gen, world);
    } else {
      std::vector<Pair> pairs;
      grid.findPairs(s, pairs);
      ASSERT_TRUE(test::samePairs(brute::findPairs(m.boxes, m.isStatic, m.live), pairs))
          << "step " << step;
    }
    ASSERT_EQ(grid.validate(), "") << "step " << step;
    ASSERT_EQ(grid.proxyCount(), uint32_t(std::count(m.live.begin(), m.live.end(), 1)));
  }
  grid.update(s);
  checkAgainstOracle(grid, grid, s, m, gen, world);
}

TEST(SweepGridRandom, AutomaticCellSize) {
  for (uint64_t seed = 1; seed <= 4; ++seed) runSequence(seed, SweepGridConfig{}, 1500);
}

TEST(SweepGridRandom, EachKernel) {
  SweepGridConfig config;
  config.kernel = SweepKernel::narrow;
  for (uint64_t seed = 30; seed <= 31; ++seed) runSequence(seed, config, 1000);
  if (!SweepGrid().wideKernelEnabled()) GTEST_SKIP() << "no AVX-512 on this CPU";
  config.kernel = SweepKernel::wide;
  for (uint64_t seed = 30; seed <= 31; ++seed) runSequence(seed, config, 1000);
}

TEST(SweepGridRandom, SmallCellsAndEagerOverflow) {
  SweepGridConfig config;
  config.cellSize = 1.0f;
  config.maxCellsPerProxy = 8;
  for (uint64_t seed = 10; seed <= 12; ++seed) runSequence(seed, config, 1500);
}

TEST(SweepGridRandom, LargeCells) {
  SweepGridConfig config;
  config.cellSize = 16.0f;
  for (uint64_t seed = 20; seed <= 21; ++seed) runSequence(seed, config, 1000);
}

}  // namespace
}  // namespace bp
