/// The ray workloads of docs/scenes.md ("Ray workloads"): the rays engines
/// and sensors cast against a standard scene's frame, deterministic from a
/// seed. `random` is the scene's rays (makeRaysIn); the others are what
/// users cast: a lidar's scans, short probes below the moving bodies, and
/// lines of sight between bodies.
#pragma once

#include <broadphase/math/ray.h>
#include <broadphase/testkit/scene.h>

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace bp {

enum class RayWorkload : uint8_t { random, lidar, probes, sight };

inline constexpr RayWorkload kAllRayWorkloads[] = {RayWorkload::random, RayWorkload::lidar,
                                                   RayWorkload::probes, RayWorkload::sight};

const char* rayWorkloadName(RayWorkload w);  ///< "random", "lidar", "probes", "sight"
std::optional<RayWorkload> parseRayWorkload(std::string_view name);

/// A lidar's scan: kLidarRows rows of kLidarColumns rays from one origin.
inline constexpr uint32_t kLidarRows = 64;
inline constexpr uint32_t kLidarColumns = 1024;
/// A probe's length, world units (the boxes are 1 to 3 units a side), and
/// the gap between the probing box's bottom face and the probe's origin.
inline constexpr float kProbeLength = 1.5f;
inline constexpr float kProbeGap = 0.01f;

/// `count` rays of workload `w` against `scene` as it is now (its boxes and
/// which of them move), from their own generator seeded with `seed`. Every
/// ray is valid (makeRay(): unit direction, length > 0). Fewer only where
/// the scene has none to give: `probes` without a moving box, `sight` in a
/// world whose drawn pairs all touch.
std::vector<Ray> makeWorkloadRays(RayWorkload w, const Scene& scene, uint32_t count,
                                  uint64_t seed = 2);

}  // namespace bp
