#include <broadphase/math/aabb.h>
#include <broadphase/math/ray.h>

#include <sstream>

namespace bp {

namespace {

std::string toString(const Vec3& v) {
  std::ostringstream s;
  s.precision(9);
  s << '(' << v.x() << ", " << v.y() << ", " << v.z() << ')';
  return s.str();
}

}  // namespace

std::string toString(const Aabb& box) {
  return "[min " + toString(box.min) + ", max " + toString(box.max) + "]";
}

std::string describeInvalid(const Aabb& box) {
  if (!isFinite(box.min) || !isFinite(box.max))
    return "box " + toString(box) + " has a NaN or infinite coordinate";
  if (!isWithinLimit(box.min) || !isWithinLimit(box.max))
    return "box " + toString(box) + " is beyond the coordinate limit 2^24 (use an origin shift)";
  for (int axis = 0; axis < 3; ++axis)
    if (!(box.min[axis] <= box.max[axis]))
      return "box " + toString(box) + " is inverted on axis " + "xyz"[axis] + " (min > max)";
  return {};
}

std::string describeInvalidRay(const Vec3& origin, const Vec3& direction, float length) {
  if (!isFinite(origin)) return "ray origin " + toString(origin) + " is not finite";
  if (!isWithinLimit(origin))
    return "ray origin " + toString(origin) + " is beyond the coordinate limit 2^24";
  if (!isFinite(direction)) return "ray direction " + toString(direction) + " is not finite";
  if (direction.x() == 0.0f && direction.y() == 0.0f && direction.z() == 0.0f)
    return "ray direction is zero";
  if (!(std::isfinite(length) && length > 0.0f))
    return "ray length " + std::to_string(length) + " must be finite and > 0";
  return {};
}

}  // namespace bp
