// nearestInRayTree: the k leaves of a RayTree nearest to a point, by a
// best-first walk over its sixteen-wide nodes.
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
#include "raytree/ray_tree.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

namespace bp {

struct RayTreeNearestEntry {
  float bound;    // a lower bound of the squared distance to the node's box
  uint32_t node;  // its index
};

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
  constexpr float kShrink = 1.0f - 0x1p-20f;
  const RayNode* nodes = tree.nodes().data();
  const float px = point.x(), py = point.y(), pz = point.z();
  const auto farther = [](const RayTreeNearestEntry& a, const RayTreeNearestEntry& b) {
    return a.bound > b.bound;
  };
  // The k-th distance so far, +inf until k leaves are kept.
  float kth = kInf;
  const auto offer = [&](const Neighbour& candidate) {
    if (out.size() < k) {
      out.push_back(candidate);
      std::push_heap(out.begin(), out.end(), neighbourBefore);
    } else if (neighbourBefore(candidate, out.front())) {
      std::pop_heap(out.begin(), out.end(), neighbourBefore);
      out.back() = candidate;
      std::push_heap(out.begin(), out.end(), neighbourBefore);
    } else {
      return;
    }
    if (out.size() == k) kth = out.front().distanceSquared;
  };

  uint32_t n = 0;  // the root
  for (;;) {
    const RayNode& node = nodes[n];
    alignas(64) float bound[kRayWidth];
    for (int s = 0; s < kRayWidth; ++s) {
      const float dx = std::max(std::max(node.box[0][s] - px, px - node.box[3][s]), 0.0f);
      const float dy = std::max(std::max(node.box[1][s] - py, py - node.box[4][s]), 0.0f);
      const float dz = std::max(std::max(node.box[2][s] - pz, pz - node.box[5][s]), 0.0f);
      bound[s] = (dx * dx + dy * dy + dz * dz) * kShrink;
    }
    // An empty slot's bound is +inf (its min is +inf): never below kth
    // unless nothing is kept yet, hence the `< kInf`. The leaves first, so
    // that kth is as small as it gets before the child nodes are compared.
    unsigned inner = 0;
    for (int s = 0; s < kRayWidth; ++s) {
      if (!(bound[s] <= kth && bound[s] < kInf)) continue;
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
  std::sort(out.begin(), out.end(), neighbourBefore);
}

}  // namespace bp
