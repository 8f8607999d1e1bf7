// PairRouter's split in AVX-512 (pair_router.h): eight pairs a step, each
// part's pairs compressed to the front of a register and stored whole. The
// routing takes markedly fewer cycles than the scalar loop's, and the frame
// of `sizes` (many pairs, four parts) is a little faster for it
// (docs/decisions.md, "The pair pipeline"; `uniform`'s routing:
// docs/performance.md, "Figures from the code's history").
#pragma once

#include <broadphase/pair.h>

#include <cstdint>

namespace bp::wide {

inline constexpr uint32_t kMaxRouteParts = 8;

// Appends each pair of [p, end) to at[q], q the part whose range holds its
// lower id: part q holds firstA[q] <= a < firstA[q + 1], with firstA[0] = 0
// and firstA ascending; 2 <= parts <= kMaxRouteParts. Whole blocks of
// eight: each at[q] needs room for the pairs it gets plus 8 (a step stores a
// full register). Returns where it stopped, fewer than eight pairs before
// `end`. Only where wide::available() (common/wide_available.h).
const Pair* routePairs(const Pair* p, const Pair* end, Pair** at, const uint32_t* firstA,
                       uint32_t parts);

}  // namespace bp::wide
