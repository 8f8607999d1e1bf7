/// \file
/// bp::bullet::Broadphase: bp::BroadPhase behind Bullet 3's
/// btBroadphaseInterface, so that a btCollisionWorld or a
/// btDiscreteDynamicsWorld runs on it unchanged. Built and installed where
/// Bullet 3 is found (CMake target broadphase::bullet, package component
/// bullet). What each call maps to, what is not supported: docs/bullet.md.
#pragma once

#include <broadphase/broad_phase.h>

#include <BulletCollision/BroadphaseCollision/btBroadphaseInterface.h>
#include <BulletCollision/BroadphaseCollision/btOverlappingPairCache.h>

#include <cstdint>
#include <memory>
#include <vector>

/// The Bullet 3 plug-in.
namespace bp::bullet {

/// How a Broadphase is set up; fixed for its lifetime.
struct Config {
  /// The BroadPhase inside: structure, threads or an engine's arena, maxPairs.
  BroadPhaseConfig broadphase{};
  /// When the pair cache has an overlap filter callback, Bullet asks only the
  /// callback (not the groups and masks) whether a pair is wanted. By default
  /// every pair of overlapping boxes is then offered to the callback, statics
  /// among themselves included. Set this when the callback only narrows the
  /// group/mask test (the usual way to write one): the groups and masks then
  /// keep filtering inside the BroadPhase, and statics keep their cheap
  /// static part of the structure.
  bool callbackImpliesMasks = false;
  /// A query tests at most this many boxes recorded since the last update
  /// one by one; with more pending it applies them first.
  uint32_t queryPendingLimit = 64;
};

/// What Bullet holds for each body: a btBroadphaseProxy (Bullet reads its
/// client object, filter group and mask, unique id and box) with the
/// BroadPhase's handle and the adapter's bookkeeping. Proxies live in a
/// pool indexed by ProxyId::index, so a pair's indices lead straight to its
/// two proxies; an address stays valid until resetPool() or the
/// Broadphase's destruction.
struct Proxy : btBroadphaseProxy {
  /// The proxy's handle in the BroadPhase inside (Broadphase::broadPhase()).
  ProxyId handle() const { return id; }

 private:
  friend class Broadphase;
  static constexpr uint32_t kClean = UINT32_MAX;
  static constexpr uint64_t kNever = UINT64_MAX;

  ProxyId id{};
  /// The BroadPhase user data of this proxy: a number never given to another
  /// proxy, so a pair event from before a destroy (its slot reused since)
  /// is told apart from a pair of the new proxy. 0 while the slot is free.
  uint64_t token = 0;
  /// The box the BroadPhase holds, or receives at the next update: Bullet's
  /// box in float, clamped to +-kMaxCoordinate.
  Aabb box{Vec3::Zero(), Vec3::Zero()};
  Filter filter{};  ///< as last given to the BroadPhase
  /// Bullet's group and mask when `filter` was derived; a difference means
  /// the caller wrote the proxy's fields, and the filter follows.
  int group = 0;
  int mask = 0;
  /// While static: the update count when its box last changed, or kNever.
  uint64_t staticMovedAt = kNever;
  uint32_t dirtySlot = kClean;  ///< position in Broadphase::dirty_, or kClean
  bool moved = false;           ///< box changed since the last update
  bool isStatic = false;        ///< MotionType::staticBody in the BroadPhase
  bool promoted = false;        ///< moved in two updates in a row while static: stays dynamic
  bool parked = false;          ///< its last box was NaN or inverted: takes part in nothing
};

/// A Bullet broadphase on bp::BroadPhase: give it to a world where a
/// btDbvtBroadphase would go.
///
///     btDefaultCollisionConfiguration configuration;
///     btCollisionDispatcher dispatcher(&configuration);
///     bp::bullet::Broadphase broadphase;  // owns a btHashedOverlappingPairCache
///     btSequentialImpulseConstraintSolver solver;
///     btDiscreteDynamicsWorld world(&dispatcher, &broadphase, &solver, &configuration);
///
/// Timing model: createProxy(), destroyProxy() and setAabb() only record what
/// changed (a destroyed proxy's pairs leave Bullet's pair cache at once, as in
/// Bullet's own broadphases). calculateOverlappingPairs(), which the world
/// calls once a step after setting every active body's box, applies every
/// recorded box as one batch and runs one BroadPhase::update(); the pairs
/// that began go into Bullet's pair cache with addOverlappingPair() and the
/// pairs that ended leave it with removeOverlappingPair(). Pairs therefore
/// appear at calculateOverlappingPairs(), as with btDbvtBroadphase in its
/// deferred-collide mode, not inside setAabb(). The pair cache then holds
/// exactly the pairs whose boxes overlap (closed intervals) and that Bullet's
/// filter accepts: no fat boxes, no stale pairs.
///
/// Queries (rayTest(), aabbTest()) answer for every box as last given, like
/// Bullet's broadphases: boxes recorded since the last update are tested one
/// by one, or, past Config::queryPendingLimit of them, applied first (one
/// update, which also feeds the pair cache).
///
/// Threads: the update runs its tasks in the BroadPhase's arena (its own, or
/// the one Config::broadphase.arena names); every call into Bullet (the pair
/// cache, the callbacks) is made on the calling thread. Calls are not
/// thread-safe, except rayTest() and aabbTest() from many threads while no
/// box is pending (after calculateOverlappingPairs(), as in a world step).
class Broadphase final : public btBroadphaseInterface {
 public:
  /// pairCache: Bullet's pair cache to feed, or null for one of our own (a
  /// btHashedOverlappingPairCache, as btDbvtBroadphase makes). A cache
  /// given here must outlive this object; destroy the proxies first (as
  /// btCollisionWorld does), since the pairs in it point at them.
  explicit Broadphase(btOverlappingPairCache* pairCache = nullptr, const Config& config = {});
  /// Frees the proxies and, if it owns one, the pair cache.
  ~Broadphase() override;
  Broadphase(const Broadphase&) = delete;
  Broadphase& operator=(const Broadphase&) = delete;

  // --- btBroadphaseInterface ---

  /// shapeType is not read. The proxy is static in the BroadPhase when
  /// Bullet's filter keeps it from every other static (group exactly
  /// StaticFilter, mask without StaticFilter, as btDiscreteDynamicsWorld
  /// gives static and kinematic bodies) until it first moves.
  btBroadphaseProxy* createProxy(const btVector3& aabbMin, const btVector3& aabbMax, int shapeType,
                                 void* userPtr, int collisionFilterGroup, int collisionFilterMask,
                                 btDispatcher* dispatcher) override;
  /// Removes the proxy's pairs from the pair cache now
  /// (removeOverlappingPairsContainingProxy, which frees their algorithms
  /// through the dispatcher) and the proxy from the BroadPhase.
  void destroyProxy(btBroadphaseProxy* proxy, btDispatcher* dispatcher) override;
  /// Records the box for the next update (nothing when it is unchanged, as
  /// the world sets every body's box every step). A box with a NaN or a min
  /// above its max parks the proxy: it pairs with nothing and no query
  /// reports it until a valid box arrives. Group and mask fields written
  /// into the proxy since its last box are picked up here.
  void setAabb(btBroadphaseProxy* proxy, const btVector3& aabbMin, const btVector3& aabbMax,
               btDispatcher* dispatcher) override;
  /// The box last given to createProxy() or setAabb(), exactly as given.
  void getAabb(btBroadphaseProxy* proxy, btVector3& aabbMin, btVector3& aabbMax) const override;
  /// The ray is rayFrom + t * d for t in [0, m_lambda_max], with d the
  /// inverse of rayCallback.m_rayDirectionInverse (a component at
  /// BT_LARGE_FLOAT or beyond is 0), as Bullet's own broadphases read it
  /// (rayTo is not needed). process() is called once for every proxy whose
  /// box, grown by -aabbMax below and -aabbMin above (the cast shape's local
  /// box), the ray meets at some t <= m_lambda_max; process() may lower
  /// m_lambda_max, which prunes what lies farther (a negative value stops
  /// the query). process()'s return value is not read, as in Bullet's own
  /// broadphases.
  void rayTest(const btVector3& rayFrom, const btVector3& rayTo,
               btBroadphaseRayCallback& rayCallback, const btVector3& aabbMin = btVector3(0, 0, 0),
               const btVector3& aabbMax = btVector3(0, 0, 0)) override;
  /// process() for every proxy whose box overlaps [aabbMin, aabbMax].
  void aabbTest(const btVector3& aabbMin, const btVector3& aabbMax,
                btBroadphaseAabbCallback& callback) override;
  /// Applies every recorded change in one BroadPhase::update() (the boxes as
  /// one batch move), removes the pairs that ended from the pair cache and
  /// adds those that began and that needsBroadphaseCollision() accepts;
  /// pairs it refuses while they overlap are asked again at every call.
  /// Nothing to apply: no update, only the refused pairs asked again.
  void calculateOverlappingPairs(btDispatcher* dispatcher) override;
  /// The pair cache this broadphase feeds.
  btOverlappingPairCache* getOverlappingPairCache() override { return cache_; }
  /// The pair cache this broadphase feeds.
  const btOverlappingPairCache* getOverlappingPairCache() const override { return cache_; }
  /// The union of every live proxy's box as Bullet gave it, parked ones
  /// left out (a pass over the proxies); zero when there is none.
  void getBroadphaseAabb(btVector3& aabbMin, btVector3& aabbMax) const override;
  /// With no live proxy: a fresh BroadPhase and pool, so that a rerun of the
  /// same scene issues the same unique ids. Otherwise nothing.
  void resetPool(btDispatcher* dispatcher) override;
  /// One line on stdout: the counts of stats(), the structure, the threads
  /// and the BroadPhase's memory.
  void printStats() override;

  // --- Beyond Bullet's interface ---

  /// The BroadPhase inside, for its own queries (nearest, castRays, ...);
  /// indices it reports lead to proxies through proxyAt().
  const BroadPhase& broadPhase() const { return *bp_; }
  /// The live proxy at a BroadPhase index, or null.
  Proxy* proxyAt(uint32_t index);
  /// The BroadPhase handle of a proxy this broadphase created.
  static ProxyId handleOf(const btBroadphaseProxy* proxy) {
    return static_cast<const Proxy*>(proxy)->handle();
  }

  /// Counts for printStats() and tests.
  struct Stats {
    uint32_t proxies = 0;        ///< live
    uint32_t staticProxies = 0;  ///< of those, static in the BroadPhase
    uint64_t updates = 0;        ///< BroadPhase::update() calls
    uint32_t lastMoves = 0;      ///< boxes in the last update's move batch
    uint32_t lastBegun = 0;      ///< pairs begun at the last update
    uint32_t lastEnded = 0;      ///< pairs ended at the last update
    uint32_t refused = 0;        ///< overlapping pairs Bullet's filter refuses (asked each step)
    uint64_t invalidBoxes = 0;   ///< boxes with a NaN or min > max, not applied
    uint64_t queryFlushes = 0;   ///< queries that applied the pending boxes first
  };
  /// The counts as of now.
  const Stats& stats() const { return stats_; }

 private:
  /// A pair Bullet's filter refused while its boxes overlap: asked again at
  /// every calculateOverlappingPairs() until it is accepted or ends, since
  /// the filter may change its mind (a callback's state, a proxy's fields).
  struct Refused {
    uint32_t a, b;
    uint64_t tokenA, tokenB;
    uint64_t key() const { return (uint64_t(a) << 32) | b; }
  };

  Proxy& slot(uint32_t index) { return chunks_[index >> kChunkBits][index & (kChunk - 1)]; }
  const Proxy& slot(uint32_t index) const {
    return chunks_[index >> kChunkBits][index & (kChunk - 1)];
  }
  Filter filterFor(const Proxy& p) const;
  bool staticFor(const Proxy& p) const;
  void applyRules(Proxy& p);
  void markDirty(Proxy& p);
  void unlinkDirty(Proxy& p);
  void syncCallbackMode();
  void sync(btDispatcher* dispatcher);
  void feedPairs(const FramePairs& frame, btDispatcher* dispatcher);
  void removeDeferred(btDispatcher* dispatcher);
  void prepareQuery();
  void sweptCandidates(const Vec3& origin, const Vec3& d, const Vec3& half, float lambda,
                       btBroadphaseRayCallback& callback);
  void noteDispatcher(btDispatcher* dispatcher) {
    if (dispatcher != nullptr) dispatcher_ = dispatcher;
  }

  Config config_;
  std::unique_ptr<btOverlappingPairCache> ownedCache_;
  btOverlappingPairCache* cache_;
  std::unique_ptr<BroadPhase> bp_;
  /// The pool: slot i holds the proxy of BroadPhase index i (indices are
  /// dense), in chunks that never move, so Bullet's pointers stay valid.
  static constexpr uint32_t kChunkBits = 10, kChunk = 1u << kChunkBits;
  std::vector<std::unique_ptr<Proxy[]>> chunks_;
  uint32_t slots_ = 0;  ///< slots in use: one past the highest index issued
  /// Proxies created or moved since the last update: their boxes are not
  /// yet in the structure, so queries test them one by one.
  std::vector<Proxy*> dirty_;
  std::vector<Refused> refused_, refusedNext_;
  std::vector<ProxyId> moveIds_;
  std::vector<Aabb> moveBoxes_;
  std::vector<uint64_t> endedKeys_;
  uint64_t nextToken_ = 1;
  /// Something the next update() must apply: an add, a remove, a box, a filter.
  bool changed_ = false;
  bool callbackMode_ = false;  ///< the pair cache had an overlap filter callback at the last look
  /// The last dispatcher Bullet passed in: a query that applies pending boxes
  /// removes ended pairs (and frees their algorithms) through it.
  btDispatcher* dispatcher_ = nullptr;
  Stats stats_;
};

}  // namespace bp::bullet
