// embree: Embree 3 with the boxes as one user geometry, rays only.
//
// The BVH is built once (rtcCommitScene) from the exact boxes. Closest hit:
// an rtcIntersect1 loop; the intersect callback runs our slab test
// (intersectRayAabb, the oracle's) and keeps the lowest t, ties to the lower
// index, so answers match the oracle bit for bit. Any hit: an rtcOccluded1
// loop. One thread: the loop is the figure Embree's users get per core.
#include "backend.h"

#include <broadphase/error.h>

#include <embree3/rtcore.h>

#include <cmath>
#include <limits>

namespace bpbench {
namespace {

class EmbreeBackend final : public Backend {
 public:
  ~EmbreeBackend() override {
    if (scene_) rtcReleaseScene(scene_);
    if (device_) rtcReleaseDevice(device_);
  }

  void build(const Scene& scene, Scheduler&) override {
    boxes_ = scene.boxes;
    device_ = rtcNewDevice(nullptr);
    if (!device_) throw bp::Error(bp::ErrorCode::invalidArgument, "rtcNewDevice failed");
    scene_ = rtcNewScene(device_);
    RTCGeometry geom = rtcNewGeometry(device_, RTC_GEOMETRY_TYPE_USER);
    rtcSetGeometryUserPrimitiveCount(geom, static_cast<unsigned>(boxes_.size()));
    rtcSetGeometryUserData(geom, this);
    rtcSetGeometryBoundsFunction(geom, &bounds, this);
    rtcSetGeometryIntersectFunction(geom, &intersect);
    rtcSetGeometryOccludedFunction(geom, &occluded);
    rtcCommitGeometry(geom);
    rtcAttachGeometry(scene_, geom);
    rtcReleaseGeometry(geom);
    rtcCommitScene(scene_);
  }

  void move(std::span<const uint32_t>, std::span<const Aabb>, Scheduler&) override { pairsOnly(); }
  void findPairs(Scheduler&, std::vector<Pair>&) override { pairsOnly(); }
  void remove(std::span<const uint32_t>) override { pairsOnly(); }
  void add(std::span<const uint32_t>, std::span<const Aabb>, std::span<const uint8_t>) override {
    pairsOnly();
  }

  void castRays(Scheduler&, std::span<const Ray> rays, RayQuery kind,
                std::span<RayHit> out) override {
    RTCIntersectContext context;
    rtcInitIntersectContext(&context);
    for (size_t i = 0; i < rays.size(); ++i) {
      const Ray& r = rays[i];
      if (kind == RayQuery::any) {
        RTCRay ray = makeRtcRay(r);
        rtcOccluded1(scene_, &context, &ray);
        // Occluded rays come back with tfar = -inf; the box is not reported.
        out[i] = ray.tfar < 0 ? RayHit{0, 0} : RayHit{};
        continue;
      }
      RTCRayHit rh;
      rh.ray = makeRtcRay(r);
      rh.hit.geomID = RTC_INVALID_GEOMETRY_ID;
      rh.hit.primID = RTC_INVALID_GEOMETRY_ID;
      rtcIntersect1(scene_, &context, &rh);
      out[i] =
          rh.hit.geomID == RTC_INVALID_GEOMETRY_ID ? RayHit{} : RayHit{rh.hit.primID, rh.ray.tfar};
    }
  }

  void castRaysAll(Scheduler&, std::span<const Ray>, std::vector<RayHit>&,
                   std::vector<uint32_t>&) override {
    throw bp::Error(bp::ErrorCode::invalidArgument, "embree: only closest and any are measured");
  }

 private:
  [[noreturn]] static void pairsOnly() {
    throw bp::Error(bp::ErrorCode::invalidArgument, "embree measures rays only");
  }

  static RTCRay makeRtcRay(const Ray& r) {
    RTCRay ray;
    ray.org_x = r.origin.x();
    ray.org_y = r.origin.y();
    ray.org_z = r.origin.z();
    ray.tnear = 0.0f;
    ray.dir_x = r.direction.x();
    ray.dir_y = r.direction.y();
    ray.dir_z = r.direction.z();
    ray.time = 0.0f;
    ray.tfar = r.maxT;
    ray.mask = 0xffffffffu;
    ray.id = 0;
    ray.flags = 0;
    return ray;
  }

  // The slab test of the oracle on box `prim`, clipped to [0, tfar]. The
  // reciprocal is computed as makeRay() does, from the same unit direction,
  // so t has the same bits as the oracle's.
  bool hitBox(unsigned prim, const RTCRay& ray, float& t) const {
    const bp::Vec3 origin(ray.org_x, ray.org_y, ray.org_z);
    const bp::Vec3 inv(1.0f / ray.dir_x, 1.0f / ray.dir_y, 1.0f / ray.dir_z);
    return bp::intersectRayAabb(origin, inv, boxes_[prim], 0.0f, ray.tfar, t);
  }

  // Embree's node test may cull a box that the ray only touches at t = 0
  // (origin exactly on the face it leaves through: uniform 10^6, ray 340798
  // of `bpbench rays --n 1000000 --check`), where the closed-box slab test
  // hits. Its bounds are therefore one ulp wider on every side; the
  // intersect callback still tests the exact box, so answers stay exact.
  static void bounds(const RTCBoundsFunctionArguments* args) {
    const auto* self = static_cast<const EmbreeBackend*>(args->geometryUserPtr);
    const Aabb& b = self->boxes_[args->primID];
    constexpr float kInf = std::numeric_limits<float>::infinity();
    RTCBounds* o = args->bounds_o;
    o->lower_x = std::nextafter(b.min.x(), -kInf);
    o->lower_y = std::nextafter(b.min.y(), -kInf);
    o->lower_z = std::nextafter(b.min.z(), -kInf);
    o->upper_x = std::nextafter(b.max.x(), kInf);
    o->upper_y = std::nextafter(b.max.y(), kInf);
    o->upper_z = std::nextafter(b.max.z(), kInf);
  }

  static void intersect(const RTCIntersectFunctionNArguments* args) {
    if (!args->valid[0]) return;
    const auto* self = static_cast<const EmbreeBackend*>(args->geometryUserPtr);
    auto* rh = reinterpret_cast<RTCRayHit*>(args->rayhit);  // N == 1: rtcIntersect1
    float t;
    if (!self->hitBox(args->primID, rh->ray, t)) return;
    const bool have = rh->hit.geomID != RTC_INVALID_GEOMETRY_ID;
    if (have && !(t < rh->ray.tfar || (t == rh->ray.tfar && args->primID < rh->hit.primID))) return;
    rh->ray.tfar = t;
    rh->hit.primID = args->primID;
    rh->hit.geomID = args->geomID;
    rh->hit.instID[0] = args->context->instID[0];
    rh->hit.u = rh->hit.v = 0;
    rh->hit.Ng_x = rh->hit.Ng_y = rh->hit.Ng_z = 0;
  }

  static void occluded(const RTCOccludedFunctionNArguments* args) {
    if (!args->valid[0]) return;
    const auto* self = static_cast<const EmbreeBackend*>(args->geometryUserPtr);
    auto* ray = reinterpret_cast<RTCRay*>(args->ray);  // N == 1: rtcOccluded1
    float t;
    if (self->hitBox(args->primID, *ray, t)) ray->tfar = -std::numeric_limits<float>::infinity();
  }

  std::vector<Aabb> boxes_;
  RTCDevice device_ = nullptr;
  RTCScene scene_ = nullptr;
};

}  // namespace

std::unique_ptr<Backend> makeEmbree() { return std::make_unique<EmbreeBackend>(); }

}  // namespace bpbench
