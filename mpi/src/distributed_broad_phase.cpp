// DistributedBroadPhase: the proxies, the frame (directory check,
// migration, ghosts, the rank's BroadPhase, pair delivery and events) and
// validate(). The queries are in distributed_query.cpp.
//
// Invariants between updates, on every rank (validate() checks them):
//  - each live id is owned by exactly one rank, Decomposition::ownerOf of
//    its box's centre, and has one entry in the directory of rank
//    directoryRank(id);
//  - rank t holds a ghost of p exactly when t != owner(p) and t's region
//    touches p's box grown by the halo, and the ghost's box, filter, motion
//    and user data are the owner's (so the owner can recompute where its
//    ghosts are from the box alone, and needs no list of them);
//  - history_ holds the pairs of the last update whose lower id this rank
//    owns, sorted.
#include <broadphase/mpi/distributed_broad_phase.h>

#include "exchange.h"
#include "fail.h"
#include "scratch.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

namespace bp::mpi {

using detail::ByteReader;
using detail::ByteWriter;
using detail::Exchange;
using detail::fail;
using detail::now;
using detail::Traffic;

namespace {

// Tags of the update's phases, so that no message of one phase can match a
// receive of another.
enum Tag : int { kTagDirectory = 11, kTagMigrate, kTagGhost, kTagPairs, kTagValidate };

// Ghost records an owner sends to the ranks that hold (or will hold) a copy.
enum GhostRecord : uint8_t {
  kGhostFull = 1,  // id, box, filter, motion, user data: a new ghost, a new owner, new attributes
  kGhostMove = 2,  // id, box
  kGhostDrop = 3,  // id
};

// Exchange flag: a rank's BroadPhase failed its update.
constexpr uint64_t kFlagLocalFailed = 1;

std::string idText(uint64_t id) { return "global id " + std::to_string(id); }

// splitmix64's finaliser: spreads consecutive ids over the directory ranks.
uint64_t mixId(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

int directoryRank(uint64_t id, int size) { return int(mixId(id) % uint64_t(size)); }

bool sameBox(const Aabb& a, const Aabb& b) { return a.min == b.min && a.max == b.max; }
bool sameFilter(const Filter& a, const Filter& b) {
  return a.category == b.category && a.mask == b.mask;
}

// `targets` without `rank` (both ascending).
void removeRank(std::vector<int>& targets, int rank) {
  targets.erase(std::remove(targets.begin(), targets.end(), rank), targets.end());
}

// pairBefore as a function object, so that sorts inline it; (a, b) as one
// 128-bit key compares without a branch on a == b.
constexpr auto byIds = [](const GlobalPair& x, const GlobalPair& y) {
  using Key = unsigned __int128;
  return ((Key(x.a) << 64) | x.b) < ((Key(y.a) << 64) | y.b);
};

bool hasRank(const std::vector<int>& targets, int rank) {
  return std::binary_search(targets.begin(), targets.end(), rank);
}

}  // namespace

DistributedBroadPhase::DistributedBroadPhase(MPI_Comm comm, const DistributedConfig& config)
    : config_(config) {
  if (!(config.rebalanceThreshold >= 0) || !std::isfinite(config.rebalanceThreshold))
    fail(ErrorCode::invalidArgument, "DistributedBroadPhase: rebalanceThreshold must be >= 0");
  if (!(config.halo >= 0) || !std::isfinite(config.halo))
    fail(ErrorCode::invalidArgument, "DistributedBroadPhase: halo must be finite and >= 0");
  if (config.samplesPerRank == 0)
    fail(ErrorCode::invalidArgument, "DistributedBroadPhase: samplesPerRank must be >= 1");
  // The pair budget is checked here, on the pairs the rank's BroadPhase
  // found: with an error handler installed that returns, a BroadPhase that
  // rejects an update returns its last frame instead, which this rank could
  // not tell from a new one.
  BroadPhaseConfig local = config.local;
  local.maxPairs = 0;
  local_ = std::make_unique<BroadPhase>(local);
  MPI_Comm_dup(comm, &comm_);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  decomposition_ = Decomposition(size_);
  scratch_ = std::make_unique<Scratch>(size_);
  frame_ = {history_, begun_, ended_};
}

DistributedBroadPhase::~DistributedBroadPhase() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

// --- Proxies -----------------------------------------------------------------

DistributedBroadPhase::PendingAdd* DistributedBroadPhase::pendingAdd(uint64_t id) {
  const auto it = addIndex_.find(id);
  return it == addIndex_.end() ? nullptr : &adds_[it->second];
}

const DistributedBroadPhase::PendingAdd* DistributedBroadPhase::pendingAdd(uint64_t id) const {
  const auto it = addIndex_.find(id);
  return it == addIndex_.end() ? nullptr : &adds_[it->second];
}

uint32_t DistributedBroadPhase::ownedIndex(uint64_t id, const char* what) const {
  const auto it = index_.find(id);
  if (it == index_.end())
    fail(ErrorCode::staleHandle,
         std::string(what) + ": " + idText(id) + " is not owned by rank " + std::to_string(rank_));
  const uint32_t i = it->second;
  if (role_[i] != kOwned)
    fail(ErrorCode::staleHandle, std::string(what) + ": " + idText(id) + " is a ghost on rank " +
                                     std::to_string(rank_) + "; its owner is rank " +
                                     std::to_string(owners_[i]));
  if (dirty_[i] & kRemoved)
    fail(ErrorCode::staleHandle, std::string(what) + ": " + idText(id) + " was removed");
  return i;
}

void DistributedBroadPhase::markDirty(uint32_t index, uint8_t change) {
  if (dirty_[index] == 0) dirtyList_.push_back(index);
  dirty_[index] |= change;
}

void DistributedBroadPhase::add(uint64_t id, const ProxyDesc& desc,
                                std::span<const std::byte> payload) {
  if (id == kNoId) fail(ErrorCode::invalidArgument, "add: kNoId is not a valid global id");
  if (!isValid(desc.box))
    fail(ErrorCode::invalidBox, "add: " + idText(id) + ": " + describeInvalid(desc.box));
  if (desc.motion > MotionType::dynamic)
    fail(ErrorCode::invalidArgument, "add: " + idText(id) + ": unknown motion type");
  // Migration and ghosts carry box, filter, motion and user data; a layer
  // would be lost on the first rank change, so only layer 0 is accepted.
  if (desc.layer != 0)
    fail(ErrorCode::invalidArgument, "add: " + idText(id) + ": layer " +
                                         std::to_string(desc.layer) +
                                         " (DistributedBroadPhase keeps every proxy in layer 0)");
  if (!payload.empty() && payload.size() != config_.payloadBytes)
    fail(ErrorCode::invalidArgument, "add: " + idText(id) + ": payload of " +
                                         std::to_string(payload.size()) + " bytes, expected " +
                                         std::to_string(config_.payloadBytes));
  if (addIndex_.count(id))
    fail(ErrorCode::invalidArgument, "add: " + idText(id) + " was already added on rank " +
                                         std::to_string(rank_) + " this frame");
  if (const auto it = index_.find(id); it != index_.end()) {
    const uint32_t i = it->second;
    if (role_[i] == kOwned && (dirty_[i] & kRemoved))
      fail(ErrorCode::invalidArgument,
           "add: " + idText(id) + " was removed this frame; add it again after update()");
    fail(ErrorCode::invalidArgument, "add: " + idText(id) + " is live (held on rank " +
                                         std::to_string(rank_) + ", owner rank " +
                                         std::to_string(owners_[i]) + ")");
  }
  PendingAdd a{id, desc, std::vector<std::byte>(config_.payloadBytes)};
  if (!payload.empty()) std::copy(payload.begin(), payload.end(), a.payload.begin());
  addIndex_.emplace(id, uint32_t(adds_.size()));
  adds_.push_back(std::move(a));
}

void DistributedBroadPhase::remove(uint64_t id) {
  if (const auto it = addIndex_.find(id); it != addIndex_.end()) {
    // Cancel the add: swap with the last pending add.
    const uint32_t k = it->second;
    addIndex_.erase(it);
    if (k + 1 != adds_.size()) {
      adds_[k] = std::move(adds_.back());
      addIndex_[adds_[k].id] = k;
    }
    adds_.pop_back();
    return;
  }
  markDirty(ownedIndex(id, "remove"), kRemoved);
}

void DistributedBroadPhase::move(uint64_t id, const Aabb& box) {
  if (!isValid(box))
    fail(ErrorCode::invalidBox, "move: " + idText(id) + ": " + describeInvalid(box));
  if (PendingAdd* a = pendingAdd(id)) {
    a->desc.box = box;
    return;
  }
  const uint32_t i = ownedIndex(id, "move");
  if (sameBox(nextBoxes_[i], box)) return;
  nextBoxes_[i] = box;
  markDirty(i, kMoved);
}

void DistributedBroadPhase::moveOwned(std::span<const Aabb> boxes) {
  if (boxes.size() != ownedSlots_.size())
    fail(ErrorCode::invalidArgument, "moveOwned: " + std::to_string(boxes.size()) + " boxes for " +
                                         std::to_string(ownedSlots_.size()) + " owned proxies");
  for (size_t k = 0; k < boxes.size(); ++k) {
    const uint32_t i = ownedSlots_[k];
    if (sameBox(nextBoxes_[i], boxes[k])) continue;
    if (!isValid(boxes[k]))
      fail(ErrorCode::invalidBox,
           "moveOwned: " + idText(ids_[i]) + ": " + describeInvalid(boxes[k]));
    if (dirty_[i] & kRemoved)
      fail(ErrorCode::staleHandle, "moveOwned: " + idText(ids_[i]) + " was removed");
  }
  for (size_t k = 0; k < boxes.size(); ++k) {
    const uint32_t i = ownedSlots_[k];
    if (sameBox(nextBoxes_[i], boxes[k])) continue;
    nextBoxes_[i] = boxes[k];
    markDirty(i, kMoved);
  }
}

void DistributedBroadPhase::move(std::span<const uint64_t> ids, std::span<const Aabb> boxes) {
  if (ids.size() != boxes.size())
    fail(ErrorCode::invalidArgument, "move: " + std::to_string(ids.size()) + " ids but " +
                                         std::to_string(boxes.size()) + " boxes");
  for (size_t k = 0; k < ids.size(); ++k) {
    if (!isValid(boxes[k]))
      fail(ErrorCode::invalidBox, "move: " + idText(ids[k]) + ": " + describeInvalid(boxes[k]));
    if (!pendingAdd(ids[k])) ownedIndex(ids[k], "move");
  }
  for (size_t k = 0; k < ids.size(); ++k) move(ids[k], boxes[k]);
}

void DistributedBroadPhase::setFilter(uint64_t id, const Filter& filter) {
  if (PendingAdd* a = pendingAdd(id)) {
    a->desc.filter = filter;
    return;
  }
  const uint32_t i = ownedIndex(id, "setFilter");
  filters_[i] = filter;
  markDirty(i, kAttributes);
}

void DistributedBroadPhase::setUserData(uint64_t id, uint64_t userData) {
  if (PendingAdd* a = pendingAdd(id)) {
    a->desc.userData = userData;
    return;
  }
  const uint32_t i = ownedIndex(id, "setUserData");
  userData_[i] = userData;
  markDirty(i, kAttributes);
}

void DistributedBroadPhase::setMotionType(uint64_t id, MotionType motion) {
  if (motion > MotionType::dynamic)
    fail(ErrorCode::invalidArgument, "setMotionType: " + idText(id) + ": unknown motion type");
  if (PendingAdd* a = pendingAdd(id)) {
    a->desc.motion = motion;
    return;
  }
  const uint32_t i = ownedIndex(id, "setMotionType");
  motions_[i] = motion;
  markDirty(i, kAttributes);
}

bool DistributedBroadPhase::owns(uint64_t id) const {
  if (addIndex_.count(id)) return true;
  const auto it = index_.find(id);
  return it != index_.end() && role_[it->second] == kOwned && !(dirty_[it->second] & kRemoved);
}

ProxyDesc DistributedBroadPhase::desc(uint64_t id) const {
  if (const PendingAdd* a = pendingAdd(id)) return a->desc;
  const uint32_t i = ownedIndex(id, "desc");
  return {nextBoxes_[i], motions_[i], filters_[i], userData_[i]};
}

std::span<std::byte> DistributedBroadPhase::payload(uint64_t id) {
  if (PendingAdd* a = pendingAdd(id)) return a->payload;
  const uint32_t i = ownedIndex(id, "payload");
  return std::span<std::byte>(payloads_).subspan(size_t(i) * config_.payloadBytes,
                                                 config_.payloadBytes);
}

std::span<const std::byte> DistributedBroadPhase::payload(uint64_t id) const {
  if (const PendingAdd* a = pendingAdd(id)) return a->payload;
  const uint32_t i = ownedIndex(id, "payload");
  return std::span<const std::byte>(payloads_).subspan(size_t(i) * config_.payloadBytes,
                                                       config_.payloadBytes);
}

int DistributedBroadPhase::ownerOf(uint64_t id) const {
  const auto it = index_.find(id);
  if (it == index_.end())
    fail(ErrorCode::staleHandle,
         "ownerOf: " + idText(id) + " is not held on rank " + std::to_string(rank_));
  return owners_[it->second];
}

Aabb DistributedBroadPhase::box(uint64_t id) const {
  const auto it = index_.find(id);
  if (it == index_.end())
    fail(ErrorCode::staleHandle,
         "box: " + idText(id) + " is not held on rank " + std::to_string(rank_));
  return boxes_[it->second];
}

// --- Local slots ---------------------------------------------------------------

uint32_t DistributedBroadPhase::addLocal(uint64_t id, int owner, const Aabb& box,
                                         const Filter& filter, MotionType motion,
                                         uint64_t userData) {
  const ProxyId h =
      local_->add({.box = box, .motion = motion, .filter = filter, .userData = userData});
  const uint32_t i = h.index;
  if (i >= ids_.size()) {
    const size_t n = size_t(i) + 1;
    ids_.resize(n);
    handles_.resize(n);
    owners_.resize(n);
    role_.resize(n, kFree);
    boxes_.resize(n);
    filters_.resize(n);
    motions_.resize(n);
    userData_.resize(n);
    nextBoxes_.resize(n);
    dirty_.resize(n, 0);
    payloads_.resize(n * config_.payloadBytes);
  }
  ids_[i] = id;
  handles_[i] = h;
  owners_[i] = owner;
  role_[i] = owner == rank_ ? kOwned : kGhost;
  boxes_[i] = box;
  nextBoxes_[i] = box;
  filters_[i] = filter;
  motions_[i] = motion;
  userData_[i] = userData;
  dirty_[i] = 0;
  index_.emplace(id, i);
  if (role_[i] == kOwned) ++ownedCount_;
  return i;
}

void DistributedBroadPhase::removeLocal(uint32_t i) {
  local_->remove(handles_[i]);
  index_.erase(ids_[i]);
  if (role_[i] == kOwned) --ownedCount_;
  role_[i] = kFree;
  dirty_[i] = 0;
}

// Brings a held proxy to the given state, telling the rank's BroadPhase only
// what changed.
void DistributedBroadPhase::setLocal(uint32_t i, const Aabb& box, const Filter& filter,
                                     MotionType motion, uint64_t userData) {
  if (!sameBox(boxes_[i], box)) local_->move(handles_[i], box);
  if (!sameFilter(filters_[i], filter)) local_->setFilter(handles_[i], filter);
  if (motions_[i] != motion) local_->setMotionType(handles_[i], motion);
  if (userData_[i] != userData) local_->setUserData(handles_[i], userData);
  boxes_[i] = box;
  nextBoxes_[i] = box;
  filters_[i] = filter;
  motions_[i] = motion;
  userData_[i] = userData;
}

// The rank's BroadPhase given slot i's filter, motion type and user data as
// these arrays hold them (set*() writes them here before any update).
void DistributedBroadPhase::tellLocalAttributes(uint32_t i) {
  local_->setFilter(handles_[i], filters_[i]);
  local_->setMotionType(handles_[i], motions_[i]);
  local_->setUserData(handles_[i], userData_[i]);
}

// --- The frame -------------------------------------------------------------------

// Sends every pending add and remove to the directory rank of its id, which
// rejects an id added twice, added while live, or removed and added in one
// frame. Every rank learns the first error (lowest id) and throws it; on
// success the directories are updated.
void DistributedBroadPhase::checkDirectory(Traffic& traffic) {
  Scratch& s = *scratch_;
  s.directory.clear();
  for (uint32_t i : dirtyList_) {
    if (!(dirty_[i] & kRemoved)) continue;
    ByteWriter w(s.directory.to(directoryRank(ids_[i], size_)));
    w.put(uint8_t(0));
    w.put(ids_[i]);
  }
  for (const PendingAdd& a : adds_) {
    ByteWriter w(s.directory.to(directoryRank(a.id, size_)));
    w.put(uint8_t(1));
    w.put(a.id);
  }
  s.directory.run(comm_, kTagDirectory, 0, traffic);

  // What this rank's directory finds: the lowest offending id, why, and the
  // ranks involved.
  struct Problem {
    uint64_t id = kNoId;
    int32_t kind = 0;  // 1: added twice, 2: added while live, 3: removed and added
    int32_t rankA = -1;
    int32_t rankB = -1;
    int32_t pad = 0;
  } mine;
  s.removedIds.clear();
  s.addedIds.clear();
  for (int src = 0; src < size_; ++src) {
    ByteReader r(s.directory.from(src));
    while (!r.done()) {
      const uint8_t kind = r.get<uint8_t>();
      const uint64_t id = r.get<uint64_t>();
      if (kind == 0)
        s.removedIds.push_back(id);
      else
        s.addedIds.push_back({id, src});
    }
  }
  std::sort(s.removedIds.begin(), s.removedIds.end());
  // Stable: for an id added twice, the lower rank comes first.
  std::stable_sort(s.addedIds.begin(), s.addedIds.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  auto note = [&](uint64_t id, int kind, int a, int b) {
    if (id < mine.id) mine = {id, kind, a, b, 0};
  };
  for (size_t k = 0; k < s.addedIds.size(); ++k) {
    const auto [id, src] = s.addedIds[k];
    if (k > 0 && s.addedIds[k - 1].first == id) note(id, 1, s.addedIds[k - 1].second, src);
    if (std::binary_search(s.removedIds.begin(), s.removedIds.end(), id))
      note(id, 3, src, -1);
    else if (directory_.count(id))
      note(id, 2, src, -1);
  }
  std::vector<Problem> all(static_cast<size_t>(size_));
  {
    const detail::InMpi timer(traffic);
    MPI_Allgather(&mine, sizeof(Problem), MPI_BYTE, all.data(), sizeof(Problem), MPI_BYTE, comm_);
  }
  ++traffic.collectives;
  Problem first;
  for (const Problem& p : all)
    if (p.id < first.id) first = p;
  if (first.id != kNoId) {
    std::string why;
    if (first.kind == 1)
      why = " is added on ranks " + std::to_string(first.rankA) + " and " +
            std::to_string(first.rankB) + " in one frame";
    else if (first.kind == 2)
      why = " added on rank " + std::to_string(first.rankA) + " is already live";
    else
      why =
          " is removed and added again (on rank " + std::to_string(first.rankA) + ") in one frame";
    fail(ErrorCode::invalidArgument, "update: " + idText(first.id) + why + "; nothing was applied");
  }
  for (uint64_t id : s.removedIds) directory_.erase(id);
  for (const auto& [id, src] : s.addedIds) directory_.insert(id);
}

// Collective: a decomposition balanced over a sample of the centres every
// rank will own (owned proxies at their new boxes, and pending adds).
Decomposition DistributedBroadPhase::balancedDecomposition(Traffic& traffic) const {
  Scratch& s = *scratch_;
  s.centres.clear();
  for (uint32_t i = 0; i < role_.size(); ++i)
    if (role_[i] == kOwned) s.centres.push_back(nextBoxes_[i].center());
  for (const PendingAdd& a : adds_) s.centres.push_back(a.desc.box.center());
  const size_t n = s.centres.size();
  const size_t stride =
      std::max<size_t>(1, (n + config_.samplesPerRank - 1) / config_.samplesPerRank);
  s.bytes.clear();
  ByteWriter w(s.bytes);
  size_t taken = 0;
  for (size_t k = 0; k < n; k += stride) ++taken;
  // Each sample stands for n / taken proxies of this rank.
  w.put(taken ? double(n) / double(taken) : 0.0);
  for (size_t k = 0; k < n; k += stride) w.put(s.centres[k]);
  std::vector<std::byte> all;
  std::vector<uint64_t> offsets;
  detail::allGather(comm_, s.bytes, 0, all, offsets, traffic);
  std::vector<Vec3> points;
  std::vector<double> weights;
  for (int r = 0; r < size_; ++r) {
    ByteReader rd(std::span<const std::byte>(all).subspan(
        offsets[size_t(r)], offsets[size_t(r) + 1] - offsets[size_t(r)]));
    const double weight = rd.get<double>();
    while (!rd.done()) {
      points.push_back(rd.getVec());
      weights.push_back(weight);
    }
  }
  return Decomposition::build(size_, points, weights);
}

// What update()'s steps share: the traffic and stats they count, and the
// regions before this frame (`old`: the current ones, or their copy in
// `previous` when the frame rebalances).
struct DistributedBroadPhase::FrameRun {
  Traffic traffic;
  FrameStats stats;
  double start = 0;
  double startCpu = 0;
  bool rebalance = false;
  double imbalance = 0;
  Decomposition previous;
  const Decomposition* old = nullptr;
  uint32_t ghosts = 0;
};

// update(): the steps in their order. Only step 2 throws before anything is
// applied; a rank whose BroadPhase fails (step 10) is agreed on in the pair
// exchange, and every rank throws with the proxies updated.
const GlobalFrame& DistributedBroadPhase::update() {
  Scratch& s = *scratch_;
  FrameRun run;
  run.start = now();
  run.startCpu = detail::threadCpu();
  countDestinations(run);                                        // 1
  if (s.counts[size_t(size_)] > 0) checkDirectory(run.traffic);  // 2
  // From here on nothing throws before the rank's BroadPhase update.
  s.ghosts.clear();
  s.migrate.clear();
  s.pairs.clear();
  dropRemoved(run);          // 3
  decideRegions(run);        // 4
  sendDepartures(run);       // 5
  recordStayers(run);        // 6
  receiveArrivals(run);      // 7
  recordArrivalGhosts(run);  // 8
  applyGhostRecords(run);    // 9
  settleOwnership(run);
  std::string failure;
  const uint64_t failed = findLocalPairs(run, failure) ? 0 : kFlagLocalFailed;  // 10
  const uint64_t flags = s.pairs.run(comm_, kTagPairs, failed, run.traffic);
  if (flags & kFlagLocalFailed) {
    // Proxies, ghosts and history are consistent (the history followed
    // migrated proxies); the next update() reports events against it.
    frame_ = {};
    run.stats.totalSeconds = now() - run.start;
    stats_ = run.stats;
    fail(ErrorCode::capacityExceeded,
         "update: a rank's BroadPhase exceeded its pair budget" +
             (failure.empty() ? std::string()
                              : " (rank " + std::to_string(rank_) + ": " + failure + ")") +
             "; proxies are updated, the pair history is kept");
  }
  reportPairsAndEvents();  // 11
  finishFrame(run);
  return frame_;
}

// 1. Where each proxy goes under the current regions: counts per rank, and
//    one more slot for the adds and removes (whether the directory has
//    work). One allreduce.
void DistributedBroadPhase::countDestinations(FrameRun& run) {
  std::vector<int64_t>& counts = scratch_->counts;
  counts.assign(size_t(size_) + 1, 0);
  uint32_t dirtyOwned = 0;
  for (uint32_t i : dirtyList_) {
    if (role_[i] != kOwned) continue;
    ++dirtyOwned;
    if (dirty_[i] & kRemoved)
      ++counts[size_t(size_)];
    else
      ++counts[size_t(decomposition_.ownerOf(nextBoxes_[i].center()))];
  }
  counts[size_t(rank_)] += int64_t(ownedCount_) - dirtyOwned;
  for (const PendingAdd& a : adds_) ++counts[size_t(decomposition_.ownerOf(a.desc.box.center()))];
  counts[size_t(size_)] += int64_t(adds_.size());
  const detail::InMpi timer(run.traffic);
  MPI_Allreduce(MPI_IN_PLACE, counts.data(), size_ + 1, MPI_INT64_T, MPI_SUM, comm_);
  ++run.traffic.collectives;
}

// 3. Removals: their ghosts are dropped where the current regions put them.
void DistributedBroadPhase::dropRemoved(FrameRun& run) {
  Scratch& s = *scratch_;
  for (uint32_t i : dirtyList_) {
    if (role_[i] != kOwned || !(dirty_[i] & kRemoved)) continue;
    decomposition_.ranksTouching(grown(boxes_[i]), s.oldTargets);
    for (int t : s.oldTargets) {
      if (t == rank_) continue;
      ByteWriter w(s.ghosts.to(t));
      w.put(kGhostDrop);
      w.put(ids_[i]);
      ++run.stats.ghostRecords;
    }
    removeLocal(i);
  }
}

// 4. Rebalance when due: every rank takes the same decision from the same
//    counts.
void DistributedBroadPhase::decideRegions(FrameRun& run) {
  const std::vector<int64_t>& counts = scratch_->counts;
  int64_t total = 0;
  int64_t most = 0;
  for (int r = 0; r < size_; ++r) {
    total += counts[size_t(r)];
    most = std::max(most, counts[size_t(r)]);
  }
  const double mean = double(total) / size_;
  run.imbalance = mean > 0 ? double(most) / mean - 1.0 : 0.0;
  run.rebalance = size_ > 1 && total > 0 &&
                  (!balanced_ || (run.imbalance > config_.rebalanceThreshold &&
                                  framesSinceRebalance_ >= config_.rebalanceInterval));
  run.old = &decomposition_;
  if (run.rebalance) {
    run.previous = decomposition_;
    run.old = &run.previous;
    decomposition_ = balancedDecomposition(run.traffic);
    balanced_ = true;
    framesSinceRebalance_ = 0;
    run.stats.rebalanced = true;
  } else {
    ++framesSinceRebalance_;
  }
}

// 5. Migration: owned proxies whose centre left the region, and every
//    pending add, go to their owner with their pair history.
void DistributedBroadPhase::sendDepartures(FrameRun& run) {
  Scratch& s = *scratch_;
  s.departing.clear();
  if (run.rebalance) {
    for (uint32_t i = 0; i < role_.size(); ++i) sendIfLeaving(run, i);
  } else {
    for (uint32_t i : dirtyList_)
      if (dirty_[i] & kMoved) sendIfLeaving(run, i);
  }
  for (const PendingAdd& a : adds_) {
    const int dest = decomposition_.ownerOf(a.desc.box.center());
    ByteWriter w(s.migrate.to(dest));
    w.put(a.id);
    w.put(uint8_t(0));
    w.put(a.desc.box);
    w.put(a.desc.filter);
    w.put(a.desc.motion);
    w.put(a.desc.userData);
    w.putBytes(a.payload);
    w.put(uint32_t(0));
    if (dest != rank_) ++run.stats.migratedOut;
  }
  adds_.clear();
  addIndex_.clear();
  // The departed ids' history went with them.
  if (!s.departing.empty()) {
    s.departedIds.clear();
    for (uint32_t i : s.departing) s.departedIds.push_back(ids_[i]);
    std::sort(s.departedIds.begin(), s.departedIds.end());
    std::erase_if(history_, [&](const GlobalPair& p) {
      return std::binary_search(s.departedIds.begin(), s.departedIds.end(), p.a);
    });
  }
}

// Step 5 for one slot: an owned proxy whose centre the new regions put
// elsewhere is written to its new owner and marked departing.
void DistributedBroadPhase::sendIfLeaving(FrameRun& run, uint32_t i) {
  if (role_[i] != kOwned) return;
  const int dest = decomposition_.ownerOf(nextBoxes_[i].center());
  if (dest == rank_) return;
  Scratch& s = *scratch_;
  ByteWriter w(s.migrate.to(dest));
  w.put(ids_[i]);
  w.put(uint8_t(1));  // has an old box: its ghosts are where that box put them
  w.put(nextBoxes_[i]);
  w.put(boxes_[i]);
  w.put(filters_[i]);
  w.put(motions_[i]);
  w.put(userData_[i]);
  w.putBytes(std::span<const std::byte>(payloads_).subspan(size_t(i) * config_.payloadBytes,
                                                           config_.payloadBytes));
  const auto [lo, hi] =
      std::equal_range(history_.begin(), history_.end(), GlobalPair{ids_[i], 0, 0, 0},
                       [](const GlobalPair& x, const GlobalPair& y) { return x.a < y.a; });
  w.put(uint32_t(hi - lo));
  for (auto it = lo; it != hi; ++it) w.put(*it);
  // The slot may come back as a ghost, and setLocal() tells the rank's
  // BroadPhase only what differs from these arrays: make them true of it
  // again (set*() wrote the new attributes here before any update).
  if (dirty_[i] & kAttributes) tellLocalAttributes(i);
  s.departing.push_back(i);
  role_[i] = kDeparting;
  --ownedCount_;
  ++run.stats.migratedOut;
}

// 6. Ghost records of the proxies that stay (before the arrivals, whose
//    slots are fresh and whose old ghosts follow other rules), their moves
//    to the rank's BroadPhase as one batch, then the migration exchange.
void DistributedBroadPhase::recordStayers(FrameRun& run) {
  Scratch& s = *scratch_;
  if (run.rebalance) {
    for (uint32_t i = 0; i < role_.size(); ++i) {
      if (dirty_[i] || role_[i] != kOwned) continue;
      recordStayer(run, i);  // untouched proxies whose ghosts the new regions move
    }
  }
  for (uint32_t i : dirtyList_) {
    if (dirty_[i] == 0) continue;  // removed in step 3
    recordStayer(run, i);
    dirty_[i] = 0;
  }
  dirtyList_.clear();
  // One batch for the rank's BroadPhase (its parallel path).
  local_->move(s.moveHandles, s.moveBoxes);
  s.moveHandles.clear();
  s.moveBoxes.clear();
  s.migrate.run(comm_, kTagMigrate, 0, run.traffic);
}

// Step 6 for one slot: where the last box put its ghosts under the old
// regions, against where the new box puts them under the new ones. New
// targets get the full record, kept targets a move when the box changed,
// lost targets a drop.
void DistributedBroadPhase::recordStayer(FrameRun& run, uint32_t i) {
  if (role_[i] != kOwned) return;
  Scratch& s = *scratch_;
  std::vector<int>& targets = s.targets;
  std::vector<int>& oldTargets = s.oldTargets;
  const Aabb& box = boxes_[i];
  const Aabb& next = nextBoxes_[i];
  const bool moved = !sameBox(box, next);
  const bool attributes = (dirty_[i] & kAttributes) != 0;
  if (!moved && !attributes && !run.rebalance) return;
  const Aabb before = grown(box);
  const Aabb after = grown(next);
  // Most proxies lie inside the region before and after: no ghosts either
  // way, no tree walks, no records.
  const bool inside =
      run.old->region(rank_).encloses(before) && decomposition_.region(rank_).encloses(after);
  if (!inside) {
    run.old->ranksTouching(before, oldTargets);
    removeRank(oldTargets, rank_);
    decomposition_.ranksTouching(after, targets);
    removeRank(targets, rank_);
  }
  for (int t : inside ? std::span<const int>() : std::span<const int>(targets)) {
    const bool had = hasRank(oldTargets, t);
    if (had && !attributes && !moved) continue;
    ByteWriter w(s.ghosts.to(t));
    w.put(had && !attributes ? kGhostMove : kGhostFull);
    w.put(ids_[i]);
    w.put(nextBoxes_[i]);
    if (!had || attributes) {
      w.put(filters_[i]);
      w.put(motions_[i]);
      w.put(userData_[i]);
    }
    ++run.stats.ghostRecords;
  }
  for (int t : inside ? std::span<const int>() : std::span<const int>(oldTargets)) {
    if (hasRank(targets, t)) continue;
    ByteWriter w(s.ghosts.to(t));
    w.put(kGhostDrop);
    w.put(ids_[i]);
    ++run.stats.ghostRecords;
  }
  // The rank's BroadPhase gets what changed; filters_ etc. already hold
  // the new values, so tell it unconditionally when they changed.
  if (moved) {
    s.moveHandles.push_back(handles_[i]);
    s.moveBoxes.push_back(next);
    boxes_[i] = next;
  }
  if (attributes) tellLocalAttributes(i);
}

// 7. Arrivals, sources in rank order (this rank's own adds included).
void DistributedBroadPhase::receiveArrivals(FrameRun& run) {
  Scratch& s = *scratch_;
  s.arrivals.clear();
  s.historyIn.clear();
  for (int src = 0; src < size_; ++src) {
    ByteReader r(s.migrate.from(src));
    while (!r.done()) {
      const uint64_t id = r.get<uint64_t>();
      const bool hasOld = r.get<uint8_t>() != 0;
      const Aabb box = r.getBox();
      const Aabb oldBox = hasOld ? r.getBox() : box;
      const Filter filter = r.get<Filter>();
      const MotionType motion = r.get<MotionType>();
      const uint64_t userData = r.get<uint64_t>();
      const std::span<const std::byte> payload = r.getBytes(config_.payloadBytes);
      uint32_t i;
      if (const auto it = index_.find(id); it != index_.end()) {
        i = it->second;  // a ghost here until now
        setLocal(i, box, filter, motion, userData);
        owners_[i] = rank_;
        role_[i] = kOwned;
        ++ownedCount_;
      } else {
        i = addLocal(id, rank_, box, filter, motion, userData);
      }
      std::copy(payload.begin(), payload.end(),
                payloads_.begin() + ptrdiff_t(size_t(i) * config_.payloadBytes));
      const uint32_t n = r.get<uint32_t>();
      for (uint32_t k = 0; k < n; ++k) s.historyIn.push_back(r.get<GlobalPair>());
      s.arrivals.push_back({i, src, hasOld, oldBox});
      if (src != rank_) ++run.stats.migratedIn;
    }
  }
}

// 8. Ghost records of the arrivals: the full record to every target (the
//    owner changed); a drop to the ranks where the old owner's box put a
//    copy under the old regions and the new box puts none. Then the ghost
//    exchange.
void DistributedBroadPhase::recordArrivalGhosts(FrameRun& run) {
  Scratch& s = *scratch_;
  std::vector<int>& targets = s.targets;
  std::vector<int>& oldTargets = s.oldTargets;
  for (const Scratch::Arrival& a : s.arrivals) {
    const uint32_t i = a.index;
    decomposition_.ranksTouching(grown(boxes_[i]), targets);
    removeRank(targets, rank_);
    oldTargets.clear();
    if (a.hasOld) {
      run.old->ranksTouching(grown(a.oldBox), oldTargets);
      removeRank(oldTargets, a.from);
    }
    for (int t : targets) {
      ByteWriter w(s.ghosts.to(t));
      w.put(kGhostFull);
      w.put(ids_[i]);
      w.put(boxes_[i]);
      w.put(filters_[i]);
      w.put(motions_[i]);
      w.put(userData_[i]);
      ++run.stats.ghostRecords;
    }
    for (int t : oldTargets) {
      if (t == rank_ || hasRank(targets, t)) continue;
      ByteWriter w(s.ghosts.to(t));
      w.put(kGhostDrop);
      w.put(ids_[i]);
      ++run.stats.ghostRecords;
    }
  }
  s.ghosts.run(comm_, kTagGhost, 0, run.traffic);
}

// 9. Apply the ghost records, sources in rank order. A departed proxy that
//    gets a full record stays here as a ghost; one that gets none goes.
void DistributedBroadPhase::applyGhostRecords(FrameRun&) {
  Scratch& s = *scratch_;
  for (int src = 0; src < size_; ++src) {
    ByteReader r(s.ghosts.from(src));
    while (!r.done()) {
      const uint8_t kind = r.get<uint8_t>();
      const uint64_t id = r.get<uint64_t>();
      if (kind == kGhostDrop) {
        removeLocal(index_.at(id));
        continue;
      }
      const Aabb box = r.getBox();
      if (kind == kGhostMove) {
        // Batched below: no record of this frame removes the same ghost.
        const uint32_t i = index_.at(id);
        s.moveHandles.push_back(handles_[i]);
        s.moveBoxes.push_back(box);
        boxes_[i] = box;
        nextBoxes_[i] = box;
        continue;
      }
      const Filter filter = r.get<Filter>();
      const MotionType motion = r.get<MotionType>();
      const uint64_t userData = r.get<uint64_t>();
      if (const auto it = index_.find(id); it != index_.end()) {
        const uint32_t i = it->second;
        setLocal(i, box, filter, motion, userData);
        owners_[i] = src;
        role_[i] = kGhost;
      } else {
        addLocal(id, src, box, filter, motion, userData);
      }
    }
  }
  local_->move(s.moveHandles, s.moveBoxes);
  s.moveHandles.clear();
  s.moveBoxes.clear();
  for (uint32_t i : s.departing)
    if (role_[i] == kDeparting) removeLocal(i);
}

// Ownership is final for this frame (even if the update fails below): the
// owned lists, and the history that came with the arrivals joins this
// rank's (it belongs to the proxies now owned here).
void DistributedBroadPhase::settleOwnership(FrameRun& run) {
  Scratch& s = *scratch_;
  ownedIds_.clear();
  ownedSlots_.clear();
  run.ghosts = 0;
  for (uint32_t i = 0; i < role_.size(); ++i) {
    if (role_[i] == kOwned) {
      ownedIds_.push_back(ids_[i]);
      ownedSlots_.push_back(i);
    }
    run.ghosts += role_[i] == kGhost;
  }
  if (!s.historyIn.empty()) {
    const size_t mid = history_.size();
    history_.insert(history_.end(), s.historyIn.begin(), s.historyIn.end());
    std::sort(history_.begin() + ptrdiff_t(mid), history_.end(), byIds);
    std::inplace_merge(history_.begin(), history_.begin() + ptrdiff_t(mid), history_.end(), byIds);
  }
}

// 10. The rank's BroadPhase, and its pairs: each kept by the one rank whose
//     region holds the lower corner of the two boxes' intersection, and
//     sent to the owner of its lower id (kept when that is this rank).
//     False, with the reason, when the BroadPhase failed.
bool DistributedBroadPhase::findLocalPairs(FrameRun& run, std::string& failure) {
  Scratch& s = *scratch_;
  s.current.clear();
  // What the pair loop reads per proxy, packed: pairs come in index order of
  // their first proxy only, so the second is a random access. A proxy whose
  // box lies inside the region makes the corner test unnecessary: the
  // corner lies in that box.
  const Region& mine = decomposition_.region(rank_);
  s.info.resize(role_.size());
  for (uint32_t i = 0; i < role_.size(); ++i)
    s.info[i] = {ids_[i], owners_[i], role_[i] != kFree && mine.encloses(boxes_[i])};
  try {
    const double localStart = now();
    const double localCpu = detail::threadCpu();
    const FramePairs& local = local_->update();
    run.stats.localSeconds = now() - localStart;
    run.stats.localCpuSeconds = detail::threadCpu() - localCpu;
    if (config_.local.maxPairs != 0 && local.pairs.size() > config_.local.maxPairs)
      fail(ErrorCode::capacityExceeded,
           std::to_string(local.pairs.size()) +
               " pairs exceed maxPairs = " + std::to_string(config_.local.maxPairs));
    const std::span<const ProxyPair> pairs = local.pairs;
    s.current.reserve(pairs.size());
    // The second proxy of a pair is a random access: fetch it a few pairs
    // ahead.
    constexpr size_t kAhead = 16;
    for (size_t k = 0; k < pairs.size(); ++k) {
      if (k + kAhead < pairs.size()) __builtin_prefetch(&s.info[pairs[k + kAhead].b]);
      const ProxyPair& p = pairs[k];
      const Scratch::PairInfo& a = s.info[p.a];
      const Scratch::PairInfo& b = s.info[p.b];
      // The lower corner of the intersection: exactly one region holds it,
      // and that region's rank holds both boxes.
      if (!(a.inside | b.inside) && !mine.contains(boxes_[p.a].min.cwiseMax(boxes_[p.b].min)))
        continue;
      const bool swap = a.id > b.id;
      const GlobalPair g = swap ? GlobalPair{b.id, a.id, p.userDataB, p.userDataA}
                                : GlobalPair{a.id, b.id, p.userDataA, p.userDataB};
      const int dest = swap ? b.owner : a.owner;
      if (dest == rank_) {
        s.current.push_back(g);
      } else {
        ByteWriter(s.pairs.to(dest)).put(g);
        ++run.stats.pairsSent;
      }
    }
  } catch (const Error& e) {
    failure = e.what();
    return false;
  }
  return true;
}

// 11. This rank's pairs (lower id owned here), then the events against the
//     history, which they become.
void DistributedBroadPhase::reportPairsAndEvents() {
  Scratch& s = *scratch_;
  for (int src = 0; src < size_; ++src) {
    ByteReader r(s.pairs.from(src));
    while (!r.done()) s.current.push_back(r.get<GlobalPair>());
  }
  std::sort(s.current.begin(), s.current.end(), byIds);
  begun_.clear();
  ended_.clear();
  size_t i = 0, j = 0;
  const std::vector<GlobalPair>& cur = s.current;
  while (i < cur.size() || j < history_.size()) {
    if (j == history_.size() || (i < cur.size() && pairBefore(cur[i], history_[j]))) {
      begun_.push_back(cur[i++]);
    } else if (i == cur.size() || pairBefore(history_[j], cur[i])) {
      ended_.push_back(history_[j++]);
    } else {
      ++i;
      ++j;
    }
  }
  history_.swap(s.current);
  frame_ = {history_, begun_, ended_};
}

// The frame's stats; buffers a burst (the first distribution of every
// proxy, a rebalance) sized beyond what a steady frame refills, freed.
void DistributedBroadPhase::finishFrame(FrameRun& run) {
  Scratch& s = *scratch_;
  detail::trim(adds_);
  detail::trim(s.arrivals);
  detail::trim(s.historyIn);
  detail::trim(s.departing);
  detail::trim(s.departedIds);
  detail::trim(s.centres);
  detail::trim(s.bytes);
  detail::trim(s.current);
  s.directory.trim();
  s.migrate.trim();
  s.ghosts.trim();
  s.pairs.trim();

  FrameStats& stats = run.stats;
  const Traffic& traffic = run.traffic;
  stats.owned = ownedCount_;
  stats.ghosts = run.ghosts;
  stats.reported = uint32_t(history_.size());
  stats.imbalance = run.imbalance;
  stats.bytesSent = traffic.bytesSent;
  stats.bytesReceived = traffic.bytesReceived;
  stats.messagesSent = traffic.messagesSent;
  stats.messagesReceived = traffic.messagesReceived;
  stats.collectives = traffic.collectives;
  stats.exchangeSeconds = traffic.seconds;
  stats.workCpuSeconds = detail::threadCpu() - run.startCpu - traffic.cpuSeconds;
  stats.totalSeconds = now() - run.start;
  stats_ = stats;
}

// --- Introspection -------------------------------------------------------------

namespace {

template <class T>
size_t bytesOf(const std::vector<T>& v) {
  return v.capacity() * sizeof(T);
}

// An unordered container: its bucket array and one node per entry (the
// value and the next pointer, and the cached hash for std::hash<uint64_t>'s
// identity hash: none, so value + pointer, rounded to 16 by the allocator).
template <class Map>
size_t bytesOfMap(const Map& m) {
  const size_t node = (sizeof(typename Map::value_type) + sizeof(void*) + 15) / 16 * 16;
  return m.bucket_count() * sizeof(void*) + m.size() * node;
}

}  // namespace

size_t DistributedBroadPhase::memoryBytes() const {
  const Scratch& s = *scratch_;
  size_t bytes = local_->memoryBytes();
  bytes += bytesOf(ids_) + bytesOf(handles_) + bytesOf(owners_) + bytesOf(role_) + bytesOf(boxes_) +
           bytesOf(filters_) + bytesOf(motions_) + bytesOf(userData_) + bytesOf(nextBoxes_) +
           bytesOf(dirty_) + bytesOf(dirtyList_) + bytesOf(payloads_);
  bytes += bytesOfMap(index_) + bytesOfMap(addIndex_) + bytesOfMap(directory_);
  bytes += bytesOf(ownedIds_) + bytesOf(ownedSlots_) + bytesOf(history_) + bytesOf(begun_) +
           bytesOf(ended_) + bytesOf(adds_);
  bytes += bytesOf(s.current) + bytesOf(s.historyIn) + bytesOf(s.info) + bytesOf(s.moveHandles) +
           bytesOf(s.moveBoxes) + bytesOf(s.departing) + bytesOf(s.departedIds) +
           bytesOf(s.arrivals) + bytesOf(s.centres) + bytesOf(s.bytes);
  for (const detail::Exchange* e :
       {&s.directory, &s.migrate, &s.ghosts, &s.pairs, &s.queries, &s.validation})
    bytes += e->memoryBytes();
  return bytes;
}

// --- validate ------------------------------------------------------------------

std::string DistributedBroadPhase::validateLocal() const {
  if (std::string local = local_->validate(); !local.empty()) return "local BroadPhase: " + local;
  uint32_t owned = 0, held = 0;
  std::vector<int> targets;
  const Region& mine = decomposition_.region(rank_);
  for (uint32_t i = 0; i < role_.size(); ++i) {
    if (role_[i] == kFree) continue;
    ++held;
    const std::string who = idText(ids_[i]) + " (local index " + std::to_string(i) + ")";
    const auto it = index_.find(ids_[i]);
    if (it == index_.end() || it->second != i) return who + ": not in the id map";
    if (!local_->contains(handles_[i])) return who + ": its handle is not live";
    if (!sameBox(local_->desc(handles_[i]).box, boxes_[i]))
      return who + ": box differs from the rank's BroadPhase";
    if (role_[i] == kOwned) {
      ++owned;
      if (owners_[i] != rank_)
        return who + ": owned but the owner is " + std::to_string(owners_[i]);
      if (!mine.contains(boxes_[i].center())) return who + ": owned but its centre is elsewhere";
    } else if (role_[i] == kGhost) {
      if (owners_[i] == rank_) return who + ": a ghost of its own rank";
      if (!mine.touches(grown(boxes_[i]))) return who + ": a ghost that does not touch the region";
    } else {
      return who + ": unknown role " + std::to_string(role_[i]);
    }
  }
  if (owned != ownedCount_)
    return "owned count " + std::to_string(ownedCount_) + ", found " + std::to_string(owned);
  if (held != index_.size())
    return "id map has " + std::to_string(index_.size()) + " ids, " + std::to_string(held) +
           " held";
  if (local_->proxyCount() != held)
    return "the rank's BroadPhase has " + std::to_string(local_->proxyCount()) + " proxies, " +
           std::to_string(held) + " held";
  for (size_t k = 0; k < history_.size(); ++k) {
    const GlobalPair& p = history_[k];
    if (!(p.a < p.b))
      return "history pair " + std::to_string(p.a) + ", " + std::to_string(p.b) + " out of order";
    if (k > 0 && !pairBefore(history_[k - 1], p)) return "history not sorted";
    const auto it = index_.find(p.a);
    if (it == index_.end() || role_[it->second] != kOwned)
      return "history pair of " + idText(p.a) + ", which this rank does not own";
  }
  for (uint64_t id : directory_)
    if (directoryRank(id, size_) != rank_)
      return "directory holds " + idText(id) + " of another rank";
  return {};
}

std::string DistributedBroadPhase::validate() const {
  Scratch& s = *scratch_;
  Traffic traffic;
  std::string message = validateLocal();
  // Every ghost tells its owner what it holds; the owner checks the box and
  // that the ghost is where the rules put it, and counts them.
  s.validation.clear();
  for (uint32_t i = 0; i < role_.size(); ++i) {
    if (role_[i] != kGhost) continue;
    ByteWriter w(s.validation.to(owners_[i]));
    w.put(ids_[i]);
    w.put(boxes_[i]);
    w.put(filters_[i]);
    w.put(motions_[i]);
    w.put(userData_[i]);
  }
  s.validation.run(comm_, kTagValidate, message.empty() ? 0 : 1, traffic);
  std::unordered_map<uint64_t, uint32_t> copies;
  std::vector<int> targets;
  for (int src = 0; src < size_ && message.empty(); ++src) {
    ByteReader r(s.validation.from(src));
    while (!r.done() && message.empty()) {
      const uint64_t id = r.get<uint64_t>();
      const Aabb box = r.getBox();
      const Filter filter = r.get<Filter>();
      const MotionType motion = r.get<MotionType>();
      const uint64_t userData = r.get<uint64_t>();
      const auto it = index_.find(id);
      if (it == index_.end() || role_[it->second] != kOwned) {
        message = "rank " + std::to_string(src) + " holds a ghost of " + idText(id) +
                  ", which rank " + std::to_string(rank_) + " does not own";
        break;
      }
      const uint32_t i = it->second;
      decomposition_.ranksTouching(grown(boxes_[i]), targets);
      if (!sameBox(box, boxes_[i]) || !sameFilter(filter, filters_[i]) || motion != motions_[i] ||
          userData != userData_[i])
        message = "rank " + std::to_string(src) + "'s ghost of " + idText(id) +
                  " differs from the owner's proxy";
      else if (!hasRank(targets, src))
        message = "rank " + std::to_string(src) + " holds a ghost of " + idText(id) +
                  " that its box does not send there";
      ++copies[id];
    }
  }
  for (uint32_t i = 0; i < role_.size() && message.empty(); ++i) {
    if (role_[i] != kOwned) continue;
    decomposition_.ranksTouching(grown(boxes_[i]), targets);
    removeRank(targets, rank_);
    const auto it = copies.find(ids_[i]);
    const size_t have = it == copies.end() ? 0 : it->second;
    if (have != targets.size())
      message = idText(ids_[i]) + " has " + std::to_string(have) + " ghosts, its box touches " +
                std::to_string(targets.size()) + " other regions";
  }
  // The directories hold exactly the live ids.
  int64_t sums[3] = {int64_t(directory_.size()), int64_t(ownedCount_), message.empty() ? 0 : 1};
  MPI_Allreduce(MPI_IN_PLACE, sums, 3, MPI_INT64_T, MPI_SUM, comm_);
  if (message.empty() && sums[0] != sums[1])
    message = "the directories hold " + std::to_string(sums[0]) + " ids, the ranks own " +
              std::to_string(sums[1]);
  if (message.empty() && sums[2] > 0) message = "another rank failed validation";
  return message.empty() ? message : "rank " + std::to_string(rank_) + ": " + message;
}

}  // namespace bp::mpi
