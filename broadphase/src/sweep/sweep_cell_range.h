// Walking a CellRange (the closed box of cell coordinates a box overlaps),
// shared by the parts of SweepGrid that register proxies in cells.
#pragma once

#include "sweep/sweep_grid.h"

namespace bp {

inline bool rangeContains(const CellRange& r, const CellCoord& c) {
  return (r.lo[0] <= c.x) & (c.x <= r.hi[0]) & (r.lo[1] <= c.y) & (c.y <= r.hi[1]) &
         (r.lo[2] <= c.z) & (c.z <= r.hi[2]);
}

// fn(CellCoord) for every cell of r, x outermost (a fixed order: cells are
// created in it).
template <class Fn>
void forEachCoord(const CellRange& r, Fn&& fn) {
  for (int32_t x = r.lo[0]; x <= r.hi[0]; ++x)
    for (int32_t y = r.lo[1]; y <= r.hi[1]; ++y)
      for (int32_t z = r.lo[2]; z <= r.hi[2]; ++z) fn(CellCoord{x, y, z});
}

}  // namespace bp
