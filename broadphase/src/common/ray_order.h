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

/// code << 32 | index for every ray, sorted: unique keys, so the order is
/// the same for any thread count (null scheduler: sorted on this thread).
std::vector<uint64_t> mortonOrder(Scheduler* scheduler, std::span<const Ray> rays);

}  // namespace bp
