// Bvh: the dynamic AABB tree broadphase (docs/structure_contract.md).
//
// Two trees, as in Box2D v3: moving proxies in `dynamic`, static proxies in
// `static`. Static proxies are never paired with each other, and the static
// tree is only refit or rebuilt when a static proxy changed. With broadphase
// layers (layers.h) each layer has its own pair of trees (trees_[2L] and
// trees_[2L + 1]), and findPairs walks two layers' trees against each other
// only when the layer table lets them collide (bvh_layers.cpp).
//
// Each leaf stores a fat box: the exact box grown by BvhConfig::margin and,
// optionally, stretched along the last displacement. A move whose exact box
// stays inside the fat box only writes the exact box (a flat array indexed by
// proxy, apart from the nodes) and touches no node. A move that escapes gets a
// new fat box; its slot is written and its ancestors refit in one parallel
// pass in update(). Pairs and queries test the exact boxes; fat boxes only
// prune. The default is tight (margin 0, no stretch): every move rewrites the
// slot, slots are exact, and when most leaves moved the refit is one backward
// sweep over the preorder node array.
//
// Adds are deferred to update() too: a few are inserted one by one (SAH
// branch and bound over the sibling choice), many at once trigger a full
// binned-SAH rebuild in parallel tasks. A tree whose SAH cost grew past
// BvhConfig::rebuildRatio times its cost after the last build is rebuilt.
//
// findPairs walks the dynamic tree against itself and against the static
// tree simultaneously (each pair met once, at its lowest common ancestor),
// in tasks with per-worker buffers, then sorts by (a, b) with a counting sort
// on a: the same list for any thread count. In tight mode, when there are
// enough pairs per moving proxy to pay for it, the walk runs over 4-wide
// copies of the trees (BvhWideNode) that the ordered refit keeps current. Queries walk both trees
// with an explicit, growing stack, nearest child first.
#pragma once

#include <broadphase/function_ref.h>
#include <broadphase/jobs/per_worker.h>
#include <broadphase/jobs/scheduler.h>
#include <broadphase/layers.h>
#include <broadphase/math/aabb.h>
#include <broadphase/math/ray.h>
#include <broadphase/pair.h>
#include <broadphase/query.h>
#include <broadphase/ray_hit.h>
#include "bvh/bvh_node.h"
#include "common/handle_pool.h"
#include "pairs/pair_budget.h"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace bp {

struct BvhConfig {
  // Fat box = exact box grown by `margin` on every side (world units, >= 0).
  // Static proxies get no margin: their fat box is the exact box. Measured on
  // the standard scenes (every box moves every frame): exact boxes win. Every
  // false candidate costs more in findPairs than refitting every leaf, and
  // with margin 0 and no stretch ("tight") a leaf slot is the exact box, so
  // the pair walk needs no second, exact test. Tight beat a small margin
  // plus the displacement, which had beaten a larger one (docs/decisions.md,
  // "The BVH").
  float margin = 0.0f;
  // Also stretch the fat box by displacementScale x the last displacement in
  // the direction of motion, so that a steadily moving proxy stays inside it
  // for several frames. A jump larger than the box itself (a teleport) is not
  // extrapolated.
  bool extendByDisplacement = false;
  float displacementScale = 1.0f;
  // Rebuild a tree when its SAH cost exceeds rebuildRatio x its cost right
  // after the last full build (> 1).
  float rebuildRatio = 1.3f;
};

// Diagnostics of one tree (Bvh-only, not part of the shared contract).
struct BvhTreeStats {
  uint32_t leaves = 0;
  uint32_t nodes = 0;         // internal nodes in use
  double cost = 0;            // SAH cost: sum of internal node areas
  double costAtBuild = 0;     // cost right after the last full build
  uint32_t rebuildCount = 0;  // full builds so far
};

class Bvh {
 public:
  explicit Bvh(const BvhConfig& config = {});

  // Proxies. `layer` < kMaxLayers (precondition, as the facade checks it):
  // the proxy's broadphase layer, fixed while it lives.
  ProxyId add(const Aabb& box, bool isStatic = false, uint32_t layer = 0);
  // Which layers' trees are walked against which, from the next findPairs
  // (the trees do not depend on it). Precondition: symmetric.
  void setLayerTable(const LayerTable& table) { table_ = table; }
  const LayerTable& layerTable() const { return table_; }
  void remove(ProxyId id);
  void move(ProxyId id, const Aabb& box);
  void move(std::span<const ProxyId> ids, std::span<const Aabb> boxes);
  // The contract's parallel form; the tree's batch move runs on this thread.
  void move(std::span<const ProxyId> ids, std::span<const Aabb> boxes, Scheduler&) {
    move(ids, boxes);
  }
  // move() without checks, for a caller that validated the handle and the
  // box already (BroadPhase, once per frame and proxy). Precondition: the
  // index is live, the box isValid().
  void moveUnchecked(uint32_t index, const Aabb& box) { applyMove(index, box); }
  // The same for a batch, in batch order.
  void moveUnchecked(std::span<const ProxyId> ids, std::span<const Aabb> boxes, Scheduler&) {
    for (size_t k = 0; k < ids.size(); ++k) applyMove(ids[k].index, boxes[k]);
  }
  // The same for indices whose boxes lie at their own index of `boxesByIndex`.
  void moveUnchecked(std::span<const uint32_t> indices, std::span<const Aabb> boxesByIndex,
                     Scheduler&) {
    for (const uint32_t i : indices) applyMove(i, boxesByIndex[i]);
  }
  bool contains(ProxyId id) const { return pool_.isLive(id); }
  const Aabb& box(uint32_t index) const;
  bool isStatic(uint32_t index) const;
  uint32_t proxyCount() const { return pool_.liveCount(); }
  uint32_t capacity() const { return pool_.capacity(); }
  ProxyId handleOf(uint32_t index) const;

  // Deferred structural work: writes moved slots, refits, inserts or
  // rebuilds. Deterministic: the trees come out the same for any thread count.
  void update(Scheduler& scheduler);

  // The contract's pair finding (docs/structure_contract.md). With a
  // budget, the walk charges it as it goes (pair_budget.h) and stops once it
  // is exceeded: each task's stack walk is cut short and the tasks not begun
  // are skipped; `out` is then left empty and the worker buffers cleared,
  // and budget->exceeded() tells the caller. The trees are updated either
  // way. A budget with a predicate keeps only the pairs it accepts. The
  // streaming form charges each chunk before `consume` sees it, so a frame
  // that exceeds the budget may have handed out up to limit() pairs first.
  void findPairs(Scheduler& scheduler, std::vector<Pair>& out, PairBudget* budget = nullptr);
  void findPairs(Scheduler& scheduler, FunctionRef<void(std::span<const Pair>)> consume,
                 PairBudget* budget = nullptr);

  // Const queries (rejected with invalidArgument while changes are pending).
  // Rejected calls of a Bvh return the same fallbacks as BroadPhase's
  // (error.h, docs/errors.md): ProxyId{} from add() and handleOf(), no
  // effect, no callback call, a miss, an empty `out`; box() returns
  // Aabb::empty(), isStatic() false; a bad BvhConfig field takes its default.
  void queryBox(const Aabb& box, OverlapCallback callback) const;
  void queryPoint(const Vec3& point, OverlapCallback callback) const;
  RayHit castRay(const Ray& ray, RayQuery kind) const;
  void castRayAll(const Ray& ray, std::vector<RayHit>& out) const;
  void castRay(const Ray& ray, RayCallback callback) const;
  void castRays(Scheduler& scheduler, std::span<const Ray> rays, std::span<RayHit> out,
                RayQuery kind) const;
  // `visited`, when given, gains the nodes the search took off its heap
  // (the facade weighs a search by them against the rays' tree).
  void nearest(const Vec3& point, uint32_t k, std::vector<Neighbour>& out,
               uint64_t* visited = nullptr) const;
  RayHit castBox(const Vec3& halfExtent, const Ray& ray) const;
  // Every box grown by `halfExtent` that the ray enters, to `callback` as
  // castRay's callback form (clip, keep or stop): the conservative
  // candidates of BroadPhase's double rays.
  void castBox(const Vec3& halfExtent, const Ray& ray, RayCallback callback) const;

  std::string validate() const;
  size_t memoryBytes() const;
  size_t pairBytes() const;  // of memoryBytes(): the pair buffers and the pair sort's scratch

  // Bvh-only: force a full rebuild of both trees (after update()), and observe
  // the trees. qualityRatio() is the SAH cost of the dynamic tree over the
  // cost of a fresh full build of the same leaves (1 = as good as a rebuild).
  void rebuild(Scheduler& scheduler);
  BvhTreeStats dynamicStats() const { return statsOf(trees_[0]); }  // of layer 0
  BvhTreeStats staticStats() const { return statsOf(trees_[1]); }   // of layer 0
  double qualityRatio(Scheduler& scheduler) const;
  const BvhConfig& config() const { return config_; }

 private:
  // leafRef_ of a proxy that waits in pendingInserts: the bit plus its position.
  static constexpr uint32_t kPendingInsert = 0x80000000u;

  BvhTree& treeOf(uint32_t index) { return trees_[group_[index]]; }
  // The box a leaf slot must hold: the fat box, or the exact box when tight
  // (fat_ is then left empty: no second copy to write on every move).
  const Aabb* leafBoxes() const { return tight_ ? exact_.data() : fat_.data(); }
  const Aabb& leafBox(uint32_t index) const { return leafBoxes()[index]; }
  // Each reports what is wrong and returns false (see error.h).
  bool checkLive(ProxyId id, const char* operation) const;
  bool checkNoPending(const char* operation) const;
  void reportDeadIndex(uint32_t index, const char* operation) const;
  Aabb fatBoxAfterMove(const Aabb& oldBox, const Aabb& newBox) const;
  void applyMove(uint32_t index, const Aabb& box);
  BvhTreeStats statsOf(const BvhTree& tree) const;

  // bvh_tree.cpp: incremental structure changes.
  uint32_t allocateNode(BvhTree& tree);
  void freeNode(BvhTree& tree, uint32_t node);
  void setChild(BvhTree& tree, uint32_t node, int slot, uint32_t child, const Aabb& bounds);
  void insertLeaf(BvhTree& tree, uint32_t proxy);
  void removeLeaf(BvhTree& tree, uint32_t proxy);

  // bvh_refit.cpp
  void updateTree(BvhTree& tree, Scheduler& scheduler);
  void writeMovedSlots(BvhTree& tree, Scheduler& scheduler);
  void refit(BvhTree& tree, Scheduler& scheduler, bool everyNode);
  void refitOrdered(BvhTree& tree, Scheduler& scheduler);
  double computeCost(const BvhTree& tree, Scheduler& scheduler);

  // bvh_build.cpp: full binned-SAH build of the tree's leaves and pending inserts.
  void rebuildTree(BvhTree& tree, Scheduler& scheduler);

  // bvh_wide.cpp: the 4-wide copy of a tree that the tight pair walk uses.
  void collapseWide(BvhTree& tree) const;

  // bvh_pairs.cpp
  void collectPairs(Scheduler& scheduler, std::vector<Pair>* sorted,
                    FunctionRef<void(std::span<const Pair>)>* consume, PairBudget* budget);
  void sortPairs(Scheduler& scheduler, std::vector<Pair>& out);  // bvh_pair_sort.cpp
  // Without layers (every live proxy in layer 0, which collides with
  // itself) findPairs walks trees 0 and 1 as it always did.
  bool plainLayers() const { return layeredProxies_ == 0 && table_.collides(0, 0); }
  // bvh_layers.cpp: the walks the layer table asks for, as (moving tree,
  // other tree) pairs of trees_ indices; `other` == `moving` is the self walk.
  void listLayerWalks(std::vector<std::pair<uint32_t, uint32_t>>& walks) const;
  void radixSortSerial(std::vector<Pair>& out);

  // bvh_query.cpp
  RayHit castRayUnchecked(const Ray& ray, RayQuery kind) const;
  RayHit castGrownClosest(const Ray& ray, const Vec3& grow) const;

  BvhConfig config_;
  // margin 0 and no stretch: every leaf slot holds the proxy's exact box
  // after update() (a move of any kind rewrites it), so the pair walk takes
  // a slot test between two leaves as the exact test and never reads exact_.
  bool tight_ = false;
  // Tight mode: findPairs walks the 4-wide copies of the trees (see
  // bvh_pairs.cpp for when it is worth it).
  bool wideWalk_ = true;
  HandlePool pool_;

  // Per proxy index. exact_ is what pairs and queries test; fat_ is the box of
  // the proxy's leaf slot (kept here too so that a move is checked without
  // touching the node); empty when tight_, see leafBox().
  std::vector<Aabb> exact_;
  std::vector<Aabb> fat_;
  std::vector<uint32_t> leafRef_;   // node << 1 | slot, or kPendingInsert | position
  std::vector<uint32_t> movedPos_;  // position in tree.moved, or kNullIndex
  std::vector<uint8_t> isStatic_;
  std::vector<uint8_t> group_;  // index in trees_: 2 x layer + isStatic

  // Per group: trees_[2L] the moving proxies of layer L, trees_[2L + 1] its
  // statics. Two trees (layer 0) until a proxy of another layer arrives;
  // grown by add(), never shrunk.
  std::vector<BvhTree> trees_ = std::vector<BvhTree>(2);
  LayerTable table_;
  uint32_t layeredProxies_ = 0;                            // live proxies in a layer other than 0
  std::vector<std::pair<uint32_t, uint32_t>> layerWalks_;  // findPairs scratch
  bool pending_ = false;                                   // a change since the last update()

  // Scratch reused across calls (never touched by const queries).
  PerWorker<std::vector<Pair>> pairBuffers_;
  std::vector<uint32_t> scratchTop_;
  std::vector<uint32_t> scratchFrontier_;
  // Per-frame scratch kept across frames so that a steady state allocates
  // nothing: refit's next frontier, the cost partial sums, the pair tasks.
  std::vector<uint32_t> scratchNext_;
  std::vector<double> scratchCost_;
  std::vector<PairTask> scratchTasks_, scratchTasksNext_;
  std::vector<uint32_t> bucketStart_;   // pair sort: first pair of each a
  std::vector<uint32_t> bucketCursor_;  // pair sort: next free slot of each a (or b)
  std::vector<Pair> scratchPairs_;      // pair sort: the list sorted by b, or merge scratch
  std::vector<std::span<const Pair>> scratchPieces_;  // pair sort: the workers' buffers
};

}  // namespace bp
