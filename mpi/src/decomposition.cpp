// Recursive coordinate bisection. Every rank builds the tree from the same
// gathered points in the same order, so the cuts (and every ownership
// answer) agree bit for bit across ranks: nothing here depends on threads,
// addresses or hash order.
#include <broadphase/mpi/decomposition.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace bp::mpi {

namespace {

constexpr float kInfinity = std::numeric_limits<float>::infinity();

Region allSpace() {
  return {Vec3(-kInfinity, -kInfinity, -kInfinity), Vec3(kInfinity, kInfinity, kInfinity)};
}

// A cut for a node without points: the middle of a finite side, the finite
// bound of a half-infinite one, 0 otherwise. Any value is correct (every
// point still has one owner); these keep the placeholder regions simple.
float emptyCut(const Region& region, int axis) {
  const float lo = region.lo[axis];
  const float hi = region.hi[axis];
  if (std::isfinite(lo) && std::isfinite(hi)) return 0.5f * (lo + hi);
  if (std::isfinite(lo)) return lo;
  if (std::isfinite(hi)) return hi;
  return 0.0f;
}

}  // namespace

struct Decomposition::Builder {
  Decomposition& out;
  std::span<const Vec3> points;
  std::span<const double> weights;
  std::vector<uint32_t> order;  // point indices; each node owns a contiguous range

  // Builds the subtree of ranks [r0, r1) over order[begin, end), all of
  // whose points lie in `region`.
  void node(int r0, int r1, uint32_t begin, uint32_t end, const Region& region, int depth) {
    const size_t self = out.nodes_.size();
    out.nodes_.push_back({});
    if (r1 - r0 == 1) {
      out.nodes_[self].second = -1 - r0;
      out.regions_[size_t(r0)] = region;
      return;
    }
    const int firstRanks = (r1 - r0) / 2;
    Node cut;
    if (begin == end) {
      cut.axis = uint8_t(depth % 3);
      cut.split = emptyCut(region, cut.axis);
    } else {
      cut = balancedCut(begin, end, double(firstRanks) / double(r1 - r0));
    }
    const int axis = cut.axis;
    // Stable, so each child's points keep the gathered order.
    const auto mid = std::stable_partition(order.begin() + begin, order.begin() + end,
                                           [&](uint32_t i) { return points[i][axis] < cut.split; });
    const uint32_t split = uint32_t(mid - order.begin());
    Region first = region;
    Region second = region;
    first.hi[axis] = cut.split;
    second.lo[axis] = cut.split;
    out.nodes_[self].axis = cut.axis;
    out.nodes_[self].split = cut.split;
    node(r0, r0 + firstRanks, begin, split, first, depth + 1);
    out.nodes_[self].second = int32_t(out.nodes_.size());
    node(r0 + firstRanks, r1, split, end, second, depth + 1);
  }

  // The cut along the axis of widest spread whose first side holds the
  // weight closest to `share` of the node's weight. Candidate cuts lie
  // between two distinct coordinates (halfway) or at either end.
  Node balancedCut(uint32_t begin, uint32_t end, double share) {
    Vec3 lo = points[order[begin]];
    Vec3 hi = lo;
    for (uint32_t k = begin; k < end; ++k) {
      lo = lo.cwiseMin(points[order[k]]);
      hi = hi.cwiseMax(points[order[k]]);
    }
    const Vec3 spread = hi - lo;
    int axis = 0;
    if (spread.y() > spread[axis]) axis = 1;
    if (spread.z() > spread[axis]) axis = 2;
    std::sort(order.begin() + begin, order.begin() + end, [&](uint32_t i, uint32_t j) {
      const float a = points[i][axis];
      const float b = points[j][axis];
      return a < b || (a == b && i < j);
    });
    double total = 0;
    for (uint32_t k = begin; k < end; ++k) total += weights[order[k]];
    const double target = total * share;

    // Boundary k: points [begin, k) on the first side.
    float bestSplit = points[order[begin]][axis];  // k = begin: everything second
    double bestGap = target;
    double before = 0;
    for (uint32_t k = begin + 1; k <= end; ++k) {
      before += weights[order[k - 1]];
      const float a = points[order[k - 1]][axis];
      if (k < end && points[order[k]][axis] == a) continue;  // cannot separate equal values
      float split;
      if (k == end) {
        split = std::nextafter(a, kInfinity);
      } else {
        const float b = points[order[k]][axis];
        split = 0.5f * (a + b);
        if (!(a < split)) split = b;  // adjacent floats: the midpoint rounds onto a
      }
      const double gap = std::fabs(before - target);
      if (gap < bestGap) {
        bestGap = gap;
        bestSplit = split;
      }
    }
    Node cut;
    cut.axis = uint8_t(axis);
    cut.split = bestSplit;
    return cut;
  }
};

Decomposition::Decomposition(int ranks) : ranks_(std::max(ranks, 1)) {
  regions_.resize(size_t(ranks_));
  Builder b{*this, {}, {}, {}};
  b.node(0, ranks_, 0, 0, allSpace(), 0);
}

Decomposition Decomposition::build(int ranks, std::span<const Vec3> points,
                                   std::span<const double> weights) {
  Decomposition d(ranks);
  d.nodes_.clear();
  Builder b{d, points, weights, std::vector<uint32_t>(points.size())};
  std::iota(b.order.begin(), b.order.end(), 0u);
  b.node(0, d.ranks_, 0, uint32_t(points.size()), allSpace(), 0);
  return d;
}

int Decomposition::ownerOf(const Vec3& point) const {
  int32_t n = 0;
  while (nodes_[size_t(n)].second >= 0) {
    const Node& node = nodes_[size_t(n)];
    n = point[node.axis] < node.split ? n + 1 : node.second;
  }
  return -1 - nodes_[size_t(n)].second;
}

void Decomposition::ranksTouching(const Aabb& box, std::vector<int>& out) const {
  out.clear();
  // Depth is log2(ranks); a fixed stack covers any int rank count.
  int32_t stack[64];
  int top = 0;
  stack[top++] = 0;
  while (top > 0) {
    const Node& node = nodes_[size_t(stack[--top])];
    if (node.second < 0) {
      out.push_back(-1 - node.second);
      continue;
    }
    const int32_t self = int32_t(&node - nodes_.data());
    // Second child pushed first, so the first child (lower ranks) pops first
    // and the ranks come out ascending.
    if (box.max[node.axis] >= node.split) stack[top++] = node.second;
    if (box.min[node.axis] < node.split) stack[top++] = self + 1;
  }
}

}  // namespace bp::mpi
