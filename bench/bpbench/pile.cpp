// bpbench pile: broadphase layers against category/mask filters, in one run.
//
// The scene: piles of about 1000 boxes each (n / 1000 piles, at least one),
// every box of a pile overlapping every other, each pile on a static floor
// tile; the piled boxes jitter every frame. The piled boxes must not pair
// with each other, only with their floor. Two worlds get the same boxes:
// - layers: the piles in layer 1, which the layer table keeps from
//   colliding with itself, the floors in layer 0;
// - filters: every proxy in layer 0, the piled boxes with category 2 and a
//   mask without bit 2 (the category/mask filter rejects pile-pile pairs).
// Both must report the same pairs every frame (checked). Reported per
// backend: median and p99 ms of move + update(), the pairs, and the
// candidates: the pairs the structure found before the filters
// (BroadPhase::lastStructurePairs()), i.e. what a filter after the
// structure has to throw away.
#include "commands.h"
#include "table.h"

#include <broadphase/broad_phase.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace bpbench {

namespace {

struct PileScene {
  std::vector<bp::Aabb> boxes;
  std::vector<uint8_t> isFloor;
  uint64_t rng = 1;

  float uniform() {  // [0, 1), 24 random bits (SplitMix64)
    rng += 0x9E3779B97F4A7C15ull;
    uint64_t z = rng;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return float((z ^ (z >> 31)) >> 40) * 0x1p-24f;
  }
  // A piled box of pile p: half extent 0.5, centre within 0.2 of the pile's
  // axis, so that every two boxes of a pile overlap.
  bp::Aabb pileBox(uint32_t p, float height) {
    const bp::Vec3 base(float(p % 32) * 20.0f, 0.0f, float(p / 32) * 20.0f);
    const bp::Vec3 c = base + bp::Vec3(0.4f * uniform() - 0.2f, height, 0.4f * uniform() - 0.2f);
    return {c - bp::Vec3::Constant(0.5f), c + bp::Vec3::Constant(0.5f)};
  }
};

PileScene makePile(uint32_t n, uint64_t seed) {
  PileScene s;
  s.rng = seed;
  const uint32_t piles = std::max(1u, n / 1000);
  for (uint32_t p = 0; p < piles; ++p) {
    const bp::Vec3 base(float(p % 32) * 20.0f, 0.0f, float(p / 32) * 20.0f);
    s.boxes.push_back({base - bp::Vec3(4.0f, 1.0f, 4.0f), base + bp::Vec3(4.0f, 0.0f, 4.0f)});
    s.isFloor.push_back(1);
  }
  for (uint32_t k = 0; s.boxes.size() < n; ++k) {
    s.boxes.push_back(s.pileBox(k % piles, 0.2f * s.uniform()));
    s.isFloor.push_back(0);
  }
  return s;
}

struct Result {
  std::vector<double> ms;
  uint64_t pairs = 0, candidates = 0;
  std::vector<std::vector<uint64_t>> keys;  // per frame, to compare the two worlds
};

Result run(bp::Structure structure, int threads, bool layers, uint32_t n, uint32_t frames,
           uint64_t seed) {
  PileScene scene = makePile(n, seed);
  bp::LayerTable table;
  table.set(1, 1, false);
  bp::BroadPhase world({.structure = structure, .threads = threads, .layers = table});
  std::vector<bp::ProxyId> ids, moving;
  for (size_t i = 0; i < scene.boxes.size(); ++i) {
    bp::ProxyDesc d{.box = scene.boxes[i]};
    if (scene.isFloor[i]) {
      d.motion = bp::MotionType::staticBody;
    } else if (layers) {
      d.layer = 1;
    } else {
      d.filter = {.category = 2, .mask = ~uint64_t(2)};
    }
    ids.push_back(world.add(d));
  }
  Result r;
  std::vector<bp::Aabb> boxes;
  for (uint32_t f = 0; f <= frames; ++f) {
    // Jitter every piled box (untimed), from the same generator in both worlds.
    moving.clear();
    boxes.clear();
    const uint32_t piles = std::max(1u, n / 1000);
    for (size_t i = 0; i < scene.boxes.size(); ++i)
      if (!scene.isFloor[i]) {
        moving.push_back(ids[i]);
        boxes.push_back(scene.pileBox(uint32_t(i - piles) % piles, 0.2f * scene.uniform()));
      }
    const auto t0 = std::chrono::steady_clock::now();
    world.move(moving, boxes);
    const bp::FramePairs& fp = world.update();
    const auto t1 = std::chrono::steady_clock::now();
    if (f == 0) continue;  // the first frame builds the structure
    r.ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    r.pairs = fp.pairs.size();
    r.candidates = world.lastStructurePairs();
    std::vector<uint64_t> keys;
    for (const bp::ProxyPair& p : fp.pairs) keys.push_back(p.key());
    r.keys.push_back(std::move(keys));
  }
  return r;
}

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(q * double(v.size())))];
}

}  // namespace

int commandPile(const Options& o) {
  std::vector<Row> rows;
  std::vector<std::string> failures;
  for (uint32_t n : o.ns)
    for (int threads : o.threads)
      for (const BackendInfo* b : o.backends) {
        const std::string name = b->name;
        bp::Structure structure = bp::Structure::automatic;
        if (name == "bvh")
          structure = bp::Structure::bvh;
        else if (name == "sweep")
          structure = bp::Structure::sweep;
        else if (name != "auto")
          throw UsageError("pile: --backend takes bvh, sweep or auto, not '" + name + "'");
        const int t = resolveThreads(threads);
        // Alternating, layers first: each world's frames back to back.
        const Result withLayers = run(structure, t, true, n, o.frames, o.seed);
        const Result withFilters = run(structure, t, false, n, o.frames, o.seed);
        if (withLayers.keys != withFilters.keys)
          failures.push_back(name + " n " + std::to_string(n) +
                             ": layers and filters report different pairs");
        const double layersMs = quantile(withLayers.ms, 0.5);
        const double filtersMs = quantile(withFilters.ms, 0.5);
        rows.push_back(Row()
                           .add("backend", name)
                           .add("n", uint64_t(n))
                           .add("threads", uint64_t(t))
                           .add("pairs", withLayers.pairs)
                           .add("cand_layers", withLayers.candidates)
                           .add("cand_filters", withFilters.candidates)
                           .add("ms_layers", layersMs, 3)
                           .add("p99_layers", quantile(withLayers.ms, 0.99), 3)
                           .add("ms_filters", filtersMs, 3)
                           .add("p99_filters", quantile(withFilters.ms, 0.99), 3)
                           .add("filters/layers", filtersMs / layersMs, 2));
      }
  printRows(rows, o.format, {});
  return printFailures(failures);
}

}  // namespace bpbench
