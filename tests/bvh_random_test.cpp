// Random operation sequences against a brute-force model, with validate()
// after every step.
#include <broadphase/error.h>
#include <broadphase/testkit/brute_force.h>
#include <broadphase/testkit/scene.h>
#include "bvh/bvh.h"

#include "test_support.h"

#include <algorithm>

namespace bp {
namespace {

// Boxes of every shape the tree must survive: ordinary, tiny, huge, flat,
// points, far away.
Aabb randomBox(SceneRng& rng) {
  const Vec3 c(rng.uniform() * 60 - 10, rng.uniform() * 60 - 10, rng.uniform() * 60 - 10);
  Vec3 e(1 + 3 * rng.uniform(), 1 + 3 * rng.uniform(), 1 + 3 * rng.uniform());
  const float shape = rng.uniform();
  if (shape < 0.1f)
    e *= 1e-4f;  // tiny
  else if (shape < 0.15f)
    e *= 20.0f;  // huge
  else if (shape < 0.25f)
    e[int(rng.uniform() * 3)] = 0;  // flat
  else if (shape < 0.28f)
    e = Vec3::Zero();  // a point
  Aabb box{c - 0.5f * e, c + 0.5f * e};
  if (rng.uniform() < 0.02f) {  // far away
    box.min.x() += 1e5f;
    box.max.x() += 1e5f;
  }
  return box;
}

Aabb nudged(SceneRng& rng, const Aabb& box) {
  const Vec3 d((rng.uniform() - 0.5f) * 0.6f, (rng.uniform() - 0.5f) * 0.6f,
               (rng.uniform() - 0.5f) * 0.6f);
  return {box.min + d, box.max + d};
}

void checkAgainstModel(const Bvh& bvh, const test::ProxyMirror& m, SceneRng& rng) {
  const std::vector<uint32_t> live = m.liveIndices();
  EXPECT_EQ(bvh.proxyCount(), live.size());
  for (int q = 0; q < 3; ++q) {
    const Aabb box = randomBox(rng);
    std::vector<uint32_t> found;
    bvh.queryBox(box, [&](uint32_t p) {
      found.push_back(p);
      return true;
    });
    std::sort(found.begin(), found.end());
    ASSERT_EQ(found, brute::queryBox(m.boxes, box, m.live));
    const Ray ray = makeRay(box.center(), Vec3(rng.normal(), rng.normal(), rng.normal() + 0.01f),
                            5 + 40 * rng.uniform());
    ASSERT_EQ(bvh.castRay(ray, RayQuery::closest), brute::castRayClosest(m.boxes, ray, m.live));
    std::vector<RayHit> all;
    bvh.castRayAll(ray, all);
    ASSERT_EQ(all, brute::castRayAll(m.boxes, ray, m.live));
    std::vector<Neighbour> near;
    bvh.nearest(box.center(), 5, near);
    ASSERT_EQ(near, brute::nearest(m.boxes, box.center(), 5, m.live));
    const Vec3 half(rng.uniform(), rng.uniform(), rng.uniform());
    ASSERT_EQ(bvh.castBox(half, ray), brute::castBox(m.boxes, half, ray, m.live));
  }
}

void runSequence(uint64_t seed, int steps, int threads) {
  SCOPED_TRACE("seed " + std::to_string(seed) + ", threads " + std::to_string(threads));
  Scheduler scheduler(threads);
  SceneRng rng(seed);
  Bvh bvh(BvhConfig{.margin = seed % 2 ? 0.1f : 0.0f, .extendByDisplacement = seed % 3 != 0});
  test::ProxyMirror m;
  std::vector<Pair> pairs;
  for (int step = 0; step < steps; ++step) {
    const std::vector<uint32_t> live = m.liveIndices();
    const float op = rng.uniform();
    if (op < 0.30f || live.size() < 4) {
      const bool stat = rng.uniform() < 0.3f;
      const Aabb box = randomBox(rng);
      const ProxyId id = bvh.add(box, stat);
      m.set(id, box, stat);
    } else if (op < 0.45f) {
      const uint32_t i = live[size_t(rng.uniform() * float(live.size()))];
      bvh.remove(m.handles[i]);
      m.live[i] = 0;
    } else if (op < 0.65f) {
      const uint32_t i = live[size_t(rng.uniform() * float(live.size()))];
      const Aabb box = rng.uniform() < 0.1f ? randomBox(rng) : nudged(rng, m.boxes[i]);  // teleport
      bvh.move(m.handles[i], box);
      m.boxes[i] = box;
    } else if (op < 0.75f) {
      // A batch moving a random subset, some twice (the last move wins).
      std::vector<ProxyId> ids;
      std::vector<Aabb> boxes;
      for (uint32_t i : live) {
        if (rng.uniform() < 0.5f) continue;
        const Aabb box = nudged(rng, m.boxes[i]);
        ids.push_back(m.handles[i]);
        boxes.push_back(box);
        m.boxes[i] = box;
      }
      bvh.move(ids, boxes);
    } else if (op < 0.85f) {
      bvh.update(scheduler);
      checkAgainstModel(bvh, m, rng);
    } else if (op < 0.97f) {
      bvh.findPairs(scheduler, pairs);
      ASSERT_TRUE(test::samePairs(brute::findPairs(m.boxes, m.isStatic, m.live), pairs))
          << "step " << step;
    } else {
      bvh.rebuild(scheduler);
    }
    const std::string why = bvh.validate();
    ASSERT_EQ(why, "") << "step " << step;
  }
  bvh.findPairs(scheduler, pairs);
  ASSERT_TRUE(test::samePairs(brute::findPairs(m.boxes, m.isStatic, m.live), pairs));
}

TEST(BvhRandom, OperationSequences) {
  for (uint64_t seed = 1; seed <= 6; ++seed) runSequence(seed, 2500, seed % 2 ? 1 : 2);
}

TEST(BvhRandom, ManyProxiesFewChanges) {
  // Big trees where adds are inserted one by one rather than rebuilt, and
  // removals collapse nodes deep in the tree.
  Scheduler scheduler(2);
  SceneRng rng(99);
  Bvh bvh;
  test::ProxyMirror m;
  for (int i = 0; i < 1500; ++i) {
    const Aabb box = randomBox(rng);
    const bool stat = i % 3 == 0;
    m.set(bvh.add(box, stat), box, stat);
  }
  std::vector<Pair> pairs;
  for (int round = 0; round < 25; ++round) {
    const auto live = m.liveIndices();
    for (int k = 0; k < 30; ++k) {
      const uint32_t i = live[size_t(rng.uniform() * float(live.size()))];
      if (!m.live[i]) continue;
      if (k % 3 == 0) {
        bvh.remove(m.handles[i]);
        m.live[i] = 0;
      } else {
        const Aabb box = nudged(rng, m.boxes[i]);
        bvh.move(m.handles[i], box);
        m.boxes[i] = box;
      }
      const Aabb box = randomBox(rng);
      const bool stat = rng.uniform() < 0.3f;
      m.set(bvh.add(box, stat), box, stat);
    }
    bvh.findPairs(scheduler, pairs);
    ASSERT_EQ(bvh.validate(), "") << "round " << round;
    ASSERT_TRUE(test::samePairs(brute::findPairs(m.boxes, m.isStatic, m.live), pairs));
    checkAgainstModel(bvh, m, rng);
  }
}

}  // namespace
}  // namespace bp
