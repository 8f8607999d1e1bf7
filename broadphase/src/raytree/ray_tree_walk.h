// RayTreeWalk: one ray through a RayTree, four child boxes a step.
//
// walk(reach, onLeaf) visits the leaves whose box the ray enters at t <=
// reach, nearer child nodes first: onLeaf(id, t) sees each such leaf's id once and
// may shrink `reach` (a closest hit clips to its t, a callback to what it
// returns); it returns false to stop the walk. Leaves of one node arrive in
// slot order, so the order is only roughly nearest first; the query decides
// ties itself (hitBefore) and is exact for any order.
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
  // three entries a level.
  static constexpr int kStack = 256;

  RayTreeWalk(const RayTree& tree, const Ray& ray) : nodes_(tree.nodes().data()) {
    for (int a = 0; a < 3; ++a) {
      const bool negative = ray.invDirection[a] < 0.0f;
      near_[a] = negative ? 3 + a : a;
      far_[a] = negative ? a : 3 + a;
#if defined(__SSE2__)
      origin_[a] = _mm_set1_ps(ray.origin[a]);
      inv_[a] = _mm_set1_ps(ray.invDirection[a]);
#else
      origin_[a] = ray.origin[a];
      inv_[a] = ray.invDirection[a];
#endif
    }
  }

  template <class OnLeaf>
  void walk(float& reach, OnLeaf&& onLeaf) {
    uint32_t stackNode[kStack];
    float stackT[kStack];
    int size = 0;
    uint32_t n = 0;
    for (;;) {
      const RayNode& node = nodes_[n];
      alignas(16) float t[4];
      const unsigned hit = test(node, reach, t);
      unsigned leaves = hit & leafLanes(node);
      unsigned inner = hit & ~leaves;
      while (leaves) {
        const int k = __builtin_ctz(leaves);
        leaves &= leaves - 1;
        if (t[k] <= reach && !onLeaf(node.id[k], t[k])) return;
      }
      if (inner != 0) {
        int k = __builtin_ctz(inner);
        inner &= inner - 1;
        if (inner == 0) {  // one child: no stack
          n = node.child[k];
          continue;
        }
        // Several: the nearest next, the others pushed farthest first.
        uint32_t next[4];
        float nextT[4];
        int count = 0;
        for (;;) {
          int j = count++;
          for (; j > 0 && nextT[j - 1] < t[k]; --j) {
            next[j] = next[j - 1];
            nextT[j] = nextT[j - 1];
          }
          next[j] = node.child[k];
          nextT[j] = t[k];
          if (inner == 0) break;
          k = __builtin_ctz(inner);
          inner &= inner - 1;
        }
        // next[] is farthest first now.
        for (int j = 0; j + 1 < count; ++j) {
          stackNode[size] = next[j];
          stackT[size] = nextT[j];
          ++size;
        }
        n = next[count - 1];
        continue;
      }
      // Pop the nearest entry still within reach.
      for (;;) {
        if (size == 0) return;
        --size;
        if (stackT[size] <= reach) break;
      }
      n = stackNode[size];
    }
  }

 private:
  // Lanes whose child is a leaf (or empty: never hit), from the sign bit.
  static unsigned leafLanes(const RayNode& node) {
#if defined(__SSE2__)
    return unsigned(_mm_movemask_ps(
        _mm_castsi128_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(node.child)))));
#else
    unsigned mask = 0;
    for (int k = 0; k < 4; ++k) mask |= unsigned(node.child[k] >> 31) << k;
    return mask;
#endif
  }

  // The slab test of the four slots against [0, limit]: bit k set when slot
  // k is entered, its entry distance in t[k]. clipRayAabb()'s arithmetic.
  unsigned test(const RayNode& node, float limit, float t[4]) const {
#if defined(__SSE2__)
    __m128 tMin = _mm_setzero_ps();
    __m128 tMax = _mm_set1_ps(limit);
    for (int a = 0; a < 3; ++a) {
      const __m128 tNear =
          _mm_mul_ps(_mm_sub_ps(_mm_load_ps(node.box[near_[a]]), origin_[a]), inv_[a]);
      const __m128 tFar =
          _mm_mul_ps(_mm_sub_ps(_mm_load_ps(node.box[far_[a]]), origin_[a]), inv_[a]);
      tMin = _mm_max_ps(tNear, tMin);  // tNear > tMin ? tNear : tMin
      tMax = _mm_min_ps(tFar, tMax);   // tFar < tMax ? tFar : tMax
    }
    _mm_store_ps(t, tMin);
    return unsigned(_mm_movemask_ps(_mm_cmple_ps(tMin, tMax)));
#else
    unsigned mask = 0;
    for (int k = 0; k < 4; ++k) {
      float tMin = 0.0f, tMax = limit;
      for (int a = 0; a < 3; ++a) {
        const float tNear = (node.box[near_[a]][k] - origin_[a]) * inv_[a];
        const float tFar = (node.box[far_[a]][k] - origin_[a]) * inv_[a];
        tMin = tNear > tMin ? tNear : tMin;
        tMax = tFar < tMax ? tFar : tMax;
      }
      t[k] = tMin;
      mask |= unsigned(tMin <= tMax) << k;
    }
    return mask;
#endif
  }

  const RayNode* nodes_;
  int near_[3], far_[3];
#if defined(__SSE2__)
  __m128 origin_[3], inv_[3];
#else
  float origin_[3], inv_[3];
#endif
};

}  // namespace bp
