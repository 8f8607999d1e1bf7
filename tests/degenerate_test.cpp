// Degenerate worlds through the BroadPhase API, for every structure: each
// checked against brute force. These are the inputs that break grids and
// trees in practice (everything in one place, one enormous box, far from the
// origin, nothing at all).
#include <broadphase/broad_phase.h>
#include <broadphase/testkit/brute_force.h>

#include "error_capture.h"
#include "test_support.h"

#include <atomic>
#include <random>
#include <thread>

namespace bp {
namespace {

const Structure kStructures[] = {Structure::bvh, Structure::sweep, Structure::automatic};

std::vector<Pair> pairsOf(const FramePairs& f) {
  std::vector<Pair> out;
  for (const ProxyPair& p : f.pairs) out.push_back({p.a, p.b});
  return out;
}

// Adds the boxes as dynamic proxies, checks pairs and a few rays.
void checkWorld(Structure structure, const std::vector<Aabb>& boxes, const char* what) {
  BroadPhase bp({.structure = structure, .threads = 2});
  for (uint32_t i = 0; i < boxes.size(); ++i) bp.add({boxes[i], MotionType::dynamic, {}, i});
  const FramePairs& f = bp.update();
  ASSERT_EQ(bp.validate(), "") << what;
  EXPECT_TRUE(test::samePairs(brute::findPairs(boxes), pairsOf(f))) << what;
  if (boxes.empty()) return;
  const Aabb all = [&] {
    Aabb a = Aabb::empty();
    for (const Aabb& b : boxes) a = merge(a, b);
    return a;
  }();
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  for (int r = 0; r < 50; ++r) {
    const Vec3 o = all.min + Vec3(u(rng), u(rng), u(rng)).cwiseProduct(all.extent());
    const Vec3 d(u(rng) - 0.5f, u(rng) - 0.5f, u(rng) - 0.5f);
    const float len = 1.0f + all.extent().maxCoeff();
    EXPECT_EQ(bp.castRay(o, d, len), brute::castRayClosest(boxes, makeRay(o, d, len))) << what;
  }
}

TEST(Degenerate, EmptyWorldAndSingleProxy) {
  for (Structure s : kStructures) {
    BroadPhase bp({.structure = s, .threads = 2});
    EXPECT_TRUE(bp.update().pairs.empty());
    EXPECT_FALSE(bp.castRay(Vec3(0, 0, 0), Vec3(1, 0, 0), 10).hit());
    std::vector<Neighbour> n;
    bp.nearest(Vec3(0, 0, 0), 3, n);
    EXPECT_TRUE(n.empty());
    const ProxyId id = bp.add({Aabb{Vec3(0, 0, 0), Vec3(1, 1, 1)}});
    EXPECT_TRUE(bp.update().pairs.empty());
    EXPECT_EQ(bp.castRay(Vec3(-1, 0.5f, 0.5f), Vec3(1, 0, 0), 10).proxy, id.index);
    bp.nearest(Vec3(5, 5, 5), 3, n);
    ASSERT_EQ(n.size(), 1u);
    bp.remove(id);
    EXPECT_TRUE(bp.update().pairs.empty());
    EXPECT_EQ(bp.validate(), "");
  }
}

TEST(Degenerate, AllBoxesIdentical) {
  // n^2 / 2 pairs: the output is large, and the structures must not degrade
  // to anything worse than the output size.
  for (Structure s : kStructures)
    checkWorld(s, std::vector<Aabb>(400, Aabb{Vec3(3, 3, 3), Vec3(4, 4, 4)}), "identical");
}

TEST(Degenerate, AllBoxesIdenticalBoundedByMaxPairs) {
  for (Structure s : kStructures) {
    BroadPhase bp({.structure = s, .threads = 2, .maxPairs = 50000});
    for (int i = 0; i < 1000; ++i) bp.add({Aabb{Vec3(0, 0, 0), Vec3(1, 1, 1)}});  // 499500 pairs
    const FramePairs& f =
        *test::expectError(ErrorCode::capacityExceeded, [&] { return &bp.update(); });
    EXPECT_TRUE(f.pairs.empty());  // the last frame's pairs: none
    EXPECT_EQ(bp.validate(), "");
    // The streaming form is bounded the same way, and hands out no pair of
    // the failed frame.
    std::atomic<uint64_t> count{0};
    test::expectError(ErrorCode::capacityExceeded, [&] {
      bp.update([&](std::span<const ProxyPair> chunk) { count += chunk.size(); });
    });
    EXPECT_EQ(count.load(), 0u);
    EXPECT_EQ(bp.validate(), "");
  }
}

TEST(Degenerate, AllOnALine) {
  std::vector<Aabb> boxes;
  for (int i = 0; i < 2000; ++i)
    boxes.push_back(Aabb::fromCenterExtent(Vec3(i * 0.5f, 0, 0), Vec3(1, 1, 1)));
  for (Structure s : kStructures) checkWorld(s, boxes, "line");
}

TEST(Degenerate, AllInOneSmallCell) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(0.0f, 0.5f);
  std::vector<Aabb> boxes;
  for (int i = 0; i < 300; ++i) {
    const Vec3 c(u(rng), u(rng), u(rng));
    boxes.push_back(Aabb::fromCenterExtent(c, Vec3(0.01f, 0.01f, 0.01f)));
  }
  for (Structure s : kStructures) checkWorld(s, boxes, "one cell");
}

TEST(Degenerate, OneEnormousBoxAmongSmallOnes) {
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> u(0.0f, 100.0f);
  std::vector<Aabb> boxes;
  for (int i = 0; i < 2000; ++i)
    boxes.push_back(Aabb::fromCenterExtent(Vec3(u(rng), u(rng), u(rng)), Vec3(1, 1, 1)));
  boxes.push_back(Aabb{Vec3(-1e6f, -1e6f, -1e6f), Vec3(1e6f, 1e6f, 1e6f)});
  boxes.push_back(Aabb{Vec3(-1e6f, 10, -1e6f), Vec3(1e6f, 10, 1e6f)});  // a flat terrain
  for (Structure s : kStructures) checkWorld(s, boxes, "enormous");
}

TEST(Degenerate, FarFromTheOrigin) {
  // Near 10^7 the float spacing is 1 unit: boxes snap to integers there. The
  // structures must still be exact on the boxes they are given.
  std::mt19937 rng(4);
  std::uniform_int_distribution<int> u(0, 200);
  std::vector<Aabb> boxes;
  for (int i = 0; i < 1500; ++i) {
    const Vec3 lo(1e7f + float(u(rng)), -1e7f + float(u(rng)), 5e6f + float(u(rng)));
    boxes.push_back({lo, lo + Vec3(float(1 + u(rng) % 4), 2, 3)});
  }
  for (Structure s : kStructures) checkWorld(s, boxes, "far");
}

TEST(Degenerate, ConcurrentQueriesBetweenUpdates) {
  // Const queries from several threads at once (run under TSan in CI).
  for (Structure s : kStructures) {
    BroadPhase bp({.structure = s, .threads = 2});
    const Scene scene = makeScene(SceneKind::uniform, 4000);
    for (uint32_t i = 0; i < scene.n; ++i) bp.add({scene.boxes[i], MotionType::dynamic, {}, i});
    bp.update();
    const auto rays = makeRays(scene.n, 400);
    std::vector<RayHit> expected(rays.size());
    for (size_t r = 0; r < rays.size(); ++r)
      expected[r] = brute::castRayClosest(scene.boxes,
                                          makeRay(rays[r].origin, rays[r].direction, rays[r].maxT));
    std::atomic<int> wrong{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&, t] {
        for (size_t r = size_t(t); r < rays.size(); r += 2) {
          const Ray& ray = rays[r];
          if (!(bp.castRay(ray.origin, ray.direction, ray.maxT) == expected[r])) ++wrong;
          std::vector<Neighbour> n;
          bp.nearest(ray.origin, 3, n);
          if (n != brute::nearest(scene.boxes, ray.origin, 3)) ++wrong;
        }
      });
    for (auto& th : threads) th.join();
    EXPECT_EQ(wrong.load(), 0);
  }
}

}  // namespace
}  // namespace bp
