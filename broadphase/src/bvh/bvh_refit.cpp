// update(): the deferred work of moves, removals and adds, per tree:
//   1. write the new fat boxes of escaped leaves into their slots;
//   2. refit the ancestors that changed, in one parallel pass;
//   3. insert a few new leaves, or rebuild when many arrived;
//   4. rebuild when the SAH cost drifted past rebuildRatio x the built cost.
// When most leaves moved and the tree is still in build (preorder) order,
// 1 and 2 are one backward sweep over each subtree's index range that reads
// the leaf boxes directly and sums the SAH cost on the way (refitOrdered).
// Every decision depends only on the tree and the operations, never on the
// thread count, so the trees (and "any"-hit ray answers) are deterministic.
#include "bvh/bvh.h"
#include "bvh/bvh_stack.h"

#include <algorithm>
#include <type_traits>

namespace bp {

namespace {

// Subtrees handed to tasks by the parallel refit: fixed, not per thread, so
// that the work split (and the cost sums below) never depend on threads.
constexpr size_t kRefitSubtrees = 64;
constexpr uint32_t kCostChunk = 4096;
// Past this fraction of moved leaves nearly every node is an ancestor of one:
// refit them all rather than mark ancestors one walk at a time.
constexpr uint32_t kRefitAllDivisor = 16;
constexpr uint32_t kChildrenDoneBit = 0x80000000u;  // node indices stay below 2^31

// Recomputes the slots of n that hold nodes from those nodes' two slots.
inline void refitNode(BvhNode* nodes, uint32_t n) {
  BvhNode& node = nodes[n];
  for (int s = 0; s < 2; ++s) {
    const uint32_t c = node.child[s];
    if (isBvhLeaf(c)) continue;
    node.bounds[s] = merge(nodes[c].bounds[0], nodes[c].bounds[1]);
  }
  node.dirty = 0;
}

inline bool needsRefit(const BvhNode* nodes, uint32_t child, bool everyNode) {
  return !isBvhLeaf(child) && (everyNode || nodes[child].dirty);
}

// Post-order over the nodes of one subtree that need a refit, with an explicit
// stack (the top bit of an entry marks "children done").
void refitSubtree(BvhNode* nodes, uint32_t root, bool everyNode) {
  BvhStack<uint32_t> stack;
  stack.push(root);
  while (!stack.empty()) {
    const uint32_t entry = stack.pop();
    if (entry & kChildrenDoneBit) {
      refitNode(nodes, entry & ~kChildrenDoneBit);
      continue;
    }
    stack.push(entry | kChildrenDoneBit);
    for (int s = 0; s < 2; ++s)
      if (needsRefit(nodes, nodes[entry].child[s], everyNode)) stack.push(nodes[entry].child[s]);
  }
}

// Recomputes both slots of n: a leaf slot from the proxy's fat box (so no
// separate slot write is needed), a node slot from that node's two slots.
// Returns the area of n's own box, the node's term of the SAH cost.
inline float refitNodeFromLeaves(BvhNode* nodes, const Aabb* fat, uint32_t n) {
  BvhNode& node = nodes[n];
  for (int s = 0; s < 2; ++s) {
    const uint32_t c = node.child[s];
    if (c == kBvhNullChild) continue;
    node.bounds[s] =
        isBvhLeaf(c) ? fat[bvhLeafProxy(c)] : merge(nodes[c].bounds[0], nodes[c].bounds[1]);
  }
  node.dirty = 0;
  return surfaceArea(merge(node.bounds[0], node.bounds[1]));
}

// Copies both slot boxes of binary node n, just refit, to their wide slots.
// A slot whose node was pulled up into its parent's wide node has no wide
// slot of its own (kNullIndex): skipped. (A shared dummy slot written
// without a branch was a data race between the refit tasks.)
inline void copyToWide(BvhWideNode* wide, const uint32_t* wideSlot, const BvhNode& node,
                       uint32_t n) {
  for (int s = 0; s < 2; ++s) {
    const uint32_t target = wideSlot[2 * n + s];
    if (target != kNullIndex) setWideBox(wide[target >> 2], int(target & 3), node.bounds[s]);
  }
}

// Cuts the tree under `root` breadth-first until there are kRefitSubtrees
// subtrees to hand out as tasks (or nothing below): the nodes above the cut
// go to `top` (refit serially afterwards, bottom-up), the subtree roots to
// `frontier`. `descend(child)` says whether a child is followed.
template <class Descend>
void cutIntoSubtrees(const BvhNode* nodes, uint32_t root, std::vector<uint32_t>& top,
                     std::vector<uint32_t>& frontier, std::vector<uint32_t>& next,
                     Descend&& descend) {
  top.clear();
  frontier.assign(1, root);
  while (frontier.size() < kRefitSubtrees) {
    next.clear();
    for (uint32_t n : frontier) {
      top.push_back(n);
      for (int s = 0; s < 2; ++s)
        if (descend(nodes[n].child[s])) next.push_back(nodes[n].child[s]);
    }
    frontier.swap(next);
    if (frontier.empty()) break;
  }
}

// The last node of the subtree at r in preorder: keep taking the slot-1
// subtree, or the slot-0 one when slot 1 is a leaf.
uint32_t lastInPreorder(const BvhNode* nodes, uint32_t r) {
  for (;;) {
    const BvhNode& node = nodes[r];
    if (!isBvhLeaf(node.child[1]))
      r = node.child[1];
    else if (!isBvhLeaf(node.child[0]))
      r = node.child[0];
    else
      return r;
  }
}

void markAncestorsDirty(BvhNode* nodes, uint32_t n) {
  while (n != kNullIndex && !nodes[n].dirty) {
    nodes[n].dirty = 1;
    const uint32_t ref = nodes[n].parent;
    n = ref == kNullIndex ? kNullIndex : ref >> 1;
  }
}

}  // namespace

void Bvh::update(Scheduler& scheduler) {
  if (!pending_) return;
  for (BvhTree& tree : trees_) updateTree(tree, scheduler);
  pending_ = false;
}

void Bvh::updateTree(BvhTree& tree, Scheduler& scheduler) {
  const bool changed =
      !tree.moved.empty() || !tree.dirtyNodes.empty() || !tree.pendingInserts.empty();
  if (!changed) return;
  const size_t inserts = tree.pendingInserts.size();
  if (inserts > 0 && inserts * 4 > tree.leafCount) {
    rebuildTree(tree, scheduler);
    return;
  }

  const bool everyNode = tree.moved.size() * kRefitAllDivisor > tree.leafCount;
  if (everyNode && tree.ordered && inserts == 0) {
    // Most leaves moved: one backward sweep refits every node from leafBoxes().
    for (uint32_t p : tree.moved) movedPos_[p] = kNullIndex;
    tree.moved.clear();
    tree.dirtyNodes.clear();
    refitOrdered(tree, scheduler);  // also sets tree.cost
    if (tree.cost > double(config_.rebuildRatio) * tree.costAtBuild) rebuildTree(tree, scheduler);
    return;
  }
  tree.wideValid = false;  // the refits below leave the wide copy behind
  writeMovedSlots(tree, scheduler);
  if (!everyNode)
    for (uint32_t p : tree.moved) markAncestorsDirty(tree.nodes.data(), leafRef_[p] >> 1);
  for (uint32_t p : tree.moved) movedPos_[p] = kNullIndex;
  tree.moved.clear();
  for (uint32_t n : tree.dirtyNodes)
    if (tree.nodes[n].parent != kBvhFreeNode) markAncestorsDirty(tree.nodes.data(), n);
  tree.dirtyNodes.clear();
  refit(tree, scheduler, everyNode);

  for (uint32_t p : tree.pendingInserts) insertLeaf(tree, p);
  tree.insertsSinceBuild += static_cast<uint32_t>(inserts);
  tree.pendingInserts.clear();

  tree.cost = computeCost(tree, scheduler);
  if (tree.cost > double(config_.rebuildRatio) * tree.costAtBuild) rebuildTree(tree, scheduler);
}

void Bvh::writeMovedSlots(BvhTree& tree, Scheduler& scheduler) {
  BvhNode* nodes = tree.nodes.data();
  const uint32_t* moved = tree.moved.data();
  // Each proxy owns its slot, so the writes never collide.
  scheduler.forEach(0, static_cast<uint32_t>(tree.moved.size()), 4096,
                    [&](uint32_t begin, uint32_t end) {
                      for (uint32_t k = begin; k < end; ++k) {
                        const uint32_t p = moved[k];
                        const uint32_t ref = leafRef_[p];
                        nodes[ref >> 1].bounds[ref & 1] = leafBox(p);
                      }
                    });
}

// Refits every node flagged dirty (or every node), children before parents.
// The top of the tree is cut into up to kRefitSubtrees subtrees refit in
// parallel; the few nodes above the cut are refit afterwards, bottom-up.
void Bvh::refit(BvhTree& tree, Scheduler& scheduler, bool everyNode) {
  if (tree.root == kNullIndex) return;
  BvhNode* nodes = tree.nodes.data();
  if (!everyNode && !nodes[tree.root].dirty) return;

  std::vector<uint32_t>& top = scratchTop_;
  std::vector<uint32_t>& frontier = scratchFrontier_;
  cutIntoSubtrees(nodes, tree.root, top, frontier, scratchNext_,
                  [&](uint32_t child) { return needsRefit(nodes, child, everyNode); });
  scheduler.forEach(0, static_cast<uint32_t>(frontier.size()), 1,
                    [&](uint32_t begin, uint32_t end) {
                      for (uint32_t k = begin; k < end; ++k)
                        refitSubtree(nodes, frontier[k], everyNode);
                    });
  for (size_t k = top.size(); k-- > 0;) refitNode(nodes, top[k]);
}

// Every node of an ordered tree, children before parents, and the SAH cost
// on the way. Subtrees are contiguous index ranges, so each task sweeps its
// range backwards (memory order, no stack), skipping free nodes; the nodes
// above the cut follow. The cut and the summation order are fixed, so the
// cost is the same for any thread count.
void Bvh::refitOrdered(BvhTree& tree, Scheduler& scheduler) {
  tree.cost = 0;
  if (tree.root == kNullIndex) return;
  BvhNode* nodes = tree.nodes.data();
  const Aabb* fat = leafBoxes();
  // The wide copy follows along when it is in step with the tree.
  BvhWideNode* wide = tree.wide.data();
  const uint32_t* wideSlot = tree.wideValid ? tree.wideSlot.data() : nullptr;

  std::vector<uint32_t>& top = scratchTop_;
  std::vector<uint32_t>& frontier = scratchFrontier_;
  cutIntoSubtrees(nodes, tree.root, top, frontier, scratchNext_,
                  [&](uint32_t child) { return !isBvhLeaf(child); });
  std::vector<double>& partial = scratchCost_;
  partial.assign(frontier.size(), 0.0);
  // Two instances of the sweep, so that the one without copies has no test.
  auto sweep = [&](auto copyWide) {
    scheduler.forEach(0, static_cast<uint32_t>(frontier.size()), 1,
                      [&](uint32_t begin, uint32_t end) {
                        for (uint32_t k = begin; k < end; ++k) {
                          const uint32_t first = frontier[k];
                          double sum = 0;
                          for (uint32_t n = lastInPreorder(nodes, first) + 1; n-- > first;)
                            if (nodes[n].parent != kBvhFreeNode) {
                              sum += refitNodeFromLeaves(nodes, fat, n);
                              if constexpr (decltype(copyWide)::value)
                                copyToWide(wide, wideSlot, nodes[n], n);
                            }
                          partial[k] = sum;
                        }
                      });
  };
  if (wideSlot)
    sweep(std::true_type{});
  else
    sweep(std::false_type{});
  double total = 0;
  for (double p : partial) total += p;
  for (size_t k = top.size(); k-- > 0;) {
    total += refitNodeFromLeaves(nodes, fat, top[k]);
    if (wideSlot) copyToWide(wide, wideSlot, nodes[top[k]], top[k]);
  }
  tree.cost = total;
}

// Sum of internal node areas, in fixed chunks summed in a fixed order so the
// result (and so the rebuild decision) is the same for any thread count.
double Bvh::computeCost(const BvhTree& tree, Scheduler& scheduler) {
  const uint32_t count = static_cast<uint32_t>(tree.nodes.size());
  const uint32_t chunks = (count + kCostChunk - 1) / kCostChunk;
  std::vector<double>& partial = scratchCost_;
  partial.assign(chunks, 0.0);
  const BvhNode* nodes = tree.nodes.data();
  scheduler.forEach(0, chunks, 1, [&](uint32_t begin, uint32_t end) {
    for (uint32_t c = begin; c < end; ++c) {
      double sum = 0;
      const uint32_t last = std::min(count, (c + 1) * kCostChunk);
      for (uint32_t n = c * kCostChunk; n < last; ++n)
        if (nodes[n].parent != kBvhFreeNode)
          sum += surfaceArea(merge(nodes[n].bounds[0], nodes[n].bounds[1]));
      partial[c] = sum;
    }
  });
  double total = 0;
  for (double p : partial) total += p;
  return total;
}

void Bvh::rebuild(Scheduler& scheduler) {
  update(scheduler);
  for (BvhTree& tree : trees_) rebuildTree(tree, scheduler);
}

}  // namespace bp
