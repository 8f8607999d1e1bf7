/// \file
/// DistributedBroadPhase: the broadphase over the ranks of an MPI
/// communicator. Space is cut into one region per rank (Decomposition); each
/// proxy has a 64-bit global id, chosen by the caller, and one owner, the rank
/// whose region holds its box's centre. Each rank runs an ordinary
/// bp::BroadPhase over the proxies it owns and the ghosts other ranks send it,
/// and the union over the ranks of what update() reports is, pair for pair
/// and event for event, what one BroadPhase over every proxy would report.
///
///   bp::mpi::DistributedBroadPhase world(MPI_COMM_WORLD, {.local = {.threads = 2}});
///   world.add(bodyId, {.box = box, .userData = bodyId});   // on any rank
///   ...every frame, on every rank:
///   world.moveOwned(boxes);  // boxes[k]: the new box of world.ownedIds()[k]
///   const bp::mpi::GlobalFrame& f = world.update();        // collective
///   for (const bp::mpi::GlobalPair& p : f.begun) ...       // this rank's share
///
/// Rules (docs/mpi.md gives the reasons and the costs):
///  - Ownership: the owner of a proxy is Decomposition::ownerOf(box.center()).
///    After the owners' moves, update() migrates every proxy whose centre left
///    its owner's region.
///  - Ghosts: a box (grown by DistributedConfig::halo) is sent to every other
///    rank whose region it touches, and only to those; a box spanning many
///    regions costs one copy per region it touches, and nothing per frame
///    while it stands still.
///  - Reporting: a pair is found by the rank whose region holds the lower
///    corner of the two boxes' intersection (that rank holds both boxes), and
///    delivered to the owner of its lower global id, which keeps the pair's
///    history: it reports the pair in `pairs`, and in `begun` and `ended`
///    when it begins or ends. Every pair is reported by exactly one rank.
///  - Rebalancing: when the most loaded rank owns more than
///    (1 + rebalanceThreshold) times the mean number of proxies, update()
///    rebuilds the decomposition from a sample of box centres.
///
/// Collective calls (the constructor, update(), validate(), the queries and
/// the destructor) must be made by every rank of the communicator, in the
/// same order, from one thread per rank; the others are local. MPI must be
/// initialised (MPI_THREAD_FUNNELED is enough: only the calling thread calls
/// MPI) and finalised after the last DistributedBroadPhase is destroyed.
///
/// Errors: a local call that rejects its input throws bp::Error at once and
/// changes nothing. A collective call that finds bad input on any rank
/// throws the same bp::Error on every rank, before changing anything (see
/// update() for the one exception). It throws whatever error handler is
/// installed (error.h): the ranks must agree on an error, so none may carry
/// on alone with a fallback. Built only with exceptions (BP_EXCEPTIONS=ON).
#pragma once

#include <broadphase/broad_phase.h>
#include <broadphase/mpi/decomposition.h>

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace bp::mpi {

namespace detail {
struct Traffic;
}  // namespace detail

/// The global id that names no proxy (a miss in GlobalHit). Not a valid id.
inline constexpr uint64_t kNoId = UINT64_MAX;

/// How a DistributedBroadPhase is set up; the same on every rank.
struct DistributedConfig {
  /// Each rank's BroadPhase (structure, threads, cell size, pair budget...).
  /// maxPairs bounds the pairs each rank's BroadPhase finds, ghosts included;
  /// the facade checks it after that BroadPhase's update (which runs without
  /// a budget of its own, so that a rejection is seen whatever error handler
  /// is installed): it bounds what a rank keeps and sends, not the memory its
  /// BroadPhase uses to find the pairs.
  BroadPhaseConfig local{};
  /// update() rebuilds the decomposition when max / mean - 1 of the proxies
  /// owned per rank passes this (0.2: the busiest rank has 20 % more than
  /// the mean).
  double rebalanceThreshold = 0.2;
  /// Frames between two rebuilds at least, so that a load the cuts cannot
  /// split (many equal centres) does not trigger one every frame.
  uint32_t rebalanceInterval = 10;
  /// Box centres each rank contributes to a rebuild (all of them when it owns
  /// fewer): the balance is within about 1 / sqrt(ranks * samples) of ideal.
  uint32_t samplesPerRank = 2048;
  /// World units added on every side of a box when choosing where its ghosts
  /// go. 0 gives the minimum: exactly the ranks whose region the box touches.
  /// With halo >= the largest half extent of any box, every proxy a rank's
  /// owned proxies overlap is held on that rank (owned or ghost), so box(),
  /// ownerOf() and the pairs it owns can be evaluated without asking anyone.
  float halo = 0.0f;
  /// Bytes of caller state per proxy that travel with it when it migrates
  /// (velocity, mass...): payload(id). Ghosts do not carry it.
  uint32_t payloadBytes = 0;
};

/// A pair as a rank reports it: global ids a < b and both user data.
struct GlobalPair {
  uint64_t a;          ///< the lower global id
  uint64_t b;          ///< the higher global id
  uint64_t userDataA;  ///< a's user data in the frame that reported the pair
  uint64_t userDataB;  ///< b's user data in the frame that reported the pair
  /// Same ids and user data.
  friend bool operator==(const GlobalPair&, const GlobalPair&) = default;
};
static_assert(sizeof(GlobalPair) == 32);

/// The order of pair lists: by a, then b.
inline bool pairBefore(const GlobalPair& x, const GlobalPair& y) {
  return x.a < y.a || (x.a == y.a && x.b < y.b);
}

/// This rank's share of one update(): the pairs whose lower id it owns.
/// Views valid until the next update(); each sorted by pairBefore.
struct GlobalFrame {
  std::span<const GlobalPair> pairs;  ///< every overlapping pair now
  std::span<const GlobalPair> begun;  ///< pairs that overlap now and did not at the last update
  std::span<const GlobalPair> ended;  ///< pairs of the last update that no longer overlap,
                                      ///< including those ended by a remove()
};

/// A ray as BroadPhase::castRay takes it: distances are bit for bit those of
/// castRay(origin, direction, length) on one BroadPhase.
struct RayInput {
  Vec3 origin;     ///< start point
  Vec3 direction;  ///< any non-zero direction
  float length;    ///< > 0, world units
};

/// The closest hit of a ray: the proxy's global id and the entry distance.
struct GlobalHit {
  uint64_t id = kNoId;  ///< kNoId: no hit
  float t = 0;          ///< entry distance along the ray, 0 if the origin is inside
  /// True when the ray hit a proxy.
  bool hit() const { return id != kNoId; }
  /// Same id and distance.
  friend bool operator==(const GlobalHit&, const GlobalHit&) = default;
};

/// One of the k nearest proxies: global id and squared distance (as
/// distanceSquared() of math/aabb.h).
struct GlobalNeighbour {
  uint64_t id;            ///< the proxy's global id
  float distanceSquared;  ///< square world units, 0 inside
  /// Same id and distance.
  friend bool operator==(const GlobalNeighbour&, const GlobalNeighbour&) = default;
};

/// A k-nearest query: the point and k (>= 1).
struct NearestInput {
  Vec3 point;  ///< finite, within kMaxCoordinate
  uint32_t k;  ///< how many neighbours, >= 1
};

/// Results of a batch of queries, query by query: those of query q are
/// items[offsets[q], offsets[q + 1]).
template <class T>
struct BatchResults {
  std::vector<T> items;           ///< every query's results, one after another
  std::vector<uint32_t> offsets;  ///< queries + 1 entries, offsets[0] = 0
  /// The results of query q.
  std::span<const T> of(size_t q) const {
    return std::span<const T>(items).subspan(offsets[q], offsets[q + 1] - offsets[q]);
  }
};

/// What the last update() cost this rank.
struct FrameStats {
  uint64_t bytesSent = 0;         ///< point-to-point payload bytes sent (all phases)
  uint64_t bytesReceived = 0;     ///< point-to-point payload bytes received
  uint32_t messagesSent = 0;      ///< point-to-point messages sent (non-empty only)
  uint32_t messagesReceived = 0;  ///< point-to-point messages received
  uint32_t collectives = 0;       ///< collective calls (alltoall of sizes, allreduce...)
  uint32_t owned = 0;             ///< proxies owned after the update
  uint32_t ghosts = 0;            ///< ghosts held after the update
  uint32_t migratedOut = 0;       ///< proxies sent to a new owner (pending adds included)
  uint32_t migratedIn = 0;        ///< proxies received from another rank
  uint32_t ghostRecords = 0;      ///< ghost records sent: new, moved or dropped
  uint32_t pairsSent = 0;         ///< pairs sent to the owner of their lower id
  uint32_t reported = 0;          ///< pairs this rank reports (GlobalFrame::pairs)
  /// max / mean - 1 of the proxies each rank owns once this update's
  /// migration is done, under the regions the update started with (what the
  /// rebalance decision saw; after a rebalance the new regions do better).
  double imbalance = 0;
  bool rebalanced = false;     ///< this update rebuilt the decomposition
  double exchangeSeconds = 0;  ///< in MPI calls (waiting for other ranks included)
  double localSeconds = 0;     ///< in the rank's BroadPhase::update() alone
  double totalSeconds = 0;     ///< the whole update()
  /// The calling thread's CPU time in update() outside MPI calls: the
  /// rank's own work, which (unlike the wall times) does not count time
  /// spent waiting for a core. The BroadPhase's other worker threads are not
  /// in it (with threads = 1 there are none).
  double workCpuSeconds = 0;
  /// The part of workCpuSeconds in the rank's BroadPhase::update().
  double localCpuSeconds = 0;
};

/// The broadphase over the ranks of a communicator (see the file comment).
/// Not thread-safe: one thread per rank calls it.
class DistributedBroadPhase {
 public:
  /// Collective. Duplicates `comm` (so its messages never meet the
  /// caller's). Every rank must pass the same config; the decomposition
  /// starts as a placeholder and is built by the first update() from the
  /// boxes added by then.
  explicit DistributedBroadPhase(MPI_Comm comm, const DistributedConfig& config = {});
  /// Collective: frees the duplicated communicator.
  ~DistributedBroadPhase();
  DistributedBroadPhase(const DistributedBroadPhase&) = delete;
  DistributedBroadPhase& operator=(const DistributedBroadPhase&) = delete;

  // --- Proxies: local calls, recorded now, applied by the next update(). ---

  /// Adds a proxy on any rank; update() hands it to its owner. `payload`
  /// holds payloadBytes bytes or is empty (zeros). Throws Error(invalidBox),
  /// Error(invalidArgument) for a bad motion type, a wrong payload size, the
  /// id kNoId, or an id this rank knows (owned, ghost or added): update()
  /// rejects a duplicate only another rank knows.
  void add(uint64_t id, const ProxyDesc& desc, std::span<const std::byte> payload = {});
  /// Removes a proxy this rank owns, or cancels an add made here since the
  /// last update(). Throws Error(staleHandle) for any other id.
  void remove(uint64_t id);
  /// The proxy's new box: only its owner (or the rank that added it) moves
  /// it. A box equal to the one last given records nothing (a proxy at rest
  /// costs no work and no message). Throws Error(staleHandle) or
  /// Error(invalidBox).
  void move(uint64_t id, const Aabb& box);
  /// Many moves, all validated before any is recorded.
  void move(std::span<const uint64_t> ids, std::span<const Aabb> boxes);
  /// boxes[k] is the new box of ownedIds()[k], for every owned proxy at once
  /// (boxes.size() == ownedIds().size()): no id lookups, the fastest way to
  /// move everything a rank simulates. All validated first; an owned proxy
  /// removed since the last update() must keep its box. A box equal to the
  /// current one (as in move()) records nothing.
  void moveOwned(std::span<const Aabb> boxes);
  /// As BroadPhase::setFilter, from the next update(). Owner only.
  void setFilter(uint64_t id, const Filter& filter);
  /// As BroadPhase::setUserData, from the next update(). Owner only.
  void setUserData(uint64_t id, uint64_t userData);
  /// As BroadPhase::setMotionType, from the next update(). Owner only.
  void setMotionType(uint64_t id, MotionType motion);

  /// True when this rank owns the proxy or added it since the last update().
  bool owns(uint64_t id) const;
  /// As last given on this rank (owner or adder). Throws Error(staleHandle).
  ProxyDesc desc(uint64_t id) const;
  /// The caller's payloadBytes bytes of a proxy this rank owns or added.
  /// Throws Error(staleHandle). Valid until the next update().
  std::span<std::byte> payload(uint64_t id);
  /// The same, read-only.
  std::span<const std::byte> payload(uint64_t id) const;
  /// The ids this rank owns as of the last update(), in an order that depends
  /// only on the sequence of calls and the rank count (not on threads).
  std::span<const uint64_t> ownedIds() const { return ownedIds_; }

  /// True when this rank holds the proxy as of the last update(): owned or
  /// ghost.
  bool holds(uint64_t id) const { return index_.count(id) != 0; }
  /// The owner of a held proxy as of the last update(). Throws
  /// Error(staleHandle) when not held.
  int ownerOf(uint64_t id) const;
  /// The box of a held proxy as of the last update(). Throws
  /// Error(staleHandle) when not held.
  Aabb box(uint64_t id) const;

  // --- The frame. ---

  /// Collective. Applies every rank's adds, removes and moves, migrates,
  /// sends ghosts, rebalances when due, runs each rank's BroadPhase and
  /// returns this rank's share of the pairs and events.
  /// Throws on every rank, with nothing applied (the changes stay recorded):
  /// Error(invalidArgument) when an id is added on two ranks, or added while
  /// another rank holds it, or removed and added again in one frame (remove()
  /// on the adding rank cancels the add). Throws Error(capacityExceeded) on
  /// every rank when a rank's BroadPhase exceeds maxPairs: the proxies are
  /// updated and migrated, the previous pairs are kept.
  const GlobalFrame& update();
  /// The result of the last update().
  const GlobalFrame& lastPairs() const { return frame_; }
  /// What the last update() cost this rank.
  const FrameStats& stats() const { return stats_; }

  // --- Queries: collective, each rank with its own queries (any number, ---
  // --- none included), each answered to the rank that asked. They see the ---
  // --- world as of the last update(). A bad query on any rank throws on  ---
  // --- every rank (invalidRay, invalidBox, invalidArgument).             ---

  /// The closest hit of each ray, ties to the lower global id, into `out`
  /// (out.size() == rays.size()). Answered by the ranks whose region the ray
  /// passes through, reduced by (t, id).
  void castRays(std::span<const RayInput> rays, std::span<GlobalHit> out,
                const Filter& filter = {}) const;
  /// One ray per rank: castRays of one.
  GlobalHit castRay(const Vec3& origin, const Vec3& direction, float length,
                    const Filter& filter = {}) const;
  /// The global ids of the proxies whose box overlaps each query box,
  /// ascending. Each proxy is reported by the rank whose region holds the
  /// lower corner of its box's intersection with the query.
  void queryBoxes(std::span<const Aabb> boxes, BatchResults<uint64_t>& out,
                  const Filter& filter = {}) const;
  /// One box per rank: queryBoxes of one.
  void queryBox(const Aabb& box, std::vector<uint64_t>& out, const Filter& filter = {}) const;
  /// The k proxies nearest each point, nearest first, ties to the lower
  /// global id (distance as in BroadPhase::nearest).
  void nearest(std::span<const NearestInput> queries, BatchResults<GlobalNeighbour>& out,
               const Filter& filter = {}) const;
  /// One query per rank: nearest of one.
  void nearest(const Vec3& point, uint32_t k, std::vector<GlobalNeighbour>& out,
               const Filter& filter = {}) const;

  // --- Introspection. ---

  /// This rank in the communicator.
  int rank() const { return rank_; }
  /// The number of ranks.
  int size() const { return size_; }
  /// The regions as of the last update() (the same on every rank).
  const Decomposition& decomposition() const { return decomposition_; }
  /// This rank's BroadPhase: owned proxies and ghosts, by local index.
  const BroadPhase& localBroadPhase() const { return *local_; }
  /// Heap bytes this rank holds: its BroadPhase (BroadPhase::memoryBytes),
  /// the per-proxy arrays, the id maps (estimated: a node and a bucket per
  /// entry), the pair history and the exchange buffers.
  size_t memoryBytes() const;
  /// Collective. Checks this rank's BroadPhase and bookkeeping, and across
  /// ranks that every ghost matches its owner's box and that every owner
  /// sent each ghost where the rules say. Empty on every rank when all holds.
  std::string validate() const;

 private:
  struct Scratch;  // per-frame buffers, kept across frames (src/scratch.h)
  /// What a local index holds. kDeparting: owned until this update() sent it
  /// to its new owner; it stays only if that owner sends it back as a ghost.
  enum : uint8_t { kFree = 0, kOwned = 1, kGhost = 2, kDeparting = 3 };
  /// Changes recorded on an owned proxy since the last update().
  enum : uint8_t { kMoved = 1, kAttributes = 2, kRemoved = 4 };

  struct PendingAdd {
    uint64_t id;
    ProxyDesc desc;
    std::vector<std::byte> payload;
  };

  uint32_t ownedIndex(uint64_t id, const char* what) const;  // throws unless owned here
  PendingAdd* pendingAdd(uint64_t id);
  const PendingAdd* pendingAdd(uint64_t id) const;
  void markDirty(uint32_t index, uint8_t change);
  /// The box ghosts are routed by: grown by the halo.
  Aabb grown(const Aabb& box) const { return config_.halo > 0 ? fatten(box, config_.halo) : box; }
  uint32_t addLocal(uint64_t id, int owner, const Aabb& box, const Filter& filter,
                    MotionType motion, uint64_t userData);
  void removeLocal(uint32_t index);
  void setLocal(uint32_t index, const Aabb& box, const Filter& filter, MotionType motion,
                uint64_t userData);
  void tellLocalAttributes(uint32_t index);
  void checkDirectory(detail::Traffic& traffic);
  // update()'s steps, in order (src/distributed_broad_phase.cpp), sharing a
  // FrameRun: the traffic and stats they count, the regions before.
  struct FrameRun;
  void countDestinations(FrameRun& run);
  void dropRemoved(FrameRun& run);
  void decideRegions(FrameRun& run);
  void sendDepartures(FrameRun& run);
  void sendIfLeaving(FrameRun& run, uint32_t index);
  void recordStayers(FrameRun& run);
  void recordStayer(FrameRun& run, uint32_t index);
  void receiveArrivals(FrameRun& run);
  void recordArrivalGhosts(FrameRun& run);
  void applyGhostRecords(FrameRun& run);
  void settleOwnership(FrameRun& run);
  bool findLocalPairs(FrameRun& run, std::string& failure);
  void reportPairsAndEvents();
  void finishFrame(FrameRun& run);
  Decomposition balancedDecomposition(detail::Traffic& traffic) const;
  std::string validateLocal() const;

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  DistributedConfig config_;
  Decomposition decomposition_;
  bool balanced_ = false;  ///< built from at least one proxy
  uint32_t framesSinceRebalance_ = 0;
  std::unique_ptr<BroadPhase> local_;
  std::unique_ptr<Scratch> scratch_;
  uint32_t ownedCount_ = 0;

  // Per local index (ProxyId::index of local_): who the proxy is.
  std::vector<uint64_t> ids_;
  std::vector<ProxyId> handles_;
  std::vector<int32_t> owners_;
  std::vector<uint8_t> role_;
  std::vector<Aabb> boxes_;  ///< as local_ has it (the last update's box)
  std::vector<Filter> filters_;
  std::vector<MotionType> motions_;
  std::vector<uint64_t> userData_;
  // Owned proxies only: the changes since the last update().
  std::vector<Aabb> nextBoxes_;
  std::vector<uint8_t> dirty_;
  std::vector<uint32_t> dirtyList_;
  std::vector<std::byte> payloads_;               ///< payloadBytes per local index
  std::unordered_map<uint64_t, uint32_t> index_;  ///< held id -> local index

  std::vector<PendingAdd> adds_;
  std::unordered_map<uint64_t, uint32_t> addIndex_;  ///< id -> position in adds_

  /// The ids whose directory rank this is (hash of the id modulo size):
  /// every live id has exactly one directory entry, which catches an id
  /// added on two ranks.
  std::unordered_set<uint64_t> directory_;

  std::vector<uint64_t> ownedIds_;
  std::vector<uint32_t> ownedSlots_;  ///< the local index of each of ownedIds_
  /// The pairs whose lower id this rank owns, as of the last update(),
  /// sorted: the history begun and ended are computed against.
  std::vector<GlobalPair> history_;
  std::vector<GlobalPair> pairs_, begun_, ended_;
  GlobalFrame frame_;
  FrameStats stats_;
};

}  // namespace bp::mpi
