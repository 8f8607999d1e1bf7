// BvhNode and BvhTree: the plain data of one dynamic AABB tree.
//
// Layout (Bepu v2 style): a node is one 64-byte cache line holding the boxes
// of BOTH its children, so a traversal step tests two boxes from one line and
// never loads a node just to read its own box. Leaves are not nodes: a child
// slot either names an internal node or, with kBvhLeafBit set, a proxy index.
// A tree of n >= 2 leaves has exactly n - 1 nodes; a tree of one leaf has a
// root node whose slot 1 is kBvhNullChild with an empty (never overlapping)
// box.
//
// Invariants (checked by Bvh::validate()):
// - nodes[n].parent == (p << 1 | s) exactly when nodes[p].child[s] == n; the
//   root has parent kNullIndex; free nodes have parent kBvhFreeNode and are in
//   freeNodes once.
// - bounds[s] of a slot holding node c contains both of c's bounds (equality
//   right after a refit, containment after insertions enlarged it).
// - bounds[s] of a slot holding a leaf equals the proxy's fat box, except for
//   proxies in `moved`, whose new fat box is written by the next update().
#pragma once

#include <broadphase/math/aabb.h>
#include <broadphase/proxy_id.h>

#include <cstdint>
#include <vector>

namespace bp {

inline constexpr uint32_t kBvhLeafBit = 0x80000000u;
inline constexpr uint32_t kBvhNullChild = 0xFFFFFFFFu;  // only in a one-leaf root
inline constexpr uint32_t kBvhFreeNode = 0xFFFFFFFEu;   // parent field of a free node

inline bool isBvhLeaf(uint32_t child) { return (child & kBvhLeafBit) != 0; }  // null too
inline uint32_t bvhLeafProxy(uint32_t child) { return child & ~kBvhLeafBit; }
inline uint32_t makeBvhLeaf(uint32_t proxy) { return proxy | kBvhLeafBit; }

struct alignas(64) BvhNode {
  Aabb bounds[2];     // each child's box: a subtree's union or a leaf's fat box
  uint32_t child[2];  // node index, kBvhLeafBit | proxy, or kBvhNullChild
  uint32_t parent;    // parent node << 1 | slot; kNullIndex at the root
  uint32_t dirty;     // 1: a box below changed and this node awaits refit
};
static_assert(sizeof(BvhNode) == 64, "a node is exactly one cache line");
static_assert(alignof(BvhNode) == 64, "nodes start on a cache line");

// A 4-wide copy of a tree for the pair walk (bvh_wide.cpp): a binary node
// with its children's children pulled up, so one wide node holds 2-4 child
// boxes, stored by coordinate (four minX, four minY, ...) so that one box is
// tested against all four with a few vector compares. Unused slots hold
// kBvhNullChild and an empty box. Children are wide-node indices or leaves.
struct alignas(64) BvhWideNode {
  float minX[4], minY[4], minZ[4];
  float maxX[4], maxY[4], maxZ[4];
  uint32_t child[4];
  uint32_t pad[4];
};
static_assert(sizeof(BvhWideNode) == 128, "a wide node is two cache lines");

inline void setWideBox(BvhWideNode& w, int k, const Aabb& box) {
  w.minX[k] = box.min.x();
  w.minY[k] = box.min.y();
  w.minZ[k] = box.min.z();
  w.maxX[k] = box.max.x();
  w.maxY[k] = box.max.y();
  w.maxZ[k] = box.max.z();
}

struct BvhTree {
  std::vector<BvhNode> nodes;  // index-addressed; DFS order right after a rebuild
  std::vector<uint32_t> freeNodes;
  uint32_t root = kNullIndex;
  uint32_t leafCount = 0;  // leaves in the tree, not counting pendingInserts
  // The live nodes are in preorder (a node, its slot-0 subtree, its slot-1
  // subtree), free nodes being holes: every subtree is a contiguous index
  // range starting at its root, so a refit is one backward sweep. Set by a
  // full build, kept by removals (a splice keeps the order), cleared by an
  // incremental insert.
  bool ordered = false;

  // Deferred work, consumed by Bvh::update().
  std::vector<uint32_t> pendingInserts;  // proxies added but not yet in the tree
  std::vector<uint32_t> moved;           // proxies whose fat box grew out of their slot
  std::vector<uint32_t> dirtyNodes;      // nodes whose slot changed by a removal

  // Quality: SAH cost = sum of the areas of all internal nodes.
  double cost = 0;
  double costAtBuild = 0;
  uint32_t insertsSinceBuild = 0;
  uint32_t rebuildCount = 0;

  // Tight mode: the 4-wide copy the pair walk uses (BvhWideNode), its last
  // node a write-only sink. wideSlot[2n + s] = w << 2 | k: binary slot s of
  // node n is slot k of wide node w (the sink for the slot of a pulled-up
  // node). While wideValid, the ordered refit copies each slot it refits;
  // any other change clears it and findPairs collapses the tree again.
  std::vector<BvhWideNode> wide;
  std::vector<uint32_t> wideSlot;
  bool wideValid = false;
};

// One unit of the pair traversal: a node (or leaf) of the dynamic tree against
// itself, against another dynamic node, or against a static node.
enum class PairKind : uint32_t { self, crossDynamic, crossStatic };

struct PairTask {
  uint32_t a;  // a dynamic node or leaf
  uint32_t b;  // a node or leaf of the dynamic (crossDynamic) or static tree
  PairKind kind;
};
static_assert(sizeof(PairTask) == 12, "stack entries stay small");

}  // namespace bp
