/// \file
/// BroadPhase: what a physics engine links. One object, either structure
/// behind it, pairs and ray hits out.
///
///   bp::BroadPhase broadphase({.structure = bp::Structure::automatic});
///   bp::ProxyId id = broadphase.add({.box = box, .motion = bp::MotionType::dynamic,
///                                    .userData = bodyIndex});
///   ...every frame:
///   broadphase.move(id, newBox);            // or a span of ids and boxes
///   const bp::FramePairs& f = broadphase.update();
///   for (const bp::ProxyPair& p : f.begun) narrowphase.addContact(p.userDataA, p.userDataB);
///   for (const bp::ProxyPair& p : f.ended) narrowphase.removeContact(p.userDataA, p.userDataB);
///
/// Timing model: add(), remove() and move() only record what changed; update()
/// applies it all at once, in parallel tasks, and computes the frame's pairs.
/// Queries (const) see the world as of the last update(), never a half-applied
/// frame, and may be called from many threads at once between updates. One
/// exception, so that no query ever names a dead proxy: a removed proxy is
/// not reported from the moment remove() returns.
///
/// With BroadPhaseConfig::concurrentQueries, queries may also run on other
/// threads while one thread (the writer) runs update() and the mutators.
/// They read a query structure of their own, which update() leaves alone
/// until a short publish at its end (the frame's changes recorded, not yet
/// applied); the first query after it brings the structure up to the frame
/// on its own thread. Queries answer against the last completed frame
/// throughout, and wait only while a publish, a remove(), a setFilter(), a
/// shiftOrigin() or another query's catch-up writes what they read. QueryFrame tells a
/// query thread which frame it saw and gives that frame's user data. The
/// other const members (userData(), handleOf(), desc(), contains(),
/// proxyCount(), lastPairs()) read the writer's state: call them on the
/// writer's thread, or where the engine knows the writer is idle.
///
/// Errors: a call that rejects its input reports an ErrorCode and a message
/// before changing anything (error.h): to the error handler if one is
/// installed, after which the call returns at once with the fallback value
/// named below and no effect; else by throwing bp::Error (a build with
/// exceptions) or printing the error and aborting (a build without). See
/// docs/errors.md, which lists every fallback.
#pragma once

#include <broadphase/double_query.h>
#include <broadphase/error.h>
#include <broadphase/jobs/scheduler.h>
#include <broadphase/layers.h>
#include <broadphase/math/aabb.h>
#include <broadphase/math/daabb.h>
#include <broadphase/math/dray.h>
#include <broadphase/math/ray.h>
#include <broadphase/pair.h>
#include <broadphase/proxy_id.h>
#include <broadphase/query.h>
#include <broadphase/ray_hit.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace bp {

/// Which structure finds the pairs and answers the queries. Every structure
/// gives the same pairs, events and query results, bit for bit.
enum class Structure : uint8_t {
  bvh,        ///< one dynamic AABB tree (statics in a tree of their own inside it)
  sweep,      ///< one cell-partitioned sweep-and-prune
  automatic,  ///< the structure measured fastest for a frame's pairs: today the cell sweep,
              ///< statics in cells of their own (see docs/threading.md, "automatic")
};

/// When the float rays (castRay in every form, castRayAll, castRays) walk a
/// tree of their own: a 4-wide tree over every proxy's box, built for rays
/// and kept beside the structure, made on a ray after a change (rebuilt
/// after adds, refit after moves). Results are the same, bit for bit,
/// whichever walks; only the speed differs (docs/rays.md).
enum class RayTreeMode : uint8_t {
  automatic,  ///< when the rays cast since the last change, or between the two before, pay for
              ///< it, or a world casts steadily (docs/rays.md)
  always,     ///< on the first ray after every change
  never,      ///< rays walk the structure
};

/// How a proxy moves, which decides what it pairs with: static with static
/// never pairs, kinematic with static never, kinematic with kinematic only
/// when BroadPhaseConfig::pairKinematicKinematic is set.
enum class MotionType : uint8_t {
  staticBody,  ///< never moves (moving one is allowed: it re-sorts the static cells or subtree)
  kinematic,   ///< moved by the user; never paired with statics
  dynamic,     ///< simulated
};

/// Collision filter, as in Box2D: a pair is reported when each accepts the
/// other, i.e. (a.category & b.mask) != 0 && (b.category & a.mask) != 0.
struct Filter {
  uint64_t category = 1;         ///< the bits this proxy is
  uint64_t mask = ~uint64_t(0);  ///< the categories it pairs with
  /// Whether this filter and `other` accept each other (symmetric).
  bool accepts(const Filter& other) const {
    return (category & other.mask) != 0 && (other.category & mask) != 0;
  }
};

/// What add() takes and desc() returns: everything a proxy is.
struct ProxyDesc {
  Aabb box{};                               ///< exact bounds, valid (isValid)
  MotionType motion = MotionType::dynamic;  ///< see MotionType
  Filter filter{};                          ///< see Filter
  uint64_t userData = 0;  ///< carried by its pairs (ProxyPair) and userData(index)
  /// Broadphase layer, < kMaxLayers (layers.h): the structure never looks
  /// for pairs between layers that the layer table keeps apart.
  uint32_t layer = 0;
};

/// What the double-precision add() takes: a ProxyDesc whose box is a DAabb
/// in world coordinates (docs/large_worlds.md).
struct DProxyDesc {
  DAabb box{};                              ///< exact bounds in double, valid (isValid)
  MotionType motion = MotionType::dynamic;  ///< see MotionType
  Filter filter{};                          ///< see Filter
  uint64_t userData = 0;                    ///< as ProxyDesc::userData
  uint32_t layer = 0;                       ///< as ProxyDesc::layer
};

/// How a BroadPhase is built; fixed for its lifetime, but for `layers` (setLayerTable()).
struct BroadPhaseConfig {
  Structure structure = Structure::automatic;  ///< see Structure
  /// 0: every hardware thread. More than the hardware threads raises
  /// oneTBB's process-wide worker cap (tbb::global_control) while this
  /// BroadPhase lives.
  int threads = 0;
  tbb::task_arena* arena = nullptr;  ///< share an engine's arena (then `threads` is ignored)
  /// Const queries may run on other threads while update() and the
  /// mutators run: they read a query structure of their own (a second
  /// structure of the configured kind): update() records the frame's
  /// changes for it in a short publish at its end, under an exclusive lock,
  /// and the first query after that applies them on the querying thread
  /// (see the file comment, QueryFrame, and docs/threading.md, "Queries
  /// during update"). Costs the writer that publish each frame (a copy of
  /// the moved boxes), the first query of a frame the catch-up, and memory
  /// a second structure; false, the default: queries read the pair
  /// structure and take no lock.
  bool concurrentQueries = false;
  /// Fat-box margin of the tree (Structure::bvh), world units. 0, the
  /// default, keeps exact boxes in the leaves: measured fastest on every
  /// standard scene (see BvhConfig::margin); a margin pays off only when most
  /// proxies barely move between frames.
  float margin = 0.0f;
  float cellSize = 0.0f;                ///< sweep cell edge; 0 = chosen from the boxes
  bool pairKinematicKinematic = false;  ///< report kinematic-kinematic pairs too
  /// Upper bound on the pairs of one frame, counted after the filters and
  /// motion rules. A frame with more makes update() (either form) report
  /// Error(capacityExceeded), and its time and memory are bounded by
  /// maxPairs and the proxy count, not by the pairs it would have: the
  /// structure's tasks count the accepted pairs as they find them, in
  /// batches, and stop once the count passes maxPairs. A frame with exactly
  /// maxPairs pairs succeeds. 0 = no bound (the default; the pair finding
  /// then does no counting at all).
  uint64_t maxPairs = 0;
  /// Which broadphase layers collide (layers.h); the default lets every
  /// layer collide with every layer. setLayerTable() replaces it later. A
  /// table that is not symmetric is rejected with invalidArgument; fallback:
  /// the default table.
  LayerTable layers{};
  /// When rays use their own tree (RayTreeMode). With concurrentQueries the
  /// query thread makes it on its own thread, never on the arena.
  RayTreeMode rayTree = RayTreeMode::automatic;
};

/// A pair as the narrowphase receives it: indices a < b of the two proxies
/// (ProxyId::index) and both user data.
struct ProxyPair {
  uint32_t a;          ///< the lower proxy index
  uint32_t b;          ///< the higher proxy index
  uint64_t userDataA;  ///< proxy a's user data in the pair's frame
  uint64_t userDataB;  ///< proxy b's user data in the pair's frame
  /// (a << 32) | b: unique per pair, ordered like (a, b).
  uint64_t key() const { return (uint64_t(a) << 32) | b; }
};
static_assert(sizeof(ProxyPair) == 24);

/// The output of one update(). Views into the BroadPhase, valid until the next
/// update(); all three sorted by (a, b) and identical for any thread count.
/// After a frame without pairs (the first update), begun views the same
/// list as pairs.
struct FramePairs {
  std::span<const ProxyPair> pairs;  ///< every overlapping pair now
  std::span<const ProxyPair> begun;  ///< pairs that overlap now and did not at the last update
  std::span<const ProxyPair> ended;  ///< pairs of the last update that no longer overlap,
                                     /// including those ended by a remove()
};

/// Where BroadPhase::memoryBytes() goes: the heap bytes a BroadPhase owns,
/// by part (docs/memory.md). Capacities, not sizes: what is held.
struct MemoryUse {
  size_t structure = 0;  ///< the structure (BVH or sweep) and its slot -> proxy map
  /// The rays' tree, while one is made (RayTreeMode); with
  /// concurrentQueries the query structure's tree, which counts in queryView.
  size_t rayTree = 0;
  /// Per proxy: box, user data, filter and motion, structure handle, state
  /// bytes, the handle pool; and the BroadPhase object itself.
  size_t proxies = 0;
  size_t changes = 0;  ///< the changes pending for the next update(), and the batch scratch
  /// The pair lists: this frame's and the last frame's (24 bytes a pair),
  /// the structure's (8 bytes a pair) and its pair buffers.
  size_t pairs = 0;
  size_t events = 0;     ///< the begun and ended lists and the pieces they are merged in
  size_t doubles = 0;    ///< the double proxies' DAabbs; 0 in a float-only world
  size_t queryView = 0;  ///< concurrentQueries' structure and copies; 0 without
  /// The sum: memoryBytes().
  size_t total() const {
    return structure + rayTree + proxies + changes + pairs + events + doubles + queryView;
  }
};

/// The broadphase an engine links: proxies in, pairs, events and query
/// answers out, over the structure the config names (see the file comment
/// for the timing model and errors).
class BroadPhase {
 public:
  /// A bad field (negative thread count, margin or cell size not finite and
  /// >= 0, unknown structure) is rejected with invalidArgument; fallback:
  /// that field's default (one report per bad field).
  explicit BroadPhase(const BroadPhaseConfig& config = {});
  ~BroadPhase();
  BroadPhase(const BroadPhase&) = delete;
  BroadPhase& operator=(const BroadPhase&) = delete;

  // --- Proxies. Cheap: recorded now, applied by the next update(). ---

  /// Rejects a bad box (invalidBox) or motion type (invalidArgument);
  /// fallback: ProxyId{}, which contains() rejects.
  ProxyId add(const ProxyDesc& desc);
  /// All validated before any is added; out.size() must equal descs.size().
  /// Fallback: every entry of `out` is ProxyId{}, and none is added.
  void add(std::span<const ProxyDesc> descs, std::span<ProxyId> out);
  /// Rejects a removed, unknown or foreign handle (staleHandle); fallback:
  /// nothing removed.
  void remove(ProxyId id);
  void remove(std::span<const ProxyId> ids);  ///< all validated first; no duplicates
  /// The proxy's new exact box. Rejects staleHandle or invalidBox; fallback:
  /// nothing moved (so for the batch form: no entry).
  void move(ProxyId id, const Aabb& box);
  void move(std::span<const ProxyId> ids, std::span<const Aabb> boxes);  ///< all validated first
  /// Queries use the new filter at once; pairs follow it from the next
  /// update() (a pair it rejects then ends, one it accepts begins). Rejects
  /// staleHandle; fallback: no effect.
  void setFilter(ProxyId id, const Filter& filter);
  /// The user data that pairs of the next update() carry and userData()
  /// returns from now on. Pairs already reported keep the data of their
  /// frame (an ended pair carries what its frame reported). Rejects
  /// staleHandle; fallback: no effect.
  void setUserData(ProxyId id, uint64_t userData);
  /// A body that falls asleep becomes static, a kinematic body dynamic. The
  /// proxy keeps its handle and index; queries see the change at the next
  /// update(), which moves the proxy between the structure's static and
  /// moving parts when needed. Pairs stay exact: a pair that still stands is
  /// neither ended nor begun, one the motion rules now reject (static with
  /// static or kinematic) ends, one they now allow begins. Rejects
  /// staleHandle, or invalidArgument for an unknown motion type; fallback:
  /// no effect.
  void setMotionType(ProxyId id, MotionType motion);
  /// Moves the proxy to another broadphase layer (< kMaxLayers). As
  /// setMotionType: it keeps its handle and index, the structure moves it at
  /// the next update(), whose pairs follow the new layer (a pair that still
  /// stands gets no event, one the layer table now rejects ends, one it now
  /// allows begins). Rejects staleHandle, or invalidArgument for a layer out
  /// of range; fallback: no effect.
  void setLayer(ProxyId id, uint32_t layer);
  /// Replaces the layer table (layers.h). Pairs follow it from the next
  /// update(): pairs of layers it no longer lets collide end there, pairs it
  /// now lets collide begin; queries do not look at layers. Rejects a table
  /// that is not symmetric (invalidArgument); fallback: no effect.
  void setLayerTable(const LayerTable& table);
  /// The layer table in force (as given to the config or setLayerTable).
  const LayerTable& layerTable() const;

  /// Whether `id` names a live proxy of this broadphase (never reports).
  bool contains(ProxyId id) const;
  /// The live handle at an index (pairs, hits and query callbacks give
  /// indices). Rejects staleHandle when no proxy lives there; fallback
  /// ProxyId{}.
  ProxyId handleOf(uint32_t index) const;
  /// The user data of the live proxy at an index: the cheap way from a query
  /// callback's or a hit's index to the engine's body (one array read, no
  /// ProxyDesc copy). Rejects staleHandle when no proxy lives there;
  /// fallback 0.
  uint64_t userData(uint32_t index) const;
  /// As last given (the box and motion type may be pending). Rejects
  /// staleHandle; fallback ProxyDesc{} with the box Aabb::empty().
  ProxyDesc desc(ProxyId id) const;
  /// Live proxies, pending adds included.
  uint32_t proxyCount() const;

  // --- The frame. ---

  /// Applies every pending add, remove and move, then computes the pairs and
  /// the begin/end events. Reports Error(capacityExceeded), with maxPairs in
  /// its message, when the frame has more than maxPairs pairs: the proxies
  /// are updated and the structure is valid, and the fallback is the last
  /// frame's pairs and events, unchanged (lastPairs() as before); the next
  /// update() reports its begun/ended against those pairs.
  const FramePairs& update();
  /// Streaming form for engines that consume pairs per task: `consume` is called
  /// from worker threads with unsorted chunks (filters applied), every pair of
  /// the frame exactly once. No merged list and no begin/end events are kept:
  /// lastPairs() is empty after it, and the next update() reports every pair
  /// as begun. maxPairs bounds it as it bounds update(): the pairs are counted
  /// before `consume` is called, so a frame over maxPairs reports
  /// Error(capacityExceeded) with `consume` never called (the fallback), and
  /// leaves lastPairs() and the next update()'s events as a failed update()
  /// does.
  void update(FunctionRef<void(std::span<const ProxyPair>)> consume);
  /// The last update()'s pairs and events (empty after the streaming form).
  const FramePairs& lastPairs() const;
  /// Wakes the worker threads for the coming update(), without waiting for
  /// them. A worker that slept between frames takes 5-25 us to join the first
  /// fork (measured on 2-vCPU VMs), a tenth of a small frame's two-thread
  /// time. The wake itself costs the calling thread too: 0.1 us while the
  /// workers still spin, 7-8 us after 1-10 ms of sleep on the project's VM.
  /// So call it when the frame's serial part starts (while the moves are
  /// gathered), where both costs overlap work, not just before update().
  /// Not needed when the workers just ran other tasks (the engine's
  /// integration). A no-op on one thread.
  void wakeWorkers();

  /// A query thread's hold on the published frame (concurrentQueries). While
  /// it lives, every query this thread makes on the BroadPhase answers
  /// against one frame, index(), and userData() gives that frame's user
  /// data. Taking it brings the query structure up to the last publish
  /// first, on this thread, if no query has yet. The publish at the end of
  /// update(), remove(), setFilter() and shiftOrigin() wait until it is
  /// destroyed: hold it briefly. A query made
  /// without one takes the same hold for its own duration. Made on the stack
  /// of the querying thread (not movable); frames nest. The thread that
  /// calls update() or a mutator must not hold one (it would wait for
  /// itself). Without concurrentQueries it reports invalidArgument;
  /// fallback: a frame that holds nothing, with index() 0 and userData() as
  /// BroadPhase::userData().
  class QueryFrame {
   public:
    /// Takes the hold (shared with other query threads).
    explicit QueryFrame(const BroadPhase& broadphase);
    ~QueryFrame();  ///< releases the hold
    QueryFrame(const QueryFrame&) = delete;
    QueryFrame& operator=(const QueryFrame&) = delete;
    /// The publishes before this frame: 0 before the first update(), then
    /// one more per update() (either form, also one that reports
    /// capacityExceeded) and per shiftOrigin().
    uint64_t index() const { return index_; }
    /// The user data a proxy has in this frame (what its pairs of the frame
    /// carry; a later setUserData() shows from the next publish). Rejects
    /// staleHandle for an index no query of the frame reports (never added,
    /// added after the frame, or removed); fallback 0.
    uint64_t userData(uint32_t proxy) const;

   private:
    friend class BroadPhase;
    const BroadPhase& owner_;
    const QueryFrame* below_;  // the frame this thread made before (a per-thread stack)
    uint64_t index_ = 0;
    bool locked_ = false;  // this frame took the lock (the outermost of its BroadPhase)
  };

  // --- Queries: const, thread-safe between updates (during them with
  // concurrentQueries), see the last update(). ---
  // Every query takes a filter: a proxy is reported only when the filter and
  // the proxy's filter accept each other. Results are proxy indices
  // (userData(index) gives the engine's data). Fallbacks of a rejected
  // query: no callback call, a miss (RayHit{}), an empty `out` vector,
  // every slot of castRays' `out` a miss, or castRaysAll's `hits` empty and
  // every offset 0.

  /// Calls `callback` for every proxy whose box overlaps `box` (touching
  /// counts), in no particular order, until it returns false. A bad box is
  /// rejected with invalidBox.
  void queryBox(const Aabb& box, OverlapCallback callback, const Filter& filter = {}) const;
  /// Calls `callback` for every proxy whose box contains `point` (boundary
  /// included), until it returns false. Rejected with invalidArgument when
  /// the point is not finite or beyond 2^24.
  void queryPoint(const Vec3& point, OverlapCallback callback, const Filter& filter = {}) const;
  /// The closest hit (smallest entry t, ties to the lower index) or any hit
  /// of a ray given as origin, any non-zero direction and a length; a bad ray
  /// is rejected with invalidRay, RayQuery::all with invalidArgument.
  RayHit castRay(const Vec3& origin, const Vec3& direction, float length,
                 RayQuery kind = RayQuery::closest, const Filter& filter = {}) const;
  /// Every hit of the ray, sorted by doubleHitBefore() (entry t, then index).
  void castRayAll(const Vec3& origin, const Vec3& direction, float length, std::vector<RayHit>& out,
                  const Filter& filter = {}) const;
  /// castRay for a ray already built with makeRay() (bit-identical results
  /// for callers that keep their rays); validated the same way.
  RayHit castRay(const Ray& ray, RayQuery kind = RayQuery::closest,
                 const Filter& filter = {}) const;
  /// castRayAll for a ray already built with makeRay().
  void castRayAll(const Ray& ray, std::vector<RayHit>& out, const Filter& filter = {}) const;
  /// The narrowphase in the loop (see RayCallback in query.h).
  void castRay(const Vec3& origin, const Vec3& direction, float length, RayCallback callback,
               const Filter& filter = {}) const;
  /// One result per ray, in parallel, deterministic. kind: closest or any.
  void castRays(std::span<const Ray> rays, std::span<RayHit> out, RayQuery kind = RayQuery::closest,
                const Filter& filter = {}) const;
  /// Every hit of every ray, in parallel, deterministic: the hits of rays[r]
  /// are hits[offsets[r]] up to hits[offsets[r + 1]], sorted as castRayAll
  /// sorts them; `offsets` gets rays.size() + 1 entries. One bad ray rejects
  /// the batch with invalidRay.
  void castRaysAll(std::span<const Ray> rays, std::vector<RayHit>& hits,
                   std::vector<size_t>& offsets, const Filter& filter = {}) const;
  /// Makes the rays' tree now, when `rayTree` is not RayTreeMode::never
  /// and it is not up to date, so that the next rays and nearest searches
  /// do not pay for it (docs/rays.md): after an update() that a frame of
  /// many rays follows, or once a static world is loaded. Const and
  /// thread-safe as a query.
  void prepareRays() const;
  /// The k proxies nearest to `point`, nearest first, ties to the lower
  /// index. Distance: distanceSquared(box, point) of math/aabb.h, in float
  /// (per axis max(min - p, p - max, 0), squared, summed x, y, z; 0 inside),
  /// so a caller computing the same expression reproduces every tie.
  /// Rejects invalidArgument for k = 0 or a point that is not finite or
  /// beyond 2^24; fallback: `out` empty.
  void nearest(const Vec3& point, uint32_t k, std::vector<Neighbour>& out,
               const Filter& filter = {}) const;
  /// nearest() of every point, in parallel, deterministic: the neighbours of
  /// points[q] are out[offsets[q]] up to out[offsets[q + 1]] (k, or fewer
  /// when fewer proxies are accepted); `offsets` gets points.size() + 1
  /// entries. One bad point, or k = 0, rejects the batch with
  /// invalidArgument; fallback: `out` empty, every offset 0. The batch counts
  /// toward the rays' tree as a whole (docs/rays.md): a large batch walks
  /// the tree from its first point.
  void nearest(std::span<const Vec3> points, uint32_t k, std::vector<Neighbour>& out,
               std::vector<size_t>& offsets, const Filter& filter = {}) const;
  /// A box of half-size `halfExtent` centred at `origin` swept along the ray:
  /// the first proxy it touches, as the ray against every box grown by the
  /// half extent (t = 0 for a box touched at the start), ties to the lower
  /// index. Rejects invalidRay, or invalidArgument for a half extent that is
  /// not finite or negative; fallback: a miss.
  RayHit castBox(const Vec3& halfExtent, const Vec3& origin, const Vec3& direction, float length,
                 const Filter& filter = {}) const;

  // --- Large worlds. ---
  /// Moves the origin: every proxy's box becomes box - offset. Applied now,
  /// with any pending changes, and the structure is rebuilt in the new frame:
  /// every query answers at once, in shifted coordinates. Pairs are kept; the
  /// next update() reports only real changes. Rejects an offset that is not
  /// finite (invalidArgument) or one that would take a box past
  /// kMaxCoordinate (invalidBox); fallback: no shift, nothing changes.
  /// Double proxies keep their double boxes and answers; their float boxes
  /// are rounded outward again in the new frame (docs/large_worlds.md).
  /// Also rejects, with invalidBox, a shift that takes a double proxy's
  /// float box past kMaxCoordinate.
  void shiftOrigin(const Vec3& offset);
  /// Where the float frame's zero lies in double world coordinates: the sum
  /// of every shiftOrigin() offset (zero at first).
  DVec3 origin() const;

  // --- Double precision (docs/large_worlds.md). ---
  // A proxy added with a DProxyDesc is a double proxy for its life: the
  // facade keeps its exact DAabb, the structure a float box relative to
  // origin() rounded outward, and every pair with a double proxy is decided
  // in double. The double queries answer in double against every proxy (a
  // float proxy counts as its box + origin(), summed in double). The float
  // API sees a double proxy through its float box (desc().box).

  /// Rejects invalidBox (NaN/inf, inverted, or a float box past
  /// kMaxCoordinate from origin()) or invalidArgument (motion type);
  /// fallback ProxyId{}.
  ProxyId add(const DProxyDesc& desc);
  /// All validated first; fallback: every entry of `out` ProxyId{}, none added.
  void add(std::span<const DProxyDesc> descs, std::span<ProxyId> out);
  /// A double proxy's new exact box. Rejects staleHandle, invalidBox as
  /// add(), or invalidArgument for a float proxy (and the float move()
  /// rejects a double proxy so); fallback: nothing moved.
  void move(ProxyId id, const DAabb& box);
  void move(std::span<const ProxyId> ids, std::span<const DAabb> boxes);  ///< all validated first
  /// The box a double query tests: a double proxy's DAabb as last given, a
  /// float proxy's box + origin(). Rejects staleHandle; fallback: the empty
  /// box (min +inf, max -inf).
  DAabb worldBox(ProxyId id) const;
  /// queryBox() decided in double. Rejects invalidBox for a box that is not
  /// finite or is inverted.
  void queryBox(const DAabb& box, OverlapCallback callback, const Filter& filter = {}) const;
  /// queryPoint() decided in double. Rejects invalidArgument for a point
  /// that is not finite.
  void queryPoint(const DVec3& point, OverlapCallback callback, const Filter& filter = {}) const;
  /// castRay() in double: the entry distance computed in double against the
  /// double boxes (intersectRayAabb(DRay, DAabb) of math/dray.h). Rejects
  /// invalidRay (describeInvalidRay(), or an origin farther than
  /// kMaxCoordinate from origin() on some axis), invalidArgument for
  /// RayQuery::all; fallback: a miss.
  DRayHit castRay(const DVec3& origin, const DVec3& direction, double length,
                  RayQuery kind = RayQuery::closest, const Filter& filter = {}) const;
  /// Every hit of the double ray, sorted by doubleHitBefore(); rejected as castRay.
  void castRayAll(const DVec3& origin, const DVec3& direction, double length,
                  std::vector<DRayHit>& out, const Filter& filter = {}) const;
  /// nearest() ranked by distanceSquared(DAabb, DVec3), in double. Rejects
  /// invalidArgument for k = 0 or a point that is not finite.
  void nearest(const DVec3& point, uint32_t k, std::vector<DNeighbour>& out,
               const Filter& filter = {}) const;

  // --- Snapshots (docs/snapshots.md). ---
  /// Writes the complete state into `out`, replacing its contents: every
  /// proxy (box, filter, motion type, user data, handle generation), the
  /// free slots in the order later add() calls reuse them, the changes
  /// pending for the next update(), the last frame's pairs and events, and
  /// the config values that change results (maxPairs,
  /// pairKinematicKinematic). A BroadPhase that loads it then gives the same
  /// handles, pairs, events, user data and query results, bit for bit, as
  /// this one would (queryBox/queryPoint visit the same proxies, maybe in
  /// another order; RayQuery::any finds a hit where this one does). Compact
  /// little-endian bytes with a version and a checksum; never reports.
  void saveState(std::vector<std::byte>& out) const;
  /// Replaces this BroadPhase's state with the snapshot's, into any
  /// structure and thread count: the structure is rebuilt from the proxies
  /// (this object's structure, threads, arena, margin and cell size stay;
  /// maxPairs and pairKinematicKinematic become the snapshot's). Rejects
  /// bytes that are truncated, corrupted, of another format version, or
  /// describe an inconsistent state with invalidState, naming what is
  /// wrong; everything is decoded and checked before anything changes, so
  /// the fallback is no effect.
  void loadState(std::span<const std::byte> bytes);

  // --- Introspection. ---
  std::string validate() const;  ///< empty when every invariant holds
  size_t memoryBytes() const;    ///< heap bytes owned, structures included: memoryUse().total()
  MemoryUse memoryUse() const;   ///< memoryBytes() by part
  /// The pairs the structure found in the last update() (either form),
  /// before the category/mask filters and motion rules: the candidates those
  /// filters examined (pairs of layers that never collide are never among
  /// them). With maxPairs set, the structure applies those filters as it
  /// counts, so this is the pairs after them; 0 after an update() over
  /// maxPairs, which keeps none.
  uint64_t lastStructurePairs() const;
  Structure structure() const;  ///< as configured
  Scheduler& scheduler();       ///< the arena its tasks run in
  int threadCount() const;      ///< the arena's threads

 private:
  struct Impl;  // everything a BroadPhase holds (src/facade/broad_phase_impl.h)
  std::unique_ptr<Impl> impl_;
};

}  // namespace bp
