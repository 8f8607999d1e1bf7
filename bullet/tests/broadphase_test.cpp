// bp::bullet::Broadphase on its own, against brute force: the pair cache
// after each calculateOverlappingPairs(), filters (groups, masks, a callback,
// fields written by the caller), static proxies, odd boxes, and rayTest and
// aabbTest with boxes still pending.
#include <broadphase/bullet/broadphase.h>

#include <btBulletCollisionCommon.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <utility>
#include <vector>

namespace {

using bp::bullet::Broadphase;
using PairSet = std::set<std::pair<int, int>>;

// Bodies are numbered 1.. and the number is the proxy's client pointer.
void* client(int body) { return reinterpret_cast<void*>(intptr_t(body)); }
int bodyOf(const btBroadphaseProxy* p) {
  return int(reinterpret_cast<intptr_t>(p->m_clientObject));
}

struct Body {
  btVector3 min, max;
  int group = btBroadphaseProxy::DefaultFilter;
  int mask = btBroadphaseProxy::AllFilter;
  btBroadphaseProxy* proxy = nullptr;
};

bool boxesOverlap(const Body& a, const Body& b) {
  for (int k = 0; k < 3; ++k)
    if (a.max[k] < b.min[k] || b.max[k] < a.min[k]) return false;
  return true;
}

bool masksAccept(const Body& a, const Body& b) {
  return (a.group & b.mask) != 0 && (b.group & a.mask) != 0;
}

PairSet cachePairs(const btOverlappingPairCache& cache) {
  PairSet out;
  const btBroadphasePairArray& pairs =
      const_cast<btOverlappingPairCache&>(cache).getOverlappingPairArray();
  for (int i = 0; i < pairs.size(); ++i) {
    const int a = bodyOf(pairs[i].m_pProxy0), b = bodyOf(pairs[i].m_pProxy1);
    EXPECT_TRUE(out.insert({std::min(a, b), std::max(a, b)}).second) << "duplicate pair";
  }
  EXPECT_EQ(out.size(), size_t(pairs.size()));
  return out;
}

template <class Accept>
PairSet brutePairs(const std::vector<Body>& bodies, Accept accept) {
  PairSet out;
  for (size_t i = 0; i < bodies.size(); ++i)
    for (size_t j = i + 1; j < bodies.size(); ++j)
      if (bodies[i].proxy && bodies[j].proxy && boxesOverlap(bodies[i], bodies[j]) &&
          accept(bodies[i], bodies[j]))
        out.insert({int(i) + 1, int(j) + 1});
  return out;
}

Body randomBody(std::mt19937& rng, float world) {
  std::uniform_real_distribution<float> pos(0.0f, world), size(0.2f, 3.0f);
  const btVector3 c(pos(rng), pos(rng), pos(rng));
  const btVector3 h(size(rng), size(rng), size(rng));
  Body b;
  b.min = c - h * 0.5f;
  b.max = c + h * 0.5f;
  return b;
}

void create(Broadphase& bp, std::vector<Body>& bodies, int i) {
  Body& b = bodies[i];
  b.proxy =
      bp.createProxy(b.min, b.max, BOX_SHAPE_PROXYTYPE, client(i + 1), b.group, b.mask, nullptr);
}

// As btSingleRayCallback prepares itself: unit direction, its inverse with
// BT_LARGE_FLOAT for a zero component, the signs, the length as lambda.
struct RayCollector : btBroadphaseRayCallback {
  RayCollector(const btVector3& from, const btVector3& to) {
    btVector3 d = to - from;
    m_lambda_max = d.length();
    d /= m_lambda_max;
    for (int k = 0; k < 3; ++k) {
      m_rayDirectionInverse[k] = d[k] == 0 ? btScalar(BT_LARGE_FLOAT) : 1 / d[k];
      m_signs[k] = m_rayDirectionInverse[k] < 0;
    }
  }
  bool process(const btBroadphaseProxy* p) override {
    EXPECT_TRUE(seen.insert(bodyOf(p)).second) << "proxy reported twice";
    return true;
  }
  std::set<int> seen;
};

struct BoxCollector : btBroadphaseAabbCallback {
  bool process(const btBroadphaseProxy* p) override {
    EXPECT_TRUE(seen.insert(bodyOf(p)).second) << "proxy reported twice";
    return true;
  }
  std::set<int> seen;
};

bp::Vec3 v3(const btVector3& v) { return bp::Vec3(v.x(), v.y(), v.z()); }

// The closed slab test of the segment from -> to against the body's box
// grown by `half` on every side: what rayTest promises.
bool segmentHits(const btVector3& from, const btVector3& to, const Body& b, float half = 0.0f) {
  const bp::Ray ray = bp::makeRay(v3(from), v3(to - from), (to - from).length());
  const bp::Aabb box{v3(b.min) - bp::Vec3::Constant(half), v3(b.max) + bp::Vec3::Constant(half)};
  float t;
  return bp::intersectRayAabb(ray, box, t);
}

bool boxHits(const btVector3& min, const btVector3& max, const Body& b) {
  Body q;
  q.min = min;
  q.max = max;
  return boxesOverlap(q, b);
}

TEST(BulletBroadphase, PairsAppearAtCalculateOverlappingPairs) {
  Broadphase bp;
  std::vector<Body> bodies(2);
  bodies[0].min = btVector3(0, 0, 0), bodies[0].max = btVector3(1, 1, 1);
  bodies[1].min = btVector3(0.5f, 0.5f, 0.5f), bodies[1].max = btVector3(2, 2, 2);
  create(bp, bodies, 0);
  create(bp, bodies, 1);
  EXPECT_EQ(bp.getOverlappingPairCache()->getNumOverlappingPairs(), 0);
  bp.calculateOverlappingPairs(nullptr);
  EXPECT_EQ(cachePairs(*bp.getOverlappingPairCache()), (PairSet{{1, 2}}));
  // Bullet orders a pair's proxies by unique id.
  const btBroadphasePair& pair = bp.getOverlappingPairCache()->getOverlappingPairArray()[0];
  EXPECT_LT(pair.m_pProxy0->getUid(), pair.m_pProxy1->getUid());

  // Touching faces overlap (closed boxes); a gap ends the pair.
  bp.setAabb(bodies[1].proxy, btVector3(1, 0, 0), btVector3(2, 1, 1), nullptr);
  bp.calculateOverlappingPairs(nullptr);
  EXPECT_EQ(bp.getOverlappingPairCache()->getNumOverlappingPairs(), 1);
  bp.setAabb(bodies[1].proxy, btVector3(1.001f, 0, 0), btVector3(2, 1, 1), nullptr);
  bp.calculateOverlappingPairs(nullptr);
  EXPECT_EQ(bp.getOverlappingPairCache()->getNumOverlappingPairs(), 0);

  btVector3 lo, hi;
  bp.getAabb(bodies[1].proxy, lo, hi);
  EXPECT_EQ(lo, btVector3(1.001f, 0, 0));
  EXPECT_EQ(hi, btVector3(2, 1, 1));
}

TEST(BulletBroadphase, RecordedBoxesAreOneBatchAndUnchangedBoxesCostNothing) {
  Broadphase bp;
  std::mt19937 rng(3);
  std::vector<Body> bodies;
  for (int i = 0; i < 300; ++i) bodies.push_back(randomBody(rng, 40));
  for (int i = 0; i < 300; ++i) create(bp, bodies, i);
  bp.calculateOverlappingPairs(nullptr);
  EXPECT_EQ(bp.stats().updates, 1u);

  // The world sets every body's box each step; only changed ones are moves.
  for (int i = 0; i < 300; ++i) {
    if (i % 3 == 0) bodies[i].min += btVector3(0.5f, 0, 0), bodies[i].max += btVector3(0.5f, 0, 0);
    bp.setAabb(bodies[i].proxy, bodies[i].min, bodies[i].max, nullptr);
    if (i % 3 == 0) bp.setAabb(bodies[i].proxy, bodies[i].min, bodies[i].max, nullptr);  // twice
  }
  bp.calculateOverlappingPairs(nullptr);
  EXPECT_EQ(bp.stats().updates, 2u);
  EXPECT_EQ(bp.stats().lastMoves, 100u);
  EXPECT_EQ(cachePairs(*bp.getOverlappingPairCache()), brutePairs(bodies, masksAccept));

  for (int i = 0; i < 300; ++i) bp.setAabb(bodies[i].proxy, bodies[i].min, bodies[i].max, nullptr);
  bp.calculateOverlappingPairs(nullptr);
  EXPECT_EQ(bp.stats().updates, 2u) << "nothing changed: no update";
}

// Creates, moves and destroys at random with random groups and masks,
// statics among them, two threads; the cache matches brute force every frame.
TEST(BulletBroadphase, RandomFramesMatchBruteForce) {
  bp::bullet::Config config;
  config.broadphase.threads = 2;
  for (bp::Structure structure : {bp::Structure::automatic, bp::Structure::bvh}) {
    config.broadphase.structure = structure;
    Broadphase bp(nullptr, config);
    std::mt19937 rng(7);
    std::vector<Body> bodies;
    const int groups[] = {1, 2, 4, 8};
    auto randomFilter = [&](Body& b) {
      const int kind = int(rng() % 6);
      if (kind == 0) {  // a static, as the world files it
        b.group = btBroadphaseProxy::StaticFilter;
        b.mask = btBroadphaseProxy::AllFilter ^ btBroadphaseProxy::StaticFilter;
      } else if (kind == 1) {
        b.group = groups[rng() % 4];
        b.mask = int(rng() % 16);  // 0 included: pairs with nothing
      } else {
        b.group = btBroadphaseProxy::DefaultFilter;
        b.mask = btBroadphaseProxy::AllFilter;
      }
    };
    for (int frame = 0; frame < 40; ++frame) {
      for (int k = 0; k < 20; ++k) {  // creations
        bodies.push_back(randomBody(rng, 30));
        randomFilter(bodies.back());
        create(bp, bodies, int(bodies.size()) - 1);
      }
      for (size_t i = 0; i < bodies.size(); ++i) {
        Body& b = bodies[i];
        if (!b.proxy) continue;
        const uint32_t r = rng() % 10;
        if (r == 0) {
          bp.destroyProxy(b.proxy, nullptr);
          b.proxy = nullptr;
        } else if (r < 5) {
          std::uniform_real_distribution<float> step(-1.5f, 1.5f);
          const btVector3 d(step(rng), step(rng), step(rng));
          b.min += d;
          b.max += d;
          bp.setAabb(b.proxy, b.min, b.max, nullptr);
        }
      }
      bp.calculateOverlappingPairs(nullptr);
      ASSERT_EQ(cachePairs(*bp.getOverlappingPairCache()), brutePairs(bodies, masksAccept))
          << "frame " << frame;
      ASSERT_EQ(bp.broadPhase().validate(), "");
    }
    EXPECT_GT(bp.stats().staticProxies, 0u);
  }
}

// A slot freed by destroyProxy and reused by createProxy before the next
// update: the old proxy's pairs are gone at once, the new one's begin.
TEST(BulletBroadphase, SlotReusedBeforeTheUpdate) {
  Broadphase bp;
  std::vector<Body> bodies(3);
  bodies[0].min = btVector3(0, 0, 0), bodies[0].max = btVector3(1, 1, 1);
  bodies[1].min = btVector3(0.5f, 0, 0), bodies[1].max = btVector3(1.5f, 1, 1);
  bodies[2].min = btVector3(5, 0, 0), bodies[2].max = btVector3(6, 1, 1);
  create(bp, bodies, 0);
  create(bp, bodies, 1);
  bp.calculateOverlappingPairs(nullptr);
  EXPECT_EQ(cachePairs(*bp.getOverlappingPairCache()), (PairSet{{1, 2}}));
  const bp::ProxyId old = Broadphase::handleOf(bodies[1].proxy);
  bp.destroyProxy(bodies[1].proxy, nullptr);
  bodies[1].proxy = nullptr;
  EXPECT_EQ(bp.getOverlappingPairCache()->getNumOverlappingPairs(), 0);
  // Body 3 overlaps body 1 at the same indices the destroyed pair had.
  bodies[2].min = btVector3(0.2f, 0, 0), bodies[2].max = btVector3(0.8f, 1, 1);
  create(bp, bodies, 2);
  EXPECT_EQ(Broadphase::handleOf(bodies[2].proxy).index, old.index);
  bp.calculateOverlappingPairs(nullptr);
  EXPECT_EQ(cachePairs(*bp.getOverlappingPairCache()), (PairSet{{1, 3}}));
  EXPECT_EQ(bp.stats().lastEnded, 1u);
  EXPECT_EQ(bp.stats().lastBegun, 1u);
}

TEST(BulletBroadphase, StaticsAreStaticUntilTheyMove) {
  Broadphase bp;
  std::vector<Body> bodies(3);
  for (int i = 0; i < 3; ++i) {
    bodies[i].min = btVector3(float(i), 0, 0), bodies[i].max = btVector3(float(i) + 1.5f, 1, 1);
    bodies[i].group = btBroadphaseProxy::StaticFilter;
    bodies[i].mask = btBroadphaseProxy::AllFilter ^ btBroadphaseProxy::StaticFilter;
  }
  bodies[2].group = btBroadphaseProxy::DefaultFilter;
  bodies[2].mask = btBroadphaseProxy::AllFilter;
  for (int i = 0; i < 3; ++i) create(bp, bodies, i);
  bp.calculateOverlappingPairs(nullptr);
  EXPECT_EQ(bp.stats().staticProxies, 2u);
  EXPECT_EQ(cachePairs(*bp.getOverlappingPairCache()), (PairSet{{2, 3}}));
  // A static moved once (as the world's first step grows every box by the
  // contact threshold) stays static; one that moves in two steps in a row
  // (a kinematic body) becomes dynamic, its mask still keeping it from the
  // other static.
  for (int step = 0; step < 3; ++step) {
    if (step != 1) {
      bodies[0].min += btVector3(0.25f, 0, 0), bodies[0].max += btVector3(0.25f, 0, 0);
    }
    for (const Body& b : bodies) bp.setAabb(b.proxy, b.min, b.max, nullptr);
    bp.calculateOverlappingPairs(nullptr);
    EXPECT_EQ(bp.stats().staticProxies, step < 2 ? 2u : 1u) << "step " << step;
    EXPECT_EQ(cachePairs(*bp.getOverlappingPairCache()), brutePairs(bodies, masksAccept));
  }
  bodies[0].min += btVector3(0.25f, 0, 0), bodies[0].max += btVector3(0.25f, 0, 0);
  bp.setAabb(bodies[0].proxy, bodies[0].min, bodies[0].max, nullptr);
  bp.calculateOverlappingPairs(nullptr);
  EXPECT_EQ(bp.stats().staticProxies, 1u);
  EXPECT_EQ(cachePairs(*bp.getOverlappingPairCache()), brutePairs(bodies, masksAccept));
  EXPECT_EQ(cachePairs(*bp.getOverlappingPairCache()).count({1, 2}), 0u) << "two statics";
  // A static that pairs with statics (its mask has StaticFilter) is dynamic.
  bodies[1].mask = btBroadphaseProxy::AllFilter;
  bodies[1].proxy->m_collisionFilterMask = bodies[1].mask;
  bp.setAabb(bodies[1].proxy, bodies[1].min, bodies[1].max, nullptr);
  bodies[0].mask = btBroadphaseProxy::AllFilter;
  bodies[0].proxy->m_collisionFilterMask = bodies[0].mask;
  bp.setAabb(bodies[0].proxy, bodies[0].min, bodies[0].max, nullptr);
  bp.calculateOverlappingPairs(nullptr);
  EXPECT_EQ(bp.stats().staticProxies, 0u);
  EXPECT_EQ(cachePairs(*bp.getOverlappingPairCache()), brutePairs(bodies, masksAccept));
  EXPECT_EQ(cachePairs(*bp.getOverlappingPairCache()).count({1, 2}), 1u);
}

// Groups and masks written straight into the proxy are noticed at setAabb.
TEST(BulletBroadphase, FilterFieldsWrittenByTheCaller) {
  Broadphase bp;
  std::vector<Body> bodies(2);
  bodies[0].min = btVector3(0, 0, 0), bodies[0].max = btVector3(1, 1, 1);
  bodies[1].min = btVector3(0.5f, 0, 0), bodies[1].max = btVector3(1.5f, 1, 1);
  create(bp, bodies, 0);
  create(bp, bodies, 1);
  bp.calculateOverlappingPairs(nullptr);
  EXPECT_EQ(bp.getOverlappingPairCache()->getNumOverlappingPairs(), 1);
  bodies[0].proxy->m_collisionFilterMask = 0;
  bp.setAabb(bodies[0].proxy, bodies[0].min, bodies[0].max, nullptr);
  bp.calculateOverlappingPairs(nullptr);
  EXPECT_EQ(bp.getOverlappingPairCache()->getNumOverlappingPairs(), 0);
  bodies[0].proxy->m_collisionFilterMask = btBroadphaseProxy::AllFilter;
  bp.setAabb(bodies[0].proxy, bodies[0].min, bodies[0].max, nullptr);
  bp.calculateOverlappingPairs(nullptr);
  EXPECT_EQ(bp.getOverlappingPairCache()->getNumOverlappingPairs(), 1);
}

// Refuses pairs of two even bodies, and any pair while `refuseAll` is set.
struct EvenFilter : btOverlapFilterCallback {
  bool needBroadphaseCollision(btBroadphaseProxy* a, btBroadphaseProxy* b) const override {
    ++asked;
    if (refuseAll) return false;
    if (respectMasks && ((a->m_collisionFilterGroup & b->m_collisionFilterMask) == 0 ||
                         (b->m_collisionFilterGroup & a->m_collisionFilterMask) == 0))
      return false;
    return bodyOf(a) % 2 != 0 || bodyOf(b) % 2 != 0;
  }
  bool respectMasks = false;
  bool refuseAll = false;
  mutable int asked = 0;
};

TEST(BulletBroadphase, OverlapFilterCallbackDecides) {
  for (bool implies : {false, true}) {
    bp::bullet::Config config;
    config.callbackImpliesMasks = implies;
    Broadphase bp(nullptr, config);
    EvenFilter filter;
    filter.respectMasks = implies;
    bp.getOverlappingPairCache()->setOverlapFilterCallback(&filter);
    std::mt19937 rng(11);
    std::vector<Body> bodies;
    for (int i = 0; i < 200; ++i) {
      bodies.push_back(randomBody(rng, 20));
      if (i % 10 == 0) {  // statics: with the callback alone deciding, they pair
        bodies.back().group = btBroadphaseProxy::StaticFilter;
        bodies.back().mask = btBroadphaseProxy::AllFilter ^ btBroadphaseProxy::StaticFilter;
      }
      create(bp, bodies, i);
    }
    auto accept = [&](const Body& a, const Body& b) {
      const int ia = int(&a - bodies.data()) + 1, ib = int(&b - bodies.data()) + 1;
      if (implies && !masksAccept(a, b)) return false;
      return ia % 2 != 0 || ib % 2 != 0;
    };
    for (int frame = 0; frame < 5; ++frame) {
      for (size_t i = 1; i < bodies.size(); i += 2) {  // statics stay
        bodies[i].min += btVector3(0.3f, 0, 0), bodies[i].max += btVector3(0.3f, 0, 0);
        bp.setAabb(bodies[i].proxy, bodies[i].min, bodies[i].max, nullptr);
      }
      bp.calculateOverlappingPairs(nullptr);
      ASSERT_EQ(cachePairs(*bp.getOverlappingPairCache()), brutePairs(bodies, accept))
          << "callbackImpliesMasks " << implies << ", frame " << frame;
    }
    EXPECT_EQ(bp.stats().staticProxies, implies ? 20u : 0u);
    // Without the callback the masks decide again.
    bp.getOverlappingPairCache()->setOverlapFilterCallback(nullptr);
    bp.calculateOverlappingPairs(nullptr);
    EXPECT_EQ(cachePairs(*bp.getOverlappingPairCache()), brutePairs(bodies, masksAccept));
    EXPECT_EQ(bp.stats().staticProxies, 20u);
  }
}

// A pair refused while it overlaps is asked again each step: it enters the
// cache once the callback accepts it, with no box moving.
TEST(BulletBroadphase, RefusedPairIsAskedAgain) {
  Broadphase bp;
  EvenFilter filter;
  filter.refuseAll = true;
  bp.getOverlappingPairCache()->setOverlapFilterCallback(&filter);
  std::vector<Body> bodies(2);
  bodies[0].min = btVector3(0, 0, 0), bodies[0].max = btVector3(1, 1, 1);
  bodies[1].min = btVector3(0.5f, 0, 0), bodies[1].max = btVector3(1.5f, 1, 1);
  create(bp, bodies, 0);
  create(bp, bodies, 1);
  bp.calculateOverlappingPairs(nullptr);
  EXPECT_EQ(bp.getOverlappingPairCache()->getNumOverlappingPairs(), 0);
  EXPECT_EQ(bp.stats().refused, 1u);
  bp.calculateOverlappingPairs(nullptr);
  EXPECT_EQ(bp.getOverlappingPairCache()->getNumOverlappingPairs(), 0);
  filter.refuseAll = false;
  bp.calculateOverlappingPairs(nullptr);
  EXPECT_EQ(cachePairs(*bp.getOverlappingPairCache()), (PairSet{{1, 2}}));
  EXPECT_EQ(bp.stats().refused, 0u);
  // Once it ends it is not asked again.
  filter.refuseAll = true;
  bp.setAabb(bodies[1].proxy, btVector3(5, 0, 0), btVector3(6, 1, 1), nullptr);
  bp.calculateOverlappingPairs(nullptr);
  const int asked = filter.asked;
  bp.calculateOverlappingPairs(nullptr);
  EXPECT_EQ(filter.asked, asked);
  bp.getOverlappingPairCache()->setOverlapFilterCallback(nullptr);
}

// btSortedOverlappingPairCache defers removal to the broadphase.
TEST(BulletBroadphase, SortedPairCacheWithDeferredRemoval) {
  btSortedOverlappingPairCache cache;
  ASSERT_TRUE(cache.hasDeferredRemoval());
  {
    Broadphase bp(&cache);
    std::mt19937 rng(5);
    std::vector<Body> bodies;
    for (int i = 0; i < 150; ++i) {
      bodies.push_back(randomBody(rng, 20));
      create(bp, bodies, i);
    }
    for (int frame = 0; frame < 10; ++frame) {
      for (size_t i = frame % 2; i < bodies.size(); i += 2) {
        if (!bodies[i].proxy) continue;
        const btVector3 d(frame % 4 < 2 ? 0.7f : -0.7f, 0, 0);
        bodies[i].min += d, bodies[i].max += d;
        bp.setAabb(bodies[i].proxy, bodies[i].min, bodies[i].max, nullptr);
      }
      if (frame == 5) {
        bp.destroyProxy(bodies[7].proxy, nullptr);
        bodies[7].proxy = nullptr;
      }
      bp.calculateOverlappingPairs(nullptr);
      ASSERT_EQ(cachePairs(cache), brutePairs(bodies, masksAccept)) << "frame " << frame;
    }
    for (Body& b : bodies)
      if (b.proxy) bp.destroyProxy(b.proxy, nullptr);
  }
  EXPECT_EQ(cache.getNumOverlappingPairs(), 0);
}

// Infinite shapes (btStaticPlaneShape's +-1e18 box) are clamped; a NaN or
// inverted box takes part in nothing until a good one arrives.
TEST(BulletBroadphase, HugeAndInvalidBoxes) {
  Broadphase bp;
  std::vector<Body> bodies(3);
  const btScalar large = BT_LARGE_FLOAT;
  bodies[0].min = btVector3(-large, -large, -large), bodies[0].max = btVector3(large, 0, large);
  bodies[1].min = btVector3(3, -1, 3), bodies[1].max = btVector3(4, 1, 4);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  bodies[2].min = btVector3(nan, 0, 0), bodies[2].max = btVector3(1, 1, 1);
  for (int i = 0; i < 3; ++i) create(bp, bodies, i);
  bp.calculateOverlappingPairs(nullptr);
  EXPECT_EQ(cachePairs(*bp.getOverlappingPairCache()), (PairSet{{1, 2}}));
  EXPECT_EQ(bp.stats().invalidBoxes, 1u);
  btVector3 lo, hi;
  bp.getAabb(bodies[0].proxy, lo, hi);
  EXPECT_EQ(lo.x(), -large) << "getAabb gives Bullet's box back";
  BoxCollector all;
  bp.aabbTest(btVector3(-1e30f, -1e30f, -1e30f), btVector3(1e30f, 1e30f, 1e30f), all);
  EXPECT_EQ(all.seen, (std::set<int>{1, 2}));

  bp.setAabb(bodies[2].proxy, btVector3(0, -0.5f, 0), btVector3(1, 0.5f, 1), nullptr);
  bp.calculateOverlappingPairs(nullptr);
  EXPECT_EQ(cachePairs(*bp.getOverlappingPairCache()), (PairSet{{1, 2}, {1, 3}}));
  bp.setAabb(bodies[2].proxy, btVector3(1, 0, 0), btVector3(0, 1, 1), nullptr);  // inverted
  bp.calculateOverlappingPairs(nullptr);
  EXPECT_EQ(cachePairs(*bp.getOverlappingPairCache()), (PairSet{{1, 2}}));
  EXPECT_EQ(bp.stats().invalidBoxes, 2u);
}

// Rays and boxes against brute force over the boxes as last given: applied
// (after calculateOverlappingPairs), a few pending (tested one by one), many
// pending (applied by the query first).
TEST(BulletBroadphase, QueriesMatchBruteForceWithPendingBoxes) {
  Broadphase bp;
  std::mt19937 rng(13);
  std::vector<Body> bodies;
  for (int i = 0; i < 400; ++i) {
    bodies.push_back(randomBody(rng, 40));
    create(bp, bodies, i);
  }
  bp.calculateOverlappingPairs(nullptr);
  std::uniform_real_distribution<float> pos(-5.0f, 45.0f);
  auto check = [&](const char* what) {
    for (int r = 0; r < 200; ++r) {
      const btVector3 from(pos(rng), pos(rng), pos(rng)), to(pos(rng), pos(rng), pos(rng));
      // A quarter of the rays run along an axis (zero direction components).
      btVector3 end = to;
      if (r % 4 == 0) end = btVector3(from.x(), from.y(), to.z());
      RayCollector ray(from, end);
      bp.rayTest(from, end, ray);
      std::set<int> expected;
      for (size_t i = 0; i < bodies.size(); ++i)
        if (bodies[i].proxy && segmentHits(from, end, bodies[i])) expected.insert(int(i) + 1);
      ASSERT_EQ(ray.seen, expected) << what << ", ray " << r;

      const btVector3 lo = from.lerp(to, 0.3f), hi = lo + btVector3(4, 3, 5);
      BoxCollector box;
      bp.aabbTest(lo, hi, box);
      expected.clear();
      for (size_t i = 0; i < bodies.size(); ++i)
        if (bodies[i].proxy && boxHits(lo, hi, bodies[i])) expected.insert(int(i) + 1);
      ASSERT_EQ(box.seen, expected) << what << ", box " << r;
    }
  };
  check("applied");
  auto moveSome = [&](int count) {
    for (int k = 0; k < count; ++k) {
      Body& b = bodies[rng() % bodies.size()];
      if (!b.proxy) continue;
      const btVector3 d(pos(rng) - 20, 0, pos(rng) - 20);
      b.min += d * 0.2f, b.max += d * 0.2f;
      bp.setAabb(b.proxy, b.min, b.max, nullptr);
    }
  };
  moveSome(10);
  bodies.push_back(randomBody(rng, 40));
  create(bp, bodies, int(bodies.size()) - 1);
  bp.destroyProxy(bodies[3].proxy, nullptr);
  bodies[3].proxy = nullptr;
  check("few pending");
  EXPECT_EQ(bp.stats().queryFlushes, 0u);
  moveSome(200);
  check("many pending");
  EXPECT_EQ(bp.stats().queryFlushes, 1u);
  bp.calculateOverlappingPairs(nullptr);
  EXPECT_EQ(cachePairs(*bp.getOverlappingPairCache()), brutePairs(bodies, masksAccept));
}

// process() lowering m_lambda_max prunes: a closest-hit callback along a row
// of boxes sees few of them and ends at the nearest.
struct ClosestHit : RayCollector {
  ClosestHit(const btVector3& from, const btVector3& to, const std::vector<Body>& b)
      : RayCollector(from, to), origin(from), bodies(b) {}
  bool process(const btBroadphaseProxy* p) override {
    RayCollector::process(p);
    const Body& b = bodies[bodyOf(p) - 1];
    // Entry distance along the unit direction, the units of m_lambda_max.
    btScalar tEnter = 0;
    for (int k = 0; k < 3; ++k) {
      const btScalar inv = m_rayDirectionInverse[k];
      if (inv == btScalar(BT_LARGE_FLOAT)) continue;
      const btScalar t0 = (b.min[k] - origin[k]) * inv, t1 = (b.max[k] - origin[k]) * inv;
      tEnter = std::max(tEnter, std::min(t0, t1));
    }
    if (tEnter < m_lambda_max) {
      m_lambda_max = tEnter;
      closest = bodyOf(p);
    }
    return true;
  }
  btVector3 origin;
  const std::vector<Body>& bodies;
  int closest = 0;
};

TEST(BulletBroadphase, RayTestHonoursALoweredLambdaMax) {
  Broadphase bp;
  std::vector<Body> bodies;
  for (int i = 0; i < 200; ++i) {
    Body b;
    b.min = btVector3(float(i) * 2, 0, 0), b.max = btVector3(float(i) * 2 + 1, 1, 1);
    bodies.push_back(b);
    create(bp, bodies, i);
  }
  bp.calculateOverlappingPairs(nullptr);
  const btVector3 from(-10, 0.5f, 0.5f), to(1000, 0.5f, 0.5f);
  RayCollector all(from, to);
  bp.rayTest(from, to, all);
  EXPECT_EQ(all.seen.size(), 200u);
  ClosestHit closest(from, to, bodies);
  bp.rayTest(from, to, closest);
  EXPECT_EQ(closest.closest, 1);
  EXPECT_FLOAT_EQ(closest.m_lambda_max, 10.0f);
  EXPECT_LT(closest.seen.size(), 20u) << "the lowered lambda pruned the far boxes";
  // A negative lambda stops the query.
  struct Stopper : RayCollector {
    using RayCollector::RayCollector;
    bool process(const btBroadphaseProxy* p) override {
      RayCollector::process(p);
      m_lambda_max = -1;
      return true;
    }
  } stopper(from, to);
  bp.rayTest(from, to, stopper);
  EXPECT_EQ(stopper.seen.size(), 1u);
}

// A cast with a box (aabbMin/aabbMax: the cast shape's local box, as
// convexSweepTest passes it) meets every box grown by that box.
TEST(BulletBroadphase, RayTestWithACastBox) {
  Broadphase bp;
  std::mt19937 rng(17);
  std::vector<Body> bodies;
  for (int i = 0; i < 300; ++i) {
    bodies.push_back(randomBody(rng, 40));
    create(bp, bodies, i);
  }
  bp.calculateOverlappingPairs(nullptr);
  bp.setAabb(bodies[0].proxy, bodies[0].min + btVector3(1, 1, 1),
             bodies[0].max + btVector3(1, 1, 1), nullptr);
  bodies[0].min += btVector3(1, 1, 1), bodies[0].max += btVector3(1, 1, 1);
  std::uniform_real_distribution<float> pos(-5.0f, 45.0f);
  const float half = 0.75f;
  for (int r = 0; r < 200; ++r) {
    const btVector3 from(pos(rng), pos(rng), pos(rng)), to(pos(rng), pos(rng), pos(rng));
    RayCollector ray(from, to);
    bp.rayTest(from, to, ray, btVector3(-half, -half, -half), btVector3(half, half, half));
    std::set<int> expected;
    for (size_t i = 0; i < bodies.size(); ++i)
      if (segmentHits(from, to, bodies[i], half)) expected.insert(int(i) + 1);
    ASSERT_EQ(ray.seen, expected) << "ray " << r;
  }
  // An off-centre cast box moves the ray: the box [0, 2]^3 cast from p is
  // the box [-1, 1]^3 cast from p + (1, 1, 1).
  const btVector3 from(-10, 2, 3), to(50, 20, 30);
  RayCollector shifted(from, to), centred(from + btVector3(1, 1, 1), to + btVector3(1, 1, 1));
  bp.rayTest(from, to, shifted, btVector3(0, 0, 0), btVector3(2, 2, 2));
  bp.rayTest(from + btVector3(1, 1, 1), to + btVector3(1, 1, 1), centred, btVector3(-1, -1, -1),
             btVector3(1, 1, 1));
  EXPECT_EQ(shifted.seen, centred.seen);
  EXPECT_FALSE(shifted.seen.empty());
  // A cast that does not move is a box query at its start.
  RayCollector still(from, from + btVector3(1, 0, 0));
  still.m_lambda_max = 0;
  bp.rayTest(from, from, still, btVector3(-3, -3, -3), btVector3(3, 3, 3));
  BoxCollector box;
  bp.aabbTest(from - btVector3(3, 3, 3), from + btVector3(3, 3, 3), box);
  EXPECT_EQ(still.seen, box.seen);
}

TEST(BulletBroadphase, BroadphaseAabbAndResetPool) {
  Broadphase bp;
  btVector3 lo, hi;
  bp.getBroadphaseAabb(lo, hi);
  EXPECT_EQ(lo, btVector3(0, 0, 0));
  EXPECT_EQ(hi, btVector3(0, 0, 0));
  std::vector<Body> bodies(2);
  bodies[0].min = btVector3(-1, 0, 0), bodies[0].max = btVector3(1, 2, 1);
  bodies[1].min = btVector3(4, -3, 0), bodies[1].max = btVector3(5, 0, 7);
  create(bp, bodies, 0);
  create(bp, bodies, 1);
  bp.getBroadphaseAabb(lo, hi);
  EXPECT_EQ(lo, btVector3(-1, -3, 0));
  EXPECT_EQ(hi, btVector3(5, 2, 7));
  const int uid = bodies[1].proxy->getUid();
  bp.resetPool(nullptr);  // proxies live: nothing happens
  EXPECT_EQ(bp.stats().proxies, 2u);
  bp.calculateOverlappingPairs(nullptr);
  for (Body& b : bodies) bp.destroyProxy(b.proxy, nullptr);
  bp.resetPool(nullptr);
  EXPECT_EQ(bp.stats().updates, 0u);
  create(bp, bodies, 0);
  create(bp, bodies, 1);
  EXPECT_EQ(bodies[1].proxy->getUid(), uid) << "a rerun issues the same unique ids";
  bp.printStats();
}

}  // namespace
