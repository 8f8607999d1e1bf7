// Every standard scene at N = 10^4 over the ranks: the union of the ranks'
// pairs matches the reference counts and hashes (tests/data) at frames 0, 1,
// 10 and 30, and every frame's pairs, begun and ended (user data included)
// equal one BroadPhase's. Run with 1 to 4 ranks, so the union is the same
// for every rank count; each rank's own share is also the same with 1 and 2
// threads per rank.
#include "mpi_test_support.h"

#include <broadphase/testkit/scene.h>
#include <test_support.h>

#include <map>
#include <string>

namespace bp::mpi::test {
namespace {

ProxyDesc descOf(const Scene& scene, uint32_t i) {
  return {.box = scene.boxes[i],
          .motion = scene.isStatic[i] ? MotionType::staticBody : MotionType::dynamic,
          .userData = 1000000 + i};
}

// Runs `frames` frames of a scene; every rank adds the ids i = rank (mod
// size), and each frame every rank moves the moving proxies it owns. Checks
// each frame against the model (on rank 0) and the reference frames.
// Returns this rank's share of every frame, concatenated, for comparing runs.
std::vector<GlobalPair> runScene(SceneKind kind, int threads, int frames, bool check) {
  const int rank = worldRank();
  const int size = worldSize();
  Scene scene = makeScene(kind, 10000);
  std::map<int, bp::test::ReferencePairs> references;
  for (const auto& r : bp::test::loadReferencePairs())
    if (r.scene == sceneName(kind)) references[r.frame] = r;

  DistributedBroadPhase world(MPI_COMM_WORLD,
                              {.local = {.structure = Structure::automatic, .threads = threads}});
  Model model;
  for (uint32_t i = 0; i < scene.n; ++i) {
    if (int(i % uint32_t(size)) == rank) world.add(i, descOf(scene, i));
    if (check && rank == 0) model.add(i, descOf(scene, i));
  }
  std::vector<GlobalPair> share;
  for (int frame = 0; frame <= frames; ++frame) {
    if (frame > 0) {
      scene.step();
      for (uint64_t id : world.ownedIds())
        if (!scene.isStatic[id]) world.move(id, scene.boxes[id]);
      if (check && rank == 0)
        for (uint32_t i = 0; i < scene.n; ++i)
          if (!scene.isStatic[i]) model.move(i, scene.boxes[i]);
    }
    const GlobalFrame& mine = world.update();
    share.insert(share.end(), mine.pairs.begin(), mine.pairs.end());
    share.insert(share.end(), mine.begun.begin(), mine.begun.end());
    share.insert(share.end(), mine.ended.begin(), mine.ended.end());
    if (!check) continue;
    const Frame all = allGather(mine);
    if (rank == 0) {
      const Frame expected = model.update();
      EXPECT_TRUE(samePairs(expected.pairs, all.pairs)) << sceneName(kind) << " frame " << frame;
      EXPECT_TRUE(samePairs(expected.begun, all.begun)) << sceneName(kind) << " frame " << frame;
      EXPECT_TRUE(samePairs(expected.ended, all.ended)) << sceneName(kind) << " frame " << frame;
      if (const auto it = references.find(frame); it != references.end()) {
        EXPECT_EQ(all.pairs.size(), it->second.pairs) << sceneName(kind) << " frame " << frame;
        EXPECT_EQ(hashIds(all.pairs), it->second.hash) << sceneName(kind) << " frame " << frame;
      }
    }
    if (frame == 0 || frame == frames) {
      const std::string problem = world.validate();
      EXPECT_EQ(problem, "") << sceneName(kind) << " frame " << frame;
    }
  }
  return share;
}

class SceneTest : public ::testing::TestWithParam<SceneKind> {};

TEST_P(SceneTest, MatchesReferenceAndOneBroadPhase) { runScene(GetParam(), 1, 30, true); }

INSTANTIATE_TEST_SUITE_P(AllScenes, SceneTest, ::testing::ValuesIn(kAllScenes),
                         [](const auto& info) { return std::string(sceneName(info.param)); });

// Each rank's own share, frame by frame, is the same bit for bit with one
// and two threads per rank.
TEST(SceneThreads, ShareIndependentOfThreads) {
  const std::vector<GlobalPair> one = runScene(SceneKind::uniform, 1, 6, false);
  const std::vector<GlobalPair> two = runScene(SceneKind::uniform, 2, 6, false);
  EXPECT_TRUE(allRanks(one == two));
}

}  // namespace
}  // namespace bp::mpi::test
