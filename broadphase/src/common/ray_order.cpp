// mortonOrder (ray_order.h).
#include "common/ray_order.h"

#include <algorithm>

namespace bp {

namespace {

constexpr int kBitsPerAxis = 5;
constexpr uint32_t kCells = 1u << (3 * kBitsPerAxis);

// Spreads the low 5 bits of v to every third bit.
uint32_t spreadBits(uint32_t v) {
  v &= 0x1fu;
  v = (v | (v << 8)) & 0x0300f00fu;
  v = (v | (v << 4)) & 0x030c30c3u;
  v = (v | (v << 2)) & 0x09249249u;
  return v;
}

// The indices [0, n) by the Morton code of pointAt(k), as mortonOrder.
template <class PointAt>
std::vector<uint32_t> mortonOrderOf(Scheduler* scheduler, uint32_t n, PointAt&& pointAt) {
  // Equal chunks, one a thread; each pass runs them side by side. The order
  // is (code, index), whatever the chunks.
  const uint32_t chunks = scheduler ? uint32_t(std::max(1, scheduler->threadCount())) : 1u;
  const uint32_t size = (n + chunks - 1) / chunks;
  const auto eachChunk = [&](auto&& body) {
    const auto run = [&](uint32_t first, uint32_t last) {
      for (uint32_t c = first; c < last; ++c) body(c, c * size, std::min(n, (c + 1) * size));
    };
    if (scheduler)
      scheduler->forEach(0, chunks, 1, run);
    else
      run(0, chunks);
  };
  std::vector<Aabb> chunkBounds(chunks, Aabb::empty());
  eachChunk([&](uint32_t c, uint32_t begin, uint32_t end) {
    for (uint32_t k = begin; k < end; ++k)
      chunkBounds[c] = merge(chunkBounds[c], Aabb{pointAt(k), pointAt(k)});
  });
  Aabb bounds = Aabb::empty();
  for (const Aabb& b : chunkBounds) bounds = merge(bounds, b);
  const Vec3 extent = bounds.extent();
  constexpr float kLast = float((1 << kBitsPerAxis) - 1);
  Vec3 scale;
  for (int a = 0; a < 3; ++a) scale[a] = extent[a] > 0.0f ? kLast / extent[a] : 0.0f;
  std::vector<uint16_t> codes(n);
  std::vector<uint32_t> count(size_t(chunks) * kCells, 0);  // per chunk, per cell
  eachChunk([&](uint32_t c, uint32_t begin, uint32_t end) {
    uint32_t* tally = count.data() + size_t(c) * kCells;
    for (uint32_t k = begin; k < end; ++k) {
      const Vec3 q = (pointAt(k) - bounds.min).cwiseProduct(scale);
      codes[k] = uint16_t(spreadBits(uint32_t(q.x())) | (spreadBits(uint32_t(q.y())) << 1) |
                          (spreadBits(uint32_t(q.z())) << 2));
      ++tally[codes[k]];
    }
  });
  // Each chunk's first place in each cell: cells in order, chunks in order
  // within a cell.
  uint32_t place = 0;
  for (uint32_t cell = 0; cell < kCells; ++cell)
    for (uint32_t c = 0; c < chunks; ++c) {
      const uint32_t here = count[size_t(c) * kCells + cell];
      count[size_t(c) * kCells + cell] = place;
      place += here;
    }
  std::vector<uint32_t> order(n);
  eachChunk([&](uint32_t c, uint32_t begin, uint32_t end) {
    uint32_t* next = count.data() + size_t(c) * kCells;
    for (uint32_t k = begin; k < end; ++k) order[next[codes[k]]++] = k;
  });
  return order;
}

}  // namespace

std::vector<uint32_t> mortonOrder(Scheduler* scheduler, std::span<const Ray> rays) {
  return mortonOrderOf(scheduler, uint32_t(rays.size()),
                       [&](uint32_t k) -> const Vec3& { return rays[k].origin; });
}

std::vector<uint32_t> mortonOrder(Scheduler* scheduler, std::span<const Vec3> points) {
  return mortonOrderOf(scheduler, uint32_t(points.size()),
                       [&](uint32_t k) -> const Vec3& { return points[k]; });
}

}  // namespace bp
