// PairRouter: the pairs of a frame split by key range while the workers
// produce them, so that the merge sorts each range on its own thread with
// nothing left to split.
//
// Why: the parallel merge of pair_merge.h first reads every pair to count
// it by range, then moves every pair to its range (across cores), and only
// then sorts the ranges, and the count and the move are a large share of
// that merge (docs/performance.md, "Figures from the code's history"). Routed
// here, a pair is moved once, by the worker that found it, from a buffer
// still in its L1 (a cell's pairs at a time), and the merge is the sorts
// alone.
//
// The ranges are one a thread, or more when a range would not fit in a
// core's L2, cut where the last frame's sorted pairs divide evenly: the pairs of one frame are
// nearly those of the last, so the split stays even without a counting pass (the first frame, or
// one after the thread count changed, guesses). The sorted list does not depend on the cuts, nor on
// which worker routed what: each part is sorted into its own place, and keys are unique.
//
// Use: begin() before the workers run, route() on each worker (any number of
// times), merge() after they all finished.
#pragma once

#include <broadphase/jobs/per_worker.h>
#include <broadphase/jobs/scheduler.h>
#include <broadphase/pair.h>
#include "pairs/pair_buffer.h"

#include <array>
#include <cstdint>
#include <span>
#include <vector>

namespace bp {

class PairRouter {
 public:
  // Sizes the worker slots and the parts for `threads`, for pair indices
  // below `capacity`, and empties every worker's parts.
  void begin(int threads, uint32_t capacity);
  // On a worker of the scheduler begin() was sized for: appends the pairs of
  // `buffer` to this worker's parts and clears it.
  void route(PairBuffer& buffer);
  // Every routed pair, sorted by (a, b), into `out`: one radix sort a part,
  // the parts as tasks. Keeps the cuts for the next begin().
  void merge(Scheduler& scheduler, std::vector<Pair>& out, std::vector<Pair>& scratch);
  // Drops every routed pair (a frame given up: its budget ran out). The cuts
  // stay those of the last merge.
  void discard();
  // Whether to route a frame like the last one: up to 2^16 pairs a thread.
  // Beyond, the parts of the merge outgrow the caches, and routing the pairs
  // through memory once more costs more than the split it saves: the counted
  // mergePairsParallel is then faster (docs/decisions.md, "The pair
  // pipeline"). A caller that merges otherwise passes its sorted pairs to
  // remember(), so that the choice follows the count.
  bool worthRouting(int threads) const;
  void remember(std::span<const Pair> sorted, int threads);
  uint32_t partCount() const { return parts_; }
  // For tests: false routes with the scalar loops even where the CPU has
  // AVX-512 (the routed pairs are the same either way).
  void useWideRoute(bool wide) { wide_ = wide && wideRouteAvailable(); }
  size_t memoryBytes() const;

 private:
  static constexpr uint32_t kBins = 256;
  // Up to this many parts, route() splits eight pairs a step in AVX-512 where
  // the CPU has it (pair_route_wide.h).
  static constexpr uint32_t kWideParts = 8;
  static bool wideRouteAvailable();
  void guessCuts(uint32_t parts, uint32_t capacity);

  PerWorker<std::vector<PairBuffer>> workers_;  // a worker's pairs, by part
  // Part q holds the pairs with cuts_[q - 1] <= a < cuts_[q] (the first and
  // last open-ended); parts_ - 1 cuts, ascending.
  std::vector<uint32_t> cuts_;
  bool cutsFromPairs_ = false;  // cuts_ came from the last merge, on threads_ threads
  // More than two parts: the part of a pair by the bin of its top 8 bits of
  // `a`, each bin in the part of its first id (parts stay ordered ranges).
  std::array<uint8_t, kBins> partOfBin_{};
  // The smallest `a` of each part, the same ranges as cuts_ (two parts) or
  // partOfBin_ (more): for the wide route, up to kWideParts parts.
  std::array<uint32_t, kWideParts> firstA_{};
  bool wide_ = wideRouteAvailable();
  uint32_t parts_ = 1;
  int threads_ = 0;
  uint32_t binShift_ = 0;
  uint32_t capacity_ = 0;
  std::vector<size_t> partStart_;  // parts_ + 1
  size_t lastPairs_ = 0;           // pairs of the last frame
};

}  // namespace bp
