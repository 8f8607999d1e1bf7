// Merging per-worker pair buffers into one list sorted by (a, b), shared by
// both structures. Internal to the library (not installed).
#pragma once

#include <broadphase/jobs/scheduler.h>
#include <broadphase/pair.h>

#include <cstdint>
#include <span>
#include <vector>

namespace bp {

// Concatenates `buffers` into `out` sorted by (a, b), for pair indices below
// `capacity`: an LSD radix sort on the compact key (a << idBits) | b. Keys
// are unique, so the result is the same whatever the buffers' order and
// split. `scratch` is reused storage. mergePairsParallel, for several threads
// and many pairs, first splits the pairs by key range into parts of about
// equal size, then sorts each part on one thread (no atomics, no
// synchronisation between the passes of a part).
void mergePairs(std::span<const std::span<const Pair>> buffers, std::vector<Pair>& out,
                std::vector<Pair>& scratch, uint32_t capacity);
void mergePairsParallel(Scheduler& scheduler, std::span<const std::span<const Pair>> buffers,
                        std::vector<Pair>& out, std::vector<Pair>& scratch, uint32_t capacity);

// The bits a pair index below `capacity` takes (at least 1): pair keys are
// (a << idBits) | b.
uint32_t idBitsFor(uint32_t capacity);

// The radix sort the merges use, on its own: the n pairs of `pieces` sorted
// by (a, b) into out[0, n), with scratch[0, n) as the other array of the
// passes. Ids below `capacity`. Single-threaded: the parallel merges run one
// a part.
void sortPairsInto(std::span<const std::span<const Pair>> pieces, size_t n, Pair* out,
                   Pair* scratch, uint32_t capacity);

}  // namespace bp
