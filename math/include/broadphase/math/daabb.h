/// \file
/// DVec3 and DAabb: points and boxes in double precision, for worlds larger
/// than float coordinates reach (docs/large_worlds.md), and the conversion
/// that stores such a box as a float box relative to an origin.
///
/// DVec3 is plain data, not an Eigen type: a braced list of float vectors
/// never converts to it, so the float and double overloads of BroadPhase
/// never compete for one call.
#pragma once

#include <broadphase/math/aabb.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>

namespace bp {

/// A point or a direction in world units, double precision (24 bytes).
struct DVec3 {
  double x = 0;  ///< the x coordinate
  double y = 0;  ///< the y coordinate
  double z = 0;  ///< the z coordinate
  /// Component `axis` (0: x, 1: y, 2: z).
  double operator[](int axis) const { return axis == 0 ? x : axis == 1 ? y : z; }
  /// Component `axis` (0: x, 1: y, 2: z), writable.
  double& operator[](int axis) { return axis == 0 ? x : axis == 1 ? y : z; }
  /// Componentwise equality.
  friend bool operator==(const DVec3&, const DVec3&) = default;
};

/// A float vector widened to double (exact).
inline DVec3 toDouble(const Vec3& v) { return {double(v.x()), double(v.y()), double(v.z())}; }
/// Componentwise sum, rounded to nearest.
inline DVec3 operator+(const DVec3& a, const DVec3& b) { return {a.x + b.x, a.y + b.y, a.z + b.z}; }
/// Componentwise difference, rounded to nearest.
inline DVec3 operator-(const DVec3& a, const DVec3& b) { return {a.x - b.x, a.y - b.y, a.z - b.z}; }
/// True when no component is NaN or infinite.
inline bool isFinite(const DVec3& v) {
  return std::isfinite(v.x) && std::isfinite(v.y) && std::isfinite(v.z);
}
/// The largest component magnitude.
inline double maxAbs(const DVec3& v) {
  return std::fmax(std::fabs(v.x), std::fmax(std::fabs(v.y), std::fabs(v.z)));
}

/// An axis-aligned box in world units, double precision, closed on every
/// side like Aabb. Valid when isValid() holds: finite, min <= max per axis
/// (no coordinate limit: the limit applies to the float box it is stored as).
struct DAabb {
  DVec3 min;  ///< the lower corner
  DVec3 max;  ///< the upper corner; max >= min on a valid box
};

/// A float box widened to double (exact).
inline DAabb toDouble(const Aabb& box) { return {toDouble(box.min), toDouble(box.max)}; }

/// Closed-interval overlap, as overlaps(Aabb, Aabb), decided in double.
inline bool overlaps(const DAabb& a, const DAabb& b) {
  return int(a.min.x <= b.max.x) & int(b.min.x <= a.max.x) & int(a.min.y <= b.max.y) &
         int(b.min.y <= a.max.y) & int(a.min.z <= b.max.z) & int(b.min.z <= a.max.z);
}

/// True when `p` lies in the box or on its boundary.
inline bool containsPoint(const DAabb& box, const DVec3& p) {
  return int(box.min.x <= p.x) & int(p.x <= box.max.x) & int(box.min.y <= p.y) &
         int(p.y <= box.max.y) & int(box.min.z <= p.z) & int(p.z <= box.max.z);
}

/// Squared distance from `p` to the box, as distanceSquared(Aabb, Vec3) but
/// in double: per axis max(min - p, p - max, 0), squared, summed x, y, z.
inline double distanceSquared(const DAabb& box, const DVec3& p) {
  double sum = 0;
  for (int axis = 0; axis < 3; ++axis) {
    const double d = std::fmax(std::fmax(box.min[axis] - p[axis], p[axis] - box.max[axis]), 0.0);
    sum += d * d;
  }
  return sum;
}

/// True for a valid box: every coordinate finite, min <= max on every axis.
inline bool isValid(const DAabb& box) {
  return isFinite(box.min) && isFinite(box.max) &&
         int(box.min.x <= box.max.x) & int(box.min.y <= box.max.y) & int(box.min.z <= box.max.z);
}

/// Why a box is not valid, one sentence; empty exactly when isValid(box).
std::string describeInvalid(const DAabb& box);
/// The corners as text with 17 significant digits (reads back exactly).
std::string toString(const DAabb& box);

/// The float below `f` (not NaN, not -inf): std::nextafter toward -inf
/// without the library call (the double path's moves round six per box).
/// Selects, no branch: whether a cast rounded up is a coin toss per
/// coordinate, and as branches the six of a box were mispredicted about
/// half the time.
inline float nextDown(float f) {
  const int32_t bits = std::bit_cast<int32_t>(f);
  // A positive float (sign bit clear) steps down its bits, a negative one
  // up; +0 (bits 0) goes to the negative float nearest zero.
  const int32_t step = bits > 0 ? -1 : 1;
  return std::bit_cast<float>(bits == 0 ? int32_t(0x80000001u) : bits + step);
}
/// The largest float <= x (-inf below the float range).
inline float roundDown(double x) {
  const float f = static_cast<float>(x);
  const float below = nextDown(f);
  return double(f) > x ? below : f;
}
/// The smallest float >= x (+inf above the float range).
inline float roundUp(double x) {
  const float f = static_cast<float>(x);
  const float above = -nextDown(-f);
  return double(f) < x ? above : f;
}

/// The float box that stands for `box` in a float frame whose zero is at
/// `origin`: box - origin, rounded outward (min down, max up). It contains
/// every point p of the box as p - origin, and also every float point f
/// with f + origin (rounded to a double) in the box: where the origin is
/// not zero each side is first pushed out by 2^-50 (|coordinate| +
/// |origin|), which covers the rounding of both subtractions and sums
/// (docs/large_worlds.md). So no overlap, containment or ray hit decided in
/// double can be lost in the float frame. Not validated: the result may be
/// beyond kMaxCoordinate or infinite (isValid() on it says).
[[gnu::always_inline]] inline Aabb roundOutward(const DAabb& box, const DVec3& origin) {
  Aabb r;
  for (int axis = 0; axis < 3; ++axis) {
    const double o = origin[axis];
    double lo = box.min[axis] - o;
    double hi = box.max[axis] - o;
    if (o != 0.0) {
      lo -= 0x1p-50 * (std::fabs(box.min[axis]) + std::fabs(o));
      hi += 0x1p-50 * (std::fabs(box.max[axis]) + std::fabs(o));
    }
    r.min[axis] = roundDown(lo);
    r.max[axis] = roundUp(hi);
  }
  return r;
}

/// roundOutward() of every box: out[k] = roundOutward(boxes[k], origin),
/// bit for bit (out has boxes.size() entries). Where the build has AVX2 two
/// boxes (twelve coordinates) round in three 4-wide steps without a branch:
/// the scalar form's six roundings a box mispredict about half the time.
void roundOutward(std::span<const DAabb> boxes, const DVec3& origin, Aabb* out);

}  // namespace bp
