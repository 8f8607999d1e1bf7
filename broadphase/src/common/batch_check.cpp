// allLiveAndValid (see batch_check.h).
#include "common/batch_check.h"

#include <algorithm>
#include <cmath>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace bp {

#if defined(__AVX2__)
namespace {

// Entries [k, k + 8) checked in lanes, box and handle; the eight boxes are
// read as six vectors of 48 consecutive floats, and 3 floats past them (the
// caller keeps one more box inside the span). Returns all lanes good.
inline bool eightLiveAndValid(const uint32_t* generations, const uint8_t* live, uint32_t capacity,
                              const ProxyId* ids, const float* f) {
  // |v| <= kMaxCoordinate on all 48 floats (false for NaN and infinity).
  // min <= max: float j against float j + 3, where j is a min (j mod 6 < 3);
  // the other lanes pass. The pattern repeats every 24 floats.
  const __m256 limit = _mm256_set1_ps(kMaxCoordinate);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256i notMin[3] = {_mm256_setr_epi32(0, 0, 0, -1, -1, -1, 0, 0),
                             _mm256_setr_epi32(0, -1, -1, -1, 0, 0, 0, -1),
                             _mm256_setr_epi32(-1, -1, 0, 0, 0, -1, -1, -1)};
  __m256 good = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
  for (int q = 0; q < 6; ++q) {
    const __m256 v = _mm256_loadu_ps(f + 8 * q);
    const __m256 ahead = _mm256_loadu_ps(f + 8 * q + 3);
    const __m256 inside = _mm256_cmp_ps(_mm256_andnot_ps(sign, v), limit, _CMP_LE_OQ);
    const __m256 ordered =
        _mm256_or_ps(_mm256_cmp_ps(v, ahead, _CMP_LE_OQ), _mm256_castsi256_ps(notMin[q % 3]));
    good = _mm256_and_ps(good, _mm256_and_ps(inside, ordered));
  }
  // Handles: the indices and generations of the eight (in the order 0 1 4 5
  // 2 3 6 7, the same for both); an index out of range looks up slot 0 and
  // fails on `inside`.
  const __m256 h0 = _mm256_loadu_ps(reinterpret_cast<const float*>(ids));
  const __m256 h1 = _mm256_loadu_ps(reinterpret_cast<const float*>(ids + 4));
  const __m256i index = _mm256_castps_si256(_mm256_shuffle_ps(h0, h1, 0x88));
  const __m256i generation = _mm256_castps_si256(_mm256_shuffle_ps(h0, h1, 0xDD));
  const __m256i last = _mm256_set1_epi32(int(capacity - 1));
  const __m256i inside = _mm256_cmpeq_epi32(_mm256_min_epu32(index, last), index);
  const __m256i slot = _mm256_and_si256(index, inside);
  const __m256i stored = _mm256_i32gather_epi32(reinterpret_cast<const int*>(generations), slot, 4);
  const __m256i flag = _mm256_and_si256(
      _mm256_i32gather_epi32(reinterpret_cast<const int*>(live), slot, 1), _mm256_set1_epi32(0xFF));
  const __m256i handleGood =
      _mm256_and_si256(_mm256_and_si256(inside, _mm256_cmpeq_epi32(stored, generation)),
                       _mm256_cmpeq_epi32(flag, _mm256_set1_epi32(1)));
  return (unsigned(_mm256_movemask_ps(good)) &
          unsigned(_mm256_movemask_ps(_mm256_castsi256_ps(handleGood)))) == 0xFF;
}

}  // namespace
#endif

bool allLiveAndValid(const HandlePool& pool, std::span<const ProxyId> ids,
                     std::span<const Aabb> boxes, size_t begin, size_t end) {
  bool good = true;
#if defined(__AVX2__)
  // Eight entries at a time while a ninth box follows in the span (the
  // shifted loads read 3 floats past the eighth), as long as slot indices
  // fit the gathers' signed offsets; the rest one by one.
  static_assert(sizeof(Aabb) == 6 * sizeof(float));
  const uint32_t capacity = pool.capacity();
  if (capacity > 0 && capacity < (1u << 30)) {
    const uint32_t* generations = pool.generations();
    const uint8_t* live = pool.liveFlags();
    for (; begin + 8 < boxes.size() && begin + 8 <= end; begin += 8)
      good &= eightLiveAndValid(generations, live, capacity, ids.data() + begin,
                                boxes[begin].min.data());
  }
  // isValid() in lanes: |v| <= kMaxCoordinate (false for NaN and infinity)
  // on all six, and min <= max on lanes 0-2 (lanes 3-7 compare equal values:
  // the masked load leaves 6 and 7 at 0).
  const __m256i sixLanes = _mm256_setr_epi32(-1, -1, -1, -1, -1, -1, 0, 0);
  const __m256 limit = _mm256_set1_ps(kMaxCoordinate);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256i maxLanes = _mm256_setr_epi32(3, 4, 5, 3, 4, 5, 6, 7);
  for (size_t k = begin; k < end; ++k) {
    const __m256 v = _mm256_maskload_ps(boxes[k].min.data(), sixLanes);
    const __m256 inside = _mm256_cmp_ps(_mm256_andnot_ps(sign, v), limit, _CMP_LE_OQ);
    const __m256 ordered = _mm256_cmp_ps(v, _mm256_permutevar8x32_ps(v, maxLanes), _CMP_LE_OQ);
    good &= (unsigned(_mm256_movemask_ps(_mm256_and_ps(inside, ordered)) == 0xFF) &
             unsigned(pool.isLiveBranchFree(ids[k]))) != 0;
  }
#else
  // |v| <= kMaxCoordinate is false for NaN and infinity too, and min <= max
  // is false for NaN.
  const float m = kMaxCoordinate;
  auto u = [](bool v) { return unsigned(v); };
  for (size_t k = begin; k < end; ++k) {
    const Aabb& b = boxes[k];
    good &= (u(std::fabs(b.min.x()) <= m) & u(std::fabs(b.min.y()) <= m) &
             u(std::fabs(b.min.z()) <= m) & u(std::fabs(b.max.x()) <= m) &
             u(std::fabs(b.max.y()) <= m) & u(std::fabs(b.max.z()) <= m) &
             u(b.min.x() <= b.max.x()) & u(b.min.y() <= b.max.y()) & u(b.min.z() <= b.max.z()) &
             u(pool.isLiveBranchFree(ids[k]))) != 0;
  }
#endif
  return good;
}

bool indicesAscending(std::span<const ProxyId> ids, size_t begin, size_t end) {
  begin = std::max<size_t>(begin, 1);
  bool ascending = true;
#if defined(__AVX2__)
  // Eight entries against the eight before them, indices compared unsigned
  // (sign bits flipped); a scalar loop was a noticeable share of the check
  // pass it follows (docs/performance.md, "Figures from the code's history").
  static_assert(sizeof(ProxyId) == 8);
  const __m256i sign = _mm256_set1_epi32(int(0x80000000u));
  __m256i bad = _mm256_setzero_si256();
  auto indices = [](const ProxyId* p) {
    const __m256 lo = _mm256_loadu_ps(reinterpret_cast<const float*>(p));
    const __m256 hi = _mm256_loadu_ps(reinterpret_cast<const float*>(p + 4));
    return _mm256_castps_si256(_mm256_shuffle_ps(lo, hi, 0x88));  // order 0 1 4 5 2 3 6 7
  };
  for (; begin + 8 <= end; begin += 8) {
    const __m256i now = _mm256_xor_si256(indices(ids.data() + begin), sign);
    const __m256i before = _mm256_xor_si256(indices(ids.data() + begin - 1), sign);
    bad = _mm256_or_si256(
        bad, _mm256_andnot_si256(_mm256_cmpgt_epi32(now, before), _mm256_set1_epi32(-1)));
  }
  ascending = _mm256_testz_si256(bad, bad) != 0;
#endif
  for (size_t k = begin; k < end; ++k) ascending &= ids[k - 1].index < ids[k].index;
  return ascending;
}

bool indicesAscending(std::span<const uint32_t> indices, size_t begin, size_t end) {
  begin = std::max<size_t>(begin, 1);
  bool ascending = true;
  for (size_t k = begin; k < end; ++k) ascending &= indices[k - 1] < indices[k];
  return ascending;
}

}  // namespace bp
