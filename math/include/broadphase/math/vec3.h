/// \file
/// Vec3: the one vector type of the library, and the coordinate limit.
///
/// Float conventions (they hold for every header in broadphase/):
/// - All geometry is float32. Eigen::Vector3f is 12 bytes with no alignment
///   requirement, so it may sit inside plain structs and std::vector freely.
/// - The library is compiled with -ffp-contract=off so that no build fuses a
///   multiply and an add behind our back: the same inputs give the same bits
///   on every machine and for every thread count.
/// - A coordinate is "valid" when it is finite and its magnitude is at most
///   kMaxCoordinate. Beyond that, float spacing exceeds 1 unit and a fat margin
///   of a few centimetres would be rounded away.
#pragma once

#include <Eigen/Core>

#include <cmath>

namespace bp {

/// A point or a direction in world units (float32, 12 bytes, no alignment
/// requirement: safe in plain structs and std::vector).
using Vec3 = Eigen::Vector3f;

/// Largest coordinate magnitude accepted at the API boundary (2^24). Float
/// spacing at 2^24 is 2 units, so worlds that large should use an origin shift.
inline constexpr float kMaxCoordinate = 16777216.0f;

/// True when no component is NaN or infinite.
inline bool isFinite(const Vec3& v) {
  return std::isfinite(v.x()) && std::isfinite(v.y()) && std::isfinite(v.z());
}

/// True when every component's magnitude is at most kMaxCoordinate. False for
/// NaN and infinity, so it implies isFinite().
inline bool isWithinLimit(const Vec3& v) {
  return std::fabs(v.x()) <= kMaxCoordinate && std::fabs(v.y()) <= kMaxCoordinate &&
         std::fabs(v.z()) <= kMaxCoordinate;
}

}  // namespace bp
