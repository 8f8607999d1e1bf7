// A standard scene in a SweepGrid, for the micro-benchmarks that drive one:
// every box added, and each frame's moves gathered (outside the timing).
#pragma once

#include <broadphase/testkit/scene.h>
#include "sweep/sweep_grid.h"

#include <vector>

namespace bp {

struct MovingSet {
  std::vector<ProxyId> ids;
  std::vector<Aabb> boxes;
};

// Adds every box of the scene (statics as static); handle i is box i's.
inline std::vector<ProxyId> addAll(SweepGrid& grid, const Scene& scene) {
  std::vector<ProxyId> ids(scene.n);
  for (uint32_t i = 0; i < scene.n; ++i) ids[i] = grid.add(scene.boxes[i], scene.isStatic[i]);
  return ids;
}

// The handles and current boxes of the scene's moving boxes, in id order.
inline void gatherMoving(const Scene& scene, const std::vector<ProxyId>& all, MovingSet& m) {
  m.ids.clear();
  m.boxes.clear();
  for (uint32_t i = 0; i < scene.n; ++i)
    if (!scene.isStatic[i]) {
      m.ids.push_back(all[i]);
      m.boxes.push_back(scene.boxes[i]);
    }
}

}  // namespace bp
