// BroadPhase's double path (docs/large_worlds.md) against the double
// brute-force oracle: standard scenes translated far from the origin, the
// pairs and their events across moves, every double query, boxes that touch
// exactly in double where float rounding would merge or split them, float
// and double proxies in one world, origin shifts, and the rejections.
#include <broadphase/broad_phase.h>
#include <broadphase/testkit/brute_force_double.h>
#include <broadphase/testkit/scene.h>

#include "error_capture.h"
#include "test_support.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace bp {
namespace {

using test::expectError;

struct Config {
  Structure structure;
  int threads;
  // always: every query that can walks the ray tree (nearest's first step
  // included); never: the structure answers them all.
  RayTreeMode rayTree = RayTreeMode::automatic;
};

const Config kSetups[] = {{Structure::bvh, 1},
                          {Structure::sweep, 1},
                          {Structure::automatic, 1},
                          {Structure::bvh, 2},
                          {Structure::sweep, 2},
                          {Structure::automatic, 2},
                          {Structure::sweep, 1, RayTreeMode::always},
                          {Structure::bvh, 2, RayTreeMode::always},
                          {Structure::automatic, 1, RayTreeMode::never}};

std::string name(const Config& s) {
  const char* names[] = {"bvh", "sweep", "automatic"};
  const char* trees[] = {"", " tree always", " tree never"};
  return std::string(names[int(s.structure)]) + "/" + std::to_string(s.threads) + "t" +
         trees[int(s.rayTree)];
}

std::vector<Pair> pairsOf(std::span<const ProxyPair> pairs) { return test::indicesOf(pairs); }

// The pairs of `now` that `before` lacks (both sorted).
std::vector<Pair> minus(const std::vector<Pair>& now, const std::vector<Pair>& before) {
  return test::pairsMissingFrom(now, before);
}

std::vector<uint32_t> collectBox(const BroadPhase& bp, const DAabb& box) {
  std::vector<uint32_t> out;
  bp.queryBox(box, [&](uint32_t p) {
    out.push_back(p);
    return true;
  });
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<uint32_t> collectPoint(const BroadPhase& bp, const DVec3& point) {
  std::vector<uint32_t> out;
  bp.queryPoint(point, [&](uint32_t p) {
    out.push_back(p);
    return true;
  });
  std::sort(out.begin(), out.end());
  return out;
}

// Every double query of `bp` against the oracle over `boxes` (index = proxy).
void checkQueries(const BroadPhase& bp, const std::vector<DAabb>& boxes, const DVec3& offset,
                  uint32_t n, const std::string& where, std::span<const uint8_t> live = {}) {
  const std::vector<Ray> rays = makeRays(n, 60, 7);
  for (size_t r = 0; r < rays.size(); ++r) {
    const DVec3 start = toDouble(rays[r].origin) + offset;
    const DVec3 dir = toDouble(rays[r].direction);
    const double length = rays[r].maxT;
    const DRay ray = makeRay(start, dir, length);
    const DRayHit expected = brute::castRayClosest(boxes, ray, live);
    ASSERT_EQ(bp.castRay(start, dir, length), expected) << where << " ray " << r;
    const std::vector<DRayHit> all = brute::castRayAll(boxes, ray, live);
    std::vector<DRayHit> got;
    bp.castRayAll(start, dir, length, got);
    ASSERT_EQ(got, all) << where << " ray " << r;
    const DRayHit any = bp.castRay(start, dir, length, RayQuery::any);
    ASSERT_EQ(any.hit(), expected.hit()) << where << " ray " << r;
    if (any.hit()) {
      ASSERT_NE(std::find(all.begin(), all.end(), any), all.end()) << where;
    }
  }
  SceneRng rng(11);
  const double side = 4.0 * std::cbrt(double(n));
  for (int q = 0; q < 40; ++q) {
    const DVec3 c{rng.uniform() * side, rng.uniform() * side, rng.uniform() * side};
    const DVec3 p = c + offset;
    const double h = 0.5 + 3.0 * rng.uniform();
    const DAabb box{p - DVec3{h, h, h}, p + DVec3{h, h, 0.5 * h}};
    ASSERT_EQ(collectBox(bp, box), brute::queryBox(boxes, box, live)) << where << " box " << q;
    ASSERT_EQ(collectPoint(bp, p), brute::queryPoint(boxes, p, live)) << where << " point " << q;
    std::vector<DNeighbour> near;
    bp.nearest(p, 5, near);
    ASSERT_EQ(near, brute::nearest(boxes, p, 5, live)) << where << " nearest " << q;
  }
}

// A standard scene translated by `offset` through the double API, the
// float frame's origin at `origin`: pairs, events across moves, queries.
void runTranslated(const Config& setup, SceneKind kind, double offset, const Vec3& origin) {
  const std::string where =
      name(setup) + " " + sceneName(kind) + " offset " + std::to_string(offset);
  const uint32_t n = 1200;
  Scene scene = makeScene(kind, n, 3);
  const DVec3 shift{offset, offset, offset};
  BroadPhase bp({.structure = setup.structure, .threads = setup.threads, .rayTree = setup.rayTree});
  bp.shiftOrigin(origin);
  std::vector<ProxyId> ids(n);
  std::vector<DAabb> boxes(n);
  for (uint32_t i = 0; i < n; ++i) {
    boxes[i] = brute::translated(scene.boxes[i], shift);
    ids[i] = bp.add(
        DProxyDesc{.box = boxes[i],
                   .motion = scene.isStatic[i] ? MotionType::staticBody : MotionType::dynamic,
                   .userData = i});
    ASSERT_EQ(ids[i].index, i);
  }
  std::vector<Pair> before;
  for (int frame = 0; frame < 4; ++frame) {
    if (frame > 0) {
      scene.step();
      std::vector<ProxyId> moved;
      std::vector<DAabb> to;
      for (uint32_t i = 0; i < n; ++i) {
        if (scene.isStatic[i]) continue;
        boxes[i] = brute::translated(scene.boxes[i], shift);
        moved.push_back(ids[i]);
        to.push_back(boxes[i]);
      }
      if (frame == 2) {
        for (size_t k = 0; k < moved.size(); ++k) bp.move(moved[k], to[k]);
      } else {
        bp.move(moved, to);
      }
    }
    const FramePairs& f = bp.update();
    const std::vector<Pair> expected = brute::findPairs(boxes, scene.isStatic);
    ASSERT_TRUE(test::samePairs(expected, pairsOf(f.pairs))) << where << " frame " << frame;
    ASSERT_TRUE(test::samePairs(minus(expected, before), pairsOf(f.begun))) << where;
    ASSERT_TRUE(test::samePairs(minus(before, expected), pairsOf(f.ended))) << where;
    ASSERT_EQ(bp.validate(), "") << where;
    before = expected;
  }
  checkQueries(bp, boxes, shift, n, where);
}

TEST(DoubleWorld, StandardScenesFarFromTheOriginMatchTheDoubleOracle) {
  for (const Config& setup : kSetups)
    for (SceneKind kind : {SceneKind::uniform, SceneKind::clustered, SceneKind::staticScene}) {
      // 1e6: stored around a zero origin (relative coordinates below 2^24).
      runTranslated(setup, kind, 1e6, Vec3::Zero());
      for (double offset : {1e9, -1e9, 1e12, -1e12}) {
        // The origin a float near the scene (float(1e12) is not 1e12), and
        // one 10^6 away from it (relative coordinates near 2^20).
        const float o = float(offset);
        runTranslated(setup, kind, offset, Vec3(o, o, o));
        runTranslated(setup, kind, offset, Vec3(o + 1e6f, o - 1e6f, o));
        if (testing::Test::HasFatalFailure()) return;
      }
    }
}

// Relative coordinates near 2^24, where float spacing is 2 units: boxes 1e9
// away whose faces lie between floats. Touching pairs must stay, pairs one
// double step apart must go, and rays grazing a face must hit exactly.
TEST(DoubleWorld, BoxesTouchingBetweenFloatsAreDecidedInDouble) {
  const double base = 1e9;
  const double frame = 16000000.0;  // relative coordinate of the row: float spacing 1
  for (const Config& setup : kSetups) {
    BroadPhase bp(
        {.structure = setup.structure, .threads = setup.threads, .rayTree = setup.rayTree});
    bp.shiftOrigin(Vec3(float(base), float(base), float(base)));
    const DVec3 o = bp.origin();
    std::vector<DAabb> boxes;
    // A row along x: each box starts where the last ends, at a coordinate
    // a quarter of a float step past a float; every other one a double
    // step later (a gap of one double ulp at 1e9: 1.2e-7).
    double x = o.x + frame + 0.25;
    for (int i = 0; i < 40; ++i) {
      const double lo = (i % 2 == 0) ? x : std::nextafter(x, 1e300);
      const double hi = lo + 0.5 + 0.125 * (i % 3);
      boxes.push_back({{lo, o.y + frame + 0.3, o.z - frame - 0.7},
                       {hi, o.y + frame + 0.3 + 1.1, o.z - frame + 0.4}});
      x = hi;
    }
    // A flat box exactly on the row's top face, and one a double step above.
    const double top = o.y + frame + 0.3 + 1.1;
    boxes.push_back(
        {{boxes[0].min.x, top, boxes[0].min.z}, {boxes[10].max.x, top, boxes[0].max.z}});
    boxes.push_back({{boxes[0].min.x, std::nextafter(top, 1e300), boxes[0].min.z},
                     {boxes[10].max.x, top + 1.0, boxes[0].max.z}});
    std::vector<ProxyId> ids;
    for (const DAabb& b : boxes) ids.push_back(bp.add(DProxyDesc{.box = b}));
    const std::vector<Pair> expected = brute::findPairs(boxes);
    ASSERT_GT(expected.size(), 20u);
    EXPECT_TRUE(test::samePairs(expected, pairsOf(bp.update().pairs))) << name(setup);
    // Rays along the row's top face (grazing: every box hit on its
    // boundary), just above it (hitting only the flat box), and across.
    const DVec3 dirs[] = {{1, 0, 0}, {1, 1e-9, 0}, {0, -1, 0}, {1, -1, 0.5}};
    for (const DVec3& dir : dirs)
      for (double dy : {0.0, 1e-7, -1e-7, 0.05}) {
        const DVec3 start{boxes[0].min.x - 3.0, top + dy, boxes[0].min.z + 0.5};
        const DRay ray = makeRay(start, dir, 60.0);
        EXPECT_EQ(bp.castRay(start, dir, 60.0), brute::castRayClosest(boxes, ray))
            << name(setup) << " dy " << dy;
        std::vector<DRayHit> all;
        bp.castRayAll(start, dir, 60.0, all);
        EXPECT_EQ(all, brute::castRayAll(boxes, ray)) << name(setup) << " dy " << dy;
      }
    // Points on shared faces, box queries that touch one face exactly, and
    // nearest with equal double distances.
    for (size_t i = 0; i + 1 < 40; ++i) {
      const DVec3 p{boxes[i].max.x, boxes[i].min.y, boxes[i].max.z};
      EXPECT_EQ(collectPoint(bp, p), brute::queryPoint(boxes, p)) << name(setup) << " " << i;
      const DAabb q{{boxes[i].max.x, top, boxes[i].max.z},
                    {boxes[i].max.x + 1e-7, top + 1, boxes[i].max.z + 1}};
      EXPECT_EQ(collectBox(bp, q), brute::queryBox(boxes, q)) << name(setup) << " " << i;
      std::vector<DNeighbour> near;
      bp.nearest(p + DVec3{0, 0, 0.5}, 3, near);
      EXPECT_EQ(near, brute::nearest(boxes, p + DVec3{0, 0, 0.5}, 3)) << name(setup) << " " << i;
    }
  }
}

// At an origin of 2^50 a double step is 0.25 and roundOutward() pads each
// side by 2 before it rounds: the float boxes of boxes one double step apart
// overlap by several units, far past a float step near the frame's zero.
// Only the double test may part them (accepts() takes a pair on its float
// boxes alone only where they overlap by more than those pads).
TEST(DoubleWorld, BoxesOneDoubleStepApartFarOut) {
  for (const Config& setup : kSetups) {
    BroadPhase bp(
        {.structure = setup.structure, .threads = setup.threads, .rayTree = setup.rayTree});
    bp.shiftOrigin(Vec3(0x1p50f, 0x1p50f, 0x1p50f));
    const DVec3 o = bp.origin();
    std::vector<DAabb> boxes;
    // A row along x: every other box starts where the last ends, the others
    // one double step (0.25) after it.
    double x = o.x;
    for (int i = 0; i < 30; ++i) {
      const double lo = (i % 2 == 0) ? x : x + 0.25;
      const double hi = lo + 1.0 + 0.25 * (i % 3);
      boxes.push_back({{lo, o.y, o.z}, {hi, o.y + 1.0, o.z + 1.0}});
      x = hi;
    }
    std::vector<ProxyId> ids;
    for (const DAabb& b : boxes) ids.push_back(bp.add(DProxyDesc{.box = b}));
    const std::vector<Pair> expected = brute::findPairs(boxes);
    ASSERT_GE(expected.size(), 14u);
    ASSERT_LT(expected.size(), 29u);  // some neighbours apart
    EXPECT_TRUE(test::samePairs(expected, pairsOf(bp.update().pairs))) << name(setup);
  }
}

// Float and double proxies in one world: a float proxy lives in the float
// frame, and double queries and mixed pairs see it at its box + origin().
TEST(DoubleWorld, FloatAndDoubleProxiesMix) {
  for (const Config& setup : kSetups) {
    BroadPhase bp(
        {.structure = setup.structure, .threads = setup.threads, .rayTree = setup.rayTree});
    bp.shiftOrigin(Vec3(1e9f, 1e9f, 1e9f));
    const DVec3 o = bp.origin();
    const uint32_t n = 600;
    Scene scene = makeScene(SceneKind::uniform, n, 5);
    std::vector<DAabb> world(n);
    std::vector<ProxyId> ids(n);
    for (uint32_t i = 0; i < n; ++i) {
      if (i % 2 == 0) {
        world[i] = brute::translated(scene.boxes[i], o);
        ids[i] = bp.add(DProxyDesc{.box = world[i]});
      } else {
        world[i] = brute::translated(scene.boxes[i], o);  // float box + origin, in double
        ids[i] = bp.add(ProxyDesc{.box = scene.boxes[i]});
      }
    }
    for (int frame = 0; frame < 3; ++frame) {
      if (frame > 0) {
        scene.step();
        for (uint32_t i = 0; i < n; ++i) {
          world[i] = brute::translated(scene.boxes[i], o);
          if (i % 2 == 0)
            bp.move(ids[i], world[i]);
          else
            bp.move(ids[i], scene.boxes[i]);
        }
      }
      EXPECT_TRUE(test::samePairs(brute::findPairs(world), pairsOf(bp.update().pairs)))
          << name(setup) << " frame " << frame;
      EXPECT_EQ(bp.worldBox(ids[1]).min, world[1].min);
    }
    checkQueries(bp, world, o, n, name(setup) + " mixed");
    // Each proxy keeps its precision: the other move is rejected.
    test::ErrorCapture capture;
    bp.move(ids[0], scene.boxes[0]);
    bp.move(ids[1], world[1]);
    EXPECT_EQ(capture.count(), 2u);
    for (const test::ReportedError& e : capture.errors())
      EXPECT_EQ(e.code, ErrorCode::invalidArgument);
  }
}

// A large float world with a few double proxies spread over it (the double
// boxes are held in pages of 1024 indices, made where double proxies are):
// frames that move every proxy, remove some of each kind and add them back
// as the other kind into the freed indices, with and without
// concurrentQueries; then a snapshot loaded into another world and an
// origin shift. Pairs and every double query against the oracle.
TEST(DoubleWorld, DoubleProxiesSparseAmongFloatOnes) {
  for (const bool concurrent : {false, true})
    for (const Config& setup : kSetups) {
      const std::string where = name(setup) + (concurrent ? " concurrentQueries" : "");
      const uint32_t n = 3000;
      Scene scene = makeScene(SceneKind::uniform, n, 6);
      BroadPhase bp({.structure = setup.structure,
                     .threads = setup.threads,
                     .concurrentQueries = concurrent,
                     .rayTree = setup.rayTree});
      bp.shiftOrigin(Vec3(1e9f, 1e9f, -1e9f));
      const DVec3 o = bp.origin();
      std::vector<DAabb> world(n);
      std::vector<ProxyId> ids(n);
      std::vector<uint8_t> isDouble(n), live(n, 1);
      const auto place = [&](uint32_t i, bool asDouble) {
        world[i] = brute::translated(scene.boxes[i], o);
        const ProxyId id = asDouble ? bp.add(DProxyDesc{.box = world[i]})
                                    : bp.add(ProxyDesc{.box = scene.boxes[i]});
        ASSERT_EQ(id.index, i) << where;
        ids[i] = id;
        isDouble[i] = asDouble;
        live[i] = 1;
      };
      for (uint32_t i = 0; i < n; ++i) place(i, i % 1000 < 4 || i >= 2950);
      for (int frame = 0; frame < 4; ++frame) {
        scene.step();
        for (uint32_t i = 0; i < n; ++i) {
          if (!live[i]) continue;
          world[i] = brute::translated(scene.boxes[i], o);
          if (isDouble[i])
            bp.move(ids[i], world[i]);
          else
            bp.move(ids[i], scene.boxes[i]);
        }
        if (frame == 1) {  // one in seven of each kind, highest index first
          for (uint32_t i = n; i-- > 0;)
            if (i % 7 == 2) {
              bp.remove(ids[i]);
              live[i] = 0;
            }
        }
        if (frame == 2) {  // back, each as the other kind, into its own index
          for (uint32_t i = 0; i < n; ++i)
            if (!live[i]) place(i, !isDouble[i]);
        }
        const std::vector<Pair> got = pairsOf(bp.update().pairs);
        std::vector<DAabb> liveWorld = world;
        for (uint32_t i = 0; i < n; ++i)
          if (!live[i]) liveWorld[i] = toDouble(Aabb::empty());
        ASSERT_TRUE(test::samePairs(brute::findPairs(liveWorld), got)) << where << frame;
        ASSERT_EQ(bp.validate(), "") << where << " frame " << frame;
        checkQueries(bp, world, o, n, where + " frame " + std::to_string(frame), live);
        if (testing::Test::HasFatalFailure()) return;
      }
      std::vector<std::byte> state;
      bp.saveState(state);
      BroadPhase loaded({.structure = setup.structure, .threads = setup.threads});
      loaded.loadState(state);
      ASSERT_EQ(loaded.validate(), "") << where;
      checkQueries(loaded, world, o, n, where + " loaded", live);
      for (uint32_t i = 0; i < n; i += 250) {
        EXPECT_EQ(loaded.worldBox(ids[i]).min, bp.worldBox(ids[i]).min) << where << i;
        EXPECT_EQ(loaded.worldBox(ids[i]).max, bp.worldBox(ids[i]).max) << where << i;
      }
      bp.shiftOrigin(Vec3(1000.0f, -500.0f, 250.0f));
      ASSERT_EQ(bp.validate(), "") << where;
      // A double proxy stays where it is; a float one's frame box is
      // rounded anew around the new origin, as the facade reports it.
      for (uint32_t i = 0; i < n; ++i) {
        if (isDouble[i]) {
          EXPECT_EQ(bp.worldBox(ids[i]).min, world[i].min) << where << i;
        } else {
          world[i] = bp.worldBox(ids[i]);
        }
      }
      checkQueries(bp, world, o, n, where + " shifted", live);
      if (testing::Test::HasFatalFailure()) return;
    }
}

// Frames that move a different quarter of the proxies each, all of them,
// none, remove some and add others into their slots: every double query
// after each, with and without concurrentQueries (whose queries read a
// published copy of the double boxes, brought up to date entry by entry).
TEST(DoubleWorld, EveryFramesDoubleBoxesAnswerQueries) {
  for (const bool concurrent : {false, true})
    for (const Config& setup : kSetups) {
      const std::string where = name(setup) + (concurrent ? " concurrentQueries" : "");
      const uint32_t n = 400;
      Scene scene = makeScene(SceneKind::uniform, n, 4);
      const DVec3 shift{1e9, -1e9, 1e9};
      BroadPhase bp({.structure = setup.structure,
                     .threads = setup.threads,
                     .concurrentQueries = concurrent,
                     .rayTree = setup.rayTree});
      bp.shiftOrigin(Vec3(1e9f, -1e9f, 1e9f));
      std::vector<DAabb> boxes(n);
      std::vector<uint8_t> live(n, 1);
      std::vector<ProxyId> ids(n);
      for (uint32_t i = 0; i < n; ++i) {
        boxes[i] = brute::translated(scene.boxes[i], shift);
        ids[i] = bp.add(DProxyDesc{.box = boxes[i]});
      }
      std::vector<uint32_t> removed;
      for (int frame = 0; frame < 9; ++frame) {
        scene.step();
        for (uint32_t i = 0; i < n; ++i) {
          const bool moves = frame == 4 || (frame != 5 && i % 4 == uint32_t(frame) % 4);
          if (!live[i] || !moves) continue;
          boxes[i] = brute::translated(scene.boxes[i], shift);
          bp.move(ids[i], boxes[i]);
        }
        if (frame == 2 || frame == 6) {
          for (uint32_t i = uint32_t(frame); i < n; i += 13) {
            if (!live[i]) continue;
            bp.remove(ids[i]);
            live[i] = 0;
            removed.push_back(i);
          }
        }
        if (frame == 3 || frame == 7) {
          for (const uint32_t r : removed) {
            const DAabb box = brute::translated(scene.boxes[r], shift);
            const ProxyId id = bp.add(DProxyDesc{.box = box});
            ASSERT_FALSE(live[id.index]) << where;
            boxes[id.index] = box;
            ids[id.index] = id;
            live[id.index] = 1;
          }
          removed.clear();
        }
        bp.update();
        ASSERT_EQ(bp.validate(), "") << where << " frame " << frame;
        checkQueries(bp, boxes, shift, n, where + " frame " + std::to_string(frame), live);
        if (testing::Test::HasFatalFailure()) return;
      }
    }
}

// shiftOrigin re-rounds the double proxies around the new origin: the
// double answers and the pairs stay as they were, with no events.
TEST(DoubleWorld, ShiftingTheOriginKeepsDoubleAnswers) {
  for (const Config& setup : kSetups) {
    const uint32_t n = 800;
    const Scene scene = makeScene(SceneKind::clustered, n, 9);
    const DVec3 shift{-3e11, 2e9, 7.25};
    std::vector<DAabb> boxes(n);
    BroadPhase bp(
        {.structure = setup.structure, .threads = setup.threads, .rayTree = setup.rayTree});
    bp.shiftOrigin(Vec3(-3e11f, 2e9f, 0.0f));
    for (uint32_t i = 0; i < n; ++i) {
      boxes[i] = brute::translated(scene.boxes[i], shift);
      bp.add(DProxyDesc{.box = boxes[i]});
    }
    const std::vector<Pair> pairs = pairsOf(bp.update().pairs);
    EXPECT_TRUE(test::samePairs(brute::findPairs(boxes), pairs));
    for (const Vec3& step :
         {Vec3(1e6f, -1e6f, 5e5f), Vec3(-1e6f, 1e6f, -5e5f), Vec3(0.3f, 0.7f, -0.1f)}) {
      bp.shiftOrigin(step);
      EXPECT_EQ(bp.validate(), "");
      checkQueries(bp, boxes, shift, n, name(setup) + " shifted");
      const FramePairs& f = bp.update();
      EXPECT_EQ(pairsOf(f.pairs), pairs);
      EXPECT_TRUE(f.begun.empty() && f.ended.empty());
    }
  }
}

TEST(DoubleWorld, BadInputIsRejectedAndLeavesTheWorldIntact) {
  const double nan = std::nan("");
  const double inf = INFINITY;
  BroadPhase bp;
  bp.shiftOrigin(Vec3(1e9f, 0, 0));
  const DAabb unit{{1e9, 0, 0}, {1e9 + 1, 1, 1}};
  const ProxyId a = bp.add(DProxyDesc{.box = unit});
  const ProxyId b = bp.add(DProxyDesc{.box = unit});
  const ProxyId f = bp.add(ProxyDesc{.box = Aabb{Vec3(0, 0, 0), Vec3(1, 1, 1)}});
  ASSERT_EQ(bp.update().pairs.size(), 3u);
  const DAabb bad[] = {
      {{nan, 0, 0}, {1, 1, 1}},            // NaN
      {{1e9, 0, 0}, {inf, 1, 1}},          // infinite
      {{1e9 + 2, 0, 0}, {1e9 + 1, 1, 1}},  // inverted
      {{0, 0, 0}, {1, 1, 1}},              // 1e9 from the origin: past 2^24 as float
      {{1e9, 0, 0}, {1e9 + 1, 1, 3e7}},    // past 2^24 on z
  };
  for (const DAabb& box : bad) {
    EXPECT_EQ(expectError(ErrorCode::invalidBox, [&] { return bp.add(DProxyDesc{.box = box}); }),
              ProxyId{});
    expectError(ErrorCode::invalidBox, [&] { bp.move(a, box); });
    const ProxyId batch[] = {a, b};
    const DAabb to[] = {unit, box};
    expectError(ErrorCode::invalidBox, [&] { bp.move(batch, to); });
    const DProxyDesc descs[] = {{.box = unit}, {.box = box}};
    ProxyId out[2];
    expectError(ErrorCode::invalidBox, [&] { bp.add(descs, out); });
    EXPECT_EQ(out[0], ProxyId{});
  }
  for (const DAabb& box : {bad[0], bad[1], bad[2]})
    expectError(ErrorCode::invalidBox, [&] { bp.queryBox(box, [](uint32_t) { return true; }); });
  expectError(ErrorCode::invalidArgument,
              [&] { return bp.add(DProxyDesc{.box = unit, .motion = MotionType(7)}); });
  expectError(ErrorCode::invalidArgument, [&] { bp.move(f, unit); });
  expectError(ErrorCode::invalidArgument, [&] { bp.move(a, Aabb{Vec3(0, 0, 0), Vec3(1, 1, 1)}); });
  {
    const ProxyId batch[] = {f};
    const Aabb to[] = {Aabb{Vec3(0, 0, 0), Vec3(1, 1, 1)}};
    const ProxyId mixed[] = {a};
    expectError(ErrorCode::invalidArgument, [&] { bp.move(mixed, to); });
    (void)batch;
  }
  const DVec3 at{1e9, 0.5, 0.5}, x{1, 0, 0};
  expectError(ErrorCode::invalidRay, [&] { return bp.castRay(at, DVec3{0, 0, 0}, 1.0); });
  expectError(ErrorCode::invalidRay, [&] { return bp.castRay(at, DVec3{nan, 0, 0}, 1.0); });
  expectError(ErrorCode::invalidRay, [&] { return bp.castRay(at, x, 0.0); });
  expectError(ErrorCode::invalidRay, [&] { return bp.castRay(at, x, inf); });
  expectError(ErrorCode::invalidRay, [&] { return bp.castRay(DVec3{0, 0, 0}, x, 1.0); });
  expectError(ErrorCode::invalidArgument, [&] { return bp.castRay(at, x, 1.0, RayQuery::all); });
  std::vector<DNeighbour> near;
  expectError(ErrorCode::invalidArgument, [&] { bp.nearest(at, 0, near); });
  expectError(ErrorCode::invalidArgument, [&] { bp.nearest(DVec3{nan, 0, 0}, 1, near); });
  expectError(ErrorCode::invalidArgument, [&] {
    bp.queryPoint(DVec3{inf, 0, 0}, [](uint32_t) { return true; });
  });
  // A shift that takes a double proxy past 2^24 from the new origin.
  expectError(ErrorCode::invalidBox, [&] { bp.shiftOrigin(Vec3(-1e9f, 0, 0)); });
  EXPECT_EQ(bp.origin(), (DVec3{1e9, 0, 0}));
  EXPECT_EQ(bp.validate(), "");
  EXPECT_EQ(bp.proxyCount(), 3u);
  const FramePairs& after = bp.update();
  EXPECT_EQ(after.pairs.size(), 3u);
  EXPECT_TRUE(after.begun.empty() && after.ended.empty());
  EXPECT_EQ(bp.worldBox(a).max, unit.max);
  EXPECT_EQ(bp.castRay(DVec3{1e9 - 5, 0.5, 0.5}, x, 10.0).t, 5.0);
}

// A long batch whose bad entry lies past the first blocks (and, on two
// threads, in a later chunk) is rejected after the entries before it were
// recorded: they are taken back, so every box as given, every query and the
// next frame's pairs are those of the last good batch.
TEST(DoubleWorld, ALongBatchRejectedLateLeavesTheWorldIntact) {
  const uint32_t n = 12000;  // more than one chunk (8192) on two threads
  for (int threads : {1, 2}) {
    SCOPED_TRACE(std::to_string(threads) + " threads");
    Scene scene = makeScene(SceneKind::uniform, n, 5);
    const DVec3 shift{1e9, 1e9, 1e9};
    BroadPhase bp({.structure = Structure::automatic, .threads = threads});
    bp.shiftOrigin(Vec3(1e9f, 1e9f, 1e9f));
    std::vector<DAabb> boxes(n);
    std::vector<ProxyId> ids(n);
    for (uint32_t i = 0; i < n; ++i) {
      boxes[i] = brute::translated(scene.boxes[i], shift);
      ids[i] = bp.add(DProxyDesc{.box = boxes[i]});
    }
    const std::vector<Pair> before = pairsOf(bp.update().pairs);
    for (const uint32_t badAt : {700u, n - 1}) {
      std::vector<DAabb> to(n);
      for (uint32_t i = 0; i < n; ++i)
        to[i] = DAabb{boxes[i].min + DVec3{3, 0, 0}, boxes[i].max + DVec3{3, 0, 0}};
      to[badAt].max.y = std::nan("");
      expectError(ErrorCode::invalidBox, [&] { bp.move(ids, to); });
      EXPECT_EQ(bp.validate(), "");
      for (uint32_t i = 0; i < n; ++i) {
        ASSERT_EQ(bp.worldBox(ids[i]).min, boxes[i].min) << "proxy " << i;
        ASSERT_EQ(bp.worldBox(ids[i]).max, boxes[i].max) << "proxy " << i;
      }
    }
    const FramePairs& same = bp.update();
    EXPECT_TRUE(test::samePairs(before, pairsOf(same.pairs)));
    EXPECT_TRUE(same.begun.empty() && same.ended.empty());
    // A good batch afterwards moves every proxy, and a single move after it
    // takes its own box, not a rejected one.
    scene.step();
    for (uint32_t i = 0; i < n; ++i) boxes[i] = brute::translated(scene.boxes[i], shift);
    bp.move(ids, boxes);
    bp.update();
    boxes[3] = DAabb{boxes[3].min + DVec3{0.5, 0, 0}, boxes[3].max + DVec3{0.5, 0, 0}};
    bp.move(ids[3], boxes[3]);
    const FramePairs& after = bp.update();
    EXPECT_TRUE(test::samePairs(brute::findPairs(boxes, scene.isStatic), pairsOf(after.pairs)));
    EXPECT_EQ(bp.worldBox(ids[3]).min, boxes[3].min);
    EXPECT_EQ(bp.validate(), "");
    checkQueries(bp, boxes, shift, n, "after a rejected batch");
  }
}

// Removing double proxies and reusing their indices for float ones (and
// back) keeps the count of double proxies and the pairs exact.
TEST(DoubleWorld, RemovedIndicesChangePrecision) {
  BroadPhase bp({.structure = Structure::bvh, .threads = 1});
  bp.shiftOrigin(Vec3(1e12f, 1e12f, 1e12f));
  const DVec3 o = bp.origin();
  const DAabb d{o, o + DVec3{1, 1, 1}};
  const ProxyId a = bp.add(DProxyDesc{.box = d});
  const ProxyId b = bp.add(DProxyDesc{.box = d});
  EXPECT_EQ(bp.update().pairs.size(), 1u);
  bp.remove(a);
  const ProxyId c = bp.add(ProxyDesc{.box = Aabb{Vec3(1, 1, 1), Vec3(2, 2, 2)}});
  EXPECT_EQ(c.index, a.index);
  const FramePairs& f = bp.update();
  EXPECT_EQ(f.pairs.size(), 1u);  // c touches b at (1, 1, 1)
  EXPECT_EQ(f.begun.size(), 1u);
  EXPECT_EQ(f.ended.size(), 1u);
  bp.move(c, Aabb{Vec3(1.001f, 0, 0), Vec3(2, 2, 2)});  // o + 1.001 > o + 1 in double
  EXPECT_EQ(bp.update().pairs.size(), 0u);
  EXPECT_EQ(bp.validate(), "");
  bp.remove(b);
  bp.remove(c);
  EXPECT_EQ(bp.validate(), "");
}

// Batches long enough to be checked and written in chunks on two threads
// (ascending indices: the chunks write side by side; descending, and one
// with a repeated proxy: in batch order, the last box kept) give the same
// pairs, events and boxes as one thread, and the pairs of the double oracle.
TEST(DoubleWorld, LongBatchesOnTwoThreadsAsOnOne) {
  const uint32_t n = 12000;  // every box moves: more than one chunk (8192) a batch
  Scene scene = makeScene(SceneKind::uniform, n, 12);
  const DVec3 shift{1e9, 1e9, 1e9};
  BroadPhase one({.structure = Structure::automatic, .threads = 1});
  BroadPhase two({.structure = Structure::automatic, .threads = 2});
  std::vector<DAabb> boxes(n);
  std::vector<ProxyId> idsOne(n), idsTwo(n);  // (each world's handles are its own)
  for (BroadPhase* bp : {&one, &two}) {
    bp->shiftOrigin(Vec3(1e9f, 1e9f, 1e9f));
    for (uint32_t i = 0; i < n; ++i) {
      boxes[i] = brute::translated(scene.boxes[i], shift);
      (bp == &one ? idsOne : idsTwo)[i] = bp->add(
          DProxyDesc{.box = boxes[i],
                     .motion = scene.isStatic[i] ? MotionType::staticBody : MotionType::dynamic});
    }
  }
  one.update();
  two.update();
  for (int frame = 0; frame < 3; ++frame) {
    scene.step();
    std::vector<uint32_t> moved;
    std::vector<DAabb> to;
    for (uint32_t i = 0; i < n; ++i) {
      if (scene.isStatic[i]) continue;
      boxes[i] = brute::translated(scene.boxes[i], shift);
      moved.push_back(i);
      to.push_back(boxes[i]);
    }
    if (frame == 1) {
      std::reverse(moved.begin(), moved.end());
      std::reverse(to.begin(), to.end());
    }
    if (frame == 2) {  // the first proxy twice: a stale box first, its own at the end
      const uint32_t first = moved.front();
      const DAabb own = to.front();
      moved.insert(moved.begin(), first);
      to.insert(to.begin(), DAabb{own.min, own.max + DVec3{50, 50, 50}});
      moved.push_back(first);
      to.push_back(own);
    }
    std::vector<ProxyId> handlesOne, handlesTwo;
    for (uint32_t i : moved) {
      handlesOne.push_back(idsOne[i]);
      handlesTwo.push_back(idsTwo[i]);
    }
    one.move(handlesOne, to);
    two.move(handlesTwo, to);
    const FramePairs& a = one.update();
    const FramePairs& b = two.update();
    const std::string where = "frame " + std::to_string(frame);
    ASSERT_TRUE(test::samePairs(pairsOf(a.pairs), pairsOf(b.pairs))) << where;
    ASSERT_TRUE(test::samePairs(pairsOf(a.begun), pairsOf(b.begun))) << where;
    ASSERT_TRUE(test::samePairs(pairsOf(a.ended), pairsOf(b.ended))) << where;
    // Every box as given (worldBox) and as the queries test it (its upper
    // corner, which its box of the frame before does not hold).
    for (uint32_t i = 0; i < n; ++i) {
      ASSERT_EQ(two.worldBox(idsTwo[i]).min, boxes[i].min) << where << " proxy " << i;
      ASSERT_EQ(two.worldBox(idsTwo[i]).max, boxes[i].max) << where << " proxy " << i;
      bool found = false;
      two.queryPoint(boxes[i].max, [&](uint32_t p) {
        found |= p == i;
        return true;
      });
      ASSERT_TRUE(found) << where << " proxy " << i;
    }
    if (frame == 0) {
      ASSERT_TRUE(test::samePairs(brute::findPairs(boxes, scene.isStatic), pairsOf(b.pairs)));
    }
  }
  EXPECT_EQ(two.validate(), "");
  checkQueries(two, boxes, shift, n, "two threads");
}

}  // namespace
}  // namespace bp
