// BroadPhase against a brute-force model, for all three structures: random
// sequences of add/remove/move with filters and motion types, pairs and
// begin/end events checked frame by frame, queries checked against brute::,
// and identical output for 1, 2 and 8 threads.
#include <broadphase/broad_phase.h>
#include <broadphase/testkit/brute_force.h>
#include <broadphase/testkit/scene.h>

#include "error_capture.h"
#include "test_support.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>

namespace bp {
namespace {

const Structure kStructures[] = {Structure::bvh, Structure::sweep, Structure::automatic};

const char* name(Structure s) {
  return s == Structure::bvh ? "bvh" : s == Structure::sweep ? "sweep" : "automatic";
}

// The model: every live proxy with its description, by handle.
struct Model {
  bool kinematicPairs = false;
  std::map<uint32_t, std::pair<ProxyId, ProxyDesc>> live;  // by index

  bool pairable(const ProxyDesc& a, const ProxyDesc& b) const {
    if (!a.filter.accepts(b.filter)) return false;
    auto isStatic = [](const ProxyDesc& d) { return d.motion == MotionType::staticBody; };
    auto isKin = [](const ProxyDesc& d) { return d.motion == MotionType::kinematic; };
    if (isStatic(a) && isStatic(b)) return false;
    if ((isKin(a) && isStatic(b)) || (isStatic(a) && isKin(b))) return false;
    if (isKin(a) && isKin(b) && !kinematicPairs) return false;
    return overlaps(a.box, b.box);
  }
  // Pairs keyed by both full handles, so a reused slot is a different pair.
  using Key = std::pair<std::pair<uint32_t, uint32_t>, std::pair<uint32_t, uint32_t>>;
  std::set<Key> pairs() const {
    std::set<Key> out;
    for (auto i = live.begin(); i != live.end(); ++i)
      for (auto j = std::next(i); j != live.end(); ++j)
        if (pairable(i->second.second, j->second.second))
          out.insert(
              {{i->first, i->second.first.generation}, {j->first, j->second.first.generation}});
    return out;
  }
};

std::vector<Pair> indicesOf(std::span<const ProxyPair> ps) {
  std::vector<Pair> out;
  for (const ProxyPair& p : ps) out.push_back({p.a, p.b});
  return out;
}

std::vector<Pair> indicesOf(const std::vector<Model::Key>& ks) {
  std::vector<Pair> out;
  for (const auto& k : ks) out.push_back({k.first.first, k.second.first});
  std::sort(out.begin(), out.end());
  return out;
}

// Events carry the user data of their pair as it was: a begun pair as in
// this frame's list, an ended one as in the last frame's (the proxy may be
// gone and its slot reused with other user data).
::testing::AssertionResult eventsCarryUserData(const FramePairs& f,
                                               const std::vector<ProxyPair>& previous) {
  auto find = [](std::span<const ProxyPair> list, const ProxyPair& e) -> const ProxyPair* {
    auto it = std::lower_bound(list.begin(), list.end(), e.key(),
                               [](const ProxyPair& p, uint64_t k) { return p.key() < k; });
    return it != list.end() && it->key() == e.key() ? &*it : nullptr;
  };
  for (const ProxyPair& e : f.begun) {
    const ProxyPair* p = find(f.pairs, e);
    if (!p || p->userDataA != e.userDataA || p->userDataB != e.userDataB)
      return ::testing::AssertionFailure() << "begun pair " << e.a << "-" << e.b;
  }
  for (const ProxyPair& e : f.ended) {
    const ProxyPair* p = find(previous, e);
    if (!p || p->userDataA != e.userDataA || p->userDataB != e.userDataB)
      return ::testing::AssertionFailure() << "ended pair " << e.a << "-" << e.b;
  }
  return ::testing::AssertionSuccess();
}

Aabb randomBox(std::mt19937& rng, float world) {
  std::uniform_real_distribution<float> pos(0.0f, world);
  std::uniform_real_distribution<float> size(0.0f, 1.0f);
  const Vec3 c(pos(rng), pos(rng), pos(rng));
  float s = size(rng);
  s = s < 0.05f ? 0.0f : s < 0.9f ? 0.5f + 2.0f * s : 5.0f + 20.0f * s;  // points, normal, huge
  const Vec3 e(s, s * size(rng) * 2.0f, s);
  return Aabb::fromCenterExtent(c, e);
}

ProxyDesc randomDesc(std::mt19937& rng, float world) {
  ProxyDesc d;
  d.box = randomBox(rng, world);
  const int m = int(rng() % 10);
  d.motion = m < 3 ? MotionType::staticBody : m < 5 ? MotionType::kinematic : MotionType::dynamic;
  d.filter.category = uint64_t(1) << (rng() % 3);
  d.filter.mask = (rng() % 4 == 0) ? ~(uint64_t(1) << (rng() % 3)) : ~uint64_t(0);
  d.userData = rng();
  return d;
}

void runRandomSequence(Structure structure, int threads, uint32_t seed, int frames,
                       uint64_t* digest) {
  BroadPhaseConfig config;
  config.structure = structure;
  config.threads = threads;
  config.pairKinematicKinematic = seed % 2 == 0;
  BroadPhase bp(config);
  Model model;
  model.kinematicPairs = config.pairKinematicKinematic;
  std::mt19937 rng(seed);
  const float world = 30.0f;
  std::set<Model::Key> previous;
  std::vector<ProxyPair> previousPairs;
  uint64_t h = 1469598103934665603ull;

  for (int frame = 0; frame < frames; ++frame) {
    const int ops = 1 + int(rng() % 60);
    for (int k = 0; k < ops; ++k) {
      const int op = int(rng() % 13);
      if (op < 4 || model.live.empty()) {
        const ProxyDesc d = randomDesc(rng, world);
        const ProxyId id = bp.add(d);
        ASSERT_FALSE(model.live.count(id.index));
        model.live[id.index] = {id, d};
      } else if (op < 5) {
        auto it = std::next(model.live.begin(), rng() % model.live.size());
        bp.remove(it->second.first);
        model.live.erase(it);
      } else if (op == 10) {
        auto it = std::next(model.live.begin(), rng() % model.live.size());
        it->second.second.userData = rng();
        bp.setUserData(it->second.first, it->second.second.userData);
        ASSERT_EQ(bp.userData(it->first), it->second.second.userData);
      } else if (op == 11) {
        // A body falls asleep (static), wakes (dynamic), or is driven (kinematic).
        auto it = std::next(model.live.begin(), rng() % model.live.size());
        const MotionType m = MotionType(rng() % 3);
        it->second.second.motion = m;
        bp.setMotionType(it->second.first, m);
        ASSERT_EQ(bp.desc(it->second.first).motion, m);
      } else if (op == 12 && rng() % 8 == 0) {
        const Vec3 offset(float(int(rng() % 9) - 4) * 0.75f, float(int(rng() % 5) - 2),
                          float(int(rng() % 9) - 4) * 0.5f);
        bp.shiftOrigin(offset);
        for (auto& [index, proxy] : model.live)
          proxy.second.box = {proxy.second.box.min - offset, proxy.second.box.max - offset};
      } else {
        auto it = std::next(model.live.begin(), rng() % model.live.size());
        Aabb b = it->second.second.box;
        const Vec3 step(float(int(rng() % 7) - 3) * 0.3f, float(int(rng() % 7) - 3) * 0.3f,
                        float(int(rng() % 7) - 3) * 0.3f);
        b = (rng() % 20 == 0) ? randomBox(rng, world) : Aabb{b.min + step, b.max + step};
        bp.move(it->second.first, b);
        it->second.second.box = b;
      }
    }
    const FramePairs& f = bp.update();
    ASSERT_EQ(bp.validate(), "") << name(structure) << " frame " << frame;

    const std::set<Model::Key> now = model.pairs();
    std::vector<Model::Key> begun, ended;
    std::set_difference(now.begin(), now.end(), previous.begin(), previous.end(),
                        std::back_inserter(begun));
    std::set_difference(previous.begin(), previous.end(), now.begin(), now.end(),
                        std::back_inserter(ended));
    ASSERT_TRUE(test::samePairs(indicesOf(std::vector<Model::Key>(now.begin(), now.end())),
                                indicesOf(f.pairs)))
        << name(structure) << " seed " << seed << " frame " << frame;
    ASSERT_TRUE(test::samePairs(indicesOf(begun), indicesOf(f.begun))) << "begun, frame " << frame;
    ASSERT_TRUE(test::samePairs(indicesOf(ended), indicesOf(f.ended))) << "ended, frame " << frame;
    for (const ProxyPair& p : f.pairs) {
      ASSERT_EQ(p.userDataA, model.live[p.a].second.userData);
      ASSERT_EQ(p.userDataB, model.live[p.b].second.userData);
    }
    ASSERT_TRUE(eventsCarryUserData(f, previousPairs)) << "frame " << frame;
    previousPairs.assign(f.pairs.begin(), f.pairs.end());
    previous = now;
    for (const ProxyPair& p : f.pairs) h = (h ^ p.key()) * 1099511628211ull;
    h = (h ^ f.begun.size()) * 1099511628211ull;
    h = (h ^ f.ended.size()) * 1099511628211ull;
  }
  *digest = h;
}

TEST(BroadPhase, RandomSequencesMatchTheModel) {
  for (Structure s : kStructures)
    for (uint32_t seed : {1u, 2u, 3u}) {
      uint64_t digest = 0;
      runRandomSequence(s, 2, seed, 60, &digest);
      if (HasFatalFailure()) return;
    }
}

TEST(BroadPhase, SameOutputForAnyThreadCount) {
  for (Structure s : kStructures) {
    uint64_t d1 = 0, d2 = 0, d8 = 0;
    runRandomSequence(s, 1, 11, 40, &d1);
    runRandomSequence(s, 2, 11, 40, &d2);
    runRandomSequence(s, 8, 11, 40, &d8);
    EXPECT_EQ(d1, d2) << name(s);
    EXPECT_EQ(d1, d8) << name(s);
  }
}

// The standard scenes through the public API: pairs equal the reference.
TEST(BroadPhase, StandardScenesMatchTheReference) {
  const auto reference = test::loadReferencePairs();
  for (Structure structure : kStructures)
    for (SceneKind kind : kAllScenes) {
      Scene scene = makeScene(kind, 10000);
      BroadPhaseConfig config;
      config.structure = structure;
      config.threads = 2;
      BroadPhase bp(config);
      std::vector<ProxyId> ids(scene.n);
      for (uint32_t i = 0; i < scene.n; ++i)
        ids[i] = bp.add({scene.boxes[i],
                         scene.isStatic[i] ? MotionType::staticBody : MotionType::dynamic,
                         {},
                         i});
      std::vector<ProxyId> moving;
      for (uint32_t i = 0; i < scene.n; ++i)
        if (!scene.isStatic[i]) moving.push_back(ids[i]);
      std::vector<Aabb> boxes(moving.size());
      // Events against plain set differences of consecutive frames (the
      // clustered scene's 2 * 10^5 pairs take the parallel merge).
      std::vector<Pair> previous = indicesOf(bp.update().pairs);
      for (const auto& ref : reference) {
        if (ref.scene != sceneName(kind)) continue;
        while (scene.frame < ref.frame) {
          scene.step();
          for (size_t k = 0; k < moving.size(); ++k) boxes[k] = scene.boxes[moving[k].index];
          bp.move(moving, boxes);
          const FramePairs& f = bp.update();
          std::vector<Pair> now = indicesOf(f.pairs), begun, ended;
          std::set_difference(now.begin(), now.end(), previous.begin(), previous.end(),
                              std::back_inserter(begun));
          std::set_difference(previous.begin(), previous.end(), now.begin(), now.end(),
                              std::back_inserter(ended));
          ASSERT_EQ(indicesOf(f.begun), begun) << name(structure) << " " << ref.scene;
          ASSERT_EQ(indicesOf(f.ended), ended) << name(structure) << " " << ref.scene;
          previous = std::move(now);
        }
        const FramePairs& f = scene.frame == 0 ? bp.update() : bp.lastPairs();
        const std::vector<Pair> got = indicesOf(f.pairs);
        EXPECT_EQ(got.size(), ref.pairs) << name(structure) << " " << ref.scene << " " << ref.frame;
        EXPECT_EQ(hashPairs(got), ref.hash)
            << name(structure) << " " << ref.scene << " " << ref.frame;
      }
    }
}

// Queries through the API against brute force on one scene, with a filter.
// Every query of `bp` against brute force over `boxes`, where accepted[i]
// says whether proxy i is live and accepted by `query`.
void expectQueriesMatch(const BroadPhase& bp, std::span<const Aabb> boxes,
                        std::span<const uint8_t> accepted, std::span<const Ray> rays,
                        const Filter& query, const char* label) {
  std::vector<RayHit> batch(rays.size());
  bp.castRays(rays, batch, RayQuery::closest, query);
  for (size_t r = 0; r < rays.size(); ++r) {
    EXPECT_EQ(batch[r], brute::castRayClosest(boxes, rays[r], accepted))
        << label << " batch ray " << r;
    // The single-ray calls take origin, direction and length and build the
    // ray with makeRay(): the oracle must see the same bits.
    const Ray& input = rays[r];
    const Ray ray = makeRay(input.origin, input.direction, input.maxT);
    const RayHit want = brute::castRayClosest(boxes, ray, accepted);
    EXPECT_EQ(bp.castRay(input.origin, input.direction, input.maxT, RayQuery::closest, query), want)
        << label << " ray " << r;
    const RayHit any = bp.castRay(input.origin, input.direction, input.maxT, RayQuery::any, query);
    EXPECT_EQ(any.hit(), want.hit());
    if (any.hit()) {
      EXPECT_TRUE(accepted[any.proxy]);
    }
    std::vector<RayHit> all;
    bp.castRayAll(input.origin, input.direction, input.maxT, all, query);
    EXPECT_EQ(all, brute::castRayAll(boxes, ray, accepted)) << label;
    const Vec3 half(0.3f, 0.6f, 0.1f);
    EXPECT_EQ(bp.castBox(half, input.origin, input.direction, input.maxT, query),
              brute::castBox(boxes, half, ray, accepted))
        << label << " box cast " << r;
    // The callback form clipping at each hit finds the closest too.
    RayHit viaCallback;
    bp.castRay(
        input.origin, input.direction, input.maxT,
        [&](uint32_t p, float t) {
          if (!viaCallback.hit() || hitBefore({p, t}, viaCallback)) viaCallback = {p, t};
          return viaCallback.t;
        },
        query);
    EXPECT_EQ(viaCallback, want) << label;
  }
  for (size_t q = 0; q < std::min<size_t>(100, rays.size()); ++q) {
    const Vec3 p = rays[q].origin;
    std::vector<uint32_t> got;
    bp.queryBox(
        Aabb::fromCenterExtent(p, Vec3(4, 2, 3)),
        [&](uint32_t i) {
          got.push_back(i);
          return true;
        },
        query);
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, brute::queryBox(boxes, Aabb::fromCenterExtent(p, Vec3(4, 2, 3)), accepted))
        << label;
    got.clear();
    bp.queryPoint(
        p,
        [&](uint32_t i) {
          got.push_back(i);
          return true;
        },
        query);
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, brute::queryPoint(boxes, p, accepted)) << label;
    std::vector<Neighbour> near;
    bp.nearest(p, 7, near, query);
    EXPECT_EQ(near, brute::nearest(boxes, p, 7, accepted)) << label;
  }
  // The batch form: each point's neighbours as the single query's, and as
  // brute force's for the first 300. Past 4096 points the batch is searched
  // in Morton order, each answer still in its point's place.
  std::vector<Vec3> points;
  for (size_t q = 0; !rays.empty() && q < 5000; ++q)
    points.push_back(rays[q % rays.size()].origin +
                     float(q / rays.size()) * Vec3(1.5f, -0.75f, 0.25f));
  std::vector<Neighbour> nearBatch, near;
  std::vector<size_t> offsets;
  bp.nearest(points, 5, nearBatch, offsets, query);
  ASSERT_EQ(offsets.size(), points.size() + 1) << label;
  for (size_t q = 0; q < points.size(); ++q) {
    const std::vector<Neighbour> got(nearBatch.begin() + ptrdiff_t(offsets[q]),
                                     nearBatch.begin() + ptrdiff_t(offsets[q + 1]));
    bp.nearest(points[q], 5, near, query);
    ASSERT_EQ(got, near) << label << " batch nearest " << q;
    if (q < 300) {
      EXPECT_EQ(got, brute::nearest(boxes, points[q], 5, accepted)) << label << q;
    }
  }
}

TEST(BroadPhase, QueriesMatchBruteForce) {
  const Scene scene = makeScene(SceneKind::sizes, 3000);
  std::vector<uint8_t> accepted(scene.n);
  for (Structure structure : kStructures) {
    BroadPhaseConfig config;
    config.structure = structure;
    config.threads = 2;
    BroadPhase bp(config);
    const Filter query{1, 0b01};  // accepts category 1 only
    for (uint32_t i = 0; i < scene.n; ++i) {
      ProxyDesc d{scene.boxes[i], i % 5 == 0 ? MotionType::staticBody : MotionType::dynamic, {}, i};
      d.filter.category = (i % 3 == 0) ? 2 : 1;
      accepted[i] = d.filter.accepts(query);
      bp.add(d);
    }
    bp.update();
    expectQueriesMatch(bp, scene.boxes, accepted, makeRays(scene.n, 300), query, name(structure));
  }
}

// castRaysAll: each ray's hits equal brute force's, sorted, through the
// rays' tree and through each structure, on one thread and two, with a
// filter and with proxies removed; 700 rays make three chunks of the batch.
TEST(BroadPhase, RayBatchesOfEveryHitMatchBruteForce) {
  const Scene scene = makeScene(SceneKind::sizes, 2000);
  const std::vector<Ray> rays = makeRays(scene.n, 700);
  const Filter query{1, 0b01};
  for (Structure structure : kStructures)
    for (RayTreeMode tree : {RayTreeMode::never, RayTreeMode::always})
      for (int threads : {1, 2}) {
        BroadPhaseConfig config;
        config.structure = structure;
        config.rayTree = tree;
        config.threads = threads;
        BroadPhase bp(config);
        std::vector<uint8_t> accepted(scene.n);
        std::vector<ProxyId> ids(scene.n);
        for (uint32_t i = 0; i < scene.n; ++i) {
          ProxyDesc d{scene.boxes[i], MotionType::dynamic, {}, i};
          d.filter.category = (i % 3 == 0) ? 2 : 1;
          accepted[i] = d.filter.accepts(query);
          ids[i] = bp.add(d);
        }
        bp.update();
        for (uint32_t i = 0; i < scene.n; i += 7) {
          bp.remove(ids[i]);
          accepted[i] = 0;
        }
        bp.update();
        std::vector<RayHit> hits(3, RayHit{5, 1.0f});
        std::vector<size_t> offsets(2, 9);
        bp.castRaysAll(rays, hits, offsets, query);
        ASSERT_EQ(offsets.size(), rays.size() + 1);
        ASSERT_EQ(offsets.front(), 0u);
        ASSERT_EQ(offsets.back(), hits.size());
        size_t several = 0;  // rays with more than one hit
        for (size_t r = 0; r < rays.size(); ++r) {
          const std::vector<RayHit> want = brute::castRayAll(scene.boxes, rays[r], accepted);
          several += want.size() > 1;
          ASSERT_LE(offsets[r], offsets[r + 1]);
          const std::vector<RayHit> got(hits.begin() + ptrdiff_t(offsets[r]),
                                        hits.begin() + ptrdiff_t(offsets[r + 1]));
          EXPECT_EQ(got, want) << name(structure) << " tree " << int(tree) << " threads " << threads
                               << " ray " << r;
        }
        EXPECT_GT(several, 50u) << "the rays must test the order within a ray's hits";
      }
}

// shiftOrigin() applies the pending changes and the shift at once: every
// query answers right away, before any update(), exactly as brute force on
// the shifted boxes, on every structure.
TEST(BroadPhase, QueriesAnswerRightAfterShiftOrigin) {
  const Scene scene = makeScene(SceneKind::sizes, 3000);
  const Vec3 offset(1000, -500, 250);
  const Filter query{1, 0b01};
  for (Structure structure : kStructures)
    for (int threads : {1, 2}) {
      BroadPhase bp({.structure = structure, .threads = threads});
      std::vector<Aabb> boxes = scene.boxes;
      std::vector<uint8_t> accepted(scene.n);
      std::vector<ProxyId> ids(scene.n);
      for (uint32_t i = 0; i < scene.n; ++i) {
        ProxyDesc d{boxes[i], i % 5 == 0 ? MotionType::staticBody : MotionType::dynamic, {}, i};
        d.filter.category = (i % 3 == 0) ? 2 : 1;
        accepted[i] = d.filter.accepts(query);
        ids[i] = bp.add(d);
      }
      bp.update();
      // Pending changes the shift must apply too: moves and removes.
      for (uint32_t i = 1; i < scene.n; i += 7) {
        boxes[i] = {boxes[i].min + Vec3(3, 0, -2), boxes[i].max + Vec3(3, 0, -2)};
        bp.move(ids[i], boxes[i]);
      }
      for (uint32_t i = 2; i < scene.n; i += 11) {
        bp.remove(ids[i]);
        accepted[i] = 0;
      }
      bp.shiftOrigin(offset);
      for (Aabb& b : boxes) b = {b.min - offset, b.max - offset};
      std::vector<Ray> rays = makeRays(scene.n, 200);
      for (Ray& r : rays) r = makeRay(r.origin - offset, r.direction, r.maxT);
      expectQueriesMatch(bp, boxes, accepted, rays, query, name(structure));
      EXPECT_EQ(bp.validate(), "") << name(structure);
    }
}

// BroadPhases of every structure at the given thread counts, fed the same
// operations, and the model they must all match, by proxy index (every run
// issues the same indices; `born` tells a reused slot's proxy apart).
struct Mirror {
  struct Run {
    std::unique_ptr<BroadPhase> bp;
    std::vector<ProxyId> handle;  // by proxy index (generations differ between runs)
    std::vector<ProxyPair> previousPairs;
  };
  std::vector<Run> runs;
  std::vector<Aabb> boxes;
  std::vector<uint8_t> isStatic, live;
  std::vector<uint64_t> userData;
  std::vector<uint32_t> born;
  uint32_t adds = 0;

  explicit Mirror(std::initializer_list<int> threadCounts) {
    for (Structure s : kStructures)
      for (int threads : threadCounts) {
        BroadPhaseConfig config;
        config.structure = s;
        config.threads = threads;
        runs.push_back({std::make_unique<BroadPhase>(config), {}, {}});
      }
  }
  // (ASSERT_* returns from here only: callers check HasFatalFailure().)
  void add(const Aabb& b, bool stat, uint64_t user) {
    uint32_t index = 0;
    for (Run& r : runs) {
      const ProxyId id =
          r.bp->add({b, stat ? MotionType::staticBody : MotionType::dynamic, {}, user});
      if (&r != &runs[0]) {
        ASSERT_EQ(id.index, index);
      }
      index = id.index;
      if (index >= r.handle.size()) r.handle.resize(index + 1);
      r.handle[index] = id;
    }
    if (index >= boxes.size()) {
      boxes.resize(index + 1);
      isStatic.resize(index + 1);
      live.resize(index + 1);
      userData.resize(index + 1);
      born.resize(index + 1);
    }
    boxes[index] = b;
    isStatic[index] = stat;
    live[index] = 1;
    userData[index] = user;
    born[index] = adds++;
  }
  // One batch, or one move() call an entry.
  void move(std::span<const uint32_t> ids, std::span<const Aabb> bs, bool batch = true) {
    std::vector<ProxyId> handles(ids.size());
    for (Run& r : runs) {
      for (size_t k = 0; k < ids.size(); ++k) handles[k] = r.handle[ids[k]];
      if (batch)
        r.bp->move(handles, bs);
      else
        for (size_t k = 0; k < ids.size(); ++k) r.bp->move(handles[k], bs[k]);
    }
    for (size_t k = 0; k < ids.size(); ++k) boxes[ids[k]] = bs[k];
  }
  void remove(uint32_t i) {
    for (Run& r : runs) r.bp->remove(r.handle[i]);
    live[i] = 0;
  }
  std::vector<uint32_t> liveIndices() const {
    std::vector<uint32_t> out;
    for (uint32_t i = 0; i < live.size(); ++i)
      if (live[i]) out.push_back(i);
    return out;
  }
};

// Batches large enough for the parallel record and gather (16384 entries
// and more), against brute force frame by frame, and
// the same pairs and events for 1, 2 and 8 threads. The frames mix what the
// batch paths must get right: batches in index order (recorded in parallel)
// and shuffled with repeats (recorded in order, the last box of a proxy
// wins); proxies removed after their move is recorded, slots reused by adds
// that a later batch moves again, single moves on top of a batch, and two
// batches in one frame.
TEST(BroadPhase, LargeBatchesMatchBruteForce) {
  constexpr uint32_t kStart = 20000;
  const float world = 180.0f;  // about 20 pairs a hundred boxes
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> pos(0.0f, world), size(0.2f, 2.0f), step(-0.6f, 0.6f);
  auto box = [&] {
    const Vec3 c(pos(rng), pos(rng), pos(rng));
    return Aabb::fromCenterExtent(c, Vec3(size(rng), size(rng), size(rng)));
  };

  Mirror m({1, 2, 8});
  std::vector<std::vector<Pair>> previous(m.runs.size());
  auto addOne = [&](bool stat) {
    const Aabb b = box();
    m.add(b, stat, rng());
  };
  for (uint32_t i = 0; i < kStart; ++i) addOne(i % 10 == 0);
  if (HasFatalFailure()) return;
  auto nudged = [&](uint32_t i) {
    const Vec3 d(step(rng), step(rng), step(rng));
    return Aabb{m.boxes[i].min + d, m.boxes[i].max + d};
  };

  for (int frame = 0; frame < 3; ++frame) {
    std::vector<uint32_t> ids;
    std::vector<Aabb> bs;
    const std::vector<uint32_t> alive = m.liveIndices();
    if (frame % 3 == 0) {
      // Every live proxy, in index order.
      for (uint32_t i : alive) ids.push_back(i), bs.push_back(nudged(i));
      m.move(ids, bs);
    } else if (frame % 3 == 1) {
      // Most, in index order; then removes of moved proxies, adds into
      // their slots, a second ordered batch naming the new proxies too,
      // and single moves.
      for (uint32_t i : alive)
        if (rng() % 10 < 9) ids.push_back(i), bs.push_back(nudged(i));
      m.move(ids, bs);
      for (int k = 0; k < 600; ++k) {
        const uint32_t i = ids[rng() % ids.size()];
        if (m.live[i]) m.remove(i);
      }
      for (int k = 0; k < 400; ++k) addOne(false);
      if (HasFatalFailure()) return;
      ids.clear();
      bs.clear();
      for (uint32_t i : m.liveIndices())
        if (rng() % 2 == 0) ids.push_back(i), bs.push_back(nudged(i));
      m.move(ids, bs);
      for (int k = 0; k < 300; ++k) {
        const uint32_t i = alive[rng() % alive.size()];
        if (!m.live[i]) continue;
        const Aabb b = nudged(i);
        m.move({&i, 1}, {&b, 1}, false);
      }
    } else {
      // Shuffled, with repeats: the last box given for a proxy stands.
      for (int k = 0; k < 25000; ++k) {
        const uint32_t i = alive[rng() % alive.size()];
        ids.push_back(i);
        bs.push_back(nudged(i));
      }
      m.move(ids, bs);
    }

    const std::vector<Pair> expected = brute::findPairs(m.boxes, m.isStatic, m.live);
    for (size_t run = 0; run < m.runs.size(); ++run) {
      Mirror::Run& r = m.runs[run];
      const FramePairs& f = r.bp->update();
      const char* which = name(r.bp->structure());
      ASSERT_EQ(r.bp->validate(), "") << which << " frame " << frame;
      const std::vector<Pair> now = indicesOf(f.pairs);
      ASSERT_TRUE(test::samePairs(expected, now)) << which << " frame " << frame;
      std::vector<Pair> begun, ended;
      std::set_difference(now.begin(), now.end(), previous[run].begin(), previous[run].end(),
                          std::back_inserter(begun));
      std::set_difference(previous[run].begin(), previous[run].end(), now.begin(), now.end(),
                          std::back_inserter(ended));
      if (frame % 3 != 1) {  // (a reused slot also ends and begins its pairs)
        ASSERT_EQ(indicesOf(f.begun), begun) << which << " frame " << frame;
        ASSERT_EQ(indicesOf(f.ended), ended) << which << " frame " << frame;
      }
      for (const ProxyPair& p : f.pairs) {
        ASSERT_EQ(p.userDataA, m.userData[p.a]);
        ASSERT_EQ(p.userDataB, m.userData[p.b]);
      }
      // Every run gives the same events, whatever its thread count.
      const FramePairs& first = m.runs[0].bp->lastPairs();
      ASSERT_EQ(indicesOf(f.begun), indicesOf(first.begun)) << which << " frame " << frame;
      ASSERT_EQ(indicesOf(f.ended), indicesOf(first.ended)) << which << " frame " << frame;
      ASSERT_TRUE(eventsCarryUserData(f, r.previousPairs)) << which << " frame " << frame;
      r.previousPairs.assign(f.pairs.begin(), f.pairs.end());
      previous[run] = now;
    }
  }
}

// A frame's moves go to the structure as the pending list and the boxes
// move() wrote, entries that no longer name a pending move dropped first.
// This mixes, frame by frame, what leaves such entries or repeats a proxy
// (a proxy moved twice, by a batch or singly; removed, its slot reused;
// moved between static and dynamic or to another layer after its move; a
// pending add in a batch) with frames that have none, and the user-data
// changes and special proxies
// that decide how update() builds the pairs and events. Every frame is
// checked against brute force (pairs, begun and ended by handle, user data),
// in 1 and 2 threads of each structure. 18000 proxies: a batch of them all
// takes the two-thread record in tasks.
// The first frames follow `schedule`: every proxy moved, then the
// interruptions its bits name (one at a time, so that none hides another);
// the rest draw both.
void runPendingMoves(uint32_t n, int frames, uint32_t seed, bool rehomes,
                     std::span<const uint32_t> schedule = {}) {
  std::mt19937 rng(seed);
  const float world = 4.0f * std::cbrt(float(n));  // as the standard scenes: about n / 2 pairs
  std::uniform_real_distribution<float> pos(0.0f, world), size(1.0f, 3.0f), step(-0.4f, 0.4f);
  auto box = [&] {
    const Vec3 c(pos(rng), pos(rng), pos(rng));
    return Aabb::fromCenterExtent(c, Vec3(size(rng), size(rng), size(rng)));
  };
  Mirror m({1, 2});
  auto addOne = [&](bool stat) {
    const Aabb b = box();
    m.add(b, stat, rng());
  };
  for (uint32_t i = 0; i < n; ++i) addOne(i % 8 == 0);
  if (::testing::Test::HasFatalFailure()) return;
  // Nudged boxes for `ids`, moved as a batch or one move() call an entry.
  auto moveAll = [&](const std::vector<uint32_t>& ids, bool batch) {
    std::vector<Aabb> bs;
    for (uint32_t i : ids) {
      const Vec3 d(step(rng), step(rng), step(rng));
      bs.push_back({m.boxes[i].min + d, m.boxes[i].max + d});
    }
    m.move(ids, bs, batch);
  };
  // Up to `count` of the live proxies of `from`, ascending.
  auto some = [&](const std::vector<uint32_t>& from, uint32_t count) {
    std::vector<uint32_t> out;
    for (uint32_t k = 0; k < count && !from.empty(); ++k) {
      const uint32_t i = from[rng() % from.size()];
      if (m.live[i]) out.push_back(i);
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  };
  using Key = std::pair<std::pair<uint32_t, uint32_t>, std::pair<uint32_t, uint32_t>>;
  std::set<Key> previous;
  bool special = false;  // one proxy holds a filter that accepts everything, but not the default
  for (int frame = 0; frame < frames; ++frame) {
    const std::vector<uint32_t> alive = m.liveIndices();
    std::vector<uint32_t> moved;
    bool batch = true;
    const bool scheduled = size_t(frame) < schedule.size();
    switch (scheduled ? 0 : rng() % 4) {
      case 0: moved = alive; break;               // every proxy, ascending
      case 1: moved = some(alive, n / 2); break;  // a subset, ascending
      case 2:                                     // a few, one by one
        moved = some(alive, 200);
        batch = false;
        break;
      default: break;  // none
    }
    moveAll(moved, batch);
    const uint32_t what = scheduled ? schedule[frame] : uint32_t(rng());
    if (what & 1) moveAll(some(moved, 300), true);  // moved twice: in a second batch
    if (what & 512) moveAll(alive, true);           // all again (n = 18000: in tasks)
    if (what & 2) moveAll(some(moved, 5), false);   // moved twice: singly
    if (what & 4) {                                 // removed after the move; slots reused
      for (uint32_t i : some(moved, 20)) m.remove(i);
      for (int k = 0; k < 15; ++k) addOne(rng() % 4 == 0);
      if (::testing::Test::HasFatalFailure()) return;
      // A batch naming pending adds among moved proxies.
      moveAll(some(m.liveIndices(), 400), true);
    }
    if (rehomes && (what & 8)) {  // between static and dynamic after the move
      for (uint32_t i : some(moved, 10)) {
        m.isStatic[i] = !m.isStatic[i];
        for (Mirror::Run& r : m.runs)
          r.bp->setMotionType(r.handle[i],
                              m.isStatic[i] ? MotionType::staticBody : MotionType::dynamic);
      }
    }
    if (rehomes && (what & 256)) {  // to another layer after the move
      for (uint32_t i : some(moved, 10)) {
        const uint32_t layer = 1 + rng() % 3;  // (the default table: every layer collides)
        for (Mirror::Run& r : m.runs) r.bp->setLayer(r.handle[i], layer);
      }
    }
    if (what & 16) {  // user data of standing pairs change
      for (uint32_t i : some(alive, 50)) {
        m.userData[i] = rng();
        for (Mirror::Run& r : m.runs) r.bp->setUserData(r.handle[i], m.userData[i]);
      }
    }
    if ((what & 32) && (what & 64)) {  // a special proxy appears or goes
      special = !special;
      const uint32_t i = m.liveIndices()[0];
      for (Mirror::Run& r : m.runs)
        r.bp->setFilter(r.handle[i], special ? Filter{3, ~uint64_t(0)} : Filter{});
    }
    if (what & 128) moveAll(some(moved, 100), true);  // and once more, after all that

    const std::vector<Pair> expected = brute::findPairs(m.boxes, m.isStatic, m.live);
    std::set<Key> now;
    for (const Pair& p : expected) now.insert({{p.a, m.born[p.a]}, {p.b, m.born[p.b]}});
    std::vector<Key> begun, ended;
    std::set_difference(now.begin(), now.end(), previous.begin(), previous.end(),
                        std::back_inserter(begun));
    std::set_difference(previous.begin(), previous.end(), now.begin(), now.end(),
                        std::back_inserter(ended));
    for (Mirror::Run& r : m.runs) {
      const char* which = name(r.bp->structure());
      const int threads = r.bp->threadCount();
      // (Before the update too: validate() checks the pending list.)
      ASSERT_EQ(r.bp->validate(), "") << which << " " << threads << " frame " << frame;
      const FramePairs& f = r.bp->update();
      ASSERT_EQ(r.bp->validate(), "") << which << " " << threads << " frame " << frame;
      ASSERT_TRUE(test::samePairs(expected, indicesOf(f.pairs)))
          << which << " " << threads << " seed " << seed << " frame " << frame;
      ASSERT_TRUE(test::samePairs(indicesOf(begun), indicesOf(f.begun)))
          << "begun: " << which << " " << threads << " frame " << frame;
      ASSERT_TRUE(test::samePairs(indicesOf(ended), indicesOf(f.ended)))
          << "ended: " << which << " " << threads << " frame " << frame;
      for (const ProxyPair& p : f.pairs) {
        ASSERT_EQ(p.userDataA, m.userData[p.a]) << which << " frame " << frame;
        ASSERT_EQ(p.userDataB, m.userData[p.b]) << which << " frame " << frame;
      }
      ASSERT_TRUE(eventsCarryUserData(f, r.previousPairs)) << which << " frame " << frame;
      r.previousPairs.assign(f.pairs.begin(), f.pairs.end());
    }
    previous = now;
  }
}

// A frame with no pair after one with more than the parallel merge's
// threshold (64 K pairs in the two lists): the merge's ranges are cut at
// this frame's pairs, of which there are none. Every pair ends, with its
// user data.
TEST(BroadPhase, AFrameWithoutPairsAfterOneWithMany) {
  for (const Structure s : kStructures) {
    BroadPhase bp({.structure = s, .threads = 2});
    constexpr uint32_t kBoxes = 400;  // all overlapping: 79 800 pairs
    std::vector<ProxyId> ids;
    for (uint32_t i = 0; i < kBoxes; ++i)
      ids.push_back(bp.add({.box = {Vec3(0, 0, 0), Vec3(1, 1, 1)}, .userData = 100 + i}));
    ASSERT_EQ(bp.update().pairs.size(), kBoxes * (kBoxes - 1) / 2);
    std::vector<Aabb> apart;
    for (uint32_t i = 0; i < kBoxes; ++i)
      apart.push_back({Vec3(3.0f * float(i), 0, 0), Vec3(3.0f * float(i) + 1, 1, 1)});
    bp.move(ids, apart);
    const FramePairs& f = bp.update();
    ASSERT_EQ(bp.validate(), "") << name(s);
    EXPECT_TRUE(f.pairs.empty() && f.begun.empty());
    ASSERT_EQ(f.ended.size(), kBoxes * (kBoxes - 1) / 2) << name(s);
    for (const ProxyPair& p : f.ended) {
      ASSERT_EQ(p.userDataA, 100 + p.a);
      ASSERT_EQ(p.userDataB, 100 + p.b);
    }
  }
}

TEST(BroadPhase, PendingMovesMatchBruteForce) {
  const uint32_t oneByOne[] = {0, 1, 2, 4, 8, 16, 32 | 64, 128, 256, 512};
  runPendingMoves(18000, 12, 11, true, oneByOne);
  if (HasFatalFailure()) return;
  // Without rehomes, slot == proxy index stays (a proxy removed and one
  // added take the same slot in both), so update() keeps its merged path
  // while no special proxy is live.
  for (const bool rehomes : {true, false})
    for (uint32_t seed : {12u, 13u, 14u}) {
      runPendingMoves(600, 30, seed, rehomes);
      if (HasFatalFailure()) return;
    }
}

TEST(BroadPhase, RemovedProxyEndsItsPairsAndReusedSlotBeginsNew) {
  for (Structure structure : kStructures) {
    BroadPhase bp({.structure = structure, .threads = 1});
    const Aabb unit{Vec3(0, 0, 0), Vec3(1, 1, 1)};
    const ProxyId a = bp.add({unit, MotionType::dynamic, {}, 100});
    const ProxyId b = bp.add({unit, MotionType::dynamic, {}, 200});
    EXPECT_EQ(bp.update().begun.size(), 1u);
    bp.remove(b);
    const ProxyId c = bp.add({unit, MotionType::dynamic, {}, 300});
    EXPECT_EQ(c.index, b.index);  // the slot is reused...
    const FramePairs& f = bp.update();
    ASSERT_EQ(f.ended.size(), 1u);  // ...yet a-b ended and a-c began
    ASSERT_EQ(f.begun.size(), 1u);
    EXPECT_EQ(f.ended[0].userDataB, 200u);
    EXPECT_EQ(f.begun[0].userDataB, 300u);
    test::expectError(ErrorCode::staleHandle, [&] { bp.move(b, unit); });
    (void)a;
  }
}

TEST(BroadPhase, BadInputIsRejectedAndChangesNothing) {
  for (Structure structure : kStructures) {
    BroadPhase bp({.structure = structure, .threads = 2});
    const Aabb unit{Vec3(0, 0, 0), Vec3(1, 1, 1)};
    const ProxyId a = bp.add({.box = unit});
    const ProxyId b = bp.add({.box = unit});
    bp.update();
    const float nan = std::numeric_limits<float>::quiet_NaN();
    uint32_t expectedCount = 2;
    auto expectCode = [&](ErrorCode code, auto&& call) {
      test::expectError(code, call);
      EXPECT_EQ(bp.validate(), "");
      EXPECT_EQ(bp.proxyCount(), expectedCount);
    };
    expectCode(ErrorCode::invalidBox, [&] { bp.add({Aabb{Vec3(nan, 0, 0), Vec3(1, 1, 1)}}); });
    expectCode(ErrorCode::invalidBox, [&] { bp.add({Aabb{Vec3(2, 0, 0), Vec3(1, 1, 1)}}); });
    expectCode(ErrorCode::invalidBox, [&] { bp.add({Aabb{Vec3(0, 0, 0), Vec3(1, 1, 1e9f)}}); });
    expectCode(ErrorCode::invalidBox, [&] { bp.move(a, Aabb{Vec3(0, 0, 0), Vec3(-1, 1, 1)}); });
    expectCode(ErrorCode::staleHandle, [&] { bp.move(ProxyId{77, 0}, unit); });
    expectCode(ErrorCode::staleHandle, [&] { bp.remove(ProxyId{a.index, a.generation + 1}); });
    const ProxyId ids[] = {a, b};
    const Aabb mixed[] = {Aabb{Vec3(5, 5, 5), Vec3(6, 6, 6)}, Aabb{Vec3(0, 0, 0), Vec3(nan, 1, 1)}};
    expectCode(ErrorCode::invalidBox, [&] { bp.move(ids, mixed); });
    EXPECT_EQ(bp.desc(a).box.min, unit.min);  // the valid first entry was not applied
    const ProxyId twice[] = {a, a};
    expectCode(ErrorCode::staleHandle, [&] { bp.remove(twice); });
    expectCode(ErrorCode::invalidRay, [&] { bp.castRay(Vec3(0, 0, 0), Vec3(0, 0, 0), 1); });
    expectCode(ErrorCode::invalidRay, [&] { bp.castRay(Vec3(0, 0, 0), Vec3(1, 0, 0), -1); });
    expectCode(ErrorCode::invalidRay, [&] { bp.castRay(Vec3(0, 0, 0), Vec3(nan, 0, 0), 1); });
    EXPECT_EQ(bp.update().pairs.size(), 1u);
    bp.remove(b);
    expectedCount = 1;
    expectCode(ErrorCode::staleHandle, [&] { bp.remove(b); });  // double remove
    bp.add({.box = unit});
  }
  test::expectError(ErrorCode::invalidArgument, [] { BroadPhase bp({.threads = -1}); });
  test::expectError(ErrorCode::invalidArgument, [] { BroadPhase bp({.margin = -1.0f}); });
}

// memoryUse() splits memoryBytes() by part: the parts sum to it, and each
// optional part holds bytes exactly while what it counts exists.
TEST(BroadPhase, MemoryUseSplitsMemoryBytesByPart) {
  const Scene scene = makeScene(SceneKind::uniform, 2000, 3);
  const auto addScene = [&](BroadPhase& bp) {
    for (size_t i = 0; i < scene.boxes.size(); ++i) bp.add({.box = scene.boxes[i]});
  };
  for (const Structure structure : {Structure::bvh, Structure::sweep}) {
    BroadPhase bp({.structure = structure, .threads = 1, .rayTree = RayTreeMode::never});
    addScene(bp);
    bp.update();
    const size_t pairs = bp.update().pairs.size();
    ASSERT_GT(pairs, 100u);
    const MemoryUse m = bp.memoryUse();
    EXPECT_EQ(m.total(), bp.memoryBytes());
    EXPECT_GT(m.structure, scene.boxes.size() * sizeof(Aabb));
    EXPECT_GT(m.proxies, scene.boxes.size() * (sizeof(Aabb) + sizeof(uint64_t)));
    EXPECT_GE(m.pairs, 2 * pairs * sizeof(ProxyPair));  // this frame's list and the spare
    EXPECT_EQ(m.rayTree, 0u);
    EXPECT_EQ(m.doubles, 0u);
    EXPECT_EQ(m.queryView, 0u);
  }
  for (const bool concurrentQueries : {false, true}) {
    BroadPhase bp({.concurrentQueries = concurrentQueries, .rayTree = RayTreeMode::always});
    addScene(bp);
    bp.add(DProxyDesc{.box = toDouble(scene.boxes[0])});
    bp.update();
    bp.prepareRays();
    const MemoryUse m = bp.memoryUse();
    EXPECT_EQ(m.total(), bp.memoryBytes());
    EXPECT_GT(m.doubles, 0u);
    if (concurrentQueries) {
      EXPECT_EQ(m.rayTree, 0u);                 // queries walk the query structure's tree,
      EXPECT_GT(m.queryView, m.structure / 2);  // which counts with that structure
    } else {
      EXPECT_GT(m.rayTree, 0u);
      EXPECT_EQ(m.queryView, 0u);
    }
  }
}

// After a world is loaded (every proxy a pending add) and while every proxy
// moves each frame, the change lists hold the frame's moves and no more:
// the load's add list is released once adds are few, and the moves applied
// are kept only for a query view. Loading would otherwise leave about 8
// bytes a proxy behind for good.
TEST(BroadPhase, ChangeListsHoldOnlyTheFramesMoves) {
  constexpr uint32_t n = 200000;
  Scene scene = makeScene(SceneKind::uniform, n, 3);
  for (const int threads : {1, 2}) {
    BroadPhase bp({.threads = threads});
    std::vector<ProxyId> ids;
    for (uint32_t i = 0; i < n; ++i) ids.push_back(bp.add({.box = scene.boxes[i]}));
    bp.update();
    for (int frame = 0; frame < 2; ++frame) {
      scene.step();
      for (uint32_t i = 0; i < n; ++i) bp.move(ids[i], scene.boxes[i]);
      bp.update();
    }
    // pendingMoves_ (4 bytes a proxy, its capacity a power of two) alone.
    EXPECT_LT(bp.memoryUse().changes, 6 * size_t(n)) << threads << " threads";
  }
}

// A frame of many events (a pile forming, where every pair begins; the frame
// where it scatters, where every pair ends) grows the event lists; two frames
// of few events later that memory is released (memoryBytes() counts it), and
// every frame's events stay exact. A frame after one without pairs (the
// first update) hands out the pair list itself as its begun list.
TEST(BroadPhase, EventListsOfAManyEventFrameAreReleased) {
  constexpr uint32_t kCount = 800;
  constexpr size_t kPairs = size_t(kCount) * (kCount - 1) / 2;  // 319 600
  constexpr size_t kListBytes = kPairs * sizeof(ProxyPair);
  auto apart = [](uint32_t i) {
    return Aabb{Vec3(2.0f * float(i), 0, 0), Vec3(2.0f * float(i) + 1, 1, 1)};
  };
  const Aabb unit{Vec3(0, 0, 0), Vec3(1, 1, 1)};
  for (int threads : {1, 2}) {
    BroadPhase bp({.threads = threads});
    std::vector<ProxyId> ids;
    for (uint32_t i = 0; i < kCount; ++i) ids.push_back(bp.add({.box = apart(i)}));
    const Aabb far{Vec3(0, 100, 0), Vec3(1, 101, 1)};  // a pair that stands throughout
    bp.add({.box = far});
    bp.add({.box = far});
    const FramePairs& first = bp.update();
    EXPECT_EQ(first.begun.size(), 1u);
    EXPECT_EQ(first.begun.data(), first.pairs.data());  // no copy
    const size_t withoutEvents = bp.memoryBytes();

    for (uint32_t i = 0; i < kCount; ++i) bp.move(ids[i], unit);
    const FramePairs& piled = bp.update();
    EXPECT_EQ(piled.begun.size(), kPairs);
    EXPECT_NE(piled.begun.data(), piled.pairs.data());
    EXPECT_GT(bp.memoryBytes(), withoutEvents + kListBytes);
    EXPECT_TRUE(bp.update().begun.empty());
    const size_t begunGrown = bp.memoryBytes();  // both pair lists full size by now
    const FramePairs& still = bp.update();
    EXPECT_TRUE(still.begun.empty() && still.ended.empty());
    EXPECT_EQ(still.pairs.size(), kPairs + 1);
    EXPECT_GT(begunGrown, bp.memoryBytes() + kListBytes * 9 / 10) << threads << " threads";

    for (uint32_t i = 0; i < kCount; ++i) bp.move(ids[i], apart(i));
    const FramePairs& scattered = bp.update();
    EXPECT_TRUE(scattered.pairs.size() == 1 && scattered.begun.empty());
    EXPECT_EQ(scattered.ended.size(), kPairs);
    const size_t endedGrown = bp.memoryBytes();
    bp.update();
    EXPECT_TRUE(bp.update().ended.empty());
    EXPECT_GT(endedGrown, bp.memoryBytes() + kListBytes * 9 / 10) << threads << " threads";
    EXPECT_EQ(bp.validate(), "");
  }
}

// A frame's first batch is checked and recorded a block at a time: a bad
// entry far into it (after many blocks were recorded, on one thread and in
// chunks on workers, in index order and shuffled) must still leave every box
// as it was, and the next update must find the same pairs with no events.
TEST(BroadPhase, BadEntryLateInAFirstBatchChangesNothing) {
  const Scene scene = makeScene(SceneKind::uniform, 20000);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (Structure structure : kStructures)
    for (int threads : {1, 2})
      for (bool shuffled : {false, true}) {
        SCOPED_TRACE(std::string(name(structure)) + " threads " + std::to_string(threads) +
                     (shuffled ? " shuffled" : " in index order"));
        BroadPhase bp({.structure = structure, .threads = threads});
        std::vector<ProxyId> ids;
        for (uint32_t i = 0; i < scene.n; ++i)
          ids.push_back(bp.add({scene.boxes[i], MotionType::dynamic, {}, i}));
        const std::vector<Pair> before = indicesOf(bp.update().pairs);
        std::vector<Aabb> moved;
        for (uint32_t i = 0; i < scene.n; ++i)
          moved.push_back({scene.boxes[i].min + Vec3(0.3f, 0, 0), scene.boxes[i].max});
        if (shuffled) {
          std::mt19937 rng(5);
          for (uint32_t k = scene.n; k-- > 1;) {
            const uint32_t j = rng() % (k + 1);
            std::swap(ids[k], ids[j]);
            std::swap(moved[k], moved[j]);
          }
        }
        for (const uint32_t bad : {19000u, 12345u, 256u}) {
          std::vector<ProxyId> badIds = ids;
          std::vector<Aabb> badBoxes = moved;
          if (bad == 12345u)
            badIds[bad].generation += 1;  // a stale handle
          else
            badBoxes[bad].max = Vec3(nan, 0, 0);
          test::expectError(bad == 12345u ? ErrorCode::staleHandle : ErrorCode::invalidBox,
                            [&] { bp.move(badIds, badBoxes); });
          ASSERT_EQ(bp.validate(), "");
          for (uint32_t i = 0; i < scene.n; ++i) {
            const Aabb b = bp.desc(bp.handleOf(i)).box;
            ASSERT_EQ(std::memcmp(&b, &scene.boxes[i], sizeof b), 0) << "proxy " << i;
          }
        }
        const FramePairs& f = bp.update();
        EXPECT_EQ(indicesOf(f.pairs), before);
        EXPECT_TRUE(f.begun.empty());
        EXPECT_TRUE(f.ended.empty());
        bp.move(ids, moved);  // the good batch then applies
        for (uint32_t k = 0; k < scene.n; k += 997)
          ASSERT_EQ(bp.desc(ids[k]).box.min, moved[k].min);
      }
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr uint32_t kLargeWorld = 100000;  // the sanitizers' builds: the same checks, smaller
#else
constexpr uint32_t kLargeWorld = 1000000;
#endif

// A batch remove of (almost) the whole world: a repeated handle anywhere in
// it is found and named and nothing is removed; a good batch then removes
// every proxy but three, and the next frame holds exactly their pairs. The
// batch is checked in O(k log k): a check that compared each handle with
// every earlier one took minutes at 10^6.
TEST(BroadPhase, BatchRemoveOfAlmostEveryProxy) {
  for (Structure structure : kStructures) {
    SCOPED_TRACE(name(structure));
    BroadPhase bp({.structure = structure, .threads = 2});
    std::vector<ProxyId> ids;
    const uint32_t side = 1000;  // unit boxes 2 apart on a 1000 x n/1000 grid: no pairs
    for (uint32_t i = 0; i < kLargeWorld; ++i) {
      const Vec3 at(2.0f * float(i % side), 2.0f * float(i / side), 0);
      ids.push_back(bp.add({.box = {at, at + Vec3(1, 1, 1)}, .userData = i}));
    }
    const Aabb shared{Vec3(-5, -5, -5), Vec3(-4, -4, -4)};
    std::vector<ProxyId> kept;
    for (uint64_t k = 0; k < 3; ++k) kept.push_back(bp.add({.box = shared, .userData = 100 + k}));
    EXPECT_EQ(bp.update().pairs.size(), 3u);

    for (const size_t repeat : {size_t(1), ids.size() / 2, ids.size() - 1}) {
      std::vector<ProxyId> bad = ids;
      bad[repeat] = bad[repeat - 1];  // the same handle twice, one entry apart
      test::expectError(ErrorCode::staleHandle, [&] { bp.remove(bad); });
      ASSERT_EQ(bp.proxyCount(), kLargeWorld + 3) << "entry " << repeat;
    }
    std::vector<ProxyId> far = ids;
    far.push_back(ids.front());  // the repeat is the batch's last entry
    test::expectError(ErrorCode::staleHandle, [&] { bp.remove(far); });
    ASSERT_EQ(bp.proxyCount(), kLargeWorld + 3);
    ASSERT_EQ(bp.validate(), "");

    bp.remove(ids);
    EXPECT_EQ(bp.proxyCount(), 3u);
    EXPECT_EQ(bp.validate(), "");
    const FramePairs& f = bp.update();
    ASSERT_EQ(f.pairs.size(), 3u);
    for (const ProxyPair& p : f.pairs) EXPECT_TRUE(p.userDataA >= 100 && p.userDataB >= 100);
    EXPECT_TRUE(f.begun.empty());
    EXPECT_TRUE(f.ended.empty());
    for (ProxyId id : kept) EXPECT_EQ(bp.desc(id).box.min, shared.min);
  }
}

TEST(BroadPhase, MaxPairsIsEnforcedWithoutLosingTheLastFrame) {
  BroadPhase bp({.structure = Structure::automatic, .threads = 2, .maxPairs = 10});
  const Aabb unit{Vec3(0, 0, 0), Vec3(1, 1, 1)};
  for (int i = 0; i < 4; ++i) bp.add({.box = unit});  // 6 pairs
  EXPECT_EQ(bp.update().pairs.size(), 6u);
  for (int i = 0; i < 2; ++i) bp.add({.box = unit});  // 15 pairs > 10
  const FramePairs* f =
      test::expectError(ErrorCode::capacityExceeded, [&] { return &bp.update(); });
  EXPECT_EQ(f, &bp.lastPairs());
  EXPECT_EQ(bp.lastPairs().pairs.size(), 6u);
  EXPECT_EQ(bp.validate(), "");
}

// lastStructurePairs() counts what the structure handed the filters, in
// either update() form. Under maxPairs the structure applies the filters as
// it counts, and a frame over maxPairs hands nothing on.
TEST(BroadPhase, LastStructurePairsCountsTheCandidatesBeforeTheFilters) {
  const Aabb unit{Vec3(0, 0, 0), Vec3(1, 1, 1)};
  const Filter alone{.category = 1, .mask = 0};
  for (Structure structure : kStructures) {
    BroadPhase bp({.structure = structure, .threads = 2});
    bp.add({.box = unit, .filter = alone});
    for (int i = 0; i < 3; ++i) bp.add({.box = unit});
    EXPECT_EQ(bp.lastStructurePairs(), 0u) << name(structure);
    EXPECT_EQ(bp.update().pairs.size(), 3u) << name(structure);  // none with the loner
    EXPECT_EQ(bp.lastStructurePairs(), 6u) << name(structure);
    size_t streamed = 0;
    bp.update([&](std::span<const ProxyPair> chunk) { streamed += chunk.size(); });
    EXPECT_EQ(streamed, 3u) << name(structure);
    EXPECT_EQ(bp.lastStructurePairs(), 6u) << name(structure);

    BroadPhase bounded({.structure = structure, .threads = 2, .maxPairs = 10});
    bounded.add({.box = unit, .filter = alone});
    for (int i = 0; i < 3; ++i) bounded.add({.box = unit});
    EXPECT_EQ(bounded.update().pairs.size(), 3u) << name(structure);
    EXPECT_EQ(bounded.lastStructurePairs(), 3u) << name(structure);
    for (int i = 0; i < 3; ++i) bounded.add({.box = unit});  // 15 pairs > 10
    test::expectError(ErrorCode::capacityExceeded, [&] { bounded.update(); });
    EXPECT_EQ(bounded.lastStructurePairs(), 0u) << name(structure);
  }
}

TEST(BroadPhase, ShiftOriginKeepsPairsAndMovesBoxes) {
  for (Structure structure : kStructures) {
    BroadPhase bp({.structure = structure, .threads = 2});
    Scene scene = makeScene(SceneKind::uniform, 2000);
    for (uint32_t i = 0; i < scene.n; ++i) bp.add({scene.boxes[i], MotionType::dynamic, {}, i});
    const size_t before = bp.update().pairs.size();
    bp.shiftOrigin(Vec3(1000, -500, 250));  // exact in float for these magnitudes? not always
    const FramePairs& f = bp.update();
    EXPECT_NEAR(double(f.pairs.size()), double(before), 3.0);
    EXPECT_EQ(f.begun.size() + before, f.pairs.size() + f.ended.size());
    EXPECT_FLOAT_EQ(bp.desc(bp.handleOf(0)).box.min.x(), scene.boxes[0].min.x() - 1000);
    EXPECT_EQ(bp.validate(), "");
    // Queries see the shifted world.
    const Vec3 c = bp.desc(bp.handleOf(5)).box.center();
    bool found = false;
    bp.queryPoint(c, [&](uint32_t i) { return !(found = (i == 5)); });
    EXPECT_TRUE(found);
  }
}

TEST(BroadPhase, StreamingUpdateDeliversEveryPairOnce) {
  for (Structure structure : kStructures) {
    BroadPhase bp({.structure = structure, .threads = 2});
    const Scene scene = makeScene(SceneKind::staticScene, 5000);
    for (uint32_t i = 0; i < scene.n; ++i)
      bp.add({scene.boxes[i],
              scene.isStatic[i] ? MotionType::staticBody : MotionType::dynamic,
              {},
              i});
    std::mutex m;
    std::vector<Pair> got;
    bp.update([&](std::span<const ProxyPair> chunk) {
      std::lock_guard<std::mutex> lock(m);
      for (const ProxyPair& p : chunk) got.push_back({p.a, p.b});
    });
    std::sort(got.begin(), got.end());
    EXPECT_TRUE(test::samePairs(brute::findPairs(scene.boxes, scene.isStatic), got))
        << name(structure);
  }
}

TEST(BroadPhase, SharedArena) {
  tbb::task_arena arena(2);
  BroadPhase bp({.structure = Structure::automatic, .arena = &arena});
  EXPECT_EQ(bp.threadCount(), 2);
  bp.add({Aabb{Vec3(0, 0, 0), Vec3(1, 1, 1)}});
  bp.add({Aabb{Vec3(0, 0, 0), Vec3(1, 1, 1)}});
  EXPECT_EQ(bp.update().pairs.size(), 1u);
}

}  // namespace
}  // namespace bp

namespace bp {
namespace {

// Found by the fuzzer: a static side emptied by a remove must still be
// updated, or every later query sees pending changes.
TEST(BroadPhase, QueriesAfterTheLastStaticIsRemoved) {
  for (Structure structure : kStructures) {
    BroadPhase bp({.structure = structure, .threads = 2});
    const ProxyId ground =
        bp.add({.box = Aabb{Vec3(-5, -1, -5), Vec3(5, 0, 5)}, .motion = MotionType::staticBody});
    const ProxyId body = bp.add({.box = Aabb{Vec3(0, 0, 0), Vec3(1, 1, 1)}});
    EXPECT_EQ(bp.update().pairs.size(), 1u);
    bp.remove(ground);
    EXPECT_EQ(bp.update().ended.size(), 1u);
    EXPECT_EQ(bp.castRay(Vec3(0.5f, 5, 0.5f), Vec3(0, -1, 0), 10).proxy, body.index);
    std::vector<Neighbour> n;
    bp.nearest(Vec3(0, -3, 0), 1, n);
    ASSERT_EQ(n.size(), 1u);
    EXPECT_EQ(n[0].proxy, body.index);
    test::expectError(ErrorCode::invalidArgument, [&] { bp.nearest(Vec3(0, 0, 0), 0, n); });
    EXPECT_TRUE(n.empty());
    // The batch: one bad point (or k = 0) rejects all of it.
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const std::vector<Vec3> points = {Vec3(0, -3, 0), Vec3(nan, 0, 0)};
    std::vector<size_t> offsets;
    n.assign(3, Neighbour{});
    test::expectError(ErrorCode::invalidArgument, [&] { bp.nearest(points, 1, n, offsets); });
    EXPECT_TRUE(n.empty());
    EXPECT_EQ(offsets, std::vector<size_t>(3, 0));
    test::expectError(ErrorCode::invalidArgument,
                      [&] { bp.nearest(std::span(points).first(1), 0, n, offsets); });
    EXPECT_EQ(offsets, std::vector<size_t>(2, 0));
  }
}

}  // namespace
}  // namespace bp

namespace bp {
namespace {

// `automatic` as the share of moving proxies swings (statics and movers in
// their own cell layers): pairs stay exact and events report only real
// changes.
TEST(BroadPhase, AutomaticKeepsPairsAndEventsAsTheMixChanges) {
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(0.0f, 40.0f);
  auto box = [&] { return Aabb::fromCenterExtent(Vec3(u(rng), u(rng), u(rng)), Vec3(2, 2, 2)); };
  BroadPhase bp({.structure = Structure::automatic, .threads = 2});
  std::vector<Aabb> boxes;
  std::vector<uint8_t> isStatic, live;
  std::vector<ProxyId> ids;
  auto addProxy = [&](bool st) {
    const Aabb b = box();
    ids.push_back(bp.add({.box = b,
                          .motion = st ? MotionType::staticBody : MotionType::dynamic,
                          .userData = boxes.size()}));
    boxes.push_back(b);
    isStatic.push_back(st);
    live.push_back(1);
  };
  auto check = [&](const char* stage) {
    const size_t before = bp.lastPairs().pairs.size();
    const FramePairs& f = bp.update();
    EXPECT_TRUE(test::samePairs(brute::findPairs(boxes, isStatic, live), indicesOf(f.pairs)))
        << stage;
    EXPECT_EQ(before + f.begun.size() - f.ended.size(), f.pairs.size()) << stage;
    EXPECT_EQ(bp.validate(), "") << stage;
    return f.begun.size() + f.ended.size();
  };
  for (int i = 0; i < 1500; ++i) addProxy(i % 20 != 0);  // 5 % moving
  check("mostly static");
  EXPECT_EQ(check("again, nothing changed"), 0u);
  for (int i = 0; i < 3000; ++i) addProxy(false);  // 68 % moving
  check("mostly moving");
  EXPECT_EQ(check("after the change, nothing changed"), 0u);
  for (size_t i = 1500; i < ids.size(); ++i) {  // remove the movers again
    bp.remove(ids[i]);
    live[i] = 0;
  }
  check("mostly static again");
  EXPECT_EQ(check("after the change back, nothing changed"), 0u);
  // Rays see statics and movers alike.
  for (int r = 0; r < 50; ++r) {
    const Ray ray = makeRay(Vec3(u(rng), u(rng), u(rng)), Vec3(u(rng) - 20, u(rng) - 20, 1), 30);
    EXPECT_EQ(bp.castRay(ray), brute::castRayClosest(boxes, ray, live));
  }
}

}  // namespace
}  // namespace bp

namespace bp {
namespace {

// Found by the fuzzer: a removed proxy whose index is reused by a pending add
// must not be reported by queries (under either identity) before the update.
TEST(BroadPhase, RemovedProxyIsNeverReportedByQueries) {
  for (Structure structure : kStructures) {
    BroadPhase bp({.structure = structure, .threads = 1});
    const Aabb unit{Vec3(0, 0, 0), Vec3(1, 1, 1)};
    const ProxyId a = bp.add({.box = unit, .userData = 1});
    bp.update();
    bp.remove(a);
    const ProxyId b = bp.add({.box = Aabb{Vec3(50, 50, 50), Vec3(51, 51, 51)}, .userData = 2});
    EXPECT_EQ(b.index, a.index);  // the slot is reused before the update
    EXPECT_FALSE(bp.castRay(Vec3(0.5f, 0.5f, -5), Vec3(0, 0, 1), 10).hit());
    int found = 0;
    bp.queryPoint(Vec3(0.5f, 0.5f, 0.5f), [&](uint32_t) { return ++found, true; });
    EXPECT_EQ(found, 0);
    std::vector<Neighbour> n;
    bp.nearest(Vec3(0, 0, 0), 1, n);
    EXPECT_TRUE(n.empty());  // b is not in the structure until the update
    bp.update();
    bp.nearest(Vec3(0, 0, 0), 1, n);
    ASSERT_EQ(n.size(), 1u);
    EXPECT_EQ(n[0].proxy, b.index);
    EXPECT_EQ(bp.validate(), "");
  }
}

}  // namespace
}  // namespace bp

namespace bp {
namespace {

// A filter changed after add() applies from the next update(), for every
// structure, and changing it back restores the pair (ended, then begun).
TEST(BroadPhase, SetFilterTakesEffectAtTheNextUpdate) {
  for (Structure structure : kStructures) {
    BroadPhase bp({.structure = structure, .threads = 1});
    const Aabb box{Vec3(0, 0, 0), Vec3(2, 2, 2)};
    const ProxyId a = bp.add({.box = box, .userData = 10});
    const ProxyId b = bp.add({.box = box, .userData = 11});
    const ProxyId c = bp.add({.box = Aabb{Vec3(50, 0, 0), Vec3(51, 1, 1)}});
    EXPECT_EQ(bp.update().pairs.size(), 1u) << name(structure);
    bp.setFilter(a, Filter{2, ~uint64_t(2)});  // rejects its own category only
    bp.setFilter(b, Filter{2, ~uint64_t(0)});
    const FramePairs& f = bp.update();
    EXPECT_EQ(f.pairs.size(), 0u) << name(structure);
    EXPECT_EQ(f.ended.size(), 1u) << name(structure);
    bp.setFilter(a, Filter{});
    EXPECT_EQ(bp.update().begun.size(), 1u) << name(structure);
    // The last custom filter leaves with its proxy: the pair of the two
    // defaults that remain is reported again.
    bp.setFilter(a, Filter{4, 4});
    EXPECT_EQ(bp.update().pairs.size(), 0u) << name(structure);
    bp.remove(b);
    const ProxyId d = bp.add({.box = box});
    bp.setFilter(a, Filter{});
    EXPECT_EQ(bp.update().pairs.size(), 1u) << name(structure);
    EXPECT_EQ(bp.validate(), "");
    (void)c, (void)d;
  }
}

}  // namespace
}  // namespace bp
