// The 16-lane cell sweeps (see sweep_kernel_wide.h). Same tests, same dedup
// rule and same output set as the 8-lane kernels of sweep_kernel.cpp; only
// the order of pairs within a worker's buffer may differ, and the merge sorts
// that away.
#include "sweep/sweep_kernel_wide.h"

#include "common/wide_target.h"
#include "sweep/budget_gate.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace bp::wide {

#if defined(BP_HAVE_WIDE_KERNEL)

namespace {

// Writes the pairs of entry `idi` with the lanes of `pass` of the block whose
// ids start at `ids`: the passing ids are compressed to the front, paired
// (lower id first) and all sixteen pairs stored, of which popcount(pass) are
// kept. Only lanes of `pass` are loaded.
BP_WIDE_TARGET inline void emitPairs(PairWriter& out, __m512i idi, const uint32_t* ids,
                                     __mmask16 pass) {
  const __m512i idj = _mm512_maskz_loadu_epi32(pass, ids);
  const __m512i packed = _mm512_maskz_compress_epi32(pass, idj);
  const __m512i lo = _mm512_min_epu32(idi, packed);
  const __m512i hi = _mm512_max_epu32(idi, packed);
  const __m512i first = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i second =
      _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  Pair* w = out.block();
  const uint32_t count = uint32_t(__builtin_popcount(pass));
  _mm512_storeu_si512(w, _mm512_permutex2var_epi32(lo, first, hi));
  // More than 8 pairs from one block is rare but on dense piles, so the
  // branch is predicted either way.
  if (count > 8) _mm512_storeu_si512(w + 8, _mm512_permutex2var_epi32(lo, second, hi));
  out.advance(count);
}

// Lanes where the OR of the two entries' starts-here bits is 0b111: the
// candidates' flags in lanes (fj), then as loaded from `flags`.
BP_WIDE_TARGET inline __mmask16 reportedHere16(__m512i fj, __m512i fi) {
  const __m512i starts = _mm512_set1_epi32(7);
  return _mm512_cmpeq_epi32_mask(_mm512_and_si512(_mm512_or_si512(fj, fi), starts), starts);
}
BP_WIDE_TARGET inline __mmask16 reportedHere16(const uint8_t* flags, __m512i fi) {
  return reportedHere16(
      _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(flags))), fi);
}

// Lanes 2-15 of w moved down two, and p[0], p[1] in lanes 14 and 15.
BP_WIDE_TARGET inline __m512i slideInTwo(__m512i w, const float* p) {
  int64_t two;
  std::memcpy(&two, p, sizeof(two));
  return _mm512_alignr_epi32(_mm512_set1_epi64(two), w, 2);
}

}  // namespace

// As SweepGrid::sweepCell: keys sorted on min x, so the lanes passing x are a
// prefix and the scan goes on only while a block is entirely inside (the
// +inf padding ends it). The five compares are independent and ANDed, so the
// pair branch resolves early.
//
// deferWrites: where most entries find no pair (uniform 10^5: 0.4 pairs an
// entry, one block an entry), writing a block's pairs is about half of the
// block's instructions, so the first block's pass mask is only stored, and a
// second pass finds the entries with pairs 32 masks at a time and writes
// theirs. A branch per entry on "any pair" would mispredict (see
// sweep_kernel_wide.h); the second pass branches once per entry with pairs
// and once per 32 entries. An entry's later blocks write as they go.
// One body, compiled twice: with the choice a run-time flag, the compiler kept
// it inside the loop (more instructions; docs/performance.md, "Figures from
// the code's history").
template <bool kDeferWrites, class Gate>
BP_WIDE_TARGET void sweepCellWith(const CellArrays& c, uint32_t begin, uint32_t end,
                                  PairBuffer& buffer, Gate& gate) {
  PairWriter out(buffer);
  const uint8_t* flags = c.flags;
  const uint32_t* ids = c.ids;
  const float* minX = c.key[0];
  const float* maxX = c.key[1];
  const float* minY = c.key[2];
  const float* maxY = c.key[3];
  const float* minZ = c.key[4];
  const float* maxZ = c.key[5];
  // Per thread, kept across cells and frames; 32 masks of padding (zero) for
  // the second pass's last load.
  thread_local std::vector<uint16_t> maskScratch;
  const uint32_t count = end > begin ? end - begin : 0;
  if constexpr (kDeferWrites) maskScratch.resize(size_t(count) + 32);
  uint16_t* masks = maskScratch.data();
  // The first block of entry i (entries i + 1 ... i + 16) is kept in
  // registers and slides along (valignd with the entries that come in), so
  // it costs a broadcast load a column instead of a 64-byte load that
  // crosses a cache line 15 times in 16 (docs/decisions.md, "The cell
  // kernels"). It reads entries begin + 1 ... begin + 16, inside the padding
  // only for an entry that exists.
  if (begin >= end) {
    out.finish();
    return;
  }
  __m512i wMinX = _mm512_loadu_si512(minX + begin + 1);
  __m512i wMinY = _mm512_loadu_si512(minY + begin + 1);
  __m512i wMaxY = _mm512_loadu_si512(maxY + begin + 1);
  __m512i wMinZ = _mm512_loadu_si512(minZ + begin + 1);
  __m512i wMaxZ = _mm512_loadu_si512(maxZ + begin + 1);
  __m512i wFlags =
      _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(flags + begin + 1)));
  // Entry `at`'s first block against the window, and its later blocks from
  // entry i + 17 on. `skip` masks the window's lanes that are not its
  // candidates (lane 0 is entry i + 1 itself when at = i + 1); the pass mask
  // is stored (or written) shifted by them, so that bit k stands for entry
  // at + 1 + k whatever the window.
  auto sweepEntry = [&](uint32_t at, uint32_t i, uint32_t skip) BP_WIDE_LAMBDA {
    const __m512 xi = _mm512_set1_ps(maxX[at]);
    const __m512 loY = _mm512_set1_ps(minY[at]), hiY = _mm512_set1_ps(maxY[at]);
    const __m512 loZ = _mm512_set1_ps(minZ[at]), hiZ = _mm512_set1_ps(maxZ[at]);
    const __m512i fi = _mm512_set1_epi32(flags[at]);
    __mmask16 inX = _mm512_cmp_ps_mask(_mm512_castsi512_ps(wMinX), xi, _CMP_LE_OQ);
    {
      const __mmask16 inY = _mm512_cmp_ps_mask(_mm512_castsi512_ps(wMinY), hiY, _CMP_LE_OQ) &
                            _mm512_cmp_ps_mask(loY, _mm512_castsi512_ps(wMaxY), _CMP_LE_OQ);
      const __mmask16 inZ = _mm512_cmp_ps_mask(_mm512_castsi512_ps(wMinZ), hiZ, _CMP_LE_OQ) &
                            _mm512_cmp_ps_mask(loZ, _mm512_castsi512_ps(wMaxZ), _CMP_LE_OQ);
      const __mmask16 pass = __mmask16((inX & inY & inZ & reportedHere16(wFlags, fi)) >> skip);
      if constexpr (kDeferWrites)
        masks[at - begin] = pass;
      else
        emitPairs(out, _mm512_set1_epi32(int(ids[at])), ids + at + 1, pass);
    }
    // (When at = i + 1, its own lane 0 passes x: the later blocks start at
    // entry i + 17 either way.)
    for (uint32_t j = i + 17; inX == 0xFFFF; j += 16) {
      const __m512i idi = _mm512_set1_epi32(int(ids[at]));
      inX = _mm512_cmp_ps_mask(_mm512_loadu_ps(minX + j), xi, _CMP_LE_OQ);
      const __mmask16 inY = _mm512_cmp_ps_mask(_mm512_loadu_ps(minY + j), hiY, _CMP_LE_OQ) &
                            _mm512_cmp_ps_mask(loY, _mm512_loadu_ps(maxY + j), _CMP_LE_OQ);
      const __mmask16 inZ = _mm512_cmp_ps_mask(_mm512_loadu_ps(minZ + j), hiZ, _CMP_LE_OQ) &
                            _mm512_cmp_ps_mask(loZ, _mm512_loadu_ps(maxZ + j), _CMP_LE_OQ);
      emitPairs(out, idi, ids + j, inX & inY & inZ & reportedHere16(flags + j, fi));
    }
  };
  // Two entries a window: i against entries i + 1 ... i + 16 (lanes 0-15),
  // then i + 1 against the same window's lanes 1-15, and the window slides
  // by two. Sliding is a broadcast and an align a column, the same for one
  // entry or two: shared, it is half the cost an entry.
  for (uint32_t i = begin; i < end; i += 2) {
    if (i != begin) {
      // Entries i + 15 and i + 16 come in (within the padding: i < n).
      wMinX = slideInTwo(wMinX, minX + i + 15);
      wMinY = slideInTwo(wMinY, minY + i + 15);
      wMaxY = slideInTwo(wMaxY, maxY + i + 15);
      wMinZ = slideInTwo(wMinZ, minZ + i + 15);
      wMaxZ = slideInTwo(wMaxZ, maxZ + i + 15);
      wFlags = _mm512_alignr_epi32(
          _mm512_set1_epi64(int64_t(flags[i + 15]) | int64_t(flags[i + 16]) << 32), wFlags, 2);
    }
    if (!gate.open(out)) return;
    sweepEntry(i, i, 0);
    if (i + 1 < end) {
      if (!gate.open(out)) return;
      sweepEntry(i + 1, i, 1);
    }
  }
  if constexpr (kDeferWrites) {
    std::fill(masks + count, masks + count + 32, uint16_t(0));
    for (uint32_t k = 0; k < count; k += 32) {
      if (!gate.open(out)) return;
      uint32_t any = _mm512_test_epi16_mask(_mm512_loadu_si512(masks + k), _mm512_set1_epi16(-1));
      while (any != 0) {
        const uint32_t e = k + uint32_t(__builtin_ctz(any));
        any &= any - 1;
        const uint32_t i = begin + e;
        emitPairs(out, _mm512_set1_epi32(int(ids[i])), ids + i + 1, masks[e]);
      }
    }
  }
  out.finish();
}

BP_WIDE_TARGET void sweepCell(const CellArrays& c, uint32_t begin, uint32_t end, bool deferWrites,
                              PairBuffer& buffer, PairBudget* budget) {
  if (budget) {
    BudgetGate gate(*budget, buffer);
    if (deferWrites)
      sweepCellWith<true>(c, begin, end, buffer, gate);
    else
      sweepCellWith<false>(c, begin, end, buffer, gate);
    return;
  }
  NoGate gate;
  if (deferWrites)
    sweepCellWith<true>(c, begin, end, buffer, gate);
  else
    sweepCellWith<false>(c, begin, end, buffer, gate);
}

// As SweepGrid::sweepCellAgainst: a forward-only cursor skips the static
// entries that start more than `reach` before the moving box.
template <class Gate>
BP_WIDE_TARGET void sweepCellAgainstWith(const CellArrays& m, uint32_t begin, uint32_t end,
                                         const CellArrays& t, float reach, PairBuffer& buffer,
                                         Gate& gate) {
  PairWriter out(buffer);
  const uint8_t* sFlags = t.flags;
  const uint32_t* sIds = t.ids;
  const float* sMinX = t.key[0];
  const float* sMaxX = t.key[1];
  const float* sMinY = t.key[2];
  const float* sMaxY = t.key[3];
  const float* sMinZ = t.key[4];
  const float* sMaxZ = t.key[5];
  uint32_t cursor = 0;
  const float* const mKey[6] = {m.key[0], m.key[1], m.key[2], m.key[3], m.key[4], m.key[5]};
  const uint8_t* mFlags = m.flags;
  const uint32_t* mIds = m.ids;
  for (uint32_t i = begin; i < end; ++i) {
    if (!gate.open(out)) return;
    const float mMinX = mKey[0][i], mMaxX = mKey[1][i];
    const __m512 fromAll = _mm512_set1_ps(mMinX - (reach + std::fabs(mMinX) * 0x1p-22f));
    for (;;) {
      const __mmask16 below =
          _mm512_cmp_ps_mask(_mm512_loadu_ps(sMinX + cursor), fromAll, _CMP_LT_OQ);
      cursor += uint32_t(__builtin_popcount(below));
      if (below != 0xFFFF) break;
    }
    const __m512 hiX = _mm512_set1_ps(mMaxX), loX = _mm512_set1_ps(mMinX);
    const __m512 loY = _mm512_set1_ps(mKey[2][i]), hiY = _mm512_set1_ps(mKey[3][i]);
    const __m512 loZ = _mm512_set1_ps(mKey[4][i]), hiZ = _mm512_set1_ps(mKey[5][i]);
    const __m512i fi = _mm512_set1_epi32(mFlags[i]);
    const __m512i idi = _mm512_set1_epi32(int(mIds[i]));
    for (uint32_t j = cursor;; j += 16) {
      const __mmask16 inX = _mm512_cmp_ps_mask(_mm512_loadu_ps(sMinX + j), hiX, _CMP_LE_OQ);
      const __mmask16 reachX = _mm512_cmp_ps_mask(loX, _mm512_loadu_ps(sMaxX + j), _CMP_LE_OQ);
      const __mmask16 inY = _mm512_cmp_ps_mask(_mm512_loadu_ps(sMinY + j), hiY, _CMP_LE_OQ) &
                            _mm512_cmp_ps_mask(loY, _mm512_loadu_ps(sMaxY + j), _CMP_LE_OQ);
      const __mmask16 inZ = _mm512_cmp_ps_mask(_mm512_loadu_ps(sMinZ + j), hiZ, _CMP_LE_OQ) &
                            _mm512_cmp_ps_mask(loZ, _mm512_loadu_ps(sMaxZ + j), _CMP_LE_OQ);
      const __mmask16 pass = inX & reachX & inY & inZ & reportedHere16(sFlags + j, fi);
      emitPairs(out, idi, sIds + j, pass);
      if (inX != 0xFFFF) break;
    }
  }
  out.finish();
}

BP_WIDE_TARGET void sweepCellAgainst(const CellArrays& m, uint32_t begin, uint32_t end,
                                     const CellArrays& t, float reach, PairBuffer& buffer,
                                     PairBudget* budget) {
  if (budget) {
    BudgetGate gate(*budget, buffer);
    sweepCellAgainstWith(m, begin, end, t, reach, buffer, gate);
    return;
  }
  NoGate gate;
  sweepCellAgainstWith(m, begin, end, t, reach, buffer, gate);
}

#else

void sweepCell(const CellArrays&, uint32_t, uint32_t, bool, PairBuffer&, PairBudget*) {}
void sweepCellAgainst(const CellArrays&, uint32_t, uint32_t, const CellArrays&, float, PairBuffer&,
                      PairBudget*) {}

#endif

}  // namespace bp::wide
