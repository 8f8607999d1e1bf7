// collapseWide(): the 4-wide copy of a binary tree used by the tight pair
// walk (bvh_pairs.cpp).
//
// Each wide node stands for a binary node n: its slots are n's children, and
// a child that is itself a node is replaced by that node's two children. So
// a wide node covers two binary levels, and the walk meets about a third as
// many nodes, each tested four boxes at a time. Boxes are copied from the
// binary slots, which update() has just refit: no box is recomputed.
#include "bvh/bvh.h"
#include "bvh/bvh_stack.h"

#include <limits>

namespace bp {

namespace {

inline void setSlot(BvhWideNode& w, int k, uint32_t child, const Aabb& box) {
  w.child[k] = child;
  setWideBox(w, k, box);
}

}  // namespace

void Bvh::collapseWide(BvhTree& tree) const {
  std::vector<BvhWideNode>& out = tree.wide;
  tree.wideValid = true;
  out.clear();
  tree.wideSlot.assign(2 * tree.nodes.size(), kNullIndex);
  if (tree.root != kNullIndex) {
    const BvhNode* nodes = tree.nodes.data();
    const Aabb empty = Aabb::empty();
    struct Entry {
      uint32_t node;        // binary node of the wide node to make
      uint32_t parentSlot;  // wide parent << 2 | slot, or kNullIndex
    };
    // Numbered when popped, in preorder (slot 0 first): the wide nodes come
    // in the order of their binary nodes, so the refit's backward sweep
    // writes them backwards through memory too.
    BvhStack<Entry> stack;
    stack.push({tree.root, kNullIndex});
    while (!stack.empty()) {
      const Entry e = stack.pop();
      const uint32_t self = static_cast<uint32_t>(out.size());
      out.emplace_back();
      if (e.parentSlot != kNullIndex) out[e.parentSlot >> 2].child[e.parentSlot & 3] = self;
      BvhWideNode& w = out.back();
      uint32_t pending[4];
      int pendingCount = 0;
      int k = 0;
      auto place = [&](uint32_t node, int s, uint32_t child) {
        tree.wideSlot[2 * node + s] = (self << 2) | uint32_t(k);
        setSlot(w, k, child, nodes[node].bounds[s]);
        if (!isBvhLeaf(child)) pending[pendingCount++] = uint32_t(k);
        ++k;
      };
      for (int s = 0; s < 2; ++s) {
        const uint32_t c = nodes[e.node].child[s];
        if (c == kBvhNullChild) continue;
        if (isBvhLeaf(c)) {
          place(e.node, s, c);
          continue;
        }
        // c is pulled up: its two slots become ours.
        for (int t = 0; t < 2; ++t) place(c, t, nodes[c].child[t]);
      }
      for (int j = k; j < 4; ++j) setSlot(w, j, kBvhNullChild, empty);
      // Internal slots hold binary node indices until their wide node is made.
      for (int j = pendingCount; j-- > 0;)
        stack.push({w.child[pending[j]], (self << 2) | pending[j]});
    }
  }
  // Slots of pulled-up nodes keep kNullIndex: the refit skips them.
}

}  // namespace bp
