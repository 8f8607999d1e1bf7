// mergePairs, mergePairsFrom and mergePairsParallel: per-worker pair buffers into one list
// sorted by (a, b), checked against std::sort for pair counts on both sides
// of each path's thresholds (the serial sort of small lists, one part per
// thread, more parts than threads), uneven buffers (one holding nearly
// everything, empty ones), capacities whose id bits give 1 to 3 radix
// passes, and 1, 2 and 8 threads.
#include "pairs/pair_merge.h"

#include <broadphase/jobs/scheduler.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <span>
#include <vector>

namespace bp {
namespace {

// `n` distinct pairs with ids below `capacity`, split into `buffers` pieces:
// the first takes `firstShare` of them, the rest share the remainder.
std::vector<std::vector<Pair>> makeBuffers(uint64_t seed, size_t n, uint32_t capacity, int buffers,
                                           double firstShare) {
  std::mt19937_64 rng(seed);
  std::vector<Pair> all;
  all.reserve(n + n / 8);
  while (all.size() < n) {
    for (size_t k = all.size(); k < n; ++k) {
      const uint32_t a = uint32_t(rng() % capacity), b = uint32_t(rng() % capacity);
      if (a != b) all.push_back(makePair(a, b));
    }
    std::sort(all.begin(), all.end());
    all.erase(std::unique(all.begin(), all.end()), all.end());
  }
  std::shuffle(all.begin(), all.end(), rng);
  std::vector<std::vector<Pair>> out(static_cast<size_t>(buffers));
  const size_t first = buffers == 1 ? all.size() : size_t(double(all.size()) * firstShare);
  out[0].assign(all.begin(), all.begin() + ptrdiff_t(first));
  for (size_t k = first; k < all.size(); ++k) out[1 + (k % size_t(buffers - 1))].push_back(all[k]);
  return out;
}

void expectMerged(Scheduler& scheduler, const std::vector<std::vector<Pair>>& buffers,
                  uint32_t capacity, bool parallel) {
  std::vector<std::span<const Pair>> pieces;
  std::vector<Pair> expected;
  for (const std::vector<Pair>& b : buffers) {
    pieces.emplace_back(b);
    expected.insert(expected.end(), b.begin(), b.end());
  }
  std::sort(expected.begin(), expected.end());
  std::vector<Pair> out{makePair(1, 2)}, scratch;  // `out` is overwritten
  if (parallel)
    mergePairsParallel(scheduler, pieces, out, scratch, capacity);
  else
    mergePairs(pieces, out, scratch, capacity);
  ASSERT_EQ(out.size(), expected.size());
  EXPECT_TRUE(out == expected) << "capacity " << capacity << ", " << expected.size()
                               << " pairs, threads " << scheduler.threadCount();
}

TEST(PairMerge, SerialMatchesStdSort) {
  Scheduler one(1);
  for (uint32_t capacity : {3u, 200u, 100000u, 1u << 22})
    for (size_t n : {size_t(0), size_t(1), size_t(1000), size_t(5000), size_t(60000)}) {
      if (n > uint64_t(capacity) * (capacity - 1) / 4) continue;
      expectMerged(one, makeBuffers(n + capacity, n, capacity, 3, 0.5), capacity, false);
    }
}

// mergePairsFrom sorts a buffer it may overwrite, using it as the second
// array when the passes are odd: capacities of 1, 2 and 3 passes (200: 16
// bits; 100000: 34; 2^22: 44) and counts on both sides of the serial
// std::sort threshold.
TEST(PairMerge, FromOneBufferMatchesStdSort) {
  for (uint32_t capacity : {200u, 100000u, 1u << 22})
    for (size_t n : {size_t(0), size_t(5), size_t(1023), size_t(1024), size_t(60000)}) {
      if (n > uint64_t(capacity) * (capacity - 1) / 4) continue;
      std::vector<Pair> buffer = makeBuffers(n * 3 + capacity, n, capacity, 1, 1.0)[0];
      std::vector<Pair> expected = buffer;
      std::sort(expected.begin(), expected.end());
      std::vector<Pair> out{makePair(1, 2)}, scratch;  // `out` is overwritten
      mergePairsFrom(buffer, out, scratch, capacity);
      EXPECT_TRUE(out == expected) << "capacity " << capacity << ", " << n << " pairs";
    }
}

TEST(PairMerge, ParallelMatchesStdSort) {
  for (int threads : {1, 2, 8}) {
    Scheduler scheduler(threads);
    for (uint32_t capacity : {200u, 100000u, 1u << 22})
      for (size_t n : {size_t(0), size_t(17), size_t(20000), size_t(300000)}) {
        if (n > uint64_t(capacity) * (capacity - 1) / 4) continue;
        // Even buffers, and one buffer holding 97% (a worker that swept the
        // heavy cells), with an empty one among them.
        expectMerged(scheduler, makeBuffers(n, n, capacity, threads + 1, 0.5), capacity, true);
        auto uneven = makeBuffers(n + 1, n, capacity, threads + 1, 0.97);
        uneven.push_back({});
        expectMerged(scheduler, uneven, capacity, true);
      }
  }
}

}  // namespace
}  // namespace bp
