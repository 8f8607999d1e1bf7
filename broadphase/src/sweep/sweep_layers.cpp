// Broadphase layers in SweepGrid: which cells a moving cell is swept against.
//
// Every group of cells (a layer's moving or static proxies, groupOfLayer)
// lives at the same coordinates as the others, so the pairs between two
// groups are those between their cells at each coordinate, each reported
// once by the dedup rule of the cell holding the min corner of the overlap
// (as a moving cell and its static twin). A moving cell of layer L sweeps:
// - itself and its static twin (group 2L + 1), when L collides with L;
// - for each other layer M that L collides with: M's static cell (group
//   2M + 1), and M's moving cell (group 2M) when M > L, so that a pair of
//   moving cells is swept once, by the cell of the lower layer.
// No other combination is ever swept: candidates of layers that never
// collide are not generated. The cells of every group are refreshed before
// the first sweep (findPairsInto), as a cell reads other moving cells.
#include "sweep/sweep_grid.h"

namespace bp {

void SweepGrid::sweepEntriesLayered(uint32_t u, uint32_t begin, uint32_t end, PairBuffer& buffer,
                                    PairBudget* budget) const {
  const SweepCell& c = cells_[u].value;
  const uint32_t layer = c.layer >> 1;
  // Layers with cells: those below maps_.size() / 2.
  const uint32_t layersHeld = uint32_t(maps_.size() / 2);
  const uint32_t present = layersHeld >= 32 ? ~uint32_t(0) : (uint32_t(1) << layersHeld) - 1;
  uint32_t row = table_.rows[layer] & present;
  // A cell of the table's row at this coordinate, or CellMap::kAbsent.
  auto cellAt = [&](uint32_t group) {
    const CellMap& map = maps_[group];
    return map.size() != 0 ? map.find(c.coord) : CellMap::kAbsent;
  };
  if (row & (uint32_t(1) << layer)) {
    sweepSelf(u, begin, end, buffer, budget);
    if (const uint32_t twin = cellAt(groupOfLayer(layer, true)); twin != CellMap::kAbsent)
      sweepAgainstCell(u, begin, end, twin, buffer, budget);
    row &= ~(uint32_t(1) << layer);
  }
  while (row != 0) {
    const uint32_t other = uint32_t(__builtin_ctz(row));
    row &= row - 1;
    if (budget && budget->exceeded()) return;
    if (const uint32_t s = cellAt(groupOfLayer(other, true)); s != CellMap::kAbsent)
      sweepAgainstCell(u, begin, end, s, buffer, budget);
    if (other > layer)
      if (const uint32_t m = cellAt(groupOfLayer(other, false)); m != CellMap::kAbsent)
        sweepAgainstCell(u, begin, end, m, buffer, budget);
  }
}

}  // namespace bp
