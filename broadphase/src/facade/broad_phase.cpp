// BroadPhase: proxies, the deferred changes, and the frame (pairs + events).
// Queries are in broad_phase_query.cpp; the per-side glue in broad_phase_side.h.
#include <broadphase/broad_phase.h>

#include "common/assert.h"
#include "common/batch_check.h"
#include "common/even_chunks.h"
#include "common/grow.h"
#include "common/report_error.h"
#include "facade/broad_phase_side.h"
#include "facade/double_world.h"
#include "facade/layer_check.h"
#include "facade/query_view.h"

#include <tbb/parallel_sort.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstring>
#include <optional>
#include <string>
#include <utility>

namespace bp {

namespace {

std::string handleText(ProxyId id) {
  return "handle {index " + std::to_string(id.index) + ", generation " +
         std::to_string(id.generation) + "}";
}

// The message of update()'s capacityExceeded.
std::string overMaxPairs(uint64_t maxPairs) {
  return "update: the frame has more than maxPairs = " + std::to_string(maxPairs) + " pairs";
}

// Below this many pairs, mapping and sorting run on the calling thread.
constexpr uint32_t kPairGrain = 16384;

// An event list that a frame of many events grew (the first update, where
// every pair begins) is released once frames are back to few: on
// `clustered` 10^6 the first frame's begun list alone kept 0.68 GB. The test
// is against the last frame's count, so a steady state never meets it and
// does not allocate (as the sweep's relink scratch). The list released
// makes way for one of twice the last frame's count, reserved and not yet
// written: the frame fills it without growing it step by step (each step a
// copy into fresh memory).
// `slack`: the capacity always kept (kKeptEventCapacity over the lists that
// share it).
constexpr size_t kKeptEventCapacity = 65536;
void releaseIfOversized(std::vector<ProxyPair>& list, size_t slack = kKeptEventCapacity) {
  if (list.capacity() <= 8 * list.size() + slack) return;
  std::vector<ProxyPair> smaller;
  smaller.reserve(2 * list.size());
  list.swap(smaller);
}

// mergePairsAndEvents(): up to how many bytes of this frame's pair list the
// begun pairs' user data is looked up in a pass after the merge (the lookups
// independent of each other, so their misses overlap; the begun pairs' places
// in the list are still in the cache), and, for longer lists, how many pairs
// ahead the merge fetches it (see docs/decisions.md).
constexpr size_t kDeferLookupsBytes = size_t(16) << 20;
constexpr size_t kUserAhead = 16;

inline void prefetchRead(const void* p) {
#if defined(__GNUC__)
  __builtin_prefetch(p, 0, 3);
#else
  (void)p;
#endif
}

// Pair p with its user data written at dst as three 8-byte words (no wider
// load of them follows soon, see mergePairsAndEvents()).
inline void writePair(ProxyPair* dst, Pair p, uint64_t userDataA, uint64_t userDataB) {
  static_assert(offsetof(ProxyPair, userDataA) == 8 && offsetof(ProxyPair, userDataB) == 16);
  char* const d = reinterpret_cast<char*>(dst);
  std::memcpy(d, &p, 8);
  std::memcpy(d + 8, &userDataA, 8);
  std::memcpy(d + 16, &userDataB, 8);
}

// A move batch, or the pending moves, split into chunks of at most this many
// entries for the threads (as SweepGrid's batch move).
constexpr uint32_t kMoveChunk = 8192;
// A frame's first batch is checked and recorded this many entries at a time
// (recordFirstBatch): a block's entries, 8 KB, stay in the cache between.
constexpr uint32_t kCheckBlock = 256;

// The chunks of a list of n items (chunkSize each, the last maybe fewer)
// each kept their first counts[c] items: moves them to follow the chunks
// before, in chunk order, and returns how many there are in all.
template <class T>
uint32_t closeUp(T* items, uint32_t n, uint32_t chunkSize, std::span<const uint32_t> counts) {
  uint32_t total = 0;
  for (uint32_t c = 0; c < counts.size(); ++c) {
    const uint32_t begin = std::min(n, c * chunkSize);
    if (begin != total) std::copy_n(items + begin, counts[c], items + total);
    total += counts[c];
  }
  return total;
}

// An Aabb's bytes, for copies in three 8-byte words.
struct BoxWords {
  uint64_t w[3];
};
static_assert(sizeof(BoxWords) == sizeof(Aabb));

// *dst = src as three 8-byte words. Through a local Aabb the compiler
// stored the box in pieces and read it back whole, a store-forwarding stall
// that made the record three times slower (docs/decisions.md).
inline void copyBox(Aabb* dst, const Aabb& src) {
  BoxWords box;
  std::memcpy(&box, &src, sizeof box);
  std::memcpy(static_cast<void*>(dst), &box, sizeof box);
}

}  // namespace

// A bad field is reported; when the handler returns, the field takes its
// default and the next field is checked.
BroadPhase::BroadPhase(const BroadPhaseConfig& config) : config_(config) {
  const BroadPhaseConfig defaults;
  if (config.arena == nullptr && config.threads < 0) {
    reportError(ErrorCode::invalidArgument,
                "thread count " + std::to_string(config.threads) + " is negative (0 = all cores)");
    config_.threads = defaults.threads;
  }
  if (!(config.margin >= 0.0f) || !std::isfinite(config.margin)) {
    reportError(ErrorCode::invalidArgument,
                "margin " + std::to_string(config.margin) + " must be finite and >= 0");
    config_.margin = defaults.margin;
  }
  if (!(config.cellSize >= 0.0f) || !std::isfinite(config.cellSize)) {
    reportError(ErrorCode::invalidArgument,
                "cell size " + std::to_string(config.cellSize) + " must be finite and >= 0");
    config_.cellSize = defaults.cellSize;
  }
  if (config.structure != Structure::bvh && config.structure != Structure::sweep &&
      config.structure != Structure::automatic) {
    reportError(ErrorCode::invalidArgument,
                "unknown structure " + std::to_string(int(config.structure)));
    config_.structure = defaults.structure;
  }
  if (!config.layers.symmetric()) {
    reportError(ErrorCode::invalidArgument,
                "BroadPhaseConfig::layers: " + asymmetryOf(config.layers));
    config_.layers = defaults.layers;
  }
  scheduler_ = config_.arena ? std::make_unique<Scheduler>(*config_.arena)
                             : std::make_unique<Scheduler>(config_.threads);
  structure_ = makeStructure();
  if (config_.concurrentQueries) view_ = std::make_unique<QueryView>(makeStructure());
}

// `automatic` is the sweep: measured fastest for a frame's pairs on every
// standard scene and on static/moving mixes, since statics sit in cells of
// their own that a frame never re-sorts (figures and how they were measured:
// docs/threading.md, "automatic").
std::unique_ptr<BroadPhase::Side> BroadPhase::makeStructure() const {
  return config_.structure == Structure::bvh ? Side::makeBvh(config_) : Side::makeSweep(config_);
}

BroadPhase::~BroadPhase() = default;

// --- Proxies ------------------------------------------------------------------

namespace {
bool validMotion(MotionType m) {
  return m == MotionType::staticBody || m == MotionType::kinematic || m == MotionType::dynamic;
}
bool validDesc(const ProxyDesc& d) {
  return isValid(d.box) && validMotion(d.motion) && d.layer < kMaxLayers;
}
// Reports why a description that failed validDesc() is bad, the message
// after `where` (built only then).
void reportBadDesc(const ProxyDesc& d, const std::string& where) {
  if (!isValid(d.box))
    reportError(ErrorCode::invalidBox, where + describeInvalid(d.box));
  else if (d.layer >= kMaxLayers)
    reportError(ErrorCode::invalidArgument, where + layerOutOfRange(d.layer));
  else
    reportError(ErrorCode::invalidArgument, where + "motion type " + std::to_string(int(d.motion)) +
                                                " is not static, kinematic or dynamic");
}
}  // namespace

ProxyId BroadPhase::add(const ProxyDesc& desc) {
  if (!validDesc(desc)) {
    reportBadDesc(desc, "add: ");
    return ProxyId{};
  }
  return addChecked(desc);
}

ProxyId BroadPhase::addChecked(const ProxyDesc& desc) {
  const ProxyId id = pool_.allocate();
  const uint32_t i = id.index;
  if (i >= rules_.size()) {
    rules_.resize(i + 1);
    boxes_.resize(i + 1);
    userData_.resize(i + 1);
    inner_.resize(i + 1);
    state_.resize(i + 1, 0);
    renewed_.resize(i + 1, 0);
  }
  rules_[i] = {desc.filter, desc.motion, uint8_t(desc.layer)};
  boxes_[i] = desc.box;
  userData_[i] = desc.userData;
  special_ += isSpecial(desc.motion, desc.filter);
  state_[i] = kPendingAdd;
  pendingAdds_.push_back(i);
  return id;
}

void BroadPhase::add(std::span<const ProxyDesc> descs, std::span<ProxyId> out) {
  // On a rejection every handle of `out` is ProxyId{}.
  if (descs.size() != out.size()) {
    reportError(ErrorCode::invalidArgument, "add: " + std::to_string(descs.size()) +
                                                " descriptions but room for " +
                                                std::to_string(out.size()) + " handles");
    std::fill(out.begin(), out.end(), ProxyId{});
    return;
  }
  for (size_t k = 0; k < descs.size(); ++k)
    if (!validDesc(descs[k])) {
      reportBadDesc(descs[k], "add: entry " + std::to_string(k) + ": ");
      std::fill(out.begin(), out.end(), ProxyId{});
      return;
    }
  for (size_t k = 0; k < descs.size(); ++k) out[k] = addChecked(descs[k]);
}

bool BroadPhase::checkLive(ProxyId id, const char* what) const {
  if (pool_.isLive(id)) return true;
  reportError(ErrorCode::staleHandle,
              std::string(what) + ": " + handleText(id) +
                  " is not a live proxy of this broadphase (removed, never issued, or foreign)");
  return false;
}

void BroadPhase::remove(ProxyId id) {
  if (!checkLive(id, "remove")) return;
  removeChecked(id);
}

void BroadPhase::removeChecked(ProxyId id) {
  const uint32_t i = id.index;
  // A proxy that never reached a structure is simply forgotten. Its entries in
  // pendingAdds_/pendingMoves_ stay behind (finding them would cost O(n) per
  // remove) and are skipped by applyPending(), which trusts only state_.
  const bool inStructure = !(state_[i] & kPendingAdd) || (state_[i] & kRehome);
  if (inStructure) {
    // The structure keeps the proxy until update(), but queries must never
    // report it again: its slot stops mapping to this index now (the index
    // may be reused by the next add before the update). A rehomed proxy's
    // old slot is queued for removal already.
    structure_->forget(inner_[i].index);
    if (view_) view_->forget(i);
    if (!(state_[i] & kRehome)) pendingRemoves_.push_back(inner_[i]);
    if (!renewed_[i]) renewedList_.push_back(i);
    renewed_[i] = 1;
  }
  dropIfListed(i);
  special_ -= isSpecial(rules_[i].motion, rules_[i].filter);
  if (dworld_) forgetDouble(i);
  state_[i] = 0;
  pool_.release(id);
}

void BroadPhase::remove(std::span<const ProxyId> ids) {
  // Every entry live, and none twice; the error names the first entry in
  // batch order that is dead or repeats an earlier one. Live handles are
  // equal exactly when their indices are, so a sort of (index, entry) finds
  // the repeats in O(k log k): a batch of 10^6 is checked in milliseconds.
  size_t firstStale = ids.size();
  for (size_t k = 0; k < ids.size(); ++k)
    if (!pool_.isLive(ids[k])) {
      firstStale = k;
      break;
    }
  std::vector<std::pair<uint32_t, uint32_t>> order;  // (index, entry) of the live prefix
  order.reserve(firstStale);
  for (size_t k = 0; k < firstStale; ++k) order.push_back({ids[k].index, uint32_t(k)});
  std::sort(order.begin(), order.end());
  size_t firstRepeat = ids.size();
  for (size_t r = 1; r < order.size(); ++r)
    if (order[r].first == order[r - 1].first)
      firstRepeat = std::min<size_t>(firstRepeat, order[r].second);
  if (firstRepeat < firstStale) {
    reportError(ErrorCode::staleHandle, "remove: entry " + std::to_string(firstRepeat) + ": " +
                                            handleText(ids[firstRepeat]) +
                                            " appears twice in the batch");
    return;
  }
  if (firstStale < ids.size()) {
    checkLive(ids[firstStale], ("remove: entry " + std::to_string(firstStale)).c_str());
    return;
  }
  for (ProxyId id : ids) removeChecked(id);
}

void BroadPhase::move(ProxyId id, const Aabb& box) {
  if (!checkLive(id, "move")) return;
  if (isDoubleProxy(id.index)) {
    reportError(ErrorCode::invalidArgument, "move: proxy " + std::to_string(id.index) +
                                                " was added with a DAabb (move it with one)");
    return;
  }
  if (!isValid(box)) {
    reportError(ErrorCode::invalidBox, "move: " + describeInvalid(box));
    return;
  }
  recordMove(id.index, box);
}

void BroadPhase::move(std::span<const ProxyId> ids, std::span<const Aabb> boxes) {
  if (ids.size() != boxes.size()) {
    reportError(ErrorCode::invalidArgument, "move: " + std::to_string(ids.size()) +
                                                " handles but " + std::to_string(boxes.size()) +
                                                " boxes");
    return;
  }
  const uint32_t n = static_cast<uint32_t>(ids.size());
  if (n == 0) return;
  const bool parallel = scheduler_->threadCount() > 1 && n > kMoveChunk;
  const EvenChunks split = parallel
                               ? evenChunks(n, kMoveChunk, 1, uint32_t(scheduler_->threadCount()))
                               : EvenChunks{1, n};
  // The usual frame's one batch: see recordFirstBatch(). One it does not
  // take has had its chunks' order found (chunkAscending_) already.
  bool orderKnown = false;
  if (pendingMoves_.empty() && pendingAdds_.empty() && !(dworld_ && dworld_->count != 0)) {
    const FirstBatch taken = recordFirstBatch(ids, boxes, split);
    if (taken == FirstBatch::rejected) reportMoveCulprit(ids, boxes);
    if (taken != FirstBatch::notTaken) return;
    orderKnown = split.count > 1;
  }
  markPendingMoves();
  // Validate everything first (nothing changes if any entry is bad; the
  // checks only read, so they run in parallel chunks), then record without
  // checking again, in batch order. The check also notes whether the
  // indices strictly increase (an engine's usual batch: its bodies in
  // order); then no proxy repeats and the chunks record side by side, as
  // SweepGrid's batch move writes, each in the same chunks as it was
  // checked, with its entries still in that thread's cache (static 10^5,
  // two threads: its 10^4 entries recorded on the calling thread after a
  // check in tasks took 180-320 us, in tasks 40-50 us).
  if (!orderKnown) chunkAscending_.assign(split.count, 0);
  std::atomic<bool> bad{false};
  forEachChunk(*scheduler_, split, n, [&](uint32_t c, uint32_t begin, uint32_t end) {
    if (!allLiveAndValid(pool_, ids, boxes, begin, end)) bad.store(true, std::memory_order_relaxed);
    if (parallel && !orderKnown) chunkAscending_[c] = indicesAscending(ids, begin, end);
  });
  if (bad.load(std::memory_order_relaxed)) {
    reportMoveCulprit(ids, boxes);
    return;
  }
  if (dworld_ && dworld_->count != 0)
    for (size_t k = 0; k < ids.size(); ++k)
      if (dworld_->has(ids[k].index)) {
        reportError(ErrorCode::invalidArgument, "move: entry " + std::to_string(k) + ": proxy " +
                                                    std::to_string(ids[k].index) +
                                                    " was added with a DAabb (move it with one)");
        return;
      }
  const size_t listed = pendingMoves_.size();
  pendingMoves_.resize(listed + n);
  uint32_t* const out = pendingMoves_.data() + listed;
  const bool unique = parallel && std::all_of(chunkAscending_.begin(), chunkAscending_.end(),
                                              [](uint8_t a) { return a != 0; });
  uint32_t joined = 0;
  if (unique) {
    chunkCount_.resize(split.count);
    forEachChunk(*scheduler_, split, n, [&](uint32_t c, uint32_t begin, uint32_t end) {
      chunkCount_[c] = recordMoves(ids, boxes, begin, end, out + begin);
    });
    joined = closeUp(out, n, split.size, chunkCount_);
  } else {
    joined = recordMoves(ids, boxes, 0, n, out);
  }
  pendingMoves_.resize(listed + joined);
}

// The first bad entry of a batch that failed its check, reported: the slow
// search runs on this path only.
void BroadPhase::reportMoveCulprit(std::span<const ProxyId> ids,
                                   std::span<const Aabb> boxes) const {
  for (size_t k = 0; k < ids.size(); ++k) {
    if (!checkLive(ids[k], ("move: entry " + std::to_string(k)).c_str())) return;
    if (!isValid(boxes[k])) {
      reportError(ErrorCode::invalidBox,
                  "move: entry " + std::to_string(k) + ": " + describeInvalid(boxes[k]));
      return;
    }
  }
}

// A frame's first batch while no add is pending and no proxy is double (the
// usual frame: every body moved in one batch). Every entry then joins the
// pending list, in batch order, so the record neither reads nor writes the
// state bytes, and the list stays unmarked (movesUnmarked_) until something
// asks whether a proxy is listed; update() then has no marks to clear. Each
// block of kCheckBlock entries is checked and recorded in one pass, while it
// is in the cache, rather than the whole batch checked and then read again
// (uniform 10^5, one thread: the move and the update's apply together
// took about 135 us less, 3.5 % of the frame). A bad entry undoes what was
// recorded: a listed proxy had no move pending, so its structure holds the
// box it had. One thread: a batch whose indices do not strictly increase
// is made unique afterwards (its marks set, later repeats dropped; boxes_
// holds the last box given). With workers, the chunks record side by side
// only when the indices strictly increase (checked first: no proxy can be
// in two chunks); otherwise nothing is done and the general path runs.
BroadPhase::FirstBatch BroadPhase::recordFirstBatch(std::span<const ProxyId> ids,
                                                    std::span<const Aabb> boxes, EvenChunks split) {
  const uint32_t n = static_cast<uint32_t>(ids.size());
  if (split.count > 1) {
    chunkAscending_.assign(split.count, 0);
    forEachChunk(*scheduler_, split, n, [&](uint32_t c, uint32_t begin, uint32_t end) {
      chunkAscending_[c] = indicesAscending(ids, begin, end);
    });
    if (!std::all_of(chunkAscending_.begin(), chunkAscending_.end(),
                     [](uint8_t a) { return a != 0; }))
      return FirstBatch::notTaken;
  }
  pendingMoves_.resize(n);
  chunkCount_.assign(split.count, 0);  // where each chunk's record stopped
  std::atomic<bool> bad{false};
  bool ascending = true;
  forEachChunk(*scheduler_, split, n, [&](uint32_t c, uint32_t begin, uint32_t end) {
    bool chunkAscending = true;
    chunkCount_[c] = checkAndRecord(ids, boxes, begin, end, chunkAscending);
    if (chunkCount_[c] != end) bad.store(true, std::memory_order_relaxed);
    if (split.count == 1) ascending = chunkAscending;
  });
  if (bad.load(std::memory_order_relaxed)) {
    for (uint32_t c = 0; c < split.count; ++c)
      restoreStructureBoxes(ids, std::min(n, c * split.size), chunkCount_[c]);
    pendingMoves_.clear();
    return FirstBatch::rejected;
  }
  movesUnmarked_ = ascending;
  if (!ascending) {
    // (No proxy is marked while the list is empty.)
    uint8_t* const state = state_.data();
    uint32_t kept = 0;
    for (uint32_t k = 0; k < n; ++k) {
      const uint32_t i = pendingMoves_[k];
      if (state[i] & kPendingMove) continue;
      state[i] |= kPendingMove;
      pendingMoves_[kept++] = i;
    }
    pendingMoves_.resize(kept);
  }
  return FirstBatch::recorded;
}

// Entries [begin, end) of a first batch checked and recorded kCheckBlock at
// a time (each index to pendingMoves_ at its own place), noting in
// `ascending` whether their indices strictly increase. Returns where it
// stopped: `end`, or the start of the first block holding a bad entry.
uint32_t BroadPhase::checkAndRecord(std::span<const ProxyId> ids, std::span<const Aabb> boxes,
                                    uint32_t begin, uint32_t end, bool& ascending) {
  Aabb* const stored = boxes_.data();
  uint32_t* const out = pendingMoves_.data();
  for (uint32_t b = begin; b < end; b += kCheckBlock) {
    const uint32_t e = std::min(end, b + kCheckBlock);
    if (!allLiveAndValid(pool_, ids, boxes, b, e)) return b;
    ascending &= indicesAscending(ids, b, e);
    for (uint32_t k = b; k < e; ++k) {
      const uint32_t i = ids[k].index;
      copyBox(&stored[i], boxes[k]);
      out[k] = i;
    }
  }
  return end;
}

// boxes_ of the proxies of entries [begin, end) back to the boxes their
// structure holds.
void BroadPhase::restoreStructureBoxes(std::span<const ProxyId> ids, uint32_t begin, uint32_t end) {
  const Side& side = *structure_;
  for (uint32_t k = begin; k < end; ++k) {
    const uint32_t i = ids[k].index;
    boxes_[i] = side.visit([&](const auto& s) { return Aabb(s.box(inner_[i].index)); });
  }
}

void BroadPhase::markPendingMoves() {
  if (!movesUnmarked_) return;
  uint8_t* const state = state_.data();
  for (const uint32_t i : pendingMoves_) state[i] |= kPendingMove;
  movesUnmarked_ = false;
}

// recordMove() for entries [begin, end) of a checked batch, without a branch
// per entry: each index joins the list at `out` unless already pending (a
// repeat, or an add not applied yet). The slot at out[joined] is written
// whether or not the entry joins; it lies within the entries' own stretch
// (joined <= k - begin), so chunks writing side by side never meet. The box
// is written once, to boxes_, where applyPending() hands it to the
// structure: a staged copy of the batch (handles and boxes side by side)
// cost more to write than the structure saved reading it (uniform 10^5,
// one thread, see docs/decisions.md). Returns how many joined.
uint32_t BroadPhase::recordMoves(std::span<const ProxyId> ids, std::span<const Aabb> boxes,
                                 uint32_t begin, uint32_t end, uint32_t* out) {
  Aabb* const stored = boxes_.data();
  uint8_t* const state = state_.data();
  uint32_t joined = 0;
  for (uint32_t k = begin; k < end; ++k) {
    const uint32_t i = ids[k].index;
    const uint8_t s = state[i];
    copyBox(&stored[i], boxes[k]);
    out[joined] = i;
    joined += joinsPendingMoves(s);
    state[i] = movedState(s);
  }
  return joined;
}

void BroadPhase::recordMove(uint32_t i, const Aabb& box) {
  markPendingMoves();
  boxes_[i] = box;
  const uint8_t s = state_[i];
  if (joinsPendingMoves(s)) pendingMoves_.push_back(i);
  state_[i] = movedState(s);
}

void BroadPhase::setFilter(ProxyId id, const Filter& filter) {
  if (!checkLive(id, "setFilter")) return;
  Rules& r = rules_[id.index];
  special_ += uint32_t(isSpecial(r.motion, filter)) - uint32_t(isSpecial(r.motion, r.filter));
  r.filter = filter;
  if (view_) view_->setFilter(id.index, filter);
}

void BroadPhase::setUserData(ProxyId id, uint64_t userData) {
  if (!checkLive(id, "setUserData")) return;
  userData_[id.index] = userData;
  userDataChanged_ = true;
  if (view_) view_->userDataSet.push_back(id.index);
}

void BroadPhase::setMotionType(ProxyId id, MotionType motion) {
  if (!checkLive(id, "setMotionType")) return;
  if (!validMotion(motion)) {
    reportError(ErrorCode::invalidArgument, "setMotionType: motion type " +
                                                std::to_string(int(motion)) +
                                                " is not static, kinematic or dynamic");
    return;
  }
  const uint32_t i = id.index;
  Rules& r = rules_[i];
  special_ += uint32_t(isSpecial(motion, r.filter)) - uint32_t(isSpecial(r.motion, r.filter));
  const bool wasStatic = r.motion == MotionType::staticBody;
  r.motion = motion;
  // The structures keep statics apart (the BVH's static tree, the sweep's
  // static cells), so a change between static and moving takes the proxy
  // out of its part and back in at the next update. Not a remove: its
  // index and pairs stay, so a pair that still stands gets no event.
  // (accepts() reads rules_ only at the update, and queries do not look at
  // the motion type, so nothing else changes before then.)
  if (wasStatic == (motion == MotionType::staticBody) || (state_[i] & kPendingAdd)) return;
  dropIfListed(i);
  pendingRemoves_.push_back(inner_[i]);
  state_[i] = kPendingAdd | kRehome;
  pendingAdds_.push_back(i);
}

bool BroadPhase::contains(ProxyId id) const { return pool_.isLive(id); }

uint64_t BroadPhase::userData(uint32_t index) const {
  if (!pool_.isLiveIndex(index)) {
    reportError(ErrorCode::staleHandle,
                "userData: no live proxy at index " + std::to_string(index));
    return 0;
  }
  return userData_[index];
}

ProxyId BroadPhase::handleOf(uint32_t index) const {
  if (!pool_.isLiveIndex(index)) {
    reportError(ErrorCode::staleHandle,
                "handleOf: no live proxy at index " + std::to_string(index));
    return ProxyId{};
  }
  return pool_.handleOf(index);
}

ProxyDesc BroadPhase::desc(ProxyId id) const {
  if (!checkLive(id, "desc")) return ProxyDesc{.box = Aabb::empty()};
  const uint32_t i = id.index;
  return {boxes_[i], rules_[i].motion, rules_[i].filter, userData_[i], rules_[i].layer};
}

uint32_t BroadPhase::proxyCount() const { return pool_.liveCount(); }

// --- The frame ----------------------------------------------------------------

void BroadPhase::applyPending() {
  // Removals first, so that a slot freed and reused within the frame leaves
  // its structure before its new occupant arrives.
  Side& side = *structure_;
  if (dworld_ && dworld_->count != 0) applyDoubleBoxes();
  for (const ProxyId inner : pendingRemoves_) side.remove(inner);
  pendingRemoves_.clear();

  for (uint32_t i : pendingAdds_) {
    if (!(state_[i] & kPendingAdd)) continue;  // removed before it arrived, or a duplicate
    inner_[i] = side.add(boxes_[i], rules_[i].motion == MotionType::staticBody, rules_[i].layer, i);
    state_[i] = kInStructure;
    if (view_) view_->added.push_back(i);
  }
  pendingAdds_.clear();

  // Handles and boxes were validated by move(): one unchecked batch, in the
  // order of the moves (an engine's batch in body order keeps the
  // structure's parallel write path), each box read from boxes_. No index
  // is listed twice as a pending move (a listed proxy is pending until this
  // point, and a removed or rehomed one comes back only as a pending add,
  // which moves do not list); entries left behind by a remove or a rehome
  // are dropped first.
  if (movesDropped_) {
    const uint8_t* const state = state_.data();
    pendingMoves_.erase(std::remove_if(pendingMoves_.begin(), pendingMoves_.end(),
                                       [state](uint32_t i) { return !(state[i] & kPendingMove); }),
                        pendingMoves_.end());
    movesDropped_ = false;
  }
  const uint32_t n = static_cast<uint32_t>(pendingMoves_.size());
  const bool unmarked = std::exchange(movesUnmarked_, false);
  appliedMoves_.clear();
  if (n == 0) return;
  const bool parallel = scheduler_->threadCount() > 1 && n > kMoveChunk;
  const EvenChunks split = parallel
                               ? evenChunks(n, kMoveChunk, 1, uint32_t(scheduler_->threadCount()))
                               : EvenChunks{1, n};
  if (!unmarked) {  // (an unmarked list has no marks to clear)
    forEachChunk(*scheduler_, split, n, [&](uint32_t, uint32_t begin, uint32_t end) {
      uint8_t* const state = state_.data();
      for (uint32_t k = begin; k < end; ++k) state[pendingMoves_[k]] &= uint8_t(~kPendingMove);
    });
  }
  if (side.remapped == 0) {
    // Slot == proxy index: the structure reads the list and boxes_ as they are.
    side.moveBatch(std::span<const uint32_t>(pendingMoves_), boxes_, *scheduler_);
  } else {
    moveIds_.resize(n);
    moveBoxes_.resize(n);
    forEachChunk(*scheduler_, split, n, [&](uint32_t, uint32_t begin, uint32_t end) {
      for (uint32_t k = begin; k < end; ++k) {
        const uint32_t i = pendingMoves_[k];
        moveIds_[k] = inner_[i];
        moveBoxes_[k] = boxes_[i];
      }
    });
    side.moveBatch(moveIds_, moveBoxes_, *scheduler_);
  }
  appliedMoves_.swap(pendingMoves_);
  pendingMoves_.clear();
}

// Filters and motion rules: static-static never reaches here; kinematic-static
// never pairs, kinematic-kinematic only on request.
bool BroadPhase::accepts(uint32_t a, uint32_t b) const {
  if (special_ == 0) return true;  // default filters, no kinematic proxy: every pair stands
  // Only double proxies are special: their pairs are decided in double, and
  // no other pair need read the rules (a random access a pair).
  if (dworld_ && special_ == dworld_->count) return exactOverlap(a, b);
  const Rules& da = rules_[a];
  const Rules& db = rules_[b];
  if (!da.filter.accepts(db.filter)) return false;
  const bool aKin = da.motion == MotionType::kinematic;
  const bool bKin = db.motion == MotionType::kinematic;
  if (aKin && (bKin ? !config_.pairKinematicKinematic : db.motion == MotionType::staticBody))
    return false;
  if (bKin && da.motion == MotionType::staticBody) return false;
  return !dworld_ || dworld_->count == 0 || exactOverlap(a, b);
}

// The structure's pairs into structure_->pairs. With maxPairs, under a
// budget that stops the structure's tasks as soon as the frame is known to
// hold more: the bound is on the pairs the filters accept, so with filters
// active the budget keeps only those (the later pass applies the same rules
// again, to pairs that all pass). False then, with the structure up to date
// and its pair list empty.
bool BroadPhase::findStructurePairs() {
  Side& main = *structure_;
  if (config_.maxPairs == 0) {
    main.findPairs(*scheduler_, nullptr);
    return true;
  }
  auto accept = [&main, this](Pair p) { return accepts(main.outer[p.a], main.outer[p.b]); };
  std::optional<PairBudget> budget;
  if (special_ != 0)
    budget.emplace(config_.maxPairs, accept);
  else
    budget.emplace(config_.maxPairs);
  main.findPairs(*scheduler_, &*budget);
  return !budget->exceeded();
}

void BroadPhase::collectPairs(std::vector<ProxyPair>& out) {
  Side& main = *structure_;
  // Pair k of the structure becomes out[k]: fixed places, so the result does
  // not depend on the thread count, and a structure whose slots map to
  // proxies in order (no churn since it was built) hands over sorted pairs
  // that need no sort, nor a look at the slot map. Pairs the filters reject
  // are marked, then compacted.
  const std::vector<Pair>& raw = main.pairs;
  const std::vector<uint32_t>& outer = main.outer;
  const uint32_t n = static_cast<uint32_t>(raw.size());
  constexpr uint32_t kRejected = kNullIndex;
  resizeWithHeadroom(out, n);
  const bool filtered = special_ != 0;
  const bool identity = main.remapped == 0;
  const uint32_t threads = uint32_t(scheduler_->threadCount());
  const EvenChunks split =
      threads > 1 && n > kPairGrain ? evenChunks(n, kPairGrain, 1, threads) : EvenChunks{1, n};
  forEachChunk(*scheduler_, split, n, [&](uint32_t, uint32_t begin, uint32_t end) {
    if (identity && !filtered) {
      // Slot == proxy index: no dependent load between a pair and its user
      // data (perf, uniform 10^5, one thread: the map's share of the run
      // fell from 6.2 % to 3.6 % of the samples).
      for (uint32_t k = begin; k < end; ++k) {
        const Pair p = raw[k];
        out[k] = ProxyPair{p.a, p.b, userData_[p.a], userData_[p.b]};
      }
      return;
    }
    for (uint32_t k = begin; k < end; ++k) {
      uint32_t a = outer[raw[k].a];
      uint32_t b = outer[raw[k].b];
      if (a > b) std::swap(a, b);
      // (Without filters every pair stands: no call per pair.)
      out[k] = !filtered || accepts(a, b) ? ProxyPair{a, b, userData_[a], userData_[b]}
                                          : ProxyPair{kRejected, kRejected, 0, 0};
    }
  });
  if (special_ != 0)
    out.erase(
        std::remove_if(out.begin(), out.end(), [](const ProxyPair& p) { return p.a == kRejected; }),
        out.end());
  // Keys are unique, so any sort gives the one canonical order.
  // (The structure's pairs are sorted by slot: with slot == proxy index
  // they need no check.)
  auto byKey = [](const ProxyPair& x, const ProxyPair& y) { return x.key() < y.key(); };
  if (!identity && !std::is_sorted(out.begin(), out.end(), byKey)) {
    if (out.size() < kPairGrain || scheduler_->threadCount() == 1)
      std::sort(out.begin(), out.end(), byKey);
    else
      scheduler_->run([&] { tbb::parallel_sort(out.begin(), out.end(), byKey); });
  }
}

// begun = in this frame's list only, ended = in the last frame's only (or in
// both but renewed: a proxy removed in between, its slot reused). Both lists
// are sorted by key, so this is a merge; with workers and many pairs it runs
// on key ranges in parallel (cut at this frame's chunk starts, found in the
// last frame's list by binary search) and the pieces are joined in range
// order: the same lists for any thread count.
void BroadPhase::computeEvents() {
  // Both lists sorted by key without repeats: the merge below walks them once.
  const auto ascending = [](const std::vector<ProxyPair>& list) {
    return std::adjacent_find(list.begin(), list.end(), [](const ProxyPair& x, const ProxyPair& y) {
             return !(x.key() < y.key());
           }) == list.end();
  };
  BP_ASSERT(ascending(pairs_) && ascending(previous_));
  (void)ascending;
  // Most frames renew no proxy: then a pair in both lists stands without a
  // look at renewed_ (two scattered reads a pair).
  const bool anyRenewed = !renewedList_.empty();
  mergeInRanges(
      pairs_.size(), [&](size_t j) { return pairs_[j].key(); },
      [&](size_t i, size_t iEnd, size_t j, size_t jEnd, EventPieces piece) {
        std::vector<ProxyPair>& begun = piece.begun;
        std::vector<ProxyPair>& ended = piece.ended;
        while (i < iEnd || j < jEnd) {
          if (j == jEnd || (i < iEnd && previous_[i].key() < pairs_[j].key())) {
            ended.push_back(previous_[i++]);
          } else if (i == iEnd || pairs_[j].key() < previous_[i].key()) {
            begun.push_back(pairs_[j++]);
          } else {
            if (anyRenewed && (renewed_[pairs_[j].a] || renewed_[pairs_[j].b])) {
              ended.push_back(previous_[i]);
              begun.push_back(pairs_[j]);
            }
            ++i;
            ++j;
          }
        }
      });
}

// The pairs and events at once, when the structure's pairs are the frame's
// (slot == proxy index, every pair accepted): pair j of the structure is
// pairs_[j], merged against the last frame's list as it is written. A pair
// that stands copies its entry from the last frame's list while no user data
// has changed since (userDataChanged_), so only the pairs that begin look
// their user data up, fetched some pairs ahead (without, each lookup behind
// the merge's branches waited for the last, and the merge took longer than
// the two passes it replaces). Against collectPairs() then computeEvents(),
// this saves writing the list in one pass and reading it back in the next,
// and most of the user-data reads (see docs/decisions.md).
void BroadPhase::mergePairsAndEvents() {
  const std::vector<Pair>& raw = structure_->pairs;
  const size_t nc = raw.size();
  resizeWithHeadroom(pairs_, nc);
  const bool anyRenewed = !renewedList_.empty();
  const bool lookUp = userDataChanged_;
  const bool copyRuns = !anyRenewed && !lookUp;
  // The begun pairs' user data: looked up after the merge while the list
  // fits in the caches (each begun entry holds its place in pairs_ until
  // then); for a list that streams from memory, and while every pair looks
  // its user data up, inline, fetched kUserAhead pairs ahead.
  const bool deferLookups = !lookUp && nc * sizeof(ProxyPair) <= kDeferLookupsBytes;
  // A pair's key from its first 8 bytes (a, then b: both Pair and ProxyPair
  // start so), in one load; ~0 past the end of a list (no pair has a == b).
  auto keyAt = [](const void* pair) {
    uint64_t v;
    std::memcpy(&v, pair, sizeof v);
    return (v << 32) | (v >> 32);
  };
  static_assert(offsetof(Pair, a) == 0 && offsetof(Pair, b) == 4);
  static_assert(offsetof(ProxyPair, a) == 0 && offsetof(ProxyPair, b) == 4);
  // How many of the next kRun pairs of this frame and of the last have the
  // same first 8 bytes (a, b), counted from the first: branch-free, so that
  // where the run stops costs no misprediction.
  constexpr size_t kRun = 8;
  auto sameCount = [](const Pair* now, const ProxyPair* prev) {
    uint32_t differ = 0;
    for (size_t k = 0; k < kRun; ++k) {
      uint64_t x, y;
      std::memcpy(&x, &now[k], sizeof x);
      std::memcpy(&y, &prev[k], sizeof y);
      differ |= uint32_t(x != y) << k;
    }
    return size_t(std::countr_zero(differ | (1u << kRun)));
  };
  mergeInRanges(
      nc, [&](size_t j) { return keyAt(&raw[j]); },
      [&](size_t i, size_t iEnd, size_t j, size_t jEnd, EventPieces piece) {
        const Pair* const now = raw.data();
        const ProxyPair* const prev = previous_.data();
        ProxyPair* const out = pairs_.data();
        const uint64_t* const user = userData_.data();
        const uint8_t* const renewed = renewed_.data();
        std::vector<ProxyPair>& begun = piece.begun;
        std::vector<ProxyPair>& ended = piece.ended;
        auto prevKey = [&](size_t k) { return k < iEnd ? keyAt(&prev[k]) : ~uint64_t(0); };
        uint64_t last = prevKey(i);
        for (; j < jEnd; ++j) {
          // Runs of standing pairs: where the next pairs of both lists have
          // the same (a, b) words, and no proxy was renewed nor user data
          // changed, they stand and their entries are copied whole, kRun
          // entries at a time (those past the run's end are rewritten
          // next), without a branch or a lookup a pair. The pair where a
          // run stops goes through the steps below. (Four at a time and
          // only whole runs of four, clustered 10^5's merge took 1.3x as
          // long: a pair begins or ends every few pairs there.)
          if (copyRuns) {
            while (j + kRun <= jEnd && i + kRun <= iEnd) {
              const size_t same = sameCount(&now[j], &prev[i]);
              std::memcpy(static_cast<void*>(&out[j]), &prev[i], kRun * sizeof(ProxyPair));
              j += same;
              i += same;
              if (same < kRun) break;
            }
            last = prevKey(i);
            if (j == jEnd) break;
          }
          // The user data of a pair some steps ahead, in case it begins:
          // read behind the merge's branches, each lookup would wait for
          // the last.
          if (!deferLookups && j + kUserAhead < jEnd) {
            const Pair ahead = now[j + kUserAhead];
            prefetchRead(&user[ahead.a]);
            prefetchRead(&user[ahead.b]);
          }
          const uint64_t key = keyAt(&now[j]);
          while (last < key) {
            ended.push_back(prev[i]);
            last = prevKey(++i);
          }
          const Pair p = now[j];
          if (last == key) {
            if (!(anyRenewed && (renewed[p.a] || renewed[p.b]))) {  // the pair stands
              out[j] = lookUp ? ProxyPair{p.a, p.b, user[p.a], user[p.b]} : prev[i];
              last = prevKey(++i);
              continue;
            }
            ended.push_back(prev[i]);  // a renewed proxy: the old pair ends, a new one begins
            last = prevKey(++i);
          }
          if (deferLookups) {  // its user data after the merge; its place until then
            begun.emplace_back();
            writePair(&begun.back(), p, j, 0);
            continue;
          }
          // The pair written to both lists from registers: copying out[j]
          // back read 16 bytes across the two stores just made to it, which
          // the store buffer cannot forward (clustered 10^5, one thread:
          // the merge's share of the samples fell by 4 %).
          const uint64_t ua = user[p.a], ub = user[p.b];
          writePair(&out[j], p, ua, ub);
          begun.emplace_back();
          writePair(&begun.back(), p, ua, ub);
        }
        for (; i < iEnd; ++i) ended.push_back(prev[i]);
        if (deferLookups) {
          // No lookup waits on another here: the misses overlap.
          for (ProxyPair& e : begun) {
            const size_t at = size_t(e.userDataA);
            const uint64_t ua = user[e.a], ub = user[e.b];
            e.userDataA = ua;
            e.userDataB = ub;
            writePair(&out[at], Pair{e.a, e.b}, ua, ub);
          }
        }
      });
}

// merge(i, iEnd, j, jEnd, pieces) over the last frame's pairs [i, iEnd)
// and this frame's [j, jEnd) (nc of them, keyOf(j) the key of pair j), into
// the piece's begun and ended lists (empty when it is called), joined into
// begun_ and ended_. With workers and many pairs it runs on
// key ranges in parallel (cut at this frame's chunk starts, found in the
// last frame's list by binary search) and the pieces are joined in range
// order: the same lists for any thread count. Clears the renewed marks.
template <class KeyOf, class Merge>
void BroadPhase::mergeInRanges(size_t nc, KeyOf&& keyOf, Merge&& merge) {
  clearEvents();
  const size_t np = previous_.size();
  // A multiple of the thread count, so that the threads end together (three
  // chunks for uniform 10^5's 49 k pairs left one of two threads idle for a
  // third of the merge).
  const size_t threads = size_t(scheduler_->threadCount());
  // (No pairs this frame: one piece, as the cuts are keys of this frame's.)
  const uint32_t chunks =
      threads > 1 && nc > 0 && np + nc >= 4 * size_t(kPairGrain)
          ? uint32_t(std::min(4 * threads, (nc / kPairGrain + threads) / threads * threads))
          : 1;
  if (chunks == 1) {
    merge(0, np, 0, nc, EventPieces{begun_, ended_});
  } else {
    eventChunks_.resize(chunks);
    auto cut = [&](uint32_t c) {  // where chunk c starts in (previous_, this frame's pairs)
      if (c == chunks) return std::pair<size_t, size_t>(np, nc);
      const size_t j = nc * c / chunks;
      if (c == 0) return std::pair<size_t, size_t>(0, 0);
      const uint64_t key = keyOf(j);
      const size_t i =
          size_t(std::lower_bound(previous_.begin(), previous_.end(), key,
                                  [](const ProxyPair& p, uint64_t k) { return p.key() < k; }) -
                 previous_.begin());
      return std::pair<size_t, size_t>(i, j);
    };
    scheduler_->forEach(0, chunks, 1, [&](uint32_t begin, uint32_t end) {
      for (uint32_t c = begin; c < end; ++c) {
        EventChunk& e = eventChunks_[c];
        e.begun.clear();
        e.ended.clear();
        const auto [i, j] = cut(c);
        const auto [iEnd, jEnd] = cut(c + 1);
        merge(i, iEnd, j, jEnd, EventPieces{e.begun, e.ended});
      }
    });
    for (const EventChunk& e : eventChunks_) {
      begun_.insert(begun_.end(), e.begun.begin(), e.begun.end());
      ended_.insert(ended_.end(), e.ended.begin(), e.ended.end());
    }
  }
  finishEvents();
}

void BroadPhase::clearEvents() {
  // Sizes are still the last frame's here.
  releaseIfOversized(begun_);
  releaseIfOversized(ended_);
  for (EventChunk& e : eventChunks_) {
    releaseIfOversized(e.begun, kKeptEventCapacity / eventChunks_.size());
    releaseIfOversized(e.ended, kKeptEventCapacity / eventChunks_.size());
  }
  begun_.clear();
  ended_.clear();
}

void BroadPhase::finishEvents() {
  for (uint32_t r : renewedList_) renewed_[r] = 0;
  renewedList_.clear();
  userDataChanged_ = false;  // the pairs now carry the current user data
}

// Moves every proxy into a fresh structure. Proxy indices, handles and the
// pair lists are untouched, so events stay exact.
void BroadPhase::rebuild() {
  applyPending();
  structure_ = makeStructure();
  for (uint32_t i = 0; i < rules_.size(); ++i) {
    if (!pool_.isLiveIndex(i)) continue;
    inner_[i] =
        structure_->add(boxes_[i], rules_[i].motion == MotionType::staticBody, rules_[i].layer, i);
    state_[i] = kInStructure;
  }
}

const FramePairs& BroadPhase::update() {
  applyPending();
  std::swap(previous_, pairs_);
  if (!findStructurePairs()) {
    pairs_.clear();
    std::swap(previous_, pairs_);  // keep the last frame's pairs as they were
    if (view_) view_->publish(*this);
    reportError(ErrorCode::capacityExceeded, overMaxPairs(config_.maxPairs));
    return frame_;
  }
  // The last frame had no pair (the first update, usually): every pair
  // begins and none ends, and the begun list is the pair list itself, not a
  // copy (on `clustered` 10^6 a copy was 0.7 GB, see docs/decisions.md).
  const bool allBegin = previous_.empty();
  if (allBegin) {
    clearEvents();
    collectPairs(pairs_);
    finishEvents();
  } else if (structure_->remapped == 0 && special_ == 0) {
    mergePairsAndEvents();
  } else {
    collectPairs(pairs_);
    computeEvents();
  }
  readySpareList();
  frame_ = {pairs_, allBegin ? pairs_ : begun_, ended_};
  if (view_) view_->publish(*this);
  return frame_;
}

// previous_, which the next update() writes its pairs to, made at least as
// long as this frame's list, with its pages touched now, when it is
// shorter (the first update, or a frame with more pairs than either list
// held). Otherwise the frame after the first update writes its list into
// fresh memory: `sizes` 10^6, 36 MB, took 8 850 page faults, about 100 ms on
// the project's VMs (docs/decisions.md). The first update, usually part of
// loading a scene, pays instead. Its contents are not needed past the
// events (the last frame's list).
void BroadPhase::readySpareList() {
  if (previous_.capacity() >= pairs_.size()) return;
  previous_.clear();
  resizeWithHeadroom(previous_, pairs_.size());  // value-initialised: every page written
  previous_.clear();
}

void BroadPhase::update(FunctionRef<void(std::span<const ProxyPair>)> consume) {
  // Reuses the merged path's parallel stages but hands each worker's chunk
  // straight to the consumer instead of merging.
  applyPending();
  Side& main = *structure_;
  if (!findStructurePairs()) {  // over maxPairs: reported before `consume` sees a pair
    if (view_) view_->publish(*this);
    reportError(ErrorCode::capacityExceeded, overMaxPairs(config_.maxPairs));
    return;
  }
  const std::vector<Pair>& raw = main.pairs;
  const std::vector<uint32_t>& outer = main.outer;
  scheduler_->forEach(0, uint32_t(raw.size()), kPairGrain, [&](uint32_t begin, uint32_t end) {
    ProxyPair chunk[256];
    int n = 0;
    for (uint32_t k = begin; k < end; ++k) {
      uint32_t a = outer[raw[k].a], b = outer[raw[k].b];
      if (a > b) std::swap(a, b);
      if (!accepts(a, b)) continue;
      chunk[n++] = {a, b, userData_[a], userData_[b]};
      if (n == 256) {
        consume(std::span<const ProxyPair>(chunk, n));
        n = 0;
      }
    }
    if (n) consume(std::span<const ProxyPair>(chunk, n));
  });
  previous_.clear();
  pairs_.clear();
  begun_.clear();
  ended_.clear();
  for (uint32_t r : renewedList_) renewed_[r] = 0;
  renewedList_.clear();
  frame_ = {};
  if (view_) view_->publish(*this);
}

// --- Large worlds -------------------------------------------------------------

void BroadPhase::shiftOrigin(const Vec3& offset) {
  if (!isFinite(offset)) {
    reportError(ErrorCode::invalidArgument, "shiftOrigin: offset is not finite");
    return;
  }
  // Validate every shifted box before changing anything.
  for (uint32_t i = 0; i < rules_.size(); ++i) {
    if (!pool_.isLiveIndex(i) || isDoubleProxy(i)) continue;  // double ones: checkDoubleShift
    const Aabb shifted{boxes_[i].min - offset, boxes_[i].max - offset};
    if (!isValid(shifted)) {
      reportError(ErrorCode::invalidBox, "shiftOrigin: proxy " + std::to_string(i) +
                                             " would become " + describeInvalid(shifted));
      return;
    }
  }
  if (!checkDoubleShift(offset)) return;
  applyPending();
  for (uint32_t i = 0; i < rules_.size(); ++i)
    if (pool_.isLiveIndex(i) && !isDoubleProxy(i))
      boxes_[i] = {boxes_[i].min - offset, boxes_[i].max - offset};
  applyDoubleShift(offset);
  // Rebuild the structures from scratch: a shift is rare, and a fresh build
  // gives the trees their best quality in the new frame. Then update the
  // structure (not its pairs), so that queries answer at once.
  rebuild();
  structure_->update(*scheduler_);
  if (view_) view_->rebuild(*this);
}

// --- Introspection ------------------------------------------------------------

std::string BroadPhase::validate() const {
  if (std::string e = pool_.validate(); !e.empty()) return "handle pool: " + e;
  if (std::string e = structure_->validate(); !e.empty()) return "structure: " + e;
  for (uint32_t i = 0; i < rules_.size(); ++i) {
    if (!pool_.isLiveIndex(i)) continue;
    if (!isValid(boxes_[i])) return "proxy " + std::to_string(i) + " holds an invalid box";
    if (state_[i] & kPendingAdd) continue;
    const Side& side = *structure_;
    if (!side.contains(inner_[i]))
      return "proxy " + std::to_string(i) + " is missing from its structure";
    if (side.outer[inner_[i].index] != i)
      return "proxy " + std::to_string(i) + " maps to a structure slot that maps elsewhere";
  }
  if (movesUnmarked_) {
    for (size_t k = 0; k < pendingMoves_.size(); ++k) {
      const uint32_t i = pendingMoves_[k];
      if (state_[i] != kInStructure)
        return "proxy " + std::to_string(i) + " is in the unmarked pending list but is not " +
               "in its structure with nothing pending";
      if (k > 0 && pendingMoves_[k - 1] >= i)
        return "the unmarked pending list does not strictly increase at entry " + std::to_string(k);
    }
  } else if (!movesDropped_) {
    for (const uint32_t i : pendingMoves_)
      if (!(state_[i] & kPendingMove))
        return "proxy " + std::to_string(i) + " is listed as a pending move but is not one";
  }
  uint32_t remapped = 0;
  for (uint32_t slot = 0; slot < structure_->outer.size(); ++slot)
    remapped += structure_->outer[slot] != kNullIndex && structure_->outer[slot] != slot;
  if (remapped != structure_->remapped)
    return "the structure counts " + std::to_string(structure_->remapped) +
           " slots mapped to other indices, but " + std::to_string(remapped) + " are";
  if (std::string e = validateDouble(); !e.empty()) return e;
  const uint32_t inStructures = structure_->proxyCount();
  uint32_t waiting = 0;
  for (uint32_t i = 0; i < state_.size(); ++i) waiting += (state_[i] & kPendingAdd) != 0;
  if (inStructures + waiting != pool_.liveCount() + pendingRemoves_.size())
    return "structures hold " + std::to_string(inStructures) + " proxies, expected " +
           std::to_string(pool_.liveCount() + pendingRemoves_.size() - waiting);
  if (view_) return view_->validate(*this);
  return {};
}

size_t BroadPhase::memoryBytes() const {
  size_t bytes =
      rules_.capacity() * sizeof(Rules) + userData_.capacity() * sizeof(uint64_t) +
      inner_.capacity() * sizeof(ProxyId) + state_.capacity() + renewed_.capacity() +
      pool_.capacity() * (sizeof(uint32_t) * 2 + 1) +
      (pendingAdds_.capacity() + pendingMoves_.capacity() + renewedList_.capacity()) *
          sizeof(uint32_t) +
      pendingRemoves_.capacity() * sizeof(ProxyId) + moveIds_.capacity() * sizeof(ProxyId) +
      appliedMoves_.capacity() * sizeof(uint32_t) + chunkAscending_.capacity() +
      chunkCount_.capacity() * sizeof(uint32_t) +
      (boxes_.capacity() + moveBoxes_.capacity()) * sizeof(Aabb) +
      (pairs_.capacity() + previous_.capacity() + begun_.capacity() + ended_.capacity()) *
          sizeof(ProxyPair);
  for (const EventChunk& e : eventChunks_)
    bytes += (e.begun.capacity() + e.ended.capacity()) * sizeof(ProxyPair);
  if (dworld_) bytes += sizeof(DoubleWorld) + dworld_->memoryBytes();
  return bytes + structure_->memoryBytes() + (view_ ? view_->memoryBytes() : 0);
}

}  // namespace bp
