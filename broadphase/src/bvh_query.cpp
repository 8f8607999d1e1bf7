// Box, point and ray queries. Both trees are walked with an explicit stack
// (BvhStack: grows, never truncates). Fat boxes in the nodes only prune; every
// answer is decided on the exact boxes, with the same arithmetic as the
// brute-force oracle so that distances agree to the bit.
#include <broadphase/bvh.h>
#include <broadphase/bvh_stack.h>
#include <broadphase/error.h>

#include <algorithm>

namespace bp {

namespace {

void checkRay(const Ray& ray, const char* operation) {
  const std::string why = describeInvalidRay(ray.origin, ray.direction, ray.maxT);
  if (!why.empty())
    throwError(ErrorCode::invalidRay, std::string("Bvh::") + operation + ": " + why);
}

enum class RayMode { closest, any, all, callback };

struct RayEntry {
  uint32_t node;
  float tEntry;
};

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

  bool slab(const Aabb& box, float limit, float& t) const {
    const Aabb grown{box.min - grow, box.max + grow};
    return intersectRayAabb(ray.origin, ray.invDirection, grown, 0.0f, limit, t);
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

void Bvh::queryBox(const Aabb& box, OverlapCallback callback) const {
  checkNoPending("queryBox");
  if (!isValid(box)) throwError(ErrorCode::invalidBox, "Bvh::queryBox: " + describeInvalid(box));
  BvhStack<uint32_t> stack;
  for (const BvhTree* tree : {&dynamic_, &static_}) {
    if (tree->root == kNullIndex) continue;
    stack.clear();
    stack.push(tree->root);
    while (!stack.empty()) {
      const BvhNode& node = tree->nodes[stack.pop()];
      for (int s = 0; s < 2; ++s) {
        if (!overlaps(node.bounds[s], box)) continue;
        const uint32_t c = node.child[s];
        if (!isBvhLeaf(c)) {
          stack.push(c);
        } else if (overlaps(exact_[bvhLeafProxy(c)], box)) {
          if (!callback(bvhLeafProxy(c))) return;
        }
      }
    }
  }
}

void Bvh::queryPoint(const Vec3& point, OverlapCallback callback) const {
  checkNoPending("queryPoint");
  if (!isFinite(point))
    throwError(ErrorCode::invalidArgument, "Bvh::queryPoint: the point is not finite");
  BvhStack<uint32_t> stack;
  for (const BvhTree* tree : {&dynamic_, &static_}) {
    if (tree->root == kNullIndex) continue;
    stack.clear();
    stack.push(tree->root);
    while (!stack.empty()) {
      const BvhNode& node = tree->nodes[stack.pop()];
      for (int s = 0; s < 2; ++s) {
        if (!containsPoint(node.bounds[s], point)) continue;
        const uint32_t c = node.child[s];
        if (!isBvhLeaf(c)) {
          stack.push(c);
        } else if (containsPoint(exact_[bvhLeafProxy(c)], point)) {
          if (!callback(bvhLeafProxy(c))) return;
        }
      }
    }
  }
}

RayHit Bvh::castRayUnchecked(const Ray& ray, RayQuery kind) const {
  RayWalk w{ray,           Vec3::Zero(), kind == RayQuery::any ? RayMode::any : RayMode::closest,
            exact_.data(), ray.maxT,     {}};
  BvhStack<RayEntry> stack;
  w.walk(dynamic_, stack);
  w.walk(static_, stack);
  return w.best;
}

RayHit Bvh::castRay(const Ray& ray, RayQuery kind) const {
  checkNoPending("castRay");
  checkRay(ray, "castRay");
  if (kind == RayQuery::all)
    throwError(ErrorCode::invalidArgument, "Bvh::castRay: use castRayAll for RayQuery::all");
  return castRayUnchecked(ray, kind);
}

void Bvh::castRayAll(const Ray& ray, std::vector<RayHit>& out) const {
  checkNoPending("castRayAll");
  checkRay(ray, "castRayAll");
  out.clear();
  RayWalk w{ray, Vec3::Zero(), RayMode::all, exact_.data(), ray.maxT, {}};
  w.all = &out;
  BvhStack<RayEntry> stack;
  w.walk(dynamic_, stack);
  w.walk(static_, stack);
  std::sort(out.begin(), out.end(), hitBefore);
}

void Bvh::castRay(const Ray& ray, RayCallback callback) const {
  checkNoPending("castRay");
  checkRay(ray, "castRay");
  RayWalk w{ray, Vec3::Zero(), RayMode::callback, exact_.data(), ray.maxT, {}};
  w.callback = &callback;
  BvhStack<RayEntry> stack;
  w.walk(dynamic_, stack);
  w.walk(static_, stack);
}

void Bvh::castRays(Scheduler& scheduler, std::span<const Ray> rays, std::span<RayHit> out,
                   RayQuery kind) const {
  checkNoPending("castRays");
  if (rays.size() != out.size())
    throwError(ErrorCode::invalidArgument, "Bvh::castRays: " + std::to_string(rays.size()) +
                                               " rays but " + std::to_string(out.size()) +
                                               " results");
  if (kind == RayQuery::all)
    throwError(ErrorCode::invalidArgument, "Bvh::castRays: RayQuery::all is not a batch query");
  for (const Ray& r : rays) checkRay(r, "castRays");
  scheduler.forEach(0, static_cast<uint32_t>(rays.size()), 256, [&](uint32_t begin, uint32_t end) {
    for (uint32_t k = begin; k < end; ++k) out[k] = castRayUnchecked(rays[k], kind);
  });
}

RayHit Bvh::castGrownClosest(const Ray& ray, const Vec3& grow) const {
  RayWalk w{ray, grow, RayMode::closest, exact_.data(), ray.maxT, {}};
  BvhStack<RayEntry> stack;
  w.walk(dynamic_, stack);
  w.walk(static_, stack);
  return w.best;
}

RayHit Bvh::castBox(const Vec3& halfExtent, const Ray& ray) const {
  checkNoPending("castBox");
  checkRay(ray, "castBox");
  if (!(isFinite(halfExtent) && isWithinLimit(halfExtent) && halfExtent.minCoeff() >= 0.0f))
    throwError(ErrorCode::invalidArgument,
               "Bvh::castBox: the half extent must be finite and >= 0 on every axis");
  return castGrownClosest(ray, halfExtent);
}

}  // namespace bp
