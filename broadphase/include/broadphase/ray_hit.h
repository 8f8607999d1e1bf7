/// RayHit: what a ray query returns for one ray.
#pragma once

#include <cstdint>

namespace bp {

struct RayHit {
  uint32_t proxy = UINT32_MAX;  ///< UINT32_MAX (kNullIndex): no hit
  float t = 0;                  ///< entry distance along the ray, 0 if the origin is inside
  bool hit() const { return proxy != UINT32_MAX; }
  friend bool operator==(const RayHit&, const RayHit&) = default;
};

/// The order of hits: nearer first, ties to the lower proxy index. Closest-hit
/// queries return the minimum under this order, all-hit queries sort by it.
inline bool hitBefore(const RayHit& x, const RayHit& y) {
  return x.t < y.t || (x.t == y.t && x.proxy < y.proxy);
}

}  // namespace bp
