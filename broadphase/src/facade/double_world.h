// BroadPhase::Impl::DoubleWorld: what the double path adds to the facade. The
// world position of the float frame's zero, and per proxy index the exact
// DAabb of double proxies: as last given (pending, what move() wrote) and as
// of the last update() (applied, what queries and pairs test, so that a
// query never sees a half-applied frame). Allocated on first use; the
// DAabbs in pages (common/paged_array.h), made where double proxies are, so
// that the first double proxy of a large float world costs one page.
#pragma once

#include "common/paged_array.h"
#include "facade/broad_phase_impl.h"

#include <vector>

namespace bp {

struct BroadPhase::Impl::DoubleWorld {
  DVec3 origin;                  // the sum of the shiftOrigin() offsets
  PagedArray<DAabb> pending;     // by proxy index, meaningful where isDouble
  PagedArray<DAabb> applied;     // by proxy index, as of the last update()
  PagedArray<uint8_t> isDouble;  // by proxy index; 1: a double proxy
  uint32_t count = 0;            // live double proxies
  std::vector<Aabb> frameBoxes;  // move()'s batch: each entry's float box, rounded once

  bool has(uint32_t i) const {
    const uint8_t* flag = isDouble.find(i);
    return flag != nullptr && *flag != 0;
  }
  /// Calls fn(i) for every double proxy index, in ascending order.
  template <class Fn>
  void forEachDouble(Fn&& fn) const {
    isDouble.forEachMade([&](uint32_t i, uint8_t flag) {
      if (flag != 0) fn(i);
    });
  }
  /// Makes index i's pages (its entries can be written).
  void reserveIndex(uint32_t i) {
    pending.at(i);
    applied.at(i);
    isDouble.at(i);
  }
  size_t memoryBytes() const {
    return pending.memoryBytes() + applied.memoryBytes() + isDouble.memoryBytes() +
           frameBoxes.capacity() * sizeof(Aabb);
  }
};

}  // namespace bp
