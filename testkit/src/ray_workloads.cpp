// The ray workloads of docs/scenes.md, "Ray workloads". Compiled with
// -ffp-contract=off like the rest of the testkit; std::sin and std::cos of
// the lidar's angles are glibc's, so the lidar rays are bit for bit the same
// on machines with the same C library.
#include <broadphase/testkit/ray_workloads.h>

#include <algorithm>
#include <cmath>

namespace bp {

const char* rayWorkloadName(RayWorkload w) {
  switch (w) {
    case RayWorkload::random: return "random";
    case RayWorkload::lidar: return "lidar";
    case RayWorkload::probes: return "probes";
    case RayWorkload::sight: return "sight";
  }
  return "?";
}

std::optional<RayWorkload> parseRayWorkload(std::string_view name) {
  for (RayWorkload w : kAllRayWorkloads)
    if (name == rayWorkloadName(w)) return w;
  return std::nullopt;
}

namespace {

Vec3 centreOf(const Aabb& b) { return 0.5f * (b.min + b.max); }

// A sensor every kLidarRows x kLidarColumns rays, at a uniform point of the
// motion domain; row r looks at elevation -25 + 40 r / 63 degrees (a
// spinning lidar's fan, tilted down), column c at azimuth 360 c / 1024
// degrees, z up. Rays are laid out sensor by sensor, row by row: neighbours
// in the batch are neighbours in the scan.
std::vector<Ray> lidarRays(const Scene& scene, uint32_t count, uint64_t seed) {
  const float length = scene.bounds.maxCoeff() / 4.0f;
  constexpr float kDegree = 3.14159265358979f / 180.0f;
  SceneRng rng(seed);
  std::vector<Ray> rays;
  rays.reserve(count);
  Vec3 origin(0, 0, 0);
  for (uint32_t k = 0; k < count; ++k) {
    const uint32_t inScan = k % (kLidarRows * kLidarColumns);
    if (inScan == 0)
      origin = Vec3(rng.uniform() * scene.bounds.x(), rng.uniform() * scene.bounds.y(),
                    rng.uniform() * scene.bounds.z());
    const uint32_t row = inScan / kLidarColumns, column = inScan % kLidarColumns;
    const float elevation = (-25.0f + 40.0f * float(row) / float(kLidarRows - 1)) * kDegree;
    const float azimuth = (360.0f * float(column) / float(kLidarColumns)) * kDegree;
    const Vec3 d(std::cos(elevation) * std::cos(azimuth), std::cos(elevation) * std::sin(azimuth),
                 std::sin(elevation));
    rays.push_back(makeRay(origin, d, length));
  }
  return rays;
}

// One probe a moving box, in box order (again from the first when `count`
// is larger than the moving boxes): straight down (-z) from kProbeGap below
// the centre of its bottom face, kProbeLength long, so it starts next to
// its own box but outside it (a batch has one filter for every ray, so the
// probe cannot exclude its own box).
std::vector<Ray> probeRays(const Scene& scene, uint32_t count) {
  std::vector<uint32_t> moving;
  for (uint32_t i = 0; i < scene.n; ++i)
    if (!scene.isStatic[i]) moving.push_back(i);
  std::vector<Ray> rays;
  if (moving.empty()) return rays;
  rays.reserve(count);
  for (uint32_t k = 0; k < count; ++k) {
    const Aabb& b = scene.boxes[moving[k % moving.size()]];
    const Vec3 c = centreOf(b);
    rays.push_back(
        makeRay(Vec3(c.x(), c.y(), b.min.z() - kProbeGap), Vec3(0, 0, -1), kProbeLength));
  }
  return rays;
}

// Lines of sight: a box a drawn uniformly, then boxes b until one's centre
// lies within a quarter of the domain's largest side of a's (at most 64
// draws, the last kept), whose boxes do not overlap. The segment runs from
// where the centre-to-centre line leaves a to where it enters b, each end
// moved a hundredth of a unit inward (so neither end box is hit: a batch
// has one filter for every ray); a pair too close for that is drawn again.
std::vector<Ray> sightRays(const Scene& scene, uint32_t count, uint64_t seed) {
  const float reach = scene.bounds.maxCoeff() / 4.0f;
  constexpr float kEndGap = 0.01f;
  SceneRng rng(seed);
  std::vector<Ray> rays;
  rays.reserve(count);
  const auto draw = [&] { return std::min(uint32_t(rng.uniform() * float(scene.n)), scene.n - 1); };
  // Bounded: a world whose boxes all touch gives fewer rays, not a hang.
  for (uint64_t attempt = 0; rays.size() < count && scene.n > 1 && attempt < 64ull * count;
       ++attempt) {
    const uint32_t a = draw();
    uint32_t b = draw();
    for (int tries = 1; tries < 64; ++tries) {
      if (b != a && (centreOf(scene.boxes[b]) - centreOf(scene.boxes[a])).norm() <= reach) break;
      b = draw();
    }
    const Vec3 ca = centreOf(scene.boxes[a]), cb = centreOf(scene.boxes[b]);
    if (a == b || ca == cb) continue;
    // Where the unbounded line leaves a and enters b (the slab test's
    // exit from a, entry into b).
    const Ray line = makeRay(ca, cb - ca, 1.0f);
    float aIn = -INFINITY, aOut = INFINITY, bIn = -INFINITY, bOut = INFINITY;
    clipRayAabb(line.origin, line.invDirection, scene.boxes[a], aIn, aOut);
    clipRayAabb(line.origin, line.invDirection, scene.boxes[b], bIn, bOut);
    const float from = aOut + kEndGap;
    const float to = bIn - kEndGap;
    if (!(to > from)) continue;  // the boxes touch or overlap: no segment between them
    rays.push_back(makeRay(ca + from * line.direction, line.direction, to - from));
  }
  return rays;
}

}  // namespace

std::vector<Ray> makeWorkloadRays(RayWorkload w, const Scene& scene, uint32_t count,
                                  uint64_t seed) {
  switch (w) {
    case RayWorkload::random: return makeRaysIn(scene.bounds, count, seed);
    case RayWorkload::lidar: return lidarRays(scene, count, seed);
    case RayWorkload::probes: return probeRays(scene, count);
    case RayWorkload::sight: return sightRays(scene, count, seed);
  }
  return {};
}

}  // namespace bp
