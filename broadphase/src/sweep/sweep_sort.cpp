// The sort of a cell's keys at its refresh (see sweep_sort.h).
#include "sweep/sweep_sort.h"

#include <algorithm>
#include <cstring>
#include <vector>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

// The AVX-512 pre-pass is compiled apart from the build's baseline (as the
// 16-lane sweep kernel) and chosen at run time.
#if defined(__AVX2__) && defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define BP_HAVE_AVX512_SORT 1
#define BP_AVX512_TARGET __attribute__((target("avx512f")))
#endif

// GCC 12's AVX-512 headers pass an undefined vector as the unused source of
// unmasked intrinsics, which -Wmaybe-uninitialized reports; no lane of it is
// read (as in sweep_kernel_wide.cpp).
#if defined(BP_HAVE_AVX512_SORT) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace bp {

namespace {

bool cpuHasAvx512() {
#if defined(BP_HAVE_AVX512_SORT)
  static const bool yes = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") != 0;
  }();
  return yes;
#else
  return false;
#endif
}

// The prepass that runs for `wanted`: automatic is the widest available, and
// one not available falls back to the next narrower.
SortPrepass resolve(SortPrepass wanted) {
  const bool avx2 =
#if defined(__AVX2__)
      true;
#else
      false;
#endif
  if ((wanted == SortPrepass::automatic || wanted == SortPrepass::avx512) && cpuHasAvx512())
    return SortPrepass::avx512;
  if (wanted != SortPrepass::bubble && avx2) return SortPrepass::avx2;
  return SortPrepass::bubble;
}

// Insertion sort of nearly sorted keys; gives up (leaving a permutation) once
// more than `budget` keys have been shifted. After the pre-pass most of the
// keys are in place: with AVX2 the scan for the next inversion compares four
// neighbours at once, so the sorted stretches cost no branch per key.
bool insertionSortKeys(uint64_t* keys, uint32_t n, uint64_t budget) {
  uint64_t shifts = 0;
  uint32_t i = 1;
  for (;;) {
#if defined(__AVX2__)
    // Unsigned order through the sign flip and the signed compare.
    const __m256i sign = _mm256_set1_epi64x(int64_t(0x8000000000000000ull));
    for (; i + 4 <= n; i += 4) {
      const __m256i before = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(keys + i - 1));
      const __m256i at = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(keys + i));
      const __m256i inverted =
          _mm256_cmpgt_epi64(_mm256_xor_si256(before, sign), _mm256_xor_si256(at, sign));
      const int mask = _mm256_movemask_pd(_mm256_castsi256_pd(inverted));
      if (mask != 0) {
        i += uint32_t(__builtin_ctz(unsigned(mask)));
        break;
      }
    }
#endif
    while (i < n && keys[i - 1] <= keys[i]) ++i;
    if (i >= n) return true;
    const uint64_t key = keys[i];
    uint32_t j = i;
    do {
      keys[j] = keys[j - 1];
      --j;
    } while (j > 0 && keys[j - 1] > key);
    keys[j] = key;
    shifts += i - j;
    if (shifts > budget) return false;
    ++i;
  }
}

// The pre-pass without AVX2. One pass of bubble sort without branches: the
// larger key is carried forward (min/max with conditional moves). It settles the keys that moved
// one place down and any that moved up, so the insertion sort after it
// mostly finds its keys in place, and its branch is predicted: a quarter of
// the entries of uniform 10^5 change places each frame, mostly by one,
// which cost a mispredicted branch each; it speeds up uniform and leaves
// plane unchanged (docs/decisions.md, "Coherence and the sort"). A second
// pass carrying the smaller key backward gained nothing more.
void bubbleForward(uint64_t* keys, uint32_t n) {
  if (n < 2) return;
  uint64_t carry = keys[0];
  for (uint32_t i = 1; i < n; ++i) {
    const uint64_t k = keys[i];
    keys[i - 1] = k < carry ? k : carry;
    carry = k < carry ? carry : k;
  }
  keys[n - 1] = carry;
}

#if defined(__AVX2__)
// Compare-exchange of neighbours 2k and 2k+1 within four keys.
inline __m256i exchangePairs4(__m256i v, __m256i sign) {
  const __m256i swapped = _mm256_permute4x64_epi64(v, 0xB1);
  const __m256i greater =
      _mm256_cmpgt_epi64(_mm256_xor_si256(v, sign), _mm256_xor_si256(swapped, sign));
  const __m256i lo = _mm256_blendv_epi8(v, swapped, greater);
  const __m256i hi = _mm256_blendv_epi8(swapped, v, greater);
  return _mm256_blend_epi32(lo, hi, 0xCC);
}

// Two rounds of odd-even transposition sort (neighbours 2k and 2k+1, then
// 2k+1 and 2k+2), four keys a vector. Each step is a separate pass over the
// keys: a step streaming on the last one's vectors would either reload across
// two fresh stores (a failed store forward) or carry a register from vector
// to vector (a chain of shuffles); measured, both were slower. Keys past the
// last whole vector are left to the insertion sort.
void oddEvenAvx2(uint64_t* keys, uint32_t n) {
  const __m256i sign = _mm256_set1_epi64x(int64_t(0x8000000000000000ull));
  for (int round = 0; round < 2; ++round)
    for (uint32_t start = 0; start < 2; ++start)
      for (uint32_t i = start; i + 4 <= n; i += 4) {
        __m256i* at = reinterpret_cast<__m256i*>(keys + i);
        _mm256_storeu_si256(at, exchangePairs4(_mm256_loadu_si256(at), sign));
      }
}
#endif

#if defined(BP_HAVE_AVX512_SORT)
// As oddEvenAvx2, eight keys a vector, with unsigned 64-bit min and max.
BP_AVX512_TARGET void oddEvenAvx512(uint64_t* keys, uint32_t n) {
  for (int round = 0; round < 2; ++round)
    for (uint32_t start = 0; start < 2; ++start)
      for (uint32_t i = start; i + 8 <= n; i += 8) {
        const __m512i v = _mm512_loadu_si512(keys + i);
        const __m512i swapped = _mm512_permutex_epi64(v, 0xB1);
        _mm512_storeu_si512(keys + i, _mm512_mask_blend_epi64(0xAA, _mm512_min_epu64(v, swapped),
                                                              _mm512_max_epu64(v, swapped)));
      }
}
#endif

// The pre-pass that settles most of the small moves before the insertion
// sort, so that its branch is rarely taken.
void settle(uint64_t* keys, uint32_t n, SortPrepass prepass) {
  switch (resolve(prepass)) {
#if defined(BP_HAVE_AVX512_SORT)
    case SortPrepass::avx512: oddEvenAvx512(keys, n); return;
#endif
#if defined(__AVX2__)
    case SortPrepass::avx2: oddEvenAvx2(keys, n); return;
#endif
    default: bubbleForward(keys, n);
  }
}

}  // namespace

bool sortPrepassAvailable(SortPrepass prepass) {
  return prepass == SortPrepass::automatic || resolve(prepass) == prepass;
}

// Sorts the n keys of a refreshed cell: keys[0, old) are last frame's
// members in last frame's order with their new keys (nearly sorted: an
// insertion sort repairs them, std::sort past a budget of 8 shifts a key),
// keys[old, n) the entrants, in no order. Entrants are sorted on their own
// and merged in from the back, each after a binary search, so a box that
// entered is not shifted one step at a time across the cell: appended at the
// end and insertion-sorted, the ~3% of boxes that change cells each frame
// made up most of the shifts on uniform 10^5.
void sortCellKeys(uint64_t* keys, uint32_t old, uint32_t n, SortPrepass prepass) {
  const uint32_t entrants = n - old;
  if (entrants > old / 4) {  // a new cell, or a crowd arrived: sort afresh
    std::sort(keys, keys + n);
    return;
  }
  settle(keys, old, prepass);
  if (!insertionSortKeys(keys, old, 8 * uint64_t(old) + 64)) std::sort(keys, keys + old);
  if (entrants == 0) return;
  uint64_t* in = keys + old;
  if (entrants > 1) std::sort(in, in + entrants);
  // The entrants are copied out, since the merge writes over their places:
  // to the stack when few, else to a per-thread buffer.
  uint64_t held[64];
  thread_local std::vector<uint64_t> heap;
  const bool onStack = entrants <= 64;
  if (onStack)
    std::copy(in, in + entrants, held);
  else
    heap.assign(in, in + entrants);
  const uint64_t* enter = onStack ? held : heap.data();
  // Entrant j (from the largest) goes after every old key below it; the old
  // keys above it move up by the j + 1 entrants not placed yet.
  uint32_t end = old;
  for (uint32_t j = entrants; j-- > 0;) {
    const uint32_t at = uint32_t(std::upper_bound(keys, keys + end, enter[j]) - keys);
    std::memmove(keys + at + j + 1, keys + at, size_t(end - at) * sizeof(uint64_t));
    keys[at + j] = enter[j];
    end = at;
  }
}

}  // namespace bp
