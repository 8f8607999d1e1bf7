// mortonOrder: a batch of rays in the Morton order of their origins (or of
// points, in the Morton order of the points), so that rays cast (or
// points searched) one after another walk nearly the same nodes and the tree they
// walk stays in cache. Each result still goes to its ray's slot, so the
// order changes the speed only, never an answer.
#pragma once

#include <broadphase/jobs/scheduler.h>
#include <broadphase/math/ray.h>
#include <broadphase/ray_hit.h>

#include <cstdint>
#include <span>
#include <vector>

namespace bp {

/// The ray indices ordered by a 15-bit Morton code of their origins (32
/// cells an axis over the origins' bounds), in index order within a cell: a
/// counting sort, three passes over the batch in chunks on the scheduler
/// (null: on this thread), the same order for any thread count.
std::vector<uint32_t> mortonOrder(Scheduler* scheduler, std::span<const Ray> rays);
/// The same for points (the batch nearest search).
std::vector<uint32_t> mortonOrder(Scheduler* scheduler, std::span<const Vec3> points);

/// out[r] = cast(rays[r]) for r = order[begin], ..., order[end - 1]. In
/// Morton order the rays and their results lie all over the batch: each is
/// fetched kRayPrefetch rays ahead, so that its miss overlaps the walks
/// before it instead of starting its own (docs/decisions.md, "Rays").
inline constexpr uint32_t kRayPrefetch = 8;
template <class Cast>
void castInOrder(std::span<const uint32_t> order, std::span<const Ray> rays, std::span<RayHit> out,
                 uint32_t begin, uint32_t end, Cast&& cast) {
  for (uint32_t k = begin; k < end; ++k) {
    if (k + kRayPrefetch < end) {
      __builtin_prefetch(&rays[order[k + kRayPrefetch]]);
      __builtin_prefetch(&out[order[k + kRayPrefetch]], 1);
    }
    const uint32_t r = order[k];
    out[r] = cast(rays[r]);
  }
}

}  // namespace bp
