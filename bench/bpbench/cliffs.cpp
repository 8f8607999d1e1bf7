// `bpbench cliffs`: every public call of BroadPhase timed at N and 4N, so
// that a call whose cost grows faster than its work shows, not only in an
// engine's production run.
//
// One world a (scene, structure, size), one thread, in its own forked child:
// the scene's boxes added in one batch and updated, then the calls below in
// this order (the rays' tree made before each round of queries), each timed over what it does (R =
// 1000 single calls on proxies drawn at random, or one call of a batch or of the whole world). Each
// row has a work: `1` for a single call or query (its answer is a few proxies in every standard
// scene), `N` for a batch that grows with the world (the frame's moves, half the proxies) or a call
// over the whole world (update, saveState), `N+P` for one whose work is the world and its pairs
// (frames, snapshots). The growth from N to 4N is compared with n log n of the work: log(4N)/log(N)
// for `1`, 4 log(4N)/log(N) for `N`, the growth of N + P times log(4N)/log(N) for `N+P`. A world
// row whose growth passes that by more than half again is flagged, and a `1` row past 3x that takes
// 2 us at 4N (a single call that scans the world grows 4x and takes far longer; cache misses alone
// grew calls under a microsecond 3-5x): a cliff, or noise to measure again. Freed memory stays in
// the child's heap (keepFreedMemory), so that no call pays for pages mapped afresh for it.
#include "child.h"
#include "commands.h"
#include "progress.h"
#include "table.h"

#include <broadphase/broad_phase.h>
#include <broadphase/testkit/scene.h>

#include <malloc.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

namespace bpbench {
namespace {

using Clock = std::chrono::steady_clock;

// one: a single call; world: the whole world (N); pairs: the world and its
// pairs (N + P: frames, snapshots, removes that end pairs), since a scene's
// pairs may grow faster than its boxes (`clustered`: 16x for 4x).
enum class Work : uint8_t { one, world, pairs };

struct Timing {
  std::string call;
  Work work;
  double seconds;  // a call (`one`), or the whole call (`world`)
};

bp::Structure structureOf(const BackendInfo& b) {
  const std::string name = b.name;
  if (name == "bvh") return bp::Structure::bvh;
  if (name == "sweep") return bp::Structure::sweep;
  return bp::Structure::automatic;
}

// The calls, in order, on a world of `n` boxes of `kind`.
std::vector<Timing> measureCalls(bp::SceneKind kind, bp::Structure structure, uint32_t n,
                                 uint64_t seed, Progress& progress, uint64_t& pairs) {
  constexpr uint32_t kCalls = 1000;
  std::vector<Timing> out;
  bp::Scene scene = bp::makeScene(kind, n, seed);
  bp::BroadPhase bp({.structure = structure, .threads = 1});
  bp::SceneRng rng(seed + 17);
  const auto pick = [&](uint32_t count) { return uint32_t(rng.next() % count); };
  // Times `body` once: the whole call (world), or `calls` single calls.
  uint32_t calls = kCalls;
  const auto time = [&](const std::string& call, Work work, auto&& body) {
    const auto t0 = Clock::now();
    progress.during(call, body);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    out.push_back({call, work, work == Work::one ? s / calls : s});
  };
  uint64_t sink = 0;  // what the calls return, kept so that none is optimised away

  std::vector<bp::ProxyDesc> descs(n);
  for (uint32_t i = 0; i < n; ++i)
    descs[i] = {scene.boxes[i],
                scene.isStatic[i] ? bp::MotionType::staticBody : bp::MotionType::dynamic,
                {},
                i};
  std::vector<bp::ProxyId> ids(n);
  time("add(span) of every box", Work::world, [&] { bp.add(descs, ids); });
  time("update() after it", Work::pairs, [&] { bp.update(); });
  pairs = bp.lastPairs().pairs.size();

  // Single calls on proxies drawn at random (scene ids), then the frame.
  // Up to kCalls distinct scene ids, in a random order.
  std::vector<uint32_t> drawn;
  const auto draw = [&] {
    std::vector<uint8_t> taken(n, 0);
    drawn.clear();
    for (uint32_t k = 0; k < kCalls; ++k)
      if (const uint32_t d = pick(n); !taken[d]) {
        taken[d] = 1;
        drawn.push_back(d);
      }
  };
  draw();
  const auto each = [&](auto&& fn) {
    calls = uint32_t(drawn.size());
    for (const uint32_t d : drawn) fn(d);
  };
  time("remove(id)", Work::one, [&] { each([&](uint32_t d) { bp.remove(ids[d]); }); });
  time("add(desc)", Work::one, [&] { each([&](uint32_t d) { ids[d] = bp.add(descs[d]); }); });
  time("move(id, box)", Work::one, [&] {
    each([&](uint32_t d) {
      const bp::Vec3 s(0.01f, 0.0f, 0.0f);
      bp.move(ids[d], {scene.boxes[d].min + s, scene.boxes[d].max + s});
    });
  });
  time("setFilter", Work::one, [&] { each([&](uint32_t d) { bp.setFilter(ids[d], {}); }); });
  time("setUserData", Work::one, [&] { each([&](uint32_t d) { bp.setUserData(ids[d], d); }); });
  time("contains", Work::one, [&] { each([&](uint32_t d) { sink += bp.contains(ids[d]); }); });
  time("handleOf + userData + desc", Work::one, [&] {
    each([&](uint32_t d) {
      sink += bp.handleOf(ids[d].index).generation + bp.userData(ids[d].index) +
              uint64_t(bp.desc(ids[d]).box.min.x());
    });
  });
  calls = kCalls;
  time("proxyCount", Work::one, [&] {
    for (uint32_t k = 0; k < kCalls; ++k) sink += bp.proxyCount();
  });

  // Queries with those moves pending (they see the last update).
  std::vector<bp::Vec3> points(kCalls);
  for (bp::Vec3& p : points)
    p = bp::Vec3(rng.uniform() * scene.bounds.x(), rng.uniform() * scene.bounds.y(),
                 rng.uniform() * scene.bounds.z());
  // Rays of a fixed length (8, about two boxes' spacing), so that a ray's
  // answer does not grow with the world as the scenes' rays of L/4 do.
  std::vector<bp::Ray> rays = bp::makeRaysIn(scene.bounds, kCalls, seed + 2);
  for (bp::Ray& r : rays) r = bp::makeRay(r.origin, r.direction, 8.0f);
  std::vector<bp::Neighbour> near;
  std::vector<bp::RayHit> hits;
  const auto queries = [&](const std::string& when) {
    calls = kCalls;
    const auto name = [&](const std::string& call) { return call + when; };
    time(name("queryBox"), Work::one, [&] {
      for (const bp::Vec3& p : points)
        bp.queryBox({p - bp::Vec3::Constant(1.0f), p + bp::Vec3::Constant(1.0f)}, [&](uint32_t i) {
          sink += i;
          return true;
        });
    });
    time(name("queryPoint"), Work::one, [&] {
      for (const bp::Vec3& p : points)
        bp.queryPoint(p, [&](uint32_t i) { return (sink += i), true; });
    });
    time(name("castRay closest"), Work::one, [&] {
      for (const bp::Ray& r : rays) sink += bp.castRay(r).proxy;
    });
    time(name("castRay any"), Work::one, [&] {
      for (const bp::Ray& r : rays) sink += bp.castRay(r, bp::RayQuery::any).proxy;
    });
    time(name("castRayAll"), Work::one, [&] {
      for (const bp::Ray& r : rays) {
        bp.castRayAll(r, hits);
        sink += hits.size();
      }
    });
    time(name("castBox"), Work::one, [&] {
      for (const bp::Ray& r : rays)
        sink += bp.castBox(bp::Vec3::Constant(0.5f), r.origin, r.direction, r.maxT).proxy;
    });
    for (const uint32_t k : {1u, 8u, 64u}) {
      const std::string call = "nearest k=" + std::to_string(k);
      time(name(call), Work::one, [&] {
        for (const bp::Vec3& p : points) {
          bp.nearest(p, k, near);
          sink += near.size();
        }
      });
    }
    time(name("castRays (per ray)"), Work::one, [&] {
      std::vector<bp::RayHit> batch(rays.size());
      bp.castRays(rays, batch);
      sink += batch[0].proxy;
    });
    time(name("castRay(DVec3)"), Work::one, [&] {
      for (const bp::Ray& r : rays)
        sink += bp.castRay(bp::toDouble(r.origin), bp::toDouble(r.direction), r.maxT).proxy;
    });
    time(name("queryBox(DAabb)"), Work::one, [&] {
      for (const bp::Vec3& p : points) {
        const bp::DVec3 c = bp::toDouble(p);
        bp.queryBox(bp::DAabb{c - bp::DVec3{1, 1, 1}, c + bp::DVec3{1, 1, 1}}, [&](uint32_t i) {
          sink += i;
          return true;
        });
      }
    });
    time(name("nearest(DVec3) k=8"), Work::one, [&] {
      std::vector<bp::DNeighbour> dnear;
      for (const bp::Vec3& p : points) {
        bp.nearest(bp::toDouble(p), 8, dnear);
        sink += dnear.size();
      }
    });
  };
  // The rays' tree is made first, timed on its own: the queries' rows are
  // then each call's own cost, not the tree's, which `automatic` would
  // charge to whichever query reached its price.
  time("prepareRays", Work::world, [&] { bp.prepareRays(); });
  queries(", moves pending");
  time("update() after single calls", Work::pairs, [&] { bp.update(); });
  time("prepareRays", Work::world, [&] { bp.prepareRays(); });
  queries("");

  // A frame: the scene's motion as one batch move, then update().
  scene.step();
  std::vector<bp::ProxyId> movers;
  std::vector<bp::Aabb> moved;
  for (uint32_t i = 0; i < n; ++i)
    if (!scene.isStatic[i]) {
      movers.push_back(ids[i]);
      moved.push_back(scene.boxes[i]);
    }
  time("move(span) of every moving box", Work::world, [&] { bp.move(movers, moved); });
  time("update() after it (a frame)", Work::pairs, [&] { bp.update(); });
  time("update(consume) (a frame, nothing moved)", Work::pairs,
       [&] { bp.update([&](std::span<const bp::ProxyPair> chunk) { sink += chunk.size(); }); });

  // Motion types and layers, one at a time, then the frame that applies them.
  draw();
  time("setMotionType", Work::one, [&] {
    each([&](uint32_t d) {
      bp.setMotionType(ids[d],
                       scene.isStatic[d] ? bp::MotionType::dynamic : bp::MotionType::staticBody);
    });
  });
  time("setLayer", Work::one, [&] { each([&](uint32_t d) { bp.setLayer(ids[d], 1); }); });
  time("update() after them", Work::pairs, [&] { bp.update(); });
  time("setLayerTable", Work::world, [&] { bp.setLayerTable(bp::LayerTable{}); });
  time("update() after it", Work::pairs, [&] { bp.update(); });

  // Batches of half the world: out, back in, the frame.
  std::vector<bp::ProxyId> half;
  std::vector<bp::ProxyDesc> halfDescs;
  std::vector<uint32_t> halfScene;
  for (uint32_t i = 0; i < n; i += 2) {
    half.push_back(ids[i]);
    halfDescs.push_back(descs[i]);
    halfScene.push_back(i);
  }
  time("remove(span) of half", Work::pairs, [&] { bp.remove(half); });
  std::vector<bp::ProxyId> back(half.size());
  time("add(span) of them back", Work::world, [&] { bp.add(halfDescs, back); });
  for (size_t k = 0; k < back.size(); ++k) ids[halfScene[k]] = back[k];
  time("update() after them", Work::pairs, [&] { bp.update(); });

  // Double proxies, one at a time, and their frame.
  draw();
  std::vector<bp::ProxyId> doubles;
  time("add(DProxyDesc)", Work::one, [&] {
    each([&](uint32_t d) {
      doubles.push_back(bp.add(
          bp::DProxyDesc{{bp::toDouble(scene.boxes[d].min), bp::toDouble(scene.boxes[d].max)},
                         bp::MotionType::dynamic,
                         {},
                         d}));
    });
  });
  time("move(id, DAabb)", Work::one, [&] {
    for (size_t k = 0; k < doubles.size(); ++k) {
      const bp::DAabb b = bp.worldBox(doubles[k]);
      bp.move(doubles[k], bp::DAabb{b.min + bp::DVec3{0.01, 0, 0}, b.max + bp::DVec3{0.01, 0, 0}});
    }
  });
  time("update() with them", Work::pairs, [&] { bp.update(); });

  // The whole world at once.
  // saveState into a buffer that already has the room, as a rollback loop
  // saves every frame (bpbench rollback's save_ms): a fresh one adds the
  // first touch of every page, which this machine's kernel charges about
  // 3 ms a MB whatever wrote it (docs/performance.md, "Cliffs").
  std::vector<std::byte> state;
  bp.saveState(state);
  time("saveState", Work::pairs, [&] { bp.saveState(state); });
  time("loadState", Work::pairs, [&] { bp.loadState(state); });
  time("shiftOrigin", Work::pairs, [&] { bp.shiftOrigin(bp::Vec3(1.0f, 0.0f, 0.0f)); });
  time("prepareRays (after the shift)", Work::world, [&] { bp.prepareRays(); });
  time("validate", Work::pairs, [&] { sink += bp.validate().size(); });
  // A diagnostic that sums the capacity of every array, the sweep's cells'
  // included: its work is the world's.
  time("memoryBytes", Work::world, [&] { sink += bp.memoryBytes(); });
  time("remove(span) of all but 3", Work::pairs, [&] {
    std::vector<bp::ProxyId> all;
    for (uint32_t i = 3; i < n; ++i) all.push_back(ids[i]);
    for (const bp::ProxyId d : doubles) all.push_back(d);
    bp.remove(all);
  });
  if (sink == 42) std::fputs("", stderr);
  return out;
}

// Every allocation from the heap, and freed memory kept there: a call's
// time is then its own work, not the first touch of pages the kernel maps
// afresh for each large allocation and unmaps at its free (about 3 ms a MB
// on these VMs, docs/performance.md, "Cliffs"), which at 4N landed on some
// calls and not others from run to run.
void keepFreedMemory() {
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
}

std::vector<Timing> run(bp::SceneKind kind, const BackendInfo& b, uint32_t n, const Options& o,
                        uint64_t& pairs) {
  Bytes bytes = runIsolated(
      [&](Bytes& out) {
        keepFreedMemory();
        Progress progress(
            std::string("cliffs ") + bp::sceneName(kind) + " " + b.name + " n=" + std::to_string(n),
            o.quiet);
        uint64_t pairs = 0;
        const std::vector<Timing> t =
            measureCalls(kind, structureOf(b), n, o.seed, progress, pairs);
        progress.finish();
        out.put(pairs);
        out.put<uint64_t>(t.size());
        for (const Timing& x : t) {
          out.putString(x.call);
          out.put(x.work);
          out.put(x.seconds);
        }
      },
      !o.noFork);
  pairs = bytes.get<uint64_t>();
  std::vector<Timing> t(bytes.get<uint64_t>());
  for (Timing& x : t) {
    x.call = bytes.getString();
    x.work = bytes.get<Work>();
    x.seconds = bytes.get<double>();
  }
  return t;
}

std::string formatTime(double seconds) {
  if (seconds >= 1.0) return formatFixed(seconds, 2) + " s";
  if (seconds >= 1e-3) return formatFixed(seconds * 1e3, 2) + " ms";
  if (seconds >= 1e-6) return formatFixed(seconds * 1e6, 2) + " us";
  return formatFixed(seconds * 1e9, 0) + " ns";
}

}  // namespace

int commandCliffs(const Options& o) {
  std::vector<Row> rows;
  uint32_t flagged = 0;
  const uint32_t n = o.ns[0];
  const double logGrowth = std::log(4.0 * n) / std::log(double(n));
  for (const bp::SceneKind kind : o.scenes) {
    for (const BackendInfo* b : o.backends) {
      uint64_t pairsSmall = 0, pairsLarge = 0;
      const std::vector<Timing> small = run(kind, *b, n, o, pairsSmall);
      const std::vector<Timing> large = run(kind, *b, 4 * n, o, pairsLarge);
      const double pairGrowth = double(4 * n + pairsLarge) / double(n + pairsSmall);
      for (size_t i = 0; i < small.size() && i < large.size(); ++i) {
        const Timing& a = small[i];
        const double growth = large[i].seconds / a.seconds;
        const double bound = (a.work == Work::one     ? 1.0
                              : a.work == Work::world ? 4.0
                                                      : pairGrowth) *
                             logGrowth;
        // A single call's data lies at random in arrays 4x larger at 4N:
        // cache and TLB misses alone grew such calls 3-5x here when they
        // take a few nanoseconds (setFilter 6 -> 35 ns on `uniform` 10^5)
        // and up to 3.4x when they take a few hundred (add(desc) 161 ->
        // 550 ns), so a single call is flagged past 3x only when it takes
        // 2 us at 4N: one that scans 4N proxies takes far longer.
        const bool cliff =
            a.work == Work::one ? growth > 3.0 && large[i].seconds >= 2e-6 : growth > 1.5 * bound;
        flagged += cliff;
        Row row;
        row.add("scene", bp::sceneName(kind))
            .add("backend", b->name)
            .add("call", a.call)
            .add("work", a.work == Work::one     ? "1"
                         : a.work == Work::world ? "N"
                                                 : "N+P")
            .add("n", uint64_t(n))
            .add("seconds_n", a.seconds, 9)
            .add("seconds_4n", large[i].seconds, 9)
            .add("growth", growth, 3)
            .add("n_log_n", bound, 3)
            .add("pairs_n", pairsSmall)
            .add("pairs_4n", pairsLarge)
            .add("flag", cliff ? "CLIFF" : "")
            .add("_n", formatTime(a.seconds))
            .add("_4n", formatTime(large[i].seconds))
            .add("_growth", formatFixed(growth, 2) + "x");
        rows.push_back(row);
      }
    }
  }
  printRows(rows, o.format,
            {{"scene", "scene"},
             {"backend", "backend"},
             {"call", "call"},
             {"work", "work"},
             {"_n", "at N"},
             {"_4n", "at 4N"},
             {"_growth", "growth"},
             {"flag", "flag"}},
            {"N = " + std::to_string(n) + ", one thread; a call's time (work 1: one call of " +
                 "1000 timed; N: the whole call).",
             "growth: time at 4N / time at N; n log n of the work: " + formatFixed(logGrowth, 2) +
                 "x for 1, " + formatFixed(4 * logGrowth, 2) +
                 "x for N, (4N + P(4N)) / (N + P(N)) times " + formatFixed(logGrowth, 2) +
                 "x for N+P (P: the pairs, in the csv).",
             "CLIFF: N and N+P above 1.5 x n log n; 1 above 3x and 2 us at 4N (a scan of "
             "the world grows 4x; cache misses alone grew calls under 1 us 3-5x)."});
  if (flagged) std::fprintf(stderr, "bpbench: %u calls grew faster than n log n\n", flagged);
  return 0;
}

}  // namespace bpbench
