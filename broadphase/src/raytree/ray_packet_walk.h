// RayPacketWalk: up to kRayPacket rays through a RayTree together, for rays
// that walk the same nodes (a lidar's or a camera's rays from one origin).
//
// Two walks, one contract: onLeaf(r, id, t) sees every leaf ray r enters at
// t <= reach[r] that its own walk (RayTreeWalk::walk) would need, with the
// same t bits, so each ray's answer is its own.
//
// - The frustum walk, for rays whose directions lie in a narrow cone and
//   share their sign on every axis (coherent()): a node's sixteen child
//   boxes are tested once for the whole packet, against the interval of
//   the rays' inverse directions on each axis. The rays share the origin,
//   so a plane's offset d from it has the same bits for every ray, and
//   rounding is monotone: d * inv lies between d * invLo and d * invHi for
//   each ray's inv in [invLo, invHi]. The interval test's entry distance is
//   then at most each ray's and its exit at least each ray's (clipped at
//   the largest reach of the packet), so a box no ray enters within reach
//   is the only kind it rejects. Leaves it keeps are tested ray by ray, the
//   rays in lanes, with the slab test's arithmetic in its order.
// - The ray-by-ray walk, for any other rays from one origin: each node is
//   fetched once for the packet, and each ray gets RayTreeWalk's own
//   sixteen-lane slab test of the node, so its answers are those of its own
//   walk: a ray skips a child only when its test of the child's box rejects
//   it at its current reach, and the child's box holds every leaf below it.
//   A stack entry carries the mask of the rays that entered it.
//
// In both, a ray that has finished (an any-hit query's first accepted leaf)
// is dropped, and the packet goes first to the nearest child it enters (the
// frustum's entry distance, or the first active ray's); the others wait on
// the stack. What the frustum gains over ray by ray: one node test instead
// of one a ray (docs/decisions/rays.md).
#pragma once

#include <broadphase/ray_hit.h>
#include "raytree/ray_tree_walk.h"

#include <cstdint>
#include <limits>

namespace bp {

inline constexpr int kRayPacket = 32;

class RayPacketWalk {
 public:
  // rays[0 .. count), count <= kRayPacket, all from one origin.
  RayPacketWalk(const RayTree& tree, const Ray* rays, int count)
      : nodes_(tree.nodes().data()), count_(count) {
    for (int a = 0; a < 3; ++a) origin_[a] = rays[0].origin[a];
#if defined(__AVX__)
    coherent_ = makeFrustum(rays);
    if (coherent_) return;
#endif
    for (int r = 0; r < count; ++r) lanes_[r] = RayTreeWalk(tree, rays[r]).makeLanes();
  }

  // Whether the packet takes the frustum walk: every direction of one sign
  // an axis (a zero component's sign bit counts) and within the cone of
  // kFrustumCone around the first ray's.
  bool coherent() const { return coherent_; }

  // onLeaf(r, id, t) for each leaf ray r enters at t <= reach[r]; it may
  // shrink reach[r], and returns false when ray r is done (no more leaves
  // for it).
  template <class OnLeaf>
  void walk(float* reach, OnLeaf&& onLeaf) {
#if defined(__AVX__)
    if (coherent_) return walkFrustum(reach, onLeaf);
#endif
    walkRayByRay(reach, onLeaf);
  }

  // The closest hit (any: some hit) of each ray among the leaves whose id
  // accept(id) passes, to hits[r] (RayHit{} for none): the answer of ray
  // r's own walk. Coherent packets update their rays in lanes.
  template <class Accept>
  void cast(const Ray* rays, bool any, Accept&& accept, RayHit* hits) {
#if defined(__AVX__)
    if (coherent_) return castFrustum(rays, any, accept, hits);
#endif
    float reach[kRayPacket];
    for (int r = 0; r < count_; ++r) {
      reach[r] = rays[r].maxT;
      hits[r] = RayHit{};
    }
    auto onLeaf = [&](int r, uint32_t id, float t) {
      if (!accept(id)) return true;
      const RayHit h{id, t};
      if (any) {
        hits[r] = h;
        return false;
      }
      if (!hits[r].hit() || hitBefore(h, hits[r])) {
        hits[r] = h;
        reach[r] = t;
      }
      return true;
    };
    walkRayByRay(reach, onLeaf);
  }

 private:
  template <class OnLeaf>
  void walkRayByRay(float* reach, OnLeaf& onLeaf) {
    uint32_t stackNode[RayTreeWalk::kStack];
    uint32_t stackRays[RayTreeWalk::kStack];
    int size = 0;
    uint32_t n = 0;
    unsigned active = unsigned((1ull << count_) - 1);
    unsigned done = 0;
    for (;;) {
      const RayNode& node = nodes_[n];
      const unsigned leafMask = RayTreeWalk::leafLanes(node);
      const Offsets offsets = offsetsOf(node);
      unsigned childRays[kRayWidth] = {};
      unsigned inner = 0;
      alignas(32) float first[kRayWidth];  // the entry distances of ray `firstRay`
      int firstRay = -1;
      for (unsigned a = active; a != 0; a &= a - 1) {
        const int r = __builtin_ctz(a);
        alignas(32) float t[kRayWidth];
        const unsigned hit = test(offsets, node, lanes_[r], reach[r], t);
        bool finished = false;
        for (unsigned leaves = hit & leafMask; leaves != 0; leaves &= leaves - 1) {
          const int k = __builtin_ctz(leaves);
          if (t[k] <= reach[r] && !onLeaf(r, node.id[k], t[k])) {
            finished = true;
            break;
          }
        }
        if (finished) {
          done |= 1u << r;
          continue;
        }
        const unsigned in = hit & ~leafMask;
        if (in == 0) continue;
        if (firstRay < 0) {
          for (int k = 0; k < kRayWidth; ++k) first[k] = t[k];
          firstRay = r;
        }
        inner |= in;
        for (unsigned c = in; c != 0; c &= c - 1) childRays[__builtin_ctz(c)] |= 1u << r;
      }
      if (inner != 0) {
        // Next: the child ray `firstRay` enters nearest; the others are
        // pushed with their rays.
        int next = -1;
        for (unsigned c = inner; c != 0; c &= c - 1) {
          const int k = __builtin_ctz(c);
          if (!(childRays[k] & (1u << firstRay))) continue;
          if (next < 0 || first[k] < first[next]) next = k;
        }
        for (unsigned c = inner & ~(1u << next); c != 0; c &= c - 1) {
          const int k = __builtin_ctz(c);
          stackNode[size] = node.child[k];
          stackRays[size] = childRays[k];
          ++size;
        }
        n = node.child[next];
        active = childRays[next] & ~done;
        if (active != 0) continue;
      }
      for (;;) {
        if (size == 0) return;
        --size;
        active = stackRays[size] & ~done;
        if (active != 0) break;
      }
      n = stackNode[size];
    }
  }

#if defined(__AVX__)
  // The frustum walk (see the top of the file) with each ray's leaves to
  // onLeaf (walk()'s contract).
  template <class OnLeaf>
  void walkFrustum(float* reach, OnLeaf& onLeaf) {
    alignas(32) float lanesReach[kRayPacket];
    for (int r = 0; r < kRayPacket; ++r) lanesReach[r] = r < count_ ? reach[r] : -1.0f;
    frustumLeaves(lanesReach, [&](const RayNode& node, int k) {
      alignas(32) float rayT[kRayPacket];
      bool shrunk = false;
      for (unsigned rays = leafTest(node, k, lanesReach, rayT); rays != 0; rays &= rays - 1) {
        const int r = __builtin_ctz(rays);
        const bool more = onLeaf(r, node.id[k], rayT[r]);
        if (!more || reach[r] != lanesReach[r]) {
          lanesReach[r] = more ? reach[r] : -1.0f;
          shrunk = true;
        }
      }
      return shrunk;
    });
  }

  // The frustum walk's traversal: onLeaf(node, k) for each leaf slot the
  // frustum enters within the packet's largest reach, which returns true
  // when it has lowered some ray's lanesReach (-1: the ray has finished).
  // Stack entries carry the frustum's entry distance: one popped once every
  // ray's reach has shrunk below it is skipped.
  template <class OnLeaf>
  void frustumLeaves(float* lanesReach, OnLeaf&& onLeaf) {
    uint32_t stackNode[RayTreeWalk::kStack];
    float stackT[RayTreeWalk::kStack];
    float limit = largest(lanesReach);
    int size = 0;
    uint32_t n = 0;
    for (;;) {
      const RayNode& node = nodes_[n];
      alignas(32) float t[kRayWidth];
      const unsigned hit = frustumTest(node, limit, t);
      unsigned leaves = hit & RayTreeWalk::leafLanes(node);
      const unsigned inner = hit & ~leaves;
      bool shrunk = false;
      for (; leaves != 0; leaves &= leaves - 1) shrunk |= onLeaf(node, __builtin_ctz(leaves));
      if (shrunk) {
        limit = largest(lanesReach);
        if (limit < 0.0f) return;  // every ray has finished
      }
      if (inner != 0) {
        int next = __builtin_ctz(inner);
        for (unsigned rest = inner & (inner - 1); rest != 0; rest &= rest - 1) {
          const int k = __builtin_ctz(rest);
          next = t[k] < t[next] ? k : next;
        }
        for (unsigned rest = inner & ~(1u << next); rest != 0; rest &= rest - 1) {
          const int k = __builtin_ctz(rest);
          stackNode[size] = node.child[k];
          stackT[size] = t[k];
          ++size;
        }
        if (t[next] <= limit) {
          n = node.child[next];
          continue;
        }
      }
      for (;;) {
        if (size == 0) return;
        --size;
        if (stackT[size] <= limit) break;
      }
      n = stackNode[size];
    }
  }

  // The frustum walk for closest or any hit, a leaf's rays updated in
  // lanes: its id is offered to accept() once for the packet, and each ray
  // r it enters within lanesReach[r] takes it when it comes before its best
  // under hitBefore (closest: the best's t is then the ray's reach) or when
  // it has none (any: the ray then finishes).
  template <class Accept>
  void castFrustum(const Ray* rays, bool any, Accept& accept, RayHit* hits) {
    alignas(32) float lanesReach[kRayPacket], bestT[kRayPacket];
    alignas(32) int32_t bestId[kRayPacket];  // the proxy ^ kBias: unsigned order as signed
    constexpr uint32_t kBias = 0x80000000u, kMiss = RayHit{}.proxy;
    for (int r = 0; r < kRayPacket; ++r) {
      lanesReach[r] = r < count_ ? rays[r].maxT : -1.0f;
      bestT[r] = std::numeric_limits<float>::infinity();
      bestId[r] = int32_t(kMiss ^ kBias);
    }
    frustumLeaves(lanesReach, [&](const RayNode& node, int k) {
      const uint32_t id = node.id[k];
      if (!accept(id)) return false;
      const __m256i idLanes = _mm256_set1_epi32(int32_t(id ^ kBias));
      float d[6];
      leafOffsets(node, k, d);
      unsigned taken = 0;
      for (int h = 0; h < kRayPacket / 8; ++h) {
        __m256 t, reach = _mm256_load_ps(lanesReach + 8 * h);
        const __m256 in = slabLanes(d, h, reach, t);
        const __m256 oldT = _mm256_load_ps(bestT + 8 * h);
        const __m256i oldId = _mm256_load_si256(reinterpret_cast<const __m256i*>(bestId + 8 * h));
        __m256 take = in;
        if (!any) {
          const __m256 before =
              _mm256_or_ps(_mm256_cmp_ps(t, oldT, _CMP_LT_OQ),
                           _mm256_and_ps(_mm256_cmp_ps(t, oldT, _CMP_EQ_OQ),
                                         _mm256_castsi256_ps(_mm256_cmpgt_epi32(oldId, idLanes))));
          take = _mm256_and_ps(in, before);
        }
        const unsigned mask = unsigned(_mm256_movemask_ps(take));
        if (mask == 0) continue;
        taken |= mask;
        _mm256_store_ps(bestT + 8 * h, _mm256_blendv_ps(oldT, t, take));
        _mm256_store_si256(reinterpret_cast<__m256i*>(bestId + 8 * h),
                           _mm256_castps_si256(_mm256_blendv_ps(
                               _mm256_castsi256_ps(oldId), _mm256_castsi256_ps(idLanes), take)));
        _mm256_store_ps(lanesReach + 8 * h,
                        _mm256_blendv_ps(reach, any ? _mm256_set1_ps(-1.0f) : t, take));
      }
      return taken != 0;
    });
    for (int r = 0; r < count_; ++r) {
      const uint32_t id = uint32_t(bestId[r]) ^ kBias;
      hits[r] = id == kMiss ? RayHit{} : RayHit{id, bestT[r]};
    }
  }

  // The largest reach of the packet's rays: a lane that holds no ray, or a
  // ray that has finished, holds -1.
  static float largest(const float* lanesReach) {
    __m256 m = _mm256_load_ps(lanesReach);
    for (int h = 1; h < kRayPacket / 8; ++h)
      m = _mm256_max_ps(m, _mm256_load_ps(lanesReach + 8 * h));
    return horizontal(m, [](__m128 x, __m128 y) { return _mm_max_ps(x, y); });
  }

  // The interval slab test of a node's sixteen slots for the whole packet:
  // bit k clear only when no ray of the packet enters slot k within
  // `limit` (the largest reach); t[k] at most every ray's entry distance.
  // With inv in [invNear, invFar] by magnitude (one sign), a plane ahead
  // (d * inv > 0) has d * invNear <= d * inv <= d * invFar; a near plane
  // behind the origin gives every ray a distance <= 0, which the clamp at
  // 0 takes, and a far plane behind it a negative exit, which no ray
  // enters either: one product a plane, as in a single ray's test.
  unsigned frustumTest(const RayNode& node, float limit, float* t) const {
    unsigned mask = 0;
    for (int h = 0; h < kRayWidth / 8; ++h) {
      __m256 tMin = _mm256_setzero_ps();
      __m256 tMax = _mm256_set1_ps(limit);
      for (int a = 0; a < 3; ++a) {
        const __m256 origin = _mm256_set1_ps(origin_[a]);
        const __m256 dNear = _mm256_sub_ps(_mm256_load_ps(node.box[nearRow_[a]] + 8 * h), origin);
        const __m256 dFar = _mm256_sub_ps(_mm256_load_ps(node.box[farRow_[a]] + 8 * h), origin);
        tMin = _mm256_max_ps(_mm256_mul_ps(dNear, _mm256_set1_ps(invNear_[a])), tMin);
        tMax = _mm256_min_ps(_mm256_mul_ps(dFar, _mm256_set1_ps(invFar_[a])), tMax);
      }
      _mm256_store_ps(t + 8 * h, tMin);
      mask |= unsigned(_mm256_movemask_ps(_mm256_cmp_ps(tMin, tMax, _CMP_LE_OQ))) << (8 * h);
    }
    return mask;
  }

  // Slot k's box (a leaf) against every ray of the packet, ray r in lane r:
  // bit r set when ray r enters it within lanesReach[r], at t[r].
  unsigned leafTest(const RayNode& node, int k, const float* lanesReach, float* t) const {
    float d[6];
    leafOffsets(node, k, d);
    unsigned mask = 0;
    for (int h = 0; h < kRayPacket / 8; ++h) {
      __m256 tMin;
      const __m256 in = slabLanes(d, h, _mm256_load_ps(lanesReach + 8 * h), tMin);
      _mm256_store_ps(t + 8 * h, tMin);
      mask |= unsigned(_mm256_movemask_ps(in)) << (8 * h);
    }
    return mask;
  }

  // Slot k's planes' offsets from the origin, by row: the subtraction of
  // the slab test, the same bits for every ray of the packet.
  void leafOffsets(const RayNode& node, int k, float* d) const {
    for (int row = 0; row < 6; ++row) d[row] = node.box[row][k] - origin_[row % 3];
  }

  // The slab test of one box, d[row] its planes' offsets from the origin,
  // against rays 8h to 8h + 7 in lanes: the slab test's arithmetic in its
  // order, so each lane's entry distance tMin has the bits of that ray's
  // own test. True lanes: entered within `reach`.
  __m256 slabLanes(const float* d, int h, __m256 reach, __m256& tMin) const {
    const auto scaled = [&](int row) {
      return _mm256_mul_ps(_mm256_set1_ps(d[row]), _mm256_load_ps(inv_[row % 3] + 8 * h));
    };
    tMin = _mm256_max_ps(scaled(nearRow_[0]), _mm256_setzero_ps());
    __m256 tMax = _mm256_min_ps(scaled(farRow_[0]), reach);
    tMin = _mm256_max_ps(scaled(nearRow_[1]), tMin);
    tMax = _mm256_min_ps(scaled(farRow_[1]), tMax);
    tMin = _mm256_max_ps(scaled(nearRow_[2]), tMin);
    tMax = _mm256_min_ps(scaled(farRow_[2]), tMax);
    return _mm256_cmp_ps(tMin, tMax, _CMP_LE_OQ);
  }

  // The frustum of rays[0 .. count_), or false when the packet is not
  // coherent(). An infinite inverse (a zero component) is fine: its
  // products are what the ray's own test makes, and a NaN (0 * inf) keeps
  // the old bound in both tests.
  bool makeFrustum(const Ray* rays) {
    // The rays' inverse directions and directions by axis, lanes past the
    // packet's end copies of its first ray; then lane-wise: the interval
    // of each axis' inverses, whether any sign bit differs from the first
    // ray's (a zero component's counts), and each direction's cosine to
    // the first's.
    alignas(32) float dir[3][kRayPacket];
    for (int r = 0; r < kRayPacket; ++r) {
      const Ray& ray = rays[r < count_ ? r : 0];
      for (int a = 0; a < 3; ++a) {
        inv_[a][r] = ray.invDirection[a];
        dir[a][r] = ray.direction[a];
      }
    }
    __m256 differ = _mm256_setzero_ps(), cosine = _mm256_set1_ps(1.0f);
    __m256 lo[3], hi[3];
    for (int h = 0; h < kRayPacket / 8; ++h) {
      __m256 dot = _mm256_setzero_ps();
      for (int a = 0; a < 3; ++a) {
        const __m256 inv = _mm256_load_ps(inv_[a] + 8 * h);
        lo[a] = h == 0 ? inv : _mm256_min_ps(lo[a], inv);
        hi[a] = h == 0 ? inv : _mm256_max_ps(hi[a], inv);
        differ = _mm256_or_ps(differ, _mm256_xor_ps(inv, _mm256_set1_ps(inv_[a][0])));
        dot = _mm256_add_ps(
            dot, _mm256_mul_ps(_mm256_load_ps(dir[a] + 8 * h), _mm256_set1_ps(dir[a][0])));
      }
      cosine = _mm256_min_ps(cosine, dot);
    }
    // A wide packet's frustum takes in most of an octant (the cone test):
    // ray by ray is cheaper there.
    if (_mm256_movemask_ps(differ) != 0 ||
        _mm256_movemask_ps(_mm256_cmp_ps(cosine, _mm256_set1_ps(kFrustumCone), _CMP_GE_OQ)) != 0xFF)
      return false;
    for (int a = 0; a < 3; ++a) {
      const float low = horizontal(lo[a], [](__m128 x, __m128 y) { return _mm_min_ps(x, y); });
      const float high = horizontal(hi[a], [](__m128 x, __m128 y) { return _mm_max_ps(x, y); });
      const bool negative = low < 0.0f;
      nearRow_[a] = negative ? 3 + a : a;
      farRow_[a] = negative ? a : 3 + a;
      invNear_[a] = negative ? high : low;  // the smaller magnitude
      invFar_[a] = negative ? low : high;
    }
    return true;
  }

  // The min or max (op) of a vector's eight lanes.
  template <class Op>
  static float horizontal(__m256 v, Op op) {
    __m128 q = op(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    q = op(q, _mm_movehl_ps(q, q));
    q = op(q, _mm_movehdup_ps(q));
    return _mm_cvtss_f32(q);
  }

  // cos 12 degrees: how far apart a frustum's rays may point.
  static constexpr float kFrustumCone = 0.978f;

  int nearRow_[3], farRow_[3];
  float invNear_[3], invFar_[3];
  alignas(32) float inv_[3][kRayPacket];  // by axis, ray r in lane r
#endif
  bool coherent_ = false;

  // The rays share their origin, so each plane's offset from it (the
  // subtraction of the slab test) is made once a node for the packet; each
  // ray then scales the offsets by its own inverse direction, the slab
  // test's arithmetic in the same order (sub, then mul), so its distances
  // have the same bits as its own walk's.
#if defined(__AVX__)
  struct Offsets {
    __m256 d[6][kRayWidth / 8];  // [row][half]: node.box[row] - origin, by axis
  };
  Offsets offsetsOf(const RayNode& node) const {
    Offsets o;
    for (int row = 0; row < 6; ++row) {
      const __m256 origin = _mm256_set1_ps(origin_[row % 3]);
      for (int h = 0; h < kRayWidth / 8; ++h)
        o.d[row][h] = _mm256_sub_ps(_mm256_load_ps(node.box[row] + 8 * h), origin);
    }
    return o;
  }
  static unsigned test(const Offsets& o, const RayNode&, const RayTreeWalk::Lanes& l, float limit,
                       float* t) {
    unsigned mask = 0;
    for (int h = 0; h < kRayWidth / 8; ++h) {
      __m256 tMin = _mm256_max_ps(_mm256_mul_ps(o.d[l.nearX][h], l.ix), _mm256_setzero_ps());
      __m256 tMax = _mm256_min_ps(_mm256_mul_ps(o.d[l.farX][h], l.ix), _mm256_set1_ps(limit));
      tMin = _mm256_max_ps(_mm256_mul_ps(o.d[l.nearY][h], l.iy), tMin);
      tMax = _mm256_min_ps(_mm256_mul_ps(o.d[l.farY][h], l.iy), tMax);
      tMin = _mm256_max_ps(_mm256_mul_ps(o.d[l.nearZ][h], l.iz), tMin);
      tMax = _mm256_min_ps(_mm256_mul_ps(o.d[l.farZ][h], l.iz), tMax);
      _mm256_store_ps(t + 8 * h, tMin);
      mask |= unsigned(_mm256_movemask_ps(_mm256_cmp_ps(tMin, tMax, _CMP_LE_OQ))) << (8 * h);
    }
    return mask;
  }
#else
  struct Offsets {};
  Offsets offsetsOf(const RayNode&) const { return {}; }
  static unsigned test(const Offsets&, const RayNode& node, const RayTreeWalk::Lanes& l,
                       float limit, float* t) {
    return l.test(node, limit, t);
  }
#endif

  const RayNode* nodes_;
  int count_;
  float origin_[3];
  RayTreeWalk::Lanes lanes_[kRayPacket];
};

}  // namespace bp
