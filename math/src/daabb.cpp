#include <broadphase/math/daabb.h>
#include <broadphase/math/dray.h>

#include <sstream>

namespace bp {

namespace {

std::string toString(const DVec3& v) {
  std::ostringstream s;
  s.precision(17);
  s << '(' << v.x << ", " << v.y << ", " << v.z << ')';
  return s.str();
}

}  // namespace

std::string toString(const DAabb& box) {
  return "[min " + toString(box.min) + ", max " + toString(box.max) + "]";
}

std::string describeInvalid(const DAabb& box) {
  if (!isFinite(box.min) || !isFinite(box.max))
    return "box " + toString(box) + " has a NaN or infinite coordinate";
  for (int axis = 0; axis < 3; ++axis)
    if (!(box.min[axis] <= box.max[axis]))
      return "box " + toString(box) + " is inverted on axis " + "xyz"[axis] + " (min > max)";
  return {};
}

std::string describeInvalidRay(const DVec3& origin, const DVec3& direction, double length) {
  if (!isFinite(origin)) return "ray origin " + toString(origin) + " is not finite";
  if (!isFinite(direction)) return "ray direction " + toString(direction) + " is not finite";
  if (direction.x == 0.0 && direction.y == 0.0 && direction.z == 0.0)
    return "ray direction is zero";
  if (!(std::isfinite(length) && length > 0.0))
    return "ray length " + std::to_string(length) + " must be finite and > 0";
  return {};
}

}  // namespace bp
