// BroadPhase queries: the structure's callback forms, mapped to proxy indices
// and filtered inside the traversal, so results (including ties, which go to
// the lower proxy index) are the same whichever structure is configured.
// Each query reads through a QueryRead (query_view.h): the main structure,
// or with concurrentQueries the query structure under its lock.
#include "facade/broad_phase_impl.h"

#include "common/ray_order.h"
#include "common/report_error.h"
#include "facade/broad_phase_side.h"
#include "facade/float_limits.h"
#include "facade/query_view.h"
#include "raytree/ray_packet_walk.h"
#include "raytree/ray_tree_nearest.h"
#include "raytree/ray_tree_walk.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <limits>
#include <string>
#include <type_traits>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

namespace bp {

namespace {

// Batches of at least this many rays, over a tree of at least this many
// bytes, are cast in Morton order (common/ray_order.h); batches of at least
// as many points are searched for their nearest in Morton order, whatever
// the tree (a search walks a few times a ray's nodes).
constexpr uint32_t kMortonOrderRays = 4096;
constexpr size_t kMortonOrderBytes = size_t(4) << 20;

// Reports a bad ray (false then). The message is made only for a bad one.
bool checkRay(const Vec3& origin, const Vec3& direction, float length, const char* what) {
  if (isValidRay(origin, direction, length)) return true;
  reportError(ErrorCode::invalidRay,
              std::string(what) + ": " + describeInvalidRay(origin, direction, length));
  return false;
}

bool checkRay(const Ray& r, const char* what) {
  return checkRay(r.origin, r.direction, r.maxT, what);
}

#if !defined(__AVX__)
// isValidRay() without a branch: |x| <= limit is false for NaN, so each
// "finite and within" is one compare. A lidar's ray costs a few ns to cast,
// and branchy checks a tenth of that again.
bool isValidRayBits(const Ray& r) {
  constexpr float kLargest = std::numeric_limits<float>::max();
  bool ok = (r.maxT > 0.0f) & (r.maxT <= kLargest);
  bool nonZero = false;
  for (int a = 0; a < 3; ++a) {
    ok &= std::fabs(r.origin[a]) <= kMaxCoordinate;
    ok &= std::fabs(r.direction[a]) <= kLargest;
    nonZero |= r.direction[a] != 0.0f;
  }
  return ok & nonZero;
}
#endif

// Whether rays[begin, end) all pass isValidRay(); `shared` is cleared
// when one's origin differs from the first's. With AVX a ray is one load of
// its first eight floats (origin, direction, length, and one it ignores).
bool checkPacket(std::span<const Ray> rays, size_t begin, size_t end, bool& shared) {
  static_assert(offsetof(Ray, origin) == 0 && offsetof(Ray, direction) == 12 &&
                offsetof(Ray, maxT) == 24 && sizeof(Ray) >= 32);
#if defined(__AVX__)
  constexpr float kLargest = std::numeric_limits<float>::max();
  const __m256 limit = _mm256_setr_ps(kMaxCoordinate, kMaxCoordinate, kMaxCoordinate, kLargest,
                                      kLargest, kLargest, kLargest, 0.0f);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 first = _mm256_loadu_ps(reinterpret_cast<const float*>(&rays[begin]));
  int valid = 0x7F, same = 0x7;
  for (size_t k = begin; k < end; ++k) {
    const __m256 v = _mm256_loadu_ps(reinterpret_cast<const float*>(&rays[k]));
    // |x| <= limit: false for NaN; the length also > 0; some direction
    // component not 0 (each ray).
    const int within =
        _mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign, v), limit, _CMP_LE_OQ));
    const int positive =
        _mm256_movemask_ps(_mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_GT_OQ)) | ~0x40;
    const int zero = _mm256_movemask_ps(_mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_EQ_OQ));
    valid &= within & positive & ((zero & 0x38) == 0x38 ? 0 : 0x7F);
    same &= _mm256_movemask_ps(_mm256_cmp_ps(v, first, _CMP_EQ_OQ));
  }
  shared = (same & 0x7) == 0x7;
  return valid == 0x7F;
#else
  bool valid = true;
  shared = true;
  for (size_t k = begin; k < end; ++k) {
    valid &= isValidRayBits(rays[k]);
    shared &= rays[k].origin == rays[begin].origin;
  }
  return valid;
#endif
}

// Asks for rays[begin, end) (clipped to the batch) to be fetched: a packet
// two ahead of the one being cast, for a batch streamed from memory (a
// lidar's million rays are 40 MB) whose walk leaves the prefetchers no
// regular stream to follow.
void prefetchRays(std::span<const Ray> rays, size_t begin, size_t end) {
#if defined(__SSE2__)
  end = std::min(end, rays.size());
  if (begin >= end) return;
  const char* first = reinterpret_cast<const char*>(rays.data() + begin);
  const char* last = reinterpret_cast<const char*>(rays.data() + end);
  for (const char* line = first; line < last; line += 64) _mm_prefetch(line, _MM_HINT_T0);
#else
  (void)rays;
  (void)begin;
  (void)end;
#endif
}

// "what: ray k: why" for the first bad ray of a batch, or "" when every ray
// is good: blocks are checked with checkPacket, and only a block with a bad
// ray is checked ray by ray with isValidRay, its first bad one described.
std::string firstInvalidRay(std::span<const Ray> rays, const char* what) {
  constexpr size_t kBlock = 256;
  for (size_t begin = 0; begin < rays.size(); begin += kBlock) {
    const size_t end = std::min(rays.size(), begin + kBlock);
    bool sameOrigin;  // not asked here
    if (checkPacket(rays, begin, end, sameOrigin)) continue;
    for (size_t k = begin; k < end; ++k)
      if (const Ray& r = rays[k]; !isValidRay(r.origin, r.direction, r.maxT))
        return std::string(what) + ": ray " + std::to_string(k) + ": " +
               describeInvalidRay(r.origin, r.direction, r.maxT);
  }
  return {};
}

bool checkPoint(const Vec3& point, const char* what) {
  if (isFinite(point) && isWithinLimit(point)) return true;
  reportError(ErrorCode::invalidArgument,
              std::string(what) + ": point is not finite or beyond 2^24");
  return false;
}

// Casts `ray` through one structure. A ray already clipped to length 0 (by a
// hit at its origin on another side) can only meet boxes that contain its
// origin, at t = 0: the structures take no zero-length rays, so that case is
// a point query.
template <class Structure, class Callback>
void castThrough(const Structure& s, const Ray& ray, Callback&& callback) {
  if (ray.maxT > 0.0f) {
    s.castRay(ray, callback);
    return;
  }
  s.queryPoint(ray.origin, [&](uint32_t slot) { return callback(slot, 0.0f) >= 0.0f; });
}

}  // namespace

void BroadPhase::Impl::queryBox(const Aabb& box, OverlapCallback callback,
                                const Filter& filter) const {
  if (!isValid(box)) {
    reportError(ErrorCode::invalidBox, "queryBox: " + describeInvalid(box));
    return;
  }
  const QueryRead read(*this);
  const Side& side = read.side;
  side.visit([&](const auto& s) {
    s.queryBox(box, [&](uint32_t slot) {
      const uint32_t p = side.outer[slot];
      if (p == kNullIndex || !filter.accepts(read.filters[p])) return true;
      return callback(p);
    });
  });
}

void BroadPhase::Impl::queryPoint(const Vec3& point, OverlapCallback callback,
                                  const Filter& filter) const {
  if (!checkPoint(point, "queryPoint")) return;
  const QueryRead read(*this);
  const Side& side = read.side;
  side.visit([&](const auto& s) {
    s.queryPoint(point, [&](uint32_t slot) {
      const uint32_t p = side.outer[slot];
      if (p == kNullIndex || !filter.accepts(read.filters[p])) return true;
      return callback(p);
    });
  });
}

namespace {

// Whether proxy p (kNullIndex: a slot that maps to none) may be reported to
// a query with `filter`. `filters`: the proxies' filters to check it against,
// null when the filter accepts every proxy (QueryRead::filtersOf).
template <class Filters>
bool reportable(uint32_t p, const Filter& filter, const Filters* filters) {
  return p != kNullIndex && (!filters || filter.accepts((*filters)[p]));
}

// Closest or any hit through a BroadPhase's ray tree, when it has one for
// this ray, or else its structure; in proxy indices. (Templates only because
// Side and QueryRead::Filters are BroadPhase's private types.)
// `filters`: the proxies' filters to check it against, null when the filter
// accepts every proxy (QueryRead::filtersOf).
template <class Side, class Filters>
RayHit castOne(const Side& side, const RayTree* tree, const Ray& ray, RayQuery kind,
               const Filter& filter, const Filters* filters) {
  RayHit best;
  if (tree) {
    const auto accepted = [&](uint32_t p) { return reportable(p, filter, filters); };
    if (kind == RayQuery::any) {
      RayTreeWalk(*tree, ray).walkUnordered(ray.maxT, [&](uint32_t p, float t) {
        if (!accepted(p)) return true;
        best = {p, t};
        return false;
      });
      return best;
    }
    float reach = ray.maxT;
    RayTreeWalk(*tree, ray).walk(reach, [&](uint32_t p, float t) {
      if (!accepted(p)) return true;
      const RayHit h{p, t};
      if (!best.hit() || hitBefore(h, best)) {
        best = h;
        reach = t;
      }
      return true;
    });
    return best;
  }
  side.visit([&](const auto& s) {
    // The sweep's own closest/any walk, in proxy indices: its callback form
    // keeps a set and sorts per ray, so that each box (which may lie in
    // several cells) reaches the callback once and nearest first.
    if constexpr (std::is_same_v<std::decay_t<decltype(s)>, SweepGrid>) {
      if (ray.maxT > 0.0f) {
        best = s.castRayKeyed(ray, kind == RayQuery::any, [&](uint32_t slot) {
          const uint32_t p = side.outer[slot];
          return reportable(p, filter, filters) ? p : kNullIndex;
        });
        return;
      }
    }
    castThrough(s, ray, [&](uint32_t slot, float t) -> float {
      const uint32_t p = side.outer[slot];
      if (!reportable(p, filter, filters)) return kInfinity;
      const RayHit h{p, t};
      if (kind == RayQuery::any) {
        best = h;
        return -1.0f;
      }
      if (!best.hit() || hitBefore(h, best)) best = h;
      return best.t;  // clip: only hits at or before the best remain
    });
  });
  return best;
}

// Whether the batch's rays come in runs from one origin (a lidar's scans, a
// camera's pixels): most neighbours among its first 1024 rays share theirs.
// A batch of rays from everywhere walks ray by ray: its packets would part
// at the first nodes.
bool sharesOrigins(std::span<const Ray> rays) {
  const size_t n = std::min<size_t>(rays.size(), 1024);
  size_t same = 0;
  for (size_t k = 1; k < n; ++k) same += rays[k].origin == rays[k - 1].origin;
  return n > 1 && 2 * same > n;
}

// Closest or any hit of `count` rays that share their origin, through the
// tree as one packet (ray_packet_walk.h): each ray's answer is castOne's.
template <class Filters>
void castPacket(const RayTree& tree, const Ray* rays, int count, RayQuery kind,
                const Filter& filter, const Filters* filters, RayHit* best) {
  RayPacketWalk(tree, rays, count)
      .cast(
          rays, kind == RayQuery::any, [&](uint32_t p) { return reportable(p, filter, filters); },
          best);
}

// Every proxy the ray enters up to its reach, to `callback(proxy, t)` as the
// structures' callback form (clip, keep or stop): through the tree when there
// is one, else the structure.
template <class Side, class Callback>
void castEach(const Side& side, const RayTree* tree, const Ray& ray, Callback&& callback) {
  if (tree) {
    float reach = ray.maxT;
    RayTreeWalk(*tree, ray).walk(reach, [&](uint32_t p, float t) {
      if (p == kNullIndex) return true;
      const float r = callback(p, t);
      if (r < 0.0f) return false;
      if (r < reach) reach = r;
      return true;
    });
    return;
  }
  side.visit([&](const auto& s) {
    castThrough(s, ray, [&](uint32_t slot, float t) -> float {
      const uint32_t p = side.outer[slot];
      return p == kNullIndex ? kInfinity : callback(p, t);
    });
  });
}

// Appends to `list` every proxy the ray enters that the filter accepts,
// sorted by hitBefore (castRayAll's answer, and one ray's of castRaysAll).
template <class Side, class Filters>
void appendEveryHit(const Side& side, const RayTree* tree, const Ray& ray, const Filter& filter,
                    const Filters* filters, std::vector<RayHit>& list) {
  const size_t first = list.size();
  castEach(side, tree, ray, [&](uint32_t p, float t) -> float {
    if (!filters || filter.accepts((*filters)[p])) list.push_back({p, t});
    return kInfinity;
  });
  std::sort(list.begin() + ptrdiff_t(first), list.end(), hitBefore);
}

}  // namespace

// The ray tree for `count` rays about to be cast, or null (side_rays.h). A
// query structure's tree is made on the calling thread, as its rays are.
const RayTree* BroadPhase::Impl::rayTree(const QueryRead& read, uint64_t count) const {
  return read.side.rayTreeFor(count, config_.rayTree, read.workers);
}

void BroadPhase::Impl::prepareRays() const {
  if (config_.rayTree == RayTreeMode::never) return;
  const QueryRead read(*this);
  read.side.rayTreeFor(0, RayTreeMode::always, read.workers);
}

RayHit BroadPhase::Impl::castRay(const Vec3& origin, const Vec3& direction, float length,
                                 RayQuery kind, const Filter& filter) const {
  if (!checkRay(origin, direction, length, "castRay")) return RayHit{};
  return castRay(makeRay(origin, direction, length), kind, filter);
}

void BroadPhase::Impl::castRayAll(const Vec3& origin, const Vec3& direction, float length,
                                  std::vector<RayHit>& out, const Filter& filter) const {
  if (!checkRay(origin, direction, length, "castRayAll")) {
    out.clear();
    return;
  }
  castRayAll(makeRay(origin, direction, length), out, filter);
}

RayHit BroadPhase::Impl::castRay(const Ray& ray, RayQuery kind, const Filter& filter) const {
  if (!checkRay(ray, "castRay")) return RayHit{};
  if (kind == RayQuery::all) {
    reportError(ErrorCode::invalidArgument, "castRay: use castRayAll for every hit");
    return RayHit{};
  }
  const QueryRead read(*this);
  bool none;
  const auto* filters = read.filtersOf(filter, none);
  if (none) return RayHit{};
  return castOne(read.side, rayTree(read, 1), ray, kind, filter, filters);
}

void BroadPhase::Impl::castRayAll(const Ray& ray, std::vector<RayHit>& out,
                                  const Filter& filter) const {
  out.clear();
  if (!checkRay(ray, "castRayAll")) return;
  const QueryRead read(*this);
  bool none;
  const auto* filters = read.filtersOf(filter, none);
  if (none) return;
  appendEveryHit(read.side, rayTree(read, 1), ray, filter, filters, out);
}

void BroadPhase::Impl::castRay(const Vec3& origin, const Vec3& direction, float length,
                               RayCallback callback, const Filter& filter) const {
  if (!checkRay(origin, direction, length, "castRay")) return;
  const Ray r = makeRay(origin, direction, length);
  const QueryRead read(*this);
  bool none;
  const auto* filters = read.filtersOf(filter, none);
  if (none) return;
  castEach(read.side, rayTree(read, 1), r, [&](uint32_t p, float t) -> float {
    return !filters || filter.accepts((*filters)[p]) ? callback(p, t) : kInfinity;
  });
}

void BroadPhase::Impl::castRays(std::span<const Ray> rays, std::span<RayHit> out, RayQuery kind,
                                const Filter& filter) const {
  // On a rejection every slot of `out` holds a miss (before the handler
  // runs: it may throw).
  const auto reject = [&](ErrorCode code, const std::string& message) {
    std::fill(out.begin(), out.end(), RayHit{});
    reportError(code, message);
  };
  if (rays.size() != out.size())
    return reject(ErrorCode::invalidArgument, "castRays: " + std::to_string(rays.size()) +
                                                  " rays but room for " +
                                                  std::to_string(out.size()) + " results");
  if (kind == RayQuery::all)
    return reject(ErrorCode::invalidArgument,
                  "castRays: batches take closest or any (castRaysAll: every hit)");
  const auto rejectInvalid = [&] {
    if (const std::string bad = firstInvalidRay(rays, "castRays"); !bad.empty()) {
      reject(ErrorCode::invalidRay, bad);
      return true;
    }
    return false;
  };
  // Each ray writes only its own slot: the result is the same for any split.
  // A query structure's rays stay on the calling thread (read.workers).
  const QueryRead read(*this);
  bool none;
  const auto* filters = read.filtersOf(filter, none);
  if (none) {
    if (!rejectInvalid()) std::fill(out.begin(), out.end(), RayHit{});
    return;
  }
  // A tree past the caches is walked in the Morton order of the origins,
  // unless the rays come in runs from one origin (packets, below), which
  // that order would only copy. Packets check their rays as they take
  // them (below); other batches are checked here, before anything is made
  // for them.
  const bool packets = sharesOrigins(rays);
  if (!packets && rejectInvalid()) return;
  const RayTree* tree = rayTree(read, rays.size());
  Scheduler* const scheduler = read.workers;
  const uint32_t count = uint32_t(rays.size());
  std::vector<uint32_t> order;
  if (tree && !packets && count >= kMortonOrderRays &&
      tree->nodes().size() * sizeof(RayNode) >= kMortonOrderBytes)
    order = mortonOrder(scheduler, rays);
  auto cast = [&](uint32_t begin, uint32_t end) {
    if (order.empty()) {
      for (uint32_t k = begin; k < end; ++k)
        out[k] = castOne(read.side, tree, rays[k], kind, filter, filters);
      return;
    }
    castInOrder(order, rays, out, begin, end, [&](const Ray& ray) {
      return castOne(read.side, tree, ray, kind, filter, filters);
    });
  };
  // Rays that share their origin (a lidar's, a camera's) walk the tree as
  // packets: the walk order's runs of kRayPacket at fixed positions, so
  // that the grouping, like every answer, is the same for any split.
  // A packet's rays are checked as it takes them, in cache for its walk
  // (a pass of its own over a lidar's batch, 40 bytes a ray, costs a sixth
  // of the cast): a batch with an invalid ray is then answered as if it
  // had been checked first, misses and the first invalid ray's error.
  std::atomic<bool> invalid = false;
  const auto castPackets = [&](uint32_t firstPacket, uint32_t endPacket) {
    for (uint32_t j = firstPacket; j < endPacket; ++j) {
      const uint32_t begin = j * kRayPacket;
      const uint32_t end = std::min<uint32_t>(begin + kRayPacket, count);
      prefetchRays(rays, end + kRayPacket, end + 2 * kRayPacket);
      bool shared;
      if (!checkPacket(rays, begin, end, shared)) {
        invalid.store(true, std::memory_order_relaxed);
        continue;
      }
      if (!tree || !shared) {
        for (uint32_t k = begin; k < end; ++k)
          out[k] = castOne(read.side, tree, rays[k], kind, filter, filters);
        continue;
      }
      castPacket(*tree, &rays[begin], int(end - begin), kind, filter, filters, &out[begin]);
    }
  };
  if (packets) {
    const uint32_t packets = (count + kRayPacket - 1) / kRayPacket;
    if (scheduler)
      scheduler->forEach(0, packets, 256 / kRayPacket, castPackets);
    else
      castPackets(0, packets);
    if (invalid.load(std::memory_order_relaxed)) rejectInvalid();
    return;
  }
  if (scheduler)
    scheduler->forEach(0, count, 256, cast);
  else
    cast(0, count);
}

void BroadPhase::Impl::castRaysAll(std::span<const Ray> rays, std::vector<RayHit>& hits,
                                   std::vector<size_t>& offsets, const Filter& filter) const {
  hits.clear();
  offsets.assign(rays.size() + 1, 0);
  if (const std::string bad = firstInvalidRay(rays, "castRaysAll"); !bad.empty())
    return reportError(ErrorCode::invalidRay, bad);
  const QueryRead read(*this);
  bool none;
  const auto* filters = read.filtersOf(filter, none);
  if (none) return;
  const RayTree* tree = rayTree(read, rays.size());
  // Fixed chunks of rays, each with its own list, laid end to end after:
  // the same result for any split over the workers. offsets[r + 1] holds
  // ray r's count until the sum.
  constexpr size_t kChunk = 256;
  const size_t chunks = (rays.size() + kChunk - 1) / kChunk;
  std::vector<std::vector<RayHit>> found(chunks);
  auto cast = [&](uint32_t begin, uint32_t end) {
    for (size_t c = begin; c < end; ++c) {
      std::vector<RayHit>& list = found[c];
      for (size_t r = c * kChunk; r < std::min(rays.size(), (c + 1) * kChunk); ++r) {
        const size_t before = list.size();
        appendEveryHit(read.side, tree, rays[r], filter, filters, list);
        offsets[r + 1] = list.size() - before;
      }
    }
  };
  if (read.workers)
    read.workers->forEach(0, uint32_t(chunks), 1, cast);
  else
    cast(0, uint32_t(chunks));
  for (size_t r = 0; r < rays.size(); ++r) offsets[r + 1] += offsets[r];
  hits.reserve(offsets.back());
  for (const std::vector<RayHit>& list : found) hits.insert(hits.end(), list.begin(), list.end());
}

namespace {

// The k nearest accepted proxies to `point` into `out` (sorted by
// neighbourBefore): through the rays' tree when there is one, else the
// structure's own search. Returns what the search counts as toward the
// tree (Side::nearestAsRays; 0 through the tree). (Templates only because
// Side and QueryRead::Filters are BroadPhase's private types.)
template <class Side, class Filters>
uint64_t nearestOne(const Side& side, const RayTree* tree, const Filters& all, const Vec3& point,
                    uint32_t k, const Filter& filter, const Filters* filters,
                    std::vector<Neighbour>& out) {
  if (tree) {
    thread_local std::vector<RayTreeNearestEntry> open;
    nearestInRayTree(
        *tree, point, k, [&](uint32_t p) { return reportable(p, filter, filters); }, out, open);
    return 0;
  }
  out.clear();
  thread_local std::vector<Neighbour> found;
  // Fetch more until k accepted neighbours are in hand and the last one
  // fetched is strictly farther than the k-th: then no tie at the boundary
  // can be lost to the structure's own (slot) order.
  uint32_t want = k;
  uint64_t work = 0;
  const uint32_t total = side.proxyCount();
  const auto usable = [&](uint32_t slot) {
    const uint32_t p = side.outer[slot];
    return p != kNullIndex && filter.accepts(all[p]);
  };
  for (;;) {
    side.nearest(point, want, found, work);
    uint32_t accepted = 0;
    float kth = kInfinity;
    for (const Neighbour& n : found)
      if (usable(n.proxy) && ++accepted == k) {
        kth = n.distanceSquared;
        break;
      }
    const bool exhausted = found.size() < want || want >= total;
    if (exhausted || (accepted == k && found.back().distanceSquared > kth)) break;
    want = std::min<uint64_t>(uint64_t(want) * 2, total);
  }
  for (const Neighbour& n : found)
    if (usable(n.proxy)) out.push_back({side.outer[n.proxy], n.distanceSquared});
  std::sort(out.begin(), out.end(), neighbourBefore);
  if (out.size() > k) out.resize(k);
  return side.nearestAsRays(work);
}

}  // namespace

void BroadPhase::Impl::nearest(const Vec3& point, uint32_t k, std::vector<Neighbour>& out,
                               const Filter& filter) const {
  out.clear();
  if (!checkPoint(point, "nearest")) return;
  if (k == 0) {
    reportError(ErrorCode::invalidArgument, "nearest: k must be at least 1");
    return;
  }
  const QueryRead read(*this);
  bool none;
  const auto* filters = read.filtersOf(filter, none);
  if (none) return;
  // The tree when it is there (or the searches so far pay for it now);
  // else the structure answers and its work is counted toward the tree.
  const RayTree* tree = rayTree(read, 0);
  const uint64_t cost = nearestOne(read.side, tree, read.filters, point, k, filter, filters, out);
  if (!tree) rayTree(read, cost);
}

void BroadPhase::Impl::nearest(std::span<const Vec3> points, uint32_t k,
                               std::vector<Neighbour>& out, std::vector<size_t>& offsets,
                               const Filter& filter) const {
  out.clear();
  offsets.assign(points.size() + 1, 0);
  for (size_t q = 0; q < points.size(); ++q)
    if (!isFinite(points[q]) || !isWithinLimit(points[q]))
      return reportError(ErrorCode::invalidArgument,
                         "nearest: point " + std::to_string(q) + " is not finite or beyond 2^24");
  if (k == 0) return reportError(ErrorCode::invalidArgument, "nearest: k must be at least 1");
  const QueryRead read(*this);
  bool none;
  const auto* filters = read.filtersOf(filter, none);
  if (none) return;
  // A large batch is searched in the Morton order of its points (the tree's
  // nodes stay in cache from one search to the next), in fixed chunks of
  // that order, each with its own list; each point's neighbours are copied
  // to its place after: the same result for any order and any split over
  // the workers.
  const uint32_t count = uint32_t(points.size());
  std::vector<uint32_t> order;
  if (count >= kMortonOrderRays) order = mortonOrder(read.workers, points);
  const auto pointAt = [&](uint32_t place) { return order.empty() ? place : order[place]; };
  constexpr uint32_t kChunk = 64;
  const uint32_t chunks = (count + kChunk - 1) / kChunk;
  std::vector<std::vector<Neighbour>> lists(chunks);
  std::vector<uint32_t> startIn(count);  // where point q's neighbours begin in its chunk's list
  const RayTree* tree = nullptr;
  const auto search = [&](uint32_t c) {
    std::vector<Neighbour> one;
    uint64_t cost = 0;
    for (uint32_t place = c * kChunk; place < std::min(count, (c + 1) * kChunk); ++place) {
      const uint32_t q = pointAt(place);
      cost += nearestOne(read.side, tree, read.filters, points[q], k, filter, filters, one);
      startIn[q] = uint32_t(lists[c].size());
      lists[c].insert(lists[c].end(), one.begin(), one.end());
      offsets[q + 1] = one.size();
    }
    return cost;
  };
  // Without a tree, the first chunk goes through the structure and its work,
  // scaled to the whole batch, is counted toward the tree at once: a large
  // batch that would pay for it walks it from its second chunk.
  tree = rayTree(read, 0);
  uint32_t first = 0;
  if (!tree && chunks > 0) {
    const uint64_t cost = search(0);
    first = 1;
    tree = rayTree(read, cost * chunks);
  }
  const auto run = [&](uint32_t begin, uint32_t end) {
    for (uint32_t c = begin; c < end; ++c) search(c);
  };
  if (read.workers)
    read.workers->forEach(first, chunks, 1, run);
  else
    run(first, chunks);
  for (uint32_t q = 0; q < count; ++q) offsets[q + 1] += offsets[q];
  out.resize(offsets.back());
  for (uint32_t place = 0; place < count; ++place) {
    const uint32_t q = pointAt(place);
    const Neighbour* from = lists[place / kChunk].data() + startIn[q];
    std::copy(from, from + (offsets[q + 1] - offsets[q]), out.begin() + ptrdiff_t(offsets[q]));
  }
}

RayHit BroadPhase::Impl::castBox(const Vec3& halfExtent, const Vec3& origin, const Vec3& direction,
                                 float length, const Filter& filter) const {
  if (!checkRay(origin, direction, length, "castBox")) return RayHit{};
  if (!isFinite(halfExtent) || !(halfExtent.minCoeff() >= 0.0f)) {
    reportError(ErrorCode::invalidArgument, "castBox: half extent must be finite and >= 0");
    return RayHit{};
  }
  const Ray ray = makeRay(origin, direction, length);
  // Candidates: everything overlapping the swept volume's bounds (slightly
  // grown so rounding at the far end cannot drop one); then the exact test of
  // the ray against each box grown by the half extent, as brute::castBox does.
  const Vec3 end = ray.origin + ray.direction * ray.maxT;
  Aabb sweep{ray.origin.cwiseMin(end) - halfExtent, ray.origin.cwiseMax(end) + halfExtent};
  const float slack = 1e-4f * (1.0f + sweep.extent().maxCoeff());
  sweep = fatten(sweep, slack);
  RayHit best;
  const QueryRead read(*this);
  const Side& side = read.side;
  side.visit([&](const auto& s) {
    s.queryBox(sweep, [&](uint32_t slot) {
      const uint32_t p = side.outer[slot];
      if (p == kNullIndex || !filter.accepts(read.filters[p])) return true;
      const Aabb& b = s.box(slot);
      const Aabb grown{b.min - halfExtent, b.max + halfExtent};
      float t;
      if (intersectRayAabb(ray, grown, t)) {
        const RayHit h{p, t};
        if (!best.hit() || hitBefore(h, best)) best = h;
      }
      return true;
    });
  });
  return best;
}

}  // namespace bp
