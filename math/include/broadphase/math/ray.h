/// \file
/// Ray: a segment from `origin` along the unit vector `direction`, of length
/// `maxT`, and the ray-box slab test every ray query uses. Distances t along
/// the ray are in world units because the direction is unit length.
///
/// The reciprocal direction is precomputed for the slab test. A zero direction
/// component gives an infinite reciprocal (1/+0 = +inf, 1/-0 = -inf); the slab
/// test below is written so that the NaN of 0 * inf (origin exactly on a slab
/// plane) is ignored rather than propagated, which treats that plane as inside
/// the slab: the closed-interval convention of Aabb.
#pragma once

#include <broadphase/math/aabb.h>

#include <string>
#include <utility>

namespace bp {

/// A ray segment: the points origin + t * direction for t in [0, maxT]. Build
/// it with makeRay(): queries rely on `direction` being unit length and
/// `invDirection` its reciprocal, and give wrong distances otherwise.
struct Ray {
  Vec3 origin;        ///< start point, world units
  Vec3 direction;     ///< unit length
  float maxT = 0;     ///< length of the segment in world units, > 0
  Vec3 invDirection;  ///< 1 / direction per component; +-inf where a component is +-0
};

/// Builds a ray from an origin, any non-zero direction (normalised here) and a
/// length in world units. Does not validate: the result is undefined (NaN
/// components) for a zero or non-finite direction; check the inputs with
/// describeInvalidRay() first.
inline Ray makeRay(const Vec3& origin, const Vec3& direction, float length) {
  Ray r;
  r.origin = origin;
  // Scale by the largest component first so that neither a tiny (denormal)
  // nor a huge direction under- or overflows on the way to unit length.
  const float scale = direction.cwiseAbs().maxCoeff();
  const Vec3 d = direction / scale;
  r.direction = d / std::sqrt(d.x() * d.x() + d.y() * d.y() + d.z() * d.z());
  r.maxT = length;
  r.invDirection = Vec3(1.0f / r.direction.x(), 1.0f / r.direction.y(), 1.0f / r.direction.z());
  return r;
}

/// Why a ray is not usable, in one sentence for an error message; empty when
/// it is fine. Rejected: non-finite origin or direction, a zero direction, a
/// length that is not finite and > 0, an origin beyond kMaxCoordinate. The
/// check behind Error(invalidRay).
std::string describeInvalidRay(const Vec3& origin, const Vec3& direction, float length);

/// describeInvalidRay(...).empty() without building a message: the check
/// for a batch, which describes only a ray it rejects.
inline bool isValidRay(const Vec3& origin, const Vec3& direction, float length) {
  return isFinite(origin) && isWithinLimit(origin) && isFinite(direction) &&
         !(direction.x() == 0.0f && direction.y() == 0.0f && direction.z() == 0.0f) &&
         std::isfinite(length) && length > 0.0f;
}

/// Slab clip of the segment [tMin, tMax] to the box: on return tMin is the
/// entry distance (unchanged when the segment starts inside) and tMax the exit;
/// true when the clipped segment is not empty. NaN-safe: every compare is
/// written so a NaN operand (0 * inf, origin on a slab plane of a parallel
/// ray) keeps the old bound. The one implementation every ray query uses.
/// On false, tMin > tMax and neither is a hit distance.
inline bool clipRayAabb(const Vec3& origin, const Vec3& invDirection, const Aabb& box, float& tMin,
                        float& tMax) {
  for (int axis = 0; axis < 3; ++axis) {
    const float inv = invDirection[axis];
    float tNear = (box.min[axis] - origin[axis]) * inv;
    float tFar = (box.max[axis] - origin[axis]) * inv;
    if (inv < 0.0f) std::swap(tNear, tFar);
    tMin = tNear > tMin ? tNear : tMin;
    tMax = tFar < tMax ? tFar : tMax;
  }
  return tMin <= tMax;
}

/// Slab test against [tMin, tMax]. Returns true on a hit and writes the entry
/// distance (tMin when the ray starts inside the box, so 0 for a full ray).
/// `tEntry` is written on a miss too, with no meaning.
inline bool intersectRayAabb(const Vec3& origin, const Vec3& invDirection, const Aabb& box,
                             float tMin, float tMax, float& tEntry) {
  const bool hit = clipRayAabb(origin, invDirection, box, tMin, tMax);
  tEntry = tMin;
  return hit;
}

/// The slab test of the whole segment, t in [0, ray.maxT]: true on a hit, with
/// the entry distance in `tEntry` (0 when the origin is inside the box).
inline bool intersectRayAabb(const Ray& ray, const Aabb& box, float& tEntry) {
  return intersectRayAabb(ray.origin, ray.invDirection, box, 0.0f, ray.maxT, tEntry);
}

}  // namespace bp
