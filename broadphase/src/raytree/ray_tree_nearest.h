// nearestInRayTree: the k leaves of a RayTree nearest to a point, by a
// best-first walk over its sixteen-wide nodes; withinInRayTree: the leaves
// within a radius of it.
//
// Nodes wait in a min-heap keyed by a lower bound of the squared distance
// from the point to their box; the k best leaves so far sit in a max-heap
// under neighbourBefore (worst on top). The walk stops when the nearest
// waiting node is farther than the k-th leaf: nothing inside it can come
// before. Equal distances are still explored, since a tie goes to the lower
// id.
//
// Exactness: a leaf's slot box is its exact box, and its distance is
// distanceSquared(box, point) of math/aabb.h, the oracle's expression, so
// every distance and tie has the oracle's bits. The sixteen bounds of a node
// are computed lane by lane as (dx^2 + dy^2) + dz^2; distanceSquared may sum
// in another order (Eigen's), which can differ by an ulp or two, so a bound is
// scaled down by 2^-20 before it is compared: per axis the distance to a
// node's box never exceeds the distance to a box inside it (the subtractions
// round monotonically), and the scaled sum never exceeds any order's sum.
#pragma once

#include <broadphase/math/aabb.h>
#include <broadphase/query.h>
#include "common/nearest_heap.h"
#include "raytree/ray_tree.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

namespace bp {

struct RayTreeNearestEntry {
  float bound;    // a lower bound of the squared distance to the node's box
  uint32_t node;  // its index
};

/// The point broadcast for the node step.
struct NearestLanes {
  explicit NearestLanes(const Vec3& p) {
    for (int a = 0; a < 3; ++a) at[a] = p[a];
#if defined(__AVX__)
    for (int a = 0; a < 3; ++a) wide[a] = _mm256_set1_ps(p[a]);
#elif defined(__SSE2__)
    for (int a = 0; a < 3; ++a) wide[a] = _mm_set1_ps(p[a]);
#endif
  }
  float at[3];
#if defined(__AVX__)
  __m256 wide[3];
#elif defined(__SSE2__)
  __m128 wide[3];
#endif
};

/// The sixteen slots' distance bounds into `bound` (per axis max(min - p,
/// p - max, 0), squared, (x + y) + z, scaled by 1 - 2^-20), and the mask of
/// the slots whose bound is <= kth and finite.
inline unsigned nodeBounds(const RayNode& node, const NearestLanes& lanes, float kth,
                           float* bound) {
  constexpr float kShrink = 1.0f - 0x1p-20f;
  unsigned mask = 0;
#if defined(__AVX__)
  const __m256 zero = _mm256_setzero_ps(), shrink = _mm256_set1_ps(kShrink);
  const __m256 limit = _mm256_set1_ps(kth), inf = _mm256_set1_ps(INFINITY);
  for (int h = 0; h < kRayWidth / 8; ++h) {
    __m256 sum = zero;
    for (int a = 0; a < 3; ++a) {
      const __m256 lo = _mm256_load_ps(node.box[a] + 8 * h);
      const __m256 hi = _mm256_load_ps(node.box[3 + a] + 8 * h);
      const __m256 d = _mm256_max_ps(
          _mm256_max_ps(_mm256_sub_ps(lo, lanes.wide[a]), _mm256_sub_ps(lanes.wide[a], hi)), zero);
      sum = a == 0 ? _mm256_mul_ps(d, d) : _mm256_add_ps(sum, _mm256_mul_ps(d, d));
    }
    sum = _mm256_mul_ps(sum, shrink);
    _mm256_store_ps(bound + 8 * h, sum);
    const __m256 in =
        _mm256_and_ps(_mm256_cmp_ps(sum, limit, _CMP_LE_OQ), _mm256_cmp_ps(sum, inf, _CMP_LT_OQ));
    mask |= unsigned(_mm256_movemask_ps(in)) << (8 * h);
  }
#elif defined(__SSE2__)
  const __m128 zero = _mm_setzero_ps(), shrink = _mm_set1_ps(kShrink);
  const __m128 limit = _mm_set1_ps(kth), inf = _mm_set1_ps(INFINITY);
  for (int q = 0; q < kRayWidth / 4; ++q) {
    __m128 sum = zero;
    for (int a = 0; a < 3; ++a) {
      const __m128 lo = _mm_load_ps(node.box[a] + 4 * q);
      const __m128 hi = _mm_load_ps(node.box[3 + a] + 4 * q);
      const __m128 d = _mm_max_ps(
          _mm_max_ps(_mm_sub_ps(lo, lanes.wide[a]), _mm_sub_ps(lanes.wide[a], hi)), zero);
      sum = a == 0 ? _mm_mul_ps(d, d) : _mm_add_ps(sum, _mm_mul_ps(d, d));
    }
    sum = _mm_mul_ps(sum, shrink);
    _mm_store_ps(bound + 4 * q, sum);
    const __m128 in = _mm_and_ps(_mm_cmple_ps(sum, limit), _mm_cmplt_ps(sum, inf));
    mask |= unsigned(_mm_movemask_ps(in)) << (4 * q);
  }
#else
  for (int s = 0; s < kRayWidth; ++s) {
    float sum = 0.0f;
    for (int a = 0; a < 3; ++a) {
      const float d =
          std::max(std::max(node.box[a][s] - lanes.at[a], lanes.at[a] - node.box[3 + a][s]), 0.0f);
      sum = a == 0 ? d * d : sum + d * d;
    }
    bound[s] = sum * kShrink;
    mask |= unsigned(bound[s] <= kth && bound[s] < INFINITY) << s;
  }
#endif
  return mask;
}

/// The k leaves nearest to `point` among those `accept(id)` takes, sorted by
/// neighbourBefore (nearer first, ties to the lower id), into `out`
/// (cleared), each as its id; with kByKey as its key, ties then going to the
/// lower key. `open` is scratch for the waiting nodes (kept by callers that
/// make many queries).
template <bool kByKey = false, class Accept>
void nearestInRayTree(const RayTree& tree, const Vec3& point, uint32_t k, Accept&& accept,
                      std::vector<Neighbour>& out, std::vector<RayTreeNearestEntry>& open) {
  out.clear();
  open.clear();
  if (tree.empty() || k == 0) return;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const RayNode* nodes = tree.nodes().data();
  const NearestLanes lanes(point);
  const auto farther = [](const RayTreeNearestEntry& a, const RayTreeNearestEntry& b) {
    return a.bound > b.bound;
  };
  // The k-th distance so far, +inf until k leaves are kept.
  float kth = kInf;
  const auto before = [](const Neighbour& a, const Neighbour& b) { return neighbourBefore(a, b); };
  const auto offer = [&](const Neighbour& candidate) {
    if (keepNearest(out, k, candidate) && out.size() == k) kth = out.front().distanceSquared;
  };

  uint32_t n = 0;  // the root
  for (;;) {
    const RayNode& node = nodes[n];
    alignas(64) float bound[kRayWidth];
    // An empty slot's bound is +inf (its min is +inf): nodeBounds leaves it
    // out even while kth is still +inf.
    unsigned near = nodeBounds(node, lanes, kth, bound);
    // The leaves first, so that kth is as small as it gets before the child
    // nodes are compared.
    unsigned inner = 0;
    for (; near != 0; near &= near - 1) {
      const int s = __builtin_ctz(near);
      if (!(bound[s] <= kth)) continue;  // kth shrank since
      const uint32_t c = node.child[s];
      if (!(c & kRayLeafBit)) {
        inner |= 1u << s;
        continue;
      }
      const uint32_t id = node.id[s];
      if (!accept(id)) continue;
      const Aabb box{Vec3(node.box[0][s], node.box[1][s], node.box[2][s]),
                     Vec3(node.box[3][s], node.box[4][s], node.box[5][s])};
      offer({kByKey ? c & ~kRayLeafBit : id, distanceSquared(box, point)});
    }
    // The nearest child node next, the others wait: a depth-first descent
    // toward the point without a heap push and pop a level.
    int next = -1;
    for (; inner != 0; inner &= inner - 1) {
      int s = __builtin_ctz(inner);
      if (!(bound[s] <= kth)) continue;  // kth shrank since
      if (next < 0) {
        next = s;
        continue;
      }
      if (bound[s] < bound[next]) std::swap(s, next);
      open.push_back({bound[s], node.child[s]});
      std::push_heap(open.begin(), open.end(), farther);
    }
    if (next >= 0) {
      n = node.child[next];
      continue;
    }
    // The nearest waiting node that may still hold a better leaf.
    if (open.empty()) break;
    std::pop_heap(open.begin(), open.end(), farther);
    const RayTreeNearestEntry e = open.back();
    open.pop_back();
    if (e.bound > kth) break;  // every other waits at this bound or beyond
    n = e.node;
  }
  open.clear();
  std::sort(out.begin(), out.end(), before);
}

/// Calls fn(key, id) for every leaf whose box may lie within
/// sqrt(radiusSquared) of `point`: every leaf whose box's distanceSquared
/// is <= radiusSquared, and a few just beyond it (the bounds are scaled
/// down as nearestInRayTree's), in no promised order. A depth-first walk
/// with `stack` as scratch. For the double nearest's second step: the
/// candidates within the bound of the k-th double distance.
template <class Fn>
void withinInRayTree(const RayTree& tree, const Vec3& point, float radiusSquared, Fn&& fn,
                     std::vector<uint32_t>& stack) {
  stack.clear();
  if (tree.empty()) return;
  const RayNode* nodes = tree.nodes().data();
  const NearestLanes lanes(point);
  stack.push_back(0);  // the root
  while (!stack.empty()) {
    const RayNode& node = nodes[stack.back()];
    stack.pop_back();
    alignas(64) float bound[kRayWidth];
    for (unsigned in = nodeBounds(node, lanes, radiusSquared, bound); in != 0; in &= in - 1) {
      const int s = __builtin_ctz(in);
      const uint32_t c = node.child[s];
      if (c & kRayLeafBit)
        fn(c & ~kRayLeafBit, node.id[s]);
      else
        stack.push_back(c);
    }
  }
}

}  // namespace bp
