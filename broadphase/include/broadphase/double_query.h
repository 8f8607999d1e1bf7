/// \file
/// The results of BroadPhase's double-precision queries (docs/large_worlds.md):
/// a ray hit and a neighbour whose distances are doubles, with the same
/// orders as RayHit and Neighbour.
#pragma once

#include <cstdint>

namespace bp {

/// A ray hit of a double ray: the proxy and the entry distance computed in
/// double against its double box. A default DRayHit is a miss.
struct DRayHit {
  uint32_t proxy = UINT32_MAX;  ///< UINT32_MAX: no hit
  double t = 0;                 ///< entry distance along the ray, 0 if the origin is inside
  /// True when the ray hit a proxy.
  bool hit() const { return proxy != UINT32_MAX; }
  /// Same proxy and equal distance.
  friend bool operator==(const DRayHit&, const DRayHit&) = default;
};

/// Nearer first, ties to the lower proxy index (as hitBefore() of ray_hit.h).
inline bool doubleHitBefore(const DRayHit& x, const DRayHit& y) {
  return x.t < y.t || (x.t == y.t && x.proxy < y.proxy);
}

/// A result of a double nearest query: distanceSquared(DAabb, DVec3), in
/// double, from the query point to the proxy's double box.
struct DNeighbour {
  uint32_t proxy;          ///< the proxy's index
  double distanceSquared;  ///< square world units, 0 inside
  /// Same proxy and equal distance.
  friend bool operator==(const DNeighbour&, const DNeighbour&) = default;
};

/// Nearer first, ties to the lower proxy index (as neighbourBefore()).
inline bool doubleNeighbourBefore(const DNeighbour& x, const DNeighbour& y) {
  return x.distanceSquared < y.distanceSquared ||
         (x.distanceSquared == y.distanceSquared && x.proxy < y.proxy);
}

}  // namespace bp
