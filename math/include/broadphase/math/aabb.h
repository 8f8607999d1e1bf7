// Aabb: an axis-aligned box given by its min and max corners.
//
// Invariant of a valid box: every coordinate finite and within kMaxCoordinate,
// and min <= max on every axis (a flat or point box is valid).
// Overlap uses closed intervals: boxes that only touch do overlap, as in the
// standard scenes and as a narrowphase with contact margins wants.
#pragma once

#include <broadphase/math/vec3.h>

#include <limits>
#include <string>

namespace bp {

struct Aabb {
  Vec3 min;
  Vec3 max;

  static Aabb fromCenterExtent(const Vec3& center, const Vec3& extent) {
    return {center - 0.5f * extent, center + 0.5f * extent};
  }
  // The empty box: the identity of merge(). Not valid: it has min > max.
  static Aabb empty() {
    const float inf = std::numeric_limits<float>::infinity();
    return {Vec3(inf, inf, inf), Vec3(-inf, -inf, -inf)};
  }

  Vec3 center() const { return 0.5f * (min + max); }
  Vec3 extent() const { return max - min; }
};
static_assert(sizeof(Aabb) == 24, "Aabb is two packed Vec3");

inline bool overlaps(const Aabb& a, const Aabb& b) {
  // Written with & on ints, not &&, so that the six compares compile to one
  // branch (or none) instead of six.
  return int(a.min.x() <= b.max.x()) & int(b.min.x() <= a.max.x()) & int(a.min.y() <= b.max.y()) &
         int(b.min.y() <= a.max.y()) & int(a.min.z() <= b.max.z()) & int(b.min.z() <= a.max.z());
}

// True when `outer` contains `inner` entirely (closed intervals).
inline bool contains(const Aabb& outer, const Aabb& inner) {
  return int(outer.min.x() <= inner.min.x()) & int(outer.min.y() <= inner.min.y()) &
         int(outer.min.z() <= inner.min.z()) & int(inner.max.x() <= outer.max.x()) &
         int(inner.max.y() <= outer.max.y()) & int(inner.max.z() <= outer.max.z());
}

inline bool containsPoint(const Aabb& box, const Vec3& p) {
  return int(box.min.x() <= p.x()) & int(p.x() <= box.max.x()) & int(box.min.y() <= p.y()) &
         int(p.y() <= box.max.y()) & int(box.min.z() <= p.z()) & int(p.z() <= box.max.z());
}

inline Aabb merge(const Aabb& a, const Aabb& b) {
  return {a.min.cwiseMin(b.min), a.max.cwiseMax(b.max)};
}

// Surface area; the SAH cost of a node. Only ratios of areas matter, so the
// factor 2 is kept to make the value the true area.
inline float surfaceArea(const Aabb& box) {
  const Vec3 e = box.max - box.min;
  return 2.0f * (e.x() * e.y() + e.y() * e.z() + e.z() * e.x());
}

// The box grown by `margin` on every side (a fat box).
inline Aabb fatten(const Aabb& box, float margin) {
  const Vec3 m(margin, margin, margin);
  return {box.min - m, box.max + m};
}

// Squared distance from p to the box (0 inside). Squared, so that nearest-
// neighbour searches compare without a square root.
inline float distanceSquared(const Aabb& box, const Vec3& p) {
  const Vec3 d = (box.min - p).cwiseMax(p - box.max).cwiseMax(Vec3::Zero());
  return d.squaredNorm();
}

// A valid box: finite, within kMaxCoordinate, min <= max on every axis.
inline bool isValid(const Aabb& box) {
  return isFinite(box.min) && isFinite(box.max) && isWithinLimit(box.min) &&
         isWithinLimit(box.max) &&
         int(box.min.x() <= box.max.x()) & int(box.min.y() <= box.max.y()) &
             int(box.min.z() <= box.max.z());
}

// Why a box is not valid, for error messages; empty when it is valid.
std::string describeInvalid(const Aabb& box);

std::string toString(const Aabb& box);

}  // namespace bp
