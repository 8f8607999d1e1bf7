#include <broadphase/testkit/brute_force.h>

#include "is_live.h"

#include <algorithm>

namespace bp::brute {

// Under ThreadSanitizer and AddressSanitizer the pair loop runs
// uninstrumented: it reads test data on the calling thread only, within
// arrays of n entries, and instrumented, its n^2 / 2 box tests took most of
// the time of the largest tests of those CI stages (60-90 % of the samples
// of broad_phase_test, sweep_test and cross_structure_test under TSan, 90 %
// of broad_phase_test's PendingMovesMatchBruteForce under ASan). The library
// under test stays instrumented.
#if defined(__SANITIZE_THREAD__)
#define BP_ORACLE_UNINSTRUMENTED __attribute__((no_sanitize("thread")))
#elif defined(__SANITIZE_ADDRESS__)
#define BP_ORACLE_UNINSTRUMENTED __attribute__((no_sanitize("address")))
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define BP_ORACLE_UNINSTRUMENTED __attribute__((no_sanitize("thread")))
#elif __has_feature(address_sanitizer)
#define BP_ORACLE_UNINSTRUMENTED __attribute__((no_sanitize("address")))
#endif
#endif
#ifndef BP_ORACLE_UNINSTRUMENTED
#define BP_ORACLE_UNINSTRUMENTED
#endif

namespace {
using detail::isLive;

// A box as six plain floats (min x, y, z, max x, y, z), so that the loop
// below calls nothing: a function it called would be instrumented.
struct Bounds {
  float lo[3], hi[3];
};

// Writes to `overlapping` the index j > i of every box of `boxes[0, n)`
// that is a candidate and overlaps box i (closed intervals, as overlaps()
// in math/aabb.h), in order; returns how many.
BP_ORACLE_UNINSTRUMENTED uint32_t overlapsAfter(const Bounds* boxes, const uint8_t* candidate,
                                                uint32_t n, uint32_t i, uint32_t* overlapping) {
  uint32_t found = 0;
  const Bounds a = boxes[i];
  for (uint32_t j = i + 1; j < n; ++j) {
    if (!candidate[j]) continue;
    const Bounds& b = boxes[j];
    // & on ints, not &&: the six compares make one branch, not six.
    const int overlap = int(a.lo[0] <= b.hi[0]) & int(b.lo[0] <= a.hi[0]) &
                        int(a.lo[1] <= b.hi[1]) & int(b.lo[1] <= a.hi[1]) &
                        int(a.lo[2] <= b.hi[2]) & int(b.lo[2] <= a.hi[2]);
    if (overlap) overlapping[found++] = j;
  }
  return found;
}
}  // namespace

std::vector<Pair> findPairs(std::span<const Aabb> boxes, std::span<const uint8_t> isStatic,
                            std::span<const uint8_t> live) {
  const uint32_t n = static_cast<uint32_t>(boxes.size());
  std::vector<Bounds> bounds(n);
  std::vector<uint8_t> alive(n), dynamic(n);
  for (uint32_t i = 0; i < n; ++i) {
    for (int axis = 0; axis < 3; ++axis) {
      bounds[i].lo[axis] = boxes[i].min[axis];
      bounds[i].hi[axis] = boxes[i].max[axis];
    }
    alive[i] = isLive(live, i);
    dynamic[i] = alive[i] && (isStatic.empty() || !isStatic[i]);
  }
  std::vector<Pair> pairs;
  std::vector<uint32_t> overlapping(n);
  for (uint32_t i = 0; i < n; ++i) {
    if (!alive[i]) continue;
    // A static box pairs only with dynamic ones; a dynamic one with any.
    const uint8_t* candidate = dynamic[i] ? alive.data() : dynamic.data();
    const uint32_t found = overlapsAfter(bounds.data(), candidate, n, i, overlapping.data());
    for (uint32_t k = 0; k < found; ++k) pairs.push_back({i, overlapping[k]});
  }
  return pairs;  // generated in (i, j) order: already sorted
}

std::vector<Pair> findLayerPairs(std::span<const Aabb> boxes, std::span<const uint8_t> isStatic,
                                 std::span<const uint8_t> live, std::span<const uint8_t> layers,
                                 const LayerTable& table) {
  std::vector<Pair> pairs;
  for (const Pair& p : findPairs(boxes, isStatic, live))
    if (table.collides(layers[p.a], layers[p.b])) pairs.push_back(p);
  return pairs;
}

RayHit castRayClosest(std::span<const Aabb> boxes, const Ray& ray, std::span<const uint8_t> live) {
  RayHit best;
  for (uint32_t i = 0; i < boxes.size(); ++i) {
    float t;
    if (!isLive(live, i) || !intersectRayAabb(ray, boxes[i], t)) continue;
    const RayHit h{i, t};
    if (!best.hit() || hitBefore(h, best)) best = h;
  }
  return best;
}

std::vector<RayHit> castRayAll(std::span<const Aabb> boxes, const Ray& ray,
                               std::span<const uint8_t> live) {
  std::vector<RayHit> hits;
  for (uint32_t i = 0; i < boxes.size(); ++i) {
    float t;
    if (isLive(live, i) && intersectRayAabb(ray, boxes[i], t)) hits.push_back({i, t});
  }
  std::sort(hits.begin(), hits.end(), hitBefore);
  return hits;
}

std::vector<uint32_t> queryBox(std::span<const Aabb> boxes, const Aabb& query,
                               std::span<const uint8_t> live) {
  std::vector<uint32_t> out;
  for (uint32_t i = 0; i < boxes.size(); ++i)
    if (isLive(live, i) && overlaps(boxes[i], query)) out.push_back(i);
  return out;
}

std::vector<uint32_t> queryPoint(std::span<const Aabb> boxes, const Vec3& point,
                                 std::span<const uint8_t> live) {
  std::vector<uint32_t> out;
  for (uint32_t i = 0; i < boxes.size(); ++i)
    if (isLive(live, i) && containsPoint(boxes[i], point)) out.push_back(i);
  return out;
}

std::vector<Neighbour> nearest(std::span<const Aabb> boxes, const Vec3& point, uint32_t k,
                               std::span<const uint8_t> live) {
  std::vector<Neighbour> all;
  for (uint32_t i = 0; i < boxes.size(); ++i)
    if (isLive(live, i)) all.push_back({i, distanceSquared(boxes[i], point)});
  std::sort(all.begin(), all.end(), neighbourBefore);
  if (all.size() > k) all.resize(k);
  return all;
}

RayHit castBox(std::span<const Aabb> boxes, const Vec3& halfExtent, const Ray& ray,
               std::span<const uint8_t> live) {
  RayHit best;
  for (uint32_t i = 0; i < boxes.size(); ++i) {
    if (!isLive(live, i)) continue;
    const Aabb grown{boxes[i].min - halfExtent, boxes[i].max + halfExtent};
    float t;
    if (!intersectRayAabb(ray, grown, t)) continue;
    const RayHit h{i, t};
    if (!best.hit() || hitBefore(h, best)) best = h;
  }
  return best;
}

}  // namespace bp::brute
