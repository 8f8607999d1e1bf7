// Merging per-worker pair buffers into one list sorted by (a, b), shared by
// both structures. Internal to the library (not installed).
#pragma once

#include <broadphase/jobs/scheduler.h>
#include <broadphase/pair.h>

#include <cstddef>
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

// Below this many pairs a merge sorts on one thread: a few thousand pairs
// merge barely faster on two threads than on one, and fewer would pay more
// for the fork than they save (docs/decisions.md, "The pair pipeline").
inline constexpr size_t kParallelMergeFrom = 4096;

// How many key ranges a parallel merge sorts, one task each: at least one a
// thread, more when large, so that a part's radix passes run in the core's
// L2 (parts of about 32 K pairs: 256 KiB in each of the two arrays; faster
// than one part a thread, docs/decisions.md, "The pair pipeline"); a
// multiple of the thread count, so that the threads end together (sizes
// 10^5, 111 k pairs: 3 parts on 2 threads left one thread two of them). At
// most 256.
uint32_t mergePartCount(size_t pairs, int threads);

// The bits a pair index below `capacity` takes (at least 1): pair keys are
// (a << idBits) | b.
uint32_t idBitsFor(uint32_t capacity);

// The radix sort the merges use, on its own: the n pairs of `pieces` sorted
// by (a, b) into out[0, n), with scratch[0, n) as the other array of the
// passes. Ids below `capacity`. Single-threaded: the parallel merges run one
// a part.
void sortPairsInto(std::span<const std::span<const Pair>> pieces, size_t n, Pair* out,
                   Pair* scratch, uint32_t capacity);
// Whether sortPairsInto's passes are odd in number for this capacity (34-bit
// keys at N = 10^5: three). Then the first pass, which reads every piece,
// writes `out`, and `scratch` is first written after it: the storage of a
// piece may then serve as the scratch array.
bool radixPassesOdd(uint32_t capacity);

// mergePairs for a single buffer that may be overwritten: when the radix
// passes are odd in number, the buffer itself is their second array (the
// first pass has read it all by then), so the sort runs over two arrays
// rather than three; `scratch` serves otherwise. Uniform 10^5, one thread:
// 49 k pairs, 400 KB an array, and three arrays outgrew the 1 MiB L2.
void mergePairsFrom(std::span<Pair> buffer, std::vector<Pair>& out, std::vector<Pair>& scratch,
                    uint32_t capacity);

}  // namespace bp
