// sortPairs: the per-worker pair buffers into one list sorted by (a, b).
//
// One buffer (one thread): a two-pass LSD radix sort by b then a with
// capacity-sized counters, radixSortSerial(). Several buffers: the shared
// parallel merge of pair_merge.h (a split by key range, then one radix sort
// per part, the parts as tasks). Pair keys are unique,
// so the result is the one canonical order for any thread count.
#include "bvh/bvh.h"

#include "pairs/pair_merge.h"

namespace bp {

void Bvh::sortPairs(Scheduler& scheduler, std::vector<Pair>& out) {
  const int buffers = pairBuffers_.size();
  size_t total = 0;
  int used = 0;
  for (int w = 0; w < buffers; ++w) {
    total += pairBuffers_[w].size();
    used += pairBuffers_[w].empty() ? 0 : 1;
  }
  out.resize(total);
  if (total == 0) return;

  if (used > 1 && scheduler.threadCount() > 1) {
    // Several workers' buffers: the shared parallel merge. (A counting sort on `a` with atomic
    // bucket cursors and a sort of each bucket was used here before: on clustered 10^5, 1.7 M
    // pairs, it took much of a two-thread frame and gave no speed-up at all; docs/performance.md,
    // "Figures from the code's history".)
    std::vector<std::span<const Pair>>& pieces = scratchPieces_;
    pieces.clear();
    for (int w = 0; w < buffers; ++w) pieces.emplace_back(pairBuffers_[w]);
    mergePairsParallel(scheduler, pieces, out, scratchPairs_, pool_.capacity());
    return;
  }
  bucketStart_.assign(size_t(pool_.capacity()) + 1, 0);
  radixSortSerial(out);
}

// Serial: two counting passes, LSD (by b, then stably by a), so no bucket is
// ever sorted by comparisons: a big box's bucket of thousands of pairs made
// the comparison sorts a sixth of findPairs on `sizes`. Both passes count in
// one read of the buffers. Expects bucketStart_ zeroed, capacity + 1 long.
void Bvh::radixSortSerial(std::vector<Pair>& out) {
  const uint32_t buckets = pool_.capacity();
  std::vector<uint32_t>& byA = bucketStart_;
  std::vector<uint32_t>& byB = bucketCursor_;
  byB.assign(size_t(buckets) + 1, 0);
  for (int w = 0; w < pairBuffers_.size(); ++w)
    for (const Pair& p : pairBuffers_[w]) {
      ++byA[p.a + 1];
      ++byB[p.b + 1];
    }
  for (uint32_t k = 0; k < buckets; ++k) {
    byA[k + 1] += byA[k];
    byB[k + 1] += byB[k];
  }
  std::vector<Pair>& tmp = scratchPairs_;
  tmp.resize(out.size());
  for (int w = 0; w < pairBuffers_.size(); ++w)
    for (const Pair& p : pairBuffers_[w]) tmp[byB[p.b]++] = p;
  for (const Pair& p : tmp) out[byA[p.a]++] = p;
}

}  // namespace bp
