/// The brute-force oracle in double precision, for BroadPhase's double path
/// (docs/large_worlds.md): the functions of brute_force.h over DAabb boxes,
/// each looking at every box, written to be obviously right.
#pragma once

#include <broadphase/double_query.h>
#include <broadphase/math/daabb.h>
#include <broadphase/math/dray.h>
#include <broadphase/pair.h>

#include <cstdint>
#include <span>
#include <vector>

namespace bp::brute {

/// A float box translated by `offset`, per coordinate in double (how the
/// tests and bpbench move a standard scene away from the origin).
inline DAabb translated(const Aabb& box, const DVec3& offset) {
  return {toDouble(box.min) + offset, toDouble(box.max) + offset};
}

/// Every pair (i < j) whose double boxes overlap, sorted; static-static and
/// dead boxes left out as in findPairs().
std::vector<Pair> findPairs(std::span<const DAabb> boxes, std::span<const uint8_t> isStatic = {},
                            std::span<const uint8_t> live = {});
/// Closest hit of the double slab test, ties to the lower index.
DRayHit castRayClosest(std::span<const DAabb> boxes, const DRay& ray,
                       std::span<const uint8_t> live = {});
/// Every hit, sorted by doubleHitBefore().
std::vector<DRayHit> castRayAll(std::span<const DAabb> boxes, const DRay& ray,
                                std::span<const uint8_t> live = {});
/// Indices of boxes overlapping `query` / containing `point`, ascending.
std::vector<uint32_t> queryBox(std::span<const DAabb> boxes, const DAabb& query,
                               std::span<const uint8_t> live = {});
std::vector<uint32_t> queryPoint(std::span<const DAabb> boxes, const DVec3& point,
                                 std::span<const uint8_t> live = {});
/// The k nearest boxes by distanceSquared(DAabb, DVec3), ties to the lower index.
std::vector<DNeighbour> nearest(std::span<const DAabb> boxes, const DVec3& point, uint32_t k,
                                std::span<const uint8_t> live = {});

}  // namespace bp::brute
