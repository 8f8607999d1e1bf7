// BroadPhase: the public API, each call handed to BroadPhase::Impl
// (broad_phase_impl.h), which holds the state. The header an engine includes
// thus shows only what it can call.
#include <broadphase/broad_phase.h>

#include "facade/broad_phase_impl.h"

#include <memory>

namespace bp {

BroadPhase::BroadPhase(const BroadPhaseConfig& config) : impl_(std::make_unique<Impl>(config)) {}
BroadPhase::~BroadPhase() = default;

ProxyId BroadPhase::add(const ProxyDesc& desc) { return impl_->add(desc); }
void BroadPhase::add(std::span<const ProxyDesc> descs, std::span<ProxyId> out) {
  impl_->add(descs, out);
}
void BroadPhase::remove(ProxyId id) { impl_->remove(id); }
void BroadPhase::remove(std::span<const ProxyId> ids) { impl_->remove(ids); }
void BroadPhase::move(ProxyId id, const Aabb& box) { impl_->move(id, box); }
void BroadPhase::move(std::span<const ProxyId> ids, std::span<const Aabb> boxes) {
  impl_->move(ids, boxes);
}
void BroadPhase::setFilter(ProxyId id, const Filter& filter) { impl_->setFilter(id, filter); }
void BroadPhase::setUserData(ProxyId id, uint64_t userData) { impl_->setUserData(id, userData); }
void BroadPhase::setMotionType(ProxyId id, MotionType motion) { impl_->setMotionType(id, motion); }
void BroadPhase::setLayer(ProxyId id, uint32_t layer) { impl_->setLayer(id, layer); }
void BroadPhase::setLayerTable(const LayerTable& table) { impl_->setLayerTable(table); }
const LayerTable& BroadPhase::layerTable() const { return impl_->layerTable(); }
bool BroadPhase::contains(ProxyId id) const { return impl_->contains(id); }
ProxyId BroadPhase::handleOf(uint32_t index) const { return impl_->handleOf(index); }
uint64_t BroadPhase::userData(uint32_t index) const { return impl_->userData(index); }
ProxyDesc BroadPhase::desc(ProxyId id) const { return impl_->desc(id); }
uint32_t BroadPhase::proxyCount() const { return impl_->proxyCount(); }
const FramePairs& BroadPhase::update() { return impl_->update(); }
void BroadPhase::update(FunctionRef<void(std::span<const ProxyPair>)> consume) {
  impl_->update(consume);
}
const FramePairs& BroadPhase::lastPairs() const { return impl_->lastPairs(); }
void BroadPhase::wakeWorkers() { impl_->wakeWorkers(); }
void BroadPhase::queryBox(const Aabb& box, OverlapCallback callback, const Filter& filter) const {
  impl_->queryBox(box, callback, filter);
}
void BroadPhase::queryPoint(const Vec3& point, OverlapCallback callback,
                            const Filter& filter) const {
  impl_->queryPoint(point, callback, filter);
}
RayHit BroadPhase::castRay(const Vec3& origin, const Vec3& direction, float length, RayQuery kind,
                           const Filter& filter) const {
  return impl_->castRay(origin, direction, length, kind, filter);
}
void BroadPhase::castRayAll(const Vec3& origin, const Vec3& direction, float length,
                            std::vector<RayHit>& out, const Filter& filter) const {
  impl_->castRayAll(origin, direction, length, out, filter);
}
RayHit BroadPhase::castRay(const Ray& ray, RayQuery kind, const Filter& filter) const {
  return impl_->castRay(ray, kind, filter);
}
void BroadPhase::castRayAll(const Ray& ray, std::vector<RayHit>& out, const Filter& filter) const {
  impl_->castRayAll(ray, out, filter);
}
void BroadPhase::castRay(const Vec3& origin, const Vec3& direction, float length,
                         RayCallback callback, const Filter& filter) const {
  impl_->castRay(origin, direction, length, callback, filter);
}
void BroadPhase::castRays(std::span<const Ray> rays, std::span<RayHit> out, RayQuery kind,
                          const Filter& filter) const {
  impl_->castRays(rays, out, kind, filter);
}
void BroadPhase::castRaysAll(std::span<const Ray> rays, std::vector<RayHit>& hits,
                             std::vector<size_t>& offsets, const Filter& filter) const {
  impl_->castRaysAll(rays, hits, offsets, filter);
}
void BroadPhase::prepareRays() const { impl_->prepareRays(); }
void BroadPhase::nearest(const Vec3& point, uint32_t k, std::vector<Neighbour>& out,
                         const Filter& filter) const {
  impl_->nearest(point, k, out, filter);
}
void BroadPhase::nearest(std::span<const Vec3> points, uint32_t k, std::vector<Neighbour>& out,
                         std::vector<size_t>& offsets, const Filter& filter) const {
  impl_->nearest(points, k, out, offsets, filter);
}
RayHit BroadPhase::castBox(const Vec3& halfExtent, const Vec3& origin, const Vec3& direction,
                           float length, const Filter& filter) const {
  return impl_->castBox(halfExtent, origin, direction, length, filter);
}
void BroadPhase::shiftOrigin(const Vec3& offset) { impl_->shiftOrigin(offset); }
DVec3 BroadPhase::origin() const { return impl_->origin(); }
ProxyId BroadPhase::add(const DProxyDesc& desc) { return impl_->add(desc); }
void BroadPhase::add(std::span<const DProxyDesc> descs, std::span<ProxyId> out) {
  impl_->add(descs, out);
}
void BroadPhase::move(ProxyId id, const DAabb& box) { impl_->move(id, box); }
void BroadPhase::move(std::span<const ProxyId> ids, std::span<const DAabb> boxes) {
  impl_->move(ids, boxes);
}
DAabb BroadPhase::worldBox(ProxyId id) const { return impl_->worldBox(id); }
void BroadPhase::queryBox(const DAabb& box, OverlapCallback callback, const Filter& filter) const {
  impl_->queryBox(box, callback, filter);
}
void BroadPhase::queryPoint(const DVec3& point, OverlapCallback callback,
                            const Filter& filter) const {
  impl_->queryPoint(point, callback, filter);
}
DRayHit BroadPhase::castRay(const DVec3& origin, const DVec3& direction, double length,
                            RayQuery kind, const Filter& filter) const {
  return impl_->castRay(origin, direction, length, kind, filter);
}
void BroadPhase::castRayAll(const DVec3& origin, const DVec3& direction, double length,
                            std::vector<DRayHit>& out, const Filter& filter) const {
  impl_->castRayAll(origin, direction, length, out, filter);
}
void BroadPhase::nearest(const DVec3& point, uint32_t k, std::vector<DNeighbour>& out,
                         const Filter& filter) const {
  impl_->nearest(point, k, out, filter);
}
void BroadPhase::saveState(std::vector<std::byte>& out) const { impl_->saveState(out); }
void BroadPhase::loadState(std::span<const std::byte> bytes) { impl_->loadState(bytes); }
std::string BroadPhase::validate() const { return impl_->validate(); }
size_t BroadPhase::memoryBytes() const { return impl_->memoryUse().total(); }
MemoryUse BroadPhase::memoryUse() const { return impl_->memoryUse(); }
uint64_t BroadPhase::lastStructurePairs() const { return impl_->lastStructurePairs(); }
Structure BroadPhase::structure() const { return impl_->structure(); }
Scheduler& BroadPhase::scheduler() { return impl_->scheduler(); }
int BroadPhase::threadCount() const { return impl_->threadCount(); }

}  // namespace bp
