// SweepGrid queries: rays (closest, any, all, callback, batch), swept boxes,
// box and point overlap, k nearest.
//
// Rays walk the grid in segments: the DDA cuts [0, maxT] at the cell
// boundaries the ray crosses, and each segment, grown by a slack (plus the
// half extent of a swept box), visits the cells its bounding box overlaps.
// Growing makes the walk robust: a ray through a cell corner, or rounding
// in o + d t, can not skip a cell a box lives in. In each cell only the boxes
// overlapping the grown segment's bounds are tested (8 at a time), so a ray
// pays for the boxes near it rather than for whole cells.
// Correctness of the early exit: a box entered at t has that entry point in
// the (grown) segment containing t, so it overlaps that segment's bounds and
// is tested there; once a segment ending at t1 >= best.t is done, no box not
// yet tested can come before the best hit.
#include <broadphase/error.h>
#include "sweep/sweep_grid.h"

#include "common/nearest_heap.h"
#include "common/report_error.h"

#include <algorithm>
#include <limits>
#include <unordered_set>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace bp {

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Each reports what is wrong and returns false (see error.h).
bool checkRay(const Ray& ray, const char* what) {
  const std::string why = describeInvalidRay(ray.origin, ray.direction, ray.maxT);
  if (why.empty()) return true;
  reportError(ErrorCode::invalidRay, std::string("SweepGrid::") + what + ": " + why);
  return false;
}

bool checkPoint(const Vec3& p, const char* what) {
  if (isFinite(p) && isWithinLimit(p)) return true;
  reportError(ErrorCode::invalidArgument,
              std::string("SweepGrid::") + what +
                  ": the point is not finite or beyond the coordinate limit");
  return false;
}

// Calls fn(k) for each entry k of the cell whose exact box overlaps `box`
// (closed); fn returns false to stop, and then so does this. Entries are
// sorted on min x, so the scan ends at the first min x beyond box.max.x, and
// starts at the first that can reach box.min.x: no member is longer along x
// than the cell's maxExtentX. (Cells are long along x; a ray crossing one
// near its end would otherwise test every member before it; with cells 16x
// longer than wide, closest-hit rays are markedly faster for this start:
// docs/performance.md, "Figures from the code's history".)
template <class Fn>
bool forEachEntryIn(const SweepCell& c, const Aabb& box, Fn&& fn) {
  const float *minX = c.key(0), *maxX = c.key(1), *minY = c.key(2), *maxY = c.key(3),
              *minZ = c.key(4), *maxZ = c.key(5);
  // Float slack as in the static-twin sweep: the extent and this difference
  // are rounded (relative 2^-24); the entries get the exact test anyway.
  const float from =
      box.min.x() - (c.maxExtentX * (1.0f + 0x1p-20f) + std::fabs(box.min.x()) * 0x1p-22f);
  const uint32_t first = uint32_t(std::lower_bound(minX, minX + c.size(), from) - minX);
#if defined(__AVX2__)
  const __m256 hiX = _mm256_set1_ps(box.max.x()), loX = _mm256_set1_ps(box.min.x());
  const __m256 hiY = _mm256_set1_ps(box.max.y()), loY = _mm256_set1_ps(box.min.y());
  const __m256 hiZ = _mm256_set1_ps(box.max.z()), loZ = _mm256_set1_ps(box.min.z());
  // The +inf padding of min x ends the scan inside the arrays.
  for (uint32_t j = first;; j += 8) {
    const __m256 inX = _mm256_cmp_ps(_mm256_loadu_ps(minX + j), hiX, _CMP_LE_OQ);
    const int xMask = _mm256_movemask_ps(inX);
    if (xMask == 0) return true;
    const __m256 a = _mm256_and_ps(inX, _mm256_cmp_ps(loX, _mm256_loadu_ps(maxX + j), _CMP_LE_OQ));
    const __m256 b = _mm256_and_ps(_mm256_cmp_ps(_mm256_loadu_ps(minY + j), hiY, _CMP_LE_OQ),
                                   _mm256_cmp_ps(loY, _mm256_loadu_ps(maxY + j), _CMP_LE_OQ));
    const __m256 z = _mm256_and_ps(_mm256_cmp_ps(_mm256_loadu_ps(minZ + j), hiZ, _CMP_LE_OQ),
                                   _mm256_cmp_ps(loZ, _mm256_loadu_ps(maxZ + j), _CMP_LE_OQ));
    uint32_t hits = uint32_t(_mm256_movemask_ps(_mm256_and_ps(a, _mm256_and_ps(b, z))));
    while (hits) {
      const uint32_t k = j + uint32_t(__builtin_ctz(hits));
      hits &= hits - 1;
      if (!fn(k)) return false;
    }
    if (xMask != 0xFF) return true;
  }
#else
  const uint32_t n = c.size();
  for (uint32_t k = first; k < n && minX[k] <= box.max.x(); ++k)
    if ((unsigned(box.min.x() <= maxX[k]) & unsigned(minY[k] <= box.max.y()) &
         unsigned(box.min.y() <= maxY[k]) & unsigned(minZ[k] <= box.max.z()) &
         unsigned(box.min.z() <= maxZ[k])) != 0 &&
        !fn(k))
      return false;
  return true;
#endif
}

float maxAbs(const Vec3& v) {
  return std::max(std::fabs(v.x()), std::max(std::fabs(v.y()), std::fabs(v.z())));
}

}  // namespace

bool SweepGrid::checkUpToDate(const char* what) const {
  if (!hasPendingChanges()) return true;
  reportError(ErrorCode::invalidArgument, std::string("SweepGrid::") + what +
                                              ": the SweepGrid has pending changes; call "
                                              "update() first");
  return false;
}

template <class OnCell, class OnSegmentEnd>
void SweepGrid::walkRay(const Ray& ray, const Vec3& grow, const float& maxT, OnCell&& onCell,
                        OnSegmentEnd&& onSegmentEnd) const {
  if (cells_.empty()) return;
  const float* s = side_;
  const Vec3& o = ray.origin;
  const Vec3& d = ray.direction;
  // Covers the rounding of o + d t and of the floor mapping (relative 2^-24)
  // for every point of the ray inside the occupied cells.
  float world = 0.0f;
  for (int a = 0; a < 3; ++a)
    world = std::max({world, std::fabs(float(gridBounds_.lo[a]) * s[a]),
                      std::fabs(float(int64_t(gridBounds_.hi[a]) + 1) * s[a])});
  const float slack = s[0] * 0x1p-10f + (2.0f * maxAbs(o) + world + maxAbs(grow)) * 0x1p-18f;
  const Vec3 g = grow + Vec3(slack, slack, slack);

  // Only the stretch of the ray inside the occupied cells (grown) matters.
  Aabb region;
  for (int a = 0; a < 3; ++a) {
    region.min[a] = float(gridBounds_.lo[a]) * s[a] - g[a];
    region.max[a] = float(int64_t(gridBounds_.hi[a]) + 1) * s[a] + g[a];
  }
  float tBegin = 0.0f, tEnd = maxT;
  if (!clipRayAabb(o, ray.invDirection, region, tBegin, tEnd)) return;

  // Cell coordinates clamped in float first, so no cast can overflow.
  auto cellIn = [&](float v, int a) {
    const float c = std::floor(v * invSide_[a]);
    const float lo = float(gridBounds_.lo[a]) - 1.0f, hi = float(gridBounds_.hi[a]) + 1.0f;
    return int32_t(std::min(std::max(c, lo), hi));
  };

  // The walk steps through cubes of the cross-section side, not through the
  // cells, which are cellStretchX times longer along x: each step's cull box
  // stays small (few members to test, found from the sort on min x), and the
  // walk can stop soon after the best hit. A step looks up the cells its cull
  // box overlaps.
  const float step[3] = {s[1], s[1], s[2]};
  float tNext[3], tDelta[3];
  for (int a = 0; a < 3; ++a) {
    const float start = o[a] + d[a] * tBegin;
    const float c = std::floor(start / step[a]);
    if (d[a] > 0.0f) {
      tNext[a] = ((c + 1.0f) * step[a] - o[a]) * ray.invDirection[a];
      tDelta[a] = step[a] * ray.invDirection[a];
    } else if (d[a] < 0.0f) {
      tNext[a] = (c * step[a] - o[a]) * ray.invDirection[a];
      tDelta[a] = -step[a] * ray.invDirection[a];
    } else {
      tNext[a] = kInf;
      tDelta[a] = kInf;
    }
  }

  float t0 = tBegin;
  for (;;) {
    const float tStop = std::min(maxT, tEnd);
    float t1 = std::min(std::min(tNext[0], tNext[1]), std::min(tNext[2], tStop));
    t1 = std::max(t1, t0);
    Aabb cull;
    CellRange r;
    bool empty = false;
    for (int a = 0; a < 3; ++a) {
      const float p0 = o[a] + d[a] * t0, p1 = o[a] + d[a] * t1;
      cull.min[a] = std::min(p0, p1) - g[a];
      cull.max[a] = std::max(p0, p1) + g[a];
      r.lo[a] = std::max(cellIn(cull.min[a], a), gridBounds_.lo[a]);
      r.hi[a] = std::min(cellIn(cull.max[a], a), gridBounds_.hi[a]);
      empty |= r.lo[a] > r.hi[a];
    }
    if (!empty && !forEachCellInRange(r, [&](const SweepCell& c) { return onCell(c, cull); }))
      return;
    if (!onSegmentEnd(t1)) return;
    if (t1 >= std::min(maxT, tEnd)) return;
    int axis = 0;
    if (tNext[1] < tNext[axis]) axis = 1;
    if (tNext[2] < tNext[axis]) axis = 2;
    tNext[axis] += tDelta[axis];
    t0 = t1;
  }
}

template <class KeyOf>
RayHit SweepGrid::castRayMapped(const Ray& ray, const Vec3& grow, bool anyHit,
                                KeyOf&& keyOf) const {
  RayHit best;
  float maxT = ray.maxT;
  const bool grown = grow.x() != 0.0f || grow.y() != 0.0f || grow.z() != 0.0f;
  // Returns true when the query is over (an any-hit found). The clip keeps
  // hits at exactly maxT, so a tie can still take the lower key.
  auto test = [&](uint32_t id, const Aabb& exact) {
    Aabb box = exact;
    if (grown) box = {exact.min - grow, exact.max + grow};
    float t;
    if (!intersectRayAabb(ray.origin, ray.invDirection, box, 0.0f, maxT, t)) return false;
    const uint32_t key = keyOf(id);
    if (key == kNullIndex) return false;
    const RayHit h{key, t};
    if (!best.hit() || hitBefore(h, best)) {
      best = h;
      maxT = t;
    }
    return anyHit;
  };
  for (const uint32_t id : overflow_)
    if (test(id, boxes_[id].box)) return best;
  walkRay(
      ray, grow, maxT,
      [&](const SweepCell& c, const Aabb& cull) {
        return forEachEntryIn(c, cull, [&](uint32_t k) { return !test(c.ids[k], c.box(k)); });
      },
      [](float) { return true; });
  return best;
}

RayHit SweepGrid::castRayGrown(const Ray& ray, const Vec3& grow, bool anyHit) const {
  return castRayMapped(ray, grow, anyHit, [](uint32_t id) { return id; });
}

RayHit SweepGrid::castRayKeyed(const Ray& ray, bool anyHit,
                               FunctionRef<uint32_t(uint32_t)> keyOf) const {
  return castRayMapped(ray, Vec3::Zero(), anyHit, keyOf);
}

RayHit SweepGrid::castRay(const Ray& ray, RayQuery kind) const {
  if (!checkUpToDate("castRay") || !checkRay(ray, "castRay")) return RayHit{};
  if (kind == RayQuery::all) {
    reportError(ErrorCode::invalidArgument, "SweepGrid::castRay: use castRayAll for RayQuery::all");
    return RayHit{};
  }
  return castRayGrown(ray, Vec3::Zero(), kind == RayQuery::any);
}

RayHit SweepGrid::castBox(const Vec3& halfExtent, const Ray& ray) const {
  if (!checkUpToDate("castBox") || !checkRay(ray, "castBox")) return RayHit{};
  if (!isFinite(halfExtent) || !isWithinLimit(halfExtent) || halfExtent.x() < 0.0f ||
      halfExtent.y() < 0.0f || halfExtent.z() < 0.0f) {
    reportError(ErrorCode::invalidArgument,
                "SweepGrid::castBox: half extent must be finite and >= 0");
    return RayHit{};
  }
  return castRayGrown(ray, halfExtent, false);
}

void SweepGrid::castRayAll(const Ray& ray, std::vector<RayHit>& out) const {
  out.clear();
  if (!checkUpToDate("castRayAll") || !checkRay(ray, "castRayAll")) return;
  const float maxT = ray.maxT;
  auto test = [&](uint32_t id, const Aabb& box) {
    float t;
    if (intersectRayAabb(ray.origin, ray.invDirection, box, 0.0f, maxT, t)) out.push_back({id, t});
  };
  for (const uint32_t id : overflow_) test(id, boxes_[id].box);
  walkRay(
      ray, Vec3::Zero(), maxT,
      [&](const SweepCell& c, const Aabb& cull) {
        return forEachEntryIn(c, cull, [&](uint32_t k) {
          test(c.ids[k], c.box(k));
          return true;
        });
      },
      [](float) { return true; });
  // A box in several cells gives the same hit each time: adjacent after sorting.
  std::sort(out.begin(), out.end(), hitBefore);
  out.erase(std::unique(out.begin(), out.end()), out.end());
}

void SweepGrid::castRay(const Ray& ray, RayCallback callback) const {
  if (!checkUpToDate("castRay") || !checkRay(ray, "castRay")) return;
  castRayGrown(ray, Vec3::Zero(), callback);
}

void SweepGrid::castBox(const Vec3& halfExtent, const Ray& ray, RayCallback callback) const {
  if (!checkUpToDate("castBox") || !checkRay(ray, "castBox")) return;
  if (!isFinite(halfExtent) || !isWithinLimit(halfExtent) || halfExtent.x() < 0.0f ||
      halfExtent.y() < 0.0f || halfExtent.z() < 0.0f) {
    reportError(ErrorCode::invalidArgument,
                "SweepGrid::castBox: half extent must be finite and >= 0");
    return;
  }
  castRayGrown(ray, halfExtent, callback);
}

// The callback form of castRay and castBox: boxes grown by `grow` (zero for
// a ray), delivered nearest first per stretch of the walk, each once.
void SweepGrid::castRayGrown(const Ray& ray, const Vec3& grow, RayCallback callback) const {
  const bool grown = grow.x() != 0.0f || grow.y() != 0.0f || grow.z() != 0.0f;
  auto grownBox = [&](const Aabb& b) { return grown ? Aabb{b.min - grow, b.max + grow} : b; };
  float maxT = ray.maxT;
  bool stopped = false;
  std::unordered_set<uint32_t> delivered;
  std::vector<RayHit> candidates;

  // Overflow hits are merged into the walk by distance.
  std::vector<RayHit> overflowHits;
  for (const uint32_t id : overflow_) {
    float t;
    if (intersectRayAabb(ray.origin, ray.invDirection, grownBox(boxes_[id].box), 0.0f, maxT, t))
      overflowHits.push_back({id, t});
  }
  std::sort(overflowHits.begin(), overflowHits.end(), hitBefore);
  size_t nextOverflow = 0;

  // Delivers the candidates nearest first; false once the callback stops.
  auto deliver = [&]() {
    std::sort(candidates.begin(), candidates.end(), hitBefore);
    for (const RayHit& h : candidates) {
      if (h.t > maxT || !delivered.insert(h.proxy).second) continue;
      const float r = callback(h.proxy, h.t);
      if (r < 0.0f) {
        stopped = true;
        return false;
      }
      maxT = std::min(maxT, r);
    }
    candidates.clear();
    return true;
  };
  walkRay(
      ray, grow, maxT,
      [&](const SweepCell& c, const Aabb& cull) {
        return forEachEntryIn(c, cull, [&](uint32_t k) {
          const uint32_t id = c.ids[k];
          float t;
          if (intersectRayAabb(ray.origin, ray.invDirection, grownBox(c.box(k)), 0.0f, maxT, t) &&
              !delivered.count(id))
            candidates.push_back({id, t});
          return true;
        });
      },
      [&](float t1) {
        while (nextOverflow < overflowHits.size() && overflowHits[nextOverflow].t <= t1)
          candidates.push_back(overflowHits[nextOverflow++]);
        return deliver();
      });
  if (stopped) return;
  while (nextOverflow < overflowHits.size()) candidates.push_back(overflowHits[nextOverflow++]);
  deliver();
}

void SweepGrid::castRays(Scheduler& scheduler, std::span<const Ray> rays, std::span<RayHit> out,
                         RayQuery kind) const {
  // On a rejection every slot of `out` holds a miss.
  const auto reject = [&] { std::fill(out.begin(), out.end(), RayHit{}); };
  if (!checkUpToDate("castRays")) return reject();
  if (rays.size() != out.size()) {
    reportError(ErrorCode::invalidArgument, "SweepGrid::castRays: " + std::to_string(rays.size()) +
                                                " rays but " + std::to_string(out.size()) +
                                                " results");
    return reject();
  }
  if (kind == RayQuery::all) {
    reportError(ErrorCode::invalidArgument,
                "SweepGrid::castRays: RayQuery::all has no single result");
    return reject();
  }
  for (const Ray& r : rays)
    if (!checkRay(r, "castRays")) return reject();
  const bool anyHit = kind == RayQuery::any;
  scheduler.forEach(0, static_cast<uint32_t>(rays.size()), 64, [&](uint32_t begin, uint32_t end) {
    for (uint32_t i = begin; i < end; ++i) out[i] = castRayGrown(rays[i], Vec3::Zero(), anyHit);
  });
}

void SweepGrid::queryBox(const Aabb& box, OverlapCallback callback) const {
  if (!checkUpToDate("queryBox")) return;
  if (!isValid(box)) {
    reportError(ErrorCode::invalidBox, "SweepGrid::queryBox: " + describeInvalid(box));
    return;
  }
  for (const uint32_t id : overflow_)
    if (overlaps(box, boxes_[id].box) && !callback(id)) return;
  const CellRange q = rangeOf(box);
  // Each box is reported by the cell holding the min corner of its
  // intersection with the query: per axis, the query starts there or the box does.
  forEachCellInRange(q, [&](const SweepCell& c) {
    const uint8_t cellMask = uint8_t((c.coord.x == q.lo[0]) | ((c.coord.y == q.lo[1]) << 1) |
                                     ((c.coord.z == q.lo[2]) << 2));
    return forEachEntryIn(c, box, [&](uint32_t k) {
      return ((c.flags[k] | cellMask) & kStartsHereMask) != kStartsHereMask || callback(c.ids[k]);
    });
  });
}

void SweepGrid::queryPoint(const Vec3& point, OverlapCallback callback) const {
  if (!checkUpToDate("queryPoint") || !checkPoint(point, "queryPoint")) return;
  for (const uint32_t id : overflow_)
    if (containsPoint(boxes_[id].box, point) && !callback(id)) return;
  if (cells_.empty()) return;
  const CellCoord coord{cellOf(point.x(), 0), cellOf(point.y(), 1), cellOf(point.z(), 2)};
  for (const CellMap& map : maps_) {  // the moving cell, then the static one
    const uint32_t idx = map.find(coord);
    if (idx == CellMap::kAbsent) continue;
    const SweepCell& c = cells_[idx].value;
    const float* minX = c.minX();
    for (uint32_t k = 0; k < c.size() && minX[k] <= point.x(); ++k)
      if (containsPoint(c.box(k), point) && !callback(c.ids[k])) return;
  }
}

uint64_t SweepGrid::clipToGrid(const CellRange& r, CellRange& clipped) const {
  if (cells_.empty()) return 0;
  for (int a = 0; a < 3; ++a) {
    clipped.lo[a] = std::max(r.lo[a], gridBounds_.lo[a]);
    clipped.hi[a] = std::min(r.hi[a], gridBounds_.hi[a]);
    if (clipped.lo[a] > clipped.hi[a]) return 0;
  }
  uint64_t count = 1;
  for (int a = 0; a < 3 && count <= cells_.size(); ++a)
    count *= uint64_t(int64_t(clipped.hi[a]) - clipped.lo[a] + 1);
  return count;
}

uint64_t SweepGrid::cellsLookedAt(const CellRange& r) const {
  CellRange clipped;
  const uint64_t count = clipToGrid(r, clipped);
  return count > cells_.size() ? cells_.size() : count * maps_.size();
}

// A cube around the point, grown until it holds the k nearest: the boxes
// overlapping the cube [point - r, point + r] are ranked (a box query: each
// once, each cell scanned only over the entries its min-x order lets reach
// the cube), and the answer is final once the k-th is nearer than r, since
// a box that misses the cube is more than r away on some axis. Otherwise
// the cube grows (to just past the k-th found, or by the share of the
// volume still missing) and the query runs again.
// The test leaves a margin for rounding: the k-th must be below
// (r - slack)^2, slack covering the error of point +- r and of the
// distances. Cells are long along x and hold hundreds of boxes, so a search
// that walked whole cells, ring by ring, grew with the world (docs/decisions.md,
// "Nearest"). A point far from dense piles (`clustered`) still ranks many
// boxes once its cube reaches one: the facade then walks the rays' tree.
void SweepGrid::nearest(const Vec3& point, uint32_t k, std::vector<Neighbour>& out,
                        uint64_t* examined) const {
  out.clear();
  if (!checkUpToDate("nearest")) return;
  if (k == 0) {
    reportError(ErrorCode::invalidArgument, "SweepGrid::nearest: k must be >= 1");
    return;
  }
  if (!checkPoint(point, "nearest")) return;
  const uint32_t live = proxyCount();
  if (live == 0) return;
  // A max-heap under neighbourBefore: front() is the worst kept.
  uint64_t ranked = 0, cells = 0;
  auto offer = [&](uint32_t id) {
    ++ranked;
    keepNearest(out, k, {id, distanceSquared(boxes_[id].box, point)});
    return true;
  };
  const float reach = maxAbs(point);
  // Past this half side the cube covers every box (all lie within
  // kMaxCoordinate of the origin).
  const float whole = 2.0f * (kMaxCoordinate + reach);
  // A quarter of a cell across, more for a large k: about the k-th
  // neighbour's distance at the density cells are sized for.
  float r = (side_[1] > 0.0f ? side_[1] : 1.0f) * 0.25f *
            std::cbrt(std::max(1.0f, float(std::min(k, live)) / 8.0f));
  for (;;) {
    out.clear();
    const Vec3 lo = (point - Vec3::Constant(r)).cwiseMax(Vec3::Constant(-kMaxCoordinate));
    const Vec3 hi = (point + Vec3::Constant(r)).cwiseMin(Vec3::Constant(kMaxCoordinate));
    queryBox(Aabb{lo, hi}, offer);
    cells += cellsLookedAt(rangeOf(Aabb{lo, hi}));
    if (r >= whole || out.size() == live) break;  // every box was looked at
    const float safe = r - (r + reach) * 0x1p-20f;
    if (out.size() == k && safe > 0.0f && out.front().distanceSquared < safe * safe) break;
    // With k found, the k-th's distance bounds the answer: a cube just past
    // it holds every box that close. With fewer, grow by the missing share
    // of the volume. Always by a sixteenth at least, so that the loop ends.
    const float next =
        out.size() == k
            ? (std::sqrt(out.front().distanceSquared) + reach * 0x1p-18f) * (1.0f + 0x1p-16f) +
                  r * 0x1p-10f
            : r * std::clamp(1.3f * std::cbrt(float(k) / float(std::max<size_t>(out.size(), 1))),
                             1.25f, 8.0f);
    r = std::max(next, r * 1.0625f);
  }
  std::sort_heap(out.begin(), out.end(), neighbourBefore);
  if (examined) *examined += ranked + kCellLookAsBoxes * cells;
}

}  // namespace bp
