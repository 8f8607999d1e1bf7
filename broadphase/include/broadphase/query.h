/// \file
/// Types shared by the queries of every structure (Bvh, SweepGrid, BroadPhase).
#pragma once

#include <broadphase/function_ref.h>
#include <broadphase/ray_hit.h>

#include <cstdint>

namespace bp {

/// Which hits a ray query returns.
enum class RayQuery : uint8_t {
  closest,  ///< the first hit by hitBefore() order
  any,      ///< some hit, the first found: cheapest, for line of sight
  all,      ///< every hit, sorted by hitBefore()
};

/// Box and point queries: called once per proxy found, in no particular order.
/// Return true to continue, false to stop the query early.
using OverlapCallback = FunctionRef<bool(uint32_t proxy)>;

/// Ray queries with a narrowphase in the loop: called for each proxy whose box
/// the ray enters at `tEntry` (<= the current max distance). The return value
/// is the new max distance of the ray:
///   - return tEntry (or the exact shape's hit distance) to clip the ray there,
///     which prunes everything farther, as a closest-hit search wants;
///   - return a larger value (e.g. infinity) to keep the ray as it is;
///   - return a negative value to stop the query at once.
///
/// Candidates arrive roughly nearest first, not in exact order.
using RayCallback = FunctionRef<float(uint32_t proxy, float tEntry)>;

/// One result of a nearest-neighbour query: squared distance from the query
/// point to the proxy's box (0 inside). Order: nearer first, ties to the lower
/// proxy index.
struct Neighbour {
  uint32_t proxy;         ///< the proxy's index (ProxyId::index)
  float distanceSquared;  ///< distanceSquared() of math/aabb.h: square world units, 0 inside
  /// Same proxy and equal distance.
  friend bool operator==(const Neighbour&, const Neighbour&) = default;
};

/// The order of nearest-neighbour results, a strict weak order: nearer
/// first, ties to the lower proxy index. Queries return their k results
/// sorted by it.
inline bool neighbourBefore(const Neighbour& x, const Neighbour& y) {
  return x.distanceSquared < y.distanceSquared ||
         (x.distanceSquared == y.distanceSquared && x.proxy < y.proxy);
}

}  // namespace bp
