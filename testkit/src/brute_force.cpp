#include <broadphase/testkit/brute_force.h>

#include <algorithm>

namespace bp::brute {

namespace {
bool isLive(std::span<const uint8_t> live, uint32_t i) { return live.empty() || live[i]; }
}  // namespace

std::vector<Pair> findPairs(std::span<const Aabb> boxes, std::span<const uint8_t> isStatic,
                            std::span<const uint8_t> live) {
  std::vector<Pair> pairs;
  const uint32_t n = static_cast<uint32_t>(boxes.size());
  for (uint32_t i = 0; i < n; ++i) {
    if (!isLive(live, i)) continue;
    for (uint32_t j = i + 1; j < n; ++j) {
      if (!isLive(live, j)) continue;
      if (!isStatic.empty() && isStatic[i] && isStatic[j]) continue;
      if (overlaps(boxes[i], boxes[j])) pairs.push_back({i, j});
    }
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
