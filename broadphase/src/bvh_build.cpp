// Full rebuild of one tree with a binned SAH builder, in parallel tasks.
//
// Node numbering is fixed by the leaf counts alone: a node built over k
// leaves at index i puts its left subtree (kl leaves, kl - 1 nodes) at
// i + 1 ... i + kl - 1 and its right child at i + kl. So the nodes come out
// in depth-first order (a refit and a traversal walk memory forward), and the
// result is identical whichever thread builds which subtree.
#include <broadphase/bvh.h>
#include <broadphase/bvh_stack.h>

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
};

struct Bin {
  Aabb box = Aabb::empty();
  uint32_t count = 0;
};

class Builder {
 public:
  Builder(std::vector<BuildItem>& items, BvhTree& tree, std::vector<uint32_t>& leafRef, int threads)
      : items_(items), nodes_(tree.nodes.data()), leafRef_(leafRef), threads_(threads) {}

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
  // Centroids are compared doubled (min + max) to skip the multiply.
  static float centroid(const Aabb& b, int axis) { return b.min[axis] + b.max[axis]; }

  // Splits r into two halves, fills node r.node, and returns the halves that
  // still need a node (0, 1 or 2 of left, right; a half of one leaf needs none).
  int split(const BuildRange& r, BuildRange& left, BuildRange& right) {
    BuildItem* items = items_.data();
    const uint32_t count = r.end - r.begin;

    Vec3 cmin(std::numeric_limits<float>::infinity(), std::numeric_limits<float>::infinity(),
              std::numeric_limits<float>::infinity());
    Vec3 cmax = -cmin;
    for (uint32_t k = r.begin; k < r.end; ++k) {
      const Vec3 c = items[k].box.min + items[k].box.max;
      cmin = cmin.cwiseMin(c);
      cmax = cmax.cwiseMax(c);
    }

    int bestAxis = -1, bestSplit = 0;
    float bestCost = std::numeric_limits<float>::infinity();
    Aabb bestLeft, bestRight;
    float scale[3];
    for (int axis = 0; axis < 3; ++axis) {
      const float extent = cmax[axis] - cmin[axis];
      scale[axis] = extent > 0.0f ? float(kBins) * 0.9999f / extent : 0.0f;
      if (!(extent > 0.0f) || !std::isfinite(scale[axis])) continue;
      Bin bins[kBins];
      for (uint32_t k = r.begin; k < r.end; ++k) {
        const int b = binOf(items[k].box, axis, cmin[axis], scale[axis]);
        bins[b].box = merge(bins[b].box, items[k].box);
        ++bins[b].count;
      }
      // Sweep from the right for suffix areas, then from the left.
      float rightArea[kBins];
      Aabb rightBox[kBins];
      Aabb acc = Aabb::empty();
      for (int b = kBins - 1; b > 0; --b) {
        acc = merge(acc, bins[b].box);
        rightBox[b] = acc;
        rightArea[b] = surfaceArea(acc);
      }
      Aabb leftAcc = Aabb::empty();
      uint32_t leftCount = 0;
      for (int b = 1; b < kBins; ++b) {
        leftAcc = merge(leftAcc, bins[b - 1].box);
        leftCount += bins[b - 1].count;
        const uint32_t rightCount = count - leftCount;
        if (leftCount == 0 || rightCount == 0) continue;
        const float cost =
            surfaceArea(leftAcc) * float(leftCount) + rightArea[b] * float(rightCount);
        if (cost < bestCost) {
          bestCost = cost;
          bestAxis = axis;
          bestSplit = b;
          bestLeft = leftAcc;
          bestRight = rightBox[b];
        }
      }
    }

    uint32_t mid;
    if (bestAxis < 0) {
      // Every centroid in one point: split by count.
      mid = r.begin + count / 2;
      bestLeft = bestRight = Aabb::empty();
      for (uint32_t k = r.begin; k < mid; ++k) bestLeft = merge(bestLeft, items[k].box);
      for (uint32_t k = mid; k < r.end; ++k) bestRight = merge(bestRight, items[k].box);
    } else {
      const float lo = cmin[bestAxis], s = scale[bestAxis];
      BuildItem* m = std::partition(items + r.begin, items + r.end, [&](const BuildItem& it) {
        return binOf(it.box, bestAxis, lo, s) < bestSplit;
      });
      mid = static_cast<uint32_t>(m - items);
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
      left = {r.begin, mid, leftNode, r.node << 1};
      ++children;
    }
    if (r.end - mid == 1) {
      node.child[1] = makeBvhLeaf(items[mid].proxy);
      leafRef_[items[mid].proxy] = (r.node << 1) | 1;
    } else {
      node.child[1] = rightNode;
      BuildRange& slot = children == 0 ? left : right;
      slot = {mid, r.end, rightNode, (r.node << 1) | 1};
      ++children;
    }
    return children;
  }

  static int binOf(const Aabb& box, int axis, float lo, float scale) {
    const int b = int((centroid(box, axis) - lo) * scale);
    return std::clamp(b, 0, kBins - 1);
  }

  std::vector<BuildItem>& items_;
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
        items.push_back({fat_[bvhLeafProxy(node.child[s])], bvhLeafProxy(node.child[s]), 0});
  }
  for (uint32_t p : tree.pendingInserts) items.push_back({fat_[p], p, 0});
  for (uint32_t p : tree.moved) movedPos_[p] = kNullIndex;
  tree.moved.clear();
  tree.dirtyNodes.clear();
  tree.pendingInserts.clear();
  tree.freeNodes.clear();

  const uint32_t count = static_cast<uint32_t>(items.size());
  tree.leafCount = count;
  tree.insertsSinceBuild = 0;
  ++tree.rebuildCount;
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
    scheduler.run([&] { builder.build({0, count, 0, kNullIndex}); });
  }
  tree.cost = computeCost(tree, scheduler);
  tree.costAtBuild = tree.cost;
}

double Bvh::qualityRatio(Scheduler& scheduler) const {
  if (pending_ || dynamic_.leafCount < 2) return 1.0;
  // Build a copy of the dynamic tree from scratch and compare costs.
  Bvh fresh(config_);
  fresh.fat_ = fat_;
  fresh.leafRef_ = leafRef_;
  fresh.movedPos_ = movedPos_;
  fresh.dynamic_ = dynamic_;
  fresh.rebuildTree(fresh.dynamic_, scheduler);
  return dynamic_.cost / fresh.dynamic_.cost;
}

}  // namespace bp
