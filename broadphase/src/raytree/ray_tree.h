// RayTree: a 16-wide bounding volume hierarchy over exact boxes, built for
// rays only (BroadPhase builds one lazily over what its structure holds, see
// facade/side_rays.h).
//
// Layout: a node is eight cache lines holding the boxes of its sixteen
// children stored by coordinate (sixteen min x, sixteen min y, ...), so one
// ray is tested against all of them with three pairs of vector subtract,
// multiply, max and min on each half of eight (AVX; quarters of four
// without it). Sixteen rather than eight: a ray visits a fifth fewer nodes,
// each a load it waits for (docs/decisions.md, "Rays").
// A child is another node or a leaf; a leaf is one box and lives in its
// parent's slot, so the slot's box IS the leaf's exact box and the slab test
// that reaches it is already the exact test: there is no leaf array to load.
// A leaf carries two numbers: its key (what refit() asks boxes by: for
// BroadPhase, the structure slot) and its id (what the walk reports: the
// proxy index), kept in the node so that a hit reads no other array.
//
// Exactness: the slab test is clipRayAabb()'s arithmetic (math/ray.h), lane
// by lane: (plane - origin) * inverse direction with the near plane chosen by
// the sign of the direction, `t > tMin ? t : tMin` (maxps) and
// `t < tMax ? t : tMax` (minps), so each leaf's entry distance has the same
// bits as the brute-force oracle's, NaN rules included. A node's box holds
// its children's boxes and rounding is monotone, so a node's entry distance
// never exceeds a child's and a node that misses hides no hit.
//
// Invariants (validate()):
// - every slot is a node index, a leaf (kRayLeafBit | key) or kRayEmpty with
//   the empty box (+inf min, -inf max: no ray enters it);
// - a node slot's box is the union of that node's boxes (equality after
//   build() and refit());
// - each key given to build() is in exactly one leaf;
// - a node's child nodes have higher indices than it (a refit is one
//   backward sweep).
#pragma once

#include <broadphase/function_ref.h>
#include <broadphase/jobs/scheduler.h>
#include <broadphase/math/aabb.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace bp {

inline constexpr uint32_t kRayLeafBit = 0x80000000u;
inline constexpr uint32_t kRayEmpty = 0xFFFFFFFFu;

inline constexpr int kRayWidth = 16;  // children a node

struct alignas(64) RayNode {
  float box[6][kRayWidth];    // [axis] min x, y, z, then [3 + axis] max x, y, z; by slot
  uint32_t child[kRayWidth];  // a node index, kRayLeafBit | key, or kRayEmpty
  uint32_t id[kRayWidth];     // a leaf's id
};
static_assert(sizeof(RayNode) == 512, "a ray node is eight cache lines");
static_assert(alignof(RayNode) == 64, "ray nodes start on a cache line");

class RayTree {
 public:
  /// Builds the tree over `boxes`, leaf k carrying keys[k] (below 2^31) and
  /// ids[k] (what the walk reports). Binned SAH into nodes of up to sixteen; subtrees below the top
  /// are built in parallel and laid out in a fixed order, so the tree is the
  /// same for any thread count (null: all on the calling thread).
  void build(Scheduler* scheduler, std::span<const Aabb> boxes, std::span<const uint32_t> keys,
             std::span<const uint32_t> ids);
  /// New boxes and ids for the same keys: `leafOf(key, id)` returns the box
  /// and may change the id (give a key that is gone the empty box: no ray
  /// enters it). The shape stays; the cost is recomputed.
  void refit(FunctionRef<Aabb(uint32_t key, uint32_t& id)> leafOf);
  void clear();

  bool empty() const { return nodes_.empty(); }
  uint32_t leafCount() const { return leafCount_; }
  /// Sum of the surface areas of every node box over the root's: the
  /// expected node visits of a random ray, which a refit lets grow.
  double cost() const { return cost_; }
  const std::vector<RayNode>& nodes() const { return nodes_; }
  size_t memoryBytes() const { return nodes_.capacity() * sizeof(RayNode); }
  std::string validate() const;

 private:
  std::vector<RayNode> nodes_;  // root at 0; a node's children have higher indices
  uint32_t leafCount_ = 0;
  double cost_ = 0;
};

}  // namespace bp
