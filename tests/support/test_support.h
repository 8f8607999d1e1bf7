// Helpers shared by the tests: the reference data copied from
// ../shared/bench/reference into tests/data, and comparison helpers.
#pragma once

#include <broadphase/broad_phase.h>
#include <broadphase/math/aabb.h>
#include <broadphase/pair.h>
#include <broadphase/proxy_id.h>
#include <broadphase/testkit/scene.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace bp::test {

struct ReferencePairs {
  std::string scene;
  uint32_t n;
  int frame;
  uint64_t pairs;
  uint64_t hash;
};
std::vector<ReferencePairs> loadReferencePairs();  // tests/data/pairs_n10000.csv

struct ReferenceHit {
  uint32_t ray;
  int64_t box;  // -1: no hit
  double t;     // 6 significant digits
};
std::vector<ReferenceHit> loadReferenceRays();  // tests/data/rays_uniform_n10000.csv

// The brute-force side of a random operation sequence: every proxy's box,
// static flag and handle, indexed like the structure under test, in the
// form the brute:: oracle takes (boxes plus a live mask).
struct ProxyMirror {
  std::vector<Aabb> boxes;
  std::vector<uint8_t> live;
  std::vector<uint8_t> isStatic;
  std::vector<ProxyId> handles;

  void set(ProxyId id, const Aabb& box, bool stat);
  std::vector<uint32_t> liveIndices() const;
};

// Gtest assertion that two sorted pair lists are equal, printing the first
// few differences rather than two huge lists.
::testing::AssertionResult samePairs(const std::vector<Pair>& expected,
                                     const std::vector<Pair>& actual);

// The proxy indices (a, b) of facade pairs, in their order.
std::vector<Pair> indicesOf(std::span<const ProxyPair> pairs);
// The pairs of sorted list `a` that sorted list `b` lacks.
std::vector<Pair> pairsMissingFrom(const std::vector<Pair>& a, const std::vector<Pair>& b);

// A BroadPhase world mirrored for the oracle: each proxy's description and
// handle by proxy index, and whether it is live. Changes go through the
// mirror, which applies them to the BroadPhase too.
struct FacadeMirror {
  std::vector<ProxyDesc> descs;
  std::vector<uint8_t> live;
  std::vector<ProxyId> handles;

  ProxyId add(BroadPhase& bp, const ProxyDesc& desc);
  void remove(BroadPhase& bp, uint32_t index);
  void move(BroadPhase& bp, uint32_t index, const Aabb& box);
  std::vector<uint32_t> liveIndices() const;
  // The pairs the facade reports: live, overlapping, each filter accepting
  // the other, no static-static, no kinematic-static, kinematic-kinematic
  // only with `kinematicPairs`. Sorted. O(N^2).
  std::vector<Pair> expectedPairs(bool kinematicPairs = false) const;
  // The pairs a structure reports before the facade's filters: every
  // overlap of live proxies but static-static (brute::findPairs).
  std::vector<Pair> structurePairs() const;
};

}  // namespace bp::test
