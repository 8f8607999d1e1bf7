// The points k-nearest benchmarks search from: drawn uniformly in a scene's
// motion domain with its own generator (SceneRng, seed + 3), so that
// `bpbench nearest` and the micro-benchmarks ask the same questions.
#pragma once

#include <broadphase/testkit/scene.h>

#include <cstdint>
#include <vector>

namespace bpbench {

inline std::vector<bp::Vec3> makeQueryPoints(const bp::Scene& scene, uint32_t count,
                                             uint64_t seed) {
  bp::SceneRng rng(seed + 3);
  std::vector<bp::Vec3> points(count);
  for (bp::Vec3& p : points) {
    const float x = rng.uniform(), y = rng.uniform(), z = rng.uniform();
    p = bp::Vec3(x * scene.bounds.x(), y * scene.bounds.y(), z * scene.bounds.z());
  }
  return points;
}

}  // namespace bpbench
