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

#include "raytree/ray_tree_walk.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

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
  // The frustum walk (see the top of the file). Stack entries carry the
  // frustum's entry distance: one popped once every active ray's reach has
  // shrunk below it is skipped.
  template <class OnLeaf>
  void walkFrustum(float* reach, OnLeaf& onLeaf) {
    uint32_t stackNode[RayTreeWalk::kStack];
    float stackT[RayTreeWalk::kStack];
    alignas(32) float lanesReach[kRayPacket];
    for (int r = 0; r < kRayPacket; ++r) lanesReach[r] = r < count_ ? reach[r] : -1.0f;
    unsigned active = unsigned((1ull << count_) - 1);
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
      for (; leaves != 0; leaves &= leaves - 1) {
        const int k = __builtin_ctz(leaves);
        alignas(32) float rayT[kRayPacket];
        for (unsigned rays = leafTest(node, k, lanesReach, rayT) & active; rays != 0;
             rays &= rays - 1) {
          const int r = __builtin_ctz(rays);
          if (rayT[r] > reach[r]) continue;
          const bool more = onLeaf(r, node.id[k], rayT[r]);
          if (!more) active &= ~(1u << r);
          if (!more || reach[r] != lanesReach[r]) {
            lanesReach[r] = more ? reach[r] : -1.0f;
            shrunk = true;
          }
        }
      }
      if (shrunk) {
        if (active == 0) return;
        limit = largest(lanesReach);
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

  // The largest reach of the packet's rays: a lane that holds no ray, or a
  // ray that has finished, holds -1.
  static float largest(const float* lanesReach) {
    __m256 m = _mm256_load_ps(lanesReach);
    for (int h = 1; h < kRayPacket / 8; ++h) m = _mm256_max_ps(m, _mm256_load_ps(lanesReach + 8 * h));
    __m128 q = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    q = _mm_max_ps(q, _mm_movehl_ps(q, q));
    q = _mm_max_ss(q, _mm_movehdup_ps(q));
    return _mm_cvtss_f32(q);
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
  // the slab test's arithmetic in its order, so t[r] has the bits of ray
  // r's own test; bit r set when ray r enters it within lanesReach[r].
  unsigned leafTest(const RayNode& node, int k, const float* lanesReach, float* t) const {
    float d[6];
    for (int row = 0; row < 6; ++row) d[row] = node.box[row][k] - origin_[row % 3];
    unsigned mask = 0;
    for (int h = 0; h < kRayPacket / 8; ++h) {
      const auto scaled = [&](int row) {
        return _mm256_mul_ps(_mm256_set1_ps(d[row]), _mm256_load_ps(inv_[row % 3] + 8 * h));
      };
      __m256 tMin = _mm256_max_ps(scaled(nearRow_[0]), _mm256_setzero_ps());
      __m256 tMax = _mm256_min_ps(scaled(farRow_[0]), _mm256_load_ps(lanesReach + 8 * h));
      tMin = _mm256_max_ps(scaled(nearRow_[1]), tMin);
      tMax = _mm256_min_ps(scaled(farRow_[1]), tMax);
      tMin = _mm256_max_ps(scaled(nearRow_[2]), tMin);
      tMax = _mm256_min_ps(scaled(farRow_[2]), tMax);
      _mm256_store_ps(t + 8 * h, tMin);
      mask |= unsigned(_mm256_movemask_ps(_mm256_cmp_ps(tMin, tMax, _CMP_LE_OQ))) << (8 * h);
    }
    return mask;
  }

  // The frustum of rays[0 .. count_), or false when the packet is not
  // coherent(). An infinite inverse (a zero component) is fine: its
  // products are what the ray's own test makes, and a NaN (0 * inf) keeps
  // the old bound in both tests.
  bool makeFrustum(const Ray* rays) {
    const Vec3 first = rays[0].direction;
    float lo[3], hi[3];
    bool coherent = true;
    for (int a = 0; a < 3; ++a) lo[a] = hi[a] = rays[0].invDirection[a];
    for (int r = 0; r < kRayPacket; ++r) {
      const Ray& ray = rays[r < count_ ? r : 0];
      for (int a = 0; a < 3; ++a) {
        const float inv = ray.invDirection[a];
        inv_[a][r] = inv;
        coherent &= (inv < 0.0f) == (lo[a] < 0.0f);
        lo[a] = std::min(lo[a], inv);
        hi[a] = std::max(hi[a], inv);
      }
      coherent &= ray.direction.dot(first) >= kFrustumCone;
    }
    for (int a = 0; a < 3; ++a) {
      const bool negative = lo[a] < 0.0f;
      nearRow_[a] = negative ? 3 + a : a;
      farRow_[a] = negative ? a : 3 + a;
      invNear_[a] = negative ? hi[a] : lo[a];  // the smaller magnitude
      invFar_[a] = negative ? lo[a] : hi[a];
    }
    // A wide packet's frustum takes in most of an octant (the cone test):
    // ray by ray is cheaper there.
    return coherent;
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
