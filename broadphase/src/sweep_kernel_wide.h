// The 16-lane (AVX-512) form of the cell sweeps of sweep_kernel.cpp, compiled
// for AVX-512 whatever the build's baseline and called only when the CPU has
// it (SweepKernel::automatic), or when asked for (SweepKernel::wide).
//
// Why 16 lanes when most entries of a cell have fewer than 8 candidates: one
// block then nearly always holds every candidate, so the loop's exit is
// predicted and the per-entry cost is one block. The output of a block is
// written without a branch, pairs or not (a branch on "any pair" mispredicts:
// uniform 10^5 went from 2.17 to 2.67 ms with one). The 8-lane kernel runs
// 1-3 blocks an entry with an exit that mispredicts about one entry in three.
#pragma once

#include <broadphase/pair_buffer.h>

#include <cstdint>

namespace bp::wide {

// The CPU can run these (AVX-512 F, BW, VL, DQ). Checked once.
bool available();

// The SoA arrays of one cell, as SweepCell lays them out: min x, max x,
// min y, max y, min z, max z, each with at least 16 readable floats of padding
// past n (+inf for min x), flags likewise (padding 0).
struct CellArrays {
  const float* key[6];
  const uint8_t* flags;
  const uint32_t* ids;
  uint32_t n;
};

// The pairs of entries [begin, end) of a moving cell with the entries after
// them (the dedup rule on the flags): over [0, n), every pair of the cell.
void sweepCell(const CellArrays& cell, uint32_t begin, uint32_t end, PairBuffer& out);
// The pairs of entries [begin, end) of a moving cell with its static twin,
// whose entries reach at most `reach` back along x (see
// SweepGrid::sweepCellAgainst).
void sweepCellAgainst(const CellArrays& moving, uint32_t begin, uint32_t end,
                      const CellArrays& statics, float reach, PairBuffer& out);

}  // namespace bp::wide
