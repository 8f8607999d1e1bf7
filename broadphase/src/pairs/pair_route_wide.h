// PairRouter's split in AVX-512 (pair_router.h): eight pairs a step, each
// part's pairs compressed to the front of a register and stored whole.
// Two threads, N = 10^5, on the project's Zen 5 VM: the routing of sizes' 111 k pairs into
// four parts took 345-374 k TSC cycles a frame with the scalar loop and
// 235-243 k with this one (rdtsc around route() on each worker, summed),
// uniform's 49 k into two 100 -> 69 k; the sizes frame 1.410 -> 1.370 ms
// (bpbench medians of eight alternating runs of the builds, quiet minutes),
// uniform and static unchanged.
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
