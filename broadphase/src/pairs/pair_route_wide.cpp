// The pair router's AVX-512 split (pair_route_wide.h).
#include "pairs/pair_route_wide.h"

#include "common/wide_target.h"

#include <cstddef>

namespace bp::wide {

// A pair is one 64-bit lane with `a` in its low half (x86 is little-endian).
static_assert(sizeof(Pair) == 8 && offsetof(Pair, a) == 0 && offsetof(Pair, b) == 4);

#if defined(BP_HAVE_WIDE_KERNEL)

BP_WIDE_TARGET const Pair* routePairs(const Pair* p, const Pair* end, Pair** at,
                                      const uint32_t* firstA, uint32_t parts) {
  const __m512i lowHalf = _mm512_set1_epi64(0xFFFFFFFFll);
  __m512i start[kMaxRouteParts];
  for (uint32_t q = 1; q < parts; ++q) start[q] = _mm512_set1_epi64(int64_t(firstA[q]));
  for (; end - p >= 8; p += 8) {
    const __m512i v = _mm512_loadu_si512(p);
    const __m512i a = _mm512_and_si512(v, lowHalf);
    // Part q: the lanes at or past its start and not past the next part's.
    __mmask8 atOrPast = 0xFF;
    for (uint32_t q = 0; q < parts; ++q) {
      const __mmask8 pastNext =
          q + 1 < parts ? _mm512_cmpge_epu64_mask(a, start[q + 1]) : __mmask8(0);
      const __mmask8 mine = atOrPast & __mmask8(~pastNext);
      _mm512_storeu_si512(at[q], _mm512_maskz_compress_epi64(mine, v));
      at[q] += __builtin_popcount(mine);
      atOrPast = pastNext;
    }
  }
  return p;
}

#else

const Pair* routePairs(const Pair* p, const Pair*, Pair**, const uint32_t*, uint32_t) { return p; }

#endif

}  // namespace bp::wide
