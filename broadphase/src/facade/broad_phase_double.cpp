// BroadPhase's double path: proxies whose boxes are given in double, stored
// in the structure as float boxes relative to origin() rounded outward (a
// superset, so the structure's candidates miss nothing), and decided in
// double here: pairs in accepts() through exactOverlap(), queries by testing
// every float candidate against the double box. The contract and the error
// bounds behind the margins below: docs/large_worlds.md.
#include "facade/broad_phase_impl.h"

#include "common/assert.h"
#include "common/batch_check.h"
#include "common/even_chunks.h"
#include "common/report_error.h"
#include "facade/broad_phase_side.h"
#include "facade/double_world.h"
#include "facade/float_limits.h"
#include "facade/layer_check.h"
#include "facade/query_view.h"
#include "raytree/ray_tree_nearest.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <string>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace bp {

namespace {

bool knownMotion(MotionType m) {
  return m == MotionType::staticBody || m == MotionType::kinematic || m == MotionType::dynamic;
}

// A float box as surelyOverlapInDouble() reads it. With AVX2: its six
// coordinates in lanes, its max first ([max x y z, min x y z, 0, 0]), made
// once for every pair that shares the box (a pair list sorted by its first
// proxy names it many times in a row where pairs are many).
struct DeepBox {
#if defined(__AVX2__)
  __m256 maxMin;
#else
  Aabb box;
#endif
};

#if defined(__AVX2__)
// [min x y z, max x y z, 0, 0]
[[gnu::always_inline]] inline __m256 loadBoxLanes(const Aabb& box) {
  static_assert(sizeof(Aabb) == 6 * sizeof(float));
  return _mm256_maskload_ps(box.min.data(), _mm256_setr_epi32(-1, -1, -1, -1, -1, -1, 0, 0));
}
#endif

[[gnu::always_inline]] inline DeepBox deepBox(const Aabb& box) {
#if defined(__AVX2__)
  return {_mm256_permutevar8x32_ps(loadBoxLanes(box), _mm256_setr_epi32(3, 4, 5, 0, 1, 2, 6, 7))};
#else
  return {box};
#endif
}

// The bound the test adds to each difference: fourPadsOf(the origin) as the
// scalar test takes it; the AVX2 test takes twice that, rounded up to a float.
struct DeepPad {
  double fourPads;
  float twiceInFloat;
};
DeepPad deepPad(double fourPads) { return {fourPads, roundUp(2.0 * fourPads)}; }

// Whether two float boxes of the frame overlap by so much that the double
// boxes behind them surely overlap too, so that accepts() need not read them.
// A double proxy's float box is roundOutward() of its DAabb: each side lies
// outside the double side by at most one float step (below 2^-23 |x| for a
// float x, 2^-149 below the normal range) plus the two pads of 2^-50
// (|coordinate| + |origin|) that cover the subtractions; a float proxy's
// world box is box + origin rounded in double, off by less than one such
// pad. Every coordinate lies within 2^24 + 1 of the origin, so `pad`, from
// the origin alone, bounds every pad. On each axis, when a's upper side minus
// b's lower side exceeds both sides' steps (counted twice, for the
// difference's own rounding) and four pads, and the same the other way, the
// double sides overlap as well. With
// AVX2 the six differences are tested in float lanes against twice the
// bound (2^-21 of the magnitudes and twice the pads): each float operation
// errs by at most 2^-24 relative (2^-150 absolute below the normal range,
// which the pads, at least 2^-140, cover), so a difference that passes in
// float exceeds the double test's bound by a factor near 2, and passes
// it. A pair that fails only here goes to the exact test in double: the
// answer is the same, without the conversions to double, which matters
// where pairs are many (clustered: 25 a proxy; decisions/double.md).
[[gnu::always_inline]] inline bool surelyOverlapInDouble(const DeepBox& a, const Aabb& bBox,
                                                         DeepPad pad) {
#if defined(__AVX2__)
  const __m256 b = loadBoxLanes(bBox);
  const __m256 hi = _mm256_blend_ps(a.maxMin, b, 0x38);  // [a max, b max, 0, 0]
  const __m256 lo = _mm256_blend_ps(b, a.maxMin, 0x38);  // [b min, a min, 0, 0]
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 magnitude = _mm256_add_ps(_mm256_andnot_ps(sign, hi), _mm256_andnot_ps(sign, lo));
  const __m256 bound = _mm256_add_ps(_mm256_mul_ps(_mm256_set1_ps(0x1p-21f), magnitude),
                                     _mm256_set1_ps(pad.twiceInFloat));
  const __m256 deep = _mm256_cmp_ps(_mm256_sub_ps(hi, lo), bound, _CMP_GE_OQ);
  return (_mm256_movemask_ps(deep) & 0x3f) == 0x3f;
#else
  const Aabb& aBox = a.box;
  bool sure = true;
  for (int axis = 0; axis < 3; ++axis) {
    const double aMin = aBox.min[axis], aMax = aBox.max[axis];
    const double bMin = bBox.min[axis], bMax = bBox.max[axis];
    sure &= aMax - bMin >= 0x1p-22 * (std::fabs(aMax) + std::fabs(bMin)) + pad.fourPads;
    sure &= bMax - aMin >= 0x1p-22 * (std::fabs(bMax) + std::fabs(aMin)) + pad.fourPads;
  }
  return sure;
#endif
}

// The bound on every rounding pad of roundOutward() and of a float box's
// world box around `origin` (see surelyOverlapInDouble), four times, with
// 2^-140 for the float steps below the normal range (2^-149 each).
double fourPadsOf(const DVec3& origin) {
  const double o = std::max({std::fabs(origin.x), std::fabs(origin.y), std::fabs(origin.z)});
  return 4.0 * (0x1p-50 * (2.0 * o + 0x1p25)) + 0x1p-140;
}

// A float box of the frame as a world box: box + origin, per coordinate in double.
DAabb toWorld(const Aabb& box, const DVec3& origin) {
  return {toDouble(box.min) + origin, toDouble(box.max) + origin};
}

// The box a double query or pair tests for proxy `p`, whose float box in the
// structure is `frameBox`: a double proxy's applied DAabb, else frameBox +
// origin. (A template only because DoubleWorld is BroadPhase's private type.)
template <class World>
DAabb worldOf(const World* w, const DVec3& origin, const Aabb& frameBox, uint32_t p) {
  if (w != nullptr && w->has(p)) return w->applied(p);
  return toWorld(frameBox, origin);
}

// The float query box for a double one: rounded outward, clamped to the
// frame (no stored box lies outside it). False when nothing of it is left.
bool frameQuery(const DAabb& box, const DVec3& origin, Aabb& out) {
  out = roundOutward(box, origin);
  const Vec3 limit = Vec3::Constant(kMaxCoordinate);
  out.min = out.min.cwiseMax(-limit);
  out.max = out.max.cwiseMin(limit);
  return out.min.x() <= out.max.x() && out.min.y() <= out.max.y() && out.min.z() <= out.max.z();
}

// A clip for the float walk that keeps every candidate whose double entry
// distance is <= t: the float walk's entry distances exceed the double ones
// by a relative 2^-21 at most (docs/large_worlds.md), so 2^-20 and one more
// float step cover them.
float clipAbove(double t) { return std::nextafter(roundUp(t * (1.0 + 0x1p-20)), kInfinity); }

}  // namespace

// --- State --------------------------------------------------------------------

BroadPhase::Impl::DoubleWorld& BroadPhase::Impl::doubleWorld() {
  if (!dworld_) dworld_ = std::make_unique<DoubleWorld>();
  return *dworld_;
}

bool BroadPhase::Impl::isDoubleProxy(uint32_t index) const {
  return dworld_ && dworld_->has(index);
}

DVec3 BroadPhase::Impl::origin() const { return dworld_ ? dworld_->origin : DVec3{}; }

bool BroadPhase::Impl::checkDoubleBox(const DAabb& box, const std::string& where) const {
  if (!isValid(box)) {
    reportError(ErrorCode::invalidBox, where + describeInvalid(box));
    return false;
  }
  if (!isValid(roundOutward(box, origin()))) {
    const DVec3 o = origin();
    reportError(ErrorCode::invalidBox,
                where + "box " + toString(box) + " lies farther than 2^24 from the origin " +
                    toString(DAabb{o, o}) + " on some axis (use shiftOrigin)");
    return false;
  }
  return true;
}

void BroadPhase::Impl::markDouble(uint32_t index, const DAabb& box) {
  DoubleWorld& w = doubleWorld();
  BP_ASSERT(!w.has(index));  // an index is marked once while its proxy lives
  w.mark(index, box);
  if (view_) view_->doublesTouched.push_back(index);
  ++w.count;
  ++special_;  // its pairs go through accepts(), which decides them in double
}

void BroadPhase::Impl::forgetDouble(uint32_t index) {
  if (!dworld_->has(index)) return;
  BP_ASSERT(dworld_->count > 0 && special_ >= dworld_->count);
  dworld_->forget(index);
  if (view_) view_->doublesTouched.push_back(index);
  --dworld_->count;
  --special_;
}

// Called by applyPending() before it clears the pending states: the double
// boxes of the adds and moves it applies become what queries test (a flag
// flip each: DoubleWorld::apply).
void BroadPhase::Impl::applyDoubleBoxes() {
  DoubleWorld& w = *dworld_;
  auto apply = [&](uint32_t i) {
    w.apply(i);
    if (view_) view_->doublesTouched.push_back(i);
  };
  for (const uint32_t i : pendingAdds_)
    if ((state_[i] & kPendingAdd) && w.has(i)) apply(i);
  // An unmarked list, recordFirstBatch's, holds pending moves only, and in
  // strictly increasing order: its chunks flip their flags side by side
  // (without a view, which lists what they touch).
  const uint32_t n = static_cast<uint32_t>(pendingMoves_.size());
  const EvenChunks split = moveChunks(n);
  if (movesUnmarked_ && !view_ && split.count > 1) {
    forEachChunk(*scheduler_, split, n, [&](uint32_t, uint32_t begin, uint32_t end) {
      for (uint32_t k = begin; k < end; ++k) {
        const uint32_t i = pendingMoves_[k];
        if (w.has(i)) w.apply(i);
      }
    });
    return;
  }
  for (const uint32_t i : pendingMoves_)
    if ((movesUnmarked_ || (state_[i] & kPendingMove)) && w.has(i)) apply(i);
}

// accepts(), after applyPending(): a pair with a double proxy stands when
// the double boxes overlap (the structure found it on the outward float boxes).
bool BroadPhase::Impl::exactOverlap(uint32_t a, uint32_t b) const {
  // Most pairs overlap deeply: decided on the float boxes (two reads a pair
  // instead of the double flags' pages and two DAabbs).
  return surelyOverlapInDouble(deepBox(boxes_[a]), boxes_[b],
                               deepPad(fourPadsOf(dworld_->origin))) ||
         overlapInDouble(a, b);
}

// exactOverlap() on the DAabbs.
bool BroadPhase::Impl::overlapInDouble(uint32_t a, uint32_t b) const {
  const DoubleWorld& w = *dworld_;
  const bool da = w.has(a), db = w.has(b);
  if (!da && !db) return true;
  const DAabb boxA = da ? w.applied(a) : toWorld(boxes_[a], w.origin);
  const DAabb boxB = db ? w.applied(b) : toWorld(boxes_[b], w.origin);
  return overlaps(boxA, boxB);
}

void BroadPhase::Impl::dropInexactPairs() {
  std::vector<Pair>& pairs = structure_->pairs;
  const uint32_t n = static_cast<uint32_t>(pairs.size());
  BP_ASSERT(structure_->remapped == 0);
  const EvenChunks split = pairChunks(n);
  // Almost every pair stands: each chunk marks the rare rejected one in
  // place (a == b, which no pair has) and counts, and only a frame with a
  // rejection compacts. The second box of a pair is a scattered read: the
  // boxes of the pair kAhead places on are fetched while this one is tested.
  constexpr uint32_t kAhead = 16;
  const DeepPad pad = deepPad(fourPadsOf(dworld_->origin));
  std::atomic<uint32_t> rejected{0};
  forEachChunk(*scheduler_, split, n, [&](uint32_t, uint32_t begin, uint32_t end) {
    if (begin == end) return;
    uint32_t dropped = 0;
    uint32_t lastA = pairs[begin].a;
    DeepBox boxA = deepBox(boxes_[lastA]);
    for (uint32_t k = begin; k < end; ++k) {
      if (k + kAhead < end) {
        __builtin_prefetch(&boxes_[pairs[k + kAhead].a], 0, 3);
        __builtin_prefetch(&boxes_[pairs[k + kAhead].b], 0, 3);
      }
      const Pair p = pairs[k];
      if (p.a != lastA) {
        boxA = deepBox(boxes_[p.a]);
        lastA = p.a;
      }
      if (!surelyOverlapInDouble(boxA, boxes_[p.b], pad) && !overlapInDouble(p.a, p.b))
          [[unlikely]] {
        pairs[k] = Pair{p.a, p.a};
        ++dropped;
      }
    }
    if (dropped != 0) rejected.fetch_add(dropped, std::memory_order_relaxed);
  });
  if (rejected.load(std::memory_order_relaxed) == 0) return;
  pairs.erase(std::remove_if(pairs.begin(), pairs.end(), [](Pair p) { return p.a == p.b; }),
              pairs.end());
}

bool BroadPhase::Impl::checkDoubleShift(const Vec3& offset) const {
  if (!dworld_ || dworld_->count == 0) return true;
  const DVec3 moved = dworld_->origin + toDouble(offset);
  uint32_t far = kNullIndex;
  dworld_->forEachDouble([&](uint32_t i) {
    if (far == kNullIndex && !isValid(roundOutward(dworld_->pending(i), moved))) far = i;
  });
  if (far == kNullIndex) return true;
  reportError(ErrorCode::invalidBox, "shiftOrigin: double proxy " + std::to_string(far) +
                                         " would lie farther than 2^24 from the new origin");
  return false;
}

// After applyPending() (applied == pending): the float boxes of the double
// proxies, rounded outward again around the new origin.
void BroadPhase::Impl::applyDoubleShift(const Vec3& offset) {
  DoubleWorld& w = doubleWorld();
  w.origin = w.origin + toDouble(offset);
  w.forEachDouble([&](uint32_t i) { boxes_[i] = roundOutward(w.pending(i), w.origin); });
}

std::string BroadPhase::Impl::validateDouble() const {
  if (!dworld_) return {};
  uint32_t live = 0;
  std::string why;
  // Whether index i's add or move is pending (an unmarked list is strictly
  // increasing: searched).
  auto pending = [&](uint32_t i) {
    return (state_[i] & (kPendingAdd | kPendingMove)) != 0 ||
           (movesUnmarked_ && std::binary_search(pendingMoves_.begin(), pendingMoves_.end(), i));
  };
  dworld_->flags.forEachMade([&](uint32_t i, uint8_t f) {
    if (why.empty() && f != 0 && !(f & DoubleWorld::kDouble))
      why = "index " + std::to_string(i) + " holds double flags but no double proxy";
  });
  dworld_->forEachDouble([&](uint32_t i) {
    ++live;
    if (!why.empty()) return;
    if (!pool_.isLiveIndex(i)) {
      why = "double proxy " + std::to_string(i) + " is not live";
      return;
    }
    if ((dworld_->flags[i] & DoubleWorld::kPendingOther) && !pending(i)) {
      why = "double proxy " + std::to_string(i) + " holds a pending DAabb but no pending change";
      return;
    }
    const Aabb expected = roundOutward(dworld_->pending(i), dworld_->origin);
    if (expected.min != boxes_[i].min || expected.max != boxes_[i].max)
      why = "double proxy " + std::to_string(i) +
            " holds a float box that is not its double box "
            "rounded outward around the origin";
  });
  if (!why.empty()) return why;
  if (live != dworld_->count)
    return "double proxies counted " + std::to_string(dworld_->count) + ", found " +
           std::to_string(live);
  return {};
}

// --- Proxies ------------------------------------------------------------------

ProxyId BroadPhase::Impl::add(const DProxyDesc& desc) {
  if (!checkDoubleBox(desc.box, "add: ")) return ProxyId{};
  if (!knownMotion(desc.motion)) {
    reportError(ErrorCode::invalidArgument, "add: motion type " + std::to_string(int(desc.motion)) +
                                                " is not static, kinematic or dynamic");
    return ProxyId{};
  }
  if (desc.layer >= kMaxLayers) {
    reportError(ErrorCode::invalidArgument, "add: " + layerOutOfRange(desc.layer));
    return ProxyId{};
  }
  const ProxyId id = addChecked(
      {roundOutward(desc.box, origin()), desc.motion, desc.filter, desc.userData, desc.layer});
  markDouble(id.index, desc.box);
  return id;
}

void BroadPhase::Impl::add(std::span<const DProxyDesc> descs, std::span<ProxyId> out) {
  std::fill(out.begin(), out.end(), ProxyId{});
  if (descs.size() != out.size()) {
    reportError(ErrorCode::invalidArgument, "add: " + std::to_string(descs.size()) +
                                                " descriptions but room for " +
                                                std::to_string(out.size()) + " handles");
    return;
  }
  for (size_t k = 0; k < descs.size(); ++k) {
    const std::string where = "add: entry " + std::to_string(k) + ": ";
    if (!checkDoubleBox(descs[k].box, where)) return;
    if (!knownMotion(descs[k].motion)) {
      reportError(ErrorCode::invalidArgument, where + "motion type " +
                                                  std::to_string(int(descs[k].motion)) +
                                                  " is not static, kinematic or dynamic");
      return;
    }
    if (descs[k].layer >= kMaxLayers) {
      reportError(ErrorCode::invalidArgument, where + layerOutOfRange(descs[k].layer));
      return;
    }
  }
  for (size_t k = 0; k < descs.size(); ++k) out[k] = add(descs[k]);
}

void BroadPhase::Impl::move(ProxyId id, const DAabb& box) {
  if (!checkLive(id, "move")) return;
  if (!isDoubleProxy(id.index)) {
    reportError(ErrorCode::invalidArgument,
                "move: proxy " + std::to_string(id.index) +
                    " was added with a float box (move it with an Aabb)");
    return;
  }
  if (!checkDoubleBox(box, "move: ")) return;
  dworld_->setPending(id.index, box);
  recordMove(id.index, roundOutward(box, dworld_->origin));
}

void BroadPhase::Impl::move(std::span<const ProxyId> ids, std::span<const DAabb> boxes) {
  if (ids.size() != boxes.size()) {
    reportError(ErrorCode::invalidArgument, "move: " + std::to_string(ids.size()) +
                                                " handles but " + std::to_string(boxes.size()) +
                                                " boxes");
    return;
  }
  const uint32_t n = static_cast<uint32_t>(ids.size());
  if (n == 0) return;
  // Everything validated before anything is recorded, in chunks: every
  // handle live and a double proxy's, every box valid, and its float box
  // (computed once, a chunk at a time, kept for the record) within the frame.
  if (!dworld_ || dworld_->count == 0) {  // no double proxy: the first entry is bad
    reportDoubleMoveCulprit(ids, boxes);
    return;
  }
  DoubleWorld& w = *dworld_;
  w.frameBoxes.resize(n);
  const EvenChunks split = moveChunks(n);
  std::atomic<bool> bad{false};
  // Each entry's tests are and'ed without a branch (nearly every batch is
  // good). A double box that is not finite gives a float box that is not
  // either, so of isValid(DAabb) only the order of min and max is tested on
  // the double box itself (the rounding could hide a slight inversion).
  // Whether each chunk's indices strictly increase (from the chunk before):
  // then no proxy repeats and the chunks write their DAabbs side by side.
  // recordBatch() below takes the same chunks' order from chunkAscending_.
  const bool parallel = split.count > 1;
  if (parallel) chunkAscending_.assign(split.count, 0);
  forEachChunk(*scheduler_, split, n, [&](uint32_t c, uint32_t begin, uint32_t end) {
    roundOutward(boxes.subspan(begin, end - begin), w.origin, &w.frameBoxes[begin]);
    if (parallel) chunkAscending_[c] = indicesAscending(ids, begin, end);
    unsigned good = 1;
    for (uint32_t k = begin; k < end; ++k) {
      const ProxyId id = ids[k];
      const DAabb& box = boxes[k];
      good &= unsigned(pool_.isLiveBranchFree(id)) & unsigned(w.has(id.index)) &
              unsigned(box.min.x <= box.max.x) & unsigned(box.min.y <= box.max.y) &
              unsigned(box.min.z <= box.max.z) & unsigned(isValid(w.frameBoxes[k]));
    }
    if (!good) bad.store(true, std::memory_order_relaxed);
  });
  if (bad.load(std::memory_order_relaxed)) {
    reportDoubleMoveCulprit(ids, boxes);
    return;
  }
  // The double boxes as given, in batch order (a repeated proxy keeps its
  // last), then their float boxes recorded as a float batch is.
  if (parallel &&
      std::all_of(chunkAscending_.begin(), chunkAscending_.end(), [](uint8_t a) { return a; })) {
    forEachChunk(*scheduler_, split, n, [&](uint32_t, uint32_t begin, uint32_t end) {
      for (uint32_t k = begin; k < end; ++k) w.setPending(ids[k].index, boxes[k]);
    });
  } else {
    for (uint32_t k = 0; k < n; ++k) w.setPending(ids[k].index, boxes[k]);
  }
  recordBatch(ids, w.frameBoxes, true);
}

// The first bad entry of a double batch that failed its check, reported.
void BroadPhase::Impl::reportDoubleMoveCulprit(std::span<const ProxyId> ids,
                                               std::span<const DAabb> boxes) const {
  for (size_t k = 0; k < ids.size(); ++k) {
    const std::string where = "move: entry " + std::to_string(k);
    if (!checkLive(ids[k], where.c_str())) return;
    if (!isDoubleProxy(ids[k].index)) {
      reportError(ErrorCode::invalidArgument,
                  where + ": proxy " + std::to_string(ids[k].index) +
                      " was added with a float box (move it with an Aabb)");
      return;
    }
    if (!checkDoubleBox(boxes[k], where + ": ")) return;
  }
}

DAabb BroadPhase::Impl::worldBox(ProxyId id) const {
  if (!checkLive(id, "worldBox")) return toDouble(Aabb::empty());
  if (isDoubleProxy(id.index)) return dworld_->pending(id.index);
  return toWorld(boxes_[id.index], origin());
}

// --- Queries ------------------------------------------------------------------

void BroadPhase::Impl::queryBox(const DAabb& box, OverlapCallback callback,
                                const Filter& filter) const {
  if (!isValid(box)) {
    reportError(ErrorCode::invalidBox, "queryBox: " + describeInvalid(box));
    return;
  }
  const QueryRead read(*this);
  const DVec3 o = read.origin();
  Aabb frame;
  if (!frameQuery(box, o, frame)) return;
  const DoubleWorld* w = read.dworld;
  const Side& side = read.side;
  side.visit([&](const auto& s) {
    s.queryBox(frame, [&](uint32_t slot) {
      const uint32_t p = side.outer[slot];
      if (p == kNullIndex || !filter.accepts(read.filters[p])) return true;
      if (!overlaps(worldOf(w, o, s.box(slot), p), box)) return true;
      return callback(p);
    });
  });
}

void BroadPhase::Impl::queryPoint(const DVec3& point, OverlapCallback callback,
                                  const Filter& filter) const {
  if (!isFinite(point)) {
    reportError(ErrorCode::invalidArgument, "queryPoint: the point is not finite");
    return;
  }
  const QueryRead read(*this);
  const DVec3 o = read.origin();
  Aabb frame;
  if (!frameQuery(DAabb{point, point}, o, frame)) return;
  const DoubleWorld* w = read.dworld;
  const Side& side = read.side;
  side.visit([&](const auto& s) {
    s.queryBox(frame, [&](uint32_t slot) {
      const uint32_t p = side.outer[slot];
      if (p == kNullIndex || !filter.accepts(read.filters[p])) return true;
      if (!containsPoint(worldOf(w, o, s.box(slot), p), point)) return true;
      return callback(p);
    });
  });
}

bool BroadPhase::Impl::checkDoubleRay(const DVec3& start, const DVec3& direction, double length,
                                      const DVec3& frameOrigin, const char* what) const {
  std::string why = describeInvalidRay(start, direction, length);
  if (why.empty() && !(maxAbs(start - frameOrigin) <= double(kMaxCoordinate)))
    why = "ray origin lies farther than 2^24 from the origin on some axis (use shiftOrigin)";
  if (why.empty()) return true;
  reportError(ErrorCode::invalidRay, std::string(what) + ": " + why);
  return false;
}

// The candidates of a double ray: the float ray of the frame, cast against
// every box grown by a margin that covers how far it strays from the double
// ray (the rounding of its origin and direction, and of the frame itself:
// docs/large_worlds.md), so every box the double ray enters is offered.
// fn(proxy, worldBox) decides in double and returns the walk's new reach.
template <class Fn>
void BroadPhase::Impl::walkDoubleRay(const QueryRead& read, const DRay& ray, const Filter& filter,
                                     Fn&& fn) const {
  const DVec3 o = read.origin();
  const DVec3 rel = ray.origin - o;
  // Every stored box lies within kMaxCoordinate of the frame's zero, and so
  // does the ray's origin: nothing lies farther along the ray than this.
  const double reach = std::min(ray.maxT, 4.0 * double(kMaxCoordinate));
  const Ray frameRay =
      makeRay(Vec3(float(rel.x), float(rel.y), float(rel.z)),
              Vec3(float(ray.direction.x), float(ray.direction.y), float(ray.direction.z)),
              roundUp(reach * (1.0 + 0x1p-20)));
  const double margin =
      0x1p-20 * (maxAbs(rel) + reach) + 0x1p-50 * (maxAbs(o) + maxAbs(ray.origin) + reach);
  const Vec3 grow = Vec3::Constant(roundUp(margin));
  const DoubleWorld* w = read.dworld;
  const Side& side = read.side;
  side.visit([&](const auto& s) {
    s.castBox(grow, frameRay, [&](uint32_t slot, float) -> float {
      const uint32_t p = side.outer[slot];
      if (p == kNullIndex || !filter.accepts(read.filters[p])) return kInfinity;
      return fn(p, worldOf(w, o, s.box(slot), p));
    });
  });
}

DRayHit BroadPhase::Impl::castRay(const DVec3& start, const DVec3& direction, double length,
                                  RayQuery kind, const Filter& filter) const {
  const QueryRead read(*this);
  if (!checkDoubleRay(start, direction, length, read.origin(), "castRay")) return DRayHit{};
  if (kind == RayQuery::all) {
    reportError(ErrorCode::invalidArgument, "castRay: use castRayAll for every hit");
    return DRayHit{};
  }
  const DRay ray = makeRay(start, direction, length);
  DRayHit best;
  walkDoubleRay(read, ray, filter, [&](uint32_t p, const DAabb& box) -> float {
    double t;
    if (!intersectRayAabb(ray, box, t)) return kInfinity;
    const DRayHit h{p, t};
    if (kind == RayQuery::any) {
      best = h;
      return -1.0f;
    }
    if (!best.hit() || doubleHitBefore(h, best)) best = h;
    return clipAbove(best.t);
  });
  return best;
}

void BroadPhase::Impl::castRayAll(const DVec3& start, const DVec3& direction, double length,
                                  std::vector<DRayHit>& out, const Filter& filter) const {
  out.clear();
  const QueryRead read(*this);
  if (!checkDoubleRay(start, direction, length, read.origin(), "castRayAll")) return;
  const DRay ray = makeRay(start, direction, length);
  walkDoubleRay(read, ray, filter, [&](uint32_t p, const DAabb& box) -> float {
    double t;
    if (intersectRayAabb(ray, box, t)) out.push_back({p, t});
    return kInfinity;
  });
  std::sort(out.begin(), out.end(), doubleHitBefore);
}

// Two steps. The float nearest (through the rays' tree when there is one,
// else the structure's) gives k accepted proxies; the largest of their
// double distances bounds the k-th nearest. Every proxy that close is a
// candidate: through the tree, every leaf within that radius (grown for the
// frame point's rounding) of the frame point; without it, every box in the
// cube of that radius (a box query, grown for rounding). The exact double
// distances rank them, ties to the lower index. (The cube of the structure
// reaches into dense piles beside the ball: `clustered`, docs/decisions.md,
// "Double-precision worlds".)
void BroadPhase::Impl::nearest(const DVec3& point, uint32_t k, std::vector<DNeighbour>& out,
                               const Filter& filter) const {
  out.clear();
  if (!isFinite(point)) {
    reportError(ErrorCode::invalidArgument, "nearest: the point is not finite");
    return;
  }
  if (k == 0) {
    reportError(ErrorCode::invalidArgument, "nearest: k must be at least 1");
    return;
  }
  const QueryRead read(*this);
  const Side& side = read.side;
  const uint32_t total = side.proxyCount();
  if (total == 0) return;
  const DVec3 o = read.origin();
  const DoubleWorld* w = read.dworld;
  const DVec3 rel = point - o;
  const float limit = kMaxCoordinate;
  auto clampToFrame = [&](double v) { return std::clamp(float(v), -limit, limit); };
  const Vec3 framePoint(clampToFrame(rel.x), clampToFrame(rel.y), clampToFrame(rel.z));
  side.visit([&](const auto& s) {
    auto usable = [&](uint32_t p) { return p != kNullIndex && filter.accepts(read.filters[p]); };
    auto exact = [&](uint32_t slot, uint32_t p) {
      return DNeighbour{p, distanceSquared(worldOf(w, o, s.box(slot), p), point)};
    };
    std::vector<Neighbour> found;
    uint32_t want = std::min(k, total);
    double bound = 0;
    const RayTree* tree = rayTree(read, 0);
    if (tree) {
      // The k nearest accepted proxies in the frame, by slot: any k of them
      // bound the k-th double distance; the nearer they are, the smaller
      // the cube of the second step.
      thread_local std::vector<RayTreeNearestEntry> open;
      nearestInRayTree<true>(*tree, framePoint, k, usable, found, open);
      for (const Neighbour& n : found)
        bound = std::max(bound, exact(n.proxy, side.outer[n.proxy]).distanceSquared);
      if (found.size() < k) {  // every accepted proxy is in `found`
        for (const Neighbour& n : found) out.push_back(exact(n.proxy, side.outer[n.proxy]));
        return;
      }
      want = 0;  // the first step is done
    }
    uint64_t work = 0;
    for (; want != 0;) {
      side.nearest(framePoint, want, found, work);
      uint32_t accepted = 0;
      bound = 0;
      for (const Neighbour& n : found) {
        const uint32_t p = side.outer[n.proxy];
        if (!usable(p)) continue;
        bound = std::max(bound, exact(n.proxy, p).distanceSquared);
        if (++accepted == k) break;
      }
      if (accepted == k) break;
      if (found.size() < want || want >= total) {  // every proxy is in `found`
        for (const Neighbour& n : found)
          if (usable(side.outer[n.proxy])) out.push_back(exact(n.proxy, side.outer[n.proxy]));
        rayTree(read, side.nearestAsRays(work));
        return;
      }
      want = uint32_t(std::min<uint64_t>(uint64_t(want) * 2, total));
    }
    if (want != 0) rayTree(read, side.nearestAsRays(work));  // the structure searched
    const double radius = std::sqrt(bound) * (1.0 + 0x1p-30) + 0x1p-50 * maxAbs(point);
    if (tree) {
      // A leaf within `radius` of the point in double is within radius +
      // |rel - framePoint| of the frame point in float: the leaf's float box
      // holds its exact one, and a clamped axis only brings the point
      // nearer (the frame's cube holds every box). Its node bounds round
      // down, so the walk misses none; extra candidates cost a distance.
      double slip = 0;
      for (int a = 0; a < 3; ++a)
        if (std::fabs(rel[a]) <= limit) {
          const double d = rel[a] - double(framePoint[a]);
          slip += d * d;
        }
      const double reach = (radius + std::sqrt(slip)) * (1.0 + 0x1p-20);
      const float reachSquared = std::nextafter(float(reach * reach), kInfinity);
      thread_local std::vector<uint32_t> stack;
      withinInRayTree(
          *tree, framePoint, reachSquared,
          [&](uint32_t slot, uint32_t p) {
            if (usable(p)) out.push_back(exact(slot, p));
          },
          stack);
      return;
    }
    const DVec3 r{radius, radius, radius};
    Aabb frame;
    if (!frameQuery(DAabb{point - r, point + r}, o, frame)) return;
    s.queryBox(frame, [&](uint32_t slot) {
      const uint32_t p = side.outer[slot];
      if (usable(p)) out.push_back(exact(slot, p));
      return true;
    });
  });
  std::sort(out.begin(), out.end(), doubleNeighbourBefore);
  if (out.size() > k) out.resize(k);
}

}  // namespace bp
