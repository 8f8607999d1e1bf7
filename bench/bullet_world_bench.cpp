// bp_bullet_bench: whole Bullet 3 worlds, one per broadphase, on the same
// scenes; what a Bullet user would see by swapping the broadphase.
//
//   bp_bullet_bench --scene pile,city --n 10000,100000 --steps 60,15 --check
//
// Broadphases: ours-1 and ours-2 (bp::bullet::Broadphase on 1 or 2 threads
// of its own arena), dbvt (btDbvtBroadphase, Bullet's default), axis-sweep
// (btAxisSweep3 over the scene's bounds; bt32BitAxisSweep3 past 16-bit
// handles). Scenes:
//   pile  n boxes and spheres dropped in a compact lattice onto a ground box
//         (a pile forming: every step full of new and lasting contacts);
//   city  n static boxes (buildings on a street grid) and --dynamic bodies
//         flying along the streets without gravity, bouncing off buildings
//         and each other; the world updates only active bodies' boxes
//         (setForceUpdateAllAabbs(false), what a world of many statics sets).
// Each world is built, stepped --warmup times untimed (a pile forms; the
// Dbvt's incremental optimisation of its static tree, 1 % of the leaves a
// step, gets to work), then --steps times timed, at 60 Hz with one substep,
// and destroyed before the next. setup_s: the build and the warm-up. Reported per step: the whole
// stepSimulation time and the broadphase's part of it, the time inside setAabb and
// calculateOverlappingPairs (each call timed by a wrapper, the same for every
// broadphase: the dbvt does its work in setAabb, ours in
// calculateOverlappingPairs). Ratios are to the first broadphase listed.
//
// --check: the same boxes into every broadphase, step by step. A world on
// ours drives the scene through the warm-up, then --check-steps more; after
// each of those, every body's box is set in one standalone instance of each
// broadphase, and each instance's pair cache, cut to the pairs whose boxes
// overlap (dbvt and axis-sweep cache fat or quantized boxes), must hold the
// same number of pairs; ours must hold no other pair.
#include <broadphase/bullet/broadphase.h>

#include "progress.h"
#include "table.h"

#include <btBulletDynamicsCommon.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using bpbench::Column;
using bpbench::Format;
using bpbench::Progress;
using bpbench::Row;

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

const char* const kBackends[] = {"ours-1", "ours-2", "dbvt", "axis-sweep"};

struct Options {
  std::vector<std::string> scenes{"pile", "city"};
  std::vector<uint32_t> ns{10000};
  std::vector<uint32_t> steps{60};  // one per n, or one for all
  std::vector<uint32_t> warmup{0};  // untimed steps first: one per n, or one for all
  uint32_t dynamic = 4000;
  std::vector<std::string> backends{kBackends, kBackends + 4};
  uint32_t checkSteps = 10;
  bool check = false;
  Format format = Format::table;
  bool quiet = false;
  uint32_t seed = 1;
};

std::vector<std::string> splitList(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t comma = s.find(',', start);
    out.push_back(s.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

uint32_t parseCount(const std::string& opt, const std::string& s) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || !(v >= 1) || v > 1e8 || v != std::floor(v))
    throw UsageError(opt + ": '" + s + "' is not a whole number from 1 to 1e8");
  return uint32_t(v);
}

std::string usage() {
  return "usage: bp_bullet_bench [--scene pile,city] [--n 10000,100000] [--steps 60[,15]]\n"
         "                       [--warmup 0[,0]]\n"
         "                       [--dynamic 4000] [--backend ours-1,ours-2,dbvt,axis-sweep]\n"
         "                       [--check] [--check-steps 10] [--seed 1]\n"
         "                       [--format table|csv|json] [--quiet]\n";
}

Options parseArgs(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw UsageError(a + " needs a value");
      return argv[++i];
    };
    if (a == "--scene") {
      o.scenes = splitList(value());
      for (const std::string& s : o.scenes)
        if (s != "pile" && s != "city")
          throw UsageError("--scene: '" + s + "' is not one of pile, city");
    } else if (a == "--n") {
      o.ns.clear();
      for (const std::string& s : splitList(value())) o.ns.push_back(parseCount(a, s));
    } else if (a == "--steps") {
      o.steps.clear();
      for (const std::string& s : splitList(value())) o.steps.push_back(parseCount(a, s));
    } else if (a == "--warmup") {
      o.warmup.clear();
      for (const std::string& s : splitList(value()))
        o.warmup.push_back(s == "0" ? 0 : parseCount(a, s));
    } else if (a == "--dynamic") {
      o.dynamic = parseCount(a, value());
    } else if (a == "--backend") {
      o.backends = splitList(value());
      for (const std::string& b : o.backends)
        if (std::find(std::begin(kBackends), std::end(kBackends), b) == std::end(kBackends))
          throw UsageError("--backend: '" + b + "' is not one of ours-1, ours-2, dbvt, axis-sweep");
    } else if (a == "--check") {
      o.check = true;
    } else if (a == "--check-steps") {
      o.checkSteps = parseCount(a, value());
    } else if (a == "--seed") {
      o.seed = parseCount(a, value());
    } else if (a == "--format") {
      const std::string f = value();
      if (f == "table")
        o.format = Format::table;
      else if (f == "csv")
        o.format = Format::csv;
      else if (f == "json")
        o.format = Format::json;
      else
        throw UsageError("--format: '" + f + "' is not one of table, csv, json");
    } else if (a == "--quiet") {
      o.quiet = true;
    } else if (a == "--help" || a == "-h") {
      std::printf("%s", usage().c_str());
      std::exit(0);
    } else {
      throw UsageError("unknown option '" + a + "'");
    }
  }
  if (o.steps.size() != 1 && o.steps.size() != o.ns.size())
    throw UsageError("--steps: give one count, or one per --n value");
  if (o.warmup.size() != 1 && o.warmup.size() != o.ns.size())
    throw UsageError("--warmup: give one count, or one per --n value");
  return o;
}

// Forwards every call to a broadphase and times setAabb and
// calculateOverlappingPairs.
class TimedBroadphase final : public btBroadphaseInterface {
 public:
  explicit TimedBroadphase(std::unique_ptr<btBroadphaseInterface> inner)
      : inner_(std::move(inner)) {}
  btBroadphaseProxy* createProxy(const btVector3& lo, const btVector3& hi, int type, void* user,
                                 int group, int mask, btDispatcher* d) override {
    return inner_->createProxy(lo, hi, type, user, group, mask, d);
  }
  void destroyProxy(btBroadphaseProxy* p, btDispatcher* d) override { inner_->destroyProxy(p, d); }
  void setAabb(btBroadphaseProxy* p, const btVector3& lo, const btVector3& hi,
               btDispatcher* d) override {
    const auto t0 = Clock::now();
    inner_->setAabb(p, lo, hi, d);
    spent_ += Clock::now() - t0;
  }
  void getAabb(btBroadphaseProxy* p, btVector3& lo, btVector3& hi) const override {
    inner_->getAabb(p, lo, hi);
  }
  void rayTest(const btVector3& from, const btVector3& to, btBroadphaseRayCallback& cb,
               const btVector3& lo, const btVector3& hi) override {
    inner_->rayTest(from, to, cb, lo, hi);
  }
  void aabbTest(const btVector3& lo, const btVector3& hi, btBroadphaseAabbCallback& cb) override {
    inner_->aabbTest(lo, hi, cb);
  }
  void calculateOverlappingPairs(btDispatcher* d) override {
    const auto t0 = Clock::now();
    inner_->calculateOverlappingPairs(d);
    spent_ += Clock::now() - t0;
  }
  btOverlappingPairCache* getOverlappingPairCache() override {
    return inner_->getOverlappingPairCache();
  }
  const btOverlappingPairCache* getOverlappingPairCache() const override {
    return inner_->getOverlappingPairCache();
  }
  void getBroadphaseAabb(btVector3& lo, btVector3& hi) const override {
    inner_->getBroadphaseAabb(lo, hi);
  }
  void resetPool(btDispatcher* d) override { inner_->resetPool(d); }
  void printStats() override { inner_->printStats(); }

  double takeSeconds() {
    const double s = std::chrono::duration<double>(spent_).count();
    spent_ = {};
    return s;
  }

 private:
  std::unique_ptr<btBroadphaseInterface> inner_;
  Clock::duration spent_{};
};

// One body of a scene, as every world builds it.
struct BodySpec {
  int shape;  // index into Scene::shapes
  btVector3 at;
  btVector3 velocity{0, 0, 0};
  bool isStatic;
};

struct Scene {
  std::string name;
  std::vector<std::unique_ptr<btCollisionShape>> shapes;
  std::vector<BodySpec> bodies;
  btVector3 lo, hi;  // bounds for the axis sweep
  bool gravity = true;
  bool forceUpdateAll = true;
  uint32_t dynamicCount = 0;
};

Scene makePile(uint32_t n, uint32_t seed) {
  Scene s;
  s.name = "pile";
  const float spacing = 1.1f;
  const int side = int(std::ceil(std::sqrt(double(n) / 10.0)));
  const int layers = int((n + uint32_t(side * side) - 1) / uint32_t(side * side));
  const float half = 0.5f * spacing * float(side);
  s.shapes.push_back(std::make_unique<btBoxShape>(btVector3(half + 20, 1, half + 20)));
  for (float r : {0.3f, 0.4f, 0.5f}) {
    s.shapes.push_back(std::make_unique<btBoxShape>(btVector3(r, r, r)));
    s.shapes.push_back(std::make_unique<btSphereShape>(r));
  }
  s.bodies.push_back({0, btVector3(0, -1, 0), {0, 0, 0}, true});
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> jitter(-0.04f, 0.04f);
  for (uint32_t i = 0; i < n; ++i) {
    const int column = int(i) % (side * side), layer = int(i) / (side * side);
    const btVector3 at(-half + spacing * (float(column % side) + 0.5f) + jitter(rng),
                       0.55f + spacing * float(layer) + jitter(rng),
                       -half + spacing * (float(column / side) + 0.5f) + jitter(rng));
    s.bodies.push_back({1 + int(rng() % 6), at, {0, 0, 0}, false});
  }
  s.lo = btVector3(-half - 25, -5, -half - 25);
  s.hi = btVector3(half + 25, spacing * float(layers) + 10, half + 25);
  s.dynamicCount = n;
  return s;
}

Scene makeCity(uint32_t n, uint32_t dynamic, uint32_t seed) {
  Scene s;
  s.name = "city";
  s.gravity = false;
  s.forceUpdateAll = false;
  const float block = 8, street = 4, pitch = block + street;
  const int side = int(std::ceil(std::sqrt(double(n))));
  const float size = pitch * float(side);
  std::mt19937 rng(seed);
  // Shapes: the ground, four boundary walls and a ceiling, buildings of
  // eight heights, drones (boxes and spheres of three sizes).
  s.shapes.push_back(std::make_unique<btBoxShape>(btVector3(size / 2 + 10, 1, size / 2 + 10)));
  s.shapes.push_back(std::make_unique<btBoxShape>(btVector3(size / 2 + 10, 30, 1)));
  s.shapes.push_back(std::make_unique<btBoxShape>(btVector3(1, 30, size / 2 + 10)));
  const int firstBuilding = int(s.shapes.size());
  for (int h = 0; h < 8; ++h)
    s.shapes.push_back(
        std::make_unique<btBoxShape>(btVector3(block / 2, 3.0f + 2.5f * float(h), block / 2)));
  const int firstDrone = int(s.shapes.size());
  for (float r : {0.5f, 0.75f, 1.0f}) {
    s.shapes.push_back(std::make_unique<btBoxShape>(btVector3(r, r, r)));
    s.shapes.push_back(std::make_unique<btSphereShape>(r));
  }
  const float mid = size / 2 - street / 2;
  s.bodies.push_back({0, btVector3(mid, -1, mid), {}, true});
  s.bodies.push_back({1, btVector3(mid, 29, -street / 2 - 11), {}, true});
  s.bodies.push_back({1, btVector3(mid, 29, size + 11 - street / 2), {}, true});
  s.bodies.push_back({2, btVector3(-street / 2 - 11, 29, mid), {}, true});
  s.bodies.push_back({2, btVector3(size + 11 - street / 2, 29, mid), {}, true});
  s.bodies.push_back({0, btVector3(mid, 59, mid), {}, true});  // ceiling
  for (uint32_t i = 0; i < n; ++i) {
    const int h = int(rng() % 8);
    const float halfHeight = 3.0f + 2.5f * float(h);
    s.bodies.push_back({firstBuilding + h,
                        btVector3(pitch * float(i % uint32_t(side)), halfHeight,
                                  pitch * float(i / uint32_t(side))),
                        {},
                        true});
  }
  // Drones: on a street line (x or z halfway between two rows of blocks),
  // at 2-50 m, flying along it at 8-15 m/s with a small sideways drift.
  std::uniform_real_distribution<float> along(0, size - pitch), height(2, 50), speed(8, 15),
      drift(-1, 1);
  for (uint32_t i = 0; i < dynamic; ++i) {
    const float line = pitch * float(rng() % uint32_t(side)) + block / 2 + street / 2;
    const float pos = along(rng), v = speed(rng) * (rng() % 2 ? 1.0f : -1.0f);
    BodySpec b{firstDrone + int(rng() % 6), {}, {}, false};
    if (i % 2) {
      b.at = btVector3(line, height(rng), pos);
      b.velocity = btVector3(drift(rng), 0, v);
    } else {
      b.at = btVector3(pos, height(rng), line);
      b.velocity = btVector3(v, 0, drift(rng));
    }
    s.bodies.push_back(b);
  }
  s.lo = btVector3(-street / 2 - 15, -5, -street / 2 - 15);
  s.hi = btVector3(size + 15, 65, size + 15);
  s.dynamicCount = dynamic;
  return s;
}

std::unique_ptr<btBroadphaseInterface> makeBroadphase(const std::string& name, const Scene& scene,
                                                      std::string& label) {
  if (name == "ours-1" || name == "ours-2") {
    bp::bullet::Config config;
    config.broadphase.threads = name == "ours-1" ? 1 : 2;
    label = "bp::bullet::Broadphase";
    return std::make_unique<bp::bullet::Broadphase>(nullptr, config);
  }
  if (name == "dbvt") {
    label = "btDbvtBroadphase";
    return std::make_unique<btDbvtBroadphase>();
  }
  const size_t handles = scene.bodies.size() + 16;
  if (handles <= 16000) {
    label = "btAxisSweep3";
    return std::make_unique<btAxisSweep3>(scene.lo, scene.hi, (unsigned short)handles);
  }
  label = "bt32BitAxisSweep3";
  return std::make_unique<bt32BitAxisSweep3>(scene.lo, scene.hi, unsigned(handles));
}

void emptyPairCache(btBroadphaseInterface& bp, btDispatcher* dispatcher) {
  btOverlappingPairCache* cache = bp.getOverlappingPairCache();
  btBroadphasePairArray& pairs = cache->getOverlappingPairArray();
  while (pairs.size() > 0) {
    btBroadphasePair& last = pairs[pairs.size() - 1];
    cache->removeOverlappingPair(last.m_pProxy0, last.m_pProxy1, dispatcher);
  }
}

// A world on one broadphase, holding the scene's bodies.
class World {
 public:
  World(const Scene& scene, std::unique_ptr<btBroadphaseInterface> broadphase)
      : broadphase_(std::move(broadphase)) {
    world_ = std::make_unique<btDiscreteDynamicsWorld>(&dispatcher_, broadphase_.get(), &solver_,
                                                       &configuration_);
    world_->setGravity(scene.gravity ? btVector3(0, -10, 0) : btVector3(0, 0, 0));
    world_->setForceUpdateAllAabbs(scene.forceUpdateAll);
    bodies_.reserve(scene.bodies.size());
    for (const BodySpec& b : scene.bodies) {
      btCollisionShape* shape = scene.shapes[size_t(b.shape)].get();
      const float mass = b.isStatic ? 0.0f : 1.0f;
      btVector3 inertia(0, 0, 0);
      if (!b.isStatic) shape->calculateLocalInertia(mass, inertia);
      btRigidBody::btRigidBodyConstructionInfo info(mass, nullptr, shape, inertia);
      info.m_startWorldTransform.setIdentity();
      info.m_startWorldTransform.setOrigin(b.at);
      info.m_friction = 0.6f;
      info.m_rollingFriction = 0.05f;
      info.m_restitution = scene.gravity ? 0.0f : 0.8f;
      bodies_.push_back(std::make_unique<btRigidBody>(info));
      btRigidBody* body = bodies_.back().get();
      if (!b.isStatic) {
        body->setLinearVelocity(b.velocity);
        if (!scene.gravity) body->setActivationState(DISABLE_DEACTIVATION);
      }
      world_->addRigidBody(body);
    }
  }
  // Teardown, not measured, made linear: Bullet removes a body's pairs by
  // a pass over the whole pair cache (cleanProxyFromPairs, then the
  // broadphase's destroyProxy), and btAxisSweep3 removes a handle by
  // shifting its edges to the end: quadratic at 10^5 bodies. So the cache is
  // emptied pair by pair (the last one each time), the bodies leave the
  // world with no proxy, and the broadphase goes with all its proxies
  // (btDbvtBroadphase does not free its proxies then: they leak, in a
  // benchmark process).
  ~World() {
    emptyPairCache(*broadphase_, &dispatcher_);
    for (auto& b : bodies_) {
      b->setBroadphaseHandle(nullptr);
      world_->removeRigidBody(b.get());
    }
  }
  void step() { world_->stepSimulation(1.0f / 60.0f, 1, 1.0f / 60.0f); }
  btDiscreteDynamicsWorld& world() { return *world_; }
  btBroadphaseInterface& broadphase() { return *broadphase_; }
  const std::vector<std::unique_ptr<btRigidBody>>& bodies() const { return bodies_; }

 private:
  btDefaultCollisionConfiguration configuration_;
  btCollisionDispatcher dispatcher_{&configuration_};
  std::unique_ptr<btBroadphaseInterface> broadphase_;
  btSequentialImpulseConstraintSolver solver_;
  std::unique_ptr<btDiscreteDynamicsWorld> world_;
  std::vector<std::unique_ptr<btRigidBody>> bodies_;
};

bool overlaps(const btBroadphaseProxy* a, const btBroadphaseProxy* b) {
  for (int k = 0; k < 3; ++k)
    if (a->m_aabbMax[k] < b->m_aabbMin[k] || b->m_aabbMax[k] < a->m_aabbMin[k]) return false;
  return true;
}

// Pairs in a broadphase's cache whose boxes (as given) overlap.
int exactPairs(btBroadphaseInterface& bp) {
  btBroadphasePairArray& pairs = bp.getOverlappingPairCache()->getOverlappingPairArray();
  int n = 0;
  for (int i = 0; i < pairs.size(); ++i) n += overlaps(pairs[i].m_pProxy0, pairs[i].m_pProxy1);
  return n;
}

struct Measured {
  std::string label;
  uint32_t steps = 0;
  double setupSeconds = 0, stepMs = 0, bpMs = 0;
  int cachePairs = 0;
};

Measured runWorld(const Scene& scene, const std::string& backend, uint32_t warmup, uint32_t steps,
                  bool quiet) {
  Measured m;
  auto timed = std::make_unique<TimedBroadphase>(makeBroadphase(backend, scene, m.label));
  TimedBroadphase* bp = timed.get();
  Progress progress(scene.name + " " + std::to_string(scene.bodies.size()) + " " + backend, quiet);
  const auto t0 = Clock::now();
  World world(scene, std::move(timed));
  for (uint32_t s = 0; s < warmup; ++s) {
    world.step();
    progress.update(0.0, "warm-up step " + std::to_string(s + 1) + "/" + std::to_string(warmup));
  }
  m.setupSeconds = std::chrono::duration<double>(Clock::now() - t0).count();
  bp->takeSeconds();
  double stepSeconds = 0, bpSeconds = 0;
  for (uint32_t s = 0; s < steps; ++s) {
    const auto s0 = Clock::now();
    world.step();
    stepSeconds += std::chrono::duration<double>(Clock::now() - s0).count();
    bpSeconds += bp->takeSeconds();
    progress.update(double(s + 1) / steps,
                    "step " + std::to_string(s + 1) + "/" + std::to_string(steps));
  }
  progress.finish();
  m.steps = steps;
  m.stepMs = 1e3 * stepSeconds / steps;
  m.bpMs = 1e3 * bpSeconds / steps;
  m.cachePairs = bp->getOverlappingPairCache()->getNumOverlappingPairs();
  return m;
}

// --check: see the file comment. Returns the failures.
std::vector<std::string> checkPairs(const Scene& scene, const Options& o, uint32_t warmup,
                                    std::string& summary) {
  std::vector<std::string> failures;
  bp::bullet::Config config;
  config.broadphase.threads = 2;
  World driver(scene, std::make_unique<bp::bullet::Broadphase>(nullptr, config));
  // The same warm-up as the timed runs: the comparison sees a formed pile.
  for (uint32_t s = 0; s < warmup; ++s) driver.step();
  struct Mirror {
    std::string name;
    std::unique_ptr<btBroadphaseInterface> bp;
    std::vector<btBroadphaseProxy*> proxies;
  };
  std::vector<Mirror> mirrors;
  for (const std::string& name : o.backends) {
    Mirror m{name, nullptr, {}};
    std::string label;
    m.bp = makeBroadphase(name, scene, label);
    for (const auto& body : driver.bodies()) {
      const btBroadphaseProxy* h = body->getBroadphaseHandle();
      m.proxies.push_back(m.bp->createProxy(
          h->m_aabbMin, h->m_aabbMax, body->getCollisionShape()->getShapeType(), body.get(),
          h->m_collisionFilterGroup, h->m_collisionFilterMask, nullptr));
    }
    mirrors.push_back(std::move(m));
  }
  Progress progress("check " + scene.name + " " + std::to_string(scene.bodies.size()), o.quiet);
  int last = 0;
  for (uint32_t s = 0; s < o.checkSteps; ++s) {
    driver.step();
    std::vector<int> counts;
    for (Mirror& m : mirrors) {
      for (size_t i = 0; i < m.proxies.size(); ++i) {
        const btBroadphaseProxy* h = driver.bodies()[i]->getBroadphaseHandle();
        m.bp->setAabb(m.proxies[i], h->m_aabbMin, h->m_aabbMax, nullptr);
      }
      m.bp->calculateOverlappingPairs(nullptr);
      counts.push_back(exactPairs(*m.bp));
      const bool ours = m.name.rfind("ours", 0) == 0;
      const int cached = m.bp->getOverlappingPairCache()->getNumOverlappingPairs();
      if (ours && cached != counts.back())
        failures.push_back(scene.name + " step " + std::to_string(warmup + s) + ": " + m.name +
                           " caches " + std::to_string(cached) + " pairs, " +
                           std::to_string(counts.back()) + " of them overlapping");
    }
    for (size_t k = 1; k < counts.size(); ++k)
      if (counts[k] != counts[0])
        failures.push_back(scene.name + " step " + std::to_string(warmup + s) + ": " +
                           mirrors[k].name + " has " + std::to_string(counts[k]) +
                           " overlapping pairs, " + mirrors[0].name + " " +
                           std::to_string(counts[0]));
    last = counts.empty() ? 0 : counts[0];
    progress.update(double(s + 1) / o.checkSteps, "step " + std::to_string(s + 1));
  }
  progress.finish();
  // The mirrors go with their proxies, their caches emptied first (see
  // ~World).
  for (Mirror& m : mirrors) emptyPairCache(*m.bp, nullptr);
  summary = scene.name + " n=" + std::to_string(scene.bodies.size()) + ": steps " +
            std::to_string(warmup + 1) + "-" + std::to_string(warmup + o.checkSteps) + ", " +
            std::to_string(mirrors.size()) + " broadphases agree (" + std::to_string(last) +
            " overlapping pairs at the last)";
  return failures;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  try {
    o = parseArgs(argc, argv);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "bp_bullet_bench: %s\n%s", e.what(), usage().c_str());
    return 2;
  }
  std::vector<Row> rows;
  std::vector<std::string> failures, notes;
  for (const std::string& sceneName : o.scenes) {
    for (size_t ni = 0; ni < o.ns.size(); ++ni) {
      const uint32_t n = o.ns[ni];
      const uint32_t steps = o.steps.size() == 1 ? o.steps[0] : o.steps[ni];
      const uint32_t warmup = o.warmup.size() == 1 ? o.warmup[0] : o.warmup[ni];
      const Scene scene =
          sceneName == "pile" ? makePile(n, o.seed) : makeCity(n, o.dynamic, o.seed);
      if (o.check) {
        std::string summary;
        const std::vector<std::string> f = checkPairs(scene, o, warmup, summary);
        failures.insert(failures.end(), f.begin(), f.end());
        if (f.empty()) notes.push_back("check: " + summary);
      }
      double firstStep = 0, firstBp = 0;
      for (size_t bi = 0; bi < o.backends.size(); ++bi) {
        const std::string& backend = o.backends[bi];
        const Measured m = runWorld(scene, backend, warmup, steps, o.quiet);
        if (bi == 0) firstStep = m.stepMs, firstBp = m.bpMs;
        Row r;
        r.add("scene", scene.name)
            .add("n", uint64_t(n))
            .add("bodies", uint64_t(scene.bodies.size()))
            .add("dynamic", uint64_t(scene.dynamicCount))
            .add("backend", backend)
            .add("broadphase", m.label)
            .add("warmup", uint64_t(warmup))
            .add("steps", uint64_t(m.steps))
            .add("setup_s", m.setupSeconds, 2)
            .add("step_ms", m.stepMs, 2)
            .add("bp_ms", m.bpMs, 2)
            .add("bp_share", 100.0 * m.bpMs / m.stepMs, 1)
            .add("step_ratio", firstStep / m.stepMs, 2)
            .add("bp_ratio", firstBp / m.bpMs, 2)
            .add("cache_pairs", uint64_t(m.cachePairs));
        rows.push_back(r);
      }
    }
  }
  const std::vector<Column> columns = {{"scene", "scene"},     {"n", "n"},
                                       {"dynamic", "dynamic"}, {"backend", "backend"},
                                       {"warmup", "warm-up"},  {"steps", "steps"},
                                       {"step_ms", "step ms"}, {"bp_ms", "bp ms"},
                                       {"bp_share", "bp %"},   {"step_ratio", "step x"},
                                       {"bp_ratio", "bp x"},   {"cache_pairs", "pairs"}};
  notes.push_back(
      "ms: per step (mean). bp: time inside setAabb + calculateOverlappingPairs. "
      "x: the first backend's time over this one's (same scene and n).");
  notes.push_back(
      "pairs: the pair cache's size after the last step (dbvt and axis-sweep cache "
      "fat or quantized boxes; ours exact boxes).");
  bpbench::printRows(rows, o.format, columns, notes);
  return bpbench::printFailures(failures);
}
