// Bad input: every local call that rejects its input throws the documented
// bp::Error and changes nothing; a collective call that finds bad input on
// any rank throws the same code on every rank, with nothing applied, and the
// world then goes on exactly as one BroadPhase would.
#include "mpi_test_support.h"

#include <broadphase/testkit/brute_force.h>

#include <limits>
#include <string>
#include <vector>

namespace bp::mpi::test {
namespace {

// Runs `call` and returns the code it threw, or nothing.
template <class Call>
std::optional<ErrorCode> thrown(Call&& call, std::string* message = nullptr) {
  try {
    call();
  } catch (const Error& e) {
    if (message) *message = e.what();
    return e.code();
  }
  return std::nullopt;
}

Aabb cube(float x, float y, float z, float h = 0.5f) {
  return {Vec3(x - h, y - h, z - h), Vec3(x + h, y + h, z + h)};
}

// A small world on every rank count: ids 0..n-1 on a line of touching
// cubes, added round-robin, and the model beside it (on every rank).
struct Fixture {
  DistributedBroadPhase world{MPI_COMM_WORLD, {.local = {.threads = 1}, .payloadBytes = 8}};
  Model model{{.threads = 1}};
  void addLine(uint32_t n) {
    for (uint32_t i = 0; i < n; ++i) {
      const ProxyDesc d{.box = cube(0.9f * float(i), 0, 0), .userData = i};
      if (int(i % uint32_t(worldSize())) == worldRank()) world.add(i, d);
      model.add(i, d);
    }
  }
  void expectSameFrame() {
    const Frame all = allGather(world.update());
    const Frame expected = model.update();
    EXPECT_TRUE(samePairs(expected.pairs, all.pairs));
    EXPECT_TRUE(samePairs(expected.begun, all.begun));
    EXPECT_TRUE(samePairs(expected.ended, all.ended));
    EXPECT_EQ(world.validate(), "");
  }
  // The lowest rank that does not hold `id`, or -1.
  int rankNotHolding(uint64_t id) {
    std::vector<int> holds(static_cast<size_t>(worldSize()));
    const int mine = world.holds(id) ? 1 : 0;
    MPI_Allgather(&mine, 1, MPI_INT, holds.data(), 1, MPI_INT, MPI_COMM_WORLD);
    for (int r = 0; r < worldSize(); ++r)
      if (!holds[size_t(r)]) return r;
    return -1;
  }
  // The rank that owns `id`.
  int ownerRank(uint64_t id) {
    int owner = world.owns(id) ? worldRank() : -1;
    MPI_Allreduce(MPI_IN_PLACE, &owner, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return owner;
  }
};

TEST(Errors, LocalCallsRejectBadInputAndChangeNothing) {
  Fixture f;
  f.addLine(40);
  f.expectSameFrame();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Aabb bad{Vec3(1, 1, 1), Vec3(0, 0, 0)};
  const std::vector<std::byte> eight(8), three(3);

  EXPECT_EQ(thrown([&] { f.world.add(kNoId, {.box = cube(0, 0, 0)}); }),
            ErrorCode::invalidArgument);
  EXPECT_EQ(thrown([&] { f.world.add(1000, {.box = bad}); }), ErrorCode::invalidBox);
  EXPECT_EQ(thrown([&] {
              f.world.add(1000, {.box = {Vec3(nan, 0, 0), Vec3(1, 1, 1)}});
            }),
            ErrorCode::invalidBox);
  EXPECT_EQ(thrown([&] { f.world.add(1000, {.box = cube(0, 0, 0), .motion = MotionType(9)}); }),
            ErrorCode::invalidArgument);
  EXPECT_EQ(thrown([&] { f.world.add(1000, {.box = cube(0, 0, 0)}, three); }),
            ErrorCode::invalidArgument);
  // Layers do not travel between ranks: a proxy must stay in layer 0.
  EXPECT_EQ(thrown([&] { f.world.add(1000, {.box = cube(0, 0, 0), .layer = 1}); }),
            ErrorCode::invalidArgument);
  // An id this rank holds (owned or ghost) is rejected at once.
  for (uint64_t id = 0; id < 40; ++id) {
    if (!f.world.holds(id)) continue;
    std::string message;
    EXPECT_EQ(thrown([&] { f.world.add(id, {.box = cube(0, 0, 0)}); }, &message),
              ErrorCode::invalidArgument);
    EXPECT_NE(message.find("is live"), std::string::npos) << message;
  }
  // Twice on one rank.
  const uint64_t fresh = 5000 + uint64_t(worldRank());
  f.world.add(fresh, {.box = cube(100, 0, 0)}, eight);
  EXPECT_EQ(thrown([&] { f.world.add(fresh, {.box = cube(100, 0, 0)}); }),
            ErrorCode::invalidArgument);
  f.world.remove(fresh);  // cancels the add
  EXPECT_FALSE(f.world.owns(fresh));

  // Ids this rank does not own.
  for (uint64_t id : {uint64_t(777777), uint64_t(0), uint64_t(1), uint64_t(2)}) {
    if (f.world.owns(id)) continue;
    EXPECT_EQ(thrown([&] { f.world.remove(id); }), ErrorCode::staleHandle);
    EXPECT_EQ(thrown([&] { f.world.move(id, cube(0, 0, 0)); }), ErrorCode::staleHandle);
    EXPECT_EQ(thrown([&] { f.world.setFilter(id, {}); }), ErrorCode::staleHandle);
    EXPECT_EQ(thrown([&] { f.world.setUserData(id, 1); }), ErrorCode::staleHandle);
    EXPECT_EQ(thrown([&] { f.world.setMotionType(id, MotionType::staticBody); }),
              ErrorCode::staleHandle);
    EXPECT_EQ(thrown([&] { f.world.desc(id); }), ErrorCode::staleHandle);
    EXPECT_EQ(thrown([&] { f.world.payload(id); }), ErrorCode::staleHandle);
    if (f.world.holds(id)) {
      std::string message;
      thrown([&] { f.world.move(id, cube(0, 0, 0)); }, &message);
      EXPECT_NE(message.find("its owner is rank"), std::string::npos) << message;
    }
  }
  EXPECT_EQ(thrown([&] { f.world.ownerOf(777777); }), ErrorCode::staleHandle);
  EXPECT_EQ(thrown([&] { f.world.box(777777); }), ErrorCode::staleHandle);

  // Owned ids: a bad box or motion; a batch with one bad entry moves none.
  const std::vector<uint64_t> owned(f.world.ownedIds().begin(), f.world.ownedIds().end());
  if (!owned.empty()) {
    const uint64_t id = owned[0];
    EXPECT_EQ(thrown([&] { f.world.move(id, bad); }), ErrorCode::invalidBox);
    EXPECT_EQ(thrown([&] { f.world.setMotionType(id, MotionType(9)); }),
              ErrorCode::invalidArgument);
    std::vector<Aabb> boxes(owned.size(), cube(-30, 0, 0));
    boxes.back() = bad;
    EXPECT_EQ(thrown([&] { f.world.move(owned, boxes); }), ErrorCode::invalidBox);
    EXPECT_EQ(thrown([&] { f.world.move(owned, std::span(boxes).first(0)); }),
              ErrorCode::invalidArgument);
    for (uint64_t o : owned) EXPECT_TRUE(f.world.desc(o).box.min == f.model.desc(o).box.min);
    // Removed, then added again in the same frame on the same rank.
    f.world.remove(id);
    EXPECT_EQ(thrown([&] { f.world.add(id, {.box = cube(0, 0, 0)}); }), ErrorCode::invalidArgument);
    EXPECT_EQ(thrown([&] { f.world.remove(id); }), ErrorCode::staleHandle);
  }
  for (uint64_t id : owned)
    if (id == owned[0]) f.model.remove(id);
  // Every rank removed its first owned id; the model did the same.
  for (int r = 0; r < worldSize(); ++r) {
    uint64_t first = owned.empty() ? kNoId : owned[0];
    MPI_Bcast(&first, 1, MPI_UINT64_T, r, MPI_COMM_WORLD);
    if (r != worldRank() && first != kNoId) f.model.remove(first);
  }
  f.expectSameFrame();
  EXPECT_TRUE(allRanks(!::testing::Test::HasFailure()));
}

TEST(Errors, DuplicatesAcrossRanksRejectedByUpdate) {
  if (worldSize() < 2) GTEST_SKIP() << "needs two ranks";  // same decision on every rank
  Fixture f;
  f.addLine(30);
  f.expectSameFrame();

  // The same new id added on ranks 0 and 1.
  const uint64_t id = 900;
  if (worldRank() < 2) f.world.add(id, {.box = cube(50, 50, 50)});
  std::string message;
  EXPECT_EQ(thrown([&] { f.world.update(); }, &message), ErrorCode::invalidArgument);
  EXPECT_NE(message.find("global id 900 is added on ranks 0 and 1"), std::string::npos) << message;
  EXPECT_EQ(f.world.validate(), "");
  if (worldRank() == 1) f.world.remove(id);  // cancel one
  f.model.add(id, {.box = cube(50, 50, 50)});
  f.expectSameFrame();

  // An id that is live, added on a rank that does not hold it.
  // The cubes lie along x, so the far end's rank holds neither 3 nor 5.
  const int adder = f.rankNotHolding(3);
  EXPECT_GE(adder, 0);
  if (adder >= 0) {
    if (worldRank() == adder) f.world.add(3, {.box = cube(-80, 0, 0)});
    EXPECT_EQ(thrown([&] { f.world.update(); }, &message), ErrorCode::invalidArgument);
    EXPECT_NE(
        message.find("global id 3 added on rank " + std::to_string(adder) + " is already live"),
        std::string::npos)
        << message;
    if (worldRank() == adder) f.world.remove(3);
    f.expectSameFrame();
  }

  // Removed on its owner and added again on another rank in one frame.
  const int owner = f.ownerRank(5);
  const int other = f.rankNotHolding(5);
  EXPECT_GE(other, 0);
  if (other >= 0) {
    if (worldRank() == owner) f.world.remove(5);
    if (worldRank() == other) f.world.add(5, {.box = cube(-90, 0, 0)});
    EXPECT_EQ(thrown([&] { f.world.update(); }, &message), ErrorCode::invalidArgument);
    EXPECT_NE(message.find("removed and added again"), std::string::npos) << message;
    EXPECT_EQ(f.world.validate(), "");
    // Nothing was applied: the removal is still recorded, the add can be
    // cancelled, and the frame is the model's with 5 removed.
    if (worldRank() == other) f.world.remove(5);
    f.model.remove(5);
    f.expectSameFrame();
  }
  EXPECT_TRUE(allRanks(!::testing::Test::HasFailure()));
}

TEST(Errors, BadQueriesThrowOnEveryRank) {
  Fixture f;
  f.addLine(20);
  f.expectSameFrame();
  const int last = worldSize() - 1;
  const bool culprit = worldRank() == last;
  std::string message;

  std::vector<RayInput> rays{{Vec3(-5, 0, 0), Vec3(1, 0, 0), 100.0f}};
  if (culprit) rays.push_back({Vec3(0, 0, 0), Vec3(0, 0, 0), 1.0f});
  std::vector<GlobalHit> hits(rays.size());
  EXPECT_EQ(thrown([&] { f.world.castRays(rays, hits); }, &message), ErrorCode::invalidRay);
  EXPECT_NE(message.find(culprit ? "ray 1 on rank" : "rank " + std::to_string(last)),
            std::string::npos)
      << message;
  rays.resize(1);
  std::vector<GlobalHit> tooFew(culprit ? 0 : 1);
  EXPECT_EQ(thrown([&] { f.world.castRays(rays, tooFew); }), ErrorCode::invalidArgument);
  // The world still answers.
  EXPECT_EQ(f.world.castRay(Vec3(-5, 0, 0), Vec3(1, 0, 0), 100.0f), (GlobalHit{0, 4.5f}));

  std::vector<Aabb> boxes{cube(0, 0, 0)};
  if (culprit) boxes.push_back({Vec3(1, 1, 1), Vec3(0, 0, 0)});
  BatchResults<uint64_t> found;
  EXPECT_EQ(thrown([&] { f.world.queryBoxes(boxes, found); }), ErrorCode::invalidBox);

  std::vector<GlobalNeighbour> near;
  EXPECT_EQ(thrown([&] { f.world.nearest(Vec3(0, 0, 0), culprit ? 0 : 2, near); }),
            ErrorCode::invalidArgument);
  EXPECT_EQ(thrown([&] {
              f.world.nearest(Vec3(culprit ? std::numeric_limits<float>::infinity() : 0.0f, 0, 0),
                              2, near);
            }),
            ErrorCode::invalidArgument);
  f.world.nearest(Vec3(0, 0, 0), 2, near);
  EXPECT_EQ(near, (std::vector<GlobalNeighbour>{
                      {0, 0.0f}, {1, distanceSquared(cube(0.9f, 0, 0), Vec3(0, 0, 0))}}));
  EXPECT_TRUE(allRanks(!::testing::Test::HasFailure()));
}

TEST(Errors, PairBudgetExceededOnEveryRank) {
  // 60 cubes in a row (59 pairs), then all on one spot (1770 pairs), then
  // apart again: the middle frame passes every rank's budget of 200.
  DistributedBroadPhase world(MPI_COMM_WORLD, {.local = {.threads = 1, .maxPairs = 200}});
  const uint32_t n = 60;
  std::vector<Aabb> boxes(n);
  for (uint32_t i = 0; i < n; ++i) {
    boxes[i] = cube(0.9f * float(i), 0, 0);
    if (int(i % uint32_t(worldSize())) == worldRank()) world.add(i, {.box = boxes[i]});
  }
  std::vector<Pair> before = brute::findPairs(boxes);
  EXPECT_EQ(allGather(world.update().pairs).size(), before.size());

  for (uint64_t id : std::vector<uint64_t>(world.ownedIds().begin(), world.ownedIds().end()))
    world.move(id, cube(0.01f * float(id), 0, 0));
  std::string message;
  EXPECT_EQ(thrown([&] { world.update(); }, &message), ErrorCode::capacityExceeded);
  EXPECT_TRUE(world.lastPairs().pairs.empty());
  EXPECT_EQ(world.validate(), "");

  // Apart again, every other cube shifted: the events are against the last
  // frame that succeeded.
  for (uint32_t i = 0; i < n; ++i) boxes[i] = cube(0.9f * float(i) + (i % 2 ? 0.3f : 0.0f), 0, 0);
  for (uint64_t id : std::vector<uint64_t>(world.ownedIds().begin(), world.ownedIds().end()))
    world.move(id, boxes[id]);
  const Frame all = allGather(world.update());
  const std::vector<Pair> after = brute::findPairs(boxes);
  auto toSet = [](const std::vector<GlobalPair>& g) {
    std::vector<Pair> out;
    for (const GlobalPair& p : g) out.push_back({uint32_t(p.a), uint32_t(p.b)});
    return out;
  };
  std::vector<Pair> begun, ended;
  std::set_difference(after.begin(), after.end(), before.begin(), before.end(),
                      std::back_inserter(begun));
  std::set_difference(before.begin(), before.end(), after.begin(), after.end(),
                      std::back_inserter(ended));
  EXPECT_EQ(toSet(all.pairs), after);
  EXPECT_EQ(toSet(all.begun), begun);
  EXPECT_EQ(toSet(all.ended), ended);
  EXPECT_TRUE(allRanks(!::testing::Test::HasFailure()));
}

TEST(Errors, BadConfigRejectedOnEveryRank) {
  EXPECT_EQ(thrown([] { DistributedBroadPhase w(MPI_COMM_WORLD, {.halo = -1.0f}); }),
            ErrorCode::invalidArgument);
  EXPECT_EQ(thrown([] { DistributedBroadPhase w(MPI_COMM_WORLD, {.rebalanceThreshold = -0.5}); }),
            ErrorCode::invalidArgument);
  EXPECT_EQ(thrown([] { DistributedBroadPhase w(MPI_COMM_WORLD, {.samplesPerRank = 0}); }),
            ErrorCode::invalidArgument);
}

}  // namespace
}  // namespace bp::mpi::test
