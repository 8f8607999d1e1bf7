// BroadPhase::Impl::Side::rayTreeFor: when rays get the tree, and making it (see
// side_rays.h for the policy and the thread-safety argument).
#include "facade/side_rays.h"
#include "facade/broad_phase_side.h"

#include <algorithm>

namespace bp {

const RayTree* BroadPhase::Impl::Side::rayTreeFor(uint64_t count, RayTreeMode mode,
                                                  Scheduler* scheduler) const {
  if (mode == RayTreeMode::never) return nullptr;
  SideRays& r = rays;
  if (r.readyFor.load(std::memory_order_acquire) == version) return &r.tree;
  const uint32_t slots = uint32_t(outer.size());
  if (mode == RayTreeMode::automatic) {
    // The rays of this version so far, and of the one before.
    if (uint64_t seen = r.countedFor.load(std::memory_order_relaxed); seen != version) {
      if (r.countedFor.compare_exchange_strong(seen, version, std::memory_order_relaxed)) {
        r.raysBefore.store(seen == SideRays::kNever ? 0 : r.rays.exchange(0),
                           std::memory_order_relaxed);
      }
    }
    const uint64_t now = r.rays.fetch_add(count, std::memory_order_relaxed) + count;
    const uint64_t before = r.raysBefore.load(std::memory_order_relaxed);
    const uint64_t expected = std::max(now, before);
    // (The maker may be writing the tree: only the atomic is read here.)
    const bool refit = r.builtTopology.load(std::memory_order_relaxed) == topology;
    const uint64_t price =
        std::max<uint64_t>(64, slots / (refit ? SideRays::kRefitDivisor : SideRays::kBuildDivisor));
    // A world that casts steadily, this version and the one before, builds
    // once and then refits at every version.
    const uint64_t steady = std::max<uint64_t>(64, slots / SideRays::kSteadyDivisor);
    const bool steadyBuild = !refit && now >= steady && before >= steady;
    if (expected < price && !steadyBuild) return nullptr;
  }
  if (r.making.exchange(true, std::memory_order_acquire)) return nullptr;  // another query makes it
  if (r.readyFor.load(std::memory_order_acquire) != version) {
    visit([&](const auto& s) {
      // A forgotten slot (its proxy removed) keeps its leaf, with the empty
      // box and no proxy, until the next build.
      const auto leafOf = [&](uint32_t slot, uint32_t& proxy) {
        proxy = outer[slot];
        return proxy == kNullIndex ? Aabb::empty() : s.box(slot);
      };
      bool built = false;
      if (r.builtTopology.load(std::memory_order_relaxed) == topology) {
        r.tree.refit(leafOf);
        built = r.tree.cost() <= SideRays::kRefitCostLimit * r.costAtBuild;
      }
      if (!built) {
        std::vector<Aabb> boxes;
        std::vector<uint32_t> keys, proxies;
        boxes.reserve(slots);
        keys.reserve(slots);
        proxies.reserve(slots);
        for (uint32_t slot = 0; slot < slots; ++slot) {
          if (outer[slot] == kNullIndex) continue;
          boxes.push_back(s.box(slot));
          keys.push_back(slot);
          proxies.push_back(outer[slot]);
        }
        r.tree.build(scheduler, boxes, keys, proxies);
        r.builtTopology.store(topology, std::memory_order_relaxed);
        r.costAtBuild = r.tree.cost();
      }
    });
    r.readyFor.store(version, std::memory_order_release);
  }
  r.making.store(false, std::memory_order_release);
  return &r.tree;
}

}  // namespace bp
