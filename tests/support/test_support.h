// Helpers shared by the tests: the reference data copied from
// ../shared/bench/reference into tests/data, and comparison helpers.
#pragma once

#include <broadphase/pair.h>
#include <broadphase/scene.h>

#include <gtest/gtest.h>

#include <cstdint>
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

// Gtest assertion that two sorted pair lists are equal, printing the first
// few differences rather than two huge lists.
::testing::AssertionResult samePairs(const std::vector<Pair>& expected,
                                     const std::vector<Pair>& actual);

}  // namespace bp::test
