#include "sweep/sweep_cell_map.h"

#include "common/assert.h"

namespace bp {

void CellMap::rehash(uint32_t slotCount) {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(slotCount, Slot{});
  mask_ = slotCount - 1;
  for (const Slot& s : old) {
    if (s.value == kAbsent) continue;
    uint32_t i = hashOf(s.coord) & mask_;
    while (slots_[i].value != kAbsent) i = (i + 1) & mask_;
    slots_[i] = s;
  }
}

void CellMap::insert(const CellCoord& c, uint32_t value) {
  BP_ASSERT(value != kAbsent && find(c) == kAbsent);  // a cell is inserted once
  if (slots_.empty() || 2 * (size_ + 1) > slots_.size())
    rehash(slots_.empty() ? 64u : uint32_t(slots_.size() * 2));
  uint32_t i = hashOf(c) & mask_;
  while (slots_[i].value != kAbsent) i = (i + 1) & mask_;
  slots_[i] = {c, value};
  ++size_;
}

void CellMap::assign(const CellCoord& c, uint32_t value) {
  for (uint32_t i = hashOf(c) & mask_;; i = (i + 1) & mask_) {
    BP_ASSERT(slots_[i].value != kAbsent);  // assign() only to a cell in the map
    if (slots_[i].coord == c) {
      slots_[i].value = value;
      return;
    }
  }
}

void CellMap::erase(const CellCoord& c) {
  uint32_t i = hashOf(c) & mask_;
  while (!(slots_[i].coord == c && slots_[i].value != kAbsent)) i = (i + 1) & mask_;
  // Backward-shift deletion: pull later members of the probe run into the
  // hole when their home slot does not lie (cyclically) in (hole, j].
  uint32_t hole = i;
  for (uint32_t j = (hole + 1) & mask_; slots_[j].value != kAbsent; j = (j + 1) & mask_) {
    const uint32_t home = hashOf(slots_[j].coord) & mask_;
    const bool homeInRange = ((j - home) & mask_) < ((j - hole) & mask_);
    if (homeInRange) continue;
    slots_[hole] = slots_[j];
    hole = j;
  }
  slots_[hole] = Slot{};
  --size_;
}

void CellMap::clear() {
  slots_.clear();
  slots_.shrink_to_fit();
  mask_ = 0;
  size_ = 0;
}

}  // namespace bp
