// eventsBetween (facade/pair_events.h): the pairs begun and ended between
// two sorted frames, against a set difference, with renewed proxies (a
// standing pair of a renewed proxy ends and begins), and the same events
// when the lists are cut into key ranges as the facade cuts them for its
// threads.
#include "facade/pair_events.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <vector>

namespace bp {
namespace {

// `n` distinct pairs of ids below `ids`, sorted by key; user data tells
// frames apart.
std::vector<ProxyPair> sortedPairs(std::mt19937_64& rng, size_t n, uint32_t ids, uint64_t frame) {
  std::set<uint64_t> keys;
  while (keys.size() < n) {
    uint32_t a = uint32_t(rng() % ids), b = uint32_t(rng() % ids);
    if (a == b) continue;
    if (a > b) std::swap(a, b);
    keys.insert((uint64_t(a) << 32) | b);
  }
  std::vector<ProxyPair> out;
  for (const uint64_t k : keys) out.push_back({uint32_t(k >> 32), uint32_t(k), frame, frame + 1});
  return out;
}

bool sameKeys(const std::vector<ProxyPair>& x, const std::vector<ProxyPair>& y) {
  return std::equal(x.begin(), x.end(), y.begin(), y.end(),
                    [](const ProxyPair& p, const ProxyPair& q) { return p.key() == q.key(); });
}

struct Events {
  std::vector<ProxyPair> begun, ended;
};

// The oracle: set differences, and the standing pairs of renewed proxies
// in both lists, each list sorted by key.
Events oracle(const std::vector<ProxyPair>& previous, const std::vector<ProxyPair>& current,
              const std::vector<uint8_t>& renewed) {
  std::set<uint64_t> before, now;
  for (const ProxyPair& p : previous) before.insert(p.key());
  for (const ProxyPair& p : current) now.insert(p.key());
  Events e;
  for (const ProxyPair& p : current)
    if (!before.count(p.key()) || renewed[p.a] || renewed[p.b]) e.begun.push_back(p);
  for (const ProxyPair& p : previous)
    if (!now.count(p.key()) || renewed[p.a] || renewed[p.b]) e.ended.push_back(p);
  return e;
}

Events whole(const std::vector<ProxyPair>& previous, const std::vector<ProxyPair>& current,
             const std::vector<uint8_t>& renewed) {
  Events e;
  const bool any = std::find(renewed.begin(), renewed.end(), 1) != renewed.end();
  eventsBetween(
      previous, current, any, [&](uint32_t p) { return renewed[p] != 0; }, e.begun, e.ended);
  return e;
}

TEST(PairEvents, BegunAndEndedAreTheSetDifferences) {
  std::mt19937_64 rng(3);
  for (const size_t n : {0, 1, 5, 300, 5000}) {
    const uint32_t ids = uint32_t(std::max<size_t>(4, n / 2));
    const std::vector<ProxyPair> previous = sortedPairs(rng, n, ids, 10);
    // This frame: most of the last frame's pairs, and some new.
    std::vector<ProxyPair> current;
    for (const ProxyPair& p : previous)
      if (rng() % 4 != 0) current.push_back({p.a, p.b, 20, 21});
    for (const ProxyPair& p : sortedPairs(rng, n / 3, ids, 20)) current.push_back(p);
    std::sort(current.begin(), current.end(),
              [](const ProxyPair& x, const ProxyPair& y) { return x.key() < y.key(); });
    current.erase(
        std::unique(current.begin(), current.end(),
                    [](const ProxyPair& x, const ProxyPair& y) { return x.key() == y.key(); }),
        current.end());
    const std::vector<uint8_t> none(ids, 0);
    const Events got = whole(previous, current, none);
    const Events want = oracle(previous, current, none);
    EXPECT_TRUE(sameKeys(got.begun, want.begun)) << n;
    EXPECT_TRUE(sameKeys(got.ended, want.ended)) << n;
    // A begun pair carries this frame's user data, an ended one the last's.
    for (const ProxyPair& p : got.begun) EXPECT_EQ(p.userDataA, 20u);
    for (const ProxyPair& p : got.ended) EXPECT_EQ(p.userDataA, 10u);
  }
}

TEST(PairEvents, AStandingPairOfARenewedProxyEndsAndBegins) {
  std::mt19937_64 rng(5);
  const std::vector<ProxyPair> previous = sortedPairs(rng, 2000, 600, 10);
  std::vector<ProxyPair> current = previous;  // nothing moved
  std::vector<uint8_t> renewed(600, 0);
  renewed[7] = renewed[300] = renewed[599] = 1;
  const Events got = whole(previous, current, renewed);
  const Events want = oracle(previous, current, renewed);
  EXPECT_FALSE(want.begun.empty());
  EXPECT_TRUE(sameKeys(got.begun, want.begun));
  EXPECT_TRUE(sameKeys(got.ended, want.ended));
}

// The facade's threads each take a key range: cut at a key of this frame's
// list and that key's place in the last frame's. The pieces laid end to end
// are the events of the whole.
TEST(PairEvents, KeyRangesLaidEndToEndGiveTheWholeEvents) {
  std::mt19937_64 rng(7);
  const std::vector<ProxyPair> previous = sortedPairs(rng, 4000, 1500, 10);
  std::vector<ProxyPair> current = sortedPairs(rng, 4000, 1500, 20);
  std::vector<uint8_t> renewed(1500, 0);
  renewed[11] = 1;
  const Events want = whole(previous, current, renewed);
  for (const uint32_t pieces : {2u, 3u, 8u, 64u}) {
    Events got;
    const auto cut = [&](uint32_t c) {
      if (c == pieces) return std::pair<size_t, size_t>(previous.size(), current.size());
      const size_t j = current.size() * c / pieces;
      const uint64_t key = c == 0 ? 0 : current[j].key();
      const size_t i =
          size_t(std::lower_bound(previous.begin(), previous.end(), key,
                                  [](const ProxyPair& p, uint64_t k) { return p.key() < k; }) -
                 previous.begin());
      return std::pair<size_t, size_t>(c == 0 ? 0 : i, j);
    };
    for (uint32_t c = 0; c < pieces; ++c) {
      const auto [i, j] = cut(c);
      const auto [iEnd, jEnd] = cut(c + 1);
      eventsBetween(
          std::span<const ProxyPair>(previous).subspan(i, iEnd - i),
          std::span<const ProxyPair>(current).subspan(j, jEnd - j), true,
          [&](uint32_t p) { return renewed[p] != 0; }, got.begun, got.ended);
    }
    EXPECT_TRUE(sameKeys(got.begun, want.begun)) << pieces;
    EXPECT_TRUE(sameKeys(got.ended, want.ended)) << pieces;
  }
}

}  // namespace
}  // namespace bp
