// A miniature engine on top of broadphase: boxes and spheres fall onto a
// static floor of tiles. Each frame the bodies move, the broadphase reports
// candidate pairs, and a trivial narrowphase tests the real shapes. At the end
// a mouse-pick ray finds the body under the cursor, testing spheres exactly
// through the ray callback.
#include <broadphase/broad_phase.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace {

struct Body {
  bool sphere;
  bp::Vec3 position;  // centre
  bp::Vec3 velocity;
  float radius;  // sphere radius, or half the box edge
  bool resting = false;
  bp::ProxyId proxy;
};

bp::Aabb boundsOf(const Body& b) {
  const bp::Vec3 r(b.radius, b.radius, b.radius);
  return {b.position - r, b.position + r};
}

// Exact shape tests: sphere/sphere, sphere/box, box/box (the box AABB is exact).
bool touches(const Body& a, const bp::Aabb& aBox, const Body* b, const bp::Aabb& bBox) {
  if (!a.sphere && (b == nullptr || !b->sphere)) return bp::overlaps(aBox, bBox);
  if (a.sphere && b != nullptr && b->sphere) {
    const float d = a.radius + b->radius;
    return (a.position - b->position).squaredNorm() <= d * d;
  }
  const Body& s = a.sphere ? a : *b;
  const bp::Aabb& box = a.sphere ? bBox : aBox;
  return bp::distanceSquared(box, s.position) <= s.radius * s.radius;
}

}  // namespace

int main(int argc, char** argv) {
  int frames = 240;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--frames") == 0) frames = std::atoi(argv[i + 1]);

  bp::BroadPhase broadphase({.structure = bp::Structure::automatic, .threads = 0});

  // The floor: 20 x 20 static tiles at y in [-1, 0]. User data: ~0 marks "floor".
  const uint64_t kFloor = ~uint64_t(0);
  for (int x = 0; x < 20; ++x)
    for (int z = 0; z < 20; ++z)
      broadphase.add(
          {bp::Aabb{bp::Vec3(x * 5.0f, -1, z * 5.0f), bp::Vec3(x * 5.0f + 5, 0, z * 5.0f + 5)},
           bp::MotionType::staticBody,
           {},
           kFloor});

  std::mt19937 rng(42);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<Body> bodies(2000);
  for (size_t i = 0; i < bodies.size(); ++i) {
    Body& b = bodies[i];
    b.sphere = i % 2 == 0;
    b.radius = 0.3f + 0.4f * u(rng);
    b.position = bp::Vec3(2 + 96 * u(rng), 2 + 30 * u(rng), 2 + 96 * u(rng));
    b.velocity = bp::Vec3(0, 0, 0);
    b.proxy = broadphase.add({boundsOf(b), bp::MotionType::dynamic, {}, i});
  }

  const float dt = 1.0f / 60.0f;
  size_t candidates = 0, contacts = 0, begun = 0, ended = 0;
  std::vector<bp::ProxyId> ids;
  std::vector<bp::Aabb> boxes;
  for (int frame = 0; frame < frames; ++frame) {
    // This integration runs on this thread alone, so the broadphase's workers
    // idle through it and may fall asleep: wake them now, while it runs, and
    // not at update() (docs/threading.md, "Sleeping workers").
    broadphase.wakeWorkers();
    ids.clear();
    boxes.clear();
    for (Body& b : bodies) {
      if (b.resting) continue;
      b.velocity.y() -= 9.81f * dt;
      b.position += b.velocity * dt;
      ids.push_back(b.proxy);
      boxes.push_back(boundsOf(b));
    }
    broadphase.move(ids, boxes);
    const bp::FramePairs& f = broadphase.update();
    candidates += f.pairs.size();
    begun += f.begun.size();
    ended += f.ended.size();
    // The narrowphase: the floor stops a body; body pairs are only counted.
    for (const bp::ProxyPair& p : f.pairs) {
      const bool aFloor = p.userDataA == kFloor, bFloor = p.userDataB == kFloor;
      Body& a = bodies[aFloor ? p.userDataB : p.userDataA];
      const bp::Aabb aBox = boundsOf(a);
      if (aFloor || bFloor) {
        const bp::Aabb floorBox = broadphase.desc(broadphase.handleOf(aFloor ? p.a : p.b)).box;
        if (!a.resting && touches(a, aBox, nullptr, floorBox)) {
          // Comes to rest on the floor: snapped onto it, its proxy moved to
          // the snapped box, and put to sleep as a static body (it stops
          // pairing with the floor and with other sleepers; falling bodies
          // still find it).
          a.resting = true;
          a.position.y() = a.radius;
          a.velocity = bp::Vec3(0, 0, 0);
          broadphase.move(a.proxy, boundsOf(a));
          broadphase.setMotionType(a.proxy, bp::MotionType::staticBody);
          ++contacts;
        }
      } else {
        const Body& b = bodies[p.userDataB];
        if (touches(a, aBox, &b, boundsOf(b))) ++contacts;
      }
    }
  }
  // Every proxy stands where its body is (a resting body's snapped box too).
  int resting = 0;
  for (const Body& b : bodies) {
    resting += b.resting;
    const bp::Aabb box = broadphase.desc(b.proxy).box;
    if (box.min != boundsOf(b).min || box.max != boundsOf(b).max) {
      std::printf("falling_bodies: a proxy is not where its body is\n");
      return 1;
    }
  }

  // Mouse pick: a ray from a camera above the scene through the cursor. The
  // broadphase proposes boxes; spheres are tested exactly in the callback,
  // which clips the ray to each real hit so farther candidates are pruned.
  const bp::Vec3 eye(50, 60, -20), target(bodies[0].position);
  const bp::Vec3 dir = (target - eye).normalized();
  uint32_t picked = bp::kNullIndex;
  float pickedT = 0;
  broadphase.castRay(eye, dir, 500.0f, [&](uint32_t proxy, float tEntry) -> float {
    const uint64_t user = broadphase.userData(proxy);
    float t = tEntry;
    if (user != kFloor && bodies[user].sphere) {
      const Body& s = bodies[user];
      const bp::Vec3 m = eye - s.position;
      const float bq = m.dot(dir), c = m.squaredNorm() - s.radius * s.radius;
      const float disc = bq * bq - c;
      if (disc < 0) return std::numeric_limits<float>::infinity();  // missed the sphere
      t = std::max(0.0f, -bq - std::sqrt(disc));
    }
    if (picked == bp::kNullIndex || t < pickedT) {
      picked = proxy;
      pickedT = t;
    }
    return t;
  });

  std::printf("falling_bodies: %zu bodies (half spheres), 400 floor tiles, %d frames, %d threads\n",
              bodies.size(), frames, broadphase.threadCount());
  std::printf("  candidate pairs over all frames: %zu (begun %zu, ended %zu)\n", candidates, begun,
              ended);
  std::printf("  exact contacts: %zu; bodies resting on the floor: %d\n", contacts, resting);
  if (picked == bp::kNullIndex) {
    std::printf("  mouse pick: nothing under the cursor\n");
    return 1;
  }
  const uint64_t user = broadphase.userData(picked);
  std::printf("  picked body: %s at distance %.3f\n",
              user == kFloor ? "floor tile" : (bodies[user].sphere ? "sphere" : "box"),
              double(pickedT));
  std::printf("  memory: %.1f KiB, %.0f bytes per proxy\n", broadphase.memoryBytes() / 1024.0,
              double(broadphase.memoryBytes()) / broadphase.proxyCount());
  return 0;
}
