#include <broadphase/math/aabb.h>
#include <broadphase/math/daabb.h>
#include <broadphase/math/ray.h>

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace bp {
namespace {

const float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

Aabb box(float x0, float y0, float z0, float x1, float y1, float z1) {
  return {Vec3(x0, y0, z0), Vec3(x1, y1, z1)};
}

TEST(Aabb, OverlapIsClosed) {
  const Aabb a = box(0, 0, 0, 1, 1, 1);
  EXPECT_TRUE(overlaps(a, box(1, 1, 1, 2, 2, 2)));  // touching at a corner
  EXPECT_FALSE(overlaps(a, box(1.0001f, 0, 0, 2, 1, 1)));
  EXPECT_FALSE(overlaps(a, box(0, 0, -2, 1, 1, -0.5f)));
  EXPECT_TRUE(overlaps(a, a));
}

TEST(Aabb, MergeContainsFattenArea) {
  const Aabb a = box(0, 0, 0, 1, 2, 3);
  const Aabb b = box(-1, 1, 1, 0.5f, 4, 2);
  const Aabb m = merge(a, b);
  EXPECT_TRUE(contains(m, a));
  EXPECT_TRUE(contains(m, b));
  EXPECT_FALSE(contains(a, m));
  EXPECT_FLOAT_EQ(surfaceArea(a), 2 * (1 * 2 + 2 * 3 + 3 * 1));
  const Aabb f = fatten(a, 0.5f);
  EXPECT_TRUE(contains(f, a));
  EXPECT_FLOAT_EQ(f.min.x(), -0.5f);
  EXPECT_FLOAT_EQ(f.max.z(), 3.5f);
  EXPECT_EQ(merge(Aabb::empty(), a).min, a.min);
}

TEST(Aabb, Validity) {
  EXPECT_TRUE(isValid(box(0, 0, 0, 0, 0, 0)));  // a point is a valid box
  EXPECT_FALSE(isValid(box(1, 0, 0, 0, 1, 1)));
  EXPECT_FALSE(isValid(box(kNaN, 0, 0, 1, 1, 1)));
  EXPECT_FALSE(isValid(box(0, 0, 0, kInf, 1, 1)));
  EXPECT_FALSE(isValid(box(0, 0, 0, 1, 1, 3e7f)));
  EXPECT_FALSE(isValid(Aabb::empty()));
  EXPECT_NE(describeInvalid(box(1, 0, 0, 0, 1, 1)).find("inverted on axis x"), std::string::npos);
  EXPECT_NE(describeInvalid(box(kNaN, 0, 0, 1, 1, 1)).find("NaN"), std::string::npos);
  EXPECT_TRUE(describeInvalid(box(0, 0, 0, 1, 1, 1)).empty());
}

TEST(Aabb, DistanceSquared) {
  const Aabb a = box(0, 0, 0, 1, 1, 1);
  EXPECT_EQ(distanceSquared(a, Vec3(0.5f, 0.5f, 0.5f)), 0.0f);
  EXPECT_FLOAT_EQ(distanceSquared(a, Vec3(3, 0.5f, 0.5f)), 4.0f);
  EXPECT_FLOAT_EQ(distanceSquared(a, Vec3(2, 2, 0.5f)), 2.0f);
}

TEST(Ray, SlabEntryAndInside) {
  const Aabb a = box(2, -1, -1, 4, 1, 1);
  float t = -1;
  EXPECT_TRUE(intersectRayAabb(makeRay(Vec3(0, 0, 0), Vec3(1, 0, 0), 10), a, t));
  EXPECT_FLOAT_EQ(t, 2.0f);
  EXPECT_TRUE(intersectRayAabb(makeRay(Vec3(3, 0, 0), Vec3(1, 0, 0), 10), a, t));
  EXPECT_EQ(t, 0.0f);  // origin inside
  EXPECT_FALSE(intersectRayAabb(makeRay(Vec3(0, 0, 0), Vec3(1, 0, 0), 1.5f), a, t));  // too short
  EXPECT_FALSE(intersectRayAabb(makeRay(Vec3(0, 0, 0), Vec3(-1, 0, 0), 10), a, t));   // behind
}

TEST(Ray, ParallelToAxisHasNoNaN) {
  const Aabb a = box(2, -1, -1, 4, 1, 1);
  float t = -1;
  // Parallel to x, origin exactly on the y = 1 face plane: touching counts.
  EXPECT_TRUE(intersectRayAabb(makeRay(Vec3(0, 1, 0), Vec3(1, 0, 0), 10), a, t));
  EXPECT_FLOAT_EQ(t, 2.0f);
  // On the y = -1 plane, and with a negative zero component.
  EXPECT_TRUE(intersectRayAabb(makeRay(Vec3(0, -1, 0), Vec3(1, -0.0f, 0), 10), a, t));
  // Parallel and outside the slab.
  EXPECT_FALSE(intersectRayAabb(makeRay(Vec3(0, 1.5f, 0), Vec3(1, 0, 0), 10), a, t));
  EXPECT_FALSE(intersectRayAabb(makeRay(Vec3(0, -1.5f, 0), Vec3(1, -0.0f, 0), 10), a, t));
  // Flat box, ray in its plane.
  EXPECT_TRUE(
      intersectRayAabb(makeRay(Vec3(0, 0, 0), Vec3(1, 0, 0), 10), box(2, 0, 0, 2, 0, 0), t));
  EXPECT_FLOAT_EQ(t, 2.0f);
}

TEST(Ray, Validation) {
  EXPECT_TRUE(describeInvalidRay(Vec3(0, 0, 0), Vec3(0, 0, 2), 1).empty());
  EXPECT_FALSE(describeInvalidRay(Vec3(0, 0, 0), Vec3(0, 0, 0), 1).empty());
  EXPECT_FALSE(describeInvalidRay(Vec3(0, 0, 0), Vec3(kNaN, 0, 1), 1).empty());
  EXPECT_FALSE(describeInvalidRay(Vec3(kInf, 0, 0), Vec3(0, 0, 1), 1).empty());
  EXPECT_FALSE(describeInvalidRay(Vec3(0, 0, 0), Vec3(0, 0, 1), 0).empty());
  EXPECT_FALSE(describeInvalidRay(Vec3(0, 0, 0), Vec3(0, 0, 1), -1).empty());
  EXPECT_FALSE(describeInvalidRay(Vec3(0, 0, 0), Vec3(0, 0, 1), kInf).empty());
  const Ray r = makeRay(Vec3(0, 0, 0), Vec3(0, 3, 4), 1);
  EXPECT_FLOAT_EQ(r.direction.norm(), 1.0f);
  // Denormal and huge directions normalise without NaN.
  for (float s : {1e-40f, 1e-20f, 1e30f, 3e38f}) {
    const Ray q = makeRay(Vec3(0, 0, 0), Vec3(s, s, 0), 1);
    EXPECT_TRUE(describeInvalidRay(Vec3(0, 0, 0), Vec3(s, s, 0), 1).empty()) << s;
    EXPECT_FLOAT_EQ(q.direction.norm(), 1.0f) << s;
    EXPECT_FLOAT_EQ(q.direction.x(), q.direction.y()) << s;
  }
}

// isValidRay (the batch's check) accepts exactly the rays that
// describeInvalidRay finds nothing wrong with.
TEST(Ray, IsValidRayAgreesWithItsDescription) {
  const float far = 2.0f * kMaxCoordinate;
  const Vec3 origins[] = {Vec3(0, 0, 0),   Vec3(kInf, 0, 0), Vec3(0, kNaN, 0),
                          Vec3(0, 0, far), Vec3(-far, 0, 0), Vec3(kMaxCoordinate, 1, -1)};
  const Vec3 directions[] = {Vec3(0, 0, 1),    Vec3(0, 0, 0),    Vec3(-0.0f, 0, 0),
                             Vec3(kNaN, 0, 1), Vec3(0, kInf, 0), Vec3(1e-40f, 0, 0)};
  const float lengths[] = {1.0f, 0.0f, -1.0f, kInf, kNaN, 1e-30f};
  int valid = 0;
  for (const Vec3& o : origins)
    for (const Vec3& d : directions)
      for (const float length : lengths) {
        const bool described = describeInvalidRay(o, d, length).empty();
        EXPECT_EQ(isValidRay(o, d, length), described)
            << o.transpose() << " / " << d.transpose() << " / " << length;
        valid += described;
      }
  EXPECT_GT(valid, 0);
}

// roundDown/roundUp (math/daabb.h, the double path's outward rounding) are
// the largest float <= x and the smallest float >= x: checked against
// std::nextafter on edge values and on random doubles of every magnitude.
TEST(DAabb, RoundDownAndUpAreTheNearestFloatsOutward) {
  constexpr double kDoubleInf = std::numeric_limits<double>::infinity();
  const auto refDown = [](double x) {
    float f = static_cast<float>(x);
    while (double(f) > x) f = std::nextafter(f, -std::numeric_limits<float>::infinity());
    return f;
  };
  const auto refUp = [](double x) {
    float f = static_cast<float>(x);
    while (double(f) < x) f = std::nextafter(f, std::numeric_limits<float>::infinity());
    return f;
  };
  const auto same = [](float a, float b) {
    return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
  };
  std::vector<double> xs = {0.0,
                            -0.0,
                            1.0,
                            -1.0,
                            0.1,
                            -0.1,
                            1e-45,
                            -1e-45,
                            1e-300,
                            -1e-300,
                            double(std::numeric_limits<float>::max()),
                            1e39,
                            -1e39,
                            kDoubleInf,
                            -kDoubleInf,
                            double(std::numeric_limits<float>::denorm_min()),
                            16777217.0,
                            -16777217.0,
                            1e9 + 0.25,
                            -1e9 - 0.25};
  std::mt19937_64 rng(11);
  for (int i = 0; i < 200000; ++i) {
    const double mantissa = std::uniform_real_distribution<double>(-1.0, 1.0)(rng);
    const int exponent = int(rng() % 300) - 150;
    xs.push_back(std::ldexp(mantissa, exponent));
  }
  for (const double x : xs) {
    ASSERT_TRUE(same(roundDown(x), refDown(x))) << x;
    ASSERT_TRUE(same(roundUp(x), refUp(x))) << x;
  }
}

// The batch roundOutward (two boxes a step where the build has AVX2) gives
// the scalar form's boxes bit for bit: every coordinate of every box, odd
// and even counts, origins with zero and non-zero components (the pad is
// skipped per axis), coordinates of every magnitude, signed zeros, values
// that round to zero or overflow the float range, infinities and NaN.
TEST(DAabb, BatchRoundOutwardIsTheScalarOne) {
  constexpr double kDoubleInf = std::numeric_limits<double>::infinity();
  const std::vector<double> special = {
      0.0,   -0.0,   1e-300, -1e-300,    1e-46,      -1e-46,     1e39,        -1e39,
      1e300, -1e300, 1e9,    1e9 + 0.25, 16777217.0, kDoubleInf, -kDoubleInf, std::nan("")};
  std::mt19937_64 rng(23);
  const auto coordinate = [&]() {
    if (rng() % 8 == 0) return special[rng() % special.size()];
    const double mantissa = std::uniform_real_distribution<double>(-1.0, 1.0)(rng);
    return std::ldexp(mantissa, int(rng() % 200) - 100);
  };
  const std::vector<DVec3> origins = {{0, 0, 0},       {1e9, 1e9, 1e9},  {1e9, 0, -3.5},
                                      {0, -0.0, 1e12}, {-2.5, 1e-40, 0}, {0x1p50, 0x1p50, 0x1p50}};
  const auto same = [](float a, float b) {
    return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
  };
  for (const DVec3& origin : origins) {
    for (size_t count : {size_t(0), size_t(1), size_t(2), size_t(7), size_t(1000)}) {
      std::vector<DAabb> boxes(count);
      for (DAabb& b : boxes) {
        for (int axis = 0; axis < 3; ++axis) {
          // Near the origin most of the time, as stored boxes are.
          const bool near = rng() % 2 == 0;
          b.min[axis] = coordinate() + (near ? origin[axis] : 0.0);
          b.max[axis] = coordinate() + (near ? origin[axis] : 0.0);
        }
      }
      std::vector<Aabb> batch(count);
      roundOutward(boxes, origin, batch.data());
      for (size_t k = 0; k < count; ++k) {
        const Aabb one = roundOutward(boxes[k], origin);
        for (int axis = 0; axis < 3; ++axis) {
          ASSERT_TRUE(same(batch[k].min[axis], one.min[axis])) << "box " << k << " axis " << axis;
          ASSERT_TRUE(same(batch[k].max[axis], one.max[axis])) << "box " << k << " axis " << axis;
        }
      }
    }
  }
}

}  // namespace
}  // namespace bp
