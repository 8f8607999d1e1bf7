// Broadphase layers in Bvh: which trees the pair walk meets.
//
// Each layer L has a moving tree (trees_[2L]) and a static one
// (trees_[2L + 1]). The walks follow the layer table: for each layer L with
// moving leaves, the self walk of its moving tree and the walk against its
// static tree when L collides with L; for each other layer M that L collides
// with, the walk against M's static tree, and against M's moving tree when
// M > L (each pair of moving trees is walked once). Trees of layers that
// never collide are never walked against each other, so their candidates
// never arise. The list is in a fixed order; the pairs are sorted after.
#include "bvh/bvh.h"

namespace bp {

void Bvh::listLayerWalks(std::vector<std::pair<uint32_t, uint32_t>>& walks) const {
  walks.clear();
  const uint32_t layers = uint32_t(trees_.size() / 2);
  const uint32_t present = layers >= 32 ? ~uint32_t(0) : (uint32_t(1) << layers) - 1;
  for (uint32_t layer = 0; layer < layers; ++layer) {
    const uint32_t moving = 2 * layer;
    if (trees_[moving].root == kNullIndex) continue;
    uint32_t row = table_.rows[layer] & present;
    while (row != 0) {
      const uint32_t other = uint32_t(__builtin_ctz(row));
      row &= row - 1;
      if (other == layer) walks.emplace_back(moving, moving);
      walks.emplace_back(moving, 2 * other + 1);
      if (other > layer) walks.emplace_back(moving, 2 * other);
    }
  }
}

}  // namespace bp
