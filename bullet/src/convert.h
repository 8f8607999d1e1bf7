// Bullet's vectors and boxes into ours.
#pragma once

#include <broadphase/math/aabb.h>

#include <LinearMath/btVector3.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

namespace bp::bullet {

// btScalar to float, rounded down or up (a double build of Bullet): a box
// converted with lower() below and upper() above contains the original, so
// no overlap is lost.
inline float lower(btScalar v) {
  const float f = static_cast<float>(v);
  if constexpr (std::is_same_v<btScalar, float>) {
    return f;
  } else {
    return static_cast<btScalar>(f) > v ? std::nextafter(f, -INFINITY) : f;
  }
}
inline float upper(btScalar v) {
  const float f = static_cast<float>(v);
  if constexpr (std::is_same_v<btScalar, float>) {
    return f;
  } else {
    return static_cast<btScalar>(f) < v ? std::nextafter(f, INFINITY) : f;
  }
}

inline Vec3 toVec3(const btVector3& v) {
  return Vec3(static_cast<float>(v.x()), static_cast<float>(v.y()), static_cast<float>(v.z()));
}

// Bullet's box as the BroadPhase takes it: float, every coordinate clamped to
// +-kMaxCoordinate. Clamping keeps every overlap (it is monotonic) and adds
// overlaps only between boxes lying wholly beyond the limit on the same side;
// it lets in the +-1e18 boxes of infinite shapes (btStaticPlaneShape). False
// for a NaN or a min above its max: no usable box.
inline bool toBox(const btVector3& aabbMin, const btVector3& aabbMax, Aabb& out) {
  for (int k = 0; k < 3; ++k) {
    const btScalar lo = aabbMin[k], hi = aabbMax[k];
    if (!(lo <= hi)) return false;
    out.min[k] = std::clamp(lower(lo), -kMaxCoordinate, kMaxCoordinate);
    out.max[k] = std::clamp(upper(hi), -kMaxCoordinate, kMaxCoordinate);
  }
  return true;
}

}  // namespace bp::bullet
