// sortCellKeys: the sort of a cell's keys at each refresh. Checked against
// std::sort on the inputs it meets (last frame's order with small moves, plus
// entrants appended) and on the ones that take its other paths: a new cell
// (no old keys), a crowd of entrants, more entrants than fit its stack
// buffer, moves past the insertion sort's budget, and reversed input.
#include "sweep_sort.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
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

void expectSorts(std::vector<uint64_t> keys, uint32_t old) {
  std::vector<uint64_t> expected = keys;
  std::sort(expected.begin(), expected.end());
  sortCellKeys(keys.data(), old, uint32_t(keys.size()));
  EXPECT_EQ(keys, expected) << "old " << old << ", n " << keys.size();
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

}  // namespace
}  // namespace bp
