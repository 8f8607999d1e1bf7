#include <broadphase/testkit/brute_force_double.h>

#include "is_live.h"

#include <algorithm>

namespace bp::brute {

using detail::isLive;

std::vector<Pair> findPairs(std::span<const DAabb> boxes, std::span<const uint8_t> isStatic,
                            std::span<const uint8_t> live) {
  std::vector<Pair> out;
  for (uint32_t i = 0; i < boxes.size(); ++i) {
    if (!isLive(live, i)) continue;
    for (uint32_t j = i + 1; j < boxes.size(); ++j) {
      if (!isLive(live, j)) continue;
      if (!isStatic.empty() && isStatic[i] && isStatic[j]) continue;
      if (overlaps(boxes[i], boxes[j])) out.push_back(makePair(i, j));
    }
  }
  return out;
}

DRayHit castRayClosest(std::span<const DAabb> boxes, const DRay& ray,
                       std::span<const uint8_t> live) {
  DRayHit best;
  for (uint32_t i = 0; i < boxes.size(); ++i) {
    double t;
    if (!isLive(live, i) || !intersectRayAabb(ray, boxes[i], t)) continue;
    const DRayHit h{i, t};
    if (!best.hit() || doubleHitBefore(h, best)) best = h;
  }
  return best;
}

std::vector<DRayHit> castRayAll(std::span<const DAabb> boxes, const DRay& ray,
                                std::span<const uint8_t> live) {
  std::vector<DRayHit> out;
  for (uint32_t i = 0; i < boxes.size(); ++i) {
    double t;
    if (isLive(live, i) && intersectRayAabb(ray, boxes[i], t)) out.push_back({i, t});
  }
  std::sort(out.begin(), out.end(), doubleHitBefore);
  return out;
}

std::vector<uint32_t> queryBox(std::span<const DAabb> boxes, const DAabb& query,
                               std::span<const uint8_t> live) {
  std::vector<uint32_t> out;
  for (uint32_t i = 0; i < boxes.size(); ++i)
    if (isLive(live, i) && overlaps(boxes[i], query)) out.push_back(i);
  return out;
}

std::vector<uint32_t> queryPoint(std::span<const DAabb> boxes, const DVec3& point,
                                 std::span<const uint8_t> live) {
  std::vector<uint32_t> out;
  for (uint32_t i = 0; i < boxes.size(); ++i)
    if (isLive(live, i) && containsPoint(boxes[i], point)) out.push_back(i);
  return out;
}

std::vector<DNeighbour> nearest(std::span<const DAabb> boxes, const DVec3& point, uint32_t k,
                                std::span<const uint8_t> live) {
  std::vector<DNeighbour> all;
  for (uint32_t i = 0; i < boxes.size(); ++i)
    if (isLive(live, i)) all.push_back({i, distanceSquared(boxes[i], point)});
  std::sort(all.begin(), all.end(), doubleNeighbourBefore);
  if (all.size() > k) all.resize(k);
  return all;
}

}  // namespace bp::brute
