// bp::bullet::Broadphase: rayTest and aabbTest.
//
// The structure holds every box as of the last update; a proxy created or
// moved since (listed in dirty_) is skipped there and tested by its new box
// here, so that answers match Bullet's broadphases, which apply setAabb at
// once.
#include <broadphase/bullet/broadphase.h>

#include "convert.h"

#include <algorithm>
#include <limits>
#include <utility>

namespace bp::bullet {

namespace {

// Passes every proxy but a parked one: no Bullet broadphase filters its
// queries (the callbacks do).
constexpr Filter kQueryFilter{~uint64_t(0), ~uint64_t(0)};

constexpr float kInfinity = std::numeric_limits<float>::infinity();

}  // namespace

void Broadphase::prepareQuery() {
  if (dirty_.size() <= config_.queryPendingLimit) return;
  ++stats_.queryFlushes;
  sync(dispatcher_);
}

void Broadphase::aabbTest(const btVector3& aabbMin, const btVector3& aabbMax,
                          btBroadphaseAabbCallback& callback) {
  Aabb box;
  if (!toBox(aabbMin, aabbMax, box)) return;
  prepareQuery();
  bp_->queryBox(
      box,
      [&](uint32_t index) {
        Proxy& p = slot(index);
        if (p.dirtySlot == Proxy::kClean) callback.process(&p);
        return true;  // process()'s answer is not read, as in Bullet's broadphases
      },
      kQueryFilter);
  for (Proxy* p : dirty_)
    if (!p->parked && overlaps(p->box, box)) callback.process(p);
}

void Broadphase::rayTest(const btVector3& rayFrom, const btVector3& /*rayTo*/,
                         btBroadphaseRayCallback& callback, const btVector3& aabbMin,
                         const btVector3& aabbMax) {
  const float lambda = static_cast<float>(callback.m_lambda_max);
  if (!(lambda >= 0.0f)) return;
  // The direction whose inverse Bullet precomputed; BT_LARGE_FLOAT marks a
  // zero component.
  Vec3 d;
  for (int k = 0; k < 3; ++k) {
    const btScalar inv = callback.m_rayDirectionInverse[k];
    d[k] = std::fabs(inv) < btScalar(BT_LARGE_FLOAT) ? static_cast<float>(btScalar(1) / inv) : 0.0f;
  }
  // The cast shape's local box as a centre, which moves the origin, and a
  // half size, which grows every box.
  const Vec3 lo = toVec3(aabbMin), hi = toVec3(aabbMax);
  const Vec3 half = (0.5f * (hi - lo)).cwiseMax(Vec3::Zero());
  const Vec3 origin = toVec3(rayFrom) + 0.5f * (lo + hi);
  if (!isFinite(origin) || !isFinite(d) || !isFinite(half)) return;
  prepareQuery();

  // A plain ray goes through the BroadPhase's castRay, whose t is distance
  // along the unit direction: Bullet's lambda times |d|.
  const float scale = d.norm();
  const float length = lambda * scale;
  if (half != Vec3::Zero() || !(length > 0.0f) || !std::isfinite(length) ||
      !isWithinLimit(origin)) {
    sweptCandidates(origin, d, half, lambda, callback);
    return;
  }
  // After each process(), the ray's new end: m_lambda_max as process() left
  // it, never beyond the current end; negative (or NaN) stops the query.
  auto clippedEnd = [&](float current) {
    const float l = static_cast<float>(callback.m_lambda_max);
    return l >= 0.0f ? std::min(current, l * scale) : -1.0f;
  };
  const Ray ray = makeRay(origin, d, length);
  float end = length;
  for (size_t k = 0; k < dirty_.size() && end >= 0.0f; ++k) {
    Proxy& p = *dirty_[k];
    float t;
    if (p.parked || !intersectRayAabb(ray.origin, ray.invDirection, p.box, 0.0f, end, t)) continue;
    callback.process(&p);
    end = clippedEnd(end);
  }
  if (end < 0.0f) return;
  auto visit = [&](uint32_t index, float) -> float {
    Proxy& p = slot(index);
    if (p.dirtySlot != Proxy::kClean) return kInfinity;  // tested above by its new box
    callback.process(&p);
    return clippedEnd(kInfinity);
  };
  if (end > 0.0f)
    bp_->castRay(origin, d, end, visit, kQueryFilter);
  else
    bp_->queryPoint(
        origin, [&](uint32_t index) { return visit(index, 0.0f) >= 0.0f; }, kQueryFilter);
}

// Casts with a box (Bullet's convex sweeps), and rays the BroadPhase does not
// take (zero direction or length, an origin beyond 2^24): the proxies in the
// bounds of the whole sweep are gathered, each is clipped exactly against
// its box grown by the cast's half size, and process() runs nearest first,
// so that a lowered m_lambda_max prunes every farther candidate. t is
// Bullet's lambda here (d as given, not normalised).
void Broadphase::sweptCandidates(const Vec3& origin, const Vec3& d, const Vec3& half, float lambda,
                                 btBroadphaseRayCallback& callback) {
  const Vec3 end = origin + d * lambda;
  Aabb bounds{origin.cwiseMin(end) - half, origin.cwiseMax(end) + half};
  for (int k = 0; k < 3; ++k) {
    if (!(bounds.min[k] <= bounds.max[k])) return;
    bounds.min[k] = std::clamp(bounds.min[k], -kMaxCoordinate, kMaxCoordinate);
    bounds.max[k] = std::clamp(bounds.max[k], -kMaxCoordinate, kMaxCoordinate);
  }
  // 1/0 is +inf: clipRayAabb treats an axis the ray does not move along as
  // a slab the origin is inside or not.
  const Vec3 inv(1.0f / d.x(), 1.0f / d.y(), 1.0f / d.z());
  std::vector<std::pair<float, Proxy*>> hits;
  auto consider = [&](Proxy& p) {
    const Aabb grown{p.box.min - half, p.box.max + half};
    float tMin = 0.0f, tMax = lambda;
    if (clipRayAabb(origin, inv, grown, tMin, tMax)) hits.emplace_back(tMin, &p);
  };
  bp_->queryBox(
      bounds,
      [&](uint32_t index) {
        Proxy& p = slot(index);
        if (p.dirtySlot == Proxy::kClean) consider(p);
        return true;
      },
      kQueryFilter);
  for (Proxy* p : dirty_)
    if (!p->parked) consider(*p);
  std::sort(hits.begin(), hits.end(), [](const auto& x, const auto& y) {
    return x.first < y.first || (x.first == y.first && x.second->getUid() < y.second->getUid());
  });
  for (const auto& [t, p] : hits) {
    const float l = static_cast<float>(callback.m_lambda_max);
    if (!(l >= 0.0f) || t > l) break;  // sorted: everything after is farther
    callback.process(p);
  }
}

}  // namespace bp::bullet
