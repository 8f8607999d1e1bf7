// PairRouter: pairs routed by workers in any split, then merged, equal the
// std::sort of them all, frame after frame: the first frame (guessed cuts),
// later ones (cuts from the last frame's pairs), pairs that moved to other
// ids than the cuts were made for, one `a` shared by thousands of pairs,
// few pairs (the one-thread sort), many (more parts than threads, routed
// through the bin table), a thread count or capacity that changed between
// frames; the AVX-512 split of the pairs and the scalar one.
#include "pairs/pair_router.h"
#include <broadphase/jobs/scheduler.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace bp {
namespace {

// `n` distinct pairs with a in [aLo, aHi) and b below `capacity`, shuffled.
std::vector<Pair> makePairs(uint64_t seed, size_t n, uint32_t aLo, uint32_t aHi,
                            uint32_t capacity) {
  std::mt19937_64 rng(seed);
  std::vector<Pair> all;
  while (all.size() < n) {
    for (size_t k = all.size(); k < n; ++k) {
      const uint32_t a = aLo + uint32_t(rng() % (aHi - aLo));
      if (a + 1 >= capacity) continue;
      const uint32_t b = a + 1 + uint32_t(rng() % (capacity - a - 1));
      all.push_back({a, b});
    }
    std::sort(all.begin(), all.end());
    all.erase(std::unique(all.begin(), all.end()), all.end());
  }
  std::shuffle(all.begin(), all.end(), rng);
  return all;
}

// Routes `pairs` from tasks of `chunk` pairs each (on whatever worker runs
// them), merges, and compares with std::sort.
void expectRoutedAndMerged(Scheduler& scheduler, PairRouter& router, const std::vector<Pair>& pairs,
                           uint32_t capacity, size_t chunk) {
  router.begin(scheduler.threadCount(), capacity);
  const uint32_t tasks = uint32_t((pairs.size() + chunk - 1) / chunk);
  scheduler.forEach(0, tasks, 1, [&](uint32_t begin, uint32_t end) {
    PairBuffer buffer;
    for (uint32_t t = begin; t < end; ++t) {
      const size_t first = t * chunk, count = std::min(chunk, pairs.size() - first);
      std::copy_n(pairs.begin() + ptrdiff_t(first), count, buffer.writable(count));
      buffer.advance(count);
      router.route(buffer);
      ASSERT_TRUE(buffer.empty());
    }
  });
  std::vector<Pair> out = {{7, 9}}, scratch;  // out is replaced, not appended to
  router.merge(scheduler, out, scratch);
  std::vector<Pair> expected = pairs;
  std::sort(expected.begin(), expected.end());
  ASSERT_EQ(out.size(), expected.size()) << "threads " << scheduler.threadCount();
  EXPECT_TRUE(out == expected) << pairs.size() << " pairs, capacity " << capacity << ", threads "
                               << scheduler.threadCount() << ", parts " << router.partCount();
}

// This test and the next run with the AVX-512 split (where the CPU has it)
// and with the scalar loops: up to eight parts take the first.
TEST(PairRouter, MergedEqualsStdSortFrameAfterFrame) {
  for (bool wide : {true, false})
    for (int threads : {1, 2, 3, 8}) {
      Scheduler scheduler(threads);
      for (uint32_t capacity : {200u, 100000u, 1u << 22})
        for (size_t n : {size_t(0), size_t(17), size_t(5000), size_t(70000), size_t(300000)}) {
          if (n > uint64_t(capacity) * (capacity - 1) / 8) continue;
          PairRouter router;
          router.useWideRoute(wide);
          // Frame 1 guesses the cuts; frame 2 cuts by frame 1's pairs; frame 3's
          // pairs all lie above where frame 2 cut (one part gets them all);
          // frame 4 has no pairs, frame 5 some again.
          expectRoutedAndMerged(scheduler, router, makePairs(n, n, 0, capacity, capacity), capacity,
                                1000);
          expectRoutedAndMerged(scheduler, router, makePairs(n + 1, n, 0, capacity, capacity),
                                capacity, 333);
          expectRoutedAndMerged(scheduler, router,
                                makePairs(n + 2, n, capacity / 2, capacity, capacity), capacity,
                                4096);
          expectRoutedAndMerged(scheduler, router, {}, capacity, 1);
          expectRoutedAndMerged(scheduler, router, makePairs(n + 3, n, 0, capacity, capacity),
                                capacity, 100000);
        }
    }
}

TEST(PairRouter, OneSharedLowerIdAmongThousands) {
  // A huge box of low id pairs with everything (the `sizes` scene): every
  // cut falls on the same a.
  for (int threads : {2, 8}) {
    Scheduler scheduler(threads);
    for (bool wide : {true, false}) {
      PairRouter router;
      router.useWideRoute(wide);
      std::vector<Pair> pairs;
      for (uint32_t b = 4; b < 60000; ++b) pairs.push_back({3, b});
      std::shuffle(pairs.begin(), pairs.end(), std::mt19937_64(5));
      for (int frame = 0; frame < 3; ++frame)
        expectRoutedAndMerged(scheduler, router, pairs, 60000, 700);
    }
  }
}

TEST(PairRouter, ThreadCountAndCapacityMayChangeBetweenFrames) {
  Scheduler two(2), three(3);
  PairRouter router;
  const std::vector<Pair> small = makePairs(1, 40000, 0, 5000, 5000);
  const std::vector<Pair> large = makePairs(2, 40000, 0, 1u << 20, 1u << 20);
  expectRoutedAndMerged(two, router, small, 5000, 999);
  expectRoutedAndMerged(two, router, large, 1u << 20, 999);  // ids gained bits
  expectRoutedAndMerged(three, router, large, 1u << 20, 999);
  expectRoutedAndMerged(two, router, small, 5000, 999);
  expectRoutedAndMerged(two, router, small, 5000, 999);
}

}  // namespace
}  // namespace bp

namespace bp {
namespace {

TEST(PairRouter, RoutesWhileThePairsFitAndCutsFromAnotherMerge) {
  Scheduler two(2);
  PairRouter router;
  EXPECT_TRUE(router.worthRouting(2));  // nothing seen yet
  const std::vector<Pair> many = makePairs(9, 140000, 0, 1u << 20, 1u << 20);
  expectRoutedAndMerged(two, router, many, 1u << 20, 5000);
  EXPECT_FALSE(router.worthRouting(2));  // 2^16 a thread at most
  EXPECT_TRUE(router.worthRouting(3));
  // A frame merged some other way hands its sorted pairs over: the next
  // frame routes, cut by them.
  std::vector<Pair> fewer = makePairs(10, 90000, 0, 1u << 20, 1u << 20);
  std::sort(fewer.begin(), fewer.end());
  router.remember(fewer, 2);
  EXPECT_TRUE(router.worthRouting(2));
  std::shuffle(fewer.begin(), fewer.end(), std::mt19937_64(11));
  expectRoutedAndMerged(two, router, fewer, 1u << 20, 5000);
  EXPECT_EQ(router.partCount(), 2u);
}

}  // namespace
}  // namespace bp
