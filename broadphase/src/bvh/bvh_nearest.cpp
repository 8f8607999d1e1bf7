// nearest: k nearest proxies to a point by best-first search over both trees.
//
// Nodes wait in a min-heap keyed by the squared distance from the point to
// their box; the k best proxies so far sit in a max-heap (worst on top). A
// node farther than the current k-th proxy cannot hold a better one: the fat
// box is never farther than the exact boxes inside it. Equal distances are
// still explored, since a tie is broken by the lower proxy index.
#include <broadphase/error.h>
#include "bvh/bvh.h"

#include "common/nearest_heap.h"
#include "common/report_error.h"

#include <algorithm>

namespace bp {

namespace {

struct NodeEntry {
  float distanceSquared;
  uint32_t node;
  uint32_t tree;  // index in Bvh::trees_
};

bool fartherEntry(const NodeEntry& x, const NodeEntry& y) {
  return x.distanceSquared > y.distanceSquared;
}

}  // namespace

void Bvh::nearest(const Vec3& point, uint32_t k, std::vector<Neighbour>& out,
                  uint64_t* visited) const {
  out.clear();
  if (!checkNoPending("nearest")) return;
  if (k == 0) {
    reportError(ErrorCode::invalidArgument, "Bvh::nearest: k must be > 0");
    return;
  }
  if (!isFinite(point)) {
    reportError(ErrorCode::invalidArgument, "Bvh::nearest: the point is not finite");
    return;
  }

  const BvhTree* trees = trees_.data();
  std::vector<NodeEntry> open;
  for (uint32_t t = 0; t < trees_.size(); ++t)
    if (trees[t].root != kNullIndex) open.push_back({0.0f, trees[t].root, t});
  std::make_heap(open.begin(), open.end(), fartherEntry);

  // `out` is the max-heap of the best k so far (worst on top by neighbourBefore).
  auto full = [&] { return out.size() == k; };
  uint64_t popped = 0;
  while (!open.empty()) {
    ++popped;
    std::pop_heap(open.begin(), open.end(), fartherEntry);
    const NodeEntry e = open.back();
    open.pop_back();
    if (full() && e.distanceSquared > out.front().distanceSquared) break;
    const BvhNode& node = trees[e.tree].nodes[e.node];
    for (int s = 0; s < 2; ++s) {
      const uint32_t c = node.child[s];
      if (c == kBvhNullChild) continue;
      const float d = distanceSquared(node.bounds[s], point);
      if (full() && d > out.front().distanceSquared) continue;
      if (!isBvhLeaf(c)) {
        open.push_back({d, c, e.tree});
        std::push_heap(open.begin(), open.end(), fartherEntry);
        continue;
      }
      keepNearest(out, k, {bvhLeafProxy(c), distanceSquared(exact_[bvhLeafProxy(c)], point)});
    }
  }
  std::sort(out.begin(), out.end(), neighbourBefore);
  if (visited) *visited += popped;
}

}  // namespace bp
