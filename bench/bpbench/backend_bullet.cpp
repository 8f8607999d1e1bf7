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

  // Rays through the broadphase's rayTest, as btCollisionWorld::rayTest
  // drives it: Bullet reports every proxy whose (fat) box the whole ray
  // crosses (the dbvt does not clip the ray as hits are found); the callback
  // runs the oracle's exact slab test and keeps the closest by hitBefore().
  void castRays(Scheduler&, std::span<const Ray> rays, RayQuery, std::span<RayHit> out) override {
    for (size_t i = 0; i < rays.size(); ++i) {
      RayCollector c(rays[i], boxes_, nullptr);
      broadphase_->rayTest(c.from, c.to, c);
      out[i] = c.best;
    }
  }
  void castRaysAll(Scheduler&, std::span<const Ray> rays, std::vector<RayHit>& out,
                   std::vector<uint32_t>& offsets) override {
    out.clear();
    offsets.assign(1, 0);
    for (const Ray& ray : rays) {
      const size_t before = out.size();
      RayCollector c(ray, boxes_, &out);
      broadphase_->rayTest(c.from, c.to, c);
      std::sort(out.begin() + before, out.end(), bp::hitBefore);
      offsets.push_back(static_cast<uint32_t>(out.size()));
    }
  }

 protected:
  virtual std::unique_ptr<btBroadphaseInterface> makeBroadphase(const Scene& scene,
                                                                btOverlappingPairCache* cache) = 0;

 private:
  struct RayCollector final : btBroadphaseRayCallback {
    RayCollector(const Ray& r, const std::vector<Aabb>& b, std::vector<RayHit>* a)
        : ray(r), boxes(b), all(a) {
      from = toBt(r.origin);
      to = toBt(r.origin + r.direction * r.maxT);
      for (int k = 0; k < 3; ++k) {
        const float d = r.direction[k];
        m_rayDirectionInverse[k] = d == 0.0f ? btScalar(BT_LARGE_FLOAT) : 1.0f / d;
        m_signs[k] = m_rayDirectionInverse[k] < 0.0f;
      }
      m_lambda_max = r.maxT;
    }
    bool process(const btBroadphaseProxy* proxy) override {
      const uint32_t id = idOf(proxy);
      float t;
      if (!bp::intersectRayAabb(ray, boxes[id], t)) return true;
      const RayHit h{id, t};
      if (all)
        all->push_back(h);
      else if (!best.hit() || bp::hitBefore(h, best))
        best = h;
      return true;
    }
    const Ray& ray;
    const std::vector<Aabb>& boxes;
    std::vector<RayHit>* all;
    RayHit best;
    btVector3 from, to;
  };

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
