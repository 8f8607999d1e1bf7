// PairBudget (pairs/pair_budget.h) and BroadPhaseConfig::maxPairs: a frame
// with more pairs than the bound reports Error(capacityExceeded) after work
// and memory bounded by the bound and the proxy count, leaves the structure
// valid and the previous frame's pairs in place, and the next frame is
// exact; a frame with exactly the bound succeeds; the bound counts the pairs
// the filters accept. Every structure, 1, 2 and 8 threads. Rejected updates
// are caught with an error handler (error_capture.h), so the tests run with
// and without exceptions.
#include "pairs/pair_budget.h"
#include <broadphase/broad_phase.h>
#include <broadphase/testkit/brute_force.h>
#include "bvh/bvh.h"
#include "error_capture.h"
#include "sweep/sweep_grid.h"
#include "test_support.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <random>
#include <string>
#include <tuple>
#include <vector>

namespace bp {
namespace {

using test::expectError;
using test::FacadeMirror;
using test::indicesOf;
using test::pairsMissingFrom;
using test::samePairs;

const Aabb kPile{Vec3(5, 5, 5), Vec3(6, 6, 6)};  // where the identical boxes sit

const char* name(Structure s) {
  return s == Structure::bvh ? "bvh" : s == Structure::sweep ? "sweep" : "automatic";
}

// A few hundred boxes scattered in a 20^3 world: some tens of pairs, some
// of them static.
void addScattered(BroadPhase& bp, FacadeMirror& world, uint32_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> pos(0.0f, 20.0f), size(0.3f, 1.5f);
  for (uint32_t i = 0; i < count; ++i) {
    const Vec3 c(pos(rng), pos(rng), pos(rng));
    const float s = size(rng);
    ProxyDesc d{.box = Aabb::fromCenterExtent(c, Vec3(s, s, s))};
    d.motion = i % 5 == 0 ? MotionType::staticBody : MotionType::dynamic;
    world.add(bp, d);
  }
}

std::vector<uint32_t> addPile(BroadPhase& bp, FacadeMirror& world, uint32_t count) {
  std::vector<uint32_t> ids;
  for (uint32_t i = 0; i < count; ++i) ids.push_back(world.add(bp, {.box = kPile}).index);
  return ids;
}

// --- PairBudget itself ---------------------------------------------------------

TEST(PairBudget, CountsChargesAndStopsPastTheLimit) {
  PairBudget budget(10);
  EXPECT_EQ(budget.limit(), 10u);
  EXPECT_FALSE(budget.filters());
  std::vector<Pair> pairs(10, Pair{1, 2});
  EXPECT_EQ(budget.charge(pairs.data(), pairs.data() + 6), 6u);
  EXPECT_EQ(budget.charge(pairs.data(), pairs.data() + 4), 4u);
  EXPECT_EQ(budget.count(), 10u);
  EXPECT_FALSE(budget.exceeded()) << "exactly the limit is within it";
  EXPECT_EQ(budget.charge(pairs.data(), pairs.data() + 1), 1u);
  EXPECT_TRUE(budget.exceeded());
}

TEST(PairBudget, APredicateCompactsTheChargedPairsInPlace) {
  auto even = [](Pair p) { return p.a % 2 == 0; };
  PairBudget budget(3, even);
  EXPECT_TRUE(budget.filters());
  PairBuffer buffer;
  for (uint32_t a = 0; a < 6; ++a) buffer.push({a, 100});
  EXPECT_TRUE(budget.settle(buffer));  // keeps 0, 2, 4: the limit exactly
  ASSERT_EQ(buffer.size(), 3u);
  EXPECT_EQ(buffer.charged(), 3u);
  EXPECT_EQ(buffer.pairs()[0], (Pair{0, 100}));
  EXPECT_EQ(buffer.pairs()[1], (Pair{2, 100}));
  EXPECT_EQ(buffer.pairs()[2], (Pair{4, 100}));
  EXPECT_EQ(budget.count(), 3u);
  buffer.push({7, 100});  // rejected: charges nothing
  EXPECT_TRUE(budget.settle(buffer));
  EXPECT_EQ(buffer.size(), 3u);
  buffer.push({8, 100});
  EXPECT_FALSE(budget.settle(buffer));
  EXPECT_TRUE(budget.exceeded());
  EXPECT_TRUE(buffer.empty()) << "a settle past the limit clears the buffer";
}

TEST(PairBudget, LayoutKeepsTheCountApartFromTheStopFlag) {
  // The workers' charges write the count; their checks read the flag.
  static_assert(sizeof(PairBudget) == 2 * kFalseSharingRange);
  static_assert(alignof(PairBudget) == kFalseSharingRange);
  PairBudget budget(1);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(&budget) % kFalseSharingRange, 0u);
}

// --- The structures, driven directly -------------------------------------------

// 2000 identical boxes, one in four static (so the sweep also meets its
// static twin cells): a budget of 1000 stops findPairs, both forms; with the
// pile thinned out, a budget the frame fits in gives the exact pairs.
template <class Structure, class Config>
void checkStructureStopsAndRecovers(const Config& config, int threads) {
  Scheduler scheduler(threads);
  Structure s(config);
  std::vector<Aabb> boxes(2000, kPile);
  std::vector<uint8_t> isStatic(2000, 0);
  for (uint32_t i = 0; i < 2000; ++i) {
    isStatic[i] = i % 4 == 0;
    s.add(kPile, isStatic[i] != 0);
  }
  std::vector<Pair> out{{0, 1}};
  PairBudget budget(1000);
  s.findPairs(scheduler, out, &budget);
  EXPECT_TRUE(budget.exceeded());
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(s.validate(), "");

  // Streaming: each chunk is charged before `consume` sees it.
  PairBudget streamed(1000);
  std::atomic<uint64_t> handedOut{0};
  s.findPairs(
      scheduler, [&](std::span<const Pair> chunk) { handedOut += chunk.size(); }, &streamed);
  EXPECT_TRUE(streamed.exceeded());
  EXPECT_LE(handedOut.load(), 1000u);

  // A budget the frame fits in changes nothing.
  std::vector<uint8_t> live(2000, 1);
  for (uint32_t i = 0; i < 1900; ++i) {
    s.remove(s.handleOf(i));
    live[i] = 0;
  }
  const std::vector<Pair> expected = brute::findPairs(boxes, isStatic, live);
  PairBudget enough(expected.size());
  s.findPairs(scheduler, out, &enough);
  EXPECT_FALSE(enough.exceeded());
  EXPECT_EQ(enough.count(), expected.size());
  EXPECT_TRUE(samePairs(expected, out));
  EXPECT_EQ(s.validate(), "");
}

TEST(PairBudget, BvhStopsAndTheNextFindPairsIsExact) {
  for (int threads : {1, 2, 8}) checkStructureStopsAndRecovers<Bvh>(BvhConfig{}, threads);
}

TEST(PairBudget, SweepGridStopsAndTheNextFindPairsIsExact) {
  // Both kernels: the 16-lane one where the CPU has it, and the 8-lane one.
  for (SweepKernel kernel : {SweepKernel::automatic, SweepKernel::narrow})
    for (int threads : {1, 2, 8})
      checkStructureStopsAndRecovers<SweepGrid>(SweepGridConfig{.kernel = kernel}, threads);
}

// --- BroadPhase::update with maxPairs -------------------------------------------

class MaxPairs : public ::testing::TestWithParam<std::tuple<Structure, int>> {
 protected:
  Structure structure() const { return std::get<0>(GetParam()); }
  int threads() const { return std::get<1>(GetParam()); }
  BroadPhaseConfig config(uint64_t maxPairs) const {
    return {.structure = structure(), .threads = threads(), .maxPairs = maxPairs};
  }
};

TEST_P(MaxPairs, IdenticalBoxesFailAndTheNextFrameIsExact) {
  constexpr uint64_t kMax = 1000;
  BroadPhase bp(config(kMax));
  FacadeMirror world;
  addScattered(bp, world, 300, 7);
  const std::vector<Pair> first = indicesOf(bp.update().pairs);
  ASSERT_TRUE(samePairs(world.expectedPairs(), first));
  ASSERT_LT(first.size(), kMax);
  const std::vector<Pair> firstBegun = indicesOf(bp.lastPairs().begun);

  // 2000 identical boxes: about 2 * 10^6 pairs.
  const std::vector<uint32_t> pile = addPile(bp, world, 2000);
  {
    test::ErrorCapture capture;
    const FramePairs& fallback = bp.update();
    const std::vector<test::ReportedError> errors = capture.errors();
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_EQ(errors[0].code, ErrorCode::capacityExceeded);
    EXPECT_NE(errors[0].message.find("maxPairs = 1000"), std::string::npos) << errors[0].message;
    EXPECT_EQ(&fallback, &bp.lastPairs());
  }
  EXPECT_EQ(bp.validate(), "");
  EXPECT_EQ(indicesOf(bp.lastPairs().pairs), first) << "the previous frame's pairs are kept";
  EXPECT_EQ(indicesOf(bp.lastPairs().begun), firstBegun);

  // Most of the pile leaves and some boxes move: the frame is exact, its
  // events against the last frame that succeeded.
  for (size_t k = 10; k < pile.size(); ++k) world.remove(bp, pile[k]);
  for (uint32_t i = 0; i < 300; i += 3) {
    const Aabb b = world.descs[i].box;
    world.move(bp, i, {b.min + Vec3(0.4f, 0, 0), b.max + Vec3(0.4f, 0, 0)});
  }
  const FramePairs& f = bp.update();
  const std::vector<Pair> expected = world.expectedPairs();
  EXPECT_TRUE(samePairs(expected, indicesOf(f.pairs))) << name(structure());
  EXPECT_TRUE(samePairs(pairsMissingFrom(expected, first), indicesOf(f.begun)));
  EXPECT_TRUE(samePairs(pairsMissingFrom(first, expected), indicesOf(f.ended)));
  EXPECT_EQ(bp.validate(), "");
}

TEST_P(MaxPairs, ExactlyMaxPairsPassAndOneMoreFails) {
  constexpr uint64_t kMax = 4950;  // 100 identical boxes
  BroadPhase bp(config(kMax));
  FacadeMirror world;
  addPile(bp, world, 100);
  const std::vector<Pair> full = indicesOf(bp.update().pairs);
  EXPECT_EQ(full.size(), kMax);
  EXPECT_TRUE(samePairs(world.expectedPairs(), full));

  // One pair more: two boxes that meet only each other.
  world.add(bp, {.box = Aabb{Vec3(50, 50, 50), Vec3(51, 51, 51)}});
  const uint32_t extra = world.add(bp, {.box = Aabb{Vec3(51, 51, 51), Vec3(52, 52, 52)}}).index;
  expectError(ErrorCode::capacityExceeded, [&] { bp.update(); });
  EXPECT_EQ(bp.validate(), "");
  EXPECT_EQ(indicesOf(bp.lastPairs().pairs), full);

  world.remove(bp, extra);
  const FramePairs& f = bp.update();
  EXPECT_TRUE(samePairs(full, indicesOf(f.pairs)));
  EXPECT_TRUE(f.begun.empty());
  EXPECT_TRUE(f.ended.empty());
}

TEST_P(MaxPairs, TheBoundCountsThePairsTheFiltersAccept) {
  // Identical boxes in four groups: two dynamic groups that accept only
  // their own category, kinematic and static boxes. Most overlaps are
  // rejected by the filters or the motion rules.
  FacadeMirror model;
  std::vector<ProxyDesc> descs;
  for (int i = 0; i < 60; ++i) descs.push_back({.box = kPile, .filter = {1, 1}});
  for (int i = 0; i < 60; ++i) descs.push_back({.box = kPile, .filter = {2, 2}});
  for (int i = 0; i < 30; ++i) descs.push_back({.box = kPile, .motion = MotionType::kinematic});
  for (int i = 0; i < 30; ++i) descs.push_back({.box = kPile, .motion = MotionType::staticBody});
  std::vector<Pair> accepted, raw;
  {
    BroadPhase probe(config(0));
    for (const ProxyDesc& d : descs) model.add(probe, d);
    accepted = model.expectedPairs();
    raw = model.structurePairs();
  }
  ASSERT_GT(raw.size(), 2 * accepted.size()) << "the structure's pairs must exceed the bound";

  for (uint64_t limit : {uint64_t(accepted.size()), uint64_t(accepted.size() - 1)}) {
    BroadPhase bp(config(limit));
    for (const ProxyDesc& d : descs) bp.add(d);
    if (limit == accepted.size()) {
      EXPECT_TRUE(samePairs(accepted, indicesOf(bp.update().pairs))) << name(structure());
    } else {
      expectError(ErrorCode::capacityExceeded, [&] { bp.update(); });
      EXPECT_TRUE(bp.lastPairs().pairs.empty());
    }
    EXPECT_EQ(bp.validate(), "");
  }
}

TEST_P(MaxPairs, TheStreamingFormFailsBeforeHandingOutAPair) {
  BroadPhase bp(config(1000));
  FacadeMirror world;
  addScattered(bp, world, 300, 11);
  const std::vector<Pair> first = indicesOf(bp.update().pairs);
  const std::vector<uint32_t> pile = addPile(bp, world, 2000);
  std::atomic<uint64_t> handedOut{0};
  auto count = [&](std::span<const ProxyPair> chunk) { handedOut += chunk.size(); };
  expectError(ErrorCode::capacityExceeded, [&] { bp.update(count); });
  EXPECT_EQ(handedOut.load(), 0u);
  EXPECT_EQ(bp.validate(), "");
  EXPECT_EQ(indicesOf(bp.lastPairs().pairs), first);

  // Within the bound: every pair once.
  for (size_t k = 10; k < pile.size(); ++k) world.remove(bp, pile[k]);
  std::mutex mutex;
  std::vector<Pair> got;
  bp.update([&](std::span<const ProxyPair> chunk) {
    std::lock_guard<std::mutex> lock(mutex);
    for (const ProxyPair& p : chunk) got.push_back({p.a, p.b});
  });
  std::sort(got.begin(), got.end());
  EXPECT_TRUE(samePairs(world.expectedPairs(), got));
  EXPECT_EQ(bp.validate(), "");
}

// The memory a failed update leaves owned: the pair buffers hold about the
// bound, not the ~4.5 * 10^6 pairs (36 MB) of 3000 identical boxes.
TEST_P(MaxPairs, AFailedUpdateOwnsMemoryOfTheBoundNotOfThePairs) {
  constexpr uint64_t kMax = 1000;
  constexpr size_t kPerProxy = 1024;  // the structure and the facade's arrays, generously
  BroadPhase bp(config(kMax));
  FacadeMirror world;
  addPile(bp, world, 3000);
  expectError(ErrorCode::capacityExceeded, [&] { bp.update(); });
  const size_t bound = 64 * kMax * sizeof(Pair) + kPerProxy * 3000;
  EXPECT_LT(bp.memoryBytes(), bound) << name(structure()) << ", " << threads() << " threads";
  EXPECT_EQ(bp.validate(), "");
}

INSTANTIATE_TEST_SUITE_P(StructuresAndThreads, MaxPairs,
                         ::testing::Combine(::testing::Values(Structure::bvh, Structure::sweep,
                                                              Structure::automatic),
                                            ::testing::Values(1, 2, 8)),
                         [](const ::testing::TestParamInfo<MaxPairs::ParamType>& info) {
                           return std::string(name(std::get<0>(info.param))) + "_" +
                                  std::to_string(std::get<1>(info.param)) + "threads";
                         });

// Boxes too large for the cells go to the sweep's overflow set, whose own
// sweep meets every pair of identical ones: bounded the same way.
TEST(MaxPairsOverflow, IdenticalOverflowBoxesFail) {
  for (Structure s : {Structure::sweep, Structure::automatic})
    for (int threads : {1, 2, 8}) {
      BroadPhase bp({.structure = s, .threads = threads, .cellSize = 0.05f, .maxPairs = 1000});
      FacadeMirror world;
      addPile(bp, world, 2000);
      expectError(ErrorCode::capacityExceeded, [&] { bp.update(); });
      EXPECT_EQ(bp.validate(), "");
      EXPECT_LT(bp.memoryBytes(), 64 * 1000 * sizeof(Pair) + 1024 * 2000) << name(s);
      const std::vector<uint32_t> live = world.liveIndices();
      for (size_t k = 20; k < live.size(); ++k) world.remove(bp, live[k]);
      EXPECT_TRUE(samePairs(world.expectedPairs(), indicesOf(bp.update().pairs)));
    }
}

#if BP_TEST_EXCEPTIONS
// Without an error handler, a build with exceptions throws bp::Error from
// both forms, and the BroadPhase stays usable.
TEST(MaxPairsThrows, BothFormsThrowWithoutAHandler) {
  BroadPhase bp({.structure = Structure::automatic, .threads = 2, .maxPairs = 1000});
  FacadeMirror world;
  const std::vector<uint32_t> pile = addPile(bp, world, 2000);
  test::expectThrow(ErrorCode::capacityExceeded, [&] { bp.update(); });
  std::atomic<uint64_t> handedOut{0};
  test::expectThrow(ErrorCode::capacityExceeded, [&] {
    bp.update([&](std::span<const ProxyPair> chunk) { handedOut += chunk.size(); });
  });
  EXPECT_EQ(handedOut.load(), 0u);
  EXPECT_EQ(bp.validate(), "");
  for (size_t k = 40; k < pile.size(); ++k) world.remove(bp, pile[k]);
  EXPECT_TRUE(samePairs(world.expectedPairs(), indicesOf(bp.update().pairs)));
}
#endif

}  // namespace
}  // namespace bp
