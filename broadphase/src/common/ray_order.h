// mortonOrder: a batch of rays in the Morton order of their origins, so that
// rays cast one after another walk nearly the same nodes and the tree they
// walk stays in cache. Each result still goes to its ray's slot, so the
// order changes the speed only, never an answer.
#pragma once

#include <broadphase/math/ray.h>

#include <cstdint>
#include <span>
#include <vector>

namespace bp {

/// The ray indices ordered by a 15-bit Morton code of their origins (32
/// cells an axis over the origins' bounds), in index order within a cell: a
/// counting sort, two passes over the batch, the same order on any thread.
std::vector<uint32_t> mortonOrder(std::span<const Ray> rays);

}  // namespace bp
