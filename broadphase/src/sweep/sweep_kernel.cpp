// The pair finding of SweepGrid: the sorted SoA sweep of one cell, the
// overflow boxes against the cells, and the parallel driver with its merge.
#include "sweep/sweep_grid.h"

#include "sweep/sweep_kernel_wide.h"

#include "pairs/pair_merge.h"
#include "sweep/budget_gate.h"

#include <algorithm>
#include <array>
#include <optional>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace bp {

namespace {

// Pairs are reported by the cell holding the min corner of the two boxes'
// intersection: there, on each axis at least one of the two starts.
[[maybe_unused]] inline bool reportedHere(uint8_t fi, uint8_t fj) {
  return ((fi | fj) & kStartsHereMask) == kStartsHereMask;
}

constexpr size_t kStreamChunk = 2048;

// The 16-lane kernel runs on cells whose members' x extents add up to at
// least this many cell lengths, i.e. where an entry meets about that many
// candidates. Every cell on one kernel, the wide one was faster on every
// scene with several candidates an entry (uniform: about 6), but slower on
// plane (about one candidate an entry), hence the rule, at 2.0 then. Since
// the 16-lane self sweep defers its pair writes and slides its first block
// in registers, plane is faster on it too, so the rule is at 0.5
// (docs/decisions.md, "The cell kernels").
constexpr float kWideCrowd = 0.5f;
constexpr float kDeferCrowd = 16.0f;

// The 16-lane kernels read whole blocks of 16 keys and flags past an entry
// and store 16 pairs at once.
static_assert(kSweepPad >= 16, "the 16-lane sweeps read 16 entries of padding");
static_assert(PairWriter::kBlock >= 16, "the 16-lane sweeps store 16 pairs at once");

wide::CellArrays arraysOf(const SweepCell& c) {
  return {{c.key(0), c.key(1), c.key(2), c.key(3), c.key(4), c.key(5)},
          c.flags.data(),
          c.ids.data(),
          c.size()};
}

// Cells per task of the refresh-and-sweep loop. Small, because cell costs
// are very unequal on clustered scenes (a few cells at the cluster centres
// hold most entries): on two threads, grain 4 is much faster than 32 on
// clustered, and the same on uniform (docs/decisions.md, "Refresh and
// tasks").
constexpr uint32_t kCellGrain = 4;

// On several threads, a worker hands its pairs to the router in batches of
// at least this many (4 KiB: still in its L1), and at the end of each task.
constexpr size_t kRouteBatch = 512;

// The fewest entries in a range of a crowded cell's sweep (markCrowdedCells).
constexpr uint32_t kMinRangeEntries = 256;

// For each 8-bit lane mask, the indices of its set lanes in order, 4 bits
// each from the lowest nibble (unused nibbles 0): the permute that packs the
// passing lanes of a block to the front.
[[maybe_unused]] constexpr auto kCompressLanes = [] {
  std::array<uint32_t, 256> table{};
  for (uint32_t mask = 0; mask < 256; ++mask) {
    uint32_t packed = 0, at = 0;
    for (uint32_t lane = 0; lane < 8; ++lane)
      if (mask & (1u << lane)) packed |= lane << (4 * at++);
    table[mask] = packed;
  }
  return table;
}();

}  // namespace

#if defined(__AVX2__)
namespace {

// Writes the pairs of entry `idi` with the lanes of `pass` of the block whose
// ids start at `ids`, without a branch per pair: the passing lanes' ids are
// packed to the front (a permute from kCompressLanes), paired, and all eight
// pairs are stored, of which popcount(pass) are kept. Only the lanes of
// `readable` are loaded (a masked load: the lanes past the end are never
// read).
inline void emitPairs(PairWriter& out, __m256i idi, const uint32_t* ids, __m256 readable,
                      uint32_t pass) {
  const __m256i idj =
      _mm256_maskload_epi32(reinterpret_cast<const int*>(ids), _mm256_castps_si256(readable));
  const __m256i lanes =
      _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(int(kCompressLanes[pass])),
                                         _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
                       _mm256_set1_epi32(0xF));
  const __m256i packed = _mm256_permutevar8x32_epi32(idj, lanes);
  const __m256i lo = _mm256_min_epu32(idi, packed);
  const __m256i hi = _mm256_max_epu32(idi, packed);
  const __m256i p0 = _mm256_unpacklo_epi32(lo, hi);  // pairs 0, 1 | 4, 5
  const __m256i p1 = _mm256_unpackhi_epi32(lo, hi);  // pairs 2, 3 | 6, 7
  Pair* w = out.block();
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(w), _mm256_permute2x128_si256(p0, p1, 0x20));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(w + 4), _mm256_permute2x128_si256(p0, p1, 0x31));
  out.advance(uint32_t(__builtin_popcount(pass)));
}

// The dedup rule on eight flag bytes: lanes where the OR of the two entries'
// starts-here bits is 0b111 (the cell holds the min corner of the overlap).
inline __m256 reportedHere8(const uint8_t* flags, __m256i fiAll) {
  const __m256i fj = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(flags)));
  const __m256i starts = _mm256_set1_epi32(kStartsHereMask);
  const __m256i either = _mm256_and_si256(_mm256_or_si256(fj, fiAll), starts);
  return _mm256_castsi256_ps(_mm256_cmpeq_epi32(either, starts));
}

}  // namespace
#endif

// A moving cell against itself: moving cells hold no static entry, so only
// the dedup rule filters.
template <class Gate>
void SweepGrid::sweepCell(uint32_t cell, uint32_t begin, uint32_t end, PairBuffer& buffer,
                          Gate& gate) const {
#if defined(__AVX2__)
  PairWriter out(buffer);
#else
  PairBuffer& out = buffer;
#endif
  const SweepCell& c = cells_[cell].value;
  const float* minX = c.key(0);
  const float* maxX = c.key(1);
  const float* minY = c.key(2);
  const float* maxY = c.key(3);
  const float* minZ = c.key(4);
  const float* maxZ = c.key(5);
  const uint8_t* flags = c.flags.data();
  const uint32_t* ids = c.ids.data();
#if defined(__AVX2__)
  // Eight candidates per block, without a branch per candidate or per pair
  // (emitPairs). Keys are sorted, so the lanes passing x are a prefix, and
  // the scan goes on only while a block is entirely inside (the +inf padding
  // ends it at n at the latest). One block first is faster on every scene
  // than always running two blocks (fewer loop exits to predict), since with
  // cells long along x most entries have fewer than 8 candidates
  // (docs/decisions.md, "The cell kernels").
  for (uint32_t i = begin; i < end; ++i) {
    if (!gate.open(out)) return;
    const __m256 xi = _mm256_set1_ps(maxX[i]);
    const __m256 loY = _mm256_set1_ps(minY[i]), hiY = _mm256_set1_ps(maxY[i]);
    const __m256 loZ = _mm256_set1_ps(minZ[i]), hiZ = _mm256_set1_ps(maxZ[i]);
    const __m256i fiAll = _mm256_set1_epi32(flags[i]);
    const __m256i idi = _mm256_set1_epi32(int(ids[i]));
    for (uint32_t j = i + 1;; j += 8) {
      const __m256 inX = _mm256_cmp_ps(_mm256_loadu_ps(minX + j), xi, _CMP_LE_OQ);
      const __m256 inY = _mm256_and_ps(_mm256_cmp_ps(_mm256_loadu_ps(minY + j), hiY, _CMP_LE_OQ),
                                       _mm256_cmp_ps(loY, _mm256_loadu_ps(maxY + j), _CMP_LE_OQ));
      const __m256 inZ = _mm256_and_ps(_mm256_cmp_ps(_mm256_loadu_ps(minZ + j), hiZ, _CMP_LE_OQ),
                                       _mm256_cmp_ps(loZ, _mm256_loadu_ps(maxZ + j), _CMP_LE_OQ));
      const __m256 pass = _mm256_and_ps(_mm256_and_ps(inX, reportedHere8(flags + j, fiAll)),
                                        _mm256_and_ps(inY, inZ));
      emitPairs(out, idi, ids + j, inX, uint32_t(_mm256_movemask_ps(pass)));
      if (_mm256_movemask_ps(inX) != 0xFF) break;
    }
  }
  out.finish();
#else
  for (uint32_t i = begin; i < end; ++i) {
    if (!gate.open(out)) return;
    const uint8_t fi = flags[i];
    const uint32_t idi = ids[i];
    const float xi = maxX[i];
    const float loY = minY[i], hiY = maxY[i], loZ = minZ[i], hiZ = maxZ[i];
    // The +inf sentinel at minX[n] ends the scan: no bound check.
    for (uint32_t j = i + 1; minX[j] <= xi; ++j) {
      const bool inside = (minY[j] <= hiY) & (loY <= maxY[j]) & (minZ[j] <= hiZ) & (loZ <= maxZ[j]);
      if (inside & reportedHere(fi, flags[j])) out.push(makePair(idi, ids[j]));
    }
  }
#endif
}

// A moving cell against its static twin, both sorted on min x: for each
// moving entry, the static entries whose x interval can reach it start no
// further back than the twin's largest x extent, so the scan starts there
// (a cursor that only moves forward, as the moving keys are sorted) and runs
// while the static min x is within the moving box. No static entry is
// visited for itself: a frame's cost follows the moving entries only.
template <class Gate>
void SweepGrid::sweepCellAgainst(uint32_t movingCell, uint32_t begin, uint32_t end,
                                 uint32_t staticCell, PairBuffer& buffer, Gate& gate) const {
#if defined(__AVX2__)
  PairWriter out(buffer);
#else
  PairBuffer& out = buffer;
#endif
  const SweepCell& m = cells_[movingCell].value;
  const SweepCell& t = cells_[staticCell].value;
  const float* const mKey[6] = {m.key(0), m.key(1), m.key(2), m.key(3), m.key(4), m.key(5)};
  const uint8_t* mFlags = m.flags.data();
  const uint32_t* mIds = m.ids.data();
  const float* sMinX = t.key(0);
  const float* sMaxX = t.key(1);
  const float* sMinY = t.key(2);
  const float* sMaxY = t.key(3);
  const float* sMinZ = t.key(4);
  const float* sMaxZ = t.key(5);
  const uint8_t* sFlags = t.flags.data();
  const uint32_t* sIds = t.ids.data();
  // Float slack: the stored extents are rounded differences (relative 2^-24),
  // and so is the subtraction below; the lanes get the exact x test anyway.
  const float reach = t.maxExtentX * (1.0f + 0x1p-20f);
  uint32_t cursor = 0;
  for (uint32_t i = begin; i < end; ++i) {
    if (!gate.open(out)) return;
    const float mMinX = mKey[0][i], mMaxX = mKey[1][i];
    const float from = mMinX - (reach + std::fabs(mMinX) * 0x1p-22f);
#if defined(__AVX2__)
    // Static min x below `from` is a prefix; the +inf padding stops it.
    const __m256 fromAll = _mm256_set1_ps(from);
    for (;;) {
      const uint32_t below = uint32_t(
          _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(sMinX + cursor), fromAll, _CMP_LT_OQ)));
      cursor += uint32_t(__builtin_popcount(below));
      if (below != 0xFF) break;
    }
    const __m256 hiX = _mm256_set1_ps(mMaxX), loX = _mm256_set1_ps(mMinX);
    const __m256 loY = _mm256_set1_ps(mKey[2][i]), hiY = _mm256_set1_ps(mKey[3][i]);
    const __m256 loZ = _mm256_set1_ps(mKey[4][i]), hiZ = _mm256_set1_ps(mKey[5][i]);
    const __m256i fiAll = _mm256_set1_epi32(mFlags[i]);
    const __m256i idi = _mm256_set1_epi32(int(mIds[i]));
    for (uint32_t j = cursor;; j += 8) {
      const __m256 inX = _mm256_cmp_ps(_mm256_loadu_ps(sMinX + j), hiX, _CMP_LE_OQ);
      const __m256 reachX = _mm256_cmp_ps(loX, _mm256_loadu_ps(sMaxX + j), _CMP_LE_OQ);
      const __m256 inY = _mm256_and_ps(_mm256_cmp_ps(_mm256_loadu_ps(sMinY + j), hiY, _CMP_LE_OQ),
                                       _mm256_cmp_ps(loY, _mm256_loadu_ps(sMaxY + j), _CMP_LE_OQ));
      const __m256 inZ = _mm256_and_ps(_mm256_cmp_ps(_mm256_loadu_ps(sMinZ + j), hiZ, _CMP_LE_OQ),
                                       _mm256_cmp_ps(loZ, _mm256_loadu_ps(sMaxZ + j), _CMP_LE_OQ));
      const __m256 pass =
          _mm256_and_ps(_mm256_and_ps(_mm256_and_ps(inX, reachX), reportedHere8(sFlags + j, fiAll)),
                        _mm256_and_ps(inY, inZ));
      emitPairs(out, idi, sIds + j, inX, uint32_t(_mm256_movemask_ps(pass)));
      if (_mm256_movemask_ps(inX) != 0xFF) break;
    }
#else
    while (sMinX[cursor] < from) ++cursor;
    const uint8_t fi = mFlags[i];
    const uint32_t idi = mIds[i];
    const float loY = mKey[2][i], hiY = mKey[3][i], loZ = mKey[4][i], hiZ = mKey[5][i];
    for (uint32_t j = cursor; sMinX[j] <= mMaxX; ++j) {
      const bool inside = (mMinX <= sMaxX[j]) & (sMinY[j] <= hiY) & (loY <= sMaxY[j]) &
                          (sMinZ[j] <= hiZ) & (loZ <= sMaxZ[j]);
      if (inside & reportedHere(fi, sFlags[j])) out.push(makePair(idi, sIds[j]));
    }
#endif
  }
#if defined(__AVX2__)
  out.finish();
#endif
}

// Every pair of overflow box o with a box registered in cells, each reported
// once: by the cell holding the min corner of the intersection, which on each
// axis is max(lo_o, lo_x) (lo_o may lie outside the grid; the rule holds as
// the floor mapping is monotone).
void SweepGrid::pairOverflowBox(uint32_t slot, PairBuffer& out) const {
  const uint32_t o = overflow_[slot];
  const Aabb& ob = boxes_[o].box;
  const CellRange orng = rangeAt(o);
  const bool oStatic = static_[o] != 0;
  auto visit = [&](const SweepCell& c) {
    // Static-static, or layers that never collide: no candidate.
    if (!overflowMeetsGroup(o, c.layer)) return true;
    const uint32_t n = c.size();
    const float* minX = c.minX();
    const float* maxX = c.maxX();
    const float* minY = c.key(2);
    const float* maxY = c.key(3);
    const float* minZ = c.key(4);
    const float* maxZ = c.key(5);
    for (uint32_t k = 0; k < n && minX[k] <= ob.max.x(); ++k) {
      const uint32_t x = c.ids[k];
      const bool hit = (unsigned(ob.min.x() <= maxX[k]) & unsigned(minY[k] <= ob.max.y()) &
                        unsigned(ob.min.y() <= maxY[k]) & unsigned(minZ[k] <= ob.max.z()) &
                        unsigned(ob.min.z() <= maxZ[k])) != 0;
      if (!hit || (oStatic && static_[x])) continue;
      const CellRange xr = rangeAt(x);
      if (c.coord.x == std::max(orng.lo[0], xr.lo[0]) &&
          c.coord.y == std::max(orng.lo[1], xr.lo[1]) &&
          c.coord.z == std::max(orng.lo[2], xr.lo[2]))
        out.push(makePair(o, x));
    }
    return true;
  };
  forEachCellInRange(orng, visit);
}

// Overflow boxes against each other: a sweep on min x of their own (under a
// budget, with the gate of the cell sweeps: identical boxes too large for
// the cells all meet here).
void SweepGrid::pairOverflowSet(PairBuffer& out, PairBudget* budget) const {
  thread_local std::vector<uint32_t> order;
  order.assign(overflow_.begin(), overflow_.end());
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    const float ka = boxes_[a].box.min.x(), kb = boxes_[b].box.min.x();
    return ka < kb || (ka == kb && a < b);
  });
  std::optional<BudgetGate> gate;
  if (budget) gate.emplace(*budget, out);
  for (size_t i = 0; i < order.size(); ++i) {
    if (gate && !gate->open(out)) return;
    const Aabb& bi = boxes_[order[i]].box;
    for (size_t j = i + 1; j < order.size() && boxes_[order[j]].box.min.x() <= bi.max.x(); ++j) {
      if (!overflowMayPair(order[i], order[j])) continue;
      if (overlaps(bi, boxes_[order[j]].box)) out.push(makePair(order[i], order[j]));
    }
  }
}

// Entries [begin, end) of moving cell u against the entries after them and
// against its static twin, with the kernel the cell's crowding calls for.
void SweepGrid::sweepEntries(uint32_t u, uint32_t begin, uint32_t end, PairBuffer& buffer,
                             PairBudget* budget) const {
  if (!plainLayers()) return sweepEntriesLayered(u, begin, end, buffer, budget);
  const SweepCell& c = cells_[u].value;
  const CellMap& statics = maps_[kStaticLayer];
  const uint32_t twin = statics.size() != 0 ? statics.find(c.coord) : CellMap::kAbsent;
  // The 16-lane kernel where an entry meets enough candidates to fill its
  // blocks; on sparse cells (the flat `plane`: about one candidate an entry)
  // the 8-lane one is cheaper.
  const float crowd =
      c.sumExtentX + (twin != CellMap::kAbsent ? cells_[twin].value.sumExtentX : 0.0f);
  if (wide_ && (config_.kernel == SweepKernel::wide || crowd >= kWideCrowd * side_[0])) {
    const wide::CellArrays self = arraysOf(c);
    // Deferred writes pay where most entries find no pair: an entry meets
    // about sumExtentX / (span of min x) candidates; at most kDeferCrowd of
    // them (uniform: about 8), few pass y and z. At the centres of
    // `clustered`'s piles an entry meets many more and pairs with many.
    const uint32_t n = c.size();
    const float span = n > 1 ? self.key[0][n - 1] - self.key[0][0] : 0.0f;
    const bool defer = c.sumExtentX <= kDeferCrowd * span;
    wide::sweepCell(self, begin, end, defer, buffer, budget);
    if (twin != CellMap::kAbsent) {
      const SweepCell& t = cells_[twin].value;
      wide::sweepCellAgainst(self, begin, end, arraysOf(t), t.maxExtentX * (1.0f + 0x1p-20f),
                             buffer, budget);
    }
  } else if (budget) {
    BudgetGate gate(*budget, buffer);
    sweepCell(u, begin, end, buffer, gate);
    if (twin != CellMap::kAbsent) sweepCellAgainst(u, begin, end, twin, buffer, gate);
  } else {
    NoGate gate;
    sweepCell(u, begin, end, buffer, gate);
    if (twin != CellMap::kAbsent) sweepCellAgainst(u, begin, end, twin, buffer, gate);
  }
}

void SweepGrid::sweepSelf(uint32_t u, uint32_t begin, uint32_t end, PairBuffer& buffer,
                          PairBudget* budget) const {
  const SweepCell& c = cells_[u].value;
  if (wide_ && (config_.kernel == SweepKernel::wide || c.sumExtentX >= kWideCrowd * side_[0])) {
    const wide::CellArrays self = arraysOf(c);
    const uint32_t n = c.size();
    const float span = n > 1 ? self.key[0][n - 1] - self.key[0][0] : 0.0f;
    wide::sweepCell(self, begin, end, c.sumExtentX <= kDeferCrowd * span, buffer, budget);
  } else if (budget) {
    BudgetGate gate(*budget, buffer);
    sweepCell(u, begin, end, buffer, gate);
  } else {
    NoGate gate;
    sweepCell(u, begin, end, buffer, gate);
  }
}

void SweepGrid::sweepAgainstCell(uint32_t u, uint32_t begin, uint32_t end, uint32_t other,
                                 PairBuffer& buffer, PairBudget* budget) const {
  const SweepCell& c = cells_[u].value;
  const SweepCell& t = cells_[other].value;
  const float crowd = c.sumExtentX + t.sumExtentX;
  if (wide_ && (config_.kernel == SweepKernel::wide || crowd >= kWideCrowd * side_[0])) {
    wide::sweepCellAgainst(arraysOf(c), begin, end, arraysOf(t), t.maxExtentX * (1.0f + 0x1p-20f),
                           buffer, budget);
  } else if (budget) {
    BudgetGate gate(*budget, buffer);
    sweepCellAgainst(u, begin, end, other, buffer, gate);
  } else {
    NoGate gate;
    sweepCellAgainst(u, begin, end, other, buffer, gate);
  }
}

// On several threads, a cell whose sweep would take more than about
// 1 / (kCrowdedShare x threads) of the frame's is marked crowded (its
// `crowded` = the number of ranges to sweep it in) so that its sweep runs as
// several tasks: on `clustered` a few cells at the pile centres each hold up
// to a tenth of the frame's work, and the thread that drew the last of them
// finished alone. The cost model is an entry's scan: one block plus its
// candidates (the cell's x extents over its length), from the last refresh.
// Returns whether any cell is crowded.
bool SweepGrid::markCrowdedCells(int threads) {
  constexpr double kCrowdedShare = 8.0;
  const double length = side_[0];
  auto sweepCost = [length](const SweepCell& c) {
    return double(c.size()) * (1.0 + double(c.sumExtentX) / length / 16.0);
  };
  double total = 0.0;
  for (PaddedCell& pc : cells_) {
    SweepCell& c = pc.value;
    c.crowded = 0;
    if (!isStaticGroup(c.layer)) total += sweepCost(c);
  }
  splitCells_ = 0;
  if (threads <= 1 || total <= 0.0) return false;
  const double unit = total / (kCrowdedShare * threads);
  for (PaddedCell& pc : cells_) {
    SweepCell& c = pc.value;
    if (isStaticGroup(c.layer)) continue;
    const double cost = sweepCost(c);
    if (cost <= unit || c.size() < 2 * kMinRangeEntries) continue;
    // Ranges of about half the threshold, at least kMinRangeEntries entries.
    const double parts =
        std::min(std::ceil(2.0 * cost / unit), double(c.size() / kMinRangeEntries));
    c.crowded = uint8_t(std::clamp(parts, 2.0, 255.0));
    ++splitCells_;
  }
  return splitCells_ != 0;
}

// Runs every unit of pair work (the cells, then each overflow box, then the
// overflow set against itself) as tasks; flush(buffer, last) hands each
// worker's buffer over, `last` at the end of a task, and charges the budget
// if any (at the latest before it hands pairs on, and with `last`).
template <class Flush>
void SweepGrid::findPairsInto(Scheduler& scheduler, PairBudget* budget, Flush&& flush) {
  // The update is fused with the sweep: a cell marked dirty is refreshed by
  // the task that sweeps it, just before, while its arrays are in cache. The
  // overflow units read any cell, so they run after every cell is refreshed.
  // Static cells are refreshed first (they are listed), since moving cells
  // read their twins.
  const bool pending = beginUpdate(scheduler);
  if (pending) refreshListedCells(scheduler);
  // With layers a cell is also swept against moving cells of other layers,
  // which must be refreshed before: no fused refresh then.
  if (pending && refreshAll_ && !plainLayers()) refreshMovingCells(scheduler);
  if (pairBuffers_.size() != scheduler.threadCount()) pairBuffers_.resize(scheduler.threadCount());
  const bool split = markCrowdedCells(scheduler.threadCount());
  const uint32_t cellUnits = static_cast<uint32_t>(cells_.size());
  scheduler.forEach(0, cellUnits, kCellGrain, cellAffinity_, [&](uint32_t begin, uint32_t end) {
    PairBuffer& buffer = pairBuffers_.local();
    // A cell's refresh gathers its members' boxes in proxy order: loads
    // from all over boxes_, which the move has just written, that stall the
    // refresh when they come from L3, DRAM or the other core's cache. So
    // the boxes of the next moving cells of this task, about kPrefetchAhead
    // members ahead, are prefetched while this one is refreshed and swept
    // (their members as of the last refresh: an entrant is missed, a leaver
    // fetched for nothing). It pays when memory is slow, and costs little
    // when it is not; prefetching only the next cell gains less, and the
    // current cell's boxes just before its refresh nothing
    // (docs/decisions.md, "Refresh and tasks"). (On an older Intel VM,
    // prefetching the next cell during the sweep gained nothing.)
    BoxPrefetch prefetch{begin};
    for (uint32_t u = begin; u < end; ++u) {
      const SweepCell& c = cells_[u].value;
      if (isStaticGroup(c.layer)) continue;
      if (pending) prefetchAhead(u, end, prefetch);
      if (pending && c.dirty) refreshCell(u);
      if (c.crowded) continue;  // swept below, in ranges
      // Out of budget: the cells are still refreshed (above), only not swept.
      if (budget && budget->exceeded()) continue;
      sweepEntries(u, 0, c.size(), buffer, budget);
      flush(buffer, false);
    }
    flush(buffer, true);
  });
  if (split) {
    // The crowded cells are refreshed now; their entries are cut into
    // ranges of equal count (a cell's entries cost about the same).
    sweepRanges_.clear();
    for (uint32_t u = 0; u < cellUnits; ++u) {
      const SweepCell& c = cells_[u].value;
      if (!c.crowded) continue;
      const uint32_t n = c.size(), parts = c.crowded;
      for (uint32_t k = 0; k < parts; ++k)
        sweepRanges_.push_back(
            {u, uint32_t(uint64_t(n) * k / parts), uint32_t(uint64_t(n) * (k + 1) / parts)});
    }
    scheduler.forEach(0, static_cast<uint32_t>(sweepRanges_.size()), 1,
                      [&](uint32_t begin, uint32_t end) {
                        PairBuffer& buffer = pairBuffers_.local();
                        for (uint32_t k = begin; k < end; ++k) {
                          if (budget && budget->exceeded()) break;
                          const SweepRange& r = sweepRanges_[k];
                          sweepEntries(r.cell, r.begin, r.end, buffer, budget);
                          flush(buffer, false);
                        }
                        flush(buffer, true);
                      });
  }
  if (pending) finishUpdate();
  const uint32_t overflowUnits = static_cast<uint32_t>(overflow_.size());
  const uint32_t units = overflowUnits + (overflowUnits > 1 ? 1 : 0);
  scheduler.forEach(0, units, 32, [&](uint32_t begin, uint32_t end) {
    PairBuffer& buffer = pairBuffers_.local();
    for (uint32_t u = begin; u < end; ++u) {
      if (budget && budget->exceeded()) break;
      // One overflow box meets each other box once at most: a unit adds at
      // most N pairs between two charges.
      if (u < overflowUnits)
        pairOverflowBox(u, buffer);
      else
        pairOverflowSet(buffer, budget);
      flush(buffer, false);
    }
    flush(buffer, true);
  });
}

void SweepGrid::findPairs(Scheduler& scheduler, std::vector<Pair>& out, PairBudget* budget) {
  for (int w = 0; w < pairBuffers_.size(); ++w) pairBuffers_[w].clear();
  const int threads = scheduler.threadCount();
  if (threads > 1 && router_.worthRouting(threads)) {
    // Each worker routes its pairs by key range once it has swept a few
    // hundred (they are still in its L1), and at the end of each task; the
    // merge is then one sort a range (pair_router.h). (Routed after every
    // unit, static 10^5's 9.3 k pairs came about 30 at a time and the calls
    // cost several times more: docs/decisions.md, "The pair pipeline".) A
    // budget is charged before routing:
    // the router holds charged pairs only.
    router_.begin(threads, capacity());
    findPairsInto(scheduler, budget, [&](PairBuffer& buffer, bool last) {
      if (last || buffer.size() >= kRouteBatch) {
        if (budget && !budget->settle(buffer)) return;
        router_.route(buffer);
      }
    });
    if (budget && budget->exceeded()) {
      router_.discard();
      for (int w = 0; w < pairBuffers_.size(); ++w) pairBuffers_[w].clear();
      out.clear();
      return;
    }
    router_.merge(scheduler, out, sortScratch_);
    return;
  }
  if (budget) {
    findPairsInto(scheduler, budget, [&](PairBuffer& buffer, bool last) {
      if (last || buffer.size() - buffer.charged() >= budget->batch()) budget->settle(buffer);
    });
  } else {
    findPairsInto(scheduler, nullptr, [](PairBuffer&, bool) {});
  }
  if (budget && budget->exceeded()) {
    for (int w = 0; w < pairBuffers_.size(); ++w) pairBuffers_[w].clear();
    out.clear();
    return;
  }
  // Every pair is unique, so the sorted list is the same for any thread count.
  size_t total = 0;
  pieces_.resize(size_t(pairBuffers_.size()));
  for (int w = 0; w < pairBuffers_.size(); ++w) {
    total += pairBuffers_[w].size();
    pieces_[size_t(w)] = pairBuffers_[w].pairs();
  }
  if (threads > 1 && total >= kParallelMergeFrom)
    mergePairsParallel(scheduler, pieces_, out, sortScratch_, capacity());
  else if (pairBuffers_.size() == 1)
    mergePairsFrom(pairBuffers_[0].pairs(), out, sortScratch_, capacity());
  else
    mergePairs(pieces_, out, sortScratch_, capacity());
  if (threads > 1) router_.remember(out, threads);
  for (int w = 0; w < pairBuffers_.size(); ++w) pairBuffers_[w].clear();
}

void SweepGrid::findPairs(Scheduler& scheduler, FunctionRef<void(std::span<const Pair>)> consume,
                          PairBudget* budget) {
  for (int w = 0; w < pairBuffers_.size(); ++w) pairBuffers_[w].clear();
  findPairsInto(scheduler, budget, [&](PairBuffer& buffer, bool last) {
    if (buffer.size() >= kStreamChunk || (last && !buffer.empty())) {
      if (budget && !budget->settle(buffer)) return;
      if (!buffer.empty()) consume(buffer.pairs());
      buffer.clear();
    }
  });
  if (budget && budget->exceeded())
    for (int w = 0; w < pairBuffers_.size(); ++w) pairBuffers_[w].clear();
}

}  // namespace bp
