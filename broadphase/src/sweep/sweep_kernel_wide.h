// The 16-lane (AVX-512) form of the cell sweeps of sweep_kernel.cpp, compiled
// for AVX-512 whatever the build's baseline and called only when the CPU has
// it (SweepKernel::automatic), or when asked for (SweepKernel::wide).
//
// Why 16 lanes when most entries of a cell have fewer than 8 candidates: one
// block then nearly always holds every candidate, so the loop's exit is
// predicted and the per-entry cost is one block. The output is written
// without a branch per entry on "any pair" (one mispredicts, and made
// `uniform` much slower): the self sweep stores each entry's first-block
// mask and writes the pairs in a second pass over the masks, 32 at a time,
// on cells where an entry meets at most 16 candidates on average, where
// most entries find no pair; on the crowded cells of `clustered`, where
// most entries find pairs, deferring was slower, so they write as they go.
// The sweep against the static twin writes every block's pairs as it goes
// (deferred there, `static` was slower). The 8-lane kernel runs 1-3 blocks
// an entry with an exit that mispredicts about one entry in three. (The
// measurements: docs/decisions.md, "The cell kernels".)
#pragma once

#include "common/wide_available.h"
#include "pairs/pair_budget.h"
#include "pairs/pair_buffer.h"

#include <cstdint>

namespace bp::wide {

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
// deferWrites: the first block's pairs are written in a second pass (see
// above), else as found. With a budget, the sweep asks a BudgetGate before
// each entry (and each 32 entries of the second pass) and stops when it
// says so (budget_gate.h).
void sweepCell(const CellArrays& cell, uint32_t begin, uint32_t end, bool deferWrites,
               PairBuffer& out, PairBudget* budget);
// The pairs of entries [begin, end) of a moving cell with its static twin,
// whose entries reach at most `reach` back along x (see
// SweepGrid::sweepCellAgainst). The budget as above.
void sweepCellAgainst(const CellArrays& moving, uint32_t begin, uint32_t end,
                      const CellArrays& statics, float reach, PairBuffer& out, PairBudget* budget);

}  // namespace bp::wide
