/// \file
/// DRay: a ray segment in double precision and its slab test against a
/// DAabb, the double counterparts of Ray and intersectRayAabb() (ray.h),
/// written the same way (the same NaN rule for an origin on a slab plane).
#pragma once

#include <broadphase/math/daabb.h>

#include <cmath>
#include <string>
#include <utility>

namespace bp {

/// The points origin + t * direction for t in [0, maxT], in double. Build
/// it with makeRay(): `direction` is unit length, `invDirection` its
/// reciprocal (+-inf where a component is +-0).
struct DRay {
  DVec3 origin;        ///< start point, world units
  DVec3 direction;     ///< unit length
  double maxT = 0;     ///< length of the segment in world units, > 0
  DVec3 invDirection;  ///< 1 / direction per component
};

/// Builds a ray from an origin, any non-zero finite direction (normalised
/// here, after scaling by its largest component) and a length. Does not
/// validate: check with describeInvalidRay() first.
inline DRay makeRay(const DVec3& origin, const DVec3& direction, double length) {
  DRay r;
  r.origin = origin;
  const double scale = maxAbs(direction);
  const DVec3 d{direction.x / scale, direction.y / scale, direction.z / scale};
  const double norm = std::sqrt(d.x * d.x + d.y * d.y + d.z * d.z);
  r.direction = {d.x / norm, d.y / norm, d.z / norm};
  r.maxT = length;
  r.invDirection = {1.0 / r.direction.x, 1.0 / r.direction.y, 1.0 / r.direction.z};
  return r;
}

/// Why a double ray is not usable, one sentence; empty when it is fine.
/// Rejected: a non-finite origin or direction, a zero direction, a length
/// that is not finite and > 0. (No coordinate limit here; BroadPhase adds
/// its own, relative to its origin.)
std::string describeInvalidRay(const DVec3& origin, const DVec3& direction, double length);

/// The slab test of the whole segment, t in [0, ray.maxT], in double: true
/// on a hit, with the entry distance in `tEntry` (0 when the origin is
/// inside). The arithmetic of clipRayAabb() in double.
inline bool intersectRayAabb(const DRay& ray, const DAabb& box, double& tEntry) {
  double tMin = 0.0, tMax = ray.maxT;
  for (int axis = 0; axis < 3; ++axis) {
    const double inv = ray.invDirection[axis];
    double tNear = (box.min[axis] - ray.origin[axis]) * inv;
    double tFar = (box.max[axis] - ray.origin[axis]) * inv;
    if (inv < 0.0) std::swap(tNear, tFar);
    tMin = tNear > tMin ? tNear : tMin;
    tMax = tFar < tMax ? tFar : tMax;
  }
  tEntry = tMin;
  return tMin <= tMax;
}

}  // namespace bp
