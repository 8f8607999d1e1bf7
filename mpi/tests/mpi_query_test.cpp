// Distributed queries against one BroadPhase, the brute-force oracle and the
// reference rays: closest ray hits (ties to the lower id), box and point
// queries, k nearest (ties to the lower id, many ties on a lattice), with
// filters, with every rank asking its own queries or none, and seeing the
// world of the last update() while changes are pending.
#include "mpi_test_support.h"

#include <broadphase/testkit/brute_force.h>
#include <broadphase/testkit/scene.h>
#include <test_support.h>

#include <cmath>
#include <vector>

namespace bp::mpi::test {
namespace {

// A world over `boxes` (id = index), added round-robin, updated once.
std::unique_ptr<DistributedBroadPhase> makeWorld(const std::vector<Aabb>& boxes,
                                                 const DistributedConfig& config = {
                                                     .local = {.threads = 1}}) {
  auto world = std::make_unique<DistributedBroadPhase>(MPI_COMM_WORLD, config);
  for (uint32_t i = 0; i < boxes.size(); ++i)
    if (int(i % uint32_t(worldSize())) == worldRank()) world->add(i, {.box = boxes[i]});
  world->update();
  return world;
}

// This rank's share of a list: items k with k = rank (mod size).
template <class T>
std::vector<T> share(const std::vector<T>& all) {
  std::vector<T> out;
  for (size_t k = size_t(worldRank()); k < all.size(); k += size_t(worldSize()))
    out.push_back(all[k]);
  return out;
}

std::vector<RayInput> inputs(const std::vector<Ray>& rays) {
  std::vector<RayInput> out;
  for (const Ray& r : rays) out.push_back({r.origin, r.direction, r.maxT});
  return out;
}

std::vector<Aabb> queryBoxes(uint64_t seed, float side, int count) {
  SceneRng rng(seed);
  std::vector<Aabb> out;
  for (int k = 0; k < count; ++k) {
    const Vec3 c(rng.uniform() * side, rng.uniform() * side, rng.uniform() * side);
    const float h = k % 4 == 0 ? side * 0.3f * rng.uniform() : 2.0f * rng.uniform();
    out.push_back(k % 5 == 0 ? Aabb{c, c} : Aabb{c - Vec3(h, h, h), c + Vec3(h, h, h)});
  }
  return out;
}

TEST(Queries, RaysMatchReferenceAndOneBroadPhase) {
  const Scene scene = makeScene(SceneKind::uniform, 10000);
  const auto world = makeWorld(scene.boxes);
  BroadPhase single({.threads = 1});
  for (const Aabb& b : scene.boxes) single.add({.box = b});
  single.update();
  const std::vector<Ray> rays = makeRays(scene.n, 1000);
  const std::vector<bp::test::ReferenceHit> reference = bp::test::loadReferenceRays();
  ASSERT_EQ(reference.size(), rays.size());

  // Each rank casts its share.
  const std::vector<RayInput> mine = inputs(share(rays));
  std::vector<GlobalHit> hits(mine.size());
  world->castRays(mine, hits);
  size_t wrong = 0, wrongReference = 0;
  for (size_t j = 0; j < mine.size(); ++j) {
    const size_t k = size_t(worldRank()) + j * size_t(worldSize());
    const RayHit expected = single.castRay(mine[j].origin, mine[j].direction, mine[j].length);
    const GlobalHit want = expected.hit() ? GlobalHit{expected.proxy, expected.t} : GlobalHit{};
    wrong += !(hits[j] == want);
    const auto& ref = reference[k];
    if (ref.box < 0)
      wrongReference += hits[j].hit();
    else
      wrongReference += hits[j].id != uint64_t(ref.box) ||
                        std::fabs(hits[j].t - ref.t) > 1e-5 * std::max(1.0, std::fabs(ref.t));
  }
  EXPECT_EQ(wrong, 0u);
  EXPECT_EQ(wrongReference, 0u);

  // Rank 0 casts them all, the others nothing; then with a filter that
  // hides every third box.
  std::vector<RayInput> all = worldRank() == 0 ? inputs(rays) : std::vector<RayInput>{};
  std::vector<GlobalHit> allHits(all.size());
  world->castRays(all, allHits);
  for (size_t k = 0; k < all.size(); ++k) {
    const RayHit e = single.castRay(all[k].origin, all[k].direction, all[k].length);
    EXPECT_EQ(allHits[k], (e.hit() ? GlobalHit{e.proxy, e.t} : GlobalHit{})) << "ray " << k;
  }
  EXPECT_TRUE(allRanks(!::testing::Test::HasFailure()));
}

TEST(Queries, FiltersApply) {
  const Scene scene = makeScene(SceneKind::sizes, 3000);
  auto world = std::make_unique<DistributedBroadPhase>(MPI_COMM_WORLD,
                                                       DistributedConfig{.local = {.threads = 1}});
  BroadPhase single({.threads = 1});
  const Filter odd{.category = 2, .mask = ~uint64_t(0)};
  for (uint32_t i = 0; i < scene.n; ++i) {
    const ProxyDesc d{.box = scene.boxes[i], .filter = i % 3 == 0 ? odd : Filter{}};
    if (int(i % uint32_t(worldSize())) == worldRank()) world->add(i, d);
    single.add(d);
  }
  world->update();
  single.update();
  const Filter query{.category = 1, .mask = 1};  // rejects category 2
  const std::vector<RayInput> rays = inputs(share(makeRays(scene.n, 300, 5)));
  std::vector<GlobalHit> hits(rays.size());
  world->castRays(rays, hits, query);
  for (size_t k = 0; k < rays.size(); ++k) {
    const RayHit e =
        single.castRay(rays[k].origin, rays[k].direction, rays[k].length, RayQuery::closest, query);
    EXPECT_EQ(hits[k], (e.hit() ? GlobalHit{e.proxy, e.t} : GlobalHit{}));
  }
  const std::vector<Aabb> boxes = share(queryBoxes(9, scene.worldSide, 60));
  BatchResults<uint64_t> found;
  world->queryBoxes(boxes, found, query);
  for (size_t q = 0; q < boxes.size(); ++q) {
    std::vector<uint64_t> expected;
    single.queryBox(
        boxes[q],
        [&](uint32_t p) {
          expected.push_back(p);
          return true;
        },
        query);
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(std::vector<uint64_t>(found.of(q).begin(), found.of(q).end()), expected);
  }
  EXPECT_TRUE(allRanks(!::testing::Test::HasFailure()));
}

TEST(Queries, RayTiesGoToTheLowerId) {
  // Each box three times under three ids, added on different ranks: every
  // hit is a three-way tie, which the lowest id wins.
  const Scene scene = makeScene(SceneKind::uniform, 2000);
  std::vector<Aabb> boxes;
  for (int copy = 0; copy < 3; ++copy)
    boxes.insert(boxes.end(), scene.boxes.begin(), scene.boxes.end());
  const auto world = makeWorld(boxes);
  const std::vector<Ray> rays = share(makeRays(scene.n, 400));
  std::vector<GlobalHit> hits(rays.size());
  world->castRays(inputs(rays), hits);
  size_t hitCount = 0;
  for (size_t k = 0; k < rays.size(); ++k) {
    const RayHit e = brute::castRayClosest(boxes, rays[k]);
    EXPECT_EQ(hits[k].hit(), e.hit());
    if (!e.hit()) continue;
    ++hitCount;
    EXPECT_EQ(hits[k].id, e.proxy);
    EXPECT_LT(hits[k].id, scene.n);  // the first copy's id
    // Distances as the oracle's slab test up to rounding of the direction.
    EXPECT_NEAR(hits[k].t, e.t, 1e-4f * (1 + e.t));
  }
  EXPECT_TRUE(allRanks(hitCount > 0 || rays.empty()));
  EXPECT_TRUE(allRanks(!::testing::Test::HasFailure()));
}

TEST(Queries, BoxAndPointQueriesMatchBruteForce) {
  // Sizes: small boxes and some spanning several regions; a halo so that
  // ghosts outnumber the minimum. Each proxy is reported exactly once.
  const Scene scene = makeScene(SceneKind::sizes, 10000);
  for (float halo : {0.0f, 2.0f}) {
    const auto world = makeWorld(scene.boxes, {.local = {.threads = 1}, .halo = halo});
    const std::vector<Aabb> boxes = share(queryBoxes(4, scene.worldSide, 200));
    BatchResults<uint64_t> found;
    world->queryBoxes(boxes, found);
    for (size_t q = 0; q < boxes.size(); ++q) {
      const std::vector<uint32_t> e = brute::queryBox(scene.boxes, boxes[q]);
      EXPECT_EQ(std::vector<uint64_t>(found.of(q).begin(), found.of(q).end()),
                std::vector<uint64_t>(e.begin(), e.end()))
          << "halo " << halo << " query " << q;
    }
    // One box per rank, and points as flat boxes.
    const Vec3 p = scene.boxes[size_t(worldRank()) * 7].center();
    std::vector<uint64_t> one;
    world->queryBox({p, p}, one);
    const std::vector<uint32_t> e = brute::queryPoint(scene.boxes, p);
    EXPECT_EQ(one, std::vector<uint64_t>(e.begin(), e.end()));
  }
  EXPECT_TRUE(allRanks(!::testing::Test::HasFailure()));
}

void expectNearest(const DistributedBroadPhase& world, const std::vector<Aabb>& boxes,
                   const std::vector<NearestInput>& queries) {
  BatchResults<GlobalNeighbour> found;
  world.nearest(queries, found);
  for (size_t q = 0; q < queries.size(); ++q) {
    const std::vector<Neighbour> e = brute::nearest(boxes, queries[q].point, queries[q].k);
    std::vector<GlobalNeighbour> want;
    for (const Neighbour& n : e) want.push_back({n.proxy, n.distanceSquared});
    EXPECT_EQ(std::vector<GlobalNeighbour>(found.of(q).begin(), found.of(q).end()), want)
        << "query " << q << " k " << queries[q].k;
  }
}

TEST(Queries, NearestMatchesBruteForce) {
  const Scene scene = makeScene(SceneKind::clustered, 10000);
  const auto world = makeWorld(scene.boxes);
  SceneRng rng(21);
  std::vector<NearestInput> queries;
  const uint32_t ks[] = {1, 3, 17, 64};
  for (int k = 0; k < 120; ++k)
    queries.push_back({Vec3(rng.uniform(), rng.uniform(), rng.uniform()) * scene.worldSide * 1.2f -
                           Vec3::Constant(scene.worldSide * 0.1f),
                       ks[k % 4]});
  expectNearest(*world, scene.boxes, share(queries));
  // One query per rank.
  std::vector<GlobalNeighbour> one;
  world->nearest(queries[size_t(worldRank())].point, 5, one);
  EXPECT_EQ(one.size(), 5u);
  EXPECT_TRUE(allRanks(!::testing::Test::HasFailure()));
}

TEST(Queries, NearestTiesOnALattice) {
  // Unit boxes on an integer lattice: from a lattice point, the 6 face
  // neighbours tie, then 12 edge neighbours, and so on; every k cuts
  // through a tie that only the global id can break.
  std::vector<Aabb> boxes;
  for (int x = 0; x < 16; ++x)
    for (int y = 0; y < 16; ++y)
      for (int z = 0; z < 16; ++z) {
        const Vec3 c(float(3 * x), float(3 * y), float(3 * z));
        boxes.push_back({c - Vec3::Constant(0.5f), c + Vec3::Constant(0.5f)});
      }
  const auto world = makeWorld(boxes);
  std::vector<NearestInput> queries;
  for (int k = 0; k < 40; ++k)
    queries.push_back(
        {Vec3(float(3 * (k % 16)), float(3 * ((k * 7) % 16)), 1.5f + float(3 * (k % 5))),
         uint32_t(1 + (k * 5) % 30)});
  expectNearest(*world, boxes, share(queries));
  EXPECT_TRUE(allRanks(!::testing::Test::HasFailure()));
}

TEST(Queries, SeeTheLastUpdate) {
  // Moves and removes recorded since the last update() are not seen.
  const Scene scene = makeScene(SceneKind::uniform, 3000);
  const auto world = makeWorld(scene.boxes);
  const std::vector<uint64_t> owned(world->ownedIds().begin(), world->ownedIds().end());
  for (size_t k = 0; k < owned.size(); ++k) {
    if (k % 2)
      world->remove(owned[k]);
    else
      world->move(owned[k], {Vec3::Constant(-50), Vec3::Constant(-49)});
  }
  const std::vector<Aabb> boxes = share(queryBoxes(8, scene.worldSide, 50));
  BatchResults<uint64_t> found;
  world->queryBoxes(boxes, found);
  for (size_t q = 0; q < boxes.size(); ++q) {
    const std::vector<uint32_t> e = brute::queryBox(scene.boxes, boxes[q]);
    EXPECT_EQ(std::vector<uint64_t>(found.of(q).begin(), found.of(q).end()),
              std::vector<uint64_t>(e.begin(), e.end()));
  }
  EXPECT_TRUE(allRanks(!::testing::Test::HasFailure()));
}

}  // namespace
}  // namespace bp::mpi::test
