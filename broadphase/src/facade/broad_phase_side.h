// BroadPhase::Impl::Side: the structure (a Bvh or a SweepGrid) plus the map from its
// slot indices back to proxy indices. The only place that knows both types;
// `visit` picks the one this side holds (no base class: the two share a
// contract, docs/structure_contract.md, not an interface).
#pragma once

#include "bvh/bvh.h"
#include "facade/broad_phase_impl.h"
#include "facade/side_rays.h"
#include "facade/structure_contract.h"
#include "sweep/sweep_grid.h"

#include <algorithm>
#include <memory>
#include <vector>

namespace bp {

// Both structures keep the contract the facade drives them by.
static_assert(StructureContract<Bvh>);
static_assert(StructureContract<SweepGrid>);

struct BroadPhase::Impl::Side {
  std::unique_ptr<Bvh> bvh;
  std::unique_ptr<SweepGrid> sweep;
  std::vector<uint32_t> outer;  // structure slot -> proxy index (kNullIndex when free)
  std::vector<Pair> pairs;      // this frame's pairs, in structure slots
  /// Slots that map to a proxy of another index. While 0 (no churn has
  /// shuffled slots since the structure was built), slot == proxy index and
  /// the structure's pairs are the proxies' pairs, already sorted.
  uint32_t remapped = 0;
  /// Changes queries can see (SideRays): `version` counts adds, forgotten
  /// slots and batch moves, `topology` the adds alone.
  uint64_t version = 0;
  uint64_t topology = 0;
  /// The tree rays use when it pays (side_rays.h); made by const queries.
  mutable SideRays rays;

  static std::unique_ptr<Side> makeBvh(const BroadPhaseConfig& c) {
    auto s = std::make_unique<Side>();
    BvhConfig bc;
    bc.margin = c.margin;
    s->bvh = std::make_unique<Bvh>(bc);
    s->bvh->setLayerTable(c.layers);
    return s;
  }
  static std::unique_ptr<Side> makeSweep(const BroadPhaseConfig& c) {
    auto s = std::make_unique<Side>();
    SweepGridConfig sc;
    sc.cellSize = c.cellSize;
    s->sweep = std::make_unique<SweepGrid>(sc);
    s->sweep->setLayerTable(c.layers);
    return s;
  }

  template <class Fn>
  decltype(auto) visit(Fn&& fn) {
    return bvh ? fn(*bvh) : fn(*sweep);
  }
  template <class Fn>
  decltype(auto) visit(Fn&& fn) const {
    return bvh ? fn(static_cast<const Bvh&>(*bvh)) : fn(static_cast<const SweepGrid&>(*sweep));
  }

  ProxyId add(const Aabb& box, bool isStatic, uint32_t layer, uint32_t proxyIndex) {
    const ProxyId id = visit([&](auto& s) { return s.add(box, isStatic, layer); });
    ++version;
    ++topology;
    if (id.index >= outer.size()) outer.resize(id.index + 1, kNullIndex);
    forget(id.index);
    outer[id.index] = proxyIndex;
    remapped += proxyIndex != id.index;
    return id;
  }
  void remove(ProxyId id) {
    visit([&](auto& s) { s.remove(id); });
    forget(id.index);
  }
  /// The slot stops mapping to a proxy (queries skip it from now on).
  void forget(uint32_t slot) {
    ++version;  // the ray tree drops the proxy (a refit)
    remapped -= outer[slot] != kNullIndex && outer[slot] != slot;
    outer[slot] = kNullIndex;
  }
  /// The structure's batch move (ids inside the structure, new boxes).
  void moveBatch(std::span<const ProxyId> ids, std::span<const Aabb> boxes, Scheduler& scheduler) {
    visit([&](auto& s) { s.moveUnchecked(ids, boxes, scheduler); });
    ++version;
  }
  /// The same for slots whose boxes lie at their own index of `boxesByIndex`.
  void moveBatch(std::span<const uint32_t> slots, std::span<const Aabb> boxesByIndex,
                 Scheduler& scheduler) {
    visit([&](auto& s) { s.moveUnchecked(slots, boxesByIndex, scheduler); });
    ++version;
  }
  /// The ray tree over this side's boxes when `mode` and the rays about to
  /// be cast (`rays`, counted as cast) call for one, made now if needed on
  /// `scheduler` (null: on the calling thread); null: walk the structure.
  /// side_rays.cpp.
  const RayTree* rayTreeFor(uint64_t rays, RayTreeMode mode, Scheduler* scheduler) const;
  /// The structure's own k-nearest search (in slots); `work` gains what it
  /// did: the BVH's nodes taken off its heap, the sweep's boxes ranked and
  /// cells looked at (nearestAsRays weighs them).
  void nearest(const Vec3& point, uint32_t k, std::vector<Neighbour>& out, uint64_t& work) const {
    if (bvh)
      bvh->nearest(point, k, out, &work);
    else
      sweep->nearest(point, k, out, &work);
  }
  /// What searches of the structure's own nearest that did `work` count as
  /// toward the rays' tree (side_rays.h), whose price is one unit a slot:
  /// a unit is what building the tree costs a slot, about 0.3-0.85 us at
  /// 10^5-10^6 boxes, so a search counts about its time in units. The BVH's
  /// search takes about a unit for 4 nodes visited, the sweep's for 16 boxes
  /// ranked (a cell looked at counts as 16: SweepGrid::kCellLookAsBoxes),
  /// on `uniform` boxes and points at 10^5 and 10^6 (docs/decisions.md,
  /// "Nearest").
  uint64_t nearestAsRays(uint64_t work) const { return 1 + work / (bvh ? 4 : 16); }
  /// Applies the structure's pending changes without finding pairs.
  void update(Scheduler& scheduler) {
    visit([&](auto& s) { s.update(scheduler); });
  }
  /// The structure's pairs into `pairs`; with a budget, empty once it is
  /// exceeded (budget->exceeded()).
  void findPairs(Scheduler& scheduler, PairBudget* budget) {
    visit([&](auto& s) { s.findPairs(scheduler, pairs, budget); });
  }

  // The structure's handle of a live slot.
  ProxyId handleOf(uint32_t slot) const {
    return visit([&](const auto& s) { return s.handleOf(slot); });
  }
  bool contains(ProxyId id) const {
    return visit([&](const auto& s) { return s.contains(id); });
  }
  uint32_t proxyCount() const {
    return visit([&](const auto& s) { return s.proxyCount(); });
  }
  std::string validate() const {
    return visit([&](const auto& s) { return s.validate(); });
  }
  // The structure and the slot map, without the structure's pair buffers
  // and sorted pairs (pairBytes) and the rays' tree.
  size_t structureBytes() const {
    return visit([&](const auto& s) { return s.memoryBytes() - s.pairBytes(); }) +
           outer.capacity() * sizeof(uint32_t);
  }
  size_t pairBytes() const {
    return visit([&](const auto& s) { return s.pairBytes(); }) + pairs.capacity() * sizeof(Pair);
  }
  size_t memoryBytes() const { return structureBytes() + pairBytes() + rays.tree.memoryBytes(); }
};

}  // namespace bp
