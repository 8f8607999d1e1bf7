// SweepGrid: sweep-and-prune inside the cells of a sparse uniform grid.
//
// Layout (see docs/structure_contract.md for the API it implements):
// - Space is cut into cells of side cellSize() across (y, z) and cellLength()
//   along x, the sweep axis (cellStretchX times longer); a hash map (CellMap)
//   holds only the occupied cells, so memory follows the boxes, not the world.
// - A box is registered in every cell its exact box overlaps (closed, cell k
//   covers [k s, (k+1) s) under the floor mapping). A box overlapping more than
//   SweepGridConfig::maxCellsPerProxy cells goes to the overflow set instead;
//   overflow boxes find their pairs by querying the cells their box overlaps
//   (and each other with a sweep of their own).
// - Cells come in groups: per broadphase layer (layers.h), moving proxies in
//   one group and statics in cells of their own at the same coordinates. A
//   frame re-sorts only moving cells (and the static cells whose members
//   changed); each moving cell is swept against itself and against its
//   static twin, so static-static candidates never arise and a static entry
//   is never visited for itself. With layers, a moving cell of layer L is
//   swept against itself and its static twin only when L collides with L,
//   and against the cells of layer M at its coordinates (the static one,
//   and the moving one when M > L) only when L collides with M: candidates
//   of layers that never collide never arise (sweep_layers.cpp).
// - Each cell keeps its members sorted by (min x, id) with the other bounds
//   beside them (six SoA arrays padded with +inf min x sentinels), and sweeps
//   them: for each box scan forward while next.min.x <= this.max.x, 8 (AVX2)
//   or 16 (AVX-512) candidates per step (x, y, z and the dedup rule as lane masks,
//   the passing ids packed and stored as pairs without a branch per pair; a
//   scalar loop without AVX2).
// - A pair found in several cells is reported only by the cell that holds the
//   min corner of the two boxes' intersection: per axis that cell is
//   max(lo_a, lo_b), i.e. one of the two boxes starts there. Each entry carries
//   a 3-bit "starts here" mask, and the pair is reported when the OR of the two
//   masks is 0b111. No global dedup pass, no hash set.
// - Coherence: a cell keeps its order from the last update; moved boxes get
//   their keys regathered, two rounds of odd-even transposition in vector
//   registers and an insertion sort on 8-byte (min x, id) keys repair the
//   order (std::sort when the repair runs over budget; sweep_sort.h), and
//   the boxes that entered the cell are sorted apart and merged in. A box
//   whose range of cells changed touches only the cells it leaves and
//   enters.
// - All structural work is deferred to update(): add/move/remove only record
//   the new box and mark the proxy dirty; the batch move also tells whether
//   the box stays in its registered cells (most do), which then need no
//   membership work.
// - Kernels: an 8-lane AVX2 sweep, and a 16-lane AVX-512 one compiled apart
//   and chosen at run time for all but the emptiest cells
//   (SweepGridConfig::kernel; sweep_kernel_wide.h).
// - Threads: the batch move's checks, update()'s scan of the dirty proxies
//   with the planning of their relinks, the cell refreshes and sweeps (fused:
//   a cell applies its membership changes and is refreshed by the task that
//   sweeps it) run as Scheduler::forEach tasks (on several threads, a cell
//   crowded enough to hold a large share of the frame's work is swept as
//   several tasks over ranges of its entries); pairs go to per-worker
//   buffers and are merged by a (parallel) radix sort on the unique pair key,
//   so the sorted list is the same for any thread count. The order-dependent
//   part of the membership changes (creating cells, the overflow set) is
//   applied serially in dirty-list order (sweep_relink.cpp; docs/threading.md
//   lists the steps). Queries are const and thread-safe between updates; rays
//   walk the cells with a 3D DDA (sweep_query.cpp).
#pragma once

#include <broadphase/function_ref.h>
#include <broadphase/jobs/cache_padded.h>
#include <broadphase/jobs/per_worker.h>
#include <broadphase/jobs/scheduler.h>
#include <broadphase/layers.h>
#include <broadphase/math/aabb.h>
#include <broadphase/math/ray.h>
#include <broadphase/pair.h>
#include <broadphase/query.h>
#include <broadphase/ray_hit.h>
#include "common/handle_pool.h"
#include "pairs/pair_budget.h"
#include "pairs/pair_buffer.h"
#include "pairs/pair_router.h"
#include "sweep/sweep_cell_map.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace bp {

enum class SweepKernel : uint8_t { automatic, narrow, wide };

struct SweepGridConfig {
  // Side of a cell in world units; 0 picks it from the boxes at the first
  // update: the larger of cellSizeFactor x the median largest edge of the live
  // boxes, and the side at which the boxes' bounding volume (each side at
  // least one cell) holds targetBoxesPerCell boxes per cell. The first keeps
  // a typical box in ~1.5 cells, the second keeps sparse worlds (the flat
  // `plane`) from paying per-cell costs for near-empty cells. The automatic
  // size is re-picked when the live count has grown 8x since. (The density
  // rule counts cubes of the cross-section side; a cell, cellStretchX times
  // longer, holds that many times more. 64 over 32 is faster on `plane`, the
  // other scenes within noise: docs/decisions.md, "Layout".)
  float cellSize = 0.0f;
  float cellSizeFactor = 6.0f;
  float targetBoxesPerCell = 64.0f;
  // A box overlapping more cells than this is kept in the overflow set rather
  // than registered cell by cell (default 4x4x4: in the `sizes` scene at
  // N = 10^5 only the ~15 largest boxes overflow). At most 2^20.
  uint32_t maxCellsPerProxy = 64;
  // Cells are this many times longer along x, the sweep axis, than across.
  // The sort already prunes along x, so a long cell adds few candidates per
  // box, while fewer boxes straddle its faces (fewer entries, fewer cells,
  // fewer membership changes). 4 is faster than 1 with the 8-lane kernel,
  // and 16 than 4 with the 16-lane kernel, whose one block holds more
  // candidates; 32 and 64 are no better (docs/decisions.md, "Layout"). At
  // 10^5 a uniform world is then one cell long: columns of cells across y
  // and z. In [1, 64].
  float cellStretchX = 16.0f;
  // Which cell sweep runs. automatic: the 16-lane AVX-512 kernel on cells
  // where an entry meets half a candidate or more on average (all but the
  // emptiest), when the CPU has it (checked at run
  // time; the build's baseline stays x86-64-v3), else the 8-lane AVX2 kernel
  // (the scalar loop in a build without AVX2). narrow: always the latter.
  // wide: the 16-lane kernel on every cell; the constructor rejects it
  // (invalidArgument; fallback automatic) when the CPU lacks AVX-512. Every kernel gives the same
  // pairs.
  SweepKernel kernel = SweepKernel::automatic;
};

// A proxy's exact box as SweepGrid stores it: padded to 32 bytes, so that no
// box straddles two cache lines (a 24-byte array puts every third box across
// two). The refresh gathers the boxes of a cell's members in random proxy
// order, so each box is one line fetch, never two.
struct alignas(32) StoredBox {
  Aabb box;
  float pad[2] = {0.0f, 0.0f};
};
static_assert(sizeof(StoredBox) == 32 && alignof(StoredBox) == 32);

// The closed range of cells a box overlaps: lo = cell of min, hi = cell of max.
struct CellRange {
  int32_t lo[3];
  int32_t hi[3];
  friend bool operator==(const CellRange&, const CellRange&) = default;
};

enum class Registration : uint8_t { none, cells, overflow };

// A proxy's registered range, 16 bits a coordinate, as the batch move tests
// it (SweepGrid::rangeKey_): lanes lo x, y, z, hi x, y, z, the order in which
// rangeOf() of a box held in lanes comes out, then
// - lane 6: 0 when a move may leave the proxy in its cells (canStay()), 1
//   when every move must relink it;
// - lane 7: 0 when lanes 0-5 hold the range; 1 when a coordinate lies
//   outside [-32767, 32766] (the saturated values are left out, so that a
//   box whose cells saturate never matches): the range is then in
//   SweepGrid::wideRanges_, at the slot lanes 0 and 1 hold (low, high half).
// A box's key has 0 in lanes 6 and 7, so it equals a proxy's key exactly
// when the proxy may stay and the box lies in its registered cells. One
// 16-byte array, the only copy of the range (a 24-byte CellRange array
// beside a 16-byte stay key took 40 bytes a proxy): the batch move streams
// it for every moved proxy; the relink planning decodes it.
struct alignas(16) RangeKey {
  int16_t lane[8];
  bool wide() const { return lane[7] != 0; }
  uint32_t wideSlot() const {
    return uint32_t(uint16_t(lane[0])) | uint32_t(uint16_t(lane[1])) << 16;
  }
  friend bool operator==(const RangeKey&, const RangeKey&) = default;
};
static_assert(sizeof(RangeKey) == 16 && alignof(RangeKey) == 16);
// The key of a proxy registered nowhere (its range lanes mean nothing).
inline constexpr RangeKey kNeverStays = {{0, 0, 0, 0, 0, 0, 1, 0}};
// Whether r fits a RangeKey's 16-bit lanes.
inline bool fitsRangeKey(const CellRange& r) {
  for (int a = 0; a < 3; ++a)
    if (std::min(r.lo[a], r.hi[a]) < -32767 || std::max(r.lo[a], r.hi[a]) > 32766) return false;
  return true;
}
// Writes r into lanes 0-5 of `key`. Precondition: fitsRangeKey(r).
inline void packRange(RangeKey& key, const CellRange& r) {
  for (int a = 0; a < 3; ++a) {
    key.lane[a] = int16_t(r.lo[a]);
    key.lane[a + 3] = int16_t(r.hi[a]);
  }
}

// Cells come in groups with the same coordinates: for each broadphase layer
// L (layers.h), moving proxies in group 2L, static proxies in group 2L + 1,
// so a frame re-sorts and sweeps only moving entries and never meets a
// static-static candidate. A moving cell is swept against itself and against
// its static twin (the static cell of its layer at its coordinates), if any,
// when its layer collides with itself, and against the cells of other
// layers at its coordinates that its layer collides with. (A cell's `layer`
// field and SweepGrid::layer_ hold the group.) Without layers every proxy is
// in layer 0: groups 0 and 1.
inline constexpr uint8_t kMovingLayer = 0;
inline constexpr uint8_t kStaticLayer = 1;
inline constexpr uint8_t groupOfLayer(uint32_t layer, bool isStatic) {
  return uint8_t(2 * layer + (isStatic ? 1 : 0));
}
inline constexpr bool isStaticGroup(uint8_t group) { return (group & kStaticLayer) != 0; }

// A proxy's dirty state (SweepGrid::dirty_): not pending; pending and its
// new box still lies in exactly its registered cells (a moving proxy), which
// move() finds while the box is in registers; pending and its registration
// may change (added, removed, moved out of its cells, a static moved,
// regrid). Ordered: a proxy's state only rises until the next update (a
// proxy that left its cells and came back still needs its relink looked at).
inline constexpr uint8_t kDirtyNone = 0;
inline constexpr uint8_t kDirtyStayed = 1;
inline constexpr uint8_t kDirtyRelink = 2;

// Entry flags: bit k (k = 0, 1, 2) set when the entry's box starts in this
// cell on axis k. (No static bit: statics have a layer of their own, so no
// sweep ever meets two of them.)
inline constexpr uint8_t kStartsHereMask = 0x7;

// Padding after the n entries of each key array: the sweeps read whole
// blocks of 8 or 16 and stop on the +inf min x of the padding (the sentinel).
inline constexpr uint32_t kSweepPad = 16;

// The refresh-and-sweep loop keeps the boxes of about kPrefetchAhead members
// of the cells after the current one on their way to L2 (see findPairsInto),
// taking at most kPrefetchCellCap from one cell (a crowded cell's thousands
// would flood the miss queues and evict the cell being swept).
inline constexpr uint32_t kPrefetchAhead = 256;
inline constexpr uint32_t kPrefetchCellCap = 1024;

// One occupied cell. Members are sorted by (min x, id) after every update.
// keys holds six arrays of stride n + kSweepPad, in this order: min x, max x,
// min y, max y, min z, max z (SoA, so the sweep compares 8 or 16 boxes per axis at
// once); the padding of min x is +inf, the rest 0.
struct SweepCell {
  CellCoord coord;
  uint8_t layer = 0;        // the group of all members (groupOfLayer: layer and motion kind)
  uint8_t dirty = 0;        // queued for refresh in the current update
  uint8_t leaving = 0;      // a member left, by relink(): compact by rangeChanged_
  uint8_t crowded = 0;      // during findPairs: swept in this many ranges, as tasks of their own
  float maxExtentX = 0.0f;  // largest max x - min x of the members (after refresh)
  float sumExtentX = 0.0f;  // their sum: over the cell's length, the mean candidates an entry meets
  // ids[0, sorted) are the members of the last refresh, in its order; the
  // rest were appended since (boxes that entered the cell).
  uint32_t sorted = 0;
  std::vector<uint32_t> ids;
  std::vector<float> keys;
  std::vector<uint8_t> flags;  // n + kSweepPad, padding 0

  uint32_t size() const { return static_cast<uint32_t>(ids.size()); }
  size_t stride() const { return ids.size() + kSweepPad; }
  const float* key(int array) const { return keys.data() + size_t(array) * stride(); }
  const float* minX() const { return key(0); }
  const float* maxX() const { return key(1); }
  // The exact box of entry k.
  Aabb box(uint32_t k) const {
    const size_t m = stride();
    const float* p = keys.data() + k;
    return {Vec3(p[0], p[2 * m], p[4 * m]), Vec3(p[m], p[3 * m], p[5 * m])};
  }
};
// Cells are refreshed and swept by different workers side by side: each header
// has its own 128-byte slot.
using PaddedCell = CachePadded<SweepCell>;
static_assert(sizeof(PaddedCell) == kFalseSharingRange);
static_assert(alignof(PaddedCell) == kFalseSharingRange);

class SweepGrid {
 public:
  explicit SweepGrid(const SweepGridConfig& config = {});

  // Rejects invalidBox, or capacityExceeded past 2^31 - 1 live proxies.
  // Rejected calls of a SweepGrid return the same fallbacks as a Bvh's
  // (bvh.h, docs/errors.md).
  // `layer` < kMaxLayers (precondition, as the facade checks it): the
  // proxy's broadphase layer, fixed while it lives.
  ProxyId add(const Aabb& box, bool isStatic = false, uint32_t layer = 0);
  void remove(ProxyId id);
  // Which layers are swept against which, from the next findPairs (the
  // cells do not depend on it). Precondition: symmetric.
  void setLayerTable(const LayerTable& table) { table_ = table; }
  const LayerTable& layerTable() const { return table_; }
  void move(ProxyId id, const Aabb& box);
  void move(std::span<const ProxyId> ids, std::span<const Aabb> boxes);
  // The same, its checks in parallel tasks (the writes stay in batch order).
  void move(std::span<const ProxyId> ids, std::span<const Aabb> boxes, Scheduler& scheduler);
  // move() without checks, for a caller that validated the handle and the
  // box already (BroadPhase, once per frame and proxy). Precondition: the
  // index is live, the box isValid().
  void moveUnchecked(uint32_t index, const Aabb& box);
  // The batch move() without its checks (the same preconditions for every
  // entry); the dirty states are still worked out, in parallel chunks.
  void moveUnchecked(std::span<const ProxyId> ids, std::span<const Aabb> boxes,
                     Scheduler& scheduler);
  // The same for slots `indices` whose boxes lie at their own index of
  // `boxesByIndex` (entry k moves slot indices[k] to boxesByIndex[indices[k]]):
  // the batch a caller keeps by index (BroadPhase's boxes) without a copy.
  void moveUnchecked(std::span<const uint32_t> indices, std::span<const Aabb> boxesByIndex,
                     Scheduler& scheduler);
  bool contains(ProxyId id) const { return pool_.isLive(id); }
  const Aabb& box(uint32_t index) const;
  bool isStatic(uint32_t index) const;
  uint32_t proxyCount() const { return pool_.liveCount(); }
  uint32_t capacity() const { return pool_.capacity(); }
  ProxyId handleOf(uint32_t index) const;

  void update(Scheduler& scheduler);

  // The contract's pair finding (docs/structure_contract.md). With a
  // budget, the tasks charge it as they go (pair_budget.h) and stop once it
  // is exceeded: the remaining cells are refreshed but not swept, a cell's
  // sweep stops before its next entry, and the update is finished, so the
  // grid stays exact (validate() holds) and the next findPairs is complete.
  // `out` is then left empty and the worker buffers cleared, and
  // budget->exceeded() tells the caller. A budget with a predicate keeps
  // only the pairs it accepts. The streaming form charges each chunk before
  // `consume` sees it, so a frame that exceeds the budget may have handed
  // out up to limit() pairs first.
  void findPairs(Scheduler& scheduler, std::vector<Pair>& out, PairBudget* budget = nullptr);
  void findPairs(Scheduler& scheduler, FunctionRef<void(std::span<const Pair>)> consume,
                 PairBudget* budget = nullptr);

  void queryBox(const Aabb& box, OverlapCallback callback) const;
  /// A cell looked at (a hash lookup and a binary search in its min x
  /// order, cache misses at 10^6) costs about as much as ranking this many
  /// boxes (docs/decisions.md, "Nearest").
  static constexpr uint64_t kCellLookAsBoxes = 16;
  void queryPoint(const Vec3& point, OverlapCallback callback) const;
  RayHit castRay(const Ray& ray, RayQuery kind) const;
  void castRayAll(const Ray& ray, std::vector<RayHit>& out) const;
  void castRay(const Ray& ray, RayCallback callback) const;
  void castRays(Scheduler& scheduler, std::span<const Ray> rays, std::span<RayHit> out,
                RayQuery kind) const;
  /// `examined`, when given, gains the search's work in boxes ranked, a
  /// cell looked at counting as kCellLookAsBoxes: the facade weighs it
  /// against the rays' tree (sweep_query.cpp).
  void nearest(const Vec3& point, uint32_t k, std::vector<Neighbour>& out,
               uint64_t* examined = nullptr) const;
  RayHit castBox(const Vec3& halfExtent, const Ray& ray) const;
  // Every box grown by `halfExtent` that the ray enters, to `callback` as
  // castRay's callback form (clip, keep or stop), each box once.
  void castBox(const Vec3& halfExtent, const Ray& ray, RayCallback callback) const;
  // The closest (or, anyHit, some) hit in the caller's numbering: keyOf(id)
  // gives a box's index there, or kNullIndex to skip the box; the result's
  // `proxy` is that index and ties go to the lower one. keyOf is asked only
  // for the boxes the ray enters. For the facade, whose proxy indices are
  // not the grid's ids: the same walk as castRay(ray, kind), without the
  // callback form's per-ray set and sorts. No checks (the caller's).
  RayHit castRayKeyed(const Ray& ray, bool anyHit, FunctionRef<uint32_t(uint32_t)> keyOf) const;

  std::string validate() const;
  size_t memoryBytes() const;
  // Of memoryBytes(): the pair buffers, the router, the pair sort's scratch.
  size_t pairBytes() const;

  // Introspection for tests and benchmarks.
  float cellSize() const { return side_[1]; }    // across the sweep axis (y, z)
  float cellLength() const { return side_[0]; }  // along the sweep axis (x)
  uint32_t cellCount() const { return static_cast<uint32_t>(cells_.size()); }
  uint32_t overflowCount() const { return static_cast<uint32_t>(overflow_.size()); }
  bool hasPendingChanges() const {
    return !dirtyList_.empty() || !stayedList_.empty() || unlistedStays_ != 0;
  }
  // The 16-lane kernel is enabled: SweepGridConfig::kernel is not narrow and
  // this CPU has AVX-512 (automatic still leaves the emptiest cells to the
  // 8-lane one).
  bool wideKernelEnabled() const { return wide_; }
  // Cells whose sweep the last findPairs ran as several tasks (crowded cells,
  // on more than one thread).
  uint32_t splitCellCount() const { return splitCells_; }

 private:
  // --- registration (sweep_cells.cpp)
  // The floor mapping: cell k holds [k s, (k+1) s). Monotone in v, which is
  // all the dedup rules rely on; the geometric searches add a slack for the
  // rounding of v / s.
  int32_t cellOf(float v, int axis) const {
    return static_cast<int32_t>(std::floor(v * invSide_[axis]));
  }
  CellRange rangeOf(const Aabb& box) const {
    return {{cellOf(box.min.x(), 0), cellOf(box.min.y(), 1), cellOf(box.min.z(), 2)},
            {cellOf(box.max.x(), 0), cellOf(box.max.y(), 1), cellOf(box.max.z(), 2)}};
  }
  // The overflow rule: more than maxCellsPerProxy cells in all.
  Registration classify(const CellRange& r) const {
    const uint64_t m = config_.maxCellsPerProxy;
    const uint64_t sx = uint64_t(int64_t(r.hi[0]) - r.lo[0] + 1);
    const uint64_t sy = uint64_t(int64_t(r.hi[1]) - r.lo[1] + 1);
    const uint64_t sz = uint64_t(int64_t(r.hi[2]) - r.lo[2] + 1);
    if ((sx > m) | (sy > m) | (sz > m)) return Registration::overflow;  // no overflow below
    return sx * sy * sz > m ? Registration::overflow : Registration::cells;
  }
  void chooseCellSize();
  void regrid();
  uint32_t findOrCreateCell(const CellCoord& c, uint8_t layer);
  void markCellDirty(uint32_t cell);
  void markRangeDirty(const CellRange& r, uint8_t layer);
  void refreshCell(uint32_t cell);
  // Asks for the boxes of the members `cell` had at its last refresh to be
  // brought into L2 (at most kPrefetchCellCap of them), ahead of its
  // refresh; returns how many were asked for.
  uint32_t prefetchMemberBoxes(uint32_t cell) const;
  // The prefetch of a loop that refreshes the dirty moving cells of
  // [first, end) in order: called before cell u's refresh, it keeps about
  // kPrefetchAhead members of the next dirty moving cells asked for.
  struct BoxPrefetch {
    uint32_t next;       // cells (u, next) have been asked for
    uint32_t ahead = 0;  // their members asked for
  };
  void prefetchAhead(uint32_t u, uint32_t end, BoxPrefetch& p) const;
  // (AVX2 builds only; declared in every build so that the class is the same
  // whatever the includer's -march.)
  uint32_t gatherSoA8(SweepCell& c, const uint64_t* order, float* const k[6], uint8_t* flags,
                      float& maxExtentX, float& sumExtentX) const;
  void removeEmptyCells();
  void recomputeGridBounds();
  void addToOverflow(uint32_t index);
  void removeFromOverflow(uint32_t index);
  void markDirty(uint32_t index);  // as kDirtyRelink
  // A batch as handles and boxes side by side (move) or as indices into
  // boxes kept by index (the unchecked form by index): moveBatch and
  // writeBatch read entry k through index(k) and box(k).
  struct HandleBatch {
    std::span<const ProxyId> ids;
    std::span<const Aabb> boxes;
    uint32_t index(size_t k) const { return ids[k].index; }
    const Aabb& box(size_t k) const { return boxes[k]; }
  };
  struct IndexBatch {
    std::span<const uint32_t> indices;
    const Aabb* boxes;
    uint32_t index(size_t k) const { return indices[k]; }
    const Aabb& box(size_t k) const { return boxes[indices[k]]; }
  };
  void moveBatchCulprit(std::span<const ProxyId> ids, std::span<const Aabb> boxes) const;
  // `checked` (handle batches only): validate every entry first.
  template <class Batch>
  void moveBatch(const Batch& batch, uint32_t n, Scheduler* scheduler, bool checked);
  // The entries of a batch that become listed: how many in each dirty list.
  struct Listed {
    uint32_t relink = 0, stayed = 0;
  };
  template <class Batch>
  Listed writeBatch(const Batch& batch, uint32_t begin, uint32_t end, uint32_t* relinkOut,
                    uint32_t* stayedOut);
  // Records the new state of a proxy whose box was written: it rises to
  // `state`, and the proxy joins the list of that state if not in it yet.
  void markMoved(uint32_t index, uint8_t state);
  // The rule markMoved and writeBatch share: whether a proxy in dirty state
  // `old` joins dirtyList_ or stayedList_ (or unlistedStays_)
  // when it moves with new state `state`.
  static bool joinsRelinks(uint8_t old, uint8_t state) {
    return state == kDirtyRelink && old != kDirtyRelink;
  }
  static bool joinsStayed(uint8_t old, uint8_t state) {
    return state == kDirtyStayed && old == kDirtyNone;
  }
  // kDirtyStayed when `box` lies in exactly the registered cells of `index`.
  uint8_t dirtyStateFor(uint32_t index, const Aabb& box) const;
  // A moving proxy registered in moving cells (and cells exist: before the
  // first update side_ is 0): a box in the same range of cells then needs no
  // relink. (A static that moved always gets one: its static cells must be
  // re-sorted, and update() does not scan the proxies that stayed.)
  bool canStay(uint32_t index) const {
    return (unsigned(side_[0] != 0.0f) & unsigned(kind_[index] == Registration::cells) &
            unsigned(!isStaticGroup(layer_[index])) & unsigned(static_[index] == 0)) != 0;
  }
  // The registered range of `index` (kind_ != none), from its key.
  CellRange rangeAt(uint32_t index) const {
    const RangeKey& k = rangeKey_[index];
    if (k.wide()) return wideRanges_[k.wideSlot()];
    return {{k.lane[0], k.lane[1], k.lane[2]}, {k.lane[3], k.lane[4], k.lane[5]}};
  }
  // Lane 6 of the key of `index` from canStay(), its range left as it is.
  void setStayLane(uint32_t index) { rangeKey_[index].lane[6] = canStay(index) ? 0 : 1; }
  // Records r as the registered range of `index` (kind_ set already; none:
  // no range), in its key or, when r does not fit, a slot of wideRanges_;
  // frees the slot it had. Serial: it allocates slots.
  void storeRange(uint32_t index, const CellRange& r);
  // rangeOf(box) packed as a RangeKey, each coordinate saturated to 16 bits
  // (a saturated coordinate never equals a stored one).
  RangeKey rangeKeyOf(const Aabb& box) const;
  // update() in three steps: beginUpdate() registers the dirty proxies and
  // marks the cells to refresh (false: nothing was pending); the caller then
  // runs refreshCell() on every cell marked dirty, then finishUpdate().
  bool beginUpdate(Scheduler& scheduler);

  // --- membership changes (sweep_relink.cpp)
  // One change a relink makes to a cell: the proxy enters it, may have left
  // it, or only needs it refreshed (touch). `cell` is kAbsent for a cell to
  // create at `coord` in `layer`; `mark` lists the cell for refresh.
  struct CellEvent {
    enum : uint8_t { kEnter, kLeave, kTouch };
    uint32_t cell;
    uint32_t proxy;
    uint8_t kind;
    uint8_t mark;
    uint8_t layer;
    CellCoord coord;
  };
  static_assert(sizeof(CellEvent) == 24, "CellEvent: two indices, three bytes, a coordinate");
  // The relinks of a run of proxies: their cell events, the proxies whose
  // range changed, overflow additions (true) and removals, in proxy order.
  // Plans are filled by different workers side by side, and every
  // push_back writes its vector's header: each plan has two 128-byte slots
  // of its own (unpadded, two plans shared a line; the planning phase of
  // uniform 10^5 on two threads measured the same either way, as its ~3 k
  // relinks make few events a chunk: docs/decisions.md, "Threads").
  struct alignas(kFalseSharingRange) RelinkPlan {
    std::vector<CellEvent> events;
    std::vector<uint32_t> changed;
    std::vector<std::pair<uint32_t, bool>> overflow;
    // Filled by groupPlanEvents, when the planning tasks group the events:
    // the enter and leave events grouped into the cells that existed, and
    // in `ordered` the events whose effect depends on the order of plans:
    // those that create a cell (whose events resolveRelinks groups) or mark
    // one.
    std::vector<uint32_t> cellBegin;
    std::vector<uint32_t> cellEvents;
    std::vector<uint32_t> ordered;
    // Proxies whose old or new range does not fit a RangeKey, with the new
    // range: storeRange() allocates and frees their wide slots, in order.
    std::vector<std::pair<uint32_t, CellRange>> wide;
    void clear() {
      events.clear();
      changed.clear();
      overflow.clear();
      ordered.clear();
      wide.clear();
    }
  };
  static_assert(sizeof(RelinkPlan) == 2 * kFalseSharingRange);
  static_assert(alignof(RelinkPlan) == kFalseSharingRange);
  void planRelink(uint32_t index, bool refreshAll, RelinkPlan& plan);
  void relink(uint32_t index, bool refreshAll);  // plan and apply, now
  void applyOrderedParts(const RelinkPlan& plan);
  static void appendMember(SweepCell& cell, uint32_t proxy);
  // Groups the enter and leave events that forEachEvent(visit) visits (twice,
  // in the same order) into the cells [first, first + cells), stably (a
  // counting sort): cell first + c's are events[begin[c], begin[c + 1]).
  template <class ForEachEvent>
  static void groupEventsByCell(ForEachEvent&& forEachEvent, uint32_t first, uint32_t cells,
                                std::vector<uint32_t>& begin, std::vector<uint32_t>& events);
  // The planning task's share of resolveRelinks: lists the plan's ordered
  // events and groups its events by cell, those of cells that exist.
  void groupPlanEvents(RelinkPlan& plan, uint32_t cells);
  // `grouped`: every plan went through groupPlanEvents.
  void resolveRelinks(uint32_t planCount, bool grouped);
  // Grouped events: a proxy entering, or kLeaveEvent | the proxy leaving
  // (add() keeps indices below 2^31).
  static constexpr uint32_t kLeaveEvent = 0x80000000u;
  void applyCellEvents(uint32_t cell, std::vector<uint32_t>& leavers);
  void refreshListedCells(Scheduler& scheduler);  // the cells in dirtyCells_
  void refreshMovingCells(Scheduler& scheduler);  // every cell still dirty (refreshAll_)
  void finishUpdate();

  // --- pairs (sweep_kernel.cpp)
  // Entries [begin, end) of a moving cell against the entries after them,
  // and against its static twin: [0, size()) is the whole cell; a crowded
  // cell is swept in several ranges by several tasks (findPairsInto). Under
  // a budget the sweep asks a BudgetGate (budget_gate.h) before each entry
  // and stops when it says so; the Gate NoGate compiles the check away.
  template <class Gate>
  void sweepCell(uint32_t cell, uint32_t begin, uint32_t end, PairBuffer& out, Gate& gate) const;
  template <class Gate>
  void sweepCellAgainst(uint32_t movingCell, uint32_t begin, uint32_t end, uint32_t staticCell,
                        PairBuffer& out, Gate& gate) const;
  void sweepEntries(uint32_t cell, uint32_t begin, uint32_t end, PairBuffer& out,
                    PairBudget* budget) const;
  // --- layers (sweep_layers.cpp)
  // Without layers (every live proxy in layer 0, which collides with
  // itself) the plain sweep of sweepEntries runs, as fast as it always did.
  bool plainLayers() const { return layeredProxies_ == 0 && table_.collides(0, 0); }
  // sweepEntries for any layers: cell u against the cells the table names.
  void sweepEntriesLayered(uint32_t cell, uint32_t begin, uint32_t end, PairBuffer& out,
                           PairBudget* budget) const;
  // Entries [begin, end) of moving cell u against the entries after them
  // (sweep_kernel.cpp, as sweepEntries without the twin).
  void sweepSelf(uint32_t u, uint32_t begin, uint32_t end, PairBuffer& out,
                 PairBudget* budget) const;
  // Entries [begin, end) of moving cell u against every entry of cell
  // `other` (another group at the same coordinates), with the kernel their
  // crowding calls for (sweep_kernel.cpp).
  void sweepAgainstCell(uint32_t u, uint32_t begin, uint32_t end, uint32_t other, PairBuffer& out,
                        PairBudget* budget) const;
  // The group proxy `index` belongs in.
  uint8_t groupOf(uint32_t index) const { return groupOfLayer(proxyLayer_[index], static_[index]); }
  // Whether overflow proxies a and b may pair (their layers collide, not both static).
  bool overflowMayPair(uint32_t a, uint32_t b) const {
    return !(static_[a] && static_[b]) && table_.collides(proxyLayer_[a], proxyLayer_[b]);
  }
  // Whether an overflow proxy meets the members of a cell of `group`.
  bool overflowMeetsGroup(uint32_t o, uint8_t group) const {
    return !(static_[o] && isStaticGroup(group)) && table_.collides(proxyLayer_[o], group >> 1u);
  }
  void pairOverflowBox(uint32_t overflowSlot, PairBuffer& out) const;
  void pairOverflowSet(PairBuffer& out, PairBudget* budget) const;
  bool markCrowdedCells(int threads);
  // Every unit of pair work as tasks; with a budget, the sweeps stop once it
  // is exceeded, while every dirty cell is still refreshed and the update
  // finished.
  template <class Flush>
  void findPairsInto(Scheduler& scheduler, PairBudget* budget, Flush&& flush);

  // --- queries (sweep_query.cpp)
  // Reports pending changes (false then; see error.h).
  bool checkUpToDate(const char* what) const;
  void reportDeadIndex(uint32_t index, const char* operation) const;
  template <class OnCell, class OnSegmentEnd>
  void walkRay(const Ray& ray, const Vec3& grow, const float& maxT, OnCell&& onCell,
               OnSegmentEnd&& onSegmentEnd) const;
  RayHit castRayGrown(const Ray& ray, const Vec3& grow, bool anyHit) const;
  void castRayGrown(const Ray& ray, const Vec3& grow, RayCallback callback) const;
  // castRayGrown's walk with each hit box's id mapped by keyOf (a callable
  // uint32_t -> uint32_t, kNullIndex to skip).
  template <class KeyOf>
  RayHit castRayMapped(const Ray& ray, const Vec3& grow, bool anyHit, KeyOf&& keyOf) const;
  // Calls fn(const SweepCell&) for each occupied cell in r (by lookup, or by a
  // scan of all cells when r holds more coordinates than there are cells);
  // fn returns false to stop, and then so does this.
  template <class Fn>
  bool forEachCellInRange(const CellRange& r, Fn&& fn) const;
  // r clipped to the grid's bounds into `clipped`, and how many cell
  // coordinates it spans, counted only until the count passes cells_.size()
  // (then one pass over every cell is cheaper than a lookup each); 0 when
  // nothing of r is in the grid.
  uint64_t clipToGrid(const CellRange& r, CellRange& clipped) const;
  // The cells forEachCellInRange(r) looks at: a lookup in each map per
  // coordinate, or one pass over every cell when that is fewer.
  uint64_t cellsLookedAt(const CellRange& r) const;

  SweepGridConfig config_;
  bool wide_ = false;  // the 16-lane kernels (sweep_kernel_wide.h)
  HandlePool pool_;

  // Per proxy index (size capacity()).
  std::vector<StoredBox> boxes_;     // exact box (meaningful when live)
  std::vector<uint8_t> static_;      // 1: static
  std::vector<uint8_t> dirty_;       // kDirty*: listed (see the lists) when not 0
  std::vector<Registration> kind_;   // where the index is registered now
  std::vector<uint8_t> layer_;       // group registered in (kind_ == cells)
  std::vector<uint8_t> proxyLayer_;  // broadphase layer (layers.h)
  uint32_t layeredProxies_ = 0;      // live proxies in a layer other than 0
  LayerTable table_;
  // The registered range (kind_ != none) and whether a move may leave the
  // proxy in its cells (RangeKey); the ranges that do not fit 16 bits in
  // wideRanges_, their free slots in freeWide_.
  std::vector<RangeKey> rangeKey_;
  std::vector<CellRange> wideRanges_;
  std::vector<uint32_t> freeWide_;
  // 1 during update(): left some cells. Three bytes longer than capacity():
  // the refresh reads each flag as a dword (a gather).
  std::vector<uint8_t> rangeChanged_ = std::vector<uint8_t>(3, 0);

  // Indices pending since the last update, by state: dirtyList_ holds each
  // proxy in kDirtyRelink once; stayedList_ holds each proxy in
  // kDirtyStayed, and also those that rose to kDirtyRelink after it listed
  // them (update() skips those there). update() needs to visit stayedList_
  // only when it does not refresh every moving cell anyway: on a frame where
  // everything moves, the proxies that stayed in their cells cost nothing
  // after move().
  // A large batch move only counts its staying proxies (unlistedStays_),
  // when update() is sure to clear the states wholesale; update() rebuilds
  // the list from dirty_ should it need it after all.
  std::vector<uint32_t> dirtyList_;
  std::vector<uint32_t> stayedList_;
  uint64_t unlistedStays_ = 0;
  std::vector<uint32_t> overflow_;  // indices registered as overflow
  // Index -> its slot in overflow_, for the few proxies registered there
  // (a map rather than 4 bytes for every proxy; only looked up, never
  // walked, so the order of overflow_ stays the plans' order).
  std::unordered_map<uint32_t, uint32_t> overflowPos_;

  std::vector<PaddedCell> cells_;  // dense: every cell is occupied after update

  std::vector<SweepCell> spareCells_;  // arrays of removed cells, reused by new ones

  std::vector<std::pair<CellCoord, uint8_t>> emptyScratch_;  // removeEmptyCells scratch
  // Per group (groupOfLayer): coord -> slot in cells_. Two groups (layer 0)
  // until a proxy of another layer arrives; grown by add(), never shrunk.
  std::vector<CellMap> maps_ = std::vector<CellMap>(2);
  std::vector<uint32_t> dirtyCells_;  // cells to refresh in the current update
  CellRange gridBounds_{};            // bounds of all cell coords (cells_ not empty)
  bool gridBoundsStale_ = false;
  bool refreshAll_ = false;  // between beginUpdate and finishUpdate: every moving cell is dirty

  // Cell side per axis (x is cellStretchX times y and z), 0 until sized.
  float side_[3] = {0.0f, 0.0f, 0.0f};
  float invSide_[3] = {0.0f, 0.0f, 0.0f};
  float invSide8_[8] = {};      // invSide_ twice, then 0, 0: the lanes of an Aabb
  uint32_t sizedForCount_ = 0;  // live count when the automatic size was picked

  // Scratch kept between frames so a steady state allocates nothing.
  std::vector<uint32_t> changed_;        // indices with rangeChanged_ set
  std::vector<RelinkPlan> relinkPlans_;  // beginUpdate: one per chunk of the dirty list
  // How many plans the current update's relinks use (beginUpdate);
  // finishUpdate releases the others once they are many.
  uint32_t plansUsed_ = 0;
  // Between resolveRelinks() and finishUpdate(), where the enter (proxy) and
  // leave (kLeaveEvent | proxy) events of each cell are, as tables of events grouped
  // by cell: one a relink plan, grouped by the planning tasks, or one for
  // all, grouped by resolveRelinks (cellEventBegin_, cellEvents_). Cell c
  // applies table by table, so in dirty-list order. Empty otherwise.
  struct CellEventTable {
    const uint32_t* begin;   // cell first + c's events: events[begin[c], begin[c + 1])
    const uint32_t* events;  // proxy entering, or kLeaveEvent | proxy leaving
    uint32_t first, cells;   // the cells it covers: [first, first + cells)
  };
  std::vector<CellEventTable> eventTables_;
  std::vector<uint32_t> cellEventBegin_;
  std::vector<uint32_t> cellEvents_;
  std::vector<Listed> chunkListed_;      // move(): per chunk, entries newly listed
  std::vector<uint8_t> chunkAscending_;  // move(): per chunk, indices strictly increasing
  PerWorker<PairBuffer> pairBuffers_;
  // The cells' refresh-and-sweep loop gives each worker the cells it had last
  // frame, whose arrays are still in its cache.
  Scheduler::Affinity cellAffinity_;
  // findPairs: the entry ranges of the crowded cells, and how many cells.
  struct SweepRange {
    uint32_t cell, begin, end;
  };
  std::vector<SweepRange> sweepRanges_;
  uint32_t splitCells_ = 0;
  std::vector<Pair> sortScratch_;
  PairRouter router_;  // findPairs on several threads: the pairs by key range
  std::vector<std::span<const Pair>> pieces_;  // the workers' buffers, for the merge
};

template <class Fn>
bool SweepGrid::forEachCellInRange(const CellRange& r, Fn&& fn) const {
  CellRange clipped;
  const uint64_t count = clipToGrid(r, clipped);
  if (count == 0) return true;
  const int32_t* lo = clipped.lo;
  const int32_t* hi = clipped.hi;
  if (count > cells_.size()) {
    for (const PaddedCell& pc : cells_) {
      const CellCoord& c = pc.value.coord;
      if ((c.x < lo[0]) | (c.x > hi[0]) | (c.y < lo[1]) | (c.y > hi[1]) | (c.z < lo[2]) |
          (c.z > hi[2]))
        continue;
      if (!fn(pc.value)) return false;
    }
    return true;
  }
  for (int32_t x = lo[0]; x <= hi[0]; ++x)
    for (int32_t y = lo[1]; y <= hi[1]; ++y)
      for (int32_t z = lo[2]; z <= hi[2]; ++z) {
        for (const CellMap& map : maps_) {
          const uint32_t idx = map.find(CellCoord{x, y, z});
          if (idx != CellMap::kAbsent && !fn(cells_[idx].value)) return false;
        }
      }
  return true;
}

}  // namespace bp
