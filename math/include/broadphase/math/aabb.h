/// \file
/// Aabb: an axis-aligned box given by its min and max corners, and the box
/// tests every structure shares.
///
/// Invariant of a valid box: every coordinate finite and within kMaxCoordinate,
/// and min <= max on every axis (a flat or point box is valid).
/// Overlap uses closed intervals: boxes that only touch do overlap, as in the
/// standard scenes and as a narrowphase with contact margins wants.
#pragma once

#include <broadphase/math/vec3.h>

#include <limits>
#include <string>

namespace bp {

/// An axis-aligned box in world units, closed on every side: [min, max].
/// 24 bytes, no padding. Valid when isValid() holds (see the file comment);
/// the functions below give meaningless results for an invalid box unless
/// they say otherwise.
struct Aabb {
  Vec3 min;  ///< the lower corner: the smallest x, y and z of the box
  Vec3 max;  ///< the upper corner: the largest x, y and z; max >= min on a valid box

  /// The box of full size `extent` (not the half size) centred at `center`.
  /// A negative extent component gives an inverted, invalid box.
  static Aabb fromCenterExtent(const Vec3& center, const Vec3& extent) {
    return {center - 0.5f * extent, center + 0.5f * extent};
  }
  /// The empty box (min = +inf, max = -inf): the identity of merge(), to
  /// start a union from. Not valid: it overlaps and contains nothing.
  static Aabb empty() {
    const float inf = std::numeric_limits<float>::infinity();
    return {Vec3(inf, inf, inf), Vec3(-inf, -inf, -inf)};
  }

  /// The midpoint of the two corners.
  Vec3 center() const { return 0.5f * (min + max); }
  /// The full size per axis, max - min (not the half size); >= 0 on a valid box.
  Vec3 extent() const { return max - min; }
};
static_assert(sizeof(Aabb) == 24, "Aabb is two packed Vec3");

/// True when the boxes share at least one point: closed intervals, so boxes
/// that only touch overlap. Symmetric. False whenever a coordinate is NaN.
inline bool overlaps(const Aabb& a, const Aabb& b) {
  // Written with & on ints, not &&, so that the six compares compile to one
  // branch (or none) instead of six.
  return int(a.min.x() <= b.max.x()) & int(b.min.x() <= a.max.x()) & int(a.min.y() <= b.max.y()) &
         int(b.min.y() <= a.max.y()) & int(a.min.z() <= b.max.z()) & int(b.min.z() <= a.max.z());
}

/// True when `outer` contains `inner` entirely (closed intervals: a box
/// contains itself).
inline bool contains(const Aabb& outer, const Aabb& inner) {
  return int(outer.min.x() <= inner.min.x()) & int(outer.min.y() <= inner.min.y()) &
         int(outer.min.z() <= inner.min.z()) & int(inner.max.x() <= outer.max.x()) &
         int(inner.max.y() <= outer.max.y()) & int(inner.max.z() <= outer.max.z());
}

/// True when `p` lies in the box or on its boundary.
inline bool containsPoint(const Aabb& box, const Vec3& p) {
  return int(box.min.x() <= p.x()) & int(p.x() <= box.max.x()) & int(box.min.y() <= p.y()) &
         int(p.y() <= box.max.y()) & int(box.min.z() <= p.z()) & int(p.z() <= box.max.z());
}

/// The smallest box that contains both; merge(Aabb::empty(), b) is b.
inline Aabb merge(const Aabb& a, const Aabb& b) {
  return {a.min.cwiseMin(b.min), a.max.cwiseMax(b.max)};
}

/// Surface area in square world units: the cost of a tree node under the
/// surface area heuristic. Only ratios of areas matter, but the factor 2 is
/// kept so that the value is the true area. 0 for a flat or point box.
inline float surfaceArea(const Aabb& box) {
  const Vec3 e = box.max - box.min;
  return 2.0f * (e.x() * e.y() + e.y() * e.z() + e.z() * e.x());
}

/// The box grown by `margin` world units on every side (a fat box). A
/// negative margin shrinks it and may invert it.
inline Aabb fatten(const Aabb& box, float margin) {
  const Vec3 m(margin, margin, margin);
  return {box.min - m, box.max + m};
}

/// Squared Euclidean distance from `p` to the nearest point of the box, in
/// square world units; 0 inside or on the boundary. Computed per axis as
/// max(min - p, p - max, 0), squared and summed x, y, z, in float: the
/// distance nearest-neighbour queries rank by. Squared, so that they compare
/// without a square root.
inline float distanceSquared(const Aabb& box, const Vec3& p) {
  const Vec3 d = (box.min - p).cwiseMax(p - box.max).cwiseMax(Vec3::Zero());
  return d.squaredNorm();
}

/// True for a valid box: every coordinate finite and within kMaxCoordinate,
/// min <= max on every axis. The check every add() and move() makes; cheap
/// enough to call before them instead of catching bp::Error.
inline bool isValid(const Aabb& box) {
  return isFinite(box.min) && isFinite(box.max) && isWithinLimit(box.min) &&
         isWithinLimit(box.max) &&
         int(box.min.x() <= box.max.x()) & int(box.min.y() <= box.max.y()) &
             int(box.min.z() <= box.max.z());
}

/// Why a box is not valid, in one English sentence for an error message (the
/// first failing rule: non-finite, beyond the limit, inverted); empty exactly
/// when isValid(box).
std::string describeInvalid(const Aabb& box);

/// The corners as text, "[min (x, y, z), max (x, y, z)]", with 9 significant
/// digits so that a float reads back exactly.
std::string toString(const Aabb& box);

}  // namespace bp
