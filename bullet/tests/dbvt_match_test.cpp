// bp::bullet::Broadphase against Bullet's own btDbvtBroadphase, fed the same
// boxes every step of a simulated scene: bodies falling into a pile (a
// btDiscreteDynamicsWorld computes the motion), bodies created and removed
// during the run, collision filter groups and masks of every kind. After
// every step the pair caches, and the answers of rayTest and aabbTest (as
// sets of bodies), must be identical.
//
// btDbvtBroadphase's pair cache is not a function of the current boxes: a
// leaf keeps its old box while the new one fits inside it (the tree's boxes
// are fat), a pair leaves the cache only when the leaves part, and only a
// tenth of the cached pairs is checked each step. So two Dbvt instances run
// beside ours:
//   - `exact`: every box set with setAabbForceUpdate (leaves are the boxes
//     given) and a full cleanup each step (m_cupdates = 100). Its cache then
//     holds exactly the overlapping pairs its filter accepts: ours must
//     equal it pair for pair, and its rayTest and aabbTest (which walk the
//     leaves) answer for the exact boxes.
//   - `lazy`: the defaults a world uses. Its cache holds every exact pair and
//     more; ours must equal its pairs whose boxes overlap now, and its query
//     answers cut to the bodies whose boxes the query meets.
#include <broadphase/bullet/broadphase.h>

#include <btBulletDynamicsCommon.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <random>
#include <set>
#include <utility>
#include <vector>

namespace {

using PairSet = std::set<std::pair<int, int>>;
using IdSet = std::set<int>;

void* client(int body) { return reinterpret_cast<void*>(intptr_t(body)); }
int bodyOf(const btBroadphaseProxy* p) {
  return int(reinterpret_cast<intptr_t>(p->m_clientObject));
}

struct Box {
  btVector3 min, max;
};

bool overlaps(const Box& a, const Box& b) {
  for (int k = 0; k < 3; ++k)
    if (a.max[k] < b.min[k] || b.max[k] < a.min[k]) return false;
  return true;
}

// Closed slab test of the segment, widened (eps > 0) or narrowed (eps < 0)
// by eps on every face: a box the ray hits only at one width grazes it.
bool segmentHits(const btVector3& from, const btVector3& to, const Box& b, btScalar eps) {
  btScalar t0 = 0, t1 = 1;
  const btVector3 d = to - from;
  for (int k = 0; k < 3; ++k) {
    const btScalar lo = b.min[k] - eps, hi = b.max[k] + eps;
    if (d[k] == 0) {
      if (from[k] < lo || from[k] > hi) return false;
      continue;
    }
    btScalar a = (lo - from[k]) / d[k], c = (hi - from[k]) / d[k];
    if (a > c) std::swap(a, c);
    t0 = std::max(t0, a);
    t1 = std::min(t1, c);
  }
  return t0 <= t1;
}

PairSet cachePairs(btBroadphaseInterface& bp) {
  PairSet out;
  btBroadphasePairArray& pairs = bp.getOverlappingPairCache()->getOverlappingPairArray();
  for (int i = 0; i < pairs.size(); ++i) {
    const int a = bodyOf(pairs[i].m_pProxy0), b = bodyOf(pairs[i].m_pProxy1);
    out.insert({std::min(a, b), std::max(a, b)});
  }
  EXPECT_EQ(out.size(), size_t(pairs.size())) << "a pair twice in the cache";
  return out;
}

// As btCollisionWorld's btSingleRayCallback prepares itself.
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
    seen.insert(bodyOf(p));
    return true;
  }
  IdSet seen;
};

struct BoxCollector : btBroadphaseAabbCallback {
  bool process(const btBroadphaseProxy* p) override {
    seen.insert(bodyOf(p));
    return true;
  }
  IdSet seen;
};

// The scene: a world on a default btDbvtBroadphase moves the bodies; the
// three broadphases under test hold a proxy per body and get its box as the
// world computed it.
class PileScene {
 public:
  explicit PileScene(uint32_t seed) : rng_(seed) {
    exact_.m_cupdates = 100;  // every cached pair checked at every step
    world_ = std::make_unique<btDiscreteDynamicsWorld>(&dispatcher_, &worldBroadphase_, &solver_,
                                                       &configuration_);
    world_->setGravity(btVector3(0, -10, 0));
    shapes_.push_back(std::make_unique<btBoxShape>(btVector3(30, 1, 30)));   // the ground
    shapes_.push_back(std::make_unique<btBoxShape>(btVector3(1, 3, 1)));     // a pillar
    shapes_.push_back(std::make_unique<btBoxShape>(btVector3(4, 0.5f, 4)));  // a sensor pad
    for (float s : {0.3f, 0.45f, 0.6f}) {
      shapes_.push_back(std::make_unique<btBoxShape>(btVector3(s, s * 0.8f, s * 1.2f)));
      shapes_.push_back(std::make_unique<btSphereShape>(s));
    }
    const int statics = btBroadphaseProxy::StaticFilter;
    const int notStatics = btBroadphaseProxy::AllFilter ^ btBroadphaseProxy::StaticFilter;
    addBody(0, btVector3(0, -1, 0), 0, statics, notStatics);
    // Pillars standing in the ground: overlapping statics, kept apart by
    // their masks (static in our BroadPhase)...
    for (int i = 1; i < 4; ++i)
      addBody(1, btVector3(-8.0f + 5.0f * float(i), 2.5f, 4), 0, statics, notStatics);
    // ...but for one pillar and two sensor pads, statics whose masks have
    // StaticFilter: they pair with each other where they overlap (the pads
    // overlap each other and the pillar), and so are dynamic in our
    // BroadPhase.
    addBody(1, btVector3(-8, 2.5f, 4), 0, statics, btBroadphaseProxy::AllFilter);
    addBody(2, btVector3(-6, 0.2f, 4), 0, statics, btBroadphaseProxy::AllFilter);
    addBody(2, btVector3(-1, 0.2f, 4), 0, statics, btBroadphaseProxy::AllFilter);
    for (int i = 0; i < 240; ++i) addFalling();
  }

  ~PileScene() {
    for (size_t i = 0; i < bodies_.size(); ++i)
      if (bodies_[i].body) removeBody(int(i));
  }

  // One step of the world, then the same boxes into the three broadphases.
  void step(int frame) {
    world_->stepSimulation(1.0f / 60.0f, 1, 1.0f / 60.0f);
    if (frame % 10 == 5) {  // churn: a few leave, a few more fall in
      for (int k = 0; k < 4; ++k) {
        const int i = pickFalling();
        if (i >= 0) removeBody(i);
      }
      for (int k = 0; k < 6; ++k) addFalling();
    }
    for (size_t i = 0; i < bodies_.size(); ++i) {
      Entry& e = bodies_[i];
      if (!e.body) continue;
      const btBroadphaseProxy* h = e.body->getBroadphaseHandle();
      e.box = {h->m_aabbMin, h->m_aabbMax};
      ours_.setAabb(e.ours, e.box.min, e.box.max, nullptr);
      exact_.setAabbForceUpdate(e.exact, e.box.min, e.box.max, nullptr);
      lazy_.setAabb(e.lazy, e.box.min, e.box.max, nullptr);
    }
    ours_.calculateOverlappingPairs(nullptr);
    exact_.calculateOverlappingPairs(nullptr);
    lazy_.calculateOverlappingPairs(nullptr);
  }

  void checkPairs(int frame) {
    const PairSet ours = cachePairs(ours_);
    const PairSet exact = cachePairs(exact_);
    ASSERT_EQ(ours, exact) << "step " << frame;
    PairSet lazyExact;
    const PairSet lazy = cachePairs(lazy_);
    for (const auto& [a, b] : lazy)
      if (overlaps(bodies_[a - 1].box, bodies_[b - 1].box)) lazyExact.insert({a, b});
    lazyExtra_ += lazy.size() - lazyExact.size();
    ASSERT_EQ(ours, lazyExact) << "step " << frame;
    EXPECT_EQ(ours_.broadPhase().validate(), "");
    pairsSeen_ = std::max(pairsSeen_, ours.size());
  }

  void checkQueries(int frame) {
    std::uniform_real_distribution<float> x(-14, 14), y(-2, 12);
    for (int r = 0; r < 24; ++r) {
      btVector3 from(x(rng_), y(rng_) + 6, x(rng_)), to(x(rng_), y(rng_) - 4, x(rng_));
      if (r % 6 == 0) to = btVector3(from.x(), to.y(), from.z());  // straight down
      RayCollector ours(from, to), exact(from, to), lazy(from, to);
      ours_.rayTest(from, to, ours);
      exact_.rayTest(from, to, exact);
      lazy_.rayTest(from, to, lazy);
      // Bullet's slab test is strict at the ends of the ray and rounds
      // differently from ours: a body only grazed (hit when its box grows
      // by 1e-4, missed when it shrinks by as much) may be in one answer
      // and not the other. Any other difference fails.
      auto grazes = [&](int id) {
        const Box& b = bodies_[id - 1].box;
        return segmentHits(from, to, b, 1e-4f) && !segmentHits(from, to, b, -1e-4f);
      };
      auto sameUpToGrazes = [&](const IdSet& x, const IdSet& y) {
        IdSet diff;
        std::set_symmetric_difference(x.begin(), x.end(), y.begin(), y.end(),
                                      std::inserter(diff, diff.end()));
        for (int id : diff)
          if (!grazes(id)) return false;
        grazed_ += diff.size();
        return true;
      };
      EXPECT_TRUE(sameUpToGrazes(ours.seen, exact.seen)) << "step " << frame << ", ray " << r;
      IdSet lazyHits;
      for (int id : lazy.seen)
        if (segmentHits(from, to, bodies_[id - 1].box, 0)) lazyHits.insert(id);
      EXPECT_TRUE(sameUpToGrazes(ours.seen, lazyHits)) << "step " << frame << ", ray " << r;
      for (int id : ours.seen)  // the lazy tree's boxes hold the exact ones
        EXPECT_TRUE(lazy.seen.count(id) || grazes(id)) << "step " << frame << ", ray " << r;
      raysHit_ += ours.seen.size();

      const btVector3 lo(x(rng_), y(rng_) - 2, x(rng_)), hi = lo + btVector3(3, 2, 4);
      BoxCollector oursBox, exactBox, lazyBox;
      ours_.aabbTest(lo, hi, oursBox);
      exact_.aabbTest(lo, hi, exactBox);
      lazy_.aabbTest(lo, hi, lazyBox);
      ASSERT_EQ(oursBox.seen, exactBox.seen) << "step " << frame << ", box " << r;
      IdSet lazyOverlaps;
      for (int id : lazyBox.seen)
        if (overlaps(bodies_[id - 1].box, Box{lo, hi})) lazyOverlaps.insert(id);
      ASSERT_EQ(oursBox.seen, lazyOverlaps) << "step " << frame << ", box " << r;
      boxesHit_ += oursBox.seen.size();
    }
  }

  size_t pairsSeen() const { return pairsSeen_; }
  size_t raysHit() const { return raysHit_; }
  size_t boxesHit() const { return boxesHit_; }
  size_t churned() const { return removed_; }
  size_t lazyExtra() const { return lazyExtra_; }
  size_t grazed() const { return grazed_; }

 private:
  struct Entry {
    std::unique_ptr<btRigidBody> body;
    Box box;
    btBroadphaseProxy* ours = nullptr;
    btBroadphaseProxy* exact = nullptr;
    btBroadphaseProxy* lazy = nullptr;
    bool falling = false;
  };

  void addBody(size_t shape, const btVector3& at, float mass, int group, int mask) {
    btCollisionShape* s = shapes_[shape].get();
    btVector3 inertia(0, 0, 0);
    if (mass > 0) s->calculateLocalInertia(mass, inertia);
    btTransform t;
    t.setIdentity();
    t.setOrigin(at);
    btRigidBody::btRigidBodyConstructionInfo info(mass, nullptr, s, inertia);
    info.m_startWorldTransform = t;
    Entry e;
    e.body = std::make_unique<btRigidBody>(info);
    e.falling = mass > 0;
    world_->addRigidBody(e.body.get(), group, mask);
    const btBroadphaseProxy* h = e.body->getBroadphaseHandle();
    e.box = {h->m_aabbMin, h->m_aabbMax};
    const int id = int(bodies_.size()) + 1;
    e.ours = ours_.createProxy(e.box.min, e.box.max, s->getShapeType(), client(id), group, mask,
                               nullptr);
    e.exact = exact_.createProxy(e.box.min, e.box.max, s->getShapeType(), client(id), group, mask,
                                 nullptr);
    e.lazy = lazy_.createProxy(e.box.min, e.box.max, s->getShapeType(), client(id), group, mask,
                               nullptr);
    bodies_.push_back(std::move(e));
  }

  // Falling bodies: most in the default group; every 7th is debris (never
  // with other debris), every 11th a character (only with default bodies and
  // statics).
  void addFalling() {
    std::uniform_real_distribution<float> x(-7, 7), y(4, 20);
    const int n = int(bodies_.size());
    int group = btBroadphaseProxy::DefaultFilter, mask = btBroadphaseProxy::AllFilter;
    if (n % 7 == 0) {
      group = btBroadphaseProxy::DebrisFilter;
      mask = btBroadphaseProxy::AllFilter ^ btBroadphaseProxy::DebrisFilter;
    } else if (n % 11 == 0) {
      group = btBroadphaseProxy::CharacterFilter;
      mask = btBroadphaseProxy::DefaultFilter | btBroadphaseProxy::StaticFilter;
    }
    addBody(3 + size_t(rng_() % 6), btVector3(x(rng_), y(rng_), x(rng_)), 1.0f, group, mask);
  }

  int pickFalling() {
    for (int tries = 0; tries < 100; ++tries) {
      const int i = int(rng_() % bodies_.size());
      if (bodies_[i].body && bodies_[i].falling) return i;
    }
    return -1;
  }

  void removeBody(int i) {
    Entry& e = bodies_[i];
    world_->removeRigidBody(e.body.get());
    ours_.destroyProxy(e.ours, nullptr);
    exact_.destroyProxy(e.exact, nullptr);
    lazy_.destroyProxy(e.lazy, nullptr);
    e.body.reset();
    ++removed_;
  }

  std::mt19937 rng_;
  btDefaultCollisionConfiguration configuration_;
  btCollisionDispatcher dispatcher_{&configuration_};
  btDbvtBroadphase worldBroadphase_;
  btSequentialImpulseConstraintSolver solver_;
  std::unique_ptr<btDiscreteDynamicsWorld> world_;
  std::vector<std::unique_ptr<btCollisionShape>> shapes_;
  std::vector<Entry> bodies_;

  bp::bullet::Broadphase ours_{nullptr, [] {
                                 bp::bullet::Config c;
                                 c.broadphase.threads = 2;
                                 return c;
                               }()};
  btDbvtBroadphase exact_;
  btDbvtBroadphase lazy_;
  size_t pairsSeen_ = 0, raysHit_ = 0, boxesHit_ = 0, removed_ = 0, lazyExtra_ = 0, grazed_ = 0;
};

TEST(BulletDbvtMatch, PileStepByStep) {
  PileScene scene(2024);
  for (int frame = 0; frame < 240; ++frame) {
    scene.step(frame);
    ASSERT_NO_FATAL_FAILURE(scene.checkPairs(frame));
    if (frame % 4 == 0) {
      ASSERT_NO_FATAL_FAILURE(scene.checkQueries(frame));
    }
  }
  // The comparison saw real work: a pile's worth of pairs, rays and boxes
  // that met bodies, bodies removed.
  EXPECT_GT(scene.pairsSeen(), 300u);
  EXPECT_GT(scene.raysHit(), 500u);
  EXPECT_GT(scene.boxesHit(), 500u);
  EXPECT_GT(scene.churned(), 50u);
  // The lazy cache did hold pairs of boxes apart (so the cut mattered).
  EXPECT_GT(scene.lazyExtra(), 0u);
  std::printf(
      "most pairs %zu, ray hits %zu, box hits %zu, removed %zu, lazy extra pairs %zu, "
      "grazed %zu\n",
      scene.pairsSeen(), scene.raysHit(), scene.boxesHit(), scene.churned(), scene.lazyExtra(),
      scene.grazed());
}

}  // namespace
