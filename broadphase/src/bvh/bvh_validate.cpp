// validate(): every invariant of the proxies and both trees, checked from
// scratch. Slow (linear, allocates); for tests and debugging.
#include "bvh/bvh.h"
#include "bvh/bvh_stack.h"

#include <string>
#include <vector>

namespace bp {

namespace {

std::string str(uint32_t v) { return std::to_string(v); }

}  // namespace

std::string Bvh::validate() const {
  if (std::string e = pool_.validate(); !e.empty()) return "handle pool: " + e;
  const uint32_t capacity = pool_.capacity();
  if (exact_.size() != capacity || fat_.size() != (tight_ ? 0 : capacity) ||
      leafRef_.size() != capacity || movedPos_.size() != capacity || isStatic_.size() != capacity)
    return "per-proxy arrays differ in size from the pool capacity";

  std::vector<uint8_t> seen(capacity, 0);  // 1: found as a leaf, 2: as a pending insert
  size_t inTrees = 0;
  if (group_.size() != capacity) return "per-proxy groups differ in size from the pool capacity";
  for (uint32_t treeIndex = 0; treeIndex < trees_.size(); ++treeIndex) {
    const BvhTree& tree = trees_[treeIndex];
    inTrees += tree.leafCount + tree.pendingInserts.size();
    const std::string name = std::string(treeIndex % 2 == 0 ? "dynamic" : "static") +
                             " tree of layer " + std::to_string(treeIndex / 2) + ": ";
    const uint32_t nodeCount = static_cast<uint32_t>(tree.nodes.size());

    for (size_t k = 0; k < tree.pendingInserts.size(); ++k) {
      const uint32_t p = tree.pendingInserts[k];
      if (p >= capacity || !pool_.isLiveIndex(p)) return name + "pending insert of a dead proxy";
      if (leafRef_[p] != (kPendingInsert | uint32_t(k))) return name + "pending insert position";
      if (seen[p]) return name + "proxy " + str(p) + " pending twice";
      seen[p] = 2;
    }
    for (size_t k = 0; k < tree.moved.size(); ++k) {
      const uint32_t p = tree.moved[k];
      if (p >= capacity || !pool_.isLiveIndex(p) || movedPos_[p] != k)
        return name + "moved list entry " + std::to_string(k) + " is inconsistent";
    }

    std::vector<uint8_t> state(nodeCount, 0);  // 1 reachable, 2 free
    for (uint32_t n : tree.freeNodes) {
      if (n >= nodeCount) return name + "free node out of range";
      if (state[n]) return name + "node " + str(n) + " free twice";
      if (tree.nodes[n].parent != kBvhFreeNode) return name + "free node not marked free";
      state[n] = 2;
    }

    uint32_t leaves = 0, reachable = 0;
    if (tree.root != kNullIndex) {
      if (tree.root >= nodeCount) return name + "root out of range";
      if (tree.nodes[tree.root].parent != kNullIndex) return name + "root has a parent";
      BvhStack<uint32_t> stack;
      stack.push(tree.root);
      while (!stack.empty()) {
        const uint32_t n = stack.pop();
        if (state[n]) return name + "node " + str(n) + " reached twice or is free";
        state[n] = 1;
        ++reachable;
        const BvhNode& node = tree.nodes[n];
        if (!pending_ && node.dirty) return name + "node " + str(n) + " dirty after update";
        for (int s = 0; s < 2; ++s) {
          const uint32_t c = node.child[s];
          const uint32_t ref = (n << 1) | uint32_t(s);
          if (tree.wideValid && c != kBvhNullChild) {
            // The wide copy holds this slot's box (unless the slot's node was
            // pulled up into its parent's wide node: no wide slot).
            if (tree.wideSlot.size() != 2 * nodeCount || tree.wide.empty())
              return name + "wide copy sized for another tree";
            const uint32_t target = tree.wideSlot[2 * n + uint32_t(s)];
            const uint32_t w = target >> 2, k = target & 3;
            if (target != kNullIndex && w >= tree.wide.size())
              return name + "wide slot out of range";
            if (target != kNullIndex) {
              const BvhWideNode& wn = tree.wide[w];
              const Aabb& b = node.bounds[s];
              if (wn.minX[k] != b.min.x() || wn.minY[k] != b.min.y() || wn.minZ[k] != b.min.z() ||
                  wn.maxX[k] != b.max.x() || wn.maxY[k] != b.max.y() || wn.maxZ[k] != b.max.z())
                return name + "wide copy of node " + str(n) + " slot " + str(uint32_t(s)) +
                       " differs from the slot";
              if (isBvhLeaf(c) && wn.child[k] != c)
                return name + "wide copy of node " + str(n) + " names another leaf";
            }
          }
          if (c == kBvhNullChild) {
            if (n != tree.root || s != 1) return name + "null child outside the root's slot 1";
            if (overlaps(node.bounds[s], node.bounds[s]))
              return name + "null child slot with a non-empty box";
            continue;
          }
          if (isBvhLeaf(c)) {
            const uint32_t p = bvhLeafProxy(c);
            if (p >= capacity || !pool_.isLiveIndex(p))
              return name + "leaf of dead proxy " + str(p) + " in node " + str(n);
            if (seen[p]) return name + "proxy " + str(p) + " appears twice";
            seen[p] = 1;
            ++leaves;
            if (group_[p] != treeIndex || (isStatic_[p] != 0) != (treeIndex % 2 == 1))
              return name + "proxy in the wrong tree";
            if (leafRef_[p] != ref) return name + "leafRef of proxy " + str(p) + " is wrong";
            if (!bp::contains(leafBox(p), exact_[p]))
              return name + "fat box of proxy " + str(p) + " does not contain its exact box";
            if (movedPos_[p] == kNullIndex &&
                !(node.bounds[s].min == leafBox(p).min && node.bounds[s].max == leafBox(p).max))
              return name + "slot box of proxy " + str(p) + " differs from its fat box";
            continue;
          }
          if (c >= nodeCount) return name + "child node out of range";
          if (tree.nodes[c].parent != ref)
            return name + "parent link of node " + str(c) + " is wrong";
          const BvhNode& child = tree.nodes[c];
          if (!bp::contains(node.bounds[s], child.bounds[0]) ||
              !bp::contains(node.bounds[s], child.bounds[1]))
            return name + "node " + str(n) + " slot " + str(uint32_t(s)) +
                   " does not contain its children";
          if (child.child[1] == kBvhNullChild) return name + "null child below the root";
          stack.push(c);
        }
      }
    }
    if (tree.ordered && tree.root != kNullIndex) {
      // Preorder (slot 0 before slot 1) must visit increasing node indices.
      BvhStack<uint32_t> stack;
      stack.push(tree.root);
      uint32_t previous = 0;
      bool first = true;
      while (!stack.empty()) {
        const uint32_t n = stack.pop();
        if (!first && n <= previous)
          return name + "ordered tree but node " + str(n) + " follows " + str(previous) +
                 " in preorder";
        first = false;
        previous = n;
        for (int s = 1; s >= 0; --s)
          if (!isBvhLeaf(tree.nodes[n].child[s])) stack.push(tree.nodes[n].child[s]);
      }
    }
    if (leaves != tree.leafCount)
      return name + "leaf count " + str(tree.leafCount) + " but " + str(leaves) + " leaves";
    if (reachable + tree.freeNodes.size() != nodeCount)
      return name + "a node is neither reachable nor free";
    if (tree.leafCount >= 2 && reachable != tree.leafCount - 1)
      return name + str(reachable) + " nodes for " + str(tree.leafCount) + " leaves";
  }
  for (uint32_t p = 0; p < capacity; ++p) {
    if (pool_.isLiveIndex(p) != (seen[p] != 0))
      return "proxy " + str(p) + (seen[p] ? " is in a tree but dead" : " is live but in no tree");
    if (pool_.isLiveIndex(p) && !bp::contains(leafBox(p), exact_[p]))
      return "fat box of proxy " + str(p) + " does not contain its exact box";
    if (!pool_.isLiveIndex(p) && movedPos_[p] != kNullIndex) return "dead proxy in a moved list";
  }
  if (pool_.liveCount() != inTrees) return "live proxies differ from leaves plus pending inserts";
  return {};
}

}  // namespace bp
