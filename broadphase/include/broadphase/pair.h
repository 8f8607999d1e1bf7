/// Pair: two proxies whose exact boxes overlap, as the narrowphase receives it.
/// Invariant: a < b. Lists of pairs are sorted by (a, b), i.e. by key().
#pragma once

#include <cstdint>
#include <span>

namespace bp {

struct Pair {
  uint32_t a;
  uint32_t b;

  /// Unique per pair and ordered like (a, b): sorting by this key is the
  /// canonical order, and unique keys make any sort deterministic.
  uint64_t key() const { return (uint64_t(a) << 32) | b; }
  friend bool operator==(const Pair&, const Pair&) = default;
  friend bool operator<(const Pair& x, const Pair& y) { return x.key() < y.key(); }
};
static_assert(sizeof(Pair) == 8);

inline Pair makePair(uint32_t i, uint32_t j) { return i < j ? Pair{i, j} : Pair{j, i}; }

/// FNV-1a 64 of a sorted pair list, each pair as two little-endian uint32
/// (lower id first): the hash of ../shared/bench/SCENES.md.
uint64_t hashPairs(std::span<const Pair> sortedPairs);

}  // namespace bp
