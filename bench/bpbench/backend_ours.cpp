// bvh, sweep, auto: our structures (driven through the API of
// docs/structure_contract.md) and the BroadPhase facade.
#include "backend.h"

#include <broadphase/error.h>
#include <broadphase/proxy_id.h>

#include <broadphase/broad_phase.h>
#include "bvh/bvh.h"
#include "sweep/sweep_grid.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

namespace bpbench {
namespace {

// Scene ids to handles, on the frame's workers.
void handlesOf(std::span<const uint32_t> ids, const std::vector<bp::ProxyId>& handles,
               std::vector<bp::ProxyId>& out, Scheduler& scheduler) {
  out.resize(ids.size());
  scheduler.forEach(0, uint32_t(ids.size()), 16384, [&](uint32_t begin, uint32_t end) {
    for (uint32_t k = begin; k < end; ++k) out[k] = handles[ids[k]];
  });
}

// The handles of a frame's moves, mapped from scene ids by stageMoves()
// outside the timed frame: an engine keeps each body's handle in the body and
// reads it while it gathers the boxes, which bpbench does untimed as well.
// (The mapping is the adapter's work, not the structure's: counted in the
// frame it would be, on `static` 10^5, a serial pass of about 50 k cycles,
// cold, a tenth of the two-thread frame; 28 us of uniform 10^5's one-thread
// frame.) move() maps again, timed, when it is given other ids
// than were staged, or a proxy was added or removed since.
class MoveHandles {
 public:
  void stage(std::span<const uint32_t> ids, const std::vector<bp::ProxyId>& handles,
             Scheduler& scheduler) {
    handlesOf(ids, handles, out_, scheduler);
    stagedIds_ = ids.data();
    stagedCount_ = ids.size();
  }
  std::span<const bp::ProxyId> of(std::span<const uint32_t> ids,
                                  const std::vector<bp::ProxyId>& handles, Scheduler& scheduler) {
    if (ids.data() != stagedIds_ || ids.size() != stagedCount_)
      handlesOf(ids, handles, out_, scheduler);
    invalidate();  // one move() a staging
    return out_;
  }
  void invalidate() { stagedIds_ = nullptr; }

 private:
  std::vector<bp::ProxyId> out_;
  const uint32_t* stagedIds_ = nullptr;
  size_t stagedCount_ = 0;
};

// The scene id of each structure slot or proxy index, and how many indices
// differ from their scene id: none (the usual case) and answers need no
// mapping at all.
struct SceneIds {
  std::vector<uint32_t> of;  // scene id by index
  int64_t remapped = 0;

  void clear() {
    of.clear();
    remapped = 0;
  }
  void set(uint32_t index, uint32_t id) {
    if (of.size() <= index) {
      const size_t old = of.size();
      of.resize(index + 1);
      for (size_t i = old; i < of.size(); ++i) of[i] = static_cast<uint32_t>(i);
    }
    remapped += int64_t(id != index) - int64_t(of[index] != index);
    of[index] = id;
  }
};

// Neighbours in structure or proxy indices to scene ids, sorted again when
// the indices are not the scene ids (a tie goes to the lower scene id).
void toSceneIds(std::vector<bp::Neighbour>& out, const SceneIds& ids) {
  if (ids.remapped == 0) return;
  for (bp::Neighbour& n : out) n.proxy = ids.of[n.proxy];
  std::sort(out.begin(), out.end(), bp::neighbourBefore);
}

// One adapter for any structure with the contract's members (Bvh, SweepGrid).
// Scene ids map to handles; a fresh structure issues indices 0, 1, 2, ... and
// churn re-adds ids in the reverse order of removal, so with last-freed-first
// reuse the indices stay equal to scene ids. If they ever differ the pairs
// are remapped and re-sorted (counted in the frame time, and reported).
template <class Structure, class Config>
class StructureBackend final : public Backend {
 public:
  // Adds every box, then runs the deferred work (the initial build), which
  // is part of build_ms rather than of frame 1.
  void build(const Scene& scene, Scheduler& scheduler) override {
    handles_.resize(scene.n);
    for (uint32_t i = 0; i < scene.n; ++i) bind(i, s_.add(scene.boxes[i], scene.isStatic[i] != 0));
    s_.update(scheduler);
  }
  void move(std::span<const uint32_t> ids, std::span<const Aabb> boxes,
            Scheduler& scheduler) override {
    s_.move(moveHandles_.of(ids, handles_, scheduler), boxes, scheduler);
  }
  void stageMoves(std::span<const uint32_t> ids, Scheduler& scheduler) override {
    moveHandles_.stage(ids, handles_, scheduler);
  }
  void findPairs(Scheduler& scheduler, std::vector<Pair>& out) override {
    s_.findPairs(scheduler, out);
    if (sceneIds_.remapped == 0) return;
    for (Pair& p : out) p = bp::makePair(sceneIds_.of[p.a], sceneIds_.of[p.b]);
    std::sort(out.begin(), out.end());
  }
  void remove(std::span<const uint32_t> ids) override {
    moveHandles_.invalidate();
    for (uint32_t id : ids) s_.remove(handles_[id]);
  }
  void add(std::span<const uint32_t> ids, std::span<const Aabb> boxes,
           std::span<const uint8_t> isStatic) override {
    for (size_t k = ids.size(); k-- > 0;) bind(ids[k], s_.add(boxes[k], isStatic[k] != 0));
  }
  void castRays(Scheduler& scheduler, std::span<const Ray> rays, RayQuery kind,
                std::span<RayHit> out) override {
    s_.castRays(scheduler, rays, out, kind);
  }
  void castRaysAll(Scheduler& scheduler, std::span<const Ray> rays, std::vector<RayHit>& out,
                   std::vector<uint32_t>& offsets) override {
    castRaysAllWith(scheduler, rays, out, offsets, [&](const Ray& ray, std::vector<RayHit>& hits) {
      thread_local std::vector<RayHit> one;
      s_.castRayAll(ray, one);
      hits.insert(hits.end(), one.begin(), one.end());
    });
  }
  void nearest(const bp::Vec3& point, uint32_t k, std::vector<bp::Neighbour>& out) override {
    s_.nearest(point, k, out);
    toSceneIds(out, sceneIds_);
  }
  size_t memoryBytes() const override { return s_.memoryBytes(); }

 private:
  void bind(uint32_t id, bp::ProxyId h) {
    moveHandles_.invalidate();
    handles_[id] = h;
    sceneIds_.set(h.index, id);
  }

  Structure s_{Config{}};
  std::vector<bp::ProxyId> handles_;  // by scene id
  SceneIds sceneIds_;                 // by structure slot
  MoveHandles moveHandles_;
};

}  // namespace

std::unique_ptr<Backend> makeBvh() {
  return std::make_unique<StructureBackend<bp::Bvh, bp::BvhConfig>>();
}

std::unique_ptr<Backend> makeSweep() {
  return std::make_unique<StructureBackend<bp::SweepGrid, bp::SweepGridConfig>>();
}

namespace {

// The BroadPhase facade (`automatic` mode, or the structure it is given), as
// an engine drives it: proxies
// carry their scene id as user data; a frame is move() of the batch and
// update(); pairs come back in proxy indices and are mapped to scene ids
// (identity unless churn reordered the slots).
// `auto-cq` is the same with BroadPhaseConfig::concurrentQueries: its frames
// include the publish to the query structure, its rays go through that
// structure (a second sweep), on the calling thread, and after each frame a
// point query, timed on its own, brings that structure up to date as a
// query thread's first query would.
class FacadeBackend final : public Backend {
 public:
  explicit FacadeBackend(bool concurrentQueries, bp::Structure structure = bp::Structure::automatic)
      : concurrentQueries_(concurrentQueries), structure_(structure) {}
  void build(const Scene& scene, Scheduler& scheduler) override {
    bp::BroadPhaseConfig config;
    config.structure = structure_;
    config.threads = scheduler.threadCount();
    config.concurrentQueries = concurrentQueries_;
    bp_ = std::make_unique<bp::BroadPhase>(config);
    // The float frame's zero at the offset (as a float), so the scene's
    // relative coordinates stay small.
    if (offset_ != 0.0) bp_->shiftOrigin(bp::Vec3(float(offset_), float(offset_), float(offset_)));
    handles_.resize(scene.n);
    sceneIds_.clear();
    for (uint32_t i = 0; i < scene.n; ++i) bind(i, scene.boxes[i], scene.isStatic[i] != 0);
    bp_->update();
  }
  // The rays' tree, made in `bpbench rays`' build as Embree's BVH is (the
  // batch would otherwise make it first, inside the timed cast).
  void prepareRays() override { bp_->prepareRays(); }
  void move(std::span<const uint32_t> ids, std::span<const Aabb> boxes,
            Scheduler& scheduler) override {
    bp_->move(moveHandles_.of(ids, handles_, scheduler), boxes);
  }
  void stageMoves(std::span<const uint32_t> ids, Scheduler& scheduler) override {
    moveHandles_.stage(ids, handles_, scheduler);
  }
  bool useOffset(double offset) override {
    offset_ = offset;
    return true;
  }
  void moveDouble(std::span<const uint32_t> ids, std::span<const bp::DAabb> boxes,
                  Scheduler& scheduler) override {
    bp_->move(moveHandles_.of(ids, handles_, scheduler), boxes);
  }
  // The facade forks to its own arena.
  void wakeWorkers(Scheduler&) override { bp_->wakeWorkers(); }
  // The frame is update(); the pairs' scene ids (the user data) are copied
  // out after it, untimed (an engine reads the ProxyPairs in place), on the
  // facade's workers.
  void findPairs(Scheduler&, std::vector<Pair>&) override { bp_->update(); }
  void exportPairs(Scheduler&, std::vector<Pair>& out) override {
    const bp::FramePairs& f = bp_->lastPairs();
    const uint32_t n = uint32_t(f.pairs.size());
    out.resize(n);
    std::atomic<bool> identity{true};
    bp_->scheduler().forEach(0, n, 65536, [&](uint32_t begin, uint32_t end) {
      bool same = true;
      for (uint32_t k = begin; k < end; ++k) {
        const bp::ProxyPair& p = f.pairs[k];
        out[k] = bp::makePair(uint32_t(p.userDataA), uint32_t(p.userDataB));
        same &= (out[k].a == p.a) & (out[k].b == p.b);
      }
      if (!same) identity.store(false, std::memory_order_relaxed);
    });
    if (!identity.load(std::memory_order_relaxed)) std::sort(out.begin(), out.end());
  }
  double firstQueryMs() override {
    if (!concurrentQueries_) return -1.0;
    double ms = 0;
    std::thread([&] {
      const auto start = std::chrono::steady_clock::now();
      // A point outside the scene: the query finds nothing, so its time is
      // the catch-up's.
      bp_->queryPoint(bp::Vec3(-1.0e6f, -1.0e6f, -1.0e6f), [](uint32_t) { return true; });
      ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
               .count();
    }).join();
    return ms;
  }
  void remove(std::span<const uint32_t> ids) override {
    moveHandles_.invalidate();
    for (uint32_t id : ids) bp_->remove(handles_[id]);
  }
  void add(std::span<const uint32_t> ids, std::span<const Aabb> boxes,
           std::span<const uint8_t> isStatic) override {
    for (size_t k = ids.size(); k-- > 0;) bind(ids[k], boxes[k], isStatic[k] != 0);
  }
  void castRays(Scheduler& scheduler, std::span<const Ray> rays, RayQuery kind,
                std::span<RayHit> out) override {
    bp_->castRays(rays, out, kind);
    // Proxy indices are the scene ids unless churn remapped some
    // (SceneIds); otherwise the map runs on the workers: a serial pass over
    // a million answers costs a fifth of a lidar batch's time on two threads.
    if (sceneIds_.remapped == 0) return;
    scheduler.forEach(0, uint32_t(out.size()), 16384, [&](uint32_t begin, uint32_t end) {
      for (uint32_t k = begin; k < end; ++k)
        if (out[k].hit()) out[k].proxy = sceneIds_.of[out[k].proxy];
    });
  }
  void castRaysAll(Scheduler& scheduler, std::span<const Ray> rays, std::vector<RayHit>& out,
                   std::vector<uint32_t>& offsets) override {
    // The facade's batch, its proxies then mapped to scene ids (each ray's
    // hits sorted again: a tie goes to the lower scene id).
    bp_->castRaysAll(rays, out, batchOffsets_);
    offsets.assign(batchOffsets_.begin(), batchOffsets_.end());
    scheduler.forEach(0, uint32_t(rays.size()), 1024, [&](uint32_t begin, uint32_t end) {
      for (uint32_t r = begin; r < end; ++r) {
        const auto first = out.begin() + ptrdiff_t(offsets[r]);
        const auto last = out.begin() + ptrdiff_t(offsets[r + 1]);
        for (auto h = first; h != last; ++h) h->proxy = sceneIds_.of[h->proxy];
        std::sort(first, last, bp::hitBefore);
      }
    });
  }
  void nearest(const bp::Vec3& point, uint32_t k, std::vector<bp::Neighbour>& out) override {
    bp_->nearest(point, k, out);
    toSceneIds(out, sceneIds_);
  }
  size_t memoryBytes() const override { return bp_ ? bp_->memoryBytes() : 0; }
  std::vector<double> memoryParts() const override {
    if (!bp_) return {};
    const bp::MemoryUse m = bp_->memoryUse();
    return {double(m.structure), double(m.rayTree), double(m.proxies), double(m.changes),
            double(m.pairs),     double(m.events),  double(m.doubles), double(m.queryView)};
  }

 private:
  void bind(uint32_t id, const Aabb& box, bool isStatic) {
    const bp::MotionType motion = isStatic ? bp::MotionType::staticBody : bp::MotionType::dynamic;
    const bp::DVec3 shift{offset_, offset_, offset_};
    const bp::ProxyId h =
        offset_ != 0.0
            ? bp_->add(bp::DProxyDesc{
                  {bp::toDouble(box.min) + shift, bp::toDouble(box.max) + shift}, motion, {}, id})
            : bp_->add(bp::ProxyDesc{box, motion, {}, id});
    moveHandles_.invalidate();
    handles_[id] = h;
    sceneIds_.set(h.index, id);
  }

  bool concurrentQueries_;
  bp::Structure structure_;
  std::unique_ptr<bp::BroadPhase> bp_;
  std::vector<bp::ProxyId> handles_;  // by scene id
  SceneIds sceneIds_;                 // by proxy index
  std::vector<size_t> batchOffsets_;  // castRaysAll's, before the copy to the bench's type
  MoveHandles moveHandles_;
  double offset_ = 0;  // useOffset(): the double path, boxes translated by this
};

}  // namespace

std::unique_ptr<Backend> makeAuto() { return std::make_unique<FacadeBackend>(false); }

std::unique_ptr<Backend> makeAutoConcurrentQueries() {
  return std::make_unique<FacadeBackend>(true);
}

std::unique_ptr<Backend> makeFacadeBvh() {
  return std::make_unique<FacadeBackend>(false, bp::Structure::bvh);
}

std::unique_ptr<Backend> makeFacadeSweep() {
  return std::make_unique<FacadeBackend>(false, bp::Structure::sweep);
}

}  // namespace bpbench
