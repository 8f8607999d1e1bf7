// brute: the oracle of brute_force.h as a backend. Pairs on one thread
// (bp::brute::findPairs as written); rays spread over the scheduler, since
// each ray is independent and the oracle functions are pure.
#include "backend.h"

#include <broadphase/testkit/brute_force.h>

namespace bpbench {
namespace {

class BruteBackend final : public Backend {
 public:
  void build(const Scene& scene, Scheduler&) override {
    boxes_ = scene.boxes;
    isStatic_ = scene.isStatic;
    live_.assign(boxes_.size(), 1);
  }
  void move(std::span<const uint32_t> ids, std::span<const Aabb> boxes, Scheduler&) override {
    for (size_t k = 0; k < ids.size(); ++k) boxes_[ids[k]] = boxes[k];
  }
  void findPairs(Scheduler&, std::vector<Pair>& out) override {
    out = bp::brute::findPairs(boxes_, isStatic_, live_);
  }
  void remove(std::span<const uint32_t> ids) override {
    for (uint32_t id : ids) live_[id] = 0;
  }
  void add(std::span<const uint32_t> ids, std::span<const Aabb> boxes,
           std::span<const uint8_t> isStatic) override {
    for (size_t k = 0; k < ids.size(); ++k) {
      boxes_[ids[k]] = boxes[k];
      isStatic_[ids[k]] = isStatic[k];
      live_[ids[k]] = 1;
    }
  }
  void castRays(Scheduler& scheduler, std::span<const Ray> rays, RayQuery,
                std::span<RayHit> out) override {
    // "any" returns the closest hit too: a valid answer to "some hit".
    scheduler.forEach(0, static_cast<uint32_t>(rays.size()), 64, [&](uint32_t lo, uint32_t hi) {
      for (uint32_t i = lo; i < hi; ++i) out[i] = bp::brute::castRayClosest(boxes_, rays[i], live_);
    });
  }
  void castRaysAll(Scheduler& scheduler, std::span<const Ray> rays, std::vector<RayHit>& out,
                   std::vector<uint32_t>& offsets) override {
    castRaysAllWith(scheduler, rays, out, offsets, [&](const Ray& ray, std::vector<RayHit>& hits) {
      const auto h = bp::brute::castRayAll(boxes_, ray, live_);
      hits.insert(hits.end(), h.begin(), h.end());
    });
  }
  void nearest(const bp::Vec3& point, uint32_t k, std::vector<bp::Neighbour>& out) override {
    out = bp::brute::nearest(boxes_, point, k, live_);
  }
  size_t memoryBytes() const override {
    return boxes_.capacity() * sizeof(Aabb) + isStatic_.capacity() + live_.capacity();
  }

 private:
  std::vector<Aabb> boxes_;
  std::vector<uint8_t> isStatic_;
  std::vector<uint8_t> live_;
};

}  // namespace

std::unique_ptr<Backend> makeBrute() { return std::make_unique<BruteBackend>(); }

}  // namespace bpbench
