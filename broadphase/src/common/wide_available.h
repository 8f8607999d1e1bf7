// wide::available(): whether this CPU runs the AVX-512 code paths (the
// 16-lane cell sweeps, the pair router's split; common/wide_target.h says
// how they are compiled). Here, below both, so that the pairs and the sweep
// ask without including each other.
#pragma once

namespace bp::wide {

/// The CPU has AVX-512 F, BW, VL and DQ, and the build has the wide code.
/// Checked once.
bool available();

}  // namespace bp::wide
