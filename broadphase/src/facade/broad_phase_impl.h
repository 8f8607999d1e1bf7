// BroadPhase::Impl: everything a BroadPhase holds, behind the public
// header: the config and the scheduler, the structure (Side), the per-proxy
// arrays, the change log of the next update(), the frame's pairs and events,
// the query view (concurrentQueries) and the double world.
//
// BroadPhase forwards each call of its API here (broad_phase_api.cpp); the
// members live in the files named after what they own (see
// broad_phase.cpp's file comment).
#pragma once

#include <broadphase/broad_phase.h>

#include "common/handle_pool.h"
#include "facade/filter_store.h"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace bp {

class RayTree;
struct EvenChunks;

struct BroadPhase::Impl {
  explicit Impl(const BroadPhaseConfig& config);
  ~Impl();
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  // --- The API, as BroadPhase declares and documents it. ---
  ProxyId add(const ProxyDesc& desc);
  void add(std::span<const ProxyDesc> descs, std::span<ProxyId> out);
  void remove(ProxyId id);
  void remove(std::span<const ProxyId> ids);
  void move(ProxyId id, const Aabb& box);
  void move(std::span<const ProxyId> ids, std::span<const Aabb> boxes);
  void setFilter(ProxyId id, const Filter& filter);
  void setUserData(ProxyId id, uint64_t userData);
  void setMotionType(ProxyId id, MotionType motion);
  void setLayer(ProxyId id, uint32_t layer);
  void setLayerTable(const LayerTable& table);
  const LayerTable& layerTable() const { return config_.layers; }
  bool contains(ProxyId id) const;
  ProxyId handleOf(uint32_t index) const;
  uint64_t userData(uint32_t index) const;
  ProxyDesc desc(ProxyId id) const;
  uint32_t proxyCount() const;
  const FramePairs& update();
  void update(FunctionRef<void(std::span<const ProxyPair>)> consume);
  const FramePairs& lastPairs() const { return frame_; }
  void wakeWorkers() { scheduler_->wake(); }
  void queryBox(const Aabb& box, OverlapCallback callback, const Filter& filter = {}) const;
  void queryPoint(const Vec3& point, OverlapCallback callback, const Filter& filter = {}) const;
  RayHit castRay(const Vec3& origin, const Vec3& direction, float length,
                 RayQuery kind = RayQuery::closest, const Filter& filter = {}) const;
  void castRayAll(const Vec3& origin, const Vec3& direction, float length, std::vector<RayHit>& out,
                  const Filter& filter = {}) const;
  RayHit castRay(const Ray& ray, RayQuery kind = RayQuery::closest,
                 const Filter& filter = {}) const;
  void castRayAll(const Ray& ray, std::vector<RayHit>& out, const Filter& filter = {}) const;
  void castRay(const Vec3& origin, const Vec3& direction, float length, RayCallback callback,
               const Filter& filter = {}) const;
  void castRays(std::span<const Ray> rays, std::span<RayHit> out, RayQuery kind = RayQuery::closest,
                const Filter& filter = {}) const;
  void castRaysAll(std::span<const Ray> rays, std::vector<RayHit>& hits,
                   std::vector<size_t>& offsets, const Filter& filter = {}) const;
  void prepareRays() const;
  void nearest(const Vec3& point, uint32_t k, std::vector<Neighbour>& out,
               const Filter& filter = {}) const;
  void nearest(std::span<const Vec3> points, uint32_t k, std::vector<Neighbour>& out,
               std::vector<size_t>& offsets, const Filter& filter = {}) const;
  RayHit castBox(const Vec3& halfExtent, const Vec3& origin, const Vec3& direction, float length,
                 const Filter& filter = {}) const;
  void shiftOrigin(const Vec3& offset);
  DVec3 origin() const;
  ProxyId add(const DProxyDesc& desc);
  void add(std::span<const DProxyDesc> descs, std::span<ProxyId> out);
  void move(ProxyId id, const DAabb& box);
  void move(std::span<const ProxyId> ids, std::span<const DAabb> boxes);
  DAabb worldBox(ProxyId id) const;
  void queryBox(const DAabb& box, OverlapCallback callback, const Filter& filter = {}) const;
  void queryPoint(const DVec3& point, OverlapCallback callback, const Filter& filter = {}) const;
  DRayHit castRay(const DVec3& origin, const DVec3& direction, double length,
                  RayQuery kind = RayQuery::closest, const Filter& filter = {}) const;
  void castRayAll(const DVec3& origin, const DVec3& direction, double length,
                  std::vector<DRayHit>& out, const Filter& filter = {}) const;
  void nearest(const DVec3& point, uint32_t k, std::vector<DNeighbour>& out,
               const Filter& filter = {}) const;
  void saveState(std::vector<std::byte>& out) const;
  void loadState(std::span<const std::byte> bytes);
  std::string validate() const;
  MemoryUse memoryUse() const;
  uint64_t lastStructurePairs() const;
  Structure structure() const { return config_.structure; }
  Scheduler& scheduler() { return *scheduler_; }
  int threadCount() const { return scheduler_->threadCount(); }

  // --- What the API is made of. ---
  struct Side;         // the structure (a Bvh or a SweepGrid) and its slot -> proxy map
  struct DoubleWorld;  // facade/double_world.h: origin() and the double proxies' boxes
  struct StateCodec;   // saveState and loadState (broad_phase_state.cpp)
  // concurrentQueries: what queries read, and a query's hold on it.
  struct QueryView;
  struct QueryRead;
  const RayTree* rayTree(const QueryRead& read, uint64_t count) const;
  std::unique_ptr<QueryView> view_;
  // kRehome: a pending add of a proxy whose old slot is still in the
  // structure (queued in pendingRemoves_), after a change between static and
  // moving. Queries still find it there until the update.
  enum : uint8_t { kPendingAdd = 1, kInStructure = 2, kPendingMove = 4, kRehome = 8 };

  // Reports a handle that is not live (false then).
  bool checkLive(ProxyId id, const char* what) const;
  ProxyId addChecked(const ProxyDesc& desc);
  void removeChecked(ProxyId id);
  std::unique_ptr<Side> makeStructure() const;
  void rebuild();
  void recordMove(uint32_t index, const Aabb& box);
  void recordBatch(std::span<const ProxyId> ids, std::span<const Aabb> boxes, bool ofDoubles);
  EvenChunks moveChunks(uint32_t n) const;
  // How a list of n pairs is cut into tasks (one chunk below kPairGrain).
  EvenChunks pairChunks(uint32_t n) const;
  // Records entries [begin, end) of a checked batch (see the definition).
  uint32_t recordMoves(std::span<const ProxyId> ids, std::span<const Aabb> boxes, uint32_t begin,
                       uint32_t end, uint32_t* out);
  void reportMoveCulprit(std::span<const ProxyId> ids, std::span<const Aabb> boxes) const;
  // A frame's first batch (see the definition): recorded, rejected (a bad
  // entry: nothing changed, the culprit is to be reported) or not taken.
  enum class FirstBatch : uint8_t { recorded, rejected, notTaken };
  // `checked`: the caller checked every entry already and found each chunk's
  // order in chunkAscending_ (a double batch's float boxes, by move()), so
  // they are recorded without a check.
  FirstBatch recordFirstBatch(std::span<const ProxyId> ids, std::span<const Aabb> boxes,
                              EvenChunks split, bool checked);
  uint32_t checkAndRecord(std::span<const ProxyId> ids, std::span<const Aabb> boxes, uint32_t begin,
                          uint32_t end, bool checked, bool& ascending);
  void restoreStructureBoxes(std::span<const ProxyId> ids, uint32_t begin, uint32_t end);
  // Sets kPendingMove on the entries of an unmarked list (movesUnmarked_).
  void markPendingMoves();
  // A listed proxy stops being a pending move other than through
  // applyPending() (remove, rehome): its entry in pendingMoves_ stays behind
  // and applyPending() drops it.
  void dropIfListed(uint32_t index) {
    markPendingMoves();
    if (state_[index] & kPendingMove) movesDropped_ = true;
  }
  // The rule recordMove and the batch move share: a proxy joins
  // pendingMoves_ unless a move or its add is pending already, and gains
  // kPendingMove unless its add is pending (the add takes the new box).
  static bool joinsPendingMoves(uint8_t state) {
    return (state & (kPendingAdd | kPendingMove)) == 0;
  }
  static uint8_t movedState(uint8_t state) {
    return uint8_t(state | ((state & kPendingAdd) ? 0 : kPendingMove));
  }
  void applyPending();
  bool accepts(uint32_t a, uint32_t b) const;
  // The structure's pairs into structure_->pairs, under a budget when
  // maxPairs is set: false when the frame has more (the list is then empty).
  bool findStructurePairs();
  // The structure's pairs (found) as the frame's ProxyPairs, filtered and sorted.
  void collectPairs(std::vector<ProxyPair>& out);
  // begun_ and ended_ from previous_ and pairs_.
  void computeEvents();
  // collectPairs() and computeEvents() in one merge, for a structure whose
  // pairs all stand as they are (no slot remapped, no special proxy, or
  // only double ones with dropInexactPairs() run first).
  void mergePairsAndEvents();
  // Whether the only special proxies are double ones: then accepts() is
  // exactOverlap() and nothing else.
  bool onlyDoubleSpecial() const;
  // update(consume)'s pairs, mapped and filtered, to `consume` in chunks.
  void streamPairs(FunctionRef<void(std::span<const ProxyPair>)> consume);
  template <class KeyOf, class Merge>
  void mergeInRanges(size_t pairCount, KeyOf&& keyOf, Merge&& merge);
  // Before a frame's events: begun_ and ended_ emptied (and released when
  // oversized); after: the renewed marks and userDataChanged_ cleared.
  void clearEvents();
  void finishEvents();
  // previous_ grown to this frame's length and its pages touched (see the
  // definition), for the next update() to write to.
  void readySpareList();
  // The double path (broad_phase_double.cpp).
  DoubleWorld& doubleWorld();
  bool isDoubleProxy(uint32_t index) const;
  bool checkDoubleBox(const DAabb& box, const std::string& where) const;
  void reportDoubleMoveCulprit(std::span<const ProxyId> ids, std::span<const DAabb> boxes) const;
  void markDouble(uint32_t index, const DAabb& box);
  void forgetDouble(uint32_t index);
  void applyDoubleBoxes();
  bool exactOverlap(uint32_t a, uint32_t b) const;
  bool overlapInDouble(uint32_t a, uint32_t b) const;  // exactOverlap's slow path
  // Takes out of the structure's pairs (slot == proxy index) those that
  // exactOverlap() rejects, keeping the order.
  void dropInexactPairs();
  bool checkDoubleShift(const Vec3& offset) const;
  void applyDoubleShift(const Vec3& offset);
  bool checkDoubleRay(const DVec3& start, const DVec3& direction, double length,
                      const DVec3& frameOrigin, const char* what) const;
  template <class Fn>
  void walkDoubleRay(const QueryRead& read, const DRay& ray, const Filter& filter, Fn&& fn) const;
  std::string validateDouble() const;

  BroadPhaseConfig config_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<Side> structure_;

  /// Per proxy, indexed by ProxyId::index, a ProxyDesc split by use: the
  /// box (move() writes 24 dense bytes a proxy), the user data (8 dense
  /// bytes: the pair loop reads them for every pair, in random order), and
  /// the rules queries and filters read, the filter as a slot of filters_.
  struct Rules {
    uint32_t filterSlot = kDefaultFilter;
    MotionType motion = MotionType::dynamic;
    uint8_t layer = 0;  // < kMaxLayers
  };
  static_assert(sizeof(Rules) == 8);
  HandlePool pool_;
  std::vector<Aabb> boxes_;
  std::vector<uint64_t> userData_;
  std::vector<Rules> rules_;
  FilterStore filters_;
  /// Live proxies with a non-default filter or kinematic motion, plus live
  /// double proxies (whose pairs accepts() decides in double); while 0,
  /// every pair the structure reports stands and accepts() reads nothing.
  uint32_t special_ = 0;
  static bool isSpecial(MotionType motion, const Filter& f) {
    return motion == MotionType::kinematic || !isDefaultFilter(f);
  }
  /// The proxy's slot in the structure (its handle there:
  /// Side::handleOf), 4 bytes where the handle takes 8.
  std::vector<uint32_t> slot_;
  std::vector<uint8_t> state_;
  std::vector<uint8_t> renewed_;  ///< removed (and maybe reused) since the last update

  std::vector<uint32_t> pendingAdds_;
  std::vector<uint32_t> pendingMoves_;
  std::vector<ProxyId> pendingRemoves_;  ///< handles inside the structure
  /// True when some entry of pendingMoves_ no longer names a pending move
  /// (its proxy was removed or rehomed since): applyPending() drops those.
  bool movesDropped_ = false;
  /// True while pendingMoves_ is one first batch recorded without marks
  /// (recordFirstBatch): its entries are unique pending moves, strictly
  /// increasing, but lack kPendingMove; markPendingMoves() sets them before
  /// anything reads them.
  bool movesUnmarked_ = false;
  /// The moves the last applyPending() gave the structure, by proxy index,
  /// each proxy once, its box in boxes_: the query view's publish reads
  /// them, or takes the list (kept only while there is a view).
  std::vector<uint32_t> appliedMoves_;
  /// The structure's batch when its slots are not the proxy indices
  /// (Side::remapped): the slot handles and boxes, gathered.
  std::vector<ProxyId> moveIds_;
  std::vector<Aabb> moveBoxes_;
  /// move(), per chunk of a batch: whether its indices strictly increase,
  /// and how many entries joined the pending list (for a first batch,
  /// recordFirstBatch: where its check and record stopped). Each chunk's
  /// task writes its own entry once, so they need no padding.
  std::vector<uint8_t> chunkAscending_;
  std::vector<uint32_t> chunkCount_;
  std::vector<uint32_t> renewedList_;

  std::vector<ProxyPair> pairs_, previous_, begun_, ended_;
  /// setUserData() (or a snapshot load) since the last frame's pairs were
  /// made: a pair that stands may not copy its user data from that frame.
  bool userDataChanged_ = false;
  /// computeEvents' per-range pieces, kept across frames (no allocation).
  struct EventChunk {
    std::vector<ProxyPair> begun, ended;
  };
  /// What one piece of a merge writes to (mergeInRanges).
  struct EventPieces {
    std::vector<ProxyPair>& begun;
    std::vector<ProxyPair>& ended;
  };
  std::vector<EventChunk> eventChunks_;
  FramePairs frame_;
  /// Allocated by the first double add or shiftOrigin(): a float-only world
  /// pays nothing for the double path.
  std::unique_ptr<DoubleWorld> dworld_;
};

}  // namespace bp
