// Broadphase layers: the pairs of every structure, through the facade, equal
// the brute-force oracle with the layer table applied (brute::findLayerPairs)
// on the standard scenes and on random operation sequences that change
// layers, motion types and the table; begun and ended follow; 1 and 2
// threads give the same lists. Layers that never collide produce no
// candidate in the structure (its pair count before the facade's filters);
// bad layers and tables are rejected and change nothing.
#include <broadphase/broad_phase.h>
#include <broadphase/testkit/brute_force.h>
#include <broadphase/testkit/scene.h>

#include "bvh/bvh.h"
#include "error_capture.h"
#include "sweep/sweep_grid.h"
#include "test_support.h"

#include <algorithm>
#include <random>

namespace bp {
namespace {

constexpr Structure kStructures[] = {Structure::sweep, Structure::bvh};

const char* nameOf(Structure s) { return s == Structure::bvh ? "bvh" : "sweep"; }

// A world as the oracle sees it: by proxy index.
struct LayerWorld {
  std::vector<Aabb> boxes;
  std::vector<uint8_t> isStatic, live, layers;
  std::vector<uint8_t> renewed;  // removed since the last update: its pairs end (and may begin)
  std::vector<ProxyId> handles;
  LayerTable table;

  uint32_t add(BroadPhase& bp, const Aabb& box, bool stat, uint32_t layer) {
    const ProxyId id = bp.add({.box = box,
                               .motion = stat ? MotionType::staticBody : MotionType::dynamic,
                               .layer = layer});
    const uint32_t i = id.index;
    if (i >= boxes.size()) {
      boxes.resize(i + 1);
      isStatic.resize(i + 1);
      live.resize(i + 1);
      layers.resize(i + 1);
      renewed.resize(i + 1);
      handles.resize(i + 1);
    }
    boxes[i] = box;
    isStatic[i] = stat;
    live[i] = 1;
    layers[i] = uint8_t(layer);
    handles[i] = id;
    return i;
  }
  void remove(BroadPhase& bp, uint32_t i) {
    bp.remove(handles[i]);
    live[i] = 0;
    renewed[i] = 1;
  }
  std::vector<Pair> expected() const {
    return brute::findLayerPairs(boxes, isStatic, live, layers, table);
  }
};

// The pairs of one update against the oracle, and the events against the
// difference of the oracle's sets (a pair of a proxy removed since, its
// index reused, ends and begins).
void checkFrame(const FramePairs& f, LayerWorld& w, std::vector<Pair>& last,
                const std::string& where) {
  const std::vector<Pair> expected = w.expected();
  std::vector<Pair> begun, ended;
  auto renewed = [&](const Pair& p) { return w.renewed[p.a] || w.renewed[p.b]; };
  for (const Pair& p : expected)
    if (renewed(p) || !std::binary_search(last.begin(), last.end(), p)) begun.push_back(p);
  for (const Pair& p : last)
    if (renewed(p) || !std::binary_search(expected.begin(), expected.end(), p)) ended.push_back(p);
  std::fill(w.renewed.begin(), w.renewed.end(), 0);
  last = expected;  // before the assertions: a failure does not cascade
  ASSERT_TRUE(test::samePairs(expected, test::indicesOf(f.pairs))) << where;
  ASSERT_TRUE(test::samePairs(begun, test::indicesOf(f.begun))) << where << " (begun)";
  ASSERT_TRUE(test::samePairs(ended, test::indicesOf(f.ended))) << where << " (ended)";
}

// A random symmetric table over `layers` layers.
LayerTable randomTable(std::mt19937& rng, uint32_t layers) {
  LayerTable t = LayerTable::none();
  for (uint32_t a = 0; a < layers; ++a)
    for (uint32_t b = a; b < layers; ++b) t.set(a, b, rng() % 3 != 0);
  return t;
}

Aabb randomBox(std::mt19937& rng, float side) {
  std::uniform_real_distribution<float> pos(0.0f, side), ext(0.2f, 2.0f);
  const Vec3 c(pos(rng), pos(rng), pos(rng));
  const Vec3 e(ext(rng), ext(rng), ext(rng));
  // One box in 50 is large enough for the sweep's overflow set.
  return rng() % 50 == 0 ? Aabb{c - 8.0f * e, c + 8.0f * e} : Aabb{c - e, c + e};
}

TEST(Layers, StandardScenesEqualTheOracle) {
  std::mt19937 rng(7);
  for (Structure structure : kStructures)
    for (int threads : {1, 2})
      for (SceneKind kind : kAllScenes) {
        Scene scene = makeScene(kind, 3000);
        BroadPhase bp({.structure = structure, .threads = threads, .layers = randomTable(rng, 5)});
        LayerWorld w;
        w.table = bp.layerTable();
        for (uint32_t i = 0; i < scene.n; ++i)
          w.add(bp, scene.boxes[i], scene.isStatic[i] != 0, (i * 7) % 5);
        std::vector<Pair> last;
        for (int frame = 0; frame < 6; ++frame) {
          const std::string where = std::string(nameOf(structure)) + " " + sceneName(kind) + " " +
                                    std::to_string(threads) + " threads, frame " +
                                    std::to_string(frame);
          if (frame > 0) {
            scene.step();
            for (uint32_t i = 0; i < scene.n; ++i)
              if (!scene.isStatic[i]) {
                bp.move(w.handles[i], scene.boxes[i]);
                w.boxes[i] = scene.boxes[i];
              }
          }
          if (frame == 3) {  // a table change between frames
            w.table = randomTable(rng, 5);
            bp.setLayerTable(w.table);
          }
          checkFrame(bp.update(), w, last, where);
          ASSERT_EQ(bp.validate(), "") << where;
        }
      }
}

// Random operations: add, remove, move, setLayer, setMotionType and table
// changes, checked after every update; the same sequence on 1 and 2
// threads gives the same lists.
TEST(Layers, RandomOperationsEqualTheOracle) {
  for (Structure structure : kStructures)
    for (uint32_t seed = 1; seed <= 4; ++seed) {
      std::vector<std::vector<ProxyPair>> frames[2];
      for (int t = 0; t < 2; ++t) {
        const int threads = t + 1;
        std::mt19937 rng(seed);
        const uint32_t layerCount = seed == 4 ? kMaxLayers : 4;
        BroadPhase bp({.structure = structure, .threads = threads});
        LayerWorld w;
        std::vector<Pair> last;
        const float side = 40.0f;
        for (int k = 0; k < 600; ++k)
          w.add(bp, randomBox(rng, side), rng() % 4 == 0, rng() % layerCount);
        for (int frame = 0; frame < 25; ++frame) {
          const int ops = 1 + int(rng() % 200);
          for (int op = 0; op < ops; ++op) {
            std::vector<uint32_t> liveIdx;
            for (uint32_t i = 0; i < w.live.size(); ++i)
              if (w.live[i]) liveIdx.push_back(i);
            const uint32_t i = liveIdx.empty() ? 0 : liveIdx[rng() % liveIdx.size()];
            switch (rng() % 10) {
              case 0: w.add(bp, randomBox(rng, side), rng() % 4 == 0, rng() % layerCount); break;
              case 1:
                if (liveIdx.empty()) break;
                w.remove(bp, i);
                break;
              case 2:
              case 3: {
                if (liveIdx.empty()) break;
                const uint32_t layer = rng() % layerCount;
                bp.setLayer(w.handles[i], layer);
                w.layers[i] = uint8_t(layer);
                break;
              }
              case 4: {
                if (liveIdx.empty()) break;
                const bool stat = rng() % 2 == 0;
                bp.setMotionType(w.handles[i], stat ? MotionType::staticBody : MotionType::dynamic);
                w.isStatic[i] = stat;
                break;
              }
              case 5:
                if (rng() % 8 == 0) {
                  w.table = rng() % 4 == 0 ? LayerTable{} : randomTable(rng, layerCount);
                  bp.setLayerTable(w.table);
                }
                break;
              default: {
                if (liveIdx.empty()) break;
                const Aabb box = rng() % 4 == 0 ? randomBox(rng, side)
                                                : Aabb{w.boxes[i].min + Vec3(0.3f, -0.2f, 0.1f),
                                                       w.boxes[i].max + Vec3(0.3f, -0.2f, 0.1f)};
                if (!isValid(box)) break;
                bp.move(w.handles[i], box);
                w.boxes[i] = box;
              }
            }
          }
          const FramePairs& f = bp.update();
          checkFrame(f, w, last,
                     std::string(nameOf(structure)) + " seed " + std::to_string(seed) + ", " +
                         std::to_string(threads) + " threads, frame " + std::to_string(frame));
          ASSERT_EQ(bp.validate(), "");
          frames[t].emplace_back(f.pairs.begin(), f.pairs.end());
        }
      }
      ASSERT_EQ(frames[0].size(), frames[1].size());
      for (size_t k = 0; k < frames[0].size(); ++k)
        ASSERT_TRUE(std::equal(
            frames[0][k].begin(), frames[0][k].end(), frames[1][k].begin(), frames[1][k].end(),
            [](const ProxyPair& a, const ProxyPair& b) {
              return a.key() == b.key() && a.userDataA == b.userDataA && a.userDataB == b.userDataB;
            }))
            << nameOf(structure) << " seed " << seed << " frame " << k;
    }
}

// A pile of boxes, all overlapping, in a layer that does not collide with
// itself: the structure hands the facade no candidate at all (streaming
// update: every pair it reports is counted before any filter), while the
// same pile in a self-colliding layer gives every pair.
TEST(Layers, PileInANonCollidingLayerYieldsNoCandidate) {
  for (Structure structure : kStructures) {
    LayerTable table;
    table.set(1, 1, false);
    BroadPhase bp({.structure = structure, .threads = 2, .layers = table});
    LayerWorld w;
    w.table = table;
    for (int k = 0; k < 300; ++k) {
      const Vec3 c(float(k % 7) * 0.01f, float(k % 5) * 0.01f, float(k % 3) * 0.01f);
      w.add(bp, Aabb{c - Vec3::Ones(), c + Vec3::Ones()}, false, 1);
    }
    const uint32_t floor = w.add(bp, Aabb{Vec3(-5, -5, -5), Vec3(5, -0.5f, 5)}, true, 0);
    std::vector<Pair> last;
    checkFrame(bp.update(), w, last, nameOf(structure));
    EXPECT_EQ(bp.lastPairs().pairs.size(), 300u) << nameOf(structure);  // each with the floor
    (void)floor;
    // The self pairs come back when the table lets layer 1 collide.
    w.table = LayerTable{};
    bp.setLayerTable(w.table);
    checkFrame(bp.update(), w, last, nameOf(structure));
    EXPECT_EQ(bp.lastPairs().begun.size(), 300u * 299u / 2u) << nameOf(structure);
    // And end again when it does not.
    w.table = table;
    bp.setLayerTable(w.table);
    checkFrame(bp.update(), w, last, nameOf(structure));
    EXPECT_EQ(bp.lastPairs().ended.size(), 300u * 299u / 2u) << nameOf(structure);
  }
}

// The structures on their own, the sweep with small cells and a low
// overflow threshold so that many boxes are overflow boxes (paired by
// querying the cells of every group, and with each other): findPairs equals
// the layer-aware oracle under several tables, on 1 and 2 threads.
template <class Structure>
void checkStructure(Structure& s, const char* name) {
  std::mt19937 rng(11);
  std::vector<Aabb> boxes;
  std::vector<uint8_t> isStatic, live, layers;
  std::vector<ProxyId> ids;
  for (int k = 0; k < 1500; ++k) {
    boxes.push_back(randomBox(rng, 60.0f));
    isStatic.push_back(rng() % 3 == 0);
    layers.push_back(uint8_t(rng() % 6));
    live.push_back(1);
    ids.push_back(s.add(boxes.back(), isStatic.back() != 0, layers.back()));
  }
  for (int round = 0; round < 6; ++round) {
    const LayerTable table = round == 0 ? LayerTable{} : randomTable(rng, 6);
    s.setLayerTable(table);
    for (int threads : {1, 2}) {
      Scheduler scheduler(threads);
      std::vector<Pair> got;
      s.findPairs(scheduler, got);
      ASSERT_TRUE(test::samePairs(brute::findLayerPairs(boxes, isStatic, live, layers, table), got))
          << name << " round " << round << ", " << threads << " threads";
      ASSERT_EQ(s.validate(), "") << name;
    }
    for (size_t i = 0; i < boxes.size(); ++i)
      if (!isStatic[i] && rng() % 2 == 0) {
        boxes[i] = randomBox(rng, 60.0f);
        s.move(ids[i], boxes[i]);
      }
  }
}

TEST(Layers, StructuresEqualTheOracle) {
  SweepGridConfig config;
  config.cellSize = 1.5f;
  config.cellStretchX = 1.0f;
  config.maxCellsPerProxy = 8;
  SweepGrid sweep(config);
  checkStructure(sweep, "sweep");
  EXPECT_GT(sweep.overflowCount(), 100u);
  Bvh bvh;
  checkStructure(bvh, "bvh");
}

TEST(Layers, ProxyDescKeepsTheLayer) {
  BroadPhase bp;
  const ProxyId id = bp.add({.box = Aabb{Vec3::Zero(), Vec3::Ones()}, .layer = 7});
  EXPECT_EQ(bp.desc(id).layer, 7u);
  bp.setLayer(id, 31);
  EXPECT_EQ(bp.desc(id).layer, 31u);
  bp.update();
  EXPECT_EQ(bp.desc(id).layer, 31u);
  EXPECT_EQ(bp.validate(), "");
}

TEST(Layers, BadLayersAndTablesAreRejectedAndChangeNothing) {
  BroadPhase bp;
  const ProxyId id = bp.add({.box = Aabb{Vec3::Zero(), Vec3::Ones()}, .layer = 3});
  const ProxyId bad = test::expectError(ErrorCode::invalidArgument, [&] {
    return bp.add({.box = Aabb{Vec3::Zero(), Vec3::Ones()}, .layer = kMaxLayers});
  });
  EXPECT_EQ(bad, ProxyId{});
  EXPECT_EQ(bp.proxyCount(), 1u);
  test::expectError(ErrorCode::invalidArgument, [&] { bp.setLayer(id, kMaxLayers); });
  EXPECT_EQ(bp.desc(id).layer, 3u);
  bp.remove(id);
  test::expectError(ErrorCode::staleHandle, [&] { bp.setLayer(id, 1); });

  LayerTable lopsided;
  lopsided.rows[2] &= ~(uint32_t(1) << 5);  // 2 does not collide with 5, but 5 with 2
  EXPECT_FALSE(lopsided.symmetric());
  LayerTable before;
  before.set(1, 1, false);
  bp.setLayerTable(before);
  test::expectError(ErrorCode::invalidArgument, [&] { bp.setLayerTable(lopsided); });
  EXPECT_EQ(bp.layerTable(), before);
  {
    test::ErrorCapture capture;
    BroadPhase fromConfig({.layers = lopsided});
    EXPECT_EQ(capture.unlessOnly(ErrorCode::invalidArgument), "");
    EXPECT_EQ(fromConfig.layerTable(), LayerTable{});
  }
  // The batch add validates every entry first.
  const ProxyDesc descs[2] = {{.box = Aabb{Vec3::Zero(), Vec3::Ones()}},
                              {.box = Aabb{Vec3::Zero(), Vec3::Ones()}, .layer = 99}};
  ProxyId out[2];
  test::expectError(ErrorCode::invalidArgument, [&] { bp.add(descs, out); });
  EXPECT_EQ(out[0], ProxyId{});
  EXPECT_EQ(bp.proxyCount(), 0u);
}

}  // namespace
}  // namespace bp
