// sortCellKeys: the sort of a cell's keys at each refresh. Checked against
// std::sort on the inputs it meets (last frame's order with small moves, plus
// entrants appended) and on the ones that take its other paths: a new cell
// (no old keys), a crowd of entrants, more entrants than fit its stack
// buffer, moves past the insertion sort's budget, and reversed input.
#include "sweep/sweep_sort.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

namespace bp {
namespace {

// `old` keys in ascending order, then each moved by up to `jitter` places'
// worth of key, then `entrants` random keys appended. Keys are unique.
std::vector<uint64_t> makeKeys(std::mt19937_64& rng, uint32_t old, uint32_t entrants,
                               uint64_t jitter) {
  std::vector<uint64_t> keys;
  std::uniform_int_distribution<uint64_t> noise(0, jitter * 64);
  for (uint32_t k = 0; k < old; ++k) keys.push_back(((uint64_t(k) * 64 + noise(rng)) << 20) | k);
  for (uint32_t k = 0; k < entrants; ++k)
    keys.push_back((std::uniform_int_distribution<uint64_t>(0, uint64_t(old + 1) * 64)(rng) << 20) |
                   (old + k));
  return keys;
}

// Every pre-pass this build and CPU run (the automatic one is the widest).
void expectSorts(const std::vector<uint64_t>& input, uint32_t old) {
  std::vector<uint64_t> expected = input;
  std::sort(expected.begin(), expected.end());
  for (SortPrepass p :
       {SortPrepass::automatic, SortPrepass::bubble, SortPrepass::avx2, SortPrepass::avx512}) {
    if (!sortPrepassAvailable(p)) continue;
    std::vector<uint64_t> keys = input;
    sortCellKeys(keys.data(), old, uint32_t(keys.size()), p);
    EXPECT_EQ(keys, expected) << "old " << old << ", n " << keys.size() << ", prepass " << int(p);
  }
}

TEST(SweepSort, NearlySortedWithEntrants) {
  std::mt19937_64 rng(7);
  for (uint32_t old : {0u, 1u, 2u, 7u, 100u, 300u, 2000u})
    for (uint32_t entrants : {0u, 1u, 3u, old / 8, old / 4, old / 4 + 1, old})
      for (uint64_t jitter : {0u, 1u, 3u})
        for (int repeat = 0; repeat < 4; ++repeat)
          expectSorts(makeKeys(rng, old, entrants, jitter), old);
}

TEST(SweepSort, ManyEntrantsSpillPastTheStackBuffer) {
  std::mt19937_64 rng(11);
  // More than 64 entrants, still at most a quarter of the old keys: the
  // merge path with its heap buffer.
  for (uint32_t entrants : {64u, 65u, 200u}) expectSorts(makeKeys(rng, 1000, entrants, 1), 1000);
}

TEST(SweepSort, FarMovesFallBackToAFullSort) {
  std::mt19937_64 rng(13);
  // Jitter of hundreds of places: the insertion sort runs over its budget.
  expectSorts(makeKeys(rng, 500, 10, 400), 500);
  std::vector<uint64_t> reversed(300);
  for (uint32_t k = 0; k < 300; ++k) reversed[k] = uint64_t(300 - k) << 32 | k;
  expectSorts(reversed, 300);
  expectSorts(reversed, 0);
}

// Keys across the whole unsigned range (the top bit set and clear: the
// vector compares are signed and flip it), displaced by up to a few places
// the way a frame's motion does, with ties of min x broken by the low half.
TEST(SweepSort, DisplacedKeysAcrossTheUnsignedRange) {
  std::mt19937_64 rng(17);
  for (uint32_t n : {8u, 9u, 15u, 16u, 17u, 64u, 741u}) {
    for (int repeat = 0; repeat < 20; ++repeat) {
      std::vector<uint64_t> keys(n);
      for (uint32_t k = 0; k < n; ++k)
        keys[k] = (uint64_t(k / 2) * 0x0200000000000000ull + (rng() & 0xFFFF0000u) * (k & 1)) |
                  (rng() >> 40);
      std::sort(keys.begin(), keys.end());
      for (uint32_t k = 0; k + 3 < n; ++k)
        if (rng() % 3 == 0) std::swap(keys[k], keys[k + 1 + rng() % 3]);
      expectSorts(keys, n);
    }
  }
}

TEST(SweepSort, ThePrepassesThisMachineRuns) {
  EXPECT_TRUE(sortPrepassAvailable(SortPrepass::automatic));
  EXPECT_TRUE(sortPrepassAvailable(SortPrepass::bubble));
  // Reported so that a log shows which paths the tests above covered.
  std::printf("sort prepasses: avx2 %s, avx512 %s\n",
              sortPrepassAvailable(SortPrepass::avx2) ? "yes" : "no",
              sortPrepassAvailable(SortPrepass::avx512) ? "yes" : "no");
}

}  // namespace
}  // namespace bp
