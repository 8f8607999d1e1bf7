// BroadPhase::DoubleWorld: what the double path adds to the facade. The
// world position of the float frame's zero, and per proxy index the exact
// DAabb of double proxies: as last given (pending, what move() wrote) and as
// of the last update() (applied, what queries and pairs test, so that a
// query never sees a half-applied frame). Allocated on first use.
#pragma once

#include <broadphase/broad_phase.h>

#include <vector>

namespace bp {

struct BroadPhase::DoubleWorld {
  DVec3 origin;                   // the sum of the shiftOrigin() offsets
  std::vector<DAabb> pending;     // by proxy index, meaningful where isDouble
  std::vector<DAabb> applied;     // by proxy index, as of the last update()
  std::vector<uint8_t> isDouble;  // by proxy index; shorter than the proxy arrays is fine
  uint32_t count = 0;             // live double proxies
  std::vector<Aabb> frameBoxes;   // move()'s batch: each entry's float box, rounded once

  bool has(uint32_t i) const { return i < isDouble.size() && isDouble[i] != 0; }
  void reserveIndex(uint32_t i) {
    if (i < isDouble.size()) return;
    pending.resize(i + 1);
    applied.resize(i + 1);
    isDouble.resize(i + 1, 0);
  }
  size_t memoryBytes() const {
    return (pending.capacity() + applied.capacity()) * sizeof(DAabb) + isDouble.capacity() +
           frameBoxes.capacity() * sizeof(Aabb);
  }
};

}  // namespace bp
