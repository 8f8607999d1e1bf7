// BroadPhaseConfig::concurrentQueries: queries from other threads while the
// writer runs update() and the mutators. Each answer is compared with the
// brute-force oracle on the boxes of the frame the query saw (the test keeps
// every frame's boxes); update()'s pairs and events are the same bit for bit
// with the option on and off; a query made from inside a running update()
// answers at once, against the frame before it. Run under ThreadSanitizer in
// CI (.ci/run), where a missing lock shows as a race.
#include <broadphase/broad_phase.h>
#include <broadphase/testkit/brute_force.h>
#include <broadphase/testkit/scene.h>

#include "error_capture.h"
#include "test_support.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

namespace bp {
namespace {

using test::expectError;

const Structure kStructures[] = {Structure::bvh, Structure::sweep, Structure::automatic};

const char* name(Structure s) {
  return s == Structure::bvh ? "bvh" : s == Structure::sweep ? "sweep" : "automatic";
}

// The configuration of a case: its structure and thread count.
BroadPhaseConfig configOf(Structure s, int threads) {
  BroadPhaseConfig config;
  config.structure = s;
  config.threads = threads;
  return config;
}

// A cube of half size in [0.2, maxHalf) centred in [0, world)^3.
Aabb randomCube(std::mt19937& rng, float world, float maxHalf) {
  std::uniform_real_distribution<float> coord(0.0f, world), size(0.2f, maxHalf);
  const Vec3 c(coord(rng), coord(rng), coord(rng));
  const Vec3 h = Vec3::Constant(size(rng));
  return Aabb{c - h, c + h};
}

// Query filters: every proxy has one of these categories; most queries take
// the default filter, some one that accepts half the categories.
constexpr uint64_t kCategories = 4;
Filter proxyFilter(uint32_t scene) { return {uint64_t(1) << (scene % kCategories), ~uint64_t(0)}; }

// One frame as the writer published it: each proxy index's box, filter and
// user data, whether it is live, and the removes the writer makes after the
// frame's update(), in order (`removeBase`: the removes made before them).
struct Frame {
  std::vector<Aabb> boxes;
  std::vector<Filter> filters;
  std::vector<uint64_t> userData;
  std::vector<uint8_t> live;
  std::vector<uint32_t> removes;
  uint64_t removeBase = 0;

  // The live mask after the first `removed` of the frame's removes, with the
  // query filter applied.
  std::vector<uint8_t> mask(size_t removed, const Filter& filter) const {
    std::vector<uint8_t> m = live;
    for (size_t k = 0; k < removed; ++k) m[removes[k]] = 0;
    for (size_t i = 0; i < m.size(); ++i)
      if (m[i] && !filter.accepts(filters[i])) m[i] = 0;
    return m;
  }
};

// What a query thread asked and got, checked after it let the frame go.
struct Answer {
  int kind = 0;  // 0 castRay, 1 castRays, 2 queryBox, 3 queryPoint, 4 nearest, 5 castRayAll,
                 // 6 castRaysAll
  Filter filter;
  std::vector<Ray> rays;
  Aabb box = Aabb::empty();
  Vec3 point{0, 0, 0};
  uint32_t k = 0;
  std::vector<RayHit> hits;
  std::vector<size_t> offsets;  // castRaysAll
  std::vector<uint32_t> found;
  std::vector<Neighbour> neighbours;
};

// True when `a` is the oracle's answer on `boxes` with live mask `m`.
bool matches(const Answer& a, std::span<const Aabb> boxes, std::span<const uint8_t> m) {
  switch (a.kind) {
    case 0:
    case 1:
      for (size_t r = 0; r < a.rays.size(); ++r) {
        const RayHit e = brute::castRayClosest(boxes, a.rays[r], m);
        if (e.proxy != a.hits[r].proxy || (e.hit() && e.t != a.hits[r].t)) return false;
      }
      return true;
    case 2: {
      std::vector<uint32_t> got = a.found;
      std::sort(got.begin(), got.end());
      return got == brute::queryBox(boxes, a.box, m);
    }
    case 3: {
      std::vector<uint32_t> got = a.found;
      std::sort(got.begin(), got.end());
      return got == brute::queryPoint(boxes, a.point, m);
    }
    case 4: return a.neighbours == brute::nearest(boxes, a.point, a.k, m);
    case 5: return a.hits == brute::castRayAll(boxes, a.rays[0], m);
    default:
      if (a.offsets.size() != a.rays.size() + 1) return false;
      for (size_t r = 0; r < a.rays.size(); ++r) {
        const std::vector<RayHit> got(a.hits.begin() + ptrdiff_t(a.offsets[r]),
                                      a.hits.begin() + ptrdiff_t(a.offsets[r + 1]));
        if (got != brute::castRayAll(boxes, a.rays[r], m)) return false;
      }
      return true;
  }
}

// Asks one random query of `bp` (under whatever hold the caller has).
Answer ask(const BroadPhase& bp, std::mt19937& rng, const std::vector<Ray>& rays, float side) {
  Answer a;
  a.kind = int(rng() % 7);
  if (rng() % 3 == 0) a.filter = {~uint64_t(0), 0b0101};
  std::uniform_real_distribution<float> coord(-0.1f * side, 1.1f * side);
  a.point = Vec3(coord(rng), coord(rng), coord(rng));
  switch (a.kind) {
    case 0:
      a.rays = {rays[rng() % rays.size()]};
      a.hits = {bp.castRay(a.rays[0], RayQuery::closest, a.filter)};
      break;
    case 1: {
      const size_t first = rng() % (rays.size() - 16);
      a.rays.assign(rays.begin() + first, rays.begin() + first + 16);
      a.hits.resize(16);
      bp.castRays(a.rays, a.hits, RayQuery::closest, a.filter);
      break;
    }
    case 2: {
      const Vec3 half = Vec3::Constant(0.05f * side);
      a.box = {a.point - half, a.point + half};
      bp.queryBox(
          a.box, [&](uint32_t p) { return a.found.push_back(p), true; }, a.filter);
      break;
    }
    case 3:
      bp.queryPoint(
          a.point, [&](uint32_t p) { return a.found.push_back(p), true; }, a.filter);
      break;
    case 4:
      a.k = 1 + uint32_t(rng() % 8);
      bp.nearest(a.point, a.k, a.neighbours, a.filter);
      break;
    case 5:
      a.rays = {rays[rng() % rays.size()]};
      bp.castRayAll(a.rays[0], a.hits, a.filter);
      break;
    default: {
      const size_t first = rng() % (rays.size() - 16);
      a.rays.assign(rays.begin() + first, rays.begin() + first + 16);
      bp.castRaysAll(a.rays, a.hits, a.offsets, a.filter);
      break;
    }
  }
  return a;
}

// The proxies an answer reports.
std::vector<uint32_t> reported(const Answer& a) {
  std::vector<uint32_t> out = a.found;
  for (const RayHit& h : a.hits)
    if (h.hit()) out.push_back(h.proxy);
  for (const Neighbour& n : a.neighbours) out.push_back(n.proxy);
  return out;
}

// The writer: a standard scene through the facade, every frame its motion,
// some removes after the update and as many re-adds before the next.
struct Writer {
  Scene scene;
  BroadPhase bp;
  std::vector<ProxyId> handleOf;   // by scene id (kNullIndex: removed)
  std::vector<uint32_t> sceneOf;   // by proxy index
  std::vector<uint64_t> userData;  // by proxy index: what the writer last set
  std::mt19937 rng{7};

  Writer(SceneKind kind, uint32_t n, const BroadPhaseConfig& config)
      : scene(makeScene(kind, n)), bp(config), handleOf(n) {
    for (uint32_t id = 0; id < n; ++id) add(id);
  }
  void add(uint32_t id) {
    const uint64_t data = (uint64_t(rng()) << 20) | id;
    const ProxyId h =
        bp.add({scene.boxes[id], scene.isStatic[id] ? MotionType::staticBody : MotionType::dynamic,
                proxyFilter(id), data});
    handleOf[id] = h;
    if (sceneOf.size() <= h.index) {
      sceneOf.resize(h.index + 1, kNullIndex);
      userData.resize(h.index + 1, 0);
    }
    sceneOf[h.index] = id;
    userData[h.index] = data;
  }
  // The frame the next update() publishes, with the removes to make after it.
  Frame next(uint32_t removes, uint64_t removeBase) {
    Frame f;
    const size_t n = sceneOf.size();
    f.boxes.assign(n, Aabb::empty());
    f.filters.assign(n, Filter{});
    f.userData = userData;
    f.live.assign(n, 0);
    std::vector<uint32_t> live;
    for (uint32_t p = 0; p < n; ++p) {
      if (sceneOf[p] == kNullIndex) continue;
      f.boxes[p] = scene.boxes[sceneOf[p]];
      f.filters[p] = proxyFilter(sceneOf[p]);
      f.live[p] = 1;
      live.push_back(p);
    }
    std::shuffle(live.begin(), live.end(), rng);
    f.removes.assign(live.begin(), live.begin() + std::min<size_t>(removes, live.size()));
    f.removeBase = removeBase;
    return f;
  }
  void step() {
    scene.step();
    for (uint32_t id = 0; id < scene.n; ++id)
      if (handleOf[id].index != kNullIndex && !scene.isStatic[id])
        bp.move(handleOf[id], scene.boxes[id]);
  }
  void remove(uint32_t proxy) {
    const uint32_t id = sceneOf[proxy];
    bp.remove(handleOf[id]);
    handleOf[id] = ProxyId{};
    sceneOf[proxy] = kNullIndex;
  }
  void reAddRemoved(uint32_t count) {
    for (uint32_t id = 0; id < scene.n && count > 0; ++id)
      if (handleOf[id].index == kNullIndex) add(id), --count;
  }
  void setSomeUserData(uint32_t count) {
    for (uint32_t k = 0; k < count; ++k) {
      const uint32_t id = rng() % scene.n;
      if (handleOf[id].index == kNullIndex) continue;
      const uint64_t data = (uint64_t(rng()) << 20) | id;
      bp.setUserData(handleOf[id], data);
      userData[handleOf[id].index] = data;
    }
  }
};

struct HammerCase {
  Structure structure;
  int threads;
  SceneKind scene;
};

// Several threads query without pause while the writer runs frames; every
// answer must be the oracle's on the frame it saw. Queries inside a
// QueryFrame know their frame and the removes it had seen (between the
// removes' started and done counters, at most one apart); queries without
// one take their own hold and must match the oracle on one of the frames
// published while they ran, with some prefix of its removes.
void hammer(const HammerCase& c) {
  SCOPED_TRACE(std::string(name(c.structure)) + ", " + std::to_string(c.threads) + " threads, " +
               sceneName(c.scene));
  constexpr uint32_t kN = 1200;
  constexpr int kFrames = 24;
  constexpr uint32_t kRemoves = 6;
  BroadPhaseConfig config;
  config.structure = c.structure;
  config.threads = c.threads;
  config.concurrentQueries = true;
  Writer w(c.scene, kN, config);
  const std::vector<Ray> rays = makeRays(kN, 256, 11);
  const float side = w.scene.worldSide;

  // frames[F]: what publish F shows. Written before update() F, then
  // `prepared` says so; read by queries that saw frame F (its publish, and
  // `prepared`, order the two).
  std::vector<Frame> frames(kFrames + 1);
  std::atomic<uint64_t> removesStarted{0}, removesDone{0}, published{0}, prepared{0};
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> checked{0}, duringUpdate{0}, framesSeenMask{0};
  std::vector<std::atomic<uint32_t>> heldIn(kFrames + 1);  // held queries per frame
  std::atomic<bool> inUpdate{false};
  std::mutex failMutex;
  std::vector<std::string> failures;
  auto fail = [&](std::string what) {
    const std::lock_guard lock(failMutex);
    if (failures.size() < 10) failures.push_back(std::move(what));
  };

  auto reader = [&](uint32_t seed) {
    std::mt19937 rng(seed);
    while (!stop.load()) {
      const bool held = rng() % 4 != 0;
      Answer a;
      uint64_t frame = 0, done = 0, started = 0, lo = 0, hi = 0;
      bool userDataOk = true;
      const bool updating = inUpdate.load();
      if (held) {
        const BroadPhase::QueryFrame f(w.bp);
        frame = f.index();
        done = removesDone.load();
        started = removesStarted.load();
        a = ask(w.bp, rng, rays, side);
        for (uint32_t p : reported(a)) userDataOk &= f.userData(p) == frames[frame].userData[p];
      } else {
        lo = published.load();
        a = ask(w.bp, rng, rays, side);
        hi = prepared.load();  // at least the frame the query saw
      }
      duringUpdate += updating && inUpdate.load();
      // Check against the oracle outside the hold.
      bool ok = false;
      if (held) {
        const Frame& fr = frames[frame];
        framesSeenMask.fetch_or(uint64_t(1) << std::min<uint64_t>(frame, 63));
        ++heldIn[frame];
        const size_t d = size_t(std::clamp<uint64_t>(done - fr.removeBase, 0, fr.removes.size()));
        const size_t s =
            size_t(std::clamp<uint64_t>(started - fr.removeBase, 0, fr.removes.size()));
        ok = matches(a, fr.boxes, fr.mask(d, a.filter)) ||
             (s != d && matches(a, fr.boxes, fr.mask(s, a.filter)));
        if (!userDataOk) fail("QueryFrame::userData differs from frame " + std::to_string(frame));
      } else {
        for (uint64_t f = lo; f <= hi && !ok; ++f)
          for (size_t r = 0; r <= frames[f].removes.size() && !ok; ++r)
            ok = matches(a, frames[f].boxes, frames[f].mask(r, a.filter));
      }
      if (!ok)
        fail("query kind " + std::to_string(a.kind) + (held ? " in frame " : " in frames ") +
             std::to_string(held ? frame : lo) + " differs from the oracle");
      ++checked;
    }
  };

  // The readers start once frame 1 (the first update) is out.
  uint64_t removesMade = 0;
  frames[1] = w.next(kRemoves, removesMade);
  prepared = 1;
  w.bp.update();
  published = 1;
  std::vector<std::thread> readers;
  for (uint32_t t = 0; t < 3; ++t) readers.emplace_back(reader, 100 + t);

  for (int f = 1; f < kFrames; ++f) {
    // The gap after frame f: its removes (queries must stop reporting each
    // from the moment remove() returns), new user data, then the next
    // frame's motion and re-adds.
    for (uint32_t p : frames[f].removes) {
      ++removesStarted;
      w.remove(p);
      ++removesDone;
      ++removesMade;
    }
    w.setSomeUserData(5);
    w.step();
    w.reAddRemoved(kRemoves);
    frames[f + 1] = w.next(f + 1 < kFrames ? kRemoves : 0, removesMade);
    prepared = uint64_t(f + 1);
    // Not a timing condition: each frame waits for two answers in a
    // QueryFrame of it, so that queries meet every frame whatever the
    // machine's speed.
    while (heldIn[f].load() < 2) std::this_thread::yield();
    inUpdate = true;
    w.bp.update();
    inUpdate = false;
    published = uint64_t(f + 1);
    EXPECT_EQ(w.bp.validate(), "");  // (not ASSERT: the readers must be joined)
  }
  stop = true;
  for (std::thread& t : readers) t.join();
  for (const std::string& f : failures) ADD_FAILURE() << f;
  EXPECT_GT(checked.load(), 0u);
  EXPECT_GE(std::popcount(framesSeenMask.load()), kFrames - 1);
  std::printf("  %s, %d threads, %s: %llu queries checked, %llu begun and ended inside update()\n",
              name(c.structure), c.threads, sceneName(c.scene), (unsigned long long)checked.load(),
              (unsigned long long)duringUpdate.load());
}

TEST(ConcurrentQueries, HammeredQueriesMatchTheOracleOnTheirFrame) {
  for (Structure s : kStructures)
    for (int threads : {1, 2})
      for (SceneKind scene : {SceneKind::uniform, SceneKind::staticScene})
        hammer({s, threads, scene});
}

// A query made from inside update() (from the streaming form's consumer,
// while the frame's pairs are being found) answers at once, from another
// thread, against the frame before; after the update it sees the new one.
TEST(ConcurrentQueries, AQueryInsideUpdateAnswersAgainstTheLastFrame) {
  for (Structure s : kStructures)
    for (int threads : {1, 2}) {
      SCOPED_TRACE(std::string(name(s)) + ", " + std::to_string(threads) + " threads");
      BroadPhaseConfig config = configOf(s, threads);
      config.concurrentQueries = true;
      Writer w(SceneKind::uniform, 800, config);
      const std::vector<Ray> rays = makeRays(800, 64, 5);
      w.bp.update();

      std::mutex m;
      std::condition_variable cv;
      bool asked = false, answered = false, quit = false;
      uint64_t seenFrame = 0;
      std::vector<RayHit> hits(rays.size());
      std::thread helper([&] {
        std::unique_lock lock(m);
        for (;;) {
          cv.wait(lock, [&] { return asked || quit; });
          if (quit) return;
          asked = false;
          lock.unlock();
          {
            const BroadPhase::QueryFrame f(w.bp);
            seenFrame = f.index();
            w.bp.castRays(rays, hits);
          }
          lock.lock();
          answered = true;
          cv.notify_all();
        }
      });
      for (uint64_t frame = 1; frame <= 6; ++frame) {
        std::vector<Aabb> before(w.sceneOf.size());
        for (uint32_t p = 0; p < before.size(); ++p) before[p] = w.scene.boxes[w.sceneOf[p]];
        w.step();
        std::atomic<bool> first{true};
        bool inTime = false;
        w.bp.update([&](std::span<const ProxyPair>) {
          if (!first.exchange(false)) return;
          std::unique_lock lock(m);
          asked = true;
          answered = false;
          cv.notify_all();
          inTime = cv.wait_for(lock, std::chrono::seconds(60), [&] { return answered; });
        });
        ASSERT_TRUE(inTime) << "the query waited for the update";
        EXPECT_EQ(seenFrame, frame);  // the frame before this update (the first one is frame 1)
        for (size_t r = 0; r < rays.size(); ++r) {
          const RayHit e = brute::castRayClosest(before, rays[r]);
          EXPECT_EQ(hits[r].proxy, e.proxy) << "ray " << r;
          if (e.hit()) {
            EXPECT_EQ(hits[r].t, e.t) << "ray " << r;
          }
        }
        const BroadPhase::QueryFrame after(w.bp);
        EXPECT_EQ(after.index(), frame + 1);
      }
      {
        const std::lock_guard lock(m);
        quit = true;
      }
      cv.notify_all();
      helper.join();
    }
}

// update()'s pairs and events, bit for bit, and every query's answer (float
// and double) are the same with concurrentQueries on and off, over random
// operations (moves, churn, filters, user data, motion types, layers under a
// layer table, double proxies, an origin shift, and a snapshot of the
// object without the option loaded into both).
TEST(ConcurrentQueries, SameFramesAndAnswersWithTheOptionOnAndOff) {
  for (Structure s : kStructures)
    for (int threads : {1, 2}) {
      SCOPED_TRACE(std::string(name(s)) + ", " + std::to_string(threads) + " threads");
      BroadPhaseConfig config = configOf(s, threads);
      config.layers.set(1, 1, false);
      config.layers.set(2, 3, false);
      BroadPhase off(config);
      config.concurrentQueries = true;
      BroadPhase on(config);
      std::mt19937 rng(3);
      const auto randomBox = [&] { return randomCube(rng, 40.0f, 3.0f); };
      std::vector<std::pair<ProxyId, ProxyId>> live;  // (off, on)
      std::vector<uint8_t> isDouble;                  // per entry of `live`
      const std::vector<Ray> rays = makeRays(2000, 64, 9);
      for (int frame = 0; frame < 40; ++frame) {
        for (int k = 0; k < 40; ++k) {
          const uint32_t op = rng() % 12;
          if (op < 3 || live.empty()) {
            const ProxyDesc d{randomBox(), MotionType(rng() % 3), proxyFilter(rng()), rng(),
                              uint32_t(rng() % 4)};
            live.push_back({off.add(d), on.add(d)});
            isDouble.push_back(0);
            ASSERT_EQ(live.back().first.index, live.back().second.index);
          } else if (op == 10) {
            const Aabb b = randomBox();
            const DProxyDesc d{{toDouble(b.min) + DVec3{0.1, 0.2, 0.3}, toDouble(b.max)},
                               MotionType::dynamic,
                               {},
                               rng(),
                               uint32_t(rng() % 4)};
            live.push_back({off.add(d), on.add(d)});
            isDouble.push_back(1);
          } else {
            const size_t i = rng() % live.size();
            const auto [a, b] = live[i];
            if (op == 3) {
              off.remove(a);
              on.remove(b);
              live.erase(live.begin() + ptrdiff_t(i));
              isDouble.erase(isDouble.begin() + ptrdiff_t(i));
            } else if (op == 4) {
              const Filter f{uint64_t(1) << (rng() % 3), rng() % 2 ? ~uint64_t(0) : 0b011};
              off.setFilter(a, f);
              on.setFilter(b, f);
            } else if (op == 5) {
              const uint64_t data = rng();
              off.setUserData(a, data);
              on.setUserData(b, data);
            } else if (op == 6) {
              const MotionType m = MotionType(rng() % 3);
              off.setMotionType(a, m);
              on.setMotionType(b, m);
            } else if (op == 11) {
              const uint32_t layer = rng() % 4;
              off.setLayer(a, layer);
              on.setLayer(b, layer);
            } else if (isDouble[i]) {
              const DAabb box = toDouble(randomBox());
              off.move(a, box);
              on.move(b, box);
            } else {
              const Aabb box = randomBox();
              off.move(a, box);
              on.move(b, box);
            }
          }
        }
        if (frame == 25) {
          off.shiftOrigin(Vec3(1.5f, -2.0f, 0.25f));
          on.shiftOrigin(Vec3(1.5f, -2.0f, 0.25f));
        }
        if (frame == 15 || frame == 30) {
          // Saved with changes pending; both load it (the handles become
          // those of `off`), queries must answer at once on both. `on`
          // publishes another world first, which the load must replace.
          std::vector<std::byte> snapshot;
          off.saveState(snapshot);
          for (int k = 0; k < 50; ++k) on.add({randomBox()});
          on.update();
          off.loadState(snapshot);
          on.loadState(snapshot);
          for (auto& [a, b] : live) b = a;
          for (const Ray& r : rays) ASSERT_EQ(off.castRay(r).proxy, on.castRay(r).proxy);
          ASSERT_EQ(on.validate(), "");
        }
        const FramePairs& x = off.update();
        const FramePairs& y = on.update();
        auto same = [](std::span<const ProxyPair> p, std::span<const ProxyPair> q) {
          return p.size() == q.size() &&
                 std::equal(p.begin(), p.end(), q.begin(), [](const auto& u, const auto& v) {
                   return u.a == v.a && u.b == v.b && u.userDataA == v.userDataA &&
                          u.userDataB == v.userDataB;
                 });
        };
        ASSERT_TRUE(same(x.pairs, y.pairs)) << "frame " << frame;
        ASSERT_TRUE(same(x.begun, y.begun)) << "frame " << frame;
        ASSERT_TRUE(same(x.ended, y.ended)) << "frame " << frame;
        ASSERT_EQ(on.validate(), "") << "frame " << frame;
        // Queries, right after the update and again after some changes of
        // the next frame (removes and filters show at once).
        for (int pass = 0; pass < 2; ++pass) {
          for (const Ray& r : rays) {
            const Filter f = rng() % 2 ? Filter{} : Filter{~uint64_t(0), 0b101};
            const RayHit p = off.castRay(r, RayQuery::closest, f);
            const RayHit q = on.castRay(r, RayQuery::closest, f);
            ASSERT_EQ(p.proxy, q.proxy);
            ASSERT_EQ(p.t, q.t);
          }
          std::vector<Neighbour> n1, n2;
          off.nearest(Vec3(20, 20, 20), 10, n1);
          on.nearest(Vec3(20, 20, 20), 10, n2);
          ASSERT_EQ(n1, n2);
          // The double queries read the published DAabbs and origin.
          for (size_t k = 0; k < rays.size(); k += 16) {
            const Ray& r = rays[k];
            const DVec3 o = toDouble(r.origin) + off.origin();
            const DVec3 d = toDouble(r.direction);
            const DRayHit p = off.castRay(o, d, double(r.maxT));
            const DRayHit q = on.castRay(o, d, double(r.maxT));
            ASSERT_EQ(p.proxy, q.proxy);
            ASSERT_EQ(p.t, q.t);
          }
          std::vector<DNeighbour> d1, d2;
          off.nearest(DVec3{20, 20, 20}, 10, d1);
          on.nearest(DVec3{20, 20, 20}, 10, d2);
          ASSERT_EQ(d1.size(), d2.size());
          for (size_t k = 0; k < d1.size(); ++k) {
            ASSERT_EQ(d1[k].proxy, d2[k].proxy);
            ASSERT_EQ(d1[k].distanceSquared, d2[k].distanceSquared);
          }
          if (pass == 0 && live.size() > 4) {
            for (int k = 0; k < 3; ++k) {
              const size_t i = rng() % live.size();
              off.remove(live[i].first);
              on.remove(live[i].second);
              live.erase(live.begin() + ptrdiff_t(i));
              isDouble.erase(isDouble.begin() + ptrdiff_t(i));
            }
            off.setFilter(live[0].first, {2, ~uint64_t(0)});
            on.setFilter(live[0].second, {2, ~uint64_t(0)});
          }
        }
      }
    }
}

// Double queries on other threads while the writer adds and moves double
// proxies (which grows and writes its DoubleWorld) and shifts the origin:
// they read the published DAabbs and origin, so under ThreadSanitizer a
// read of the writer's shows as a race. Each reader checks, inside one
// QueryFrame, that a box query over the world finds exactly the proxies of
// that frame and that a repeated ray gives the same hit.
TEST(ConcurrentQueries, DoubleQueriesDuringUpdate) {
  for (Structure s : kStructures) {
    SCOPED_TRACE(name(s));
    BroadPhaseConfig config;
    config.structure = s;
    config.threads = 2;
    config.concurrentQueries = true;
    BroadPhase bp(config);
    constexpr int kFrames = 60;
    constexpr int kPublishes = kFrames + kFrames / 20;  // an update each, a shiftOrigin each 20
    std::vector<std::atomic<int>> proxiesIn(kPublishes + 1);
    for (auto& c : proxiesIn) c = -1;
    proxiesIn[0] = 0;
    std::atomic<bool> done{false};
    std::atomic<int> checked{0};
    const DAabb everything{DVec3{-1e6, -1e6, -1e6}, DVec3{1e6, 1e6, 1e6}};
    auto reader = [&](unsigned seed) {
      std::mt19937 rng(seed);
      while (!done.load()) {
        const BroadPhase::QueryFrame f(bp);
        int found = 0;
        bp.queryBox(everything, [&](uint32_t) { return ++found, true; });
        const int want = f.index() <= kPublishes ? proxiesIn[f.index()].load() : 0;
        if (want >= 0) {
          EXPECT_EQ(found, want) << "frame " << f.index();
        }
        const DVec3 o{double(rng() % 40), double(rng() % 40), -5.0};
        const DRayHit a = bp.castRay(o, DVec3{0.1, 0.2, 1.0}, 100.0);
        const DRayHit b = bp.castRay(o, DVec3{0.1, 0.2, 1.0}, 100.0);
        EXPECT_EQ(a.proxy, b.proxy);
        EXPECT_EQ(a.t, b.t);
        std::vector<DNeighbour> near;
        bp.nearest(o, 3, near);
        ++checked;
      }
    };
    std::thread r1(reader, 1), r2(reader, 2);
    std::mt19937 rng(7);
    std::vector<ProxyId> ids;
    for (int frame = 1; frame <= kFrames; ++frame) {
      for (int k = 0; k < 20; ++k) {
        const DVec3 lo{double(rng() % 400) / 10, double(rng() % 400) / 10, double(rng() % 40)};
        ids.push_back(bp.add(DProxyDesc{.box = {lo, lo + DVec3{1.5, 1.5, 1.5}}}));
      }
      for (size_t k = 0; k < ids.size(); k += 3) {
        const DVec3 lo{double(rng() % 400) / 10, double(rng() % 400) / 10, double(rng() % 40)};
        bp.move(ids[k], DAabb{lo, lo + DVec3{1.0, 2.0, 1.0}});
      }
      if (frame % 20 == 0) bp.shiftOrigin(Vec3(1.0f, -1.0f, 0.5f));
      // The publish of this update is frame index `published` (one per
      // update and one per shiftOrigin before it).
      const int published = frame + (frame / 20);
      proxiesIn[published] = int(ids.size());
      bp.update();
    }
    // Not a timing condition: the readers check at least one frame however
    // slowly they are scheduled (on a loaded machine all 60 updates can end
    // before either reader finishes a query).
    while (checked.load() == 0) std::this_thread::yield();
    done = true;
    r1.join();
    r2.join();
    EXPECT_GT(checked.load(), 0);
    EXPECT_EQ(bp.validate(), "");
  }
}

// The query structure catches up when a query first reads it, so frames
// nobody queried pile their moves up in it: a proxy moved in several of
// them, moved and then removed (its index reused by an add), rehomed by a
// motion change, or re-added, must answer as the object without the option
// does once a query comes, on the boxes of the last frame. Queries (and no
// validate(), which catches up too) come after a random one of every few
// frames.
TEST(ConcurrentQueries, FramesNobodyQueriedAnswerAsTheLastFrame) {
  for (Structure s : kStructures)
    for (int threads : {1, 2}) {
      SCOPED_TRACE(std::string(name(s)) + ", " + std::to_string(threads) + " threads");
      BroadPhaseConfig config = configOf(s, threads);
      BroadPhase off(config);
      config.concurrentQueries = true;
      BroadPhase on(config);
      std::mt19937 rng(17);
      std::uniform_real_distribution<float> coord(0.0f, 30.0f);
      const auto randomBox = [&] { return randomCube(rng, 30.0f, 2.5f); };
      std::vector<std::pair<ProxyId, ProxyId>> live;  // (off, on)
      for (int k = 0; k < 300; ++k) {
        const ProxyDesc d{randomBox(), MotionType(rng() % 3), {}, uint64_t(k)};
        live.push_back({off.add(d), on.add(d)});
      }
      const std::vector<Ray> rays = makeRays(1500, 96, 21);
      uint32_t queried = 0;
      for (int frame = 0; frame < 60; ++frame) {
        // A few proxies move every frame (so their moves pile up), others
        // at random, with some churn and motion changes.
        for (size_t i = 0; i < 8 && i < live.size(); ++i) {
          const Aabb box = randomBox();
          off.move(live[i].first, box);
          on.move(live[i].second, box);
        }
        for (int k = 0; k < 30; ++k) {
          const uint32_t op = rng() % 10;
          const size_t i = rng() % live.size();
          if (op == 0) {
            off.remove(live[i].first);
            on.remove(live[i].second);
            live.erase(live.begin() + ptrdiff_t(i));
          } else if (op == 1) {
            const ProxyDesc d{randomBox(), MotionType(rng() % 3), {}, rng()};
            live.push_back({off.add(d), on.add(d)});
            ASSERT_EQ(live.back().first.index, live.back().second.index);
          } else if (op == 2) {
            const MotionType m = MotionType(rng() % 3);
            off.setMotionType(live[i].first, m);
            on.setMotionType(live[i].second, m);
          } else {
            const Aabb box = randomBox();
            off.move(live[i].first, box);
            on.move(live[i].second, box);
          }
        }
        off.update();
        on.update();
        if (rng() % 4 != 0) continue;  // nobody queries this frame
        ++queried;
        for (const Ray& r : rays) {
          const RayHit p = off.castRay(r);
          const RayHit q = on.castRay(r);
          ASSERT_EQ(p.proxy, q.proxy) << "frame " << frame;
          ASSERT_EQ(p.t, q.t) << "frame " << frame;
        }
        for (int k = 0; k < 20; ++k) {
          const Vec3 c(coord(rng), coord(rng), coord(rng));
          const Aabb box{c - Vec3::Constant(3), c + Vec3::Constant(3)};
          std::vector<uint32_t> a, b;
          off.queryBox(box, [&](uint32_t p) { return a.push_back(p), true; });
          on.queryBox(box, [&](uint32_t p) { return b.push_back(p), true; });
          std::sort(a.begin(), a.end());
          std::sort(b.begin(), b.end());
          ASSERT_EQ(a, b) << "frame " << frame;
          std::vector<Neighbour> n1, n2;
          off.nearest(c, 5, n1);
          on.nearest(c, 5, n2);
          ASSERT_EQ(n1, n2) << "frame " << frame;
        }
      }
      EXPECT_GT(queried, 5u);
      EXPECT_EQ(on.validate(), "");
    }
}

TEST(ConcurrentQueries, OffByDefault) { EXPECT_FALSE(BroadPhaseConfig{}.concurrentQueries); }

// The frame's user data, the index, and what shows at once.
TEST(ConcurrentQueries, QueryFrameGivesTheFramesUserData) {
  BroadPhaseConfig config;
  config.concurrentQueries = true;
  BroadPhase bp(config);
  const ProxyId a = bp.add({{Vec3(0, 0, 0), Vec3(1, 1, 1)}, MotionType::dynamic, {}, 10});
  {
    const BroadPhase::QueryFrame f(bp);
    EXPECT_EQ(f.index(), 0u);
    EXPECT_EQ(expectError(ErrorCode::staleHandle, [&] { return f.userData(a.index); }), 0u);
    EXPECT_FALSE(bp.castRay(Vec3(-1, 0.5f, 0.5f), Vec3(1, 0, 0), 10).hit());  // not published
  }
  bp.update();
  bp.setUserData(a, 20);
  {
    const BroadPhase::QueryFrame f(bp);
    const BroadPhase::QueryFrame nested(bp);  // frames nest
    EXPECT_EQ(nested.index(), 1u);
    EXPECT_EQ(f.userData(a.index), 10u);  // the frame's, until the next publish
    EXPECT_EQ(bp.castRay(Vec3(-1, 0.5f, 0.5f), Vec3(1, 0, 0), 10).proxy, a.index);
  }
  bp.update();
  {
    const BroadPhase::QueryFrame f(bp);
    EXPECT_EQ(f.index(), 2u);
    EXPECT_EQ(f.userData(a.index), 20u);
  }
  bp.setFilter(a, {2, ~uint64_t(0)});  // queries use it at once
  EXPECT_FALSE(
      bp.castRay(Vec3(-1, 0.5f, 0.5f), Vec3(1, 0, 0), 10, RayQuery::closest, {1, 1}).hit());
  bp.shiftOrigin(Vec3(1, 0, 0));  // a publish of its own
  {
    const BroadPhase::QueryFrame f(bp);
    EXPECT_EQ(f.index(), 3u);
    EXPECT_FLOAT_EQ(bp.castRay(Vec3(-2, 0.5f, 0.5f), Vec3(1, 0, 0), 10).t, 1.0f);
  }
  bp.remove(a);  // gone at once
  EXPECT_FALSE(bp.castRay(Vec3(-2, 0.5f, 0.5f), Vec3(1, 0, 0), 10).hit());
  {
    const BroadPhase::QueryFrame f(bp);
    EXPECT_EQ(expectError(ErrorCode::staleHandle, [&] { return f.userData(a.index); }), 0u);
  }
  EXPECT_EQ(bp.validate(), "");
}

TEST(ConcurrentQueries, QueryFrameWithoutTheOptionIsRejected) {
  BroadPhase bp;
  const ProxyId a = bp.add({{Vec3(0, 0, 0), Vec3(1, 1, 1)}, MotionType::dynamic, {}, 10});
  bp.update();
  test::ErrorCapture capture;
  const BroadPhase::QueryFrame f(bp);
  ASSERT_EQ(capture.errors().size(), 1u);
  EXPECT_EQ(capture.errors()[0].code, ErrorCode::invalidArgument);
  EXPECT_EQ(f.index(), 0u);
  EXPECT_EQ(f.userData(a.index), 10u);
}

}  // namespace
}  // namespace bp
