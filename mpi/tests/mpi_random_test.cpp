// Random sequences of adds, removes, moves (small drifts and jumps across
// regions, so proxies migrate every frame), filter, user data and motion
// changes, with small, region-spanning and world-spanning boxes. Every frame
// the union of the ranks' pairs, begun and ended lists equals one
// BroadPhase's, user data included; validate() holds on every rank; each
// owned proxy's payload is the one it was added with, wherever it migrated.
#include "mpi_test_support.h"

#include <broadphase/testkit/scene.h>

#include <cstring>
#include <set>
#include <string>
#include <vector>

namespace bp::mpi::test {
namespace {

constexpr float kWorld = 40.0f;
constexpr uint32_t kPayload = 16;

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

float unit(uint64_t h) { return float(h >> 40) / float(1 << 24); }

// Mostly small boxes; some span several regions, a few the whole world;
// some are flat.
Aabb randomBox(SceneRng& rng) {
  const Vec3 c(rng.uniform() * kWorld, rng.uniform() * kWorld, rng.uniform() * kWorld);
  const float kind = rng.uniform();
  Vec3 h;
  if (kind < 0.02f)
    h = Vec3(kWorld, kWorld, kWorld) * (0.5f + rng.uniform() * 0.5f);
  else if (kind < 0.12f)
    h = Vec3(3 + rng.uniform() * 7, 3 + rng.uniform() * 7, 3 + rng.uniform() * 7);
  else
    h = Vec3(0.2f + rng.uniform(), 0.2f + rng.uniform(), 0.2f + rng.uniform());
  if (rng.uniform() < 0.05f) h.y() = 0;
  return {c - h, c + h};
}

Filter randomFilter(SceneRng& rng) {
  if (rng.uniform() < 0.7f) return {};
  return {.category = uint64_t(1) << (rng.next() % 3), .mask = rng.next() % 8};
}

MotionType randomMotion(SceneRng& rng) {
  const float u = rng.uniform();
  return u < 0.7f    ? MotionType::dynamic
         : u < 0.85f ? MotionType::staticBody
                     : MotionType::kinematic;
}

std::vector<std::byte> payloadOf(uint64_t id) {
  std::vector<std::byte> p(kPayload);
  const uint64_t words[2] = {id, ~id * 3};
  std::memcpy(p.data(), words, kPayload);
  return p;
}

struct Run {
  uint64_t seed;
  int frames;
  DistributedConfig config;
};

// What a run exercised, summed over frames and ranks.
struct Exercised {
  int64_t migrations = 0;
  int64_t ghostRecords = 0;
  int64_t rebalances = 0;  // frames that rebuilt the decomposition
};

Exercised runRandom(const Run& run) {
  const int rank = worldRank();
  const int size = worldSize();
  DistributedConfig config = run.config;
  config.payloadBytes = kPayload;
  DistributedBroadPhase world(MPI_COMM_WORLD, config);
  Model model(config.local);
  SceneRng rng(run.seed);  // the same stream on every rank
  std::vector<uint64_t> live;
  std::vector<uint64_t> removedBefore;  // removed in an earlier frame: may come back
  uint64_t nextId = 5;
  bool ok = true;
  Exercised seen;

  for (int frame = 0; frame < run.frames && ok; ++frame) {
    std::set<uint64_t> touched;        // added or removed this frame
    std::vector<uint64_t> removedNow;  // may come back from the next frame on
    const int ops = frame == 0 ? 300 : 60;
    for (int op = 0; op < ops; ++op) {
      const float u = rng.uniform();
      if (live.empty() || u < (frame == 0 ? 1.0f : 0.25f)) {
        uint64_t id = nextId;
        nextId += 1 + rng.next() % 1000;  // sparse 64-bit ids
        if (!removedBefore.empty() && rng.uniform() < 0.3f) {
          const size_t k = rng.next() % removedBefore.size();
          id = removedBefore[k];
          removedBefore.erase(removedBefore.begin() + ptrdiff_t(k));
        }
        const ProxyDesc desc{randomBox(rng), randomMotion(rng), randomFilter(rng), rng.next()};
        const int adder = int(rng.next() % uint64_t(size));
        if (adder == rank) world.add(id, desc, payloadOf(id));
        if (rank == 0) model.add(id, desc);
        live.push_back(id);
        touched.insert(id);
        continue;
      }
      const size_t k = rng.next() % live.size();
      const uint64_t id = live[k];
      const bool mine = world.owns(id);
      if (u < 0.40f) {
        if (touched.count(id)) continue;  // not removed in the frame it was added
        if (mine) world.remove(id);
        if (rank == 0) model.remove(id);
        live.erase(live.begin() + ptrdiff_t(k));
        removedNow.push_back(id);
        touched.insert(id);
      } else if (u < 0.75f) {
        const Aabb box = randomBox(rng);  // a jump: usually to another region
        if (mine) world.move(id, box);
        if (rank == 0) model.move(id, box);
      } else if (u < 0.85f) {
        const Filter f = randomFilter(rng);
        if (mine) world.setFilter(id, f);
        if (rank == 0) model.setFilter(id, f);
      } else if (u < 0.93f) {
        const uint64_t data = rng.next();
        if (mine) world.setUserData(id, data);
        if (rank == 0) model.setUserData(id, data);
      } else {
        const MotionType m = randomMotion(rng);
        if (mine) world.setMotionType(id, m);
        if (rank == 0) model.setMotionType(id, m);
      }
    }
    // Half the proxies drift a little, decided per (frame, id) so that the
    // owner and the model agree without sharing a generator.
    for (uint64_t id : live) {
      const uint64_t h = mix(run.seed ^ mix(uint64_t(frame) * 0x10001 + id));
      if (h & 1) continue;
      const bool mine = world.owns(id);
      if (!mine && rank != 0) continue;
      const Aabb box = mine ? world.desc(id).box : model.desc(id).box;
      const Vec3 d(unit(mix(h + 1)) - 0.5f, unit(mix(h + 2)) - 0.5f, unit(mix(h + 3)) - 0.5f);
      const Aabb moved{box.min + d, box.max + d};
      if (mine) world.move(id, moved);
      if (rank == 0) model.move(id, moved);
    }

    removedBefore.insert(removedBefore.end(), removedNow.begin(), removedNow.end());

    const GlobalFrame& mineFrame = world.update();
    const Frame all = allGather(mineFrame);
    if (rank == 0) {
      const Frame expected = model.update();
      EXPECT_TRUE(samePairs(expected.pairs, all.pairs)) << "frame " << frame;
      EXPECT_TRUE(samePairs(expected.begun, all.begun)) << "frame " << frame;
      EXPECT_TRUE(samePairs(expected.ended, all.ended)) << "frame " << frame;
    }
    const std::string problem = world.validate();
    EXPECT_EQ(problem, "") << "frame " << frame;
    size_t badPayloads = 0;
    for (uint64_t id : world.ownedIds()) {
      const std::vector<std::byte> expected = payloadOf(id);
      const std::span<const std::byte> p = std::as_const(world).payload(id);
      badPayloads += !std::equal(p.begin(), p.end(), expected.begin(), expected.end());
    }
    EXPECT_EQ(badPayloads, 0u) << "frame " << frame;
    // Every live id is owned by exactly one rank.
    int64_t owned = int64_t(world.ownedIds().size());
    MPI_Allreduce(MPI_IN_PLACE, &owned, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    EXPECT_EQ(owned, int64_t(live.size())) << "frame " << frame;
    ok = allRanks(!::testing::Test::HasFailure());
    seen.migrations += world.stats().migratedIn;
    seen.ghostRecords += world.stats().ghostRecords;
    seen.rebalances += world.stats().rebalanced;
  }
  int64_t sums[2] = {seen.migrations, seen.ghostRecords};
  MPI_Allreduce(MPI_IN_PLACE, sums, 2, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  seen.migrations = sums[0];
  seen.ghostRecords = sums[1];
  return seen;
}

// With more than one rank the sequences migrate proxies and send ghosts
// (so the checks above cover those paths).
void expectExercised(const Exercised& seen) {
  if (worldSize() == 1) return;
  EXPECT_GT(seen.migrations, 100);
  EXPECT_GT(seen.ghostRecords, 100);
}

class RandomSeeds : public ::testing::TestWithParam<uint64_t> {};

TEST_P(RandomSeeds, SweepNoHalo) {
  expectExercised(runRandom({.seed = GetParam(),
                             .frames = 30,
                             .config = {.local = {.structure = Structure::sweep, .threads = 1}}}));
}

// Rebalances almost every frame (any imbalance over 2 %), with a halo and
// kinematic pairs, on the tree, two threads per rank.
TEST_P(RandomSeeds, BvhHaloFrequentRebalance) {
  const Exercised seen = runRandom(
      {.seed = GetParam() + 100,
       .frames = 30,
       .config = {
           .local = {.structure = Structure::bvh, .threads = 2, .pairKinematicKinematic = true},
           .rebalanceThreshold = 0.02,
           .rebalanceInterval = 1,
           .samplesPerRank = 64,
           .halo = 1.5f}});
  expectExercised(seen);
  if (worldSize() > 1) {
    EXPECT_GT(seen.rebalances, 3);
  }
}

TEST(Random, AutomaticLongRun) {
  expectExercised(runRandom({.seed = 13, .frames = 80, .config = {.local = {.threads = 1}}}));
}

INSTANTIATE_TEST_SUITE_P(Seeds, RandomSeeds, ::testing::Values(1, 2, 3, 4, 5, 6));

}  // namespace
}  // namespace bp::mpi::test
