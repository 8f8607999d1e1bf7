// bullet-dbvt and bullet-sap: Bullet 3's broadphases used as Bullet intends.
//
// One proxy per box (user pointer = scene id); static boxes get the
// StaticFilter group and a mask without it, so Bullet itself skips
// static-static pairs. A frame calls setAabb for each moved proxy, then
// calculateOverlappingPairs. Bullet's pair cache holds pairs of its fat
// (dbvt: margin and lazy cleanup) or quantized (sap) boxes, so the exact
// list is the cache filtered by the exact boxes, then sorted: that filter and
// sort are part of the frame time, as a narrowphase needs them.
// Single-threaded: Bullet's broadphases are serial.
#include "backend.h"

#include <broadphase/error.h>

#include <btBulletCollisionCommon.h>

#include <algorithm>

namespace bpbench {
namespace {

btVector3 toBt(const bp::Vec3& v) { return btVector3(v.x(), v.y(), v.z()); }

class BulletBackend : public Backend {
 public:
  ~BulletBackend() override {
    // The broadphase first: it removes its pairs from the cache.
    broadphase_.reset();
    cache_.reset();
  }

  void build(const Scene& scene, Scheduler&) override {
    boxes_ = scene.boxes;
    isStatic_ = scene.isStatic;
    cache_ = std::make_unique<btHashedOverlappingPairCache>();
    broadphase_ = makeBroadphase(scene, cache_.get());
    proxies_.assign(boxes_.size(), nullptr);
    for (uint32_t i = 0; i < boxes_.size(); ++i) createProxy(i);
  }

  void move(std::span<const uint32_t> ids, std::span<const Aabb> boxes, Scheduler&) override {
    for (size_t k = 0; k < ids.size(); ++k) {
      const uint32_t id = ids[k];
      boxes_[id] = boxes[k];
      broadphase_->setAabb(proxies_[id], toBt(boxes[k].min), toBt(boxes[k].max), nullptr);
    }
  }

  void findPairs(Scheduler&, std::vector<Pair>& out) override {
    broadphase_->calculateOverlappingPairs(nullptr);
    const btBroadphasePairArray& cached = cache_->getOverlappingPairArray();
    out.clear();
    for (int k = 0; k < cached.size(); ++k) {
      const uint32_t a = idOf(cached[k].m_pProxy0), b = idOf(cached[k].m_pProxy1);
      if (bp::overlaps(boxes_[a], boxes_[b])) out.push_back(bp::makePair(a, b));
    }
    std::sort(out.begin(), out.end());
  }

  void remove(std::span<const uint32_t> ids) override {
    for (uint32_t id : ids) {
      broadphase_->destroyProxy(proxies_[id], nullptr);
      proxies_[id] = nullptr;
    }
  }

  void add(std::span<const uint32_t> ids, std::span<const Aabb> boxes,
           std::span<const uint8_t> isStatic) override {
    for (size_t k = 0; k < ids.size(); ++k) {
      boxes_[ids[k]] = boxes[k];
      isStatic_[ids[k]] = isStatic[k];
      createProxy(ids[k]);
    }
  }

  void castRays(Scheduler&, std::span<const Ray>, RayQuery, std::span<RayHit>) override {
    bp::throwError(bp::ErrorCode::invalidArgument, "Bullet backends measure pairs only");
  }
  void castRaysAll(Scheduler&, std::span<const Ray>, std::vector<RayHit>&,
                   std::vector<uint32_t>&) override {
    bp::throwError(bp::ErrorCode::invalidArgument, "Bullet backends measure pairs only");
  }

 protected:
  virtual std::unique_ptr<btBroadphaseInterface> makeBroadphase(const Scene& scene,
                                                                btOverlappingPairCache* cache) = 0;

 private:
  static uint32_t idOf(const btBroadphaseProxy* p) {
    return static_cast<uint32_t>(reinterpret_cast<uintptr_t>(p->m_clientObject));
  }
  void createProxy(uint32_t id) {
    const bool st = !isStatic_.empty() && isStatic_[id];
    const int group = st ? btBroadphaseProxy::StaticFilter : btBroadphaseProxy::DefaultFilter;
    const int mask = st ? btBroadphaseProxy::AllFilter ^ btBroadphaseProxy::StaticFilter
                        : btBroadphaseProxy::AllFilter;
    proxies_[id] =
        broadphase_->createProxy(toBt(boxes_[id].min), toBt(boxes_[id].max), BOX_SHAPE_PROXYTYPE,
                                 reinterpret_cast<void*>(uintptr_t(id)), group, mask, nullptr);
  }

  std::unique_ptr<btHashedOverlappingPairCache> cache_;
  std::unique_ptr<btBroadphaseInterface> broadphase_;
  std::vector<btBroadphaseProxy*> proxies_;
  std::vector<Aabb> boxes_;
  std::vector<uint8_t> isStatic_;
};

// btDbvtBroadphase with its default settings.
class BulletDbvt final : public BulletBackend {
 protected:
  std::unique_ptr<btBroadphaseInterface> makeBroadphase(const Scene&,
                                                        btOverlappingPairCache* cache) override {
    return std::make_unique<btDbvtBroadphase>(cache);
  }
};

// bt32BitAxisSweep3 over the scene's motion domain grown by the largest box,
// default settings otherwise (including its ray-cast accelerator dbvt).
class BulletSap final : public BulletBackend {
 protected:
  std::unique_ptr<btBroadphaseInterface> makeBroadphase(const Scene& scene,
                                                        btOverlappingPairCache* cache) override {
    float half = 0;
    for (const bp::Vec3& e : scene.extents) half = std::max(half, 0.5f * e.maxCoeff());
    const bp::Vec3 margin = bp::Vec3::Constant(half + 1.0f);
    const bp::Vec3 lo = -margin, hi = scene.bounds + margin;
    const unsigned maxHandles = static_cast<unsigned>(scene.n) + 16;
    return std::make_unique<bt32BitAxisSweep3>(toBt(lo), toBt(hi), maxHandles, cache);
  }
};

}  // namespace

std::unique_ptr<Backend> makeBulletDbvt() { return std::make_unique<BulletDbvt>(); }
std::unique_ptr<Backend> makeBulletSap() { return std::make_unique<BulletSap>(); }

}  // namespace bpbench
