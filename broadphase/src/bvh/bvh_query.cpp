// Box, point and ray queries. Both trees are walked with an explicit stack
// (BvhStack: grows, never truncates). Fat boxes in the nodes only prune; every
// answer is decided on the exact boxes, with the same arithmetic as the
// brute-force oracle so that distances agree to the bit.
#include <broadphase/error.h>
#include "bvh/bvh.h"
#include "bvh/bvh_stack.h"

#include "common/ray_order.h"
#include "common/report_error.h"

#include <algorithm>

namespace bp {

namespace {

// Reports a bad ray (false then).
bool checkRay(const Ray& ray, const char* operation) {
  const std::string why = describeInvalidRay(ray.origin, ray.direction, ray.maxT);
  if (why.empty()) return true;
  reportError(ErrorCode::invalidRay, std::string("Bvh::") + operation + ": " + why);
  return false;
}

constexpr uint32_t kMortonOrderRays = 4096;
constexpr size_t kMortonOrderNodes = 32768;  // 2 MB of nodes

enum class RayMode { closest, any, all, callback };

struct RayEntry {
  uint32_t node;
  float tEntry;
};
static_assert(sizeof(RayEntry) == 8, "stack entries stay small");

// The state of one ray (or swept box) walking both trees. `grow` enlarges
// every box tested (zero for a ray, the half extent for castBox).
struct RayWalk {
  const Ray& ray;
  Vec3 grow;
  RayMode mode;
  const Aabb* exact;
  float tMax;  // current reach: shrinks with closest hits and callback clips
  RayHit best;
  std::vector<RayHit>* all = nullptr;
  RayCallback* callback = nullptr;
  bool stopped = false;
  bool grown = false;
  bool negative[3] = {ray.invDirection.x() < 0.0f, ray.invDirection.y() < 0.0f,
                      ray.invDirection.z() < 0.0f};

  // intersectRayAabb() with the near and far planes chosen once per ray by
  // the sign of each direction component instead of a swap per box: the same
  // arithmetic (so the same bits, NaN rules included), without branches.
  bool slab(const Aabb& box, float limit, float& t) const {
    float tMin = 0.0f, tMaxBox = limit;
    for (int axis = 0; axis < 3; ++axis) {
      float nearPlane = negative[axis] ? box.max[axis] : box.min[axis];
      float farPlane = negative[axis] ? box.min[axis] : box.max[axis];
      if (grown) {
        nearPlane = negative[axis] ? box.max[axis] + grow[axis] : box.min[axis] - grow[axis];
        farPlane = negative[axis] ? box.min[axis] - grow[axis] : box.max[axis] + grow[axis];
      }
      const float inv = ray.invDirection[axis];
      const float tNear = (nearPlane - ray.origin[axis]) * inv;
      const float tFar = (farPlane - ray.origin[axis]) * inv;
      tMin = tNear > tMin ? tNear : tMin;
      tMaxBox = tFar < tMaxBox ? tFar : tMaxBox;
    }
    t = tMin;
    return tMin <= tMaxBox;
  }

  // The exact test, identical to brute::castRayClosest / brute::castBox.
  void visitLeaf(uint32_t proxy) {
    float t;
    if (!slab(exact[proxy], ray.maxT, t)) return;
    const RayHit hit{proxy, t};
    switch (mode) {
      case RayMode::closest:
        if (!best.hit() || hitBefore(hit, best)) {
          best = hit;
          tMax = t;
        }
        break;
      case RayMode::any:
        best = hit;
        stopped = true;
        break;
      case RayMode::all: all->push_back(hit); break;
      case RayMode::callback:
        if (t <= tMax) {
          const float reach = (*callback)(proxy, t);
          if (reach < 0.0f)
            stopped = true;
          else if (reach < tMax)
            tMax = reach;
        }
        break;
    }
  }

  // Near child first: of two internal children hit, the farther waits on the
  // stack and the walk continues into the nearer one.
  void walk(const BvhTree& tree, BvhStack<RayEntry>& stack) {
    if (tree.root == kNullIndex || stopped) return;
    const BvhNode* nodes = tree.nodes.data();
    stack.clear();
    stack.push({tree.root, 0.0f});
    while (!stack.empty()) {
      const RayEntry e = stack.pop();
      if (e.tEntry > tMax) continue;
      uint32_t n = e.node;
      for (;;) {
        const BvhNode& node = nodes[n];
        float t[2];
        bool hit[2];
        for (int s = 0; s < 2; ++s) hit[s] = slab(node.bounds[s], tMax, t[s]);
        uint32_t next[2];
        float nextT[2];
        int count = 0;
        for (int s = 0; s < 2; ++s) {
          if (!hit[s]) continue;
          if (isBvhLeaf(node.child[s])) {
            visitLeaf(bvhLeafProxy(node.child[s]));
            if (stopped) return;
          } else {
            next[count] = node.child[s];
            nextT[count] = t[s];
            ++count;
          }
        }
        if (count == 0) break;
        if (count == 2) {
          const int nearer = nextT[1] < nextT[0] ? 1 : 0;
          stack.push({next[1 - nearer], nextT[1 - nearer]});
          n = next[nearer];
          if (nextT[nearer] > tMax) break;
        } else {
          if (nextT[0] > tMax) break;
          n = next[0];
        }
      }
    }
  }
};

}  // namespace

namespace {

// Every leaf of both trees whose node bounds and exact box pass `test`, to
// `callback` until it returns false. Shared by the box and point queries.
template <class Test>
void walkOverlaps(const std::vector<BvhTree>& trees, const Aabb* exact, Test&& test,
                  OverlapCallback callback) {
  BvhStack<uint32_t> stack;
  for (const BvhTree& t : trees) {
    const BvhTree* tree = &t;
    if (tree->root == kNullIndex) continue;
    stack.clear();
    stack.push(tree->root);
    while (!stack.empty()) {
      const BvhNode& node = tree->nodes[stack.pop()];
      for (int s = 0; s < 2; ++s) {
        if (!test(node.bounds[s])) continue;
        const uint32_t c = node.child[s];
        if (!isBvhLeaf(c)) {
          stack.push(c);
        } else if (test(exact[bvhLeafProxy(c)])) {
          if (!callback(bvhLeafProxy(c))) return;
        }
      }
    }
  }
}

}  // namespace

void Bvh::queryBox(const Aabb& box, OverlapCallback callback) const {
  if (!checkNoPending("queryBox")) return;
  if (!isValid(box)) {
    reportError(ErrorCode::invalidBox, "Bvh::queryBox: " + describeInvalid(box));
    return;
  }
  walkOverlaps(
      trees_, exact_.data(), [&](const Aabb& b) { return overlaps(b, box); }, callback);
}

void Bvh::queryPoint(const Vec3& point, OverlapCallback callback) const {
  if (!checkNoPending("queryPoint")) return;
  if (!isFinite(point)) {
    reportError(ErrorCode::invalidArgument, "Bvh::queryPoint: the point is not finite");
    return;
  }
  walkOverlaps(
      trees_, exact_.data(), [&](const Aabb& b) { return containsPoint(b, point); }, callback);
}

RayHit Bvh::castRayUnchecked(const Ray& ray, RayQuery kind) const {
  RayWalk w{ray,           Vec3::Zero(), kind == RayQuery::any ? RayMode::any : RayMode::closest,
            exact_.data(), ray.maxT,     {}};
  BvhStack<RayEntry> stack;
  for (const BvhTree& tree : trees_) w.walk(tree, stack);
  return w.best;
}

RayHit Bvh::castRay(const Ray& ray, RayQuery kind) const {
  if (!checkNoPending("castRay") || !checkRay(ray, "castRay")) return RayHit{};
  if (kind == RayQuery::all) {
    reportError(ErrorCode::invalidArgument, "Bvh::castRay: use castRayAll for RayQuery::all");
    return RayHit{};
  }
  return castRayUnchecked(ray, kind);
}

void Bvh::castRayAll(const Ray& ray, std::vector<RayHit>& out) const {
  out.clear();
  if (!checkNoPending("castRayAll") || !checkRay(ray, "castRayAll")) return;
  RayWalk w{ray, Vec3::Zero(), RayMode::all, exact_.data(), ray.maxT, {}};
  w.all = &out;
  BvhStack<RayEntry> stack;
  for (const BvhTree& tree : trees_) w.walk(tree, stack);
  std::sort(out.begin(), out.end(), hitBefore);
}

void Bvh::castRay(const Ray& ray, RayCallback callback) const {
  if (!checkNoPending("castRay") || !checkRay(ray, "castRay")) return;
  RayWalk w{ray, Vec3::Zero(), RayMode::callback, exact_.data(), ray.maxT, {}};
  w.callback = &callback;
  BvhStack<RayEntry> stack;
  for (const BvhTree& tree : trees_) w.walk(tree, stack);
}

void Bvh::castRays(Scheduler& scheduler, std::span<const Ray> rays, std::span<RayHit> out,
                   RayQuery kind) const {
  // On a rejection every slot of `out` holds a miss.
  const auto reject = [&] { std::fill(out.begin(), out.end(), RayHit{}); };
  if (!checkNoPending("castRays")) return reject();
  if (rays.size() != out.size()) {
    reportError(ErrorCode::invalidArgument, "Bvh::castRays: " + std::to_string(rays.size()) +
                                                " rays but " + std::to_string(out.size()) +
                                                " results");
    return reject();
  }
  if (kind == RayQuery::all) {
    reportError(ErrorCode::invalidArgument, "Bvh::castRays: RayQuery::all is not a batch query");
    return reject();
  }
  for (const Ray& r : rays)
    if (!checkRay(r, "castRays")) return reject();
  const uint32_t count = static_cast<uint32_t>(rays.size());
  // Only worth it when the tree outgrows the caches.
  size_t nodes = 0;
  for (const BvhTree& tree : trees_) nodes += tree.nodes.size();
  if (count < kMortonOrderRays || nodes < kMortonOrderNodes) {
    scheduler.forEach(0, count, 256, [&](uint32_t begin, uint32_t end) {
      for (uint32_t k = begin; k < end; ++k) out[k] = castRayUnchecked(rays[k], kind);
    });
    return;
  }
  // Visit space in order: rays cast in Morton order of their origins walk
  // nearly the same nodes one after another, so the tree stays in cache.
  // Each result still goes to its ray's slot: the answer is the same.
  const std::vector<uint32_t> order = mortonOrder(&scheduler, rays);
  scheduler.forEach(0, count, 256, [&](uint32_t begin, uint32_t end) {
    castInOrder(order, rays, out, begin, end,
                [&](const Ray& ray) { return castRayUnchecked(ray, kind); });
  });
}

RayHit Bvh::castGrownClosest(const Ray& ray, const Vec3& grow) const {
  RayWalk w{ray, grow, RayMode::closest, exact_.data(), ray.maxT, {}};
  w.grown = true;
  BvhStack<RayEntry> stack;
  for (const BvhTree& tree : trees_) w.walk(tree, stack);
  return w.best;
}

RayHit Bvh::castBox(const Vec3& halfExtent, const Ray& ray) const {
  if (!checkNoPending("castBox") || !checkRay(ray, "castBox")) return RayHit{};
  if (!(isFinite(halfExtent) && isWithinLimit(halfExtent) && halfExtent.minCoeff() >= 0.0f)) {
    reportError(ErrorCode::invalidArgument,
                "Bvh::castBox: the half extent must be finite and >= 0 on every axis");
    return RayHit{};
  }
  return castGrownClosest(ray, halfExtent);
}

void Bvh::castBox(const Vec3& halfExtent, const Ray& ray, RayCallback callback) const {
  if (!checkNoPending("castBox") || !checkRay(ray, "castBox")) return;
  if (!(isFinite(halfExtent) && isWithinLimit(halfExtent) && halfExtent.minCoeff() >= 0.0f)) {
    reportError(ErrorCode::invalidArgument,
                "Bvh::castBox: the half extent must be finite and >= 0 on every axis");
    return;
  }
  RayWalk w{ray, halfExtent, RayMode::callback, exact_.data(), ray.maxT, {}};
  w.grown = true;
  w.callback = &callback;
  BvhStack<RayEntry> stack;
  for (const BvhTree& tree : trees_) w.walk(tree, stack);
}

}  // namespace bp
