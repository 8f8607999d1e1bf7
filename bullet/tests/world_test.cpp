// A btDiscreteDynamicsWorld on bp::bullet::Broadphase runs the scene a world
// on btDbvtBroadphase runs: boxes and spheres dropped onto a ground box, a few
// removed and a few more dropped on the way, until everything rests.
//
// The two worlds cannot stay bit-identical: Bullet solves contacts in the
// order its pair cache holds them, and the two broadphases fill the cache in
// different orders (ours sorted by proxy index, the Dbvt in tree order), so
// the piles settle differently. What must match: before the first step,
// where the worlds are identical, every world ray test; at the end, the
// number of bodies at rest, and no body below the ground's top. The bodies
// fall into four bins, so four islands, each of which Bullet puts to sleep
// once all its bodies have been slow for 2 s; both worlds get there within
// about 20 s of simulated time (60 s are given). A pile settles in its own
// chaotic way on each broadphase, so 1 % of the bodies may still be moving
// in one world when the other is at rest: that is the tolerance.
#include <broadphase/bullet/broadphase.h>

#include <btBulletDynamicsCommon.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <random>
#include <vector>

namespace {

constexpr int kBodies = 400;
constexpr float kStep = 1.0f / 60.0f;

class PileWorld {
 public:
  explicit PileWorld(std::unique_ptr<btBroadphaseInterface> broadphase)
      : broadphase_(std::move(broadphase)) {
    world_ = std::make_unique<btDiscreteDynamicsWorld>(&dispatcher_, broadphase_.get(), &solver_,
                                                       &configuration_);
    world_->setGravity(btVector3(0, -10, 0));
    shapes_.push_back(std::make_unique<btBoxShape>(btVector3(25, 1, 25)));
    for (float s : {0.3f, 0.4f, 0.5f}) {
      shapes_.push_back(std::make_unique<btBoxShape>(btVector3(s, s, s)));
      shapes_.push_back(std::make_unique<btSphereShape>(s));
    }
    add(0, btVector3(0, -1, 0), 0);  // ground: top at y = 0
    // Walls make four bins of 8 x 8, one pile (and so one simulation
    // island) each, quadrants of a 16 x 16 square.
    shapes_.push_back(std::make_unique<btBoxShape>(btVector3(8.5f, 2, 0.25f)));
    shapes_.push_back(std::make_unique<btBoxShape>(btVector3(0.25f, 2, 8.5f)));
    for (float c : {-8.0f, 0.0f, 8.0f}) {
      add(7, btVector3(0, 2, c), 0);
      add(8, btVector3(c, 2, 0), 0);
    }
    statics_ = bodies_.size();
    std::mt19937 rng(99);
    for (int i = 0; i < kBodies; ++i) drop(rng);
  }

  ~PileWorld() {
    for (auto& b : bodies_)
      if (b) world_->removeRigidBody(b.get());
  }

  // Bodies go round the four bins, each bin a lattice of 4 x 4 columns 1.6
  // apart, one body per cell, jittered.
  void drop(std::mt19937& rng) {
    const int i = int(bodies_.size());
    const int bin = i % 4, cell = i / 4;
    std::uniform_real_distribution<float> jitter(-0.15f, 0.15f);
    const float x = (bin % 2 ? 1.0f : -7.0f) + 1.2f + float(cell % 4) * 1.6f + jitter(rng);
    const float z = (bin / 2 ? 1.0f : -7.0f) + 1.2f + float((cell / 4) % 4) * 1.6f + jitter(rng);
    const float y = 1.5f + float(cell / 16) * 1.4f + jitter(rng);
    add(1 + size_t(rng() % 6), btVector3(x, y, z), 1.0f);
  }

  void add(size_t shape, const btVector3& at, float mass) {
    btCollisionShape* s = shapes_[shape].get();
    btVector3 inertia(0, 0, 0);
    if (mass > 0) s->calculateLocalInertia(mass, inertia);
    btTransform t;
    t.setIdentity();
    t.setOrigin(at);
    btRigidBody::btRigidBodyConstructionInfo info(mass, nullptr, s, inertia);
    info.m_startWorldTransform = t;
    info.m_friction = 0.7f;
    info.m_rollingFriction = 0.1f;  // spheres stop rolling
    info.m_spinningFriction = 0.1f;
    info.m_linearDamping = 0.05f;
    info.m_angularDamping = 0.1f;
    bodies_.push_back(std::make_unique<btRigidBody>(info));
    world_->addRigidBody(bodies_.back().get());
  }

  void remove(size_t i) {
    world_->removeRigidBody(bodies_[i].get());
    bodies_[i].reset();
  }

  void step() { world_->stepSimulation(kStep, 1, kStep); }

  // The body index a ray meets first, -1 for none.
  int closestHit(const btVector3& from, const btVector3& to) const {
    btCollisionWorld::ClosestRayResultCallback hit(from, to);
    world_->rayTest(from, to, hit);
    if (!hit.hasHit()) return -1;
    for (size_t i = 0; i < bodies_.size(); ++i)
      if (bodies_[i].get() == hit.m_collisionObject) return int(i);
    return -2;
  }

  int hitCount(const btVector3& from, const btVector3& to) const {
    btCollisionWorld::AllHitsRayResultCallback hits(from, to);
    world_->rayTest(from, to, hits);
    return hits.m_collisionObjects.size();
  }

  int atRest() const {
    int n = 0;
    for (size_t i = statics_; i < bodies_.size(); ++i) {
      const btRigidBody* b = bodies_[i].get();
      if (b &&
          (b->getActivationState() == ISLAND_SLEEPING ||
           (b->getLinearVelocity().length() < 0.05f && b->getAngularVelocity().length() < 0.05f)))
        ++n;
    }
    return n;
  }

  int live() const {
    return int(std::count_if(bodies_.begin() + ptrdiff_t(statics_), bodies_.end(),
                             [](auto& b) { return b != nullptr; }));
  }

  // The lowest point of any body, from its box (a resting body's box reaches
  // a little below its shape: the collision margin).
  float lowest() const {
    float y = 1e30f;
    for (size_t i = statics_; i < bodies_.size(); ++i)
      if (bodies_[i]) {
        btVector3 lo, hi;
        bodies_[i]->getCollisionShape()->getAabb(bodies_[i]->getWorldTransform(), lo, hi);
        y = std::min(y, float(lo.y()));
      }
    return y;
  }

  btDiscreteDynamicsWorld& world() { return *world_; }
  btBroadphaseInterface& broadphase() { return *broadphase_; }

 private:
  btDefaultCollisionConfiguration configuration_;
  btCollisionDispatcher dispatcher_{&configuration_};
  std::unique_ptr<btBroadphaseInterface> broadphase_;
  btSequentialImpulseConstraintSolver solver_;
  std::unique_ptr<btDiscreteDynamicsWorld> world_;
  std::vector<std::unique_ptr<btCollisionShape>> shapes_;
  std::vector<std::unique_ptr<btRigidBody>> bodies_;
  size_t statics_ = 0;  ///< the ground and the walls come first
};

TEST(BulletWorld, PileComesToRestLikeOnDbvt) {
  bp::bullet::Config config;
  config.broadphase.threads = 2;
  auto oursOwned = std::make_unique<bp::bullet::Broadphase>(nullptr, config);
  bp::bullet::Broadphase* ours = oursOwned.get();
  PileWorld a(std::move(oursOwned));
  PileWorld b(std::make_unique<btDbvtBroadphase>());

  // Identical worlds: every ray answers the same (ours applies the 400
  // pending proxies first: more than a query tests one by one).
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-7, 7);
  int hits = 0;
  for (int r = 0; r < 100; ++r) {
    const btVector3 from(u(rng), 20, u(rng)), to(u(rng), -2, u(rng));
    const int ha = a.closestHit(from, to);
    ASSERT_EQ(ha, b.closestHit(from, to)) << "ray " << r;
    ASSERT_EQ(a.hitCount(from, to), b.hitCount(from, to)) << "ray " << r;
    hits += ha >= 5;
  }
  EXPECT_GT(hits, 50);
  EXPECT_EQ(ours->stats().queryFlushes, 1u);

  std::mt19937 churnA(8), churnB(8);
  int steps = 0;
  for (; steps < 3600; ++steps) {
    a.step();
    b.step();
    if (steps == 90) {  // mid-fall: some leave, some more are dropped
      for (size_t i = 15; i < 400; i += 40) {
        a.remove(i);
        b.remove(i);
      }
    }
    if (steps == 150)
      for (int k = 0; k < 16; ++k) {
        a.drop(churnA);
        b.drop(churnB);
      }
    if (steps > 300 && steps % 60 == 0 && a.atRest() == a.live() && b.atRest() == b.live()) break;
  }
  const int n = a.live();
  ASSERT_EQ(n, b.live());
  const int restA = a.atRest(), restB = b.atRest();
  std::printf("after %d steps: at rest %d (ours) and %d (dbvt) of %d; lowest %.3f and %.3f\n",
              steps, restA, restB, n, a.lowest(), b.lowest());
  EXPECT_GE(restA, n - n / 100);
  EXPECT_LE(std::abs(restA - restB), n / 100);
  // Resting on the ground's top (y = 0): the lowest box reaches at most the
  // collision margin and the contact slop below it.
  EXPECT_GT(a.lowest(), -0.1f);
  EXPECT_GT(b.lowest(), -0.1f);

  // The world's ground and walls stay static in our BroadPhase: their boxes
  // changed once (the first step adds the contact threshold) and never again.
  EXPECT_EQ(ours->stats().staticProxies, 7u);
  // Ours holds exactly the pairs whose boxes overlap.
  btBroadphasePairArray& pairs = ours->getOverlappingPairCache()->getOverlappingPairArray();
  int overlapping = 0;
  for (int i = 0; i < pairs.size(); ++i) {
    const btBroadphaseProxy* p = pairs[i].m_pProxy0;
    const btBroadphaseProxy* q = pairs[i].m_pProxy1;
    overlapping += p->m_aabbMin.x() <= q->m_aabbMax.x() && q->m_aabbMin.x() <= p->m_aabbMax.x() &&
                   p->m_aabbMin.y() <= q->m_aabbMax.y() && q->m_aabbMin.y() <= p->m_aabbMax.y() &&
                   p->m_aabbMin.z() <= q->m_aabbMax.z() && q->m_aabbMin.z() <= p->m_aabbMax.z();
  }
  EXPECT_EQ(overlapping, pairs.size());
  EXPECT_GT(pairs.size(), n);
}

}  // namespace
