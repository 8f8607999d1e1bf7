// mortonOrder (ray_order.h).
#include "common/ray_order.h"

namespace bp {

namespace {

constexpr int kBitsPerAxis = 5;

// Spreads the low 5 bits of v to every third bit.
uint32_t spreadBits(uint32_t v) {
  v &= 0x1fu;
  v = (v | (v << 8)) & 0x0300f00fu;
  v = (v | (v << 4)) & 0x030c30c3u;
  v = (v | (v << 2)) & 0x09249249u;
  return v;
}

}  // namespace

std::vector<uint32_t> mortonOrder(std::span<const Ray> rays) {
  Aabb bounds = Aabb::empty();
  for (const Ray& r : rays) bounds = merge(bounds, Aabb{r.origin, r.origin});
  const Vec3 extent = bounds.extent();
  constexpr float kLast = float((1 << kBitsPerAxis) - 1);
  Vec3 scale;
  for (int a = 0; a < 3; ++a) scale[a] = extent[a] > 0.0f ? kLast / extent[a] : 0.0f;
  const uint32_t n = uint32_t(rays.size());
  std::vector<uint16_t> codes(n);
  std::vector<uint32_t> start((1u << (3 * kBitsPerAxis)) + 1, 0);
  for (uint32_t k = 0; k < n; ++k) {
    const Vec3 q = (rays[k].origin - bounds.min).cwiseProduct(scale);
    codes[k] = uint16_t(spreadBits(uint32_t(q.x())) | (spreadBits(uint32_t(q.y())) << 1) |
                        (spreadBits(uint32_t(q.z())) << 2));
    ++start[codes[k] + 1];
  }
  for (size_t c = 1; c < start.size(); ++c) start[c] += start[c - 1];
  std::vector<uint32_t> order(n);
  for (uint32_t k = 0; k < n; ++k) order[start[codes[k]]++] = k;
  return order;
}

}  // namespace bp
