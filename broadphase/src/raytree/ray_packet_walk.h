// RayPacketWalk: up to kRayPacket rays through a RayTree together, for rays
// that walk the same nodes (a lidar's or a camera's rays from one origin).
//
// Each node is fetched once for the packet, and each ray still gets
// RayTreeWalk's own sixteen-lane slab test of the node, so its answers are
// those of its own walk: a ray skips a child only when its test of the
// child's box rejects it at its current reach, and the child's box holds
// every leaf below it. A stack entry carries the mask of the rays that
// entered it; a ray that has finished (an any-hit query's first accepted
// leaf) is dropped from every entry when it is popped. The packet goes
// first to the child the packet's first active ray enters nearest; the
// others wait on the stack. What the packet gains: one node fetch, one
// stack step and one branch on the node's kind for up to kRayPacket rays,
// and independent slab tests for the core to overlap.
#pragma once

#include "raytree/ray_tree_walk.h"

#include <cstdint>

namespace bp {

inline constexpr int kRayPacket = 16;

class RayPacketWalk {
 public:
  // rays[0 .. count), count <= kRayPacket, all from one origin.
  RayPacketWalk(const RayTree& tree, const Ray* rays, int count)
      : nodes_(tree.nodes().data()), count_(count) {
    for (int r = 0; r < count; ++r) lanes_[r] = RayTreeWalk(tree, rays[r]).makeLanes();
    for (int a = 0; a < 3; ++a) origin_[a] = rays[0].origin[a];
  }

  // onLeaf(r, id, t) for each leaf ray r enters at t <= reach[r]; it may
  // shrink reach[r], and returns false when ray r is done (no more leaves
  // for it).
  template <class OnLeaf>
  void walk(float* reach, OnLeaf&& onLeaf) {
    uint32_t stackNode[RayTreeWalk::kStack];
    uint32_t stackRays[RayTreeWalk::kStack];
    int size = 0;
    uint32_t n = 0;
    unsigned active = (1u << count_) - 1;
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

 private:
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
