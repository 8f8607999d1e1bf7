// Incremental changes to one tree: node allocation, leaf insertion with a
// branch-and-bound SAH sibling search, leaf removal.
#include "bvh/bvh.h"

#include <algorithm>
#include <vector>

namespace bp {

uint32_t Bvh::allocateNode(BvhTree& tree) {
  uint32_t n;
  if (!tree.freeNodes.empty()) {
    n = tree.freeNodes.back();
    tree.freeNodes.pop_back();
  } else {
    n = static_cast<uint32_t>(tree.nodes.size());
    tree.nodes.emplace_back();
  }
  BvhNode& node = tree.nodes[n];
  node.bounds[0] = node.bounds[1] = Aabb::empty();
  node.child[0] = node.child[1] = kBvhNullChild;
  node.parent = kNullIndex;
  node.dirty = 0;
  return n;
}

void Bvh::freeNode(BvhTree& tree, uint32_t n) {
  BvhNode& node = tree.nodes[n];
  node.child[0] = node.child[1] = kBvhNullChild;
  node.parent = kBvhFreeNode;
  node.dirty = 0;
  tree.freeNodes.push_back(n);
}

// Puts `child` (a node, a leaf or null) in slot `slot` of `node` and points
// the child's parent link (a node's parent field, a leaf's leafRef_) back.
void Bvh::setChild(BvhTree& tree, uint32_t node, int slot, uint32_t child, const Aabb& bounds) {
  BvhNode& n = tree.nodes[node];
  n.child[slot] = child;
  n.bounds[slot] = bounds;
  if (child == kBvhNullChild) return;
  const uint32_t ref = (node << 1) | uint32_t(slot);
  if (isBvhLeaf(child))
    leafRef_[bvhLeafProxy(child)] = ref;
  else
    tree.nodes[child].parent = ref;
}

namespace {

// A subtree still worth exploring in the sibling search. `inherited` is the
// growth in area of every ancestor (this node included) if the new leaf goes
// somewhere below: a cost paid whichever descendant is chosen.
struct SiblingCandidate {
  float lowerBound;
  float inherited;
  uint32_t node;
};
static_assert(sizeof(SiblingCandidate) == 12);

bool worseCandidate(const SiblingCandidate& x, const SiblingCandidate& y) {
  return x.lowerBound > y.lowerBound || (x.lowerBound == y.lowerBound && x.node > y.node);
}

}  // namespace

// Branch and bound over the choice of sibling (Bittner et al. 2013): the cost
// of making child S the new leaf's sibling is area(S + leaf) plus the
// inherited growth of S's ancestors. A subtree whose lower bound (leaf area +
// inherited growth) cannot beat the best cost found is not entered, so the
// search is exact yet visits a few dozen nodes in practice.
void Bvh::insertLeaf(BvhTree& tree, uint32_t proxy) {
  const Aabb box = leafBox(proxy);
  const uint32_t leaf = makeBvhLeaf(proxy);
  ++tree.leafCount;
  tree.ordered = false;  // the new node goes wherever the allocator puts it
  tree.wideValid = false;
  if (tree.root == kNullIndex) {
    const uint32_t r = allocateNode(tree);
    setChild(tree, r, 0, leaf, box);
    tree.root = r;
    return;
  }
  if (tree.nodes[tree.root].child[1] == kBvhNullChild) {
    setChild(tree, tree.root, 1, leaf, box);
    return;
  }

  const BvhNode& rootNode = tree.nodes[tree.root];
  const Aabb rootBox = merge(rootNode.bounds[0], rootNode.bounds[1]);
  const float leafArea = surfaceArea(box);
  float bestCost = surfaceArea(merge(rootBox, box));
  uint32_t bestNode = kNullIndex;  // kNullIndex: above the root
  int bestSlot = 0;

  std::vector<SiblingCandidate> heap;
  const float rootInherited = bestCost - surfaceArea(rootBox);
  heap.push_back({leafArea + rootInherited, rootInherited, tree.root});
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), worseCandidate);
    const SiblingCandidate c = heap.back();
    heap.pop_back();
    if (c.lowerBound >= bestCost) break;
    const BvhNode& node = tree.nodes[c.node];
    for (int s = 0; s < 2; ++s) {
      const float childArea = surfaceArea(node.bounds[s]);
      const float direct = surfaceArea(merge(node.bounds[s], box));
      const float cost = direct + c.inherited;
      if (cost < bestCost) {
        bestCost = cost;
        bestNode = c.node;
        bestSlot = s;
      }
      if (isBvhLeaf(node.child[s])) continue;
      const float inherited = c.inherited + (direct - childArea);
      const float lowerBound = leafArea + inherited;
      if (lowerBound < bestCost) {
        heap.push_back({lowerBound, inherited, node.child[s]});
        std::push_heap(heap.begin(), heap.end(), worseCandidate);
      }
    }
  }

  const uint32_t n = allocateNode(tree);  // may reallocate: no node references above here
  if (bestNode == kNullIndex) {
    const uint32_t oldRoot = tree.root;
    setChild(tree, n, 0, oldRoot, rootBox);
    setChild(tree, n, 1, leaf, box);
    tree.root = n;
    return;
  }
  const uint32_t sibling = tree.nodes[bestNode].child[bestSlot];
  const Aabb siblingBox = tree.nodes[bestNode].bounds[bestSlot];
  setChild(tree, n, 0, sibling, siblingBox);
  setChild(tree, n, 1, leaf, box);
  setChild(tree, bestNode, bestSlot, n, merge(siblingBox, box));
  // Grow the ancestors until one already contains the leaf (then all above do).
  for (uint32_t ref = tree.nodes[bestNode].parent; ref != kNullIndex;) {
    BvhNode& parent = tree.nodes[ref >> 1];
    Aabb& slotBox = parent.bounds[ref & 1];
    if (bp::contains(slotBox, box)) break;
    slotBox = merge(slotBox, box);
    ref = parent.parent;
  }
}

// The leaf's parent node disappears and the sibling takes its place. Boxes
// above stay valid (they still contain everything below) but may be loose:
// the grandparent is queued for the next refit.
void Bvh::removeLeaf(BvhTree& tree, uint32_t proxy) {
  const uint32_t ref = leafRef_[proxy];
  const uint32_t n = ref >> 1;
  const int other = 1 - int(ref & 1);
  const uint32_t sibling = tree.nodes[n].child[other];
  const Aabb siblingBox = tree.nodes[n].bounds[other];
  const uint32_t parentRef = tree.nodes[n].parent;
  --tree.leafCount;
  tree.wideValid = false;

  if (parentRef == kNullIndex) {  // n is the root
    if (sibling == kBvhNullChild) {
      freeNode(tree, n);
      tree.root = kNullIndex;
    } else if (isBvhLeaf(sibling)) {
      setChild(tree, n, 0, sibling, siblingBox);
      setChild(tree, n, 1, kBvhNullChild, Aabb::empty());
    } else {
      tree.nodes[sibling].parent = kNullIndex;
      tree.root = sibling;
      freeNode(tree, n);
    }
    return;
  }
  setChild(tree, parentRef >> 1, int(parentRef & 1), sibling, siblingBox);
  freeNode(tree, n);
  tree.dirtyNodes.push_back(parentRef >> 1);
}

}  // namespace bp
