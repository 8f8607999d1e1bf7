// mortonOrder: a batch of rays in the Morton order of their origins, so that
// rays cast one after another walk nearly the same nodes and the tree they
// walk stays in cache. Each result still goes to its ray's slot, so the
// order changes the speed only, never an answer.
#pragma once

#include <broadphase/jobs/scheduler.h>
#include <broadphase/math/ray.h>

#include <cstdint>
#include <span>
#include <vector>

namespace bp {

/// The ray indices ordered by a 15-bit Morton code of their origins (32
/// cells an axis over the origins' bounds), in index order within a cell: a
/// counting sort, three passes over the batch in chunks on the scheduler
/// (null: on this thread), the same order for any thread count.
std::vector<uint32_t> mortonOrder(Scheduler* scheduler, std::span<const Ray> rays);

}  // namespace bp
