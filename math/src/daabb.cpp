#include <broadphase/math/daabb.h>
#include <broadphase/math/dray.h>

#include <sstream>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

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

#if defined(__AVX2__)
namespace {

// roundOutward() of two boxes at once. Their twelve coordinates, as laid out
// in memory (min x y z, max x y z, twice), are three vectors of four lanes;
// lane i of vector v is coordinate 4v + i, which is a min (rounded down) or a
// max (rounded up) and belongs to axis (4v + i) mod 3. Each lane does what
// the scalar form does to its coordinate, in the same order of operations,
// so the result is the same bit for bit.
struct TwoBoxLanes {
  __m256d origin[3];  // the origin's component of each lane's axis
  __m256d padOn[3];   // all ones where that component is not zero (the scalar's `o != 0`)
  __m256d downD[3];   // all ones in the lanes that round down (mins), as doubles
  __m128i downF[3];   // the same, as 32-bit lanes
};

TwoBoxLanes twoBoxLanes(const DVec3& origin) {
  TwoBoxLanes l;
  for (int v = 0; v < 3; ++v) {
    alignas(32) double o[4], on[4], down[4];
    alignas(16) int32_t downBits[4];
    for (int i = 0; i < 4; ++i) {
      const int coordinate = (4 * v + i) % 6;  // 0-2: min x y z, 3-5: max x y z
      o[i] = origin[coordinate % 3];
      on[i] = o[i] != 0.0 ? std::bit_cast<double>(~uint64_t(0)) : 0.0;
      down[i] = coordinate < 3 ? std::bit_cast<double>(~uint64_t(0)) : 0.0;
      downBits[i] = coordinate < 3 ? -1 : 0;
    }
    l.origin[v] = _mm256_load_pd(o);
    l.padOn[v] = _mm256_load_pd(on);
    l.downD[v] = _mm256_load_pd(down);
    l.downF[v] = _mm_load_si128(reinterpret_cast<const __m128i*>(downBits));
  }
  return l;
}

// Four coordinates x of one lane pattern, rounded outward as floats.
inline __m128 roundFourOutward(__m256d x, const TwoBoxLanes& l, int v) {
  const __m256d signBit = _mm256_set1_pd(-0.0);
  const __m256d o = l.origin[v];
  // d = x - o; where o != 0, pushed out by 2^-50 (|x| + |o|): subtracted
  // from a min, added to a max (the product is exact, so d + (-pad) is the
  // scalar's d - pad). Where o == 0, d as it is (adding a zero could turn
  // -0 into +0).
  const __m256d d = _mm256_sub_pd(x, o);
  const __m256d pad =
      _mm256_mul_pd(_mm256_set1_pd(0x1p-50),
                    _mm256_add_pd(_mm256_andnot_pd(signBit, x), _mm256_andnot_pd(signBit, o)));
  const __m256d signedPad = _mm256_xor_pd(pad, _mm256_and_pd(signBit, l.downD[v]));
  const __m256d w = _mm256_blendv_pd(d, _mm256_add_pd(d, signedPad), l.padOn[v]);
  // The nearest float, then one step down (mins) or up (maxes) where it
  // landed on the wrong side: roundDown() and roundUp().
  const __m128 f = _mm256_cvtpd_ps(w);
  const __m256d back = _mm256_cvtps_pd(f);
  const __m256d wrong = _mm256_blendv_pd(_mm256_cmp_pd(back, w, _CMP_LT_OQ),
                                         _mm256_cmp_pd(back, w, _CMP_GT_OQ), l.downD[v]);
  // The 64-bit lane masks as 32-bit ones (the low half of each).
  const __m128i wrong32 = _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(
      _mm256_castpd_si256(wrong), _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6)));
  // One step of the bits: toward -inf, a positive float's bits go down and a
  // negative one's up; toward +inf the other way; a zero of either sign
  // goes to the float nearest zero on that side (as nextDown()).
  const __m128i bits = _mm_castps_si128(f);
  const __m128i down = l.downF[v];
  const __m128i negative = _mm_srai_epi32(bits, 31);
  const __m128i step = _mm_or_si128(_mm_xor_si128(negative, down), _mm_set1_epi32(1));
  const __m128i isZero =
      _mm_cmpeq_epi32(_mm_and_si128(bits, _mm_set1_epi32(0x7fffffff)), _mm_setzero_si128());
  const __m128i fromZero =
      _mm_or_si128(_mm_and_si128(down, _mm_set1_epi32(int32_t(0x80000000u))), _mm_set1_epi32(1));
  const __m128i stepped = _mm_blendv_epi8(_mm_add_epi32(bits, step), fromZero, isZero);
  return _mm_castsi128_ps(_mm_blendv_epi8(bits, stepped, wrong32));
}

}  // namespace
#endif

void roundOutward(std::span<const DAabb> boxes, const DVec3& origin, Aabb* out) {
  size_t k = 0;
#if defined(__AVX2__)
  static_assert(sizeof(DAabb) == 6 * sizeof(double) && sizeof(Aabb) == 6 * sizeof(float),
                "two boxes are twelve packed coordinates");
  const TwoBoxLanes lanes = twoBoxLanes(origin);
  for (; k + 2 <= boxes.size(); k += 2) {
    const double* in = &boxes[k].min.x;
    float* to = out[k].min.data();
    for (int v = 0; v < 3; ++v)
      _mm_storeu_ps(to + 4 * v, roundFourOutward(_mm256_loadu_pd(in + 4 * v), lanes, v));
  }
#endif
  for (; k < boxes.size(); ++k) out[k] = roundOutward(boxes[k], origin);
}

}  // namespace bp
