/// \file
/// RayHit: what a ray query returns for one ray, and the order of hits.
#pragma once

#include <cstdint>

namespace bp {

/// What a ray query returns for one ray: the proxy hit and where the ray
/// enters its box, or no hit. A default RayHit is a miss.
struct RayHit {
  uint32_t proxy = UINT32_MAX;  ///< UINT32_MAX (kNullIndex): no hit
  float t = 0;                  ///< entry distance along the ray, 0 if the origin is inside
  /// True when the ray hit a proxy; when false, `t` has no meaning.
  bool hit() const { return proxy != UINT32_MAX; }
  /// Same proxy and equal distance: results compare exactly, so any two
  /// structures or thread counts can be checked against each other.
  friend bool operator==(const RayHit&, const RayHit&) = default;
};

/// The order of hits: nearer first, ties to the lower proxy index. Closest-hit
/// queries return the minimum under this order, all-hit queries sort by it.
inline bool hitBefore(const RayHit& x, const RayHit& y) {
  return x.t < y.t || (x.t == y.t && x.proxy < y.proxy);
}

}  // namespace bp
