// RayTree::build and refit: top-down binned SAH into 16-wide nodes.
//
// A node takes its items as one group and splits the group of the largest
// area in two (binned SAH over the centroids, 16 bins on each axis; on the
// widest axis only for groups past the caches) until it has kRayWidth groups
// or none is worth splitting (fill()); small groups that fit its free slots
// are opened into leaves. One-item groups become leaf slots, the others
// child nodes, allocated side by side. Groups of at most kJobItems
// below the top are built as separate jobs in parallel, each into a vector
// of its own, then appended in job order: the same tree for any thread
// count (kJobItems is a constant, not a function of the threads).
#include "raytree/ray_tree.h"

#include <algorithm>
#include <cmath>
#include <limits>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

namespace bp {

namespace {

constexpr int kBins = 16;
constexpr uint32_t kJobItems = 8192;
// Groups larger than this are binned on their widest axis only.
constexpr uint32_t kAllAxesItems = 1024;
constexpr float kInf = std::numeric_limits<float>::infinity();
// Past this depth a group is split at its median: SAH splits that peel off
// a few items at a time cannot make the tree deeper than the walk's stack
// expects for any input.
constexpr int kMaxSahDepth = 40;
// A group of at most kRayWidth items is split only if its parts that stay nodes
// have less than this fraction of its surface area (docs/decisions.md,
// "Rays": 1.0 made most nodes hold 2-4 leaves, never splitting lost on
// `sizes` and `plane`).
constexpr float kSmallSplitGain = 0.7f;

float halfArea(const Aabb& b) {
  const Vec3 e = b.max - b.min;
  return e.x() * e.y() + e.y() * e.z() + e.z() * e.x();
}

void setSlot(RayNode& node, int k, uint32_t child, const Aabb& box, uint32_t id = kRayEmpty) {
  node.child[k] = child;
  node.id[k] = id;
  for (int a = 0; a < 3; ++a) {
    node.box[a][k] = box.min[a];
    node.box[3 + a][k] = box.max[a];
  }
}

Aabb slotBox(const RayNode& node, int k) {
  return Aabb{Vec3(node.box[0][k], node.box[1][k], node.box[2][k]),
              Vec3(node.box[3][k], node.box[4][k], node.box[5][k])};
}

Aabb nodeBounds(const RayNode& node) {
  Aabb b = Aabb::empty();
  for (int k = 0; k < kRayWidth; ++k)
    if (node.child[k] != kRayEmpty) b = merge(b, slotBox(node, k));
  return b;
}

// Sum of the half areas of the root and of every box of a child node, over
// the root's: the nodes a ray through the root is expected to test.
double computeCost(const std::vector<RayNode>& nodes) {
  const double root = halfArea(nodeBounds(nodes[0]));
  if (!(root > 0.0) || !std::isfinite(root)) return 1.0;
  double sum = root;
  for (const RayNode& node : nodes)
    for (int k = 0; k < kRayWidth; ++k)
      if (node.child[k] != kRayEmpty && !(node.child[k] & kRayLeafBit))
        sum += halfArea(slotBox(node, k));
  return sum / root;
}

// Four-lane min and max (lane 3 of every Item and Bounds holds 0).
inline void minMax4(float* lo, float* hi, const float* itemLo, const float* itemHi) {
#if defined(__SSE2__)
  _mm_store_ps(lo, _mm_min_ps(_mm_load_ps(lo), _mm_load_ps(itemLo)));
  _mm_store_ps(hi, _mm_max_ps(_mm_load_ps(hi), _mm_load_ps(itemHi)));
#else
  for (int a = 0; a < 4; ++a) {
    lo[a] = std::min(lo[a], itemLo[a]);
    hi[a] = std::max(hi[a], itemHi[a]);
  }
#endif
}

// One box to place, moved as the groups are partitioned so that every pass
// over a group reads memory in order.
struct alignas(16) Item {
  float lo[4], hi[4];  // lane 3: 0
  uint32_t key, id, unused[2];
  float centre(int a) const { return lo[a] + hi[a]; }  // twice the centre
  Aabb box() const { return Aabb{Vec3(lo[0], lo[1], lo[2]), Vec3(hi[0], hi[1], hi[2])}; }
};
static_assert(sizeof(Item) == 48);

struct alignas(16) Bounds {
  float lo[4] = {kInf, kInf, kInf, 0.0f};
  float hi[4] = {-kInf, -kInf, -kInf, 0.0f};
  void grow(const Item& it) { minMax4(lo, hi, it.lo, it.hi); }
  void grow(const Bounds& b) { minMax4(lo, hi, b.lo, b.hi); }
  float halfArea() const {
    const float x = hi[0] - lo[0], y = hi[1] - lo[1], z = hi[2] - lo[2];
    return x * y + y * z + z * x;
  }
  Aabb box() const { return Aabb{Vec3(lo[0], lo[1], lo[2]), Vec3(hi[0], hi[1], hi[2])}; }
};

struct Group {
  uint32_t begin, end;
  Bounds bounds;   // of the items' boxes
  Bounds centres;  // of their centres (twice the centre, as Item::centre)
  uint32_t size() const { return end - begin; }
  void grow(const Item& it) {
    bounds.grow(it);
    for (int a = 0; a < 3; ++a) {
      centres.lo[a] = std::min(centres.lo[a], it.centre(a));
      centres.hi[a] = std::max(centres.hi[a], it.centre(a));
    }
  }
};

// The bin of an item on each axis, as binOf() in sahSplit, three at once:
// floor((centre - lowest centre) * scale) clamped to [0, last].
inline void binsOf(const Item& it, const float* lowest, const float* scale, const float* last,
                   int* bin) {
#if defined(__SSE2__)
  const __m128 centre = _mm_add_ps(_mm_load_ps(it.lo), _mm_load_ps(it.hi));
  __m128 f = _mm_mul_ps(_mm_sub_ps(centre, _mm_load_ps(lowest)), _mm_load_ps(scale));
  f = _mm_min_ps(_mm_max_ps(f, _mm_setzero_ps()), _mm_load_ps(last));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(bin), _mm_cvttps_epi32(f));
#else
  for (int a = 0; a < 3; ++a)
    bin[a] = int(std::min(std::max((it.centre(a) - lowest[a]) * scale[a], 0.0f), last[a]));
#endif
}

// Builds nodes over items[begin, end), appending to `out`.
struct Builder {
  std::vector<Item>& items;  // jobs rearrange disjoint ranges of it

  struct Job {
    Group items;
    uint32_t node;  // the slot to patch: child `slot` of node `node`
    int slot;
    int depth;
  };
  std::vector<Job>* jobs = nullptr;  // null: build everything here

  // Splits g in two non-empty groups, with their bounds.
  void split(const Group& g, int depth, Group& left, Group& right) {
    const Bounds& c = g.centres;
    int widest = 0;
    for (int a = 1; a < 3; ++a)
      if (c.hi[a] - c.lo[a] > c.hi[widest] - c.lo[widest]) widest = a;
    if (g.size() > 2 && c.hi[widest] > c.lo[widest] && depth <= kMaxSahDepth &&
        sahSplit(g, widest, left, right))
      return;
    // Two items, every centre equal, too deep, or no cut: halve, in order
    // or at the median of the widest axis.
    const uint32_t cut = g.begin + g.size() / 2;
    if (g.size() > 2 && c.hi[widest] > c.lo[widest])
      std::nth_element(items.data() + g.begin, items.data() + cut, items.data() + g.end,
                       [&](const Item& a, const Item& b) {
                         return a.centre(widest) < b.centre(widest) ||
                                (a.centre(widest) == b.centre(widest) && a.key < b.key);
                       });
    left = {g.begin, cut, {}, {}};
    right = {cut, g.end, {}, {}};
    for (uint32_t i = left.begin; i < left.end; ++i) left.grow(items[i]);
    for (uint32_t i = right.begin; i < right.end; ++i) right.grow(items[i]);
  }

  // Binned SAH: every axis for a group that fits the caches, the widest
  // only above that. Partitions the group and takes both parts' bounds
  // from the bins; false when no cut separates anything.
  bool sahSplit(const Group& g, int widest, Group& left, Group& right) {
    struct Bin {
      Bounds box;
      uint32_t count = 0;
    };
    const Bounds& c = g.centres;
    Bin bins[3][kBins];
    alignas(16) float scale[4] = {};
    const int binCount = int(std::min<uint32_t>(kBins, g.size()));  // small groups: fewer
    const int axisBegin = g.size() > kAllAxesItems ? widest : 0;
    const int axisEnd = g.size() > kAllAxesItems ? widest + 1 : 3;
    for (int a = 0; a < 3; ++a) {
      const float extent = c.hi[a] - c.lo[a];
      scale[a] = extent > 0.0f ? float(binCount) * (1.0f - 1e-6f) / extent : 0.0f;
    }
    const auto binOf = [&](const Item& it, int a) {
      return std::clamp(int((it.centre(a) - c.lo[a]) * scale[a]), 0, binCount - 1);
    };
    if (axisEnd - axisBegin == 3) {
      alignas(16) const float last[4] = {float(binCount - 1), float(binCount - 1),
                                         float(binCount - 1), 0.0f};
      for (uint32_t i = g.begin; i < g.end; ++i) {
        const Item& it = items[i];
        int bin[4];
        binsOf(it, c.lo, scale, last, bin);
        for (int a = 0; a < 3; ++a) {
          bins[a][bin[a]].box.grow(it);
          ++bins[a][bin[a]].count;
        }
      }
    } else {
      for (uint32_t i = g.begin; i < g.end; ++i) {
        const Item& it = items[i];
        Bin& bin = bins[widest][binOf(it, widest)];
        bin.box.grow(it);
        ++bin.count;
      }
    }
    float bestCost = kInf;
    int bestAxis = -1, bestBin = 0;
    for (int a = axisBegin; a < axisEnd; ++a) {
      if (!(c.hi[a] > c.lo[a])) continue;
      float rightCost[kBins];
      Bounds acc;
      uint32_t count = 0;
      for (int b = binCount - 1; b > 0; --b) {
        acc.grow(bins[a][b].box);
        count += bins[a][b].count;
        rightCost[b] = count ? acc.halfArea() * float(count) : 0.0f;
      }
      acc = Bounds{};
      count = 0;
      for (int b = 0; b < binCount - 1; ++b) {
        acc.grow(bins[a][b].box);
        count += bins[a][b].count;
        if (count == 0 || count == g.size()) continue;
        const float cost = acc.halfArea() * float(count) + rightCost[b + 1];
        if (cost < bestCost) {
          bestCost = cost;
          bestAxis = a;
          bestBin = b;
        }
      }
    }
    if (bestAxis < 0) return false;
    const Item* cut =
        std::partition(items.data() + g.begin, items.data() + g.end,
                       [&](const Item& it) { return binOf(it, bestAxis) <= bestBin; });
    // The parts' centres: the group's, cut at the bin boundary on the
    // split axis (a bound, not the tightest: binning needs no more).
    left = {g.begin, uint32_t(cut - items.data()), {}, c};
    right = {left.end, g.end, {}, c};
    const float boundary = c.lo[bestAxis] + float(bestBin + 1) / scale[bestAxis];
    left.centres.hi[bestAxis] = std::min(c.hi[bestAxis], boundary);
    right.centres.lo[bestAxis] = std::max(c.lo[bestAxis], std::min(boundary, c.hi[bestAxis]));
    for (int b = 0; b < binCount; ++b)
      (b <= bestBin ? left : right).bounds.grow(bins[bestAxis][b].box);
    return true;
  }

  // Fills node `self` of `out` over g (more than one item). Groups are
  // split, the largest surface area first, until the node has kRayWidth
  // groups or none is worth splitting: a group of more than kRayWidth items
  // always is, a smaller one only when its parts clearly cost a ray less (a
  // node test covers every slot, so a node of 2 leaves costs a ray what one
  // of 16 does). Then, while slots are free, the group of the largest area
  // that fits them is opened into its leaves. Every other group of at most
  // kRayWidth items becomes a child node of leaves only.
  void fill(std::vector<RayNode>& out, uint32_t self, const Group& g, int depth) {
    Group groups[kRayWidth] = {g};
    int count = 1;
    const auto largestOf = [&](auto&& eligible) {
      int largest = -1;
      for (int k = 0; k < count; ++k)
        if (eligible(groups[k]) &&
            (largest < 0 || groups[k].bounds.halfArea() > groups[largest].bounds.halfArea()))
          largest = k;
      return largest;
    };
    // A small group is split only when its parts' nodes cost a ray clearly
    // less than its own one node: the area of the parts that stay nodes (two
    // or more items) under kSmallSplitGain of the group's. The trial split
    // is kept for when it is chosen (it only reorders the group's items).
    struct Trial {
      bool done = false, worth = false;
      Group left, right;
    } trials[kRayWidth];
    const auto splitPays = [&](int k) {
      Trial& t = trials[k];
      if (!t.done) {
        t.done = true;
        split(groups[k], depth, t.left, t.right);
        const auto nodeArea = [](const Group& p) {
          return p.size() > 1 ? p.bounds.halfArea() : 0.0f;
        };
        t.worth =
            nodeArea(t.left) + nodeArea(t.right) < kSmallSplitGain * groups[k].bounds.halfArea();
      }
      return t.worth;
    };
    while (count < kRayWidth) {
      int largest = -1;
      for (int k = 0; k < count; ++k) {
        const Group& gk = groups[k];
        if (gk.size() < 2 ||
            (largest >= 0 && !(gk.bounds.halfArea() > groups[largest].bounds.halfArea())))
          continue;
        if (gk.size() > kRayWidth || splitPays(k)) largest = k;
      }
      if (largest < 0) break;
      Trial& t = trials[largest];
      if (t.done) {
        groups[largest] = t.left;
        groups[count] = t.right;
      } else {
        const Group whole = groups[largest];
        split(whole, depth, groups[largest], groups[count]);
      }
      t = Trial{};
      ++count;
    }
    // Open small groups into leaf slots while they fit: a group of s items
    // becomes s one-item groups, taking s - 1 more slots.
    for (;;) {
      const int free = kRayWidth - count;
      const int largest =
          largestOf([&](const Group& gk) { return gk.size() > 1 && int(gk.size()) - 1 <= free; });
      if (largest < 0) break;
      const Group open = groups[largest];
      groups[largest] = {open.begin, open.begin + 1, {}, {}};
      for (uint32_t i = open.begin + 1; i < open.end; ++i) groups[count++] = {i, i + 1, {}, {}};
    }
    // The child nodes side by side, after every node made so far; a group
    // left to a job gets its node when the jobs are appended.
    const auto isJob = [&](const Group& gk) { return jobs && gk.size() <= kJobItems; };
    int childNodes = 0;
    for (int k = 0; k < count; ++k) childNodes += groups[k].size() > 1 && !isJob(groups[k]);
    uint32_t next = uint32_t(out.size());
    out.resize(out.size() + childNodes);
    RayNode& node = out[self];
    for (int k = count; k < kRayWidth; ++k) setSlot(node, k, kRayEmpty, Aabb::empty());
    struct Pending {
      uint32_t node;
      Group items;
    } pending[kRayWidth];
    int pendingCount = 0;
    for (int k = 0; k < count; ++k) {
      const Group& gk = groups[k];
      if (gk.size() == 1) {
        const Item& it = items[gk.begin];
        setSlot(node, k, kRayLeafBit | it.key, it.box(), it.id);
      } else if (isJob(gk)) {
        setSlot(node, k, kRayEmpty, gk.bounds.box());  // the job sets the child
        jobs->push_back({gk, self, k, depth + 1});
      } else {
        setSlot(node, k, next, gk.bounds.box());
        pending[pendingCount++] = {next++, gk};
      }
    }
    for (int k = 0; k < pendingCount; ++k) fill(out, pending[k].node, pending[k].items, depth + 1);
  }
};

}  // namespace

void RayTree::clear() {
  nodes_.clear();
  leafCount_ = 0;
  cost_ = 0;
}

void RayTree::build(Scheduler* scheduler, std::span<const Aabb> boxes,
                    std::span<const uint32_t> keys, std::span<const uint32_t> ids) {
  const auto forEach = [&](uint32_t count, uint32_t grain, auto&& body) {
    if (scheduler)
      scheduler->forEach(0, count, grain, body);
    else
      body(0u, count);
  };
  clear();
  const uint32_t n = uint32_t(boxes.size());
  leafCount_ = n;
  nodes_.resize(1);
  for (int k = 0; k < kRayWidth; ++k) setSlot(nodes_[0], k, kRayEmpty, Aabb::empty());
  if (n == 1) setSlot(nodes_[0], 0, kRayLeafBit | keys[0], boxes[0], ids[0]);
  if (n <= 1) return;
  std::vector<Item> items(n);
  forEach(n, 16384, [&](uint32_t begin, uint32_t end) {
    for (uint32_t i = begin; i < end; ++i) {
      Item& it = items[i];
      for (int a = 0; a < 3; ++a) {
        it.lo[a] = boxes[i].min[a];
        it.hi[a] = boxes[i].max[a];
      }
      it.lo[3] = it.hi[3] = 0.0f;
      it.key = keys[i];
      it.id = ids[i];
    }
  });
  Group all{0, n, {}, {}};
  for (const Item& it : items) all.grow(it);
  std::vector<Builder::Job> jobs;
  Builder top{items, n > 2 * kJobItems ? &jobs : nullptr};
  top.fill(nodes_, 0, all, 0);
  // The jobs: each into a vector of its own (its root at 0), then appended
  // in job order with their node indices offset.
  std::vector<std::vector<RayNode>> built(jobs.size());
  forEach(uint32_t(jobs.size()), 1, [&](uint32_t begin, uint32_t end) {
    for (uint32_t j = begin; j < end; ++j) {
      Builder sub{items, nullptr};
      built[j].reserve(jobs[j].items.size() / 2);
      built[j].resize(1);
      sub.fill(built[j], 0, jobs[j].items, jobs[j].depth);
    }
  });
  size_t total = nodes_.size();
  for (const auto& b : built) total += b.size();
  nodes_.reserve(total);
  for (size_t j = 0; j < jobs.size(); ++j) {
    const uint32_t offset = uint32_t(nodes_.size());
    nodes_[jobs[j].node].child[jobs[j].slot] = offset;
    for (RayNode node : built[j]) {
      for (uint32_t& c : node.child)
        if (c != kRayEmpty && !(c & kRayLeafBit)) c += offset;
      nodes_.push_back(node);
    }
  }
  cost_ = computeCost(nodes_);
}

void RayTree::refit(FunctionRef<Aabb(uint32_t key, uint32_t& id)> leafOf) {
  for (size_t i = nodes_.size(); i-- > 0;) {
    RayNode& node = nodes_[i];
    for (int k = 0; k < kRayWidth; ++k) {
      const uint32_t c = node.child[k];
      if (c == kRayEmpty) continue;
      uint32_t id = node.id[k];
      const Aabb box = (c & kRayLeafBit) ? leafOf(c & ~kRayLeafBit, id) : nodeBounds(nodes_[c]);
      setSlot(node, k, c, box, id);
    }
  }
  cost_ = computeCost(nodes_);
}

std::string RayTree::validate() const {
  if (nodes_.empty()) return leafCount_ == 0 ? std::string() : "no nodes but leaves";
  uint32_t leaves = 0;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const RayNode& node = nodes_[i];
    for (int k = 0; k < kRayWidth; ++k) {
      const uint32_t c = node.child[k];
      const Aabb box = slotBox(node, k);
      if (c == kRayEmpty) {
        if (!(box.min.x() > box.max.x())) return "an empty slot with a box";
        continue;
      }
      if (c & kRayLeafBit) {
        ++leaves;
        continue;
      }
      if (c <= i || c >= nodes_.size())
        return "node " + std::to_string(i) + " has child " + std::to_string(c);
      const Aabb inner = nodeBounds(nodes_[c]);
      if (!(inner.min == box.min && inner.max == box.max))
        return "node " + std::to_string(i) + " slot " + std::to_string(k) +
               " is not its child's bounds";
    }
  }
  if (leaves != leafCount_)
    return std::to_string(leaves) + " leaves, " + std::to_string(leafCount_) + " given";
  return {};
}

}  // namespace bp
