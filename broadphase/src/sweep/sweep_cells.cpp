// SweepGrid::update(): brings the cells in line with the proxies.
//
// Invariant after update (checked by validate()): each live proxy is either
// registered in exactly the cells of rangeOf(box) (kind_ == cells, at most
// maxCellsPerProxy of them) or in the overflow set; every cell is non-empty,
// holds each member once, sorted by (min x, id), with its SoA arrays equal to
// the members' exact boxes.
//
// Steps: (1) the dirty proxies are scanned; those that left their cells are
// relinked (sweep_relink.cpp): a proxy whose range is unchanged only marks
// its cells for a key refresh, one whose range changed enters the cells it
// enters (and the cells it leaves are marked, to be compacted); with every
// moving cell to refresh, the scan and the relink plans run in parallel and
// each cell applies its own membership changes; (2) the marked cells are
// compacted, regathered and re-sorted in parallel; (3) empty cells are
// released.
//
// Coherence policy: keeping each cell's order and repairing it by insertion
// sort is far cheaper on `uniform` than a fresh grid every frame (hashing
// every entry into new cells and std::sort per cell), and about the same on
// `clustered`, whose dense cells reorder a lot and whose time is dominated
// by its 2.5 M pairs (docs/decisions.md, "Coherence and the sort"; measured
// on an earlier version of the cells). So the cells are kept. The sort
// itself is sweep_sort.cpp: a new cell or a crowd of entrants is sorted
// afresh, and a repair that runs over its budget of 8n + 64 shifts (a
// teleport storm, a dense pile) falls back to std::sort.
#include <broadphase/error.h>
#include "sweep/sweep_grid.h"

#include "common/assert.h"
#include "common/even_chunks.h"
#include "sweep/sweep_cell_range.h"
#include "sweep/sweep_simd.h"
#include "sweep/sweep_sort.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>

#if defined(__SSE4_1__)
#include <smmintrin.h>
#endif

namespace bp {

namespace {

// Cell coordinates must fit in int32 with room: |v| / s <= 2^24 / 2^-5 = 2^29.
constexpr float kMinCellSize = 0x1p-5f;
constexpr float kMaxCellSize = 0x1p24f;

float clampCellSize(float s) { return std::min(std::max(s, kMinCellSize), kMaxCellSize); }

// The sort key of an entry: min x mapped to a uint32 that orders like the
// float (sign flipped for positives, all bits for negatives), then the proxy
// index. One integer compare orders by (min x, id), and the keys of a cell
// are unique, so the order is total and the same on every run.
inline uint64_t entryKey(float minX, uint32_t id) {
  const uint32_t bits = std::bit_cast<uint32_t>(minX);
  const uint32_t ordered = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
  return (uint64_t(ordered) << 32) | id;
}

}  // namespace

void SweepGrid::chooseCellSize() {
  const uint32_t live = pool_.liveCount();
  if (config_.cellSize > 0.0f) {
    side_[1] = side_[2] = clampCellSize(config_.cellSize);
  } else {
    // A strided sample of at most ~4096 live boxes: deterministic and cheap.
    const uint32_t cap = pool_.capacity();
    const uint32_t stride = std::max(1u, cap / 4096u);
    std::vector<float> edges;
    Aabb bounds = Aabb::empty();
    for (uint32_t pass = 0; pass < 2 && edges.empty(); ++pass)
      for (uint32_t i = 0; i < cap; i += pass == 0 ? stride : 1) {
        if (!pool_.isLiveIndex(i)) continue;
        const Vec3 e = boxes_[i].box.extent();
        edges.push_back(std::max(e.x(), std::max(e.y(), e.z())));
        bounds = merge(bounds, boxes_[i].box);
      }
    float s = 0.0f;
    if (!edges.empty()) {
      const auto mid = edges.begin() + edges.size() / 2;
      std::nth_element(edges.begin(), mid, edges.end());
      s = config_.cellSizeFactor * *mid;
      // Density: solve s^3 = target * volume(s) / live, where each side of the
      // bounding volume counts as at least s (a flat world is one cell thick).
      const Vec3 e = bounds.extent();
      for (int iteration = 0; iteration < 4; ++iteration) {
        const double volume =
            double(std::max(e.x(), s)) * double(std::max(e.y(), s)) * double(std::max(e.z(), s));
        const double side =
            std::cbrt(double(config_.targetBoxesPerCell) * volume / double(std::max(live, 1u)));
        s = std::max(s, float(side));
      }
    }
    side_[1] = side_[2] = clampCellSize(s > 0.0f && std::isfinite(s) ? s : 1.0f);
    sizedForCount_ = live;
  }
  side_[0] = clampCellSize(side_[1] * config_.cellStretchX);
  for (int a = 0; a < 3; ++a) invSide_[a] = invSide8_[a] = invSide8_[a + 3] = 1.0f / side_[a];
}

void SweepGrid::regrid() {
  cells_.clear();
  for (CellMap& map : maps_) map.clear();
  dirtyCells_.clear();
  overflow_.clear();
  std::fill(kind_.begin(), kind_.end(), Registration::none);
  std::fill(rangeKey_.begin(), rangeKey_.end(), kNeverStays);
  wideRanges_.clear();
  freeWide_.clear();
  overflowPos_.clear();
  for (uint32_t i = 0; i < pool_.capacity(); ++i)
    if (pool_.isLiveIndex(i)) markDirty(i);  // as kDirtyRelink, even if already dirty
  gridBoundsStale_ = true;
}

uint32_t SweepGrid::findOrCreateCell(const CellCoord& c, uint8_t layer) {
  uint32_t idx = maps_[layer].find(c);
  if (idx != CellMap::kAbsent) return idx;
  idx = static_cast<uint32_t>(cells_.size());
  cells_.emplace_back();
  if (!spareCells_.empty()) {
    // Reuse the arrays of a cell removed earlier (object pool): boxes drifting
    // in and out of empty space create and remove cells every frame.
    SweepCell& reused = cells_.back().value;
    reused = std::move(spareCells_.back());
    spareCells_.pop_back();
    reused.dirty = reused.leaving = 0;
    reused.sorted = 0;
    reused.ids.clear();
    reused.keys.clear();
    reused.flags.clear();
  }
  cells_.back().value.coord = c;
  cells_.back().value.layer = layer;
  maps_[layer].insert(c, idx);
  gridBoundsStale_ = true;
  return idx;
}

void SweepGrid::markCellDirty(uint32_t cell) {
  SweepCell& c = cells_[cell].value;
  if (c.dirty) return;
  c.dirty = 1;
  dirtyCells_.push_back(cell);
}

void SweepGrid::markRangeDirty(const CellRange& r, uint8_t layer) {
  forEachCoord(r, [&](const CellCoord& c) {
    const uint32_t idx = maps_[layer].find(c);
    if (idx != CellMap::kAbsent) markCellDirty(idx);
  });
}

void SweepGrid::addToOverflow(uint32_t index) {
  overflowPos_.emplace(index, static_cast<uint32_t>(overflow_.size()));
  overflow_.push_back(index);
}

void SweepGrid::removeFromOverflow(uint32_t index) {
  const auto at = overflowPos_.find(index);
  BP_ASSERT(at != overflowPos_.end());
  const uint32_t pos = at->second;
  overflowPos_.erase(at);
  const uint32_t last = overflow_.back();
  overflow_.pop_back();
  if (last == index) return;
  overflow_[pos] = last;
  overflowPos_[last] = pos;
}

#if defined(__AVX2__)
// The SoA pass of refreshCell for whole blocks of 8 entries: 8 boxes loaded
// as rows, transposed to the six key columns (22 shuffles instead of 48
// scalar loads and stores), the starts-here flags and the x extents computed
// on the columns. Returns how many entries it wrote (a multiple of 8); the
// caller's scalar loop does the rest and carries on the extent max and sum.
uint32_t SweepGrid::gatherSoA8(SweepCell& c, const uint64_t* order, float* const k[6],
                               uint8_t* flags, float& maxExtentX, float& sumExtentX) const {
  const uint32_t n = c.size();
  uint32_t* ids = c.ids.data();
  const __m256 invX = _mm256_set1_ps(invSide_[0]);
  const __m256 invY = _mm256_set1_ps(invSide_[1]);
  const __m256 invZ = _mm256_set1_ps(invSide_[2]);
  const __m256i cx = _mm256_set1_epi32(c.coord.x);
  const __m256i cy = _mm256_set1_epi32(c.coord.y);
  const __m256i cz = _mm256_set1_epi32(c.coord.z);
  const __m256i lowDwords = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);
  const __m256i flagBytes = _mm256_setr_epi32(0, 4, 0, 0, 0, 0, 0, 0);
  __m256 maxExt = _mm256_setzero_ps(), sumExt = _mm256_setzero_ps();
  uint32_t e = 0;
  for (; e + 8 <= n; e += 8) {
    const uint64_t* o = order + e;
    // ids: the low halves of the 8 keys.
    const __m256i lo4 = _mm256_permutevar8x32_epi32(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(o)), lowDwords);
    const __m256i hi4 = _mm256_permutevar8x32_epi32(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(o + 4)), lowDwords);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(ids + e), _mm256_blend_epi32(lo4, hi4, 0xF0));
    // Rows: box q in lanes 0-5 (min x, y, z, max x, y, z).
    const __m256 r0 = loadBox(boxes_[uint32_t(o[0])]), r1 = loadBox(boxes_[uint32_t(o[1])]);
    const __m256 r2 = loadBox(boxes_[uint32_t(o[2])]), r3 = loadBox(boxes_[uint32_t(o[3])]);
    const __m256 r4 = loadBox(boxes_[uint32_t(o[4])]), r5 = loadBox(boxes_[uint32_t(o[5])]);
    const __m256 r6 = loadBox(boxes_[uint32_t(o[6])]), r7 = loadBox(boxes_[uint32_t(o[7])]);
    // Transpose: t* interleave row pairs, s* hold four rows' fields f (low
    // half) and f + 4 (high half), the columns join rows 0-3 and 4-7.
    const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
    const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
    const __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
    const __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    const __m256 minX = _mm256_permute2f128_ps(s0, s4, 0x20);
    const __m256 maxY = _mm256_permute2f128_ps(s0, s4, 0x31);
    const __m256 minY = _mm256_permute2f128_ps(s1, s5, 0x20);
    const __m256 maxZ = _mm256_permute2f128_ps(s1, s5, 0x31);
    const __m256 minZ = _mm256_permute2f128_ps(s2, s6, 0x20);
    const __m256 maxX = _mm256_permute2f128_ps(s3, s7, 0x20);
    _mm256_storeu_ps(k[0] + e, minX);
    _mm256_storeu_ps(k[1] + e, maxX);
    _mm256_storeu_ps(k[2] + e, minY);
    _mm256_storeu_ps(k[3] + e, maxY);
    _mm256_storeu_ps(k[4] + e, minZ);
    _mm256_storeu_ps(k[5] + e, maxZ);
    const __m256 extent = _mm256_sub_ps(maxX, minX);
    maxExt = _mm256_max_ps(maxExt, extent);
    sumExt = _mm256_add_ps(sumExt, extent);
    // Flags: cellOf() of the min corner against the cell's coordinates, the
    // same floor(v * 1/s) as cellOf().
    auto startsHere = [](__m256 v, __m256 inv, __m256i at, int bit) {
      const __m256i cellOfV = _mm256_cvttps_epi32(_mm256_floor_ps(_mm256_mul_ps(v, inv)));
      return _mm256_and_si256(_mm256_cmpeq_epi32(cellOfV, at), _mm256_set1_epi32(bit));
    };
    const __m256i f = _mm256_or_si256(
        _mm256_or_si256(startsHere(minX, invX, cx, 1), startsHere(minY, invY, cy, 2)),
        startsHere(minZ, invZ, cz, 4));
    // 8 dwords of 0-7 to 8 bytes: packs within each half, then the two
    // halves' first dwords side by side.
    const __m256i bytes = _mm256_packus_epi16(_mm256_packus_epi32(f, f), _mm256_setzero_si256());
    _mm_storel_epi64(reinterpret_cast<__m128i*>(flags + e),
                     _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(bytes, flagBytes)));
  }
  // Horizontal max and sum, in a fixed order (the sum feeds only the choice
  // of kernel, but stays deterministic).
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, maxExt);
  for (const float v : lanes) maxExtentX = std::max(maxExtentX, v);
  _mm256_store_ps(lanes, sumExt);
  for (const float v : lanes) sumExtentX += v;
  return e;
}
#endif

uint32_t SweepGrid::prefetchMemberBoxes(uint32_t cell) const {
  const SweepCell& c = cells_[cell].value;
  const uint32_t n = std::min(c.size(), kPrefetchCellCap);
  const uint32_t* ids = c.ids.data();
  for (uint32_t k = 0; k < n; ++k) __builtin_prefetch(&boxes_[ids[k]], 0, 2);
  return n;
}

void SweepGrid::prefetchAhead(uint32_t u, uint32_t end, BoxPrefetch& p) const {
  // The members a cell gets asked for: only a dirty moving cell is refreshed.
  // Cell u's count is the same now as when it was asked for (its size and
  // dirty flag change in its refresh, which comes after this call), so
  // `ahead` gives back exactly what it took.
  auto askedFor = [](const SweepCell& c) {
    return !isStaticGroup(c.layer) && c.dirty ? std::min(c.size(), kPrefetchCellCap) : 0u;
  };
  if (u < p.next) p.ahead -= askedFor(cells_[u].value);
  p.next = std::max(p.next, u + 1);
  for (; p.next < end && p.ahead < kPrefetchAhead; ++p.next)
    if (askedFor(cells_[p.next].value) != 0) p.ahead += prefetchMemberBoxes(p.next);
}

void SweepGrid::refreshCell(uint32_t cell) {
  // The members that leave, named by their events (scratch per thread, kept).
  thread_local std::vector<uint32_t> leaverScratch;
  std::vector<uint32_t>& leavers = leaverScratch;
  applyCellEvents(cell, leavers);
  SweepCell& c = cells_[cell].value;
  c.dirty = 0;
  // Two ways to drop the members that left. Named leavers (the parallel
  // path's events, a few a cell): an id compared against each, in lanes,
  // with no memory touched. Otherwise (relink() applied the events: it only
  // set `leaving`; or many named): rangeChanged_ (one byte a proxy) spares the
  // range lookup of every member that stayed put, and a member whose range
  // changed is looked up. The lookups were cache misses on kind_ and the range
  // (uniform 10^5: a fifth of the refresh, when every old cell of a relinked
  // proxy was told it might have left).
  constexpr uint32_t kNamedLeavers = 32;
  const uint32_t leaverCount = static_cast<uint32_t>(leavers.size());
  const bool named = c.leaving == 0 && leaverCount != 0 && leaverCount <= kNamedLeavers;
  const bool compact = c.leaving != 0 || leaverCount != 0;
  c.leaving = 0;

  // Sort first, on 8-byte keys gathered from the members' new boxes, then one
  // gather in sorted order writes the SoA arrays (its reads hit the box lines
  // the key pass just loaded). Scratch per thread (cells are refreshed in
  // parallel tasks; this runs on the worker), kept across frames so a steady
  // state allocates nothing.
  thread_local std::vector<uint64_t> sortKeys;
  sortKeys.resize(c.ids.size());
  uint64_t* order = sortKeys.data();
  uint32_t* ids = c.ids.data();
  // The key pass also drops the members that left (when one did): those
  // whose range changed and no longer holds this cell. rangeChanged_ (one
  // byte per proxy) spares the range lookup of every member that stayed put.
  // Kept members keep their relative order, so the old ones stay nearly
  // sorted and the entrants stay at the end.
#if !defined(__AVX2__)
  constexpr uint32_t kAhead = 8;
#endif
  const uint32_t total = c.size();
  uint32_t kept = 0, keptOld = 0;
  uint32_t e = 0;
  // Whether a member whose range changed is still registered in this cell.
  auto stillHere = [&](uint32_t id) {
    return kind_[id] == Registration::cells && layer_[id] == c.layer &&
           rangeContains(rangeAt(id), c.coord);
  };
  auto isNamedLeaver = [&](uint32_t id) {
    return std::find(leavers.begin(), leavers.end(), id) != leavers.end();
  };
  // One entry the scalar way: drop it if it left, else key it.
  auto keyEntry = [&](uint32_t at) {
    const uint32_t id = ids[at];
    const bool keep =
        !compact || (named ? !isNamedLeaver(id) : !rangeChanged_[id] || stillHere(id));
    ids[kept] = id;
    order[kept] = entryKey(boxes_[id].box.min.x(), id);
    kept += keep;
    keptOld += keep & (at < c.sorted);
  };
#if defined(__AVX2__)
  // Blocks of 8 with no member that changed range: the min x of the 8 boxes
  // gathered at once and turned into keys in lanes. A block with a changed
  // member (about one in five on uniform) and the cell's last few entries go
  // one by one.
  {
    const float* base = boxes_.data()->box.min.data();
    const int* changed = reinterpret_cast<const int*>(rangeChanged_.data());
    constexpr int kFloatsPerBox = sizeof(StoredBox) / sizeof(float);
    const __m256i lowByte = _mm256_set1_epi32(0xFF);
    const __m256i zero = _mm256_setzero_si256();
    const __m256i sign = _mm256_set1_epi32(int(0x80000000u));
    // The named leavers, broadcast once.
    __m256i leaver8[kNamedLeavers];
    if (named)
      for (uint32_t l = 0; l < leaverCount; ++l) leaver8[l] = _mm256_set1_epi32(int(leavers[l]));
    // (Lane offsets id * 8 are int32: fine below 2^28 proxies.)
    while (e + 8 <= total && boxes_.size() < (1u << 28)) {
      const __m256i id8 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ids + e));
      if (named) {
        __m256i hit = zero;
        for (uint32_t l = 0; l < leaverCount; ++l)
          hit = _mm256_or_si256(hit, _mm256_cmpeq_epi32(id8, leaver8[l]));
        if (!_mm256_testz_si256(hit, hit)) {
          for (const uint32_t end = e + 8; e < end; ++e) keyEntry(e);
          continue;
        }
      } else if (compact) {
        // rangeChanged_ keeps 3 bytes of padding, so each lane may read the
        // dword at its byte.
        const __m256i flags = _mm256_and_si256(_mm256_i32gather_epi32(changed, id8, 1), lowByte);
        if (!_mm256_testz_si256(flags, flags)) {
          // Most members whose range changed still hold this cell (an
          // entrant, or a box that grew into a neighbour): when all of the
          // block's do, the block is keyed in lanes like any other. Uniform
          // 10^5: about one block in five has such a member, and a block
          // went one entry at a time whenever it had one.
          bool allKept = true;
          for (uint32_t lanes = uint32_t(
                   _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(flags, zero))));
               lanes != 0; lanes &= lanes - 1) {
            allKept &= stillHere(ids[e + uint32_t(__builtin_ctz(lanes))]);
          }
          if (!allKept) {
            for (const uint32_t end = e + 8; e < end; ++e) keyEntry(e);
            continue;
          }
        }
      }
      const __m256i bits =
          _mm256_castps_si256(_mm256_i32gather_ps(base, _mm256_slli_epi32(id8, 3), sizeof(float)));
      static_assert(kFloatsPerBox == 8);
      // entryKey(): flip all bits of a negative, the sign bit of a positive.
      const __m256i ordered =
          _mm256_xor_si256(bits, _mm256_or_si256(_mm256_srai_epi32(bits, 31), sign));
      const __m256i k0145 = _mm256_unpacklo_epi32(id8, ordered);
      const __m256i k2367 = _mm256_unpackhi_epi32(id8, ordered);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(order + kept),
                          _mm256_permute2x128_si256(k0145, k2367, 0x20));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(order + kept + 4),
                          _mm256_permute2x128_si256(k0145, k2367, 0x31));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(ids + kept), id8);
      keptOld += std::min(8u, c.sorted > e ? c.sorted - e : 0u);
      kept += 8;
      e += 8;
    }
  }
#endif
  for (; e < total; ++e) {
#if !defined(__AVX2__)
    // (With AVX2 this loop only finishes a cell's last few entries.)
    if (e + kAhead < total) {
      __builtin_prefetch(&boxes_[ids[e + kAhead]].box);
      __builtin_prefetch(&rangeChanged_[ids[e + kAhead]]);
    }
#endif
    keyEntry(e);
  }
  c.ids.resize(kept);
  const uint32_t n = kept;
  sortCellKeys(order, keptOld, n);
  c.sorted = n;

  const size_t m = size_t(n) + kSweepPad;
  // Headroom when a cell must grow: a cell's population wobbles around its
  // mean as boxes cross its faces, and growing by exactly what is needed
  // would allocate again and again in a steady state. A cell sized for the
  // first time gets an eighth more than it holds (its keys are the largest
  // part of the grid: half would cost 12 bytes a proxy); one that outgrows
  // its arrays has shown that it wobbles more, and gets half more.
  const size_t grown = c.keys.capacity() == 0 ? m + m / 8 + 8 : m + m / 2 + 8;
  if (c.keys.capacity() < 6 * m) c.keys.reserve(6 * grown);
  if (c.flags.capacity() < m) c.flags.reserve(grown);
  c.keys.resize(6 * m);
  c.flags.resize(m);
  std::fill(c.flags.begin() + n, c.flags.end(), uint8_t(0));

  float* const k[6] = {c.keys.data(),         c.keys.data() + m,     c.keys.data() + 2 * m,
                       c.keys.data() + 3 * m, c.keys.data() + 4 * m, c.keys.data() + 5 * m};
  uint8_t* flags = c.flags.data();
#if defined(__SSE4_1__)
  const __m128 inv = _mm_setr_ps(invSide_[0], invSide_[1], invSide_[2], 0.0f);
  const __m128i coord = _mm_setr_epi32(c.coord.x, c.coord.y, c.coord.z, 0);
#endif
  float maxExtentX = 0.0f, sumExtentX = 0.0f;
  e = 0;
#if defined(__AVX2__)
  e = gatherSoA8(c, order, k, flags, maxExtentX, sumExtentX);
#endif
  for (; e < n; ++e) {
    const uint32_t id = uint32_t(order[e]);
    ids[e] = id;
    const Aabb& b = boxes_[id].box;
    const float extentX = b.max.x() - b.min.x();
    maxExtentX = std::max(maxExtentX, extentX);
    sumExtentX += extentX;
    k[0][e] = b.min.x();
    k[1][e] = b.max.x();
    k[2][e] = b.min.y();
    k[3][e] = b.max.y();
    k[4][e] = b.min.z();
    k[5][e] = b.max.z();
    // rangeOf(b).lo == rangeAt(id).lo: the box was registered from this box.
#if defined(__SSE4_1__)
    // cellOf() of the three min coordinates at once (lane 3, max x * 0, is
    // dropped by the mask).
    const __m128i lo = _mm_cvttps_epi32(_mm_floor_ps(_mm_mul_ps(_mm_loadu_ps(b.min.data()), inv)));
    const int starts = _mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(lo, coord))) & 7;
    flags[e] = uint8_t(starts);
#else
    flags[e] =
        uint8_t((cellOf(b.min.x(), 0) == c.coord.x) | ((cellOf(b.min.y(), 1) == c.coord.y) << 1) |
                ((cellOf(b.min.z(), 2) == c.coord.z) << 2));
#endif
  }
  c.maxExtentX = maxExtentX;
  c.sumExtentX = sumExtentX;
  for (int a = 0; a < 6; ++a)
    std::fill(k[a] + n, k[a] + m, a == 0 ? std::numeric_limits<float>::infinity() : 0.0f);
}

void SweepGrid::removeEmptyCells() {
  std::vector<std::pair<CellCoord, uint8_t>>& empty = emptyScratch_;
  empty.clear();
  if (refreshAll_) {
    for (const PaddedCell& pc : cells_)
      if (pc.value.ids.empty()) empty.emplace_back(pc.value.coord, pc.value.layer);
  } else {
    for (const uint32_t cell : dirtyCells_)
      if (cells_[cell].value.ids.empty())
        empty.emplace_back(cells_[cell].value.coord, cells_[cell].value.layer);
  }
  for (const auto& [coord, layer] : empty) {
    const uint32_t idx = maps_[layer].find(coord);
    const uint32_t last = static_cast<uint32_t>(cells_.size() - 1);
    maps_[layer].erase(coord);
    if (idx != last) {
      std::swap(cells_[idx].value, cells_[last].value);
      maps_[cells_[idx].value.layer].assign(cells_[idx].value.coord, idx);
    }
    spareCells_.push_back(std::move(cells_.back().value));  // keep its arrays
    cells_.pop_back();
  }
  if (!empty.empty()) gridBoundsStale_ = true;
}

void SweepGrid::recomputeGridBounds() {
  gridBoundsStale_ = false;
  CellRange b{{INT32_MAX, INT32_MAX, INT32_MAX}, {INT32_MIN, INT32_MIN, INT32_MIN}};
  for (const PaddedCell& pc : cells_) {
    const CellCoord& c = pc.value.coord;
    b.lo[0] = std::min(b.lo[0], c.x);
    b.lo[1] = std::min(b.lo[1], c.y);
    b.lo[2] = std::min(b.lo[2], c.z);
    b.hi[0] = std::max(b.hi[0], c.x);
    b.hi[1] = std::max(b.hi[1], c.y);
    b.hi[2] = std::max(b.hi[2], c.z);
  }
  gridBounds_ = b;
}

void SweepGrid::update(Scheduler& scheduler) {
  if (!beginUpdate(scheduler)) return;
  refreshListedCells(scheduler);
  if (refreshAll_) refreshMovingCells(scheduler);
  finishUpdate();
}

void SweepGrid::refreshMovingCells(Scheduler& scheduler) {
  scheduler.forEach(0, static_cast<uint32_t>(cells_.size()), 64, [&](uint32_t begin, uint32_t end) {
    BoxPrefetch prefetch{begin};
    for (uint32_t cell = begin; cell < end; ++cell) {
      prefetchAhead(cell, end, prefetch);
      if (cells_[cell].value.dirty) refreshCell(cell);
    }
  });
}

void SweepGrid::refreshListedCells(Scheduler& scheduler) {
  scheduler.forEach(0, static_cast<uint32_t>(dirtyCells_.size()), 64,
                    [&](uint32_t begin, uint32_t end) {
                      for (uint32_t k = begin; k < end; ++k) refreshCell(dirtyCells_[k]);
                    });
}

bool SweepGrid::beginUpdate(Scheduler& scheduler) {
  // Events of an update cut short by an exception must not be applied again.
  eventTables_.clear();
  if (!hasPendingChanges()) return false;

  // Pick (or re-pick, once the population has grown 8x) the cell size.
  const uint32_t live = pool_.liveCount();
  const bool autoSize = config_.cellSize <= 0.0f;
  if (side_[0] == 0.0f && !autoSize) chooseCellSize();
  if (autoSize && live > 0 &&
      (side_[0] == 0.0f || (live >= 64 && live >= 8 * uint64_t(sizedForCount_)))) {
    const bool hadCells = side_[0] != 0.0f;
    chooseCellSize();
    if (hadCells) regrid();
  }
  if (side_[0] == 0.0f) {
    // Only removals of never-registered proxies are pending: nothing to do.
    for (const uint32_t i : dirtyList_) dirty_[i] = kDirtyNone;
    for (const uint32_t i : stayedList_) dirty_[i] = kDirtyNone;
    if (unlistedStays_ != 0) std::fill(dirty_.begin(), dirty_.end(), kDirtyNone);
    dirtyList_.clear();
    stayedList_.clear();
    unlistedStays_ = 0;
    return false;
  }

  // (1) The membership diff, in dirty-list order where order matters (so the
  // layout of the cells does not depend on the thread count). move() already
  // told which proxies stayed in their registered cells (kDirtyStayed, in
  // stayedList_: most, in a frame of small moves). When most cells would be
  // touched, refreshing every moving cell is cheaper than looking up every
  // cell of every moved proxy, and then the proxies that stayed need nothing
  // but their state cleared: with many of them, one pass over dirty_ rather
  // than a visit each. This holds for the moving layer only: a static that
  // moved always relinks (canStay), which refreshes its static cells.
  const uint32_t nd = static_cast<uint32_t>(dirtyList_.size());
  plansUsed_ = 1;  // relink() plans in relinkPlans_[0]
  const uint64_t pending = uint64_t(nd) + stayedList_.size() + unlistedStays_;
  const bool refreshAll = pending * 2 >= cells_.size();
  refreshAll_ = refreshAll;
  if (!refreshAll && unlistedStays_ != 0) {
    // A batch move guessed wrong (its handles repeated): list the proxies
    // that stayed, from their states.
    stayedList_.clear();
    for (uint32_t i = 0; i < dirty_.size(); ++i)
      if (dirty_[i] == kDirtyStayed) stayedList_.push_back(i);
  }
  if (refreshAll) {
    // The relinks are planned in parallel chunks; resolveRelinks() then
    // applies the plans in dirty-list order, leaving each cell's share to its
    // refresh. A relink is a few cache misses and cell lookups, so chunks of
    // 64 to 1024 relinks (evenChunks) hold several times a fork's cost
    // (docs/performance.md, "Figures from the code's history"): uniform
    // 10^5's ~3.5 k relinks a frame make four chunks of about 900 on two
    // threads. Static 10^5 relinks only ~250 a frame: with chunks of at least
    // 128 that was one chunk, the frame's one serial planning step; two
    // chunks of about 125 plan faster (docs/decisions.md, "Relinks").
    const EvenChunks split = evenChunks(nd, 1024, 64, uint32_t(scheduler.threadCount()));
    const uint32_t chunks = split.count, chunkSize = split.size;
    if (relinkPlans_.size() < chunks) relinkPlans_.resize(chunks);
    plansUsed_ = chunks;
    // The plans group their events by cell here, in parallel, rather than
    // resolveRelinks serially, while the cells times the plans stay few
    // next to the events (a cell's refresh looks up its events in every
    // plan).
    const uint32_t cellCount = static_cast<uint32_t>(cells_.size());
    const bool groupInTasks = chunks <= 16 && cellCount <= 4 * uint64_t(chunkSize) + 4096;
    scheduler.forEach(0, chunks, 1, [&](uint32_t begin, uint32_t end) {
      for (uint32_t c = begin; c < end; ++c) {
        RelinkPlan& plan = relinkPlans_[c];
        plan.clear();
        const uint32_t last = std::min(nd, (c + 1) * chunkSize);
        for (uint32_t k = std::min(nd, c * chunkSize); k < last; ++k) {
          // The fields planRelink reads and writes, 12 relinks ahead: they
          // are cold by now (the move streamed megabytes since), and one
          // relink's misses would otherwise be waited for one after another
          // (docs/decisions.md, "Relinks").
          if (k + 12 < last) {
            const uint32_t ahead = dirtyList_[k + 12];
            __builtin_prefetch(&boxes_[ahead]);
            __builtin_prefetch(&rangeKey_[ahead], 1);
            __builtin_prefetch(&kind_[ahead]);
            __builtin_prefetch(&layer_[ahead]);
            __builtin_prefetch(&static_[ahead]);
            __builtin_prefetch(&proxyLayer_[ahead]);
          }
          const uint32_t i = dirtyList_[k];
          dirty_[i] = kDirtyNone;
          planRelink(i, true, plan);
        }
        if (groupInTasks) groupPlanEvents(plan, cellCount);
      }
    });
    resolveRelinks(chunks, groupInTasks);
    if (unlistedStays_ != 0 || stayedList_.size() * 16 >= dirty_.size())
      std::fill(dirty_.begin(), dirty_.end(), kDirtyNone);
    else
      for (const uint32_t i : stayedList_) dirty_[i] = kDirtyNone;
  } else {
    for (uint32_t k = 0; k < nd; ++k) {
      const uint32_t i = dirtyList_[k];
      dirty_[i] = kDirtyNone;
      relink(i, false);
    }
    // A proxy listed here that rose to kDirtyRelink was relinked above.
    for (const uint32_t i : stayedList_) {
      if (dirty_[i] == kDirtyStayed) markRangeDirty(rangeAt(i), layer_[i]);
      dirty_[i] = kDirtyNone;
    }
  }
  dirtyList_.clear();
  stayedList_.clear();
  unlistedStays_ = 0;

  // (2) is the caller's: the cells in dirtyCells_ are refreshed, then (when
  // refreshAll_) every moving cell whose `dirty` is still set (by update(),
  // or by findPairs() just before it sweeps the cell, while its arrays are in
  // cache); then finishUpdate().
  if (refreshAll)
    for (PaddedCell& pc : cells_)
      if (!isStaticGroup(pc.value.layer)) pc.value.dirty = 1;
  return true;
}

void SweepGrid::finishUpdate() {
  for (const uint32_t i : changed_) rangeChanged_[i] = 0;
  changed_.clear();
  eventTables_.clear();
  // Scratch grown by an update of many relinks (the first one, a regrid) is
  // released once updates are back to few: it would otherwise keep about
  // 50 bytes a proxy: the first update of 10^6 proxies fills ~1000 plans.
  // The plans the update did not use go once they are over twice those it
  // did, so a steady state (whose count of chunks varies by a few) never
  // meets either condition and does not allocate. (The dirty list keeps its
  // length: a batch move writes up to one entry a moved proxy in place.)
  if (relinkPlans_.size() > 2 * uint64_t(plansUsed_) + 8) {
    relinkPlans_.resize(plansUsed_);
    relinkPlans_.shrink_to_fit();
  }
  for (RelinkPlan& plan : relinkPlans_)
    if (plan.events.capacity() > 8 * plan.events.size() + 65536 ||
        plan.cellBegin.capacity() > 8 * plan.cellBegin.size() + 65536)
      plan = RelinkPlan{};
  if (cellEvents_.capacity() > 8 * cellEvents_.size() + 65536)
    std::vector<uint32_t>().swap(cellEvents_);

  // (3) Release the cells that emptied.
  removeEmptyCells();
  dirtyCells_.clear();
  refreshAll_ = false;
  if (gridBoundsStale_) recomputeGridBounds();
}

}  // namespace bp
