/// \file
/// Pair: two proxies whose exact boxes overlap, and the hash of a pair list.
#pragma once

#include <cstdint>
#include <span>

namespace bp {

/// Two proxies whose exact boxes overlap, by index (ProxyId::index), as the
/// structures and the brute-force oracle report them (BroadPhase reports a
/// ProxyPair, which adds the user data). Invariant: a < b. Lists of pairs are sorted by
/// (a, b), that is by key().
struct Pair {
  uint32_t a;  ///< the lower proxy index
  uint32_t b;  ///< the higher proxy index

  /// Unique per pair and ordered like (a, b): sorting by this key is the
  /// canonical order, and unique keys make any sort deterministic.
  uint64_t key() const { return (uint64_t(a) << 32) | b; }
  /// Same two indices.
  friend bool operator==(const Pair&, const Pair&) = default;
  /// The canonical order: by a, then by b (by key()).
  friend bool operator<(const Pair& x, const Pair& y) { return x.key() < y.key(); }
};
static_assert(sizeof(Pair) == 8);

/// The pair of proxies `i` and `j` in canonical form (a < b), whichever
/// order they come in. Precondition: i != j (unchecked; the result would
/// break the invariant).
inline Pair makePair(uint32_t i, uint32_t j) { return i < j ? Pair{i, j} : Pair{j, i}; }

/// FNV-1a 64 of a sorted pair list, each pair as two little-endian uint32
/// (lower id first): the hash of docs/scenes.md. The list must be
/// sorted by key(); another order gives another hash.
uint64_t hashPairs(std::span<const Pair> sortedPairs);

}  // namespace bp
