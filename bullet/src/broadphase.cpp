// bp::bullet::Broadphase: proxies, filters and the pair cache. Queries are in
// query.cpp.
#include <broadphase/bullet/broadphase.h>

#include "convert.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

namespace bp::bullet {

namespace {

constexpr int kStaticGroup = btBroadphaseProxy::StaticFilter;

// A proxy's filter when its box is unusable: category 0 passes no filter,
// so it pairs with nothing and no query reports it.
constexpr Filter kParkedFilter{0, 0};

}  // namespace

Broadphase::Broadphase(btOverlappingPairCache* pairCache, const Config& config)
    : config_(config), cache_(pairCache), bp_(std::make_unique<BroadPhase>(config.broadphase)) {
  if (cache_ == nullptr) {
    ownedCache_ = std::make_unique<btHashedOverlappingPairCache>();
    cache_ = ownedCache_.get();
  }
  callbackMode_ = cache_->getOverlapFilterCallback() != nullptr;
}

Broadphase::~Broadphase() = default;

// Bullet's test is (g0 & m1) != 0 && (g1 & m0) != 0; the BroadPhase's is the
// same with category for group. The mask of -1 (AllFilter) widens to all 64
// bits, so the most common proxy, group DefaultFilter and mask AllFilter,
// gets the default Filter, which the BroadPhase checks for free. Group or
// mask 0 passes no pair in Bullet; such a proxy gets two bits no Bullet
// proxy uses, one as category and the other as mask: it still pairs with
// nothing and still passes the queries' all-ones filter.
Filter Broadphase::filterFor(const Proxy& p) const {
  if (p.parked) return kParkedFilter;
  if (callbackMode_ && !config_.callbackImpliesMasks) return Filter{};
  const uint32_t group = uint32_t(p.m_collisionFilterGroup);
  const uint32_t mask = uint32_t(p.m_collisionFilterMask);
  if (group == 0 || mask == 0) return Filter{uint64_t(1) << 63, uint64_t(1) << 62};
  return Filter{group, mask == UINT32_MAX ? ~uint64_t(0) : uint64_t(mask)};
}

// Static in the BroadPhase (never paired with another static) only where
// Bullet's filter refuses every pair of two such proxies: both groups are
// exactly StaticFilter and neither mask has it. With a callback deciding
// alone, nothing is known, so nothing is static.
bool Broadphase::staticFor(const Proxy& p) const {
  if (p.promoted) return false;
  if (callbackMode_ && !config_.callbackImpliesMasks) return false;
  return p.m_collisionFilterGroup == kStaticGroup && (p.m_collisionFilterMask & kStaticGroup) == 0;
}

// Brings the BroadPhase's filter and motion type of p in line with its
// Bullet fields and the mode; both take effect at the next update.
void Broadphase::applyRules(Proxy& p) {
  p.group = p.m_collisionFilterGroup;
  p.mask = p.m_collisionFilterMask;
  const Filter f = filterFor(p);
  if (f.category != p.filter.category || f.mask != p.filter.mask) {
    bp_->setFilter(p.id, f);
    p.filter = f;
    changed_ = true;
  }
  const bool s = staticFor(p);
  if (s != p.isStatic) {
    bp_->setMotionType(p.id, s ? MotionType::staticBody : MotionType::dynamic);
    p.isStatic = s;
    if (s)
      ++stats_.staticProxies;
    else
      --stats_.staticProxies;
    changed_ = true;
  }
}

void Broadphase::markDirty(Proxy& p) {
  if (p.dirtySlot == Proxy::kClean) {
    p.dirtySlot = uint32_t(dirty_.size());
    dirty_.push_back(&p);
  }
  changed_ = true;
}

void Broadphase::unlinkDirty(Proxy& p) {
  if (p.dirtySlot == Proxy::kClean) return;
  Proxy* last = dirty_.back();
  dirty_[p.dirtySlot] = last;
  last->dirtySlot = p.dirtySlot;
  dirty_.pop_back();
  p.dirtySlot = Proxy::kClean;
}

// A callback installed or removed since the last look changes every proxy's
// filter and motion type (see filterFor, staticFor).
void Broadphase::syncCallbackMode() {
  const bool mode = cache_->getOverlapFilterCallback() != nullptr;
  if (mode == callbackMode_) return;
  callbackMode_ = mode;
  for (uint32_t i = 0; i < slots_; ++i)
    if (slot(i).token != 0) applyRules(slot(i));
}

Proxy* Broadphase::proxyAt(uint32_t index) {
  if (index >= slots_ || slot(index).token == 0) return nullptr;
  return &slot(index);
}

btBroadphaseProxy* Broadphase::createProxy(const btVector3& aabbMin, const btVector3& aabbMax,
                                           int /*shapeType*/, void* userPtr,
                                           int collisionFilterGroup, int collisionFilterMask,
                                           btDispatcher* dispatcher) {
  noteDispatcher(dispatcher);
  syncCallbackMode();
  // Everything filterFor and staticFor read, before the BroadPhase has the
  // proxy (the slot is known only from the handle add() returns).
  Proxy probe;
  probe.m_collisionFilterGroup = collisionFilterGroup;
  probe.m_collisionFilterMask = collisionFilterMask;
  Aabb box;
  if (!toBox(aabbMin, aabbMax, box)) {
    // Nowhere yet: a point at the far corner, parked (pairs with nothing).
    box = {Vec3::Constant(kMaxCoordinate), Vec3::Constant(kMaxCoordinate)};
    probe.parked = true;
    ++stats_.invalidBoxes;
  }
  const Filter filter = filterFor(probe);
  const bool isStatic = staticFor(probe);
  const uint64_t token = nextToken_++;
  const ProxyId id = bp_->add({.box = box,
                               .motion = isStatic ? MotionType::staticBody : MotionType::dynamic,
                               .filter = filter,
                               .userData = token});
  while (chunks_.size() << kChunkBits <= id.index)
    chunks_.push_back(std::make_unique<Proxy[]>(kChunk));
  slots_ = std::max(slots_, id.index + 1);
  Proxy& p = slot(id.index);  // every field set below: a slot may be reused
  p.m_clientObject = userPtr;
  p.m_collisionFilterGroup = collisionFilterGroup;
  p.m_collisionFilterMask = collisionFilterMask;
  // Unique among live proxies (indices are), small and dense: what Bullet's
  // hashed pair cache keys on and orders a pair's two proxies by.
  p.m_uniqueId = int(id.index) + 1;
  p.m_aabbMin = aabbMin;
  p.m_aabbMax = aabbMax;
  p.id = id;
  p.token = token;
  p.box = box;
  p.filter = filter;
  p.group = collisionFilterGroup;
  p.mask = collisionFilterMask;
  p.dirtySlot = Proxy::kClean;
  p.moved = false;
  p.isStatic = isStatic;
  p.promoted = false;
  p.staticMovedAt = Proxy::kNever;
  p.parked = probe.parked;
  markDirty(p);  // not in the structure before the next update
  ++stats_.proxies;
  stats_.staticProxies += isStatic ? 1 : 0;
  return &p;
}

void Broadphase::destroyProxy(btBroadphaseProxy* proxy, btDispatcher* dispatcher) {
  noteDispatcher(dispatcher);
  Proxy& p = *static_cast<Proxy*>(proxy);
  // Its pairs leave the cache now (their algorithms freed through the
  // dispatcher), as in Bullet's own broadphases. The update's ended pairs
  // of this proxy are then skipped: they carry its token, which no live
  // proxy has.
  cache_->removeOverlappingPairsContainingProxy(&p, dispatcher);
  unlinkDirty(p);
  bp_->remove(p.id);
  --stats_.proxies;
  stats_.staticProxies -= p.isStatic ? 1 : 0;
  p.token = 0;
  p.m_clientObject = nullptr;
  changed_ = true;
}

void Broadphase::setAabb(btBroadphaseProxy* proxy, const btVector3& aabbMin,
                         const btVector3& aabbMax, btDispatcher* dispatcher) {
  noteDispatcher(dispatcher);
  Proxy& p = *static_cast<Proxy*>(proxy);
  p.m_aabbMin = aabbMin;
  p.m_aabbMax = aabbMax;
  // Callers may write a proxy's group and mask directly; the world calls
  // setAabb for every active body each step, so that is where they are
  // noticed.
  if (p.m_collisionFilterGroup != p.group || p.m_collisionFilterMask != p.mask) applyRules(p);
  Aabb box;
  if (!toBox(aabbMin, aabbMax, box)) {
    ++stats_.invalidBoxes;
    if (!p.parked) {
      p.parked = true;
      applyRules(p);
    }
    return;
  }
  if (p.parked) {
    p.parked = false;
    applyRules(p);
  } else if (box.min == p.box.min && box.max == p.box.max) {
    // The world sets every body's box every step by default, sleeping and
    // static ones included: an unchanged box costs nothing more.
    return;
  }
  p.box = box;
  if (p.isStatic) {
    // A static that moves in two updates in a row (a kinematic body, which
    // the world files under StaticFilter too) would re-sort the static part
    // at every step: it becomes dynamic for good, its filter still keeping
    // it from statics. A single move stays static: the world grows every
    // box by the contact threshold at its first step, and a level editor
    // moves a static now and then.
    if (p.staticMovedAt + 1 >= stats_.updates && p.staticMovedAt != Proxy::kNever) {
      p.promoted = true;
      applyRules(p);
    } else {
      p.staticMovedAt = stats_.updates;
    }
  }
  p.moved = true;
  markDirty(p);
}

void Broadphase::getAabb(btBroadphaseProxy* proxy, btVector3& aabbMin, btVector3& aabbMax) const {
  const Proxy& p = *static_cast<const Proxy*>(proxy);
  aabbMin = p.m_aabbMin;
  aabbMax = p.m_aabbMax;
}

void Broadphase::calculateOverlappingPairs(btDispatcher* dispatcher) {
  noteDispatcher(dispatcher);
  sync(dispatcher);
}

void Broadphase::sync(btDispatcher* dispatcher) {
  syncCallbackMode();
  if (!changed_) {
    // Nothing moved: no pair began or ended. Refused pairs are still asked.
    feedPairs(FramePairs{}, dispatcher);
    return;
  }
  moveIds_.clear();
  moveBoxes_.clear();
  for (Proxy* p : dirty_) {
    if (p->moved) {
      moveIds_.push_back(p->id);
      moveBoxes_.push_back(p->box);
      p->moved = false;
    }
    p->dirtySlot = Proxy::kClean;
  }
  dirty_.clear();
  if (!moveIds_.empty()) bp_->move(moveIds_, moveBoxes_);
  stats_.lastMoves = uint32_t(moveIds_.size());
  const FramePairs& frame = bp_->update();
  changed_ = false;
  ++stats_.updates;
  stats_.lastBegun = uint32_t(frame.begun.size());
  stats_.lastEnded = uint32_t(frame.ended.size());
  feedPairs(frame, dispatcher);
}

void Broadphase::feedPairs(const FramePairs& frame, btDispatcher* dispatcher) {
  // Ended pairs first: a slot freed and reused since the last update may end
  // its old pair and begin a new one under the same indices.
  const bool deferred = cache_->hasDeferredRemoval();
  endedKeys_.clear();
  for (const ProxyPair& e : frame.ended) {
    Proxy& a = slot(e.a);
    Proxy& b = slot(e.b);
    // A proxy destroyed since: its pairs left the cache with it.
    if (a.token != e.userDataA || b.token != e.userDataB) continue;
    if (deferred)
      endedKeys_.push_back(e.key());
    else
      cache_->removeOverlappingPair(&a, &b, dispatcher);
  }
  if (!endedKeys_.empty()) removeDeferred(dispatcher);

  // Refused pairs: those that ended or lost a proxy go; the rest are asked
  // again. refused_ and frame.ended are both sorted by key.
  refusedNext_.clear();
  size_t k = 0;
  for (const Refused& r : refused_) {
    while (k < frame.ended.size() && frame.ended[k].key() < r.key()) ++k;
    if (k < frame.ended.size() && frame.ended[k].key() == r.key()) continue;
    Proxy& a = slot(r.a);
    Proxy& b = slot(r.b);
    if (a.token != r.tokenA || b.token != r.tokenB) continue;
    if (cache_->needsBroadphaseCollision(&a, &b))
      cache_->addOverlappingPair(&a, &b);
    else
      refusedNext_.push_back(r);
  }
  // Begun pairs, sorted by key: the newly refused ones merge in after.
  const size_t stillRefused = refusedNext_.size();
  for (const ProxyPair& p : frame.begun) {
    Proxy& a = slot(p.a);
    Proxy& b = slot(p.b);
    if (cache_->needsBroadphaseCollision(&a, &b))
      cache_->addOverlappingPair(&a, &b);
    else
      refusedNext_.push_back({p.a, p.b, p.userDataA, p.userDataB});
  }
  if (stillRefused != 0 && stillRefused != refusedNext_.size())
    std::inplace_merge(refusedNext_.begin(), refusedNext_.begin() + ptrdiff_t(stillRefused),
                       refusedNext_.end(),
                       [](const Refused& x, const Refused& y) { return x.key() < y.key(); });
  refused_.swap(refusedNext_);
  stats_.refused = uint32_t(refused_.size());
}

// A pair cache with deferred removal (btSortedOverlappingPairCache by
// default) ignores removeOverlappingPair: its broadphase is to drop the pairs
// from the array itself. endedKeys_ is sorted (the ended list is).
void Broadphase::removeDeferred(btDispatcher* dispatcher) {
  btBroadphasePairArray& pairs = cache_->getOverlappingPairArray();
  int kept = 0;
  for (int i = 0; i < pairs.size(); ++i) {
    btBroadphasePair& pair = pairs[i];
    if (pair.m_pProxy0 != nullptr && pair.m_pProxy1 != nullptr) {
      uint32_t a = static_cast<Proxy*>(pair.m_pProxy0)->id.index;
      uint32_t b = static_cast<Proxy*>(pair.m_pProxy1)->id.index;
      if (a > b) std::swap(a, b);
      const uint64_t key = (uint64_t(a) << 32) | b;
      if (std::binary_search(endedKeys_.begin(), endedKeys_.end(), key)) {
        cache_->cleanOverlappingPair(pair, dispatcher);
        continue;
      }
    }
    if (kept != i) pairs[kept] = pair;
    ++kept;
  }
  pairs.resize(kept);
}

void Broadphase::getBroadphaseAabb(btVector3& aabbMin, btVector3& aabbMax) const {
  bool any = false;
  for (uint32_t i = 0; i < slots_; ++i) {
    const Proxy& p = slot(i);
    if (p.token == 0 || p.parked) continue;  // a parked box may hold a NaN
    if (!any) {
      aabbMin = p.m_aabbMin;
      aabbMax = p.m_aabbMax;
      any = true;
    } else {
      aabbMin.setMin(p.m_aabbMin);
      aabbMax.setMax(p.m_aabbMax);
    }
  }
  if (!any) aabbMin = aabbMax = btVector3(0, 0, 0);
}

void Broadphase::resetPool(btDispatcher* dispatcher) {
  noteDispatcher(dispatcher);
  if (stats_.proxies != 0) return;
  bp_ = std::make_unique<BroadPhase>(config_.broadphase);
  chunks_.clear();
  slots_ = 0;
  dirty_.clear();
  refused_.clear();
  changed_ = false;
  stats_ = Stats{};
}

void Broadphase::printStats() {
  const char* structure = bp_->structure() == Structure::bvh     ? "bvh"
                          : bp_->structure() == Structure::sweep ? "sweep"
                                                                 : "automatic";
  std::printf("bp::bullet::Broadphase: %u proxies (%u static), %s on %d threads, %" PRIu64
              " updates; last: %u moves, %u begun, %u ended; %u refused pairs; %" PRIu64
              " invalid boxes; %" PRIu64 " query flushes; %zu bytes\n",
              stats_.proxies, stats_.staticProxies, structure, bp_->threadCount(), stats_.updates,
              stats_.lastMoves, stats_.lastBegun, stats_.lastEnded, stats_.refused,
              stats_.invalidBoxes, stats_.queryFlushes, bp_->memoryBytes());
}

}  // namespace bp::bullet
