// AVX2 helpers of SweepGrid's batch move and refresh, kept out of the
// installed header so that the class reads the same whatever the includer's
// -march.
#pragma once

#if defined(__AVX2__)
#include <broadphase/math/aabb.h>
#include "sweep/sweep_grid.h"

#include <immintrin.h>

#include <cstdint>

namespace bp {

// The six floats of a box (min x, y, z, max x, y, z) in lanes 0-5, 0 in 6
// and 7.
inline __m256i sixLanes() { return _mm256_setr_epi32(-1, -1, -1, -1, -1, -1, 0, 0); }
inline __m256 loadBox(const Aabb& box) { return _mm256_maskload_ps(box.min.data(), sixLanes()); }
// The same from SweepGrid's padded storage: one aligned load (the padding
// holds 0, as loadBox's lanes 6 and 7 do).
inline __m256 loadBox(const StoredBox& b) { return _mm256_load_ps(b.box.min.data()); }
inline void storeBox(StoredBox& b, __m256 lanes) { _mm256_store_ps(b.box.min.data(), lanes); }

// SweepGrid::dirtyStateFor on a box in lanes, without a branch: rangeOf()
// (floor(v * 1/side) per lane, `invSide8` holding the three inverse sides
// twice, then 0, 0), packed to 16 bits with saturation, against the proxy's
// RangeKey, eight lanes at once (a box's lanes 6 and 7 are 0; a key has 1 in
// lane 6 when the proxy cannot stay, in lane 7 when its range is wide).
inline uint8_t dirtyStateInLanes(__m256 box, const float* invSide8, const RangeKey& key) {
  const __m256i cells =
      _mm256_cvttps_epi32(_mm256_floor_ps(_mm256_mul_ps(box, _mm256_loadu_ps(invSide8))));
  const __m128i packed =
      _mm_packs_epi32(_mm256_castsi256_si128(cells), _mm256_extracti128_si256(cells, 1));
  const __m128i same =
      _mm_cmpeq_epi16(packed, _mm_load_si128(reinterpret_cast<const __m128i*>(key.lane)));
  return _mm_movemask_epi8(same) == 0xFFFF ? kDirtyStayed : kDirtyRelink;
}

}  // namespace bp
#endif
