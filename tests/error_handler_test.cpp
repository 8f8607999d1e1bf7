// The error handler (error.h): every rejected call of BroadPhase, Bvh and
// SweepGrid, with a handler that returns, is reported once, returns its
// documented fallback (docs/errors.md, "Without exceptions") and changes
// nothing: validate() passes, and the next update reports no event and the
// pairs of the brute-force oracle. Then the two modes without a handler:
// bp::Error where there are exceptions, a message and abort where there are
// none.
#include <broadphase/broad_phase.h>
#include <broadphase/testkit/brute_force.h>
#include <broadphase/testkit/scene.h>

#include "bvh/bvh.h"
#include "sweep/sweep_grid.h"

#include "error_capture.h"
#include "test_support.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace bp {
namespace {

using test::ErrorCapture;
using test::expectError;

const float kNan = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();
const Aabb kBadBox{Vec3(0, 0, 0), Vec3(kNan, 1, 1)};
const RayHit kJunkHit{12345, 6.0f};

bool isEmptyBox(const Aabb& b) { return b.min == Aabb::empty().min && b.max == Aabb::empty().max; }

const char* name(Structure s) {
  return s == Structure::bvh ? "bvh" : s == Structure::sweep ? "sweep" : "automatic";
}

TEST(ErrorHandler, InstallAndRestore) {
  EXPECT_EQ(errorHandler(), nullptr);  // none by default
  int context = 0;
  auto handler = [](ErrorCode, const char*, void* c) { ++*static_cast<int*>(c); };
  setErrorHandler(handler, &context);
  EXPECT_EQ(errorHandler(), +handler);
  EXPECT_EQ(errorHandlerContext(), &context);
  {
    ErrorCapture capture;  // replaces it for its lifetime...
    EXPECT_NE(errorHandler(), +handler);
    BroadPhase bp({.threads = 1});
    bp.remove(ProxyId{3, 4});
    EXPECT_EQ(capture.count(), 1u);
  }
  EXPECT_EQ(errorHandler(), +handler);  // ...then puts it back, with its context
  EXPECT_EQ(errorHandlerContext(), &context);
  BroadPhase bp({.threads = 1});
  bp.remove(ProxyId{3, 4});
  EXPECT_EQ(context, 1);
  setErrorHandler(nullptr);
  EXPECT_EQ(errorHandler(), nullptr);
  EXPECT_EQ(errorHandlerContext(), nullptr);
}

TEST(ErrorHandler, ReceivesTheCodeTheMessageAndTheContext) {
  struct Seen {
    int calls = 0;
    ErrorCode code{};
    std::string message;
  } seen;
  setErrorHandler(
      [](ErrorCode code, const char* message, void* context) {
        Seen& s = *static_cast<Seen*>(context);
        ++s.calls;
        s.code = code;
        s.message = message;
      },
      &seen);
  BroadPhase bp({.threads = 1});
  const ProxyId a = bp.add({.box = Aabb{Vec3(0, 0, 0), Vec3(1, 1, 1)}});
  bp.move(a, kBadBox);
  setErrorHandler(nullptr);
  EXPECT_EQ(seen.calls, 1);
  EXPECT_EQ(seen.code, ErrorCode::invalidBox);
  EXPECT_EQ(seen.message.rfind("move: ", 0), 0u) << seen.message;  // no "broadphase:" prefix
}

// A batch from one origin checks its rays as its packets take them, on
// every worker: the error still names its first invalid ray, and every
// slot of the result is a miss, as when a batch is checked before it is cast.
TEST(ErrorHandler, ABatchFromOneOriginNamesItsFirstInvalidRay) {
  std::string message;
  setErrorHandler(
      [](ErrorCode code, const char* text, void* context) {
        EXPECT_EQ(code, ErrorCode::invalidRay);
        *static_cast<std::string*>(context) = text;
      },
      &message);
  BroadPhase bp({.threads = 2});
  for (int i = 0; i < 200; ++i) {
    const Vec3 c(float(i % 10), float(i / 10 % 10), float(i / 100));
    bp.add({.box = Aabb{c, c + Vec3(0.5f, 0.5f, 0.5f)}});
  }
  bp.update();
  std::vector<Ray> rays;
  for (int i = 0; i < 5000; ++i)
    rays.push_back(makeRay(Vec3(-1, -1, -1), Vec3(1, 1 + 0.001f * float(i % 100), 1), 30));
  rays[4321].maxT = -1.0f;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  // Every way isValidRay() rejects a ray, one at a time at ray 517.
  const std::function<void(Ray&)> spoil[] = {
      [](Ray& r) { r.direction = Vec3::Zero(); },
      [&](Ray& r) { r.direction.y() = nan; },
      [&](Ray& r) { r.direction.z() = -inf; },
      [&](Ray& r) { r.origin.x() = nan; },
      [&](Ray& r) { r.origin.z() = inf; },
      [](Ray& r) { r.origin.y() = 2 * kMaxCoordinate; },
      [](Ray& r) { r.maxT = 0.0f; },
      [&](Ray& r) { r.maxT = nan; },
      [&](Ray& r) { r.maxT = inf; },
  };
  std::vector<RayHit> hits(rays.size());
  for (const auto& spoilRay : spoil) {
    message.clear();
    std::fill(hits.begin(), hits.end(), RayHit{3, 1.0f});
    std::vector<Ray> bad = rays;
    spoilRay(bad[517]);
    bp.castRays(bad, hits);
    EXPECT_EQ(message.rfind("castRays: ray 517: ", 0), 0u) << message;
    EXPECT_EQ(hits, std::vector<RayHit>(rays.size(), RayHit{}));
  }
  setErrorHandler(nullptr);
  rays[4321] = rays[4320];
  bp.castRays(rays, hits);  // the same batch, valid: hits again
  EXPECT_TRUE(hits[4321].hit());
}

// --- BroadPhase ---------------------------------------------------------------

// A world of statics and movers, updated once, then one valid move pending:
// each rejected call must leave both the applied and the pending state alone.
struct World {
  Scene scene = makeScene(SceneKind::staticScene, 1500, 3);
  std::vector<ProxyId> ids;
  BroadPhase bp;

  World(Structure structure, uint64_t maxPairs = 0)
      : bp({.structure = structure, .threads = 2, .maxPairs = maxPairs}) {
    for (uint32_t i = 0; i < scene.n; ++i)
      ids.push_back(bp.add({scene.boxes[i],
                            scene.isStatic[i] ? MotionType::staticBody : MotionType::dynamic,
                            {},
                            i}));
    bp.update();
    const uint32_t mover = moving();
    scene.boxes[mover] =
        Aabb{scene.boxes[mover].min + Vec3(0.5f, 0, 0), scene.boxes[mover].max + Vec3(0.5f, 0, 0)};
    bp.move(ids[mover], scene.boxes[mover]);
  }
  uint32_t moving() const {
    return uint32_t(std::find(scene.isStatic.begin(), scene.isStatic.end(), 0) -
                    scene.isStatic.begin());
  }
  std::vector<Pair> expected() const { return brute::findPairs(scene.boxes, scene.isStatic); }
};

std::vector<Pair> indicesOf(std::span<const ProxyPair> ps) {
  std::vector<Pair> out;
  for (const ProxyPair& p : ps) out.push_back({p.a, p.b});
  return out;
}

TEST(ErrorHandler, BroadPhaseRejectedCallsReturnTheirFallbackAndChangeNothing) {
  for (Structure structure : {Structure::bvh, Structure::sweep, Structure::automatic}) {
    SCOPED_TRACE(name(structure));
    World w(structure);
    BroadPhase& bp = w.bp;
    const std::vector<Pair> lastPairs = indicesOf(bp.lastPairs().pairs);
    const uint32_t count = bp.proxyCount();
    const ProxyId a = w.ids[w.moving()], b = w.ids[w.moving() + 1];
    const Aabb boxA = bp.desc(a).box, boxB = bp.desc(b).box;
    const ProxyId stale{a.index, a.generation + 1};
    const Aabb unit{Vec3(0, 0, 0), Vec3(1, 1, 1)};
    auto intact = [&] {
      EXPECT_EQ(bp.validate(), "");
      EXPECT_EQ(bp.proxyCount(), count);
      EXPECT_EQ(bp.desc(a).box.min, boxA.min);
      EXPECT_EQ(bp.desc(b).box.max, boxB.max);
      EXPECT_EQ(indicesOf(bp.lastPairs().pairs), lastPairs);
    };

    // Proxies.
    ProxyId id = expectError(ErrorCode::invalidBox, [&] { return bp.add({.box = kBadBox}); });
    EXPECT_EQ(id, ProxyId{});
    EXPECT_FALSE(bp.contains(id));
    id = expectError(ErrorCode::invalidArgument,
                     [&] { return bp.add({.box = unit, .motion = MotionType(9)}); });
    EXPECT_EQ(id, ProxyId{});
    std::vector<ProxyDesc> descs(3, ProxyDesc{.box = unit});
    std::vector<ProxyId> out(3, a);
    expectError(ErrorCode::invalidArgument,
                [&] { bp.add(descs, std::span<ProxyId>(out.data(), 2)); });
    EXPECT_EQ(out[0], ProxyId{});
    EXPECT_EQ(out[1], ProxyId{});
    descs[2].box = kBadBox;
    out.assign(3, a);
    expectError(ErrorCode::invalidBox, [&] { bp.add(descs, out); });
    EXPECT_EQ(out, std::vector<ProxyId>(3, ProxyId{}));  // not even the two good ones
    intact();

    expectError(ErrorCode::staleHandle, [&] { bp.remove(stale); });
    const ProxyId withStale[] = {a, b, stale};
    expectError(ErrorCode::staleHandle, [&] { bp.remove(withStale); });
    const ProxyId twice[] = {a, b, a};
    expectError(ErrorCode::staleHandle, [&] { bp.remove(twice); });
    EXPECT_TRUE(bp.contains(a));
    EXPECT_TRUE(bp.contains(b));
    intact();

    expectError(ErrorCode::staleHandle, [&] { bp.move(stale, unit); });
    expectError(ErrorCode::invalidBox, [&] { bp.move(a, kBadBox); });
    const ProxyId pair[] = {a, b};
    const Aabb oneBox[] = {unit};
    expectError(ErrorCode::invalidArgument, [&] { bp.move(pair, oneBox); });
    const Aabb lastBad[] = {unit, kBadBox};
    expectError(ErrorCode::invalidBox, [&] { bp.move(pair, lastBad); });
    const ProxyId lastStale[] = {a, stale};
    const Aabb twoBoxes[] = {unit, unit};
    expectError(ErrorCode::staleHandle, [&] { bp.move(lastStale, twoBoxes); });
    expectError(ErrorCode::staleHandle,
                [&] { bp.setFilter(stale, Filter{.category = 2, .mask = 0}); });
    expectError(ErrorCode::staleHandle, [&] { bp.setUserData(stale, 77); });
    expectError(ErrorCode::staleHandle, [&] { bp.setMotionType(stale, MotionType::staticBody); });
    expectError(ErrorCode::invalidArgument, [&] { bp.setMotionType(a, MotionType(5)); });
    EXPECT_EQ(bp.desc(a).motion, MotionType::dynamic);
    EXPECT_EQ(bp.userData(a.index), a.index);
    intact();

    EXPECT_EQ(expectError(ErrorCode::staleHandle, [&] { return bp.handleOf(1u << 30); }),
              ProxyId{});
    EXPECT_EQ(expectError(ErrorCode::staleHandle, [&] { return bp.userData(1u << 30); }), 0u);
    const ProxyDesc d = expectError(ErrorCode::staleHandle, [&] { return bp.desc(stale); });
    EXPECT_TRUE(isEmptyBox(d.box));
    EXPECT_FALSE(isValid(d.box));
    EXPECT_EQ(d.motion, MotionType::dynamic);
    EXPECT_EQ(d.userData, 0u);
    EXPECT_EQ(d.filter.category, Filter{}.category);
    EXPECT_EQ(d.filter.mask, Filter{}.mask);

    // Queries: the callback is never called, results are misses or empty.
    int calls = 0;
    auto count1 = [&](uint32_t) { return ++calls, true; };
    expectError(ErrorCode::invalidBox, [&] { bp.queryBox(kBadBox, count1); });
    expectError(ErrorCode::invalidArgument, [&] { bp.queryPoint(Vec3(kNan, 0, 0), count1); });
    expectError(ErrorCode::invalidArgument, [&] { bp.queryPoint(Vec3(0, 1e9f, 0), count1); });
    const Vec3 o(1, 1, 1), x(1, 0, 0);
    EXPECT_FALSE(
        expectError(ErrorCode::invalidRay, [&] { return bp.castRay(o, Vec3::Zero(), 10); }).hit());
    EXPECT_FALSE(expectError(ErrorCode::invalidRay, [&] { return bp.castRay(o, x, -1); }).hit());
    EXPECT_FALSE(expectError(ErrorCode::invalidArgument, [&] {
                   return bp.castRay(makeRay(o, x, 10), RayQuery::all);
                 }).hit());
    Ray badRay = makeRay(o, x, 10);
    badRay.maxT = kInf;
    EXPECT_FALSE(expectError(ErrorCode::invalidRay, [&] { return bp.castRay(badRay); }).hit());
    std::vector<RayHit> hits(4, kJunkHit);
    expectError(ErrorCode::invalidRay, [&] { bp.castRayAll(o, Vec3(kNan, 0, 0), 10, hits); });
    EXPECT_TRUE(hits.empty());
    hits.assign(4, kJunkHit);
    expectError(ErrorCode::invalidRay, [&] { bp.castRayAll(badRay, hits); });
    EXPECT_TRUE(hits.empty());
    expectError(ErrorCode::invalidRay,
                [&] { bp.castRay(o, x, 0.0f, [&](uint32_t, float) { return ++calls, 1.0f; }); });
    const std::vector<Ray> rays = {makeRay(o, x, 10), makeRay(o, Vec3(0, 1, 0), 10), badRay};
    hits.assign(3, kJunkHit);
    expectError(ErrorCode::invalidRay, [&] { bp.castRays(rays, hits); });
    EXPECT_EQ(hits, std::vector<RayHit>(3, RayHit{}));
    hits.assign(3, kJunkHit);
    expectError(ErrorCode::invalidArgument,
                [&] { bp.castRays(std::span(rays).first(2), hits, RayQuery::closest); });
    EXPECT_EQ(hits, std::vector<RayHit>(3, RayHit{}));
    hits.assign(2, kJunkHit);
    expectError(ErrorCode::invalidArgument,
                [&] { bp.castRays(std::span(rays).first(2), hits, RayQuery::all); });
    EXPECT_EQ(hits, std::vector<RayHit>(2, RayHit{}));
    hits.assign(2, kJunkHit);
    std::vector<size_t> offsets(2, 7);
    expectError(ErrorCode::invalidRay, [&] { bp.castRaysAll(rays, hits, offsets); });
    EXPECT_TRUE(hits.empty());
    EXPECT_EQ(offsets, std::vector<size_t>(rays.size() + 1, 0));
    std::vector<Neighbour> near(3, Neighbour{7, 1.0f});
    expectError(ErrorCode::invalidArgument, [&] { bp.nearest(o, 0, near); });
    EXPECT_TRUE(near.empty());
    near.assign(3, Neighbour{7, 1.0f});
    expectError(ErrorCode::invalidArgument, [&] { bp.nearest(Vec3(0, kInf, 0), 2, near); });
    EXPECT_TRUE(near.empty());
    EXPECT_FALSE(expectError(ErrorCode::invalidArgument, [&] {
                   return bp.castBox(Vec3(-1, 1, 1), o, x, 10);
                 }).hit());
    EXPECT_FALSE(expectError(ErrorCode::invalidRay, [&] {
                   return bp.castBox(Vec3(1, 1, 1), o, x, kNan);
                 }).hit());
    EXPECT_EQ(calls, 0);

    // Large worlds: a shift that would push a box past the limit moves none.
    expectError(ErrorCode::invalidArgument, [&] { bp.shiftOrigin(Vec3(kNan, 0, 0)); });
    expectError(ErrorCode::invalidBox, [&] { bp.shiftOrigin(Vec3(0, 0, 2e7f)); });
    intact();

    // The next frame: only the valid move made before, no trace of the rest.
    const FramePairs& f = bp.update();
    EXPECT_EQ(bp.validate(), "");
    EXPECT_TRUE(test::samePairs(w.expected(), indicesOf(f.pairs)));
    std::vector<Pair> before = lastPairs, now = indicesOf(f.pairs), begun, ended;
    std::set_difference(now.begin(), now.end(), before.begin(), before.end(),
                        std::back_inserter(begun));
    std::set_difference(before.begin(), before.end(), now.begin(), now.end(),
                        std::back_inserter(ended));
    EXPECT_EQ(indicesOf(f.begun), begun);
    EXPECT_EQ(indicesOf(f.ended), ended);
    // And the world still works: every mover moves, pairs as brute force.
    for (uint32_t i = 0; i < w.scene.n; ++i) {
      if (w.scene.isStatic[i]) continue;
      w.scene.boxes[i] = {w.scene.boxes[i].min + Vec3(0, 0.25f, 0),
                          w.scene.boxes[i].max + Vec3(0, 0.25f, 0)};
      bp.move(w.ids[i], w.scene.boxes[i]);
    }
    EXPECT_TRUE(test::samePairs(w.expected(), indicesOf(bp.update().pairs)));
    EXPECT_EQ(bp.validate(), "");
  }
}

TEST(ErrorHandler, BroadPhaseOverMaxPairsKeepsTheLastFrame) {
  for (Structure structure : {Structure::bvh, Structure::sweep}) {
    SCOPED_TRACE(name(structure));
    World w(structure, 5000);
    const std::vector<Pair> last = indicesOf(w.bp.lastPairs().pairs);
    ASSERT_FALSE(last.empty());
    const size_t begun = w.bp.lastPairs().begun.size();
    // Every mover onto one spot: far more pairs than the budget allows.
    BroadPhase& bp = w.bp;
    for (uint32_t i = 0; i < w.scene.n; ++i)
      if (!w.scene.isStatic[i]) bp.move(w.ids[i], Aabb{Vec3(1, 1, 1), Vec3(2, 2, 2)});
    const uint32_t movers =
        uint32_t(std::count(w.scene.isStatic.begin(), w.scene.isStatic.end(), 0));
    ASSERT_GT(uint64_t(movers) * (movers - 1) / 2, 5000u);
    const FramePairs* f = expectError(ErrorCode::capacityExceeded, [&] { return &bp.update(); });
    EXPECT_EQ(f, &bp.lastPairs());
    EXPECT_EQ(indicesOf(f->pairs), last);  // the last frame's pairs and events, unchanged
    EXPECT_EQ(f->begun.size(), begun);
    EXPECT_EQ(bp.validate(), "");
  }
}

TEST(ErrorHandler, BroadPhaseConfigFieldsFallBackToTheirDefaults) {
  ErrorCapture capture;
  BroadPhase bp({.structure = Structure(7), .threads = -3, .margin = kNan, .cellSize = -2.0f});
  EXPECT_EQ(capture.count(), 4u);  // one report per bad field
  for (const test::ReportedError& e : capture.errors())
    EXPECT_EQ(e.code, ErrorCode::invalidArgument) << e.message;
  EXPECT_EQ(bp.structure(), BroadPhaseConfig{}.structure);
  EXPECT_EQ(bp.threadCount(), Scheduler(0).threadCount());
  const ProxyId a = bp.add({.box = Aabb{Vec3(0, 0, 0), Vec3(1, 1, 1)}});
  bp.add({.box = Aabb{Vec3(0.5f, 0, 0), Vec3(2, 1, 1)}});
  EXPECT_EQ(bp.update().pairs.size(), 1u);
  EXPECT_EQ(bp.castRay(Vec3(-1, 0.5f, 0.5f), Vec3(1, 0, 0), 10).proxy, a.index);
  EXPECT_EQ(capture.count(), 4u);
}

// --- Bvh and SweepGrid ----------------------------------------------------------

// The calls both structures share, with their fallbacks. `s` holds the scene,
// updated; nothing is pending.
template <class S>
void checkStructureFallbacks(S& s, const Scene& scene, const std::vector<ProxyId>& ids) {
  Scheduler scheduler(2);
  std::vector<Pair> before;
  s.findPairs(scheduler, before);
  const uint32_t count = s.proxyCount();
  const ProxyId a = ids[0], stale{a.index, a.generation + 1};
  const Aabb boxA = s.box(a.index);
  auto intact = [&] {
    ASSERT_EQ(s.validate(), "");
    EXPECT_EQ(s.proxyCount(), count);
    EXPECT_EQ(s.box(a.index).min, boxA.min);
  };
  const Aabb unit{Vec3(0, 0, 0), Vec3(1, 1, 1)};
  EXPECT_EQ(expectError(ErrorCode::invalidBox, [&] { return s.add(kBadBox); }), ProxyId{});
  expectError(ErrorCode::staleHandle, [&] { s.remove(stale); });
  expectError(ErrorCode::staleHandle, [&] { s.move(stale, unit); });
  expectError(ErrorCode::invalidBox, [&] { s.move(a, kBadBox); });
  std::vector<ProxyId> batch(ids.begin(), ids.begin() + 8);
  std::vector<Aabb> boxes(batch.size(), unit);
  boxes.back() = kBadBox;
  expectError(ErrorCode::invalidBox, [&] { s.move(batch, boxes); });
  expectError(ErrorCode::invalidBox, [&] { s.move(batch, boxes, scheduler); });
  boxes.back() = unit;
  batch.back() = stale;
  expectError(ErrorCode::staleHandle, [&] { s.move(batch, boxes); });
  expectError(ErrorCode::invalidArgument,
              [&] { s.move(batch, std::span<const Aabb>(boxes).first(3)); });
  intact();

  const uint32_t dead = s.capacity() + 5;
  EXPECT_TRUE(isEmptyBox(expectError(ErrorCode::staleHandle, [&] { return s.box(dead); })));
  EXPECT_FALSE(expectError(ErrorCode::staleHandle, [&] { return s.isStatic(dead); }));
  EXPECT_EQ(expectError(ErrorCode::staleHandle, [&] { return s.handleOf(dead); }), ProxyId{});

  int calls = 0;
  auto counted = [&](uint32_t) { return ++calls, true; };
  expectError(ErrorCode::invalidBox, [&] { s.queryBox(kBadBox, counted); });
  expectError(ErrorCode::invalidArgument, [&] { s.queryPoint(Vec3(kNan, 0, 0), counted); });
  Ray bad = makeRay(Vec3(1, 1, 1), Vec3(1, 0, 0), 10);
  bad.maxT = -1;
  const Ray good = makeRay(Vec3(1, 1, 1), Vec3(1, 0, 0), 1000);
  EXPECT_FALSE(
      expectError(ErrorCode::invalidRay, [&] { return s.castRay(bad, RayQuery::closest); }).hit());
  EXPECT_FALSE(expectError(ErrorCode::invalidArgument, [&] {
                 return s.castRay(good, RayQuery::all);
               }).hit());
  std::vector<RayHit> hits(3, kJunkHit);
  expectError(ErrorCode::invalidRay, [&] { s.castRayAll(bad, hits); });
  EXPECT_TRUE(hits.empty());
  expectError(ErrorCode::invalidRay,
              [&] { s.castRay(bad, [&](uint32_t, float) { return ++calls, 1.0f; }); });
  const Ray rays[] = {good, bad};
  hits.assign(2, kJunkHit);
  expectError(ErrorCode::invalidRay, [&] { s.castRays(scheduler, rays, hits, RayQuery::any); });
  EXPECT_EQ(hits, std::vector<RayHit>(2, RayHit{}));
  hits.assign(2, kJunkHit);
  expectError(ErrorCode::invalidArgument,
              [&] { s.castRays(scheduler, std::span(rays).first(1), hits, RayQuery::any); });
  EXPECT_EQ(hits, std::vector<RayHit>(2, RayHit{}));
  std::vector<Neighbour> near(2, Neighbour{1, 1.0f});
  expectError(ErrorCode::invalidArgument, [&] { s.nearest(Vec3(1, 1, 1), 0, near); });
  EXPECT_TRUE(near.empty());
  EXPECT_FALSE(expectError(ErrorCode::invalidArgument, [&] {
                 return s.castBox(Vec3(kNan, 0, 0), good);
               }).hit());
  EXPECT_EQ(calls, 0);
  intact();

  // Queries with changes pending: rejected, with the same fallbacks.
  const ProxyId added = s.add(unit);
  EXPECT_FALSE(expectError(ErrorCode::invalidArgument, [&] {
                 return s.castRay(good, RayQuery::closest);
               }).hit());
  near.assign(2, Neighbour{1, 1.0f});
  expectError(ErrorCode::invalidArgument, [&] { s.nearest(Vec3(1, 1, 1), 1, near); });
  EXPECT_TRUE(near.empty());
  expectError(ErrorCode::invalidArgument, [&] { s.queryBox(unit, counted); });
  EXPECT_EQ(calls, 0);
  s.remove(added);
  std::vector<Pair> after;
  s.findPairs(scheduler, after);
  EXPECT_EQ(s.validate(), "");
  EXPECT_TRUE(test::samePairs(before, after));
  EXPECT_TRUE(test::samePairs(brute::findPairs(scene.boxes, scene.isStatic), after));
}

template <class S>
std::vector<ProxyId> addAll(S& s, const Scene& scene) {
  std::vector<ProxyId> ids;
  for (uint32_t i = 0; i < scene.n; ++i) ids.push_back(s.add(scene.boxes[i], scene.isStatic[i]));
  return ids;
}

TEST(ErrorHandler, BvhRejectedCallsReturnTheirFallbackAndChangeNothing) {
  const Scene scene = makeScene(SceneKind::staticScene, 800, 5);
  Bvh bvh;
  const std::vector<ProxyId> ids = addAll(bvh, scene);
  Scheduler scheduler(1);
  bvh.update(scheduler);
  checkStructureFallbacks(bvh, scene, ids);

  ErrorCapture capture;
  const Bvh rejected(BvhConfig{.margin = -1.0f, .displacementScale = kInf, .rebuildRatio = 0.5f});
  EXPECT_EQ(capture.count(), 3u);
  EXPECT_EQ(rejected.config().margin, BvhConfig{}.margin);
  EXPECT_EQ(rejected.config().displacementScale, BvhConfig{}.displacementScale);
  EXPECT_EQ(rejected.config().rebuildRatio, BvhConfig{}.rebuildRatio);
}

TEST(ErrorHandler, SweepGridRejectedCallsReturnTheirFallbackAndChangeNothing) {
  const Scene scene = makeScene(SceneKind::staticScene, 800, 5);
  SweepGrid grid;
  const std::vector<ProxyId> ids = addAll(grid, scene);
  Scheduler scheduler(1);
  grid.update(scheduler);
  checkStructureFallbacks(grid, scene, ids);

  ErrorCapture capture;
  SweepGridConfig config;
  config.cellSize = -1;
  config.cellSizeFactor = 0;
  config.targetBoxesPerCell = kNan;
  config.cellStretchX = 100;
  config.maxCellsPerProxy = 0;
  config.kernel = SweepKernel::narrow;
  SweepGrid rejected(config);
  EXPECT_EQ(capture.count(), 5u);
  // It works with the defaults in their place.
  rejected.add(Aabb{Vec3(0, 0, 0), Vec3(1, 1, 1)});
  rejected.add(Aabb{Vec3(0.5f, 0.5f, 0.5f), Vec3(3, 3, 3)});
  std::vector<Pair> pairs;
  rejected.findPairs(scheduler, pairs);
  EXPECT_EQ(pairs, (std::vector<Pair>{{0, 1}}));
  EXPECT_EQ(rejected.validate(), "");
  EXPECT_EQ(rejected.cellLength(), rejected.cellSize() * SweepGridConfig{}.cellStretchX);
  EXPECT_EQ(capture.count(), 5u);
}

// --- No handler -------------------------------------------------------------------

#if BP_TEST_EXCEPTIONS

TEST(ErrorHandler, WithoutAHandlerACallThrowsError) {
  ASSERT_EQ(errorHandler(), nullptr);
  BroadPhase bp({.threads = 1});
  const ProxyId a = bp.add({.box = Aabb{Vec3(0, 0, 0), Vec3(1, 1, 1)}});
  test::expectThrow(ErrorCode::invalidBox, [&] { bp.move(a, kBadBox); });
  test::expectThrow(ErrorCode::staleHandle, [&] { bp.remove(ProxyId{a.index, 99}); });
  test::expectThrow(ErrorCode::invalidArgument, [&] { BroadPhase bad({.threads = -1}); });
  try {
    bp.handleOf(42);
    ADD_FAILURE() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "broadphase: stale handle: handleOf: no live proxy at index 42");
  }
  Bvh bvh;
  test::expectThrow(ErrorCode::invalidBox, [&] { bvh.add(kBadBox); });
  SweepGrid grid;
  test::expectThrow(ErrorCode::staleHandle, [&] { grid.remove(ProxyId{0, 0}); });
  EXPECT_TRUE(bp.contains(a));
  EXPECT_EQ(bp.validate(), "");
}

// A handler may throw its own exception: it leaves the rejected call, which
// has changed nothing.
TEST(ErrorHandler, AHandlerMayThrow) {
  struct EngineError {
    ErrorCode code;
  };
  setErrorHandler([](ErrorCode code, const char*, void*) { throw EngineError{code}; });
  World w(Structure::automatic);
  const std::vector<Pair> expected = w.expected();
  const ProxyId a = w.ids[0];
  bool caught = false;
  try {
    const ProxyId batch[] = {a, ProxyId{a.index, a.generation + 1}};
    const Aabb boxes[] = {Aabb{Vec3(0, 0, 0), Vec3(1, 1, 1)}, Aabb{Vec3(0, 0, 0), Vec3(1, 1, 1)}};
    w.bp.move(batch, boxes);
  } catch (const EngineError& e) {
    caught = e.code == ErrorCode::staleHandle;
  }
  setErrorHandler(nullptr);
  EXPECT_TRUE(caught);
  EXPECT_EQ(w.bp.validate(), "");
  EXPECT_TRUE(test::samePairs(expected, indicesOf(w.bp.update().pairs)));
}

#else

// No handler and no exceptions: the message on stderr, then abort.
TEST(ErrorHandlerDeathTest, WithoutAHandlerACallAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  ASSERT_EQ(errorHandler(), nullptr);
  EXPECT_DEATH(
      {
        BroadPhase bp({.threads = 1});
        bp.move(ProxyId{0, 0}, Aabb{Vec3(0, 0, 0), Vec3(1, 1, 1)});
      },
      "broadphase: stale handle: move: ");
  EXPECT_DEATH({ Bvh bvh(BvhConfig{.margin = -1.0f}); }, "broadphase: invalid argument: BvhConfig");
  EXPECT_DEATH(
      {
        SweepGrid grid;
        grid.add(kBadBox);
      },
      "broadphase: invalid box: SweepGrid::add: ");
}

#endif

}  // namespace
}  // namespace bp
