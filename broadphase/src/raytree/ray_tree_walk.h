// RayTreeWalk: one ray through a RayTree, sixteen child boxes a step.
//
// walk(reach, onLeaf) visits the leaves whose box the ray enters at t <=
// reach, each node's nearest child node first: onLeaf(id, t) sees each such
// leaf's id once and may shrink `reach` (a closest hit clips to its t, a
// callback to what it returns); it returns false to stop the walk. The
// other children wait on a stack and are walked only if they still start
// within reach when popped. The order is only roughly nearest first; the
// query decides ties itself (hitBefore) and is exact for any order.
// walkUnordered(reach, onLeaf) is the same without the nearest-first
// choice and with a fixed reach, for queries that stop at their first leaf.
#pragma once

#include <broadphase/math/ray.h>
#include "raytree/ray_tree.h"

#if defined(__SSE2__)
#include <immintrin.h>
#endif

namespace bp {

class RayTreeWalk {
 public:
  // The deepest a build makes a tree is kMaxSahDepth (40) levels of SAH
  // splits and then median splits, at most 32 more: a walk holds at most
  // kRayWidth - 1 entries a level.
  static constexpr int kStack = 72 * (kRayWidth - 1);

  RayTreeWalk(const RayTree& tree, const Ray& ray) : nodes_(tree.nodes().data()) {
    for (int a = 0; a < 3; ++a) {
      const bool negative = ray.invDirection[a] < 0.0f;
      near_[a] = negative ? 3 + a : a;
      far_[a] = negative ? a : 3 + a;
      origin_[a] = ray.origin[a];
      inv_[a] = ray.invDirection[a];
    }
  }

  template <class OnLeaf>
  void walk(float& reach, OnLeaf&& onLeaf) {
    walkWith<true>(reach, onLeaf);
  }

  // The leaves whose box the ray enters at t <= reach, in no particular
  // order: onLeaf(id, t) as for walk(), but `reach` stays fixed. For a
  // query that ends at the first leaf it accepts (any hit), nearer-first
  // buys nothing (docs/decisions.md, "Rays").
  template <class OnLeaf>
  void walkUnordered(float reach, OnLeaf&& onLeaf) {
    walkWith<false>(reach, onLeaf);
  }

 private:
  friend class RayPacketWalk;  // ray_packet_walk.h: the same node test, several rays a node

  // kNearestFirst: walk(), each node's nearest child next and the others'
  // entry distances kept, so that one popped once the reach has shrunk past
  // it is skipped. Otherwise walkUnordered(): the first child in slot order
  // next, `reach` never shrinks.
  template <bool kNearestFirst, class OnLeaf>
  void walkWith(float& reach, OnLeaf& onLeaf) {
    // Everything a node test needs, in locals the compiler keeps in
    // registers: the three axes unrolled, each plane's offset in a node.
    const Lanes lanes = makeLanes();
    uint32_t stackNode[kStack];
    float stackT[kNearestFirst ? kStack : 1];
    int size = 0;
    uint32_t n = 0;
    for (;;) {
      const RayNode& node = nodes_[n];
      alignas(32) float t[kRayWidth];
      const unsigned hit = lanes.test(node, reach, t);
      unsigned leaves = hit & leafLanes(node);
      const unsigned inner = hit & ~leaves;
      while (leaves) {
        const int k = __builtin_ctz(leaves);
        leaves &= leaves - 1;
        if ((!kNearestFirst || t[k] <= reach) && !onLeaf(node.id[k], t[k])) return;
      }
      if (inner != 0) {
        int next = __builtin_ctz(inner);
        if ((inner & (inner - 1)) == 0) {  // one child: no stack
          n = node.child[next];
          continue;
        }
        // Several: one next, the others pushed (at most kRayWidth - 1 a level). For
        // walk() the nearest is found, not an order of all: a sort's
        // compares mispredicted on a tree in cache, and a pushed child is
        // walked only if it still starts within reach when popped
        // (docs/decisions.md, "Rays").
        if constexpr (kNearestFirst) {
          for (unsigned rest = inner & (inner - 1); rest != 0; rest &= rest - 1) {
            const int k = __builtin_ctz(rest);
            next = t[k] < t[next] ? k : next;
          }
        }
        // The pushed ones are fetched while the next is walked: most are
        // popped soon after.
        for (unsigned rest = inner & ~(1u << next); rest != 0; rest &= rest - 1) {
          const int k = __builtin_ctz(rest);
          prefetch(node.child[k]);
          stackNode[size] = node.child[k];
          if constexpr (kNearestFirst) stackT[size] = t[k];
          ++size;
        }
        n = node.child[next];
        continue;
      }
      // Pop the last pushed entry (walk(): that still starts within reach).
      if constexpr (kNearestFirst) {
        for (;;) {
          if (size == 0) return;
          --size;
          if (stackT[size] <= reach) break;
        }
      } else {
        if (size == 0) return;
        --size;
      }
      n = stackNode[size];
    }
  }

  void prefetch(uint32_t n) const {
#if defined(__SSE2__)
    const char* node = reinterpret_cast<const char*>(nodes_ + n);
    for (int line = 0; line < int(sizeof(RayNode)); line += 64)
      _mm_prefetch(node + line, _MM_HINT_T0);
#else
    (void)n;
#endif
  }

  // Lanes whose child is a leaf (or empty: never hit), from the sign bit.
  static unsigned leafLanes(const RayNode& node) {
#if defined(__AVX__)
    unsigned mask = 0;
    for (int h = 0; h < kRayWidth / 8; ++h)
      mask |= unsigned(_mm256_movemask_ps(_mm256_castsi256_ps(
                  _mm256_load_si256(reinterpret_cast<const __m256i*>(node.child + 8 * h)))))
              << (8 * h);
    return mask;
#elif defined(__SSE2__)
    unsigned mask = 0;
    for (int q = 0; q < kRayWidth / 4; ++q)
      mask |= unsigned(_mm_movemask_ps(_mm_castsi128_ps(
                  _mm_load_si128(reinterpret_cast<const __m128i*>(node.child + 4 * q)))))
              << (4 * q);
    return mask;
#else
    unsigned mask = 0;
    for (int k = 0; k < kRayWidth; ++k) mask |= unsigned(node.child[k] >> 31) << k;
    return mask;
#endif
  }

  // The slab test of one node's slots for this ray: bit k set when
  // slot k is entered within [0, limit], its entry distance in t[k]. It is
  // clipRayAabb()'s arithmetic lane by lane: maxps(a, b) is a > b ? a : b
  // and minps(a, b) a < b ? a : b, as clipRayAabb writes them, so a NaN
  // distance (0 * inf) keeps the old bound.
  struct Lanes {
    int nearX, nearY, nearZ, farX, farY, farZ;  // rows of RayNode::box
#if defined(__AVX__)
    __m256 ox, oy, oz, ix, iy, iz;

    unsigned test(const RayNode& node, float limit, float* t) const {
      unsigned mask = 0;
      for (int h = 0; h < kRayWidth / 8; ++h) {
        const auto row = [&](int r) { return _mm256_load_ps(node.box[r] + 8 * h); };
        __m256 tMin =
            _mm256_max_ps(_mm256_mul_ps(_mm256_sub_ps(row(nearX), ox), ix), _mm256_setzero_ps());
        __m256 tMax =
            _mm256_min_ps(_mm256_mul_ps(_mm256_sub_ps(row(farX), ox), ix), _mm256_set1_ps(limit));
        tMin = _mm256_max_ps(_mm256_mul_ps(_mm256_sub_ps(row(nearY), oy), iy), tMin);
        tMax = _mm256_min_ps(_mm256_mul_ps(_mm256_sub_ps(row(farY), oy), iy), tMax);
        tMin = _mm256_max_ps(_mm256_mul_ps(_mm256_sub_ps(row(nearZ), oz), iz), tMin);
        tMax = _mm256_min_ps(_mm256_mul_ps(_mm256_sub_ps(row(farZ), oz), iz), tMax);
        _mm256_store_ps(t + 8 * h, tMin);
        mask |= unsigned(_mm256_movemask_ps(_mm256_cmp_ps(tMin, tMax, _CMP_LE_OQ))) << (8 * h);
      }
      return mask;
    }
#elif defined(__SSE2__)
    __m128 ox, oy, oz, ix, iy, iz;

    unsigned test(const RayNode& node, float limit, float* t) const {
      unsigned mask = 0;
      for (int h = 0; h < kRayWidth / 4; ++h) {
        const auto row = [&](int r) { return _mm_load_ps(node.box[r] + 4 * h); };
        __m128 tMin = _mm_max_ps(_mm_mul_ps(_mm_sub_ps(row(nearX), ox), ix), _mm_setzero_ps());
        __m128 tMax = _mm_min_ps(_mm_mul_ps(_mm_sub_ps(row(farX), ox), ix), _mm_set1_ps(limit));
        tMin = _mm_max_ps(_mm_mul_ps(_mm_sub_ps(row(nearY), oy), iy), tMin);
        tMax = _mm_min_ps(_mm_mul_ps(_mm_sub_ps(row(farY), oy), iy), tMax);
        tMin = _mm_max_ps(_mm_mul_ps(_mm_sub_ps(row(nearZ), oz), iz), tMin);
        tMax = _mm_min_ps(_mm_mul_ps(_mm_sub_ps(row(farZ), oz), iz), tMax);
        _mm_store_ps(t + 4 * h, tMin);
        mask |= unsigned(_mm_movemask_ps(_mm_cmple_ps(tMin, tMax))) << (4 * h);
      }
      return mask;
    }
#else
    float o[3], inv[3];

    unsigned test(const RayNode& node, float limit, float* t) const {
      const int nearRow[3] = {nearX, nearY, nearZ}, farRow[3] = {farX, farY, farZ};
      unsigned mask = 0;
      for (int k = 0; k < kRayWidth; ++k) {
        float tMin = 0.0f, tMax = limit;
        for (int a = 0; a < 3; ++a) {
          const float tNear = (node.box[nearRow[a]][k] - o[a]) * inv[a];
          const float tFar = (node.box[farRow[a]][k] - o[a]) * inv[a];
          tMin = tNear > tMin ? tNear : tMin;
          tMax = tFar < tMax ? tFar : tMax;
        }
        t[k] = tMin;
        mask |= unsigned(tMin <= tMax) << k;
      }
      return mask;
    }
#endif
  };

  Lanes makeLanes() const {
    Lanes l;
    l.nearX = near_[0];
    l.nearY = near_[1];
    l.nearZ = near_[2];
    l.farX = far_[0];
    l.farY = far_[1];
    l.farZ = far_[2];
#if defined(__AVX__)
    l.ox = _mm256_set1_ps(origin_[0]);
    l.oy = _mm256_set1_ps(origin_[1]);
    l.oz = _mm256_set1_ps(origin_[2]);
    l.ix = _mm256_set1_ps(inv_[0]);
    l.iy = _mm256_set1_ps(inv_[1]);
    l.iz = _mm256_set1_ps(inv_[2]);
#elif defined(__SSE2__)
    l.ox = _mm_set1_ps(origin_[0]);
    l.oy = _mm_set1_ps(origin_[1]);
    l.oz = _mm_set1_ps(origin_[2]);
    l.ix = _mm_set1_ps(inv_[0]);
    l.iy = _mm_set1_ps(inv_[1]);
    l.iz = _mm_set1_ps(inv_[2]);
#else
    for (int a = 0; a < 3; ++a) {
      l.o[a] = origin_[a];
      l.inv[a] = inv_[a];
    }
#endif
    return l;
  }

  const RayNode* nodes_;
  int near_[3], far_[3];
  float origin_[3], inv_[3];
};

}  // namespace bp
