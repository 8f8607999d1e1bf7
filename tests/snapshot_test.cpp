// BroadPhase::saveState / loadState: a run saved in the middle of a frame
// (changes pending), continued, then restored into the same object and into
// fresh ones (every structure, other thread counts) must repeat every later
// frame bit for bit: the handles add() returns, the queries before and after
// each update, the pairs, begun and ended lists with their user data, and
// the errors. Bytes that are truncated, flipped or inconsistent must be
// rejected with invalidState and leave the object as it was.
#include <broadphase/broad_phase.h>
#include <broadphase/testkit/scene.h>

#include "error_capture.h"
#include "facade/state_codec.h"
#include "test_support.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <functional>
#include <limits>
#include <source_location>
#include <string>
#include <vector>

namespace bp {
namespace {

using Bytes = std::vector<std::byte>;
// One frame of a run as numbers: everything it returned, in order.
using Transcript = std::vector<uint64_t>;

const Structure kStructures[] = {Structure::bvh, Structure::sweep, Structure::automatic};

const char* name(Structure s) {
  return s == Structure::bvh ? "bvh" : s == Structure::sweep ? "sweep" : "automatic";
}

uint64_t bits(float f) { return std::bit_cast<uint32_t>(f); }

// A scene driven through a BroadPhase with every kind of call: moves (batch
// and single), adds, removes (batch and single), filters, user data, motion
// and layer changes, adds removed or moved before their update, an origin
// shift, a layer table set before the save and put back after it, and a
// streaming update. Copyable: the copy taken at the save point replays the
// rest of the run.
struct Driver {
  Scene scene;
  std::vector<ProxyId> handle;    // per scene box; ProxyId{} while removed
  std::vector<ProxyId> extra;     // proxies of no scene box (the ties)
  std::vector<uint32_t> removed;  // scene boxes removed by the churn, not yet back
  SceneRng rng{7};
  Vec3 offset = Vec3::Zero();
  std::vector<Ray> rays;
  int frame = 0;

  Driver(SceneKind kind, uint32_t n) : scene(makeScene(kind, n)), rays(makeRays(n, 6)) {}

  uint32_t pick(uint32_t n) { return uint32_t(rng.next() % n); }
  Aabb boxOf(uint32_t j) const {
    return {scene.boxes[j].min - offset, scene.boxes[j].max - offset};
  }
  ProxyId addBox(BroadPhase& bp, uint32_t j, Transcript& t) {
    const ProxyId id =
        bp.add({.box = boxOf(j),
                .motion = scene.isStatic[j] ? MotionType::staticBody : MotionType::dynamic,
                .userData = uint64_t(j) * 1000 + uint64_t(frame),
                .layer = j % 3});
    t.push_back(id.index);
    t.push_back(id.generation);
    return id;
  }

  void init(BroadPhase& bp) {
    Transcript ignored;
    for (uint32_t j = 0; j < scene.n; ++j) handle.push_back(addBox(bp, j, ignored));
    // Six identical boxes: ties for nearest, castRayAll and castBox.
    const Vec3 c = 0.5f * scene.bounds;
    for (int k = 0; k < 6; ++k)
      extra.push_back(bp.add({.box = {c, c + Vec3(1, 1, 1)}, .userData = 900000u + k}));
  }

  // The calls of a frame before its update.
  void prepare(BroadPhase& bp, Transcript& t) {
    ++frame;
    scene.step();
    std::vector<ProxyId> ids;
    std::vector<Aabb> boxes;
    for (uint32_t j = 0; j < scene.n; ++j) {
      if (scene.isStatic[j] || handle[j] == ProxyId{}) continue;
      if (frame % 2 == 0) {
        ids.push_back(handle[j]);
        boxes.push_back(boxOf(j));
      } else if (pick(2) == 0) {
        bp.move(handle[j], boxOf(j));
      }
    }
    bp.move(ids, boxes);
    if (frame == 3) {
      const Vec3 delta(1.5f, -2.0f, 0.25f);
      bp.shiftOrigin(delta);
      offset += delta;
    }
    // Churn: removed boxes come back later, in random order, each with a
    // handle of its own (from the free list).
    // (Some frames add more than they remove: they reach into the free slots
    // of earlier frames.)
    const uint32_t removes = 4 + pick(6), adds = pick(14);
    for (uint32_t c = 0; c < removes; ++c) {
      const uint32_t j = pick(scene.n);
      if (handle[j] == ProxyId{}) continue;
      bp.remove(handle[j]);
      handle[j] = ProxyId{};
      removed.push_back(j);
    }
    for (uint32_t c = 0; c < adds && !removed.empty(); ++c) {
      const uint32_t at = pick(uint32_t(removed.size()));
      const uint32_t j = removed[at];
      removed.erase(removed.begin() + at);
      if (handle[j] == ProxyId{}) handle[j] = addBox(bp, j, t);
    }
    std::vector<ProxyId> batch;
    for (int c = 0; c < 3; ++c) {
      const uint32_t j = pick(scene.n);
      if (handle[j] == ProxyId{}) continue;
      batch.push_back(handle[j]);
      handle[j] = ProxyId{};
      removed.push_back(j);
    }
    bp.remove(batch);
    auto live = [&]() -> ProxyId {
      for (int tries = 0; tries < 16; ++tries) {
        const ProxyId id = handle[pick(scene.n)];
        if (!(id == ProxyId{})) return id;
      }
      return extra[0];
    };
    for (int c = 0; c < 3; ++c) bp.setUserData(live(), rng.next());
    for (int c = 0; c < 2; ++c) {
      const uint64_t masks[] = {~uint64_t(0), 1 | 2, 1 | 4, 2};
      bp.setFilter(live(), {.category = uint64_t(1) << pick(3), .mask = masks[pick(4)]});
    }
    for (int c = 0; c < 2; ++c) bp.setMotionType(live(), MotionType(pick(3)));
    for (int c = 0; c < 3; ++c) bp.setLayer(live(), pick(4));
    // Layer 1 does not collide with itself, nor 2 with 3, from frame 4 (the
    // save, at frame 5, carries the table) to frame 8.
    if (frame == 4 || frame == 8) {
      LayerTable table;
      if (frame == 4) {
        table.set(1, 1, false);
        table.set(2, 3, false);
      }
      bp.setLayerTable(table);
    }
    // An add moved before its update, one removed before it, a move then a
    // remove, and a motion change of a proxy then moved.
    const uint32_t j = pick(scene.n);
    if (handle[j] == ProxyId{}) {
      handle[j] = addBox(bp, j, t);
      bp.move(handle[j], boxOf((j + 1) % scene.n));
    }
    const uint32_t k = pick(scene.n);
    if (handle[k] == ProxyId{}) {
      bp.remove(addBox(bp, k, t));
    } else {
      bp.move(handle[k], boxOf((k + 2) % scene.n));
      bp.remove(handle[k]);
      handle[k] = ProxyId{};
      removed.push_back(k);
    }
    const ProxyId m = live();
    bp.setMotionType(m, bp.desc(m).motion == MotionType::staticBody ? MotionType::dynamic
                                                                    : MotionType::staticBody);
    bp.move(m, bp.desc(m).box);
  }

  // The queries, at any moment: the world of the last update.
  void query(const BroadPhase& bp, Transcript& t) const {
    std::vector<RayHit> all;
    std::vector<RayHit> batch(rays.size());
    bp.castRays(rays, batch);
    for (const RayHit& h : batch) t.insert(t.end(), {h.proxy, bits(h.t)});
    const Filter only2{.category = 2, .mask = ~uint64_t(0)};
    for (const Ray& r : rays) {
      const RayHit c = bp.castRay(r);
      const RayHit f = bp.castRay(r, RayQuery::closest, only2);
      t.insert(t.end(), {c.proxy, bits(c.t), f.proxy, bits(f.t)});
      t.push_back(bp.castRay(r, RayQuery::any).hit());
      bp.castRayAll(r, all);
      t.push_back(all.size());
      for (const RayHit& h : all) t.insert(t.end(), {h.proxy, bits(h.t)});
      const RayHit s = bp.castBox(Vec3(0.5f, 0.5f, 0.5f), r.origin, r.direction, r.maxT);
      t.insert(t.end(), {s.proxy, bits(s.t)});
    }
    const Vec3 tie = 0.5f * scene.bounds + Vec3(3, 0.5f, 0.5f);
    std::vector<Neighbour> near;
    for (const Vec3& p : {tie, Vec3(scene.bounds * 0.25f), Vec3(scene.bounds * 0.8f)}) {
      bp.nearest(p, 9, near);
      for (const Neighbour& nb : near) t.insert(t.end(), {nb.proxy, bits(nb.distanceSquared)});
      // The overlap queries visit in no particular order: compare the sets.
      std::vector<uint32_t> found;
      bp.queryBox({p - Vec3(4, 4, 4), p + Vec3(4, 4, 4)}, [&](uint32_t i) {
        found.push_back(i);
        return true;
      });
      bp.queryPoint(p, [&](uint32_t i) {
        found.push_back(~i);
        return true;
      });
      std::sort(found.begin(), found.end());
      t.push_back(found.size());
      t.insert(t.end(), found.begin(), found.end());
    }
  }

  // Queries, the update, queries.
  void finish(BroadPhase& bp, Transcript& t) const {
    query(bp, t);
    if (frame == 2) {
      std::atomic<uint64_t> count{0};
      bp.update([&](std::span<const ProxyPair> chunk) { count += chunk.size(); });
      t.push_back(count.load());
    } else {
      const FramePairs& f = bp.update();
      for (std::span<const ProxyPair> list : {f.pairs, f.begun, f.ended}) {
        t.push_back(list.size());
        for (const ProxyPair& p : list) t.insert(t.end(), {p.a, p.b, p.userDataA, p.userDataB});
      }
    }
    t.push_back(bp.proxyCount());
    query(bp, t);
  }
};

// The first frame whose transcripts differ, as a failure message.
::testing::AssertionResult sameFrames(const std::vector<Transcript>& want,
                                      const std::vector<Transcript>& got, int from) {
  for (size_t f = size_t(from); f < want.size(); ++f) {
    if (f >= got.size()) return ::testing::AssertionFailure() << "frame " << f << " missing";
    if (want[f] == got[f]) continue;
    size_t k = 0;
    while (k < want[f].size() && k < got[f].size() && want[f][k] == got[f][k]) ++k;
    return ::testing::AssertionFailure()
           << "frame " << f << " differs at word " << k << " of " << want[f].size() << " ("
           << (k < want[f].size() ? std::to_string(want[f][k]) : "end") << " expected, "
           << (k < got[f].size() ? std::to_string(got[f][k]) : "end") << " got)";
  }
  return ::testing::AssertionSuccess();
}

// A snapshot as `into` would write it: the header's structure byte is the
// saver's, so compare with that byte set (and the checksum redone).
Bytes asSavedBy(Bytes bytes, Structure s) {
  bytes[24] = std::byte(uint8_t(s));
  snapshot::seal(bytes);
  return bytes;
}

constexpr int kFrames = 10;
constexpr int kSaveAt = kFrames / 2;

// The run of `config`, saved before the update of frame kSaveAt; then the
// frames from there repeated after loading into the same object and into a
// fresh one of every structure, with another thread count.
void checkRollback(SceneKind kind, uint32_t n, const BroadPhaseConfig& config) {
  SCOPED_TRACE(std::string(sceneName(kind)) + " " + name(config.structure) + " threads " +
               std::to_string(config.threads));
  test::ErrorCapture capture;  // capacityExceeded frames return their fallback
  BroadPhase bp(config);
  Driver driver(kind, n);
  driver.init(bp);
  std::vector<Transcript> want(kFrames + 1);
  Bytes saved;
  Driver atSave = driver;
  for (int f = 1; f <= kFrames; ++f) {
    if (f == kSaveAt) {
      // The replays start after this part of the frame.
      Transcript before;
      driver.prepare(bp, before);
      bp.saveState(saved);
      atSave = driver;
    } else {
      driver.prepare(bp, want[f]);
    }
    driver.finish(bp, want[f]);
    want[f].push_back(capture.count());
  }
  for (const test::ReportedError& e : capture.errors())
    ASSERT_EQ(e.code, ErrorCode::capacityExceeded) << e.message;

  auto replay = [&](BroadPhase& target) {
    capture.clear();
    target.loadState(saved);
    EXPECT_EQ(capture.count(), 0u);
    EXPECT_EQ(target.validate(), "");
    Bytes again;
    target.saveState(again);
    EXPECT_TRUE(again == asSavedBy(saved, target.structure())) << "not a canonical round trip";
    std::vector<Transcript> got(kFrames + 1);
    Driver d = atSave;
    capture.clear();
    d.finish(target, got[kSaveAt]);
    got[kSaveAt].push_back(capture.count());
    for (int f = kSaveAt + 1; f <= kFrames; ++f) {
      d.prepare(target, got[f]);
      d.finish(target, got[f]);
      got[f].push_back(capture.count());
    }
    // (The capture counts are cumulative since the save in both runs.)
    EXPECT_TRUE(sameFrames(want, got, kSaveAt));
    EXPECT_EQ(target.validate(), "");
  };
  // The captured counts of the reference run are cumulative from its start:
  // make them count from the save point, as the replays do.
  const uint64_t before = kSaveAt > 1 ? want[kSaveAt - 1].back() : 0;
  for (int f = kSaveAt; f <= kFrames; ++f) want[f].back() -= before;

  {
    SCOPED_TRACE("into the same object");
    replay(bp);
  }
  for (Structure s : kStructures) {
    SCOPED_TRACE(std::string("into a fresh ") + name(s));
    BroadPhase fresh({.structure = s, .threads = config.threads == 1 ? 2 : 1});
    replay(fresh);
  }
}

TEST(Snapshot, RollbackRepeatsEveryFrameOnEverySceneStructureAndThreadCount) {
  for (SceneKind kind : kAllScenes)
    for (Structure s : kStructures)
      for (int threads : {1, 2}) checkRollback(kind, 1500, {.structure = s, .threads = threads});
}

// maxPairs (some frames fail) and pairKinematicKinematic travel with the
// snapshot: the fresh objects are built with the defaults.
TEST(Snapshot, MaxPairsAndKinematicPairsAreRestored) {
  // The pair counts of the plain run, to put the bound among them.
  BroadPhase probe({.structure = Structure::sweep, .threads = 1});
  Driver d(SceneKind::uniform, 1500);
  d.init(probe);
  std::vector<uint64_t> counts;
  for (int f = 1; f <= kFrames; ++f) {
    Transcript t;
    d.prepare(probe, t);
    if (f != 2)
      counts.push_back(probe.update().pairs.size());
    else
      probe.update();
  }
  std::sort(counts.begin(), counts.end());
  for (Structure s : kStructures)
    checkRollback(SceneKind::uniform, 1500,
                  {.structure = s,
                   .threads = 2,
                   .pairKinematicKinematic = true,
                   .maxPairs = counts[counts.size() / 2]});
}

// --- Rejected snapshots ----------------------------------------------------------

// A small world with something in every section: a layer table, filters,
// layers, pending moves, adds, removes, a motion and a layer change, user
// data changed since the update (overrides), pairs, begun and ended pairs,
// renewed slots.
Bytes smallSnapshot(Structure s = Structure::sweep) {
  BroadPhase bp({.structure = s, .threads = 1});
  std::vector<ProxyId> ids;
  for (int k = 0; k < 24; ++k) {
    const Vec3 lo(float(k % 6), float(k / 6), 0);
    ids.push_back(bp.add({.box = {lo, lo + Vec3(1.5f, 1.5f, 1)}, .userData = uint64_t(k)}));
  }
  bp.setFilter(ids[3], {.category = 2, .mask = 1});
  LayerTable table;
  table.set(1, 1, false);
  bp.setLayerTable(table);
  bp.setLayer(ids[12], 1);
  bp.setLayer(ids[13], 1);
  bp.update();
  bp.move(ids[0], {Vec3(4.2f, 3.2f, 0.2f), Vec3(4.4f, 3.4f, 0.4f)});  // new pairs
  bp.remove(ids[5]);
  bp.update();
  bp.move(ids[1], {Vec3(0, 0, 5), Vec3(1, 1, 6)});
  bp.remove(ids[2]);
  bp.remove(ids[7]);
  bp.add({.box = {Vec3(2, 2, 0), Vec3(3, 3, 1)}, .userData = 77});
  bp.setUserData(ids[8], 1234);
  bp.setMotionType(ids[9], MotionType::staticBody);
  bp.setLayer(ids[10], 31);
  Bytes out;
  bp.saveState(out);
  return out;
}

// Another world, the object every rejected load must leave alone.
struct Target {
  BroadPhase bp{{.structure = Structure::bvh, .threads = 1}};
  Bytes before;
  Target() {
    for (int k = 0; k < 10; ++k)
      bp.add({.box = {Vec3(float(k), 0, 0), Vec3(float(k) + 1.5f, 1, 1)}, .userData = 5});
    bp.update();
    bp.move(bp.handleOf(0), {Vec3(0, 0, 3), Vec3(1, 1, 4)});
    bp.saveState(before);
  }
  // Loading `bytes` must be rejected with invalidState (its message
  // containing `why`, when given) and change nothing.
  void expectRejected(const Bytes& bytes, const std::string& why = {},
                      std::source_location where = std::source_location::current()) {
    test::ErrorCapture capture;
    bp.loadState(bytes);
    const std::vector<test::ReportedError> errors = capture.errors();
    if (errors.size() != 1 || errors[0].code != ErrorCode::invalidState) {
      ADD_FAILURE_AT(where.file_name(), int(where.line()))
          << "expected one invalidState, got " << errors.size() << " reports"
          << (errors.empty() ? "" : ": " + errors[0].message);
      return;
    }
    if (!why.empty() && errors[0].message.find(why) == std::string::npos)
      ADD_FAILURE_AT(where.file_name(), int(where.line()))
          << "message '" << errors[0].message << "' does not mention '" << why << "'";
    Bytes after;
    bp.saveState(after);
    if (after != before)
      ADD_FAILURE_AT(where.file_name(), int(where.line())) << "the object changed";
    if (!bp.validate().empty())
      ADD_FAILURE_AT(where.file_name(), int(where.line())) << bp.validate();
  }
};

TEST(Snapshot, EveryTruncationAndExtensionIsRejected) {
  const Bytes snap = smallSnapshot();
  Target target;
  for (size_t len = 0; len < snap.size(); ++len)
    target.expectRejected(Bytes(snap.begin(), snap.begin() + long(len)));
  Bytes longer = snap;
  longer.push_back(std::byte{0});
  target.expectRejected(longer, "given");
}

TEST(Snapshot, EveryFlippedByteIsRejected) {
  const Bytes snap = smallSnapshot();
  Target target;
  SceneRng rng(3);
  for (size_t k = 0; k < snap.size(); ++k) {
    Bytes bad = snap;
    bad[k] ^= std::byte(uint8_t(1u << (rng.next() % 8)));
    target.expectRejected(bad);
    bad = snap;
    bad[k] ^= std::byte{0xFF};
    target.expectRejected(bad);
  }
}

// Snapshots with a valid checksum but one thing wrong.
TEST(Snapshot, InconsistentContentsAreRejected) {
  const Bytes snap = smallSnapshot();
  const snapshot::Header h = snapshot::readHeader(snap.data());
  const snapshot::Layout l = snapshot::layoutOf(h);
  ASSERT_GT(h.freeCount, 1u);
  ASSERT_GT(h.filterCount, 0u);
  ASSERT_GT(h.structureBoxCount, 0u);
  ASSERT_GT(h.renewedCount, 0u);
  ASSERT_GT(h.pairCount, 2u);
  ASSERT_GT(h.overrideCount, 0u);
  ASSERT_GT(h.begunCount, 0u);
  ASSERT_GT(h.endedCount, 1u);
  ASSERT_EQ(h.layerCount, 3u);
  Target target;
  auto u32 = [](Bytes& b, uint64_t at, uint32_t v) { snapshot::store<uint32_t>(b.data() + at, v); };
  auto u64 = [](Bytes& b, uint64_t at, uint64_t v) { snapshot::store<uint64_t>(b.data() + at, v); };
  auto get32 = [&](uint64_t at) { return snapshot::load<uint32_t>(snap.data() + at); };
  struct Case {
    const char* why;
    std::function<void(Bytes&)> change;
    bool seal = true;
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Case cases[] = {
      {"bad magic", [&](Bytes& b) { b[0] = std::byte{'X'}; }},
      {"format version 3", [&](Bytes& b) { u32(b, 4, 3); }},
      {"format version 1", [&](Bytes& b) { u32(b, 4, 1); }},
      {"header says", [&](Bytes& b) { u64(b, 8, b.size() + 8); }},
      {"checksum", [&](Bytes& b) { b[200] ^= std::byte{1}; }, false},
      {"unknown structure", [&](Bytes& b) { b[24] = std::byte{3}; }},
      {"pairKinematicKinematic", [&](Bytes& b) { b[25] = std::byte{2}; }},
      {"without a double section", [&](Bytes& b) { b[60] = std::byte{1}; }},
      {"doubleWorld is 2", [&](Bytes& b) { b[26] = std::byte{2}; }},
      {"no room for the double section", [&](Bytes& b) { b[26] = std::byte{1}; }},
      {"free slots in a pool", [&](Bytes& b) { u32(b, 44, h.capacity + 1); }},
      {"add up", [&](Bytes& b) { u32(b, 40, h.capacity + 1); }},
      {"add up", [&](Bytes& b) { u64(b, 64, h.pairCount - 1); }},
      {"exceeds", [&](Bytes& b) { u64(b, 88, uint64_t(1) << 62); }},
      {"out of range", [&](Bytes& b) { u32(b, l.renewed, h.capacity); }},
      {"twice", [&](Bytes& b) { u32(b, l.freeList + 4, get32(l.freeList)); }},
      {"names slot", [&](Bytes& b) { u32(b, l.freeList, h.capacity + 5); }},
      {"NaN or infinite",
       [&](Bytes& b) { snapshot::store(b.data() + l.boxes, std::bit_cast<uint32_t>(nan)); }},
      {"min > max",
       [&](Bytes& b) { snapshot::store(b.data() + l.boxes, std::bit_cast<uint32_t>(1e6f)); }},
      {"structure box: the same",
       [&](Bytes& b) {
         // The first flagged proxy's structure box becomes its own box.
         uint64_t box = l.boxes;
         for (uint64_t k = 0; k < l.filters - l.flags; ++k, box += 24)
           if (uint8_t(b[l.flags + k]) & snapshot::kFlagStructureBox) break;
         std::memcpy(b.data() + l.structureBoxes, b.data() + box, 24);
       }},
      {"not symmetric",
       [&](Bytes& b) { u32(b, l.layerTable + 4 * 2, get32(l.layerTable + 4 * 2) ^ 1u << 5); }},
      {"4 layers, the header", [&](Bytes& b) { b[l.flags] ^= std::byte{snapshot::kFlagLayer}; }},
      {"layer 0 listed", [&](Bytes& b) { b[l.layers] = std::byte{0}; }},
      {"layer 32 listed", [&](Bytes& b) { b[l.layers + 2] = std::byte{32}; }},
      {"motion type 3", [&](Bytes& b) { b[l.flags] |= std::byte{3}; }},
      {"flags name", [&](Bytes& b) { b[l.flags] ^= std::byte{snapshot::kFlagFilter}; }},
      {"rehomed but not pending",
       [&](Bytes& b) {
         b[l.flags] = (b[l.flags] & std::byte{3}) | std::byte{snapshot::kFlagRehome};
       }},
      {"default filter",
       [&](Bytes& b) {
         u64(b, l.filters, 1);
         u64(b, l.filters + 8, ~uint64_t(0));
       }},
      {"not ascending", [&](Bytes& b) { u32(b, l.renewed + 4 * (h.renewedCount - 1), 0); }},
      {"not a < b",
       [&](Bytes& b) {
         const uint32_t a = get32(l.pairs), bb = get32(l.pairs + 4);
         u32(b, l.pairs, bb);
         u32(b, l.pairs + 4, a);
       }},
      {"ascending order",
       [&](Bytes& b) { std::memcpy(b.data() + l.pairs + 8, b.data() + l.pairs, 8); }},
      {"not in the last frame",
       [&](Bytes& b) {
         // A pair with a free, not renewed slot: a slot freed before the
         // last update.
         u32(b, l.pairs, 0);
         u32(b, l.pairs + 4, get32(l.freeList));  // slot 5, freed before the update
       }},
      {"overrides nothing",
       [&](Bytes& b) {
         const uint64_t key = snapshot::load<uint64_t>(b.data() + l.overrides);
         const uint64_t pair = key >> 1;
         const uint32_t end = get32(l.pairs + 8 * pair + 4 * (key & 1));
         // What the pair end gets without the override: the proxy's own
         // user data, or 0 for a free slot.
         auto isFree = [&](uint32_t i) {
           for (uint32_t f = 0; f < h.freeCount; ++f)
             if (get32(l.freeList + 4 * f) == i) return true;
           return false;
         };
         uint64_t index = 0;
         for (uint32_t i = 0; i < end; ++i) index += !isFree(i);
         u64(b, l.overrides + 8,
             isFree(end) ? 0 : snapshot::load<uint64_t>(b.data() + l.userData + 8 * index));
       }},
      {"override 0 is out of range", [&](Bytes& b) { u64(b, l.overrides, h.pairCount << 1); }},
      {"begun entry 0", [&](Bytes& b) { u64(b, l.begun, h.pairCount); }},
      {"ended pair 1",
       [&](Bytes& b) { std::memcpy(b.data() + l.ended + 24, b.data() + l.ended, 24); }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.why);
    Bytes bad = snap;
    c.change(bad);
    if (c.seal) snapshot::seal(bad);
    target.expectRejected(bad, c.why);
  }
  // The fixture's assumption: slot 5 is free and not renewed.
  EXPECT_EQ(get32(l.freeList), 5u);
}

// Random damage with the checksum redone: a snapshot either is rejected with
// the object unchanged, or loads into a valid object whose own snapshot is
// the same bytes and which runs on.
TEST(Snapshot, SealedRandomDamageIsRejectedOrLoadsCanonically) {
  const Bytes snap = smallSnapshot();
  SceneRng rng(11);
  int loaded = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    Bytes bad = snap;
    const int changes = 1 + int(rng.next() % 3);
    for (int c = 0; c < changes; ++c) {
      const size_t at = snapshot::kChecksummedFrom + rng.next() % (bad.size() - 24);
      bad[at] = (rng.next() % 2) ? std::byte(uint8_t(rng.next())) : bad[at] ^ std::byte{1};
    }
    snapshot::seal(bad);
    Target target;
    test::ErrorCapture capture;
    target.bp.loadState(bad);
    if (capture.count() != 0) {
      ASSERT_EQ(capture.errors()[0].code, ErrorCode::invalidState);
      Bytes after;
      target.bp.saveState(after);
      ASSERT_TRUE(after == target.before) << "trial " << trial << ": the object changed";
      continue;
    }
    ++loaded;
    ASSERT_EQ(target.bp.validate(), "") << "trial " << trial;
    Bytes again;
    target.bp.saveState(again);
    ASSERT_TRUE(again == asSavedBy(bad, target.bp.structure())) << "trial " << trial;
    capture.clear();
    target.bp.update();
    for (const test::ReportedError& e : capture.errors())
      ASSERT_EQ(e.code, ErrorCode::capacityExceeded) << e.message;
    ASSERT_EQ(target.bp.validate(), "") << "trial " << trial;
  }
  EXPECT_GT(loaded, 0);  // some damage (a user data, a coordinate) makes another valid world
}

TEST(Snapshot, SavingOverwritesAndAnEmptyWorldRoundTrips) {
  BroadPhase empty;
  Bytes bytes(5, std::byte{1});
  empty.saveState(bytes);
  EXPECT_EQ(bytes.size(), snapshot::kHeaderBytes + snapshot::kLayerTableBytes);
  BroadPhase other({.structure = Structure::bvh});
  other.add({.box = {Vec3(0, 0, 0), Vec3(1, 1, 1)}});
  other.loadState(bytes);
  EXPECT_EQ(other.proxyCount(), 0u);
  EXPECT_EQ(other.validate(), "");
  // A fresh pool's first handle comes from the snapshot's salt.
  const ProxyId a = empty.add({.box = {Vec3(0, 0, 0), Vec3(1, 1, 1)}});
  const ProxyId b = other.add({.box = {Vec3(0, 0, 0), Vec3(1, 1, 1)}});
  EXPECT_EQ(a, b);
}

// A frame's first batch is listed without its proxies' marks: a snapshot
// taken right after it must still hold those moves as pending.
TEST(Snapshot, AFirstBatchSavedBeforeItsUpdateIsPending) {
  const Scene scene = makeScene(SceneKind::uniform, 20000);
  for (int threads : {1, 2}) {
    BroadPhase bp({.structure = Structure::automatic, .threads = threads});
    std::vector<ProxyId> ids;
    std::vector<Aabb> moved;
    for (uint32_t i = 0; i < scene.n; ++i) {
      ids.push_back(bp.add({scene.boxes[i], MotionType::dynamic, {}, i}));
      moved.push_back({scene.boxes[i].min - Vec3(1.5f, 0, 0), scene.boxes[i].max});
    }
    bp.update();
    bp.move(ids, moved);
    Bytes saved;
    bp.saveState(saved);
    BroadPhase fresh({.structure = Structure::sweep, .threads = 3 - threads});
    fresh.loadState(saved);
    ASSERT_EQ(fresh.validate(), "");
    const FramePairs& want = bp.update();
    const FramePairs& got = fresh.update();
    ASSERT_FALSE(want.begun.empty());
    auto words = [](std::span<const ProxyPair> pairs) {
      std::vector<uint64_t> out;
      for (const ProxyPair& p : pairs) out.insert(out.end(), {p.key(), p.userDataA, p.userDataB});
      return out;
    };
    EXPECT_EQ(words(got.pairs), words(want.pairs)) << "threads " << threads;
    EXPECT_EQ(words(got.begun), words(want.begun)) << "threads " << threads;
    EXPECT_EQ(words(got.ended), words(want.ended)) << "threads " << threads;
  }
}

TEST(Snapshot, HandlesOfTheSavedWorldStayValid) {
  const Bytes snap = smallSnapshot(Structure::bvh);
  BroadPhase restored({.structure = Structure::sweep, .threads = 2});
  restored.loadState(snap);
  BroadPhase again({.structure = Structure::bvh, .threads = 1});
  again.loadState(snap);
  test::ErrorCapture capture;  // handleOf() of a free index reports, returns ProxyId{}
  for (uint32_t i = 0; i < 25; ++i) {
    ASSERT_EQ(restored.contains(again.handleOf(i)), again.contains(again.handleOf(i)));
    if (!again.contains(again.handleOf(i))) continue;
    EXPECT_EQ(restored.desc(again.handleOf(i)).userData, again.desc(again.handleOf(i)).userData);
  }
  // The lists of the last frame come back too.
  EXPECT_EQ(restored.lastPairs().pairs.size(), again.lastPairs().pairs.size());
  EXPECT_GT(restored.lastPairs().ended.size(), 0u);
}

// --- Double proxies and a shifted origin (docs/large_worlds.md). ---

uint64_t bits(double d) { return std::bit_cast<uint64_t>(d); }

const DVec3 kBase{1e9, -2e9, 5e8};  // the world's region, far from the zero of float

// A run mixing double proxies (DAabbs around kBase, coordinates no float
// holds) and float proxies, with origin shifts (the first puts the float
// frame at kBase), moves single and batched, adds, removes and motion
// changes of both kinds. Copyable like Driver.
struct DoubleDriver {
  SceneRng rng{19};
  std::vector<ProxyId> doubles, floats;
  Vec3 offset = Vec3::Zero();  // the shifts after the first
  int frame = 0;

  double uniform() { return double(rng.next() >> 11) * 0x1p-53; }
  DAabb dbox() {
    const DVec3 lo{kBase.x + 60 * uniform(), kBase.y + 60 * uniform(), kBase.z + 20 * uniform()};
    return {lo, lo + DVec3{0.5 + 3 * uniform(), 0.5 + 3 * uniform(), 0.5 + 3 * uniform()}};
  }
  Aabb fbox() {
    const Vec3 lo(60 * rng.uniform(), 60 * rng.uniform(), 20 * rng.uniform());
    return {lo - offset, lo - offset + Vec3(1 + 2 * rng.uniform(), 1 + 2 * rng.uniform(), 2)};
  }
  MotionType motion() { return MotionType(rng.next() % 3); }
  void addOne(BroadPhase& bp, bool isDouble, Transcript& t) {
    const ProxyId id = isDouble
                           ? bp.add({.box = dbox(), .motion = motion(), .userData = rng.next()})
                           : bp.add({.box = fbox(), .motion = motion(), .userData = rng.next()});
    t.insert(t.end(), {id.index, id.generation});
    (isDouble ? doubles : floats).push_back(id);
  }
  void init(BroadPhase& bp) {
    bp.shiftOrigin(Vec3(float(kBase.x), float(kBase.y), float(kBase.z)));
    Transcript ignored;
    for (int k = 0; k < 120; ++k) addOne(bp, k % 2 == 0, ignored);
  }
  void prepare(BroadPhase& bp, Transcript& t) {
    ++frame;
    if (frame % 4 == 1) {
      const Vec3 delta(3.5f, -1.25f, 2.0f);
      bp.shiftOrigin(delta);
      offset += delta;
    }
    std::vector<ProxyId> ids;
    std::vector<DAabb> boxes;
    for (const ProxyId id : doubles) {
      const uint64_t r = rng.next() % 4;
      if (r == 0) bp.move(id, dbox());
      if (r == 1) {
        ids.push_back(id);
        boxes.push_back(dbox());
      }
    }
    bp.move(ids, boxes);
    for (const ProxyId id : floats)
      if (rng.next() % 3 == 0) bp.move(id, fbox());
    for (int c = 0; c < 4; ++c) {
      std::vector<ProxyId>& from = (rng.next() % 2) ? doubles : floats;
      const size_t k = rng.next() % from.size();
      bp.remove(from[k]);
      from.erase(from.begin() + long(k));
    }
    for (int c = 0; c < 4; ++c) addOne(bp, c % 2 == 0, t);
    // A double add moved before its update, a motion change then a move.
    bp.move(doubles.back(), dbox());
    const ProxyId m = doubles[rng.next() % doubles.size()];
    bp.setMotionType(m, motion());
    bp.move(m, dbox());
    bp.setMotionType(floats[rng.next() % floats.size()], motion());
  }
  void query(const BroadPhase& bp, Transcript& t) const {
    SceneRng q(5);
    std::vector<DRayHit> all;
    std::vector<DNeighbour> near;
    for (int k = 0; k < 6; ++k) {
      const DVec3 at{kBase.x - 5 + 10 * q.uniform(), kBase.y + 60 * q.uniform(),
                     kBase.z + 20 * q.uniform()};
      const DVec3 dir{1, 0.1 * q.uniform(), -0.05 * q.uniform()};
      const DRayHit c = bp.castRay(at, dir, 80.0);
      t.insert(t.end(), {c.proxy, bits(c.t)});
      bp.castRayAll(at, dir, 80.0, all);
      t.push_back(all.size());
      for (const DRayHit& h : all) t.insert(t.end(), {h.proxy, bits(h.t)});
      const DVec3 p{at.x + 30, at.y, at.z};
      bp.nearest(p, 5, near);
      for (const DNeighbour& nb : near) t.insert(t.end(), {nb.proxy, bits(nb.distanceSquared)});
      std::vector<uint32_t> found;
      bp.queryBox({p - DVec3{6, 6, 6}, p + DVec3{6, 6, 6}}, [&](uint32_t i) {
        found.push_back(i);
        return true;
      });
      std::sort(found.begin(), found.end());
      t.push_back(found.size());
      t.insert(t.end(), found.begin(), found.end());
    }
    // worldBox reads the pending DAabbs.
    for (const ProxyId id : doubles) {
      const DAabb w = bp.worldBox(id);
      t.insert(t.end(), {bits(w.min.x), bits(w.min.y), bits(w.min.z), bits(w.max.x), bits(w.max.y),
                         bits(w.max.z)});
    }
    const DVec3 o = bp.origin();
    t.insert(t.end(), {bits(o.x), bits(o.y), bits(o.z)});
  }
  void finish(BroadPhase& bp, Transcript& t) const {
    query(bp, t);
    const FramePairs& f = bp.update();
    for (std::span<const ProxyPair> list : {f.pairs, f.begun, f.ended}) {
      t.push_back(list.size());
      for (const ProxyPair& p : list) t.insert(t.end(), {p.a, p.b, p.userDataA, p.userDataB});
    }
    query(bp, t);
  }
};

TEST(Snapshot, DoubleProxiesAndTheOriginAreRestored) {
  for (Structure s : kStructures) {
    SCOPED_TRACE(name(s));
    test::ErrorCapture capture;
    BroadPhase bp({.structure = s, .threads = 1});
    DoubleDriver driver;
    driver.init(bp);
    std::vector<Transcript> want(kFrames + 1);
    Bytes saved;
    DoubleDriver atSave = driver;
    for (int f = 1; f <= kFrames; ++f) {
      Transcript ignored;
      driver.prepare(bp, f == kSaveAt ? ignored : want[f]);
      if (f == kSaveAt) {
        bp.saveState(saved);
        atSave = driver;
      }
      driver.finish(bp, want[f]);
    }
    ASSERT_EQ(capture.count(), 0u) << capture.errors()[0].message;
    const snapshot::Header h = snapshot::readHeader(saved.data());
    EXPECT_EQ(h.doubleWorld, 1);
    EXPECT_GT(h.doubleCount, 50u);
    EXPECT_GT(snapshot::load<uint64_t>(saved.data() + snapshot::layoutOf(h).doubles + 24), 0u)
        << "no pending double box saved";
    auto replay = [&](BroadPhase& target) {
      target.loadState(saved);
      ASSERT_EQ(capture.count(), 0u) << capture.errors()[0].message;
      EXPECT_EQ(target.validate(), "");
      Bytes again;
      target.saveState(again);
      EXPECT_TRUE(again == asSavedBy(saved, target.structure())) << "not a canonical round trip";
      std::vector<Transcript> got(kFrames + 1);
      DoubleDriver d = atSave;
      d.finish(target, got[kSaveAt]);
      for (int f = kSaveAt + 1; f <= kFrames; ++f) {
        d.prepare(target, got[f]);
        d.finish(target, got[f]);
      }
      EXPECT_TRUE(sameFrames(want, got, kSaveAt));
      EXPECT_EQ(capture.count(), 0u);
    };
    {
      SCOPED_TRACE("into the same object");
      replay(bp);
    }
    for (Structure into : kStructures) {
      SCOPED_TRACE(std::string("into a fresh ") + name(into));
      BroadPhase fresh({.structure = into, .threads = 2});
      replay(fresh);
    }
  }
}

// Loading a float-only snapshot clears the double state of the loading object.
TEST(Snapshot, AFloatSnapshotClearsTheOriginAndDoubleProxies) {
  const Bytes floatOnly = smallSnapshot();
  EXPECT_EQ(snapshot::readHeader(floatOnly.data()).doubleWorld, 0);
  BroadPhase bp({.structure = Structure::sweep, .threads = 1});
  bp.shiftOrigin(Vec3(1e9f, 0, 0));
  (void)bp.add(DProxyDesc{.box = {{1e9 + 0.1, 0, 0}, {1e9 + 1.3, 1, 1}}});
  bp.loadState(floatOnly);
  EXPECT_EQ(bp.validate(), "");
  EXPECT_TRUE(bp.origin() == DVec3{});
  Bytes again;
  bp.saveState(again);
  EXPECT_TRUE(again == asSavedBy(floatOnly, Structure::sweep));
}

// A small world with double proxies: in the structure with a move pending,
// settled, a pending add; and float proxies; around a shifted origin.
Bytes doubleSnapshot() {
  BroadPhase bp({.structure = Structure::bvh, .threads = 1});
  bp.shiftOrigin(Vec3(1e9f, 0, -3e8f));
  std::vector<ProxyId> ids;
  for (int k = 0; k < 6; ++k) {
    const DVec3 lo{1e9 + 1.1 * k + 1e-6, 0.3 * k, -3e8 + 0.7};
    ids.push_back(bp.add(DProxyDesc{.box = {lo, lo + DVec3{1.5, 1.5, 1.5}}, .userData = 10u + k}));
  }
  bp.add({.box = {Vec3(1, 0, 0), Vec3(2, 1, 1)}, .userData = 3});
  bp.update();
  bp.move(ids[1], DAabb{{1e9 + 4.05, 0, -3e8}, {1e9 + 5.5, 1, -3e8 + 1}});
  bp.move(ids[4], DAabb{{1e9 + 0.05, 2, -3e8}, {1e9 + 0.5, 3, -3e8 + 1}});
  (void)bp.add(DProxyDesc{.box = {{1e9 + 7.25, 0, -3e8}, {1e9 + 8.5, 1, -3e8 + 1}}});
  bp.remove(ids[2]);
  Bytes out;
  bp.saveState(out);
  return out;
}

TEST(Snapshot, CorruptDoubleSectionsAreRejected) {
  const Bytes snap = doubleSnapshot();
  const snapshot::Header h = snapshot::readHeader(snap.data());
  ASSERT_EQ(h.doubleWorld, 1);
  ASSERT_EQ(h.doubleCount, 6u);  // 5 of the first 6, the pending add
  const uint64_t at = snapshot::layoutOf(h).doubles;
  const uint64_t pendingCount = snapshot::load<uint64_t>(snap.data() + at + 24);
  ASSERT_EQ(pendingCount, 2u);
  const uint64_t doubles = at + 32, pending = doubles + 52 * h.doubleCount;
  Target target;
  {  // Loads as saved, and the flipped bytes and truncations of the double section fail.
    BroadPhase ok({.structure = Structure::sweep, .threads = 1});
    test::ErrorCapture capture;
    ok.loadState(snap);
    EXPECT_EQ(capture.count(), 0u);
    EXPECT_EQ(ok.validate(), "");
    for (uint64_t k = at; k < snap.size(); ++k) {
      Bytes bad = snap;
      bad[k] ^= std::byte{0x10};
      target.expectRejected(bad);
      target.expectRejected(Bytes(snap.begin(), snap.begin() + long(k)));
    }
  }
  auto f64 = [](Bytes& b, uint64_t pos, double v) { snapshot::store(b.data() + pos, bits(v)); };
  auto get64 = [&](uint64_t pos) {
    return std::bit_cast<double>(snapshot::load<uint64_t>(snap.data() + pos));
  };
  auto u32 = [](Bytes& b, uint64_t pos, uint32_t v) {
    snapshot::store<uint32_t>(b.data() + pos, v);
  };
  const uint32_t firstFree = snapshot::load<uint32_t>(snap.data() + snapshot::layoutOf(h).freeList);
  struct Case {
    const char* why;
    std::function<void(Bytes&)> change;
  };
  const Case cases[] = {
      {"not finite", [&](Bytes& b) { f64(b, at, std::numeric_limits<double>::infinity()); }},
      {"not finite", [&](Bytes& b) { f64(b, at + 8, std::numeric_limits<double>::quiet_NaN()); }},
      {"not a live proxy", [&](Bytes& b) { u32(b, doubles + 52, firstFree); }},
      {"not a live proxy",
       [&](Bytes& b) { std::memcpy(b.data() + doubles + 52, b.data() + doubles, 4); }},
      {"not a live proxy", [&](Bytes& b) { u32(b, doubles, h.capacity); }},
      {"double proxy 0", [&](Bytes& b) { f64(b, doubles + 4, get64(doubles + 4 + 24) + 1); }},
      {"double proxy 0",
       [&](Bytes& b) { f64(b, doubles + 4, std::numeric_limits<double>::quiet_NaN()); }},
      {"the box queries see",
       // The applied box of the proxy with a pending one listed (ids[1]).
       [&](Bytes& b) { f64(b, doubles + 52 + 4 + 24, get64(doubles + 52 + 4 + 24) + 0.5); }},
      {"its box is not its pending DAabb",
       [&](Bytes& b) { f64(b, pending + 4 + 24, get64(pending + 4 + 24) + 0.5); }},
      {"the same as its applied box",
       [&](Bytes& b) {
         const uint32_t i = snapshot::load<uint32_t>(snap.data() + pending);
         for (uint64_t e = doubles; e < pending; e += 52)
           if (snapshot::load<uint32_t>(snap.data() + e) == i)
             std::memcpy(b.data() + pending + 4, b.data() + e + 4, 48);
       }},
      {"not a double proxy",
       [&](Bytes& b) { std::memcpy(b.data() + pending + 52, b.data() + pending, 4); }},
      {"not a double proxy", [&](Bytes& b) { u32(b, pending, firstFree); }},
      // The second pending DAabb (ids[4]'s) listed for ids[3], settled.
      {"no pending move", [&](Bytes& b) { u32(b, pending + 52, 3); }},
      {"exceeds",
       [&](Bytes& b) { snapshot::store<uint64_t>(b.data() + at + 24, uint64_t(1) << 60); }},
      {"add up", [&](Bytes& b) { snapshot::store<uint64_t>(b.data() + at + 24, 1); }},
      {"doubleWorld is 3", [&](Bytes& b) { b[26] = std::byte{3}; }},
      {"without a double section", [&](Bytes& b) { b[26] = std::byte{0}; }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.why);
    Bytes bad = snap;
    c.change(bad);
    snapshot::seal(bad);
    target.expectRejected(bad, c.why);
  }
  // A double section restating the defaults: no double proxy, origin zero.
  BroadPhase shifted({.structure = Structure::sweep, .threads = 1});
  shifted.shiftOrigin(Vec3(2, 0, 0));
  Bytes bad;
  shifted.saveState(bad);
  ASSERT_EQ(snapshot::readHeader(bad.data()).doubleWorld, 1);
  const uint64_t origin = snapshot::layoutOf(snapshot::readHeader(bad.data())).doubles;
  f64(bad, origin, 0.0);
  snapshot::seal(bad);
  target.expectRejected(bad, "no double proxy and a zero origin");
}

#if BP_TEST_EXCEPTIONS
TEST(Snapshot, WithoutAHandlerABadSnapshotThrows) {
  Bytes snap = smallSnapshot();
  snap.pop_back();
  BroadPhase bp;
  test::expectThrow(ErrorCode::invalidState, [&] { bp.loadState(snap); });
}
#endif

}  // namespace
}  // namespace bp
