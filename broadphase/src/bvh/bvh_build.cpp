// Full rebuild of one tree with a binned SAH builder, in parallel tasks.
//
// Node numbering is fixed by the leaf counts alone: a node built over k
// leaves at index i puts its left subtree (kl leaves, kl - 1 nodes) at
// i + 1 ... i + kl - 1 and its right child at i + kl. So the nodes come out
// in depth-first order (a refit and a traversal walk memory forward), and the
// result is identical whichever thread builds which subtree.
#include "bvh/bvh.h"
#include "bvh/bvh_stack.h"

#include <tbb/parallel_invoke.h>

#include <algorithm>
#include <vector>

namespace bp {

namespace {

constexpr int kBins = 16;
// Subtrees at least this big on both sides of a split are built as two tasks.
constexpr uint32_t kParallelLeaves = 2048;

struct BuildItem {
  Aabb box;  // the leaf's fat box
  uint32_t proxy;
  uint32_t pad;
};
static_assert(sizeof(BuildItem) == 32, "two build items per cache line");

struct BuildRange {
  uint32_t begin;
  uint32_t end;
  uint32_t node;
  uint32_t parentRef;
  uint32_t buffer;  // which of the two item arrays holds this range
};

class Builder {
 public:
  Builder(std::vector<BuildItem>& items, BvhTree& tree, std::vector<uint32_t>& leafRef, int threads)
      : nodes_(tree.nodes.data()), leafRef_(leafRef), threads_(threads) {
    scratch_.resize(items.size());
    buffers_[0] = items.data();
    buffers_[1] = scratch_.data();
  }

  // Builds the subtree over `range`, spawning big halves as parallel tasks.
  void build(BuildRange range) {
    BvhStack<BuildRange> stack;
    stack.push(range);
    while (!stack.empty()) {
      const BuildRange r = stack.pop();
      BuildRange left, right;
      const int children = split(r, left, right);
      if (children == 2 && threads_ > 1 && left.end - left.begin >= kParallelLeaves &&
          right.end - right.begin >= kParallelLeaves) {
        tbb::parallel_invoke([&] { build(left); }, [&] { build(right); });
        continue;
      }
      if (children >= 1) stack.push(left);
      if (children == 2) stack.push(right);
    }
  }

 private:
  using Lanes = Eigen::Array4f;  // x, y, z and an ignored fourth lane

  // Loads of 4 floats from a box corner: min reads into max.x and max into
  // the proxy field, both inside the item; lane 3 is never used.
  static Lanes loadMin(const BuildItem& it) { return Eigen::Map<const Lanes>(it.box.min.data()); }
  static Lanes loadMax(const BuildItem& it) { return Eigen::Map<const Lanes>(it.box.max.data()); }
  static float area(const Lanes& lo, const Lanes& hi) {
    const Lanes d = hi - lo;
    return 2.0f * (d[0] * d[1] + d[1] * d[2] + d[2] * d[0]);
  }
  static Aabb toAabb(const Lanes& lo, const Lanes& hi) {
    return {Vec3(lo[0], lo[1], lo[2]), Vec3(hi[0], hi[1], hi[2])};
  }

  struct Bin {
    Lanes lo, hi;
    uint32_t count;
  };

  // Bin of a doubled centroid (min + max) on every axis: one vector
  // expression, used both to fill the bins and to partition, so the two agree.
  static Eigen::Array4i binsOf(const BuildItem& it, const Lanes& cmin, const Lanes& scale,
                               int bins) {
    const Lanes c = loadMin(it) + loadMax(it);
    return ((c - cmin) * scale).cast<int>().max(0).min(bins - 1);
  }

  // Splits r into two halves, fills node r.node, and returns the halves that
  // still need a node (0, 1 or 2 of left, right; a half of one leaf needs none).
  int split(const BuildRange& r, BuildRange& left, BuildRange& right) {
    BuildItem* items = buffers_[r.buffer];
    const uint32_t count = r.end - r.begin;

    Lanes cmin = Lanes::Constant(std::numeric_limits<float>::infinity());
    Lanes cmax = -cmin;
    for (uint32_t k = r.begin; k < r.end; ++k) {
      const Lanes c = loadMin(items[k]) + loadMax(items[k]);
      cmin = cmin.min(c);
      cmax = cmax.max(c);
    }
    // As many bins as items, up to kBins: the per-node cost of the bins
    // dominates the build otherwise, most nodes being small.
    const int nb = int(std::min<uint32_t>(kBins, count));
    Lanes scale = Lanes::Zero();
    bool splittable[3];
    for (int axis = 0; axis < 3; ++axis) {
      const float extent = cmax[axis] - cmin[axis];
      const float sc = float(nb) * 0.9999f / extent;
      splittable[axis] = extent > 0.0f && std::isfinite(sc);
      if (splittable[axis]) scale[axis] = sc;
    }

    int bestAxis = -1, bestSplit = 0;
    Aabb bestLeft, bestRight;
    if (count > 2 && (splittable[0] || splittable[1] || splittable[2])) {
      Bin bins[3][kBins];
      for (auto& axisBins : bins)
        for (int b = 0; b < nb; ++b) {
          axisBins[b].lo = Lanes::Constant(std::numeric_limits<float>::infinity());
          axisBins[b].hi = Lanes::Constant(-std::numeric_limits<float>::infinity());
          axisBins[b].count = 0;
        }
      for (uint32_t k = r.begin; k < r.end; ++k) {
        const Lanes lo = loadMin(items[k]), hi = loadMax(items[k]);
        const Eigen::Array4i b = binsOf(items[k], cmin, scale, nb);
        for (int axis = 0; axis < 3; ++axis) {
          Bin& bin = bins[axis][b[axis]];
          bin.lo = bin.lo.min(lo);
          bin.hi = bin.hi.max(hi);
          ++bin.count;
        }
      }
      float bestCost = std::numeric_limits<float>::infinity();
      for (int axis = 0; axis < 3; ++axis) {
        if (!splittable[axis]) continue;
        const Bin* bn = bins[axis];
        // Suffix boxes from the right, then a sweep from the left.
        Lanes rightLo[kBins], rightHi[kBins];
        Lanes lo = bn[nb - 1].lo, hi = bn[nb - 1].hi;
        for (int b = nb - 1; b > 0; --b) {
          lo = lo.min(bn[b].lo);
          hi = hi.max(bn[b].hi);
          rightLo[b] = lo;
          rightHi[b] = hi;
        }
        Lanes leftLo = bn[0].lo, leftHi = bn[0].hi;
        uint32_t leftCount = 0;
        for (int b = 1; b < nb; ++b) {
          leftLo = leftLo.min(bn[b - 1].lo);
          leftHi = leftHi.max(bn[b - 1].hi);
          leftCount += bn[b - 1].count;
          const uint32_t rightCount = count - leftCount;
          if (leftCount == 0 || rightCount == 0) continue;
          const float cost = area(leftLo, leftHi) * float(leftCount) +
                             area(rightLo[b], rightHi[b]) * float(rightCount);
          if (cost < bestCost) {
            bestCost = cost;
            bestAxis = axis;
            bestSplit = b;
            bestLeft = toAabb(leftLo, leftHi);
            bestRight = toAabb(rightLo[b], rightHi[b]);
          }
        }
      }
    }

    uint32_t mid;
    uint32_t buffer = r.buffer;
    if (bestAxis < 0) {
      // Two leaves, or every centroid in one point: split by count.
      mid = r.begin + count / 2;
      bestLeft = bestRight = Aabb::empty();
      for (uint32_t k = r.begin; k < mid; ++k) bestLeft = merge(bestLeft, items[k].box);
      for (uint32_t k = mid; k < r.end; ++k) bestRight = merge(bestRight, items[k].box);
    } else {
      // Out-of-place partition into the other array, left items from the
      // front and right items from the back: no data-dependent branch (an
      // in-place partition mispredicts on every other item).
      buffer = 1 - r.buffer;
      BuildItem* out = buffers_[buffer];
      uint32_t front = r.begin, back = r.end;
      for (uint32_t k = r.begin; k < r.end; ++k) {
        const bool goesLeft = binsOf(items[k], cmin, scale, nb)[bestAxis] < bestSplit;
        out[goesLeft ? front : back - 1] = items[k];
        front += goesLeft ? 1 : 0;
        back -= goesLeft ? 0 : 1;
      }
      mid = front;
      items = out;
    }

    BvhNode& node = nodes_[r.node];
    node.parent = r.parentRef;
    node.dirty = 0;
    const uint32_t leftCount = mid - r.begin;
    int children = 0;
    const uint32_t leftNode = r.node + 1;
    const uint32_t rightNode = r.node + leftCount;
    node.bounds[0] = bestLeft;
    node.bounds[1] = bestRight;
    if (leftCount == 1) {
      node.child[0] = makeBvhLeaf(items[r.begin].proxy);
      leafRef_[items[r.begin].proxy] = r.node << 1;
    } else {
      node.child[0] = leftNode;
      left = {r.begin, mid, leftNode, r.node << 1, buffer};
      ++children;
    }
    if (r.end - mid == 1) {
      node.child[1] = makeBvhLeaf(items[mid].proxy);
      leafRef_[items[mid].proxy] = (r.node << 1) | 1;
    } else {
      node.child[1] = rightNode;
      BuildRange& slot = children == 0 ? left : right;
      slot = {mid, r.end, rightNode, (r.node << 1) | 1, buffer};
      ++children;
    }
    return children;
  }

  std::vector<BuildItem> scratch_;
  BuildItem* buffers_[2];
  BvhNode* nodes_;
  std::vector<uint32_t>& leafRef_;
  int threads_;
};

}  // namespace

void Bvh::rebuildTree(BvhTree& tree, Scheduler& scheduler) {
  // The leaves in node order, then the pending inserts in arrival order: a
  // deterministic input, so a deterministic tree.
  std::vector<BuildItem> items;
  items.reserve(tree.leafCount + tree.pendingInserts.size());
  for (uint32_t n = 0; n < tree.nodes.size(); ++n) {
    const BvhNode& node = tree.nodes[n];
    if (node.parent == kBvhFreeNode) continue;
    for (int s = 0; s < 2; ++s)
      if (isBvhLeaf(node.child[s]) && node.child[s] != kBvhNullChild)
        items.push_back({leafBox(bvhLeafProxy(node.child[s])), bvhLeafProxy(node.child[s]), 0});
  }
  for (uint32_t p : tree.pendingInserts) items.push_back({leafBox(p), p, 0});
  for (uint32_t p : tree.moved) movedPos_[p] = kNullIndex;
  tree.moved.clear();
  tree.dirtyNodes.clear();
  tree.pendingInserts.clear();
  tree.freeNodes.clear();

  const uint32_t count = static_cast<uint32_t>(items.size());
  tree.leafCount = count;
  tree.insertsSinceBuild = 0;
  ++tree.rebuildCount;
  tree.wideValid = false;
  if (count == 0) {
    tree.nodes.clear();
    tree.root = kNullIndex;
  } else if (count == 1) {
    tree.nodes.resize(1);
    BvhNode& root = tree.nodes[0];
    root.bounds[0] = items[0].box;
    root.bounds[1] = Aabb::empty();
    root.child[0] = makeBvhLeaf(items[0].proxy);
    root.child[1] = kBvhNullChild;
    root.parent = kNullIndex;
    root.dirty = 0;
    leafRef_[items[0].proxy] = 0;
    tree.root = 0;
  } else {
    tree.nodes.resize(count - 1);
    tree.root = 0;
    Builder builder(items, tree, leafRef_, scheduler.threadCount());
    scheduler.run([&] { builder.build({0, count, 0, kNullIndex, 0}); });
  }
  tree.ordered = true;  // depth-first numbering, see the top of this file
  tree.cost = computeCost(tree, scheduler);
  tree.costAtBuild = tree.cost;
}

double Bvh::qualityRatio(Scheduler& scheduler) const {
  if (pending_ || trees_[0].leafCount < 2) return 1.0;
  // Build a copy of the dynamic tree from scratch and compare costs.
  Bvh fresh(config_);
  fresh.fat_ = fat_;
  fresh.exact_ = exact_;
  fresh.leafRef_ = leafRef_;
  fresh.movedPos_ = movedPos_;
  fresh.trees_[0] = trees_[0];
  fresh.rebuildTree(fresh.trees_[0], scheduler);
  return trees_[0].cost / fresh.trees_[0].cost;
}

}  // namespace bp
