// mortonOrder (ray_order.h).
#include "common/ray_order.h"

#include <tbb/parallel_sort.h>

#include <algorithm>

namespace bp {

namespace {

// Spreads the low 10 bits of v to every third bit.
uint32_t spreadBits(uint32_t v) {
  v &= 0x3ffu;
  v = (v | (v << 16)) & 0x030000ffu;
  v = (v | (v << 8)) & 0x0300f00fu;
  v = (v | (v << 4)) & 0x030c30c3u;
  v = (v | (v << 2)) & 0x09249249u;
  return v;
}

}  // namespace

std::vector<uint64_t> mortonOrder(Scheduler* scheduler, std::span<const Ray> rays) {
  Aabb bounds = Aabb::empty();
  for (const Ray& r : rays) bounds = merge(bounds, Aabb{r.origin, r.origin});
  const Vec3 extent = bounds.extent();
  Vec3 scale;
  for (int a = 0; a < 3; ++a) scale[a] = extent[a] > 0.0f ? 1023.0f / extent[a] : 0.0f;
  std::vector<uint64_t> keys(rays.size());
  const auto encode = [&](uint32_t begin, uint32_t end) {
    for (uint32_t k = begin; k < end; ++k) {
      const Vec3 q = (rays[k].origin - bounds.min).cwiseProduct(scale);
      const uint32_t code = spreadBits(uint32_t(q.x())) | (spreadBits(uint32_t(q.y())) << 1) |
                            (spreadBits(uint32_t(q.z())) << 2);
      keys[k] = (uint64_t(code) << 32) | k;
    }
  };
  if (scheduler == nullptr) {
    encode(0, uint32_t(rays.size()));
    std::sort(keys.begin(), keys.end());
    return keys;
  }
  scheduler->forEach(0, uint32_t(rays.size()), 16384, encode);
  scheduler->run([&] { tbb::parallel_sort(keys.begin(), keys.end()); });
  return keys;
}

}  // namespace bp
