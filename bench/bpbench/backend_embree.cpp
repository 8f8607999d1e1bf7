// embree, embree-p8, embree-p16, embree-stream: Embree 3 with the boxes as
// one user geometry, rays only, through each of its ray APIs.
//
// The BVH is built once (rtcCommitScene) from the exact boxes. The intersect
// callback runs our slab test (intersectRayAabb, the oracle's) on every
// valid ray of the packet Embree hands it and keeps the lowest t, ties to
// the lower index, so answers match the oracle bit for bit; the occluded
// callback ends a ray at its first box. How the batch reaches Embree:
// - `embree`: an rtcIntersect1 / rtcOccluded1 loop;
// - `embree-p8`, `embree-p16`: packets of 8 or 16 consecutive rays of the
//   batch (rtcIntersect8/16, rtcOccluded8/16), the last one masked;
// - `embree-stream`: the whole batch as one stream (rtcIntersect1M /
//   rtcOccluded1M) with RTC_INTERSECT_CONTEXT_FLAG_COHERENT, which lets
//   Embree gather neighbouring rays into packets itself.
// One thread: the figure Embree's users get per core.
#include "backend.h"

#include <broadphase/error.h>

#include <embree3/rtcore.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace bpbench {
namespace {

enum class EmbreeApi { loop, packet8, packet16, stream };

class EmbreeBackend final : public Backend {
 public:
  explicit EmbreeBackend(EmbreeApi api) : api_(api) {}
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
    // Packets of 8 and 16 work on every build (emulated where the CPU has
    // no native width: RTC_DEVICE_PROPERTY_NATIVE_RAY8/16_SUPPORTED); the
    // stream API is a build option.
    if (api_ == EmbreeApi::stream &&
        rtcGetDeviceProperty(device_, RTC_DEVICE_PROPERTY_RAY_STREAM_SUPPORTED) == 0)
      throw bp::Error(bp::ErrorCode::invalidArgument, "this Embree build has no ray streams");
  }

  void move(std::span<const uint32_t>, std::span<const Aabb>, Scheduler&) override { pairsOnly(); }
  void findPairs(Scheduler&, std::vector<Pair>&) override { pairsOnly(); }
  void remove(std::span<const uint32_t>) override { pairsOnly(); }
  void add(std::span<const uint32_t>, std::span<const Aabb>, std::span<const uint8_t>) override {
    pairsOnly();
  }

  void castRays(Scheduler&, std::span<const Ray> rays, RayQuery kind,
                std::span<RayHit> out) override {
    switch (api_) {
      case EmbreeApi::loop: castLoop(rays, kind, out); return;
      case EmbreeApi::packet8: castPackets<RTCRayHit8, RTCRay8, 8>(rays, kind, out); return;
      case EmbreeApi::packet16: castPackets<RTCRayHit16, RTCRay16, 16>(rays, kind, out); return;
      case EmbreeApi::stream: castStream(rays, kind, out); return;
    }
  }

  void castRaysAll(Scheduler&, std::span<const Ray>, std::vector<RayHit>&,
                   std::vector<uint32_t>&) override {
    throw bp::Error(bp::ErrorCode::invalidArgument, "embree: only closest and any are measured");
  }

 private:
  void castLoop(std::span<const Ray> rays, RayQuery kind, std::span<RayHit> out) const {
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
          rh.hit.geomID == RTC_INVALID_GEOMETRY_ID ? RayHit{} : RayHit{rh.hit.primID, rh.hit.u};
    }
  }

  // Packets of W consecutive rays; lanes past the batch's end are invalid.
  template <class RayHitW, class RayW, int W>
  void castPackets(std::span<const Ray> rays, RayQuery kind, std::span<RayHit> out) const {
    RTCIntersectContext context;
    rtcInitIntersectContext(&context);
    alignas(64) int valid[W];
    for (size_t first = 0; first < rays.size(); first += W) {
      const size_t count = std::min<size_t>(W, rays.size() - first);
      for (int l = 0; l < W; ++l) valid[l] = size_t(l) < count ? -1 : 0;
      alignas(64) RayHitW packet;
      RayW& ray = packet.ray;
      for (size_t l = 0; l < count; ++l) {
        const Ray& r = rays[first + l];
        ray.org_x[l] = r.origin.x();
        ray.org_y[l] = r.origin.y();
        ray.org_z[l] = r.origin.z();
        ray.tnear[l] = 0.0f;
        ray.dir_x[l] = r.direction.x();
        ray.dir_y[l] = r.direction.y();
        ray.dir_z[l] = r.direction.z();
        ray.time[l] = 0.0f;
        ray.tfar[l] = r.maxT;
        ray.mask[l] = 0xffffffffu;
        ray.id[l] = 0;
        ray.flags[l] = 0;
        packet.hit.geomID[l] = RTC_INVALID_GEOMETRY_ID;
        packet.hit.primID[l] = RTC_INVALID_GEOMETRY_ID;
      }
      if (kind == RayQuery::any) {
        if constexpr (W == 8)
          rtcOccluded8(valid, scene_, &context, &ray);
        else
          rtcOccluded16(valid, scene_, &context, &ray);
        for (size_t l = 0; l < count; ++l)
          out[first + l] = ray.tfar[l] < 0 ? RayHit{0, 0} : RayHit{};
        continue;
      }
      if constexpr (W == 8)
        rtcIntersect8(valid, scene_, &context, &packet);
      else
        rtcIntersect16(valid, scene_, &context, &packet);
      for (size_t l = 0; l < count; ++l)
        out[first + l] = packet.hit.geomID[l] == RTC_INVALID_GEOMETRY_ID
                             ? RayHit{}
                             : RayHit{packet.hit.primID[l], packet.hit.u[l]};
    }
  }

  // The batch as one coherent stream.
  void castStream(std::span<const Ray> rays, RayQuery kind, std::span<RayHit> out) {
    RTCIntersectContext context;
    rtcInitIntersectContext(&context);
    context.flags = RTC_INTERSECT_CONTEXT_FLAG_COHERENT;
    const unsigned m = static_cast<unsigned>(rays.size());
    if (kind == RayQuery::any) {
      streamRays_.resize(m);
      for (unsigned i = 0; i < m; ++i) streamRays_[i] = makeRtcRay(rays[i]);
      rtcOccluded1M(scene_, &context, streamRays_.data(), m, sizeof(RTCRay));
      for (unsigned i = 0; i < m; ++i) out[i] = streamRays_[i].tfar < 0 ? RayHit{0, 0} : RayHit{};
      return;
    }
    streamHits_.resize(m);
    for (unsigned i = 0; i < m; ++i) {
      streamHits_[i].ray = makeRtcRay(rays[i]);
      streamHits_[i].hit.geomID = RTC_INVALID_GEOMETRY_ID;
      streamHits_[i].hit.primID = RTC_INVALID_GEOMETRY_ID;
    }
    rtcIntersect1M(scene_, &context, streamHits_.data(), m, sizeof(RTCRayHit));
    for (unsigned i = 0; i < m; ++i)
      out[i] = streamHits_[i].hit.geomID == RTC_INVALID_GEOMETRY_ID
                   ? RayHit{}
                   : RayHit{streamHits_[i].hit.primID, streamHits_[i].hit.u};
  }

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

  // The slab test of the oracle on box `prim` for lane i of a packet of n
  // rays (n = 1: one RTCRay), clipped to [0, tfar]. The reciprocal is
  // computed as makeRay() does, from the same unit direction, so t has the
  // same bits as the oracle's.
  bool hitBox(unsigned prim, RTCRayN* ray, unsigned n, unsigned i, float& t) const {
    const bp::Vec3 origin(RTCRayN_org_x(ray, n, i), RTCRayN_org_y(ray, n, i),
                          RTCRayN_org_z(ray, n, i));
    const bp::Vec3 inv(1.0f / RTCRayN_dir_x(ray, n, i), 1.0f / RTCRayN_dir_y(ray, n, i),
                       1.0f / RTCRayN_dir_z(ray, n, i));
    return bp::intersectRayAabb(origin, inv, boxes_[prim], 0.0f, RTCRayN_tfar(ray, n, i), t);
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
    const auto* self = static_cast<const EmbreeBackend*>(args->geometryUserPtr);
    const unsigned n = args->N;
    RTCRayN* ray = RTCRayHitN_RayN(args->rayhit, n);
    RTCHitN* hit = RTCRayHitN_HitN(args->rayhit, n);
    for (unsigned i = 0; i < n; ++i) {
      if (!args->valid[i]) continue;
      float t;
      if (!self->hitBox(args->primID, ray, n, i, t)) continue;
      const bool have = RTCHitN_geomID(hit, n, i) != RTC_INVALID_GEOMETRY_ID;
      const float best = RTCHitN_u(hit, n, i);
      if (have && !(t < best || (t == best && args->primID < RTCHitN_primID(hit, n, i)))) continue;
      // The exact t is kept in u; the ray goes on one ulp past it, so that
      // a box entered at the same t (a tie, to the lower index) is still
      // visited: the packet and stream traversals cull a node entered at
      // exactly tfar.
      RTCRayN_tfar(ray, n, i) = std::nextafter(t, std::numeric_limits<float>::infinity());
      RTCHitN_primID(hit, n, i) = args->primID;
      RTCHitN_geomID(hit, n, i) = args->geomID;
      RTCHitN_instID(hit, n, i, 0) = args->context->instID[0];
      RTCHitN_u(hit, n, i) = t;
      RTCHitN_v(hit, n, i) = 0;
      RTCHitN_Ng_x(hit, n, i) = RTCHitN_Ng_y(hit, n, i) = RTCHitN_Ng_z(hit, n, i) = 0;
    }
  }

  static void occluded(const RTCOccludedFunctionNArguments* args) {
    const auto* self = static_cast<const EmbreeBackend*>(args->geometryUserPtr);
    const unsigned n = args->N;
    for (unsigned i = 0; i < n; ++i) {
      float t;
      if (args->valid[i] && self->hitBox(args->primID, args->ray, n, i, t))
        RTCRayN_tfar(args->ray, n, i) = -std::numeric_limits<float>::infinity();
    }
  }

  EmbreeApi api_;
  std::vector<RTCRay> streamRays_;     // embree-stream: the batch, any hit
  std::vector<RTCRayHit> streamHits_;  // embree-stream: the batch, closest hit
  std::vector<Aabb> boxes_;
  RTCDevice device_ = nullptr;
  RTCScene scene_ = nullptr;
};

}  // namespace

std::unique_ptr<Backend> makeEmbree() { return std::make_unique<EmbreeBackend>(EmbreeApi::loop); }
std::unique_ptr<Backend> makeEmbreePacket8() {
  return std::make_unique<EmbreeBackend>(EmbreeApi::packet8);
}
std::unique_ptr<Backend> makeEmbreePacket16() {
  return std::make_unique<EmbreeBackend>(EmbreeApi::packet16);
}
std::unique_ptr<Backend> makeEmbreeStream() {
  return std::make_unique<EmbreeBackend>(EmbreeApi::stream);
}

}  // namespace bpbench
