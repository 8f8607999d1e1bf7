// CellMap: the sparse index of the sweep grid, from integer cell coordinates
// to the slot of the cell in SweepGrid's dense cell array.
//
// Open addressing with linear probing and backward-shift deletion (no
// tombstones, so lookups never slow down after many teleports). The load
// factor is kept at or below 1/2. Only occupied cells have an entry, which is
// what keeps the wide `plane` scene and far-apart clusters cheap in memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace bp {

struct CellCoord {
  int32_t x = 0;
  int32_t y = 0;
  int32_t z = 0;
  friend bool operator==(const CellCoord&, const CellCoord&) = default;
};

class CellMap {
 public:
  static constexpr uint32_t kAbsent = UINT32_MAX;

  // The value stored for `c`, or kAbsent.
  uint32_t find(const CellCoord& c) const {
    if (size_ == 0) return kAbsent;
    for (uint32_t i = hashOf(c) & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.value == kAbsent) return kAbsent;
      if (s.coord == c) return s.value;
    }
  }
  // Precondition: `c` is absent.
  void insert(const CellCoord& c, uint32_t value);
  // Precondition: `c` is present.
  void assign(const CellCoord& c, uint32_t value);
  // Precondition: `c` is present.
  void erase(const CellCoord& c);
  void clear();

  uint32_t size() const { return size_; }
  size_t memoryBytes() const { return slots_.capacity() * sizeof(Slot); }

 private:
  struct Slot {
    CellCoord coord;
    uint32_t value = kAbsent;  // kAbsent marks an empty slot
  };
  static_assert(sizeof(Slot) == 16);

  static uint32_t hashOf(const CellCoord& c) {
    // Three odd 64-bit multipliers, folded: neighbouring cells land far apart.
    uint64_t h = uint64_t(uint32_t(c.x)) * 0x9E3779B97F4A7C15ull;
    h ^= uint64_t(uint32_t(c.y)) * 0xC2B2AE3D27D4EB4Full;
    h ^= uint64_t(uint32_t(c.z)) * 0x165667B19E3779F9ull;
    return uint32_t(h >> 32) ^ uint32_t(h);
  }
  void rehash(uint32_t slotCount);

  std::vector<Slot> slots_;
  uint32_t mask_ = 0;
  uint32_t size_ = 0;
};

}  // namespace bp
