/// The brute-force oracle. Every structure and query is tested against these
/// functions, which are written to be obviously right rather than fast: each
/// one looks at every box. Use for N up to a few times 10^4.
#pragma once

#include <broadphase/layers.h>
#include <broadphase/math/aabb.h>
#include <broadphase/math/ray.h>
#include <broadphase/pair.h>
#include <broadphase/query.h>
#include <broadphase/ray_hit.h>

#include <cstdint>
#include <span>
#include <vector>

namespace bp::brute {

/// Every pair (i < j) whose boxes overlap, sorted. `isStatic` may be empty;
/// otherwise pairs of two static boxes are left out. `live` may be empty;
/// otherwise boxes with live[i] == 0 are skipped.
std::vector<Pair> findPairs(std::span<const Aabb> boxes, std::span<const uint8_t> isStatic = {},
                            std::span<const uint8_t> live = {});
/// findPairs() with broadphase layers: only pairs whose layers (layers[i],
/// each < kMaxLayers) collide in `table`.
std::vector<Pair> findLayerPairs(std::span<const Aabb> boxes, std::span<const uint8_t> isStatic,
                                 std::span<const uint8_t> live, std::span<const uint8_t> layers,
                                 const LayerTable& table);

/// Closest hit: lowest entry t, ties to the lower index; no hit if none.
RayHit castRayClosest(std::span<const Aabb> boxes, const Ray& ray,
                      std::span<const uint8_t> live = {});
/// Every hit, sorted by hitBefore().
std::vector<RayHit> castRayAll(std::span<const Aabb> boxes, const Ray& ray,
                               std::span<const uint8_t> live = {});

/// Indices of boxes overlapping `query` / containing `point`, ascending.
std::vector<uint32_t> queryBox(std::span<const Aabb> boxes, const Aabb& query,
                               std::span<const uint8_t> live = {});
std::vector<uint32_t> queryPoint(std::span<const Aabb> boxes, const Vec3& point,
                                 std::span<const uint8_t> live = {});

/// The k boxes nearest to `point` by squared distance to the box (0 inside),
/// nearest first, ties to the lower index. Fewer than k if fewer boxes.
std::vector<Neighbour> nearest(std::span<const Aabb> boxes, const Vec3& point, uint32_t k,
                               std::span<const uint8_t> live = {});

/// A box of half-size `halfExtent` centred on the ray origin, swept along the
/// ray: the first box it touches (entry t, 0 if overlapping at the start),
/// ties to the lower index. Same as a ray against every box grown by halfExtent.
RayHit castBox(std::span<const Aabb> boxes, const Vec3& halfExtent, const Ray& ray,
               std::span<const uint8_t> live = {});

}  // namespace bp::brute
