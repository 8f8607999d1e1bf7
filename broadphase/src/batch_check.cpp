// allLiveAndValid (see batch_check.h).
#include "batch_check.h"

#include <cmath>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace bp {

bool allLiveAndValid(const HandlePool& pool, std::span<const ProxyId> ids,
                     std::span<const Aabb> boxes, size_t begin, size_t end) {
  bool good = true;
#if defined(__AVX2__)
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

}  // namespace bp
