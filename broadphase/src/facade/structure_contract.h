// StructureContract: what the facade requires of a structure, in code.
// Bvh and SweepGrid both satisfy it (static_assert in broad_phase_side.h);
// docs/structure_contract.md states what each member means and the exactness rules they share. No
// base class, no virtual call: the facade holds one or the other and visits it.
#pragma once

#include <broadphase/function_ref.h>
#include <broadphase/jobs/scheduler.h>
#include <broadphase/layers.h>
#include <broadphase/math/aabb.h>
#include <broadphase/math/ray.h>
#include <broadphase/pair.h>
#include <broadphase/query.h>
#include <broadphase/ray_hit.h>
#include "common/handle_pool.h"
#include "pairs/pair_budget.h"

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace bp {

template <class S>
concept StructureContract = requires(
    S s, const S cs, const Aabb box, ProxyId id, uint32_t index, std::span<const ProxyId> ids,
    std::span<const Aabb> boxes, std::span<const uint32_t> indices, const LayerTable& table,
    Scheduler& scheduler, std::vector<Pair>& pairs, PairBudget* budget,
    FunctionRef<void(std::span<const Pair>)> consume, const Vec3& point, const Ray& ray,
    RayQuery kind, OverlapCallback overlap, RayCallback hits, std::vector<RayHit>& hitList,
    std::span<const Ray> rays, std::span<RayHit> out, std::vector<Neighbour>& near,
    uint64_t* work) {
  // Proxies: handles from a HandlePool, indices 0, 1, 2, ... in a fresh one.
  { s.add(box, true, index) } -> std::same_as<ProxyId>;
  { s.remove(id) } -> std::same_as<void>;
  { s.setLayerTable(table) } -> std::same_as<void>;
  { s.move(id, box) } -> std::same_as<void>;
  { s.move(ids, boxes) } -> std::same_as<void>;
  { s.move(ids, boxes, scheduler) } -> std::same_as<void>;
  { s.moveUnchecked(index, box) } -> std::same_as<void>;
  { s.moveUnchecked(ids, boxes, scheduler) } -> std::same_as<void>;
  { s.moveUnchecked(indices, boxes, scheduler) } -> std::same_as<void>;
  { cs.contains(id) } -> std::same_as<bool>;
  { cs.box(index) } -> std::same_as<const Aabb&>;
  { cs.isStatic(index) } -> std::same_as<bool>;
  { cs.proxyCount() } -> std::same_as<uint32_t>;
  { cs.capacity() } -> std::same_as<uint32_t>;
  { cs.handleOf(index) } -> std::same_as<ProxyId>;
  // The frame: deferred work as tasks, then the complete sorted pairs.
  { s.update(scheduler) } -> std::same_as<void>;
  { s.findPairs(scheduler, pairs, budget) } -> std::same_as<void>;
  { s.findPairs(scheduler, consume, budget) } -> std::same_as<void>;
  // Queries: const, safe from many threads at once between updates.
  { cs.queryBox(box, overlap) } -> std::same_as<void>;
  { cs.queryPoint(point, overlap) } -> std::same_as<void>;
  { cs.castRay(ray, kind) } -> std::same_as<RayHit>;
  { cs.castRayAll(ray, hitList) } -> std::same_as<void>;
  { cs.castRay(ray, hits) } -> std::same_as<void>;
  { cs.castRays(scheduler, rays, out, kind) } -> std::same_as<void>;
  { cs.nearest(point, index, near, work) } -> std::same_as<void>;
  { cs.castBox(point, ray) } -> std::same_as<RayHit>;
  { cs.castBox(point, ray, hits) } -> std::same_as<void>;
  // Diagnostics.
  { cs.validate() } -> std::same_as<std::string>;
  { cs.memoryBytes() } -> std::same_as<size_t>;
  { cs.pairBytes() } -> std::same_as<size_t>;
};

}  // namespace bp
