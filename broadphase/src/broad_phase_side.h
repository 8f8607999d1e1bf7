// BroadPhase::Side: one structure (a Bvh or a SweepGrid) plus the map from its
// slot indices back to proxy indices. The only place that knows both types;
// `visit` picks the one this side holds (no base class: the two share a
// contract, docs/structure_contract.md, not an interface).
#pragma once

#include <broadphase/broad_phase.h>
#include <broadphase/bvh.h>
#include <broadphase/jobs/per_worker.h>
#include <broadphase/sweep_grid.h>

#include <memory>
#include <vector>

namespace bp {

struct BroadPhase::Side {
  std::unique_ptr<Bvh> bvh;
  std::unique_ptr<SweepGrid> sweep;
  std::vector<uint32_t> outer;  // structure slot -> proxy index (kNullIndex when free)
  // This frame's pairs in structure slots. On the moving side (a, b) are both
  // its slots; on the static side of `automatic`, a is a moving-side slot and
  // b a static-side slot.
  std::vector<Pair> pairs;
  std::vector<ProxyId> moveIds;  // this frame's batch, reused
  std::unique_ptr<PerWorker<std::vector<Pair>>> buffers;  // pairAgainst's, reused
  std::vector<Aabb> moveBoxes;

  static std::unique_ptr<Side> makeBvh(const BroadPhaseConfig& c) {
    auto s = std::make_unique<Side>();
    BvhConfig bc;
    bc.margin = c.margin;
    s->bvh = std::make_unique<Bvh>(bc);
    return s;
  }
  static std::unique_ptr<Side> makeSweep(const BroadPhaseConfig& c) {
    auto s = std::make_unique<Side>();
    SweepGridConfig sc;
    sc.cellSize = c.cellSize;
    s->sweep = std::make_unique<SweepGrid>(sc);
    return s;
  }

  template <class Fn>
  decltype(auto) visit(Fn&& fn) {
    return bvh ? fn(*bvh) : fn(*sweep);
  }
  template <class Fn>
  decltype(auto) visit(Fn&& fn) const {
    return bvh ? fn(static_cast<const Bvh&>(*bvh)) : fn(static_cast<const SweepGrid&>(*sweep));
  }

  ProxyId add(const Aabb& box, bool isStatic, uint32_t proxyIndex) {
    const ProxyId id = visit([&](auto& s) { return s.add(box, isStatic); });
    if (id.index >= outer.size()) outer.resize(id.index + 1, kNullIndex);
    outer[id.index] = proxyIndex;
    return id;
  }
  void remove(ProxyId id) {
    visit([&](auto& s) { s.remove(id); });
    outer[id.index] = kNullIndex;
  }
  void moveBatch() {
    visit([&](auto& s) { s.move(moveIds, moveBoxes); });
  }
  void findPairs(Scheduler& scheduler) {
    visit([&](auto& s) { s.findPairs(scheduler, pairs); });
  }

  // This side holds statics only: pairs every live dynamic proxy of `moving`
  // against it. Exact boxes are read from the proxies' descriptions, which
  // nothing writes during the frame.
  void pairAgainst(Scheduler& scheduler, const Side& moving, const std::vector<ProxyDesc>& desc) {
    visit([&](auto& s) { s.update(scheduler); });
    pairs.clear();
    if (proxyCount() == 0) return;  // nothing to pair against: skip n queries
    if (!buffers || buffers->size() != scheduler.threadCount())
      buffers = std::make_unique<PerWorker<std::vector<Pair>>>(scheduler.threadCount());
    buffers->forEachSlot([](std::vector<Pair>& b) { b.clear(); });
    const uint32_t n = static_cast<uint32_t>(moving.outer.size());
    scheduler.forEach(0, n, 1024, [&](uint32_t begin, uint32_t end) {
      std::vector<Pair>& buf = buffers->local();
      for (uint32_t m = begin; m < end; ++m) {
        const uint32_t proxy = moving.outer[m];
        if (proxy == kNullIndex || desc[proxy].motion != MotionType::dynamic) continue;
        visit([&](const auto& s) {
          s.queryBox(desc[proxy].box, [&](uint32_t slot) {
            buf.push_back({m, slot});
            return true;
          });
        });
      }
    });
    pairs.clear();
    buffers->forEachSlot(
        [&](std::vector<Pair>& b) { pairs.insert(pairs.end(), b.begin(), b.end()); });
  }

  void update(Scheduler& scheduler) {
    visit([&](auto& s) { s.update(scheduler); });
  }
  bool contains(ProxyId id) const {
    return visit([&](const auto& s) { return s.contains(id); });
  }
  uint32_t proxyCount() const {
    return visit([&](const auto& s) { return s.proxyCount(); });
  }
  std::string validate() const {
    return visit([&](const auto& s) { return s.validate(); });
  }
  size_t memoryBytes() const {
    return visit([&](const auto& s) { return s.memoryBytes(); }) +
           outer.capacity() * sizeof(uint32_t) + pairs.capacity() * sizeof(Pair) +
           moveIds.capacity() * sizeof(ProxyId) + moveBoxes.capacity() * sizeof(Aabb);
  }
};

}  // namespace bp
