// BroadPhase's change log: the proxies (add, remove, their attributes) and
// the changes recorded between frames (the pending adds, moves and
// removes, with the batch move's check-and-record path), applied at the
// frame's start by applyPending(). The invariant: a proxy's state_ bits say
// which pending list holds it (kPendingAdd: pendingAdds_; kPendingMove:
// pendingMoves_, unless the frame's first batch listed it without marking,
// firstBatch_); the structure is changed only by applyPending().
#include "facade/broad_phase_impl.h"

#include "common/assert.h"
#include "common/batch_check.h"
#include "common/even_chunks.h"
#include "common/grow.h"
#include "common/report_error.h"
#include "facade/broad_phase_side.h"
#include "facade/double_world.h"
#include "facade/layer_check.h"
#include "facade/query_view.h"

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

ProxyId BroadPhase::Impl::add(const ProxyDesc& desc) {
  if (!validDesc(desc)) {
    reportBadDesc(desc, "add: ");
    return ProxyId{};
  }
  return addChecked(desc);
}

ProxyId BroadPhase::Impl::addChecked(const ProxyDesc& desc) {
  const ProxyId id = pool_.allocate();
  const uint32_t i = id.index;
  if (i >= rules_.size()) {
    rules_.resize(i + 1);
    boxes_.resize(i + 1);
    userData_.resize(i + 1);
    slot_.resize(i + 1);
    state_.resize(i + 1, 0);
    renewed_.resize(i + 1, 0);
  }
  rules_[i] = {filters_.set(kDefaultFilter, desc.filter), desc.motion, uint8_t(desc.layer)};
  boxes_[i] = desc.box;
  userData_[i] = desc.userData;
  special_ += isSpecial(desc.motion, desc.filter);
  state_[i] = kPendingAdd;
  pendingAdds_.push_back(i);
  return id;
}

void BroadPhase::Impl::add(std::span<const ProxyDesc> descs, std::span<ProxyId> out) {
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

bool BroadPhase::Impl::checkLive(ProxyId id, const char* what) const {
  if (pool_.isLive(id)) return true;
  reportError(ErrorCode::staleHandle,
              std::string(what) + ": " + handleText(id) +
                  " is not a live proxy of this broadphase (removed, never issued, or foreign)");
  return false;
}

void BroadPhase::Impl::remove(ProxyId id) {
  if (!checkLive(id, "remove")) return;
  removeChecked(id);
}

void BroadPhase::Impl::removeChecked(ProxyId id) {
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
    structure_->forget(slot_[i]);
    if (view_) view_->forget(i);
    if (!(state_[i] & kRehome)) pendingRemoves_.push_back(structure_->handleOf(slot_[i]));
    if (!renewed_[i]) renewedList_.push_back(i);
    renewed_[i] = 1;
  }
  dropIfListed(i);
  special_ -= isSpecial(rules_[i].motion, filters_[rules_[i].filterSlot]);
  filters_.release(rules_[i].filterSlot);
  rules_[i].filterSlot = kDefaultFilter;
  if (dworld_) forgetDouble(i);
  state_[i] = 0;
  pool_.release(id);
}

void BroadPhase::Impl::remove(std::span<const ProxyId> ids) {
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

void BroadPhase::Impl::move(ProxyId id, const Aabb& box) {
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

void BroadPhase::Impl::move(std::span<const ProxyId> ids, std::span<const Aabb> boxes) {
  if (ids.size() != boxes.size()) {
    reportError(ErrorCode::invalidArgument, "move: " + std::to_string(ids.size()) +
                                                " handles but " + std::to_string(boxes.size()) +
                                                " boxes");
    return;
  }
  recordBatch(ids, boxes, false);
}

// A move batch, or the pending moves, in chunks for the threads: one chunk
// on one thread or up to kMoveChunk entries, else chunks of at most that.
EvenChunks BroadPhase::Impl::moveChunks(uint32_t n) const {
  const uint32_t threads = uint32_t(scheduler_->threadCount());
  return threads > 1 && n > kMoveChunk ? evenChunks(n, kMoveChunk, 1, threads) : EvenChunks{1, n};
}

// A batch of float boxes: the float move()'s, each entry checked here and a
// double proxy rejected, or (ofDoubles) the float boxes of a double move()
// batch, whose entries that move() checked already (every handle live and a
// double proxy's, every box valid), so they are not checked again. Either
// takes the first batch's path.
void BroadPhase::Impl::recordBatch(std::span<const ProxyId> ids, std::span<const Aabb> boxes,
                                   bool ofDoubles) {
  const uint32_t n = static_cast<uint32_t>(ids.size());
  if (n == 0) return;
  const EvenChunks split = moveChunks(n);
  const bool parallel = split.count > 1;
  // The usual frame's one batch: see recordFirstBatch(). One it does not
  // take has had its chunks' order found (chunkAscending_) already, as has
  // a double batch, by the move() that checked it.
  bool orderKnown = ofDoubles && parallel;
  const bool doublesToReject = !ofDoubles && dworld_ && dworld_->count != 0;
  if (pendingMoves_.empty() && pendingAdds_.empty() && !doublesToReject) {
    const FirstBatch taken = recordFirstBatch(ids, boxes, split, ofDoubles);
    if (taken == FirstBatch::rejected) reportMoveCulprit(ids, boxes);
    if (taken != FirstBatch::notTaken) return;
    orderKnown = parallel;
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
    if (!ofDoubles && !allLiveAndValid(pool_, ids, boxes, begin, end))
      bad.store(true, std::memory_order_relaxed);
    if (parallel && !orderKnown) chunkAscending_[c] = indicesAscending(ids, begin, end);
  });
  if (bad.load(std::memory_order_relaxed)) {
    reportMoveCulprit(ids, boxes);
    return;
  }
  if (doublesToReject)
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
void BroadPhase::Impl::reportMoveCulprit(std::span<const ProxyId> ids,
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
BroadPhase::Impl::FirstBatch BroadPhase::Impl::recordFirstBatch(std::span<const ProxyId> ids,
                                                                std::span<const Aabb> boxes,
                                                                EvenChunks split, bool checked) {
  const uint32_t n = static_cast<uint32_t>(ids.size());
  if (split.count > 1) {
    if (!checked) {
      chunkAscending_.assign(split.count, 0);
      forEachChunk(*scheduler_, split, n, [&](uint32_t c, uint32_t begin, uint32_t end) {
        chunkAscending_[c] = indicesAscending(ids, begin, end);
      });
    }
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
    chunkCount_[c] = checkAndRecord(ids, boxes, begin, end, checked, chunkAscending);
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
uint32_t BroadPhase::Impl::checkAndRecord(std::span<const ProxyId> ids, std::span<const Aabb> boxes,
                                          uint32_t begin, uint32_t end, bool checked,
                                          bool& ascending) {
  Aabb* const stored = boxes_.data();
  uint32_t* const out = pendingMoves_.data();
  for (uint32_t b = begin; b < end; b += kCheckBlock) {
    const uint32_t e = std::min(end, b + kCheckBlock);
    if (!checked && !allLiveAndValid(pool_, ids, boxes, b, e)) return b;
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
void BroadPhase::Impl::restoreStructureBoxes(std::span<const ProxyId> ids, uint32_t begin,
                                             uint32_t end) {
  const Side& side = *structure_;
  for (uint32_t k = begin; k < end; ++k) {
    const uint32_t i = ids[k].index;
    boxes_[i] = side.visit([&](const auto& s) { return Aabb(s.box(slot_[i])); });
  }
}

void BroadPhase::Impl::markPendingMoves() {
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
uint32_t BroadPhase::Impl::recordMoves(std::span<const ProxyId> ids, std::span<const Aabb> boxes,
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

void BroadPhase::Impl::recordMove(uint32_t i, const Aabb& box) {
  markPendingMoves();
  boxes_[i] = box;
  const uint8_t s = state_[i];
  if (joinsPendingMoves(s)) pendingMoves_.push_back(i);
  state_[i] = movedState(s);
}

void BroadPhase::Impl::setFilter(ProxyId id, const Filter& filter) {
  if (!checkLive(id, "setFilter")) return;
  Rules& r = rules_[id.index];
  special_ +=
      uint32_t(isSpecial(r.motion, filter)) - uint32_t(isSpecial(r.motion, filters_[r.filterSlot]));
  r.filterSlot = filters_.set(r.filterSlot, filter);
  if (view_) view_->setFilter(id.index, filter);
}

void BroadPhase::Impl::setUserData(ProxyId id, uint64_t userData) {
  if (!checkLive(id, "setUserData")) return;
  userData_[id.index] = userData;
  userDataChanged_ = true;
  if (view_) view_->userDataSet.push_back(id.index);
}

void BroadPhase::Impl::setMotionType(ProxyId id, MotionType motion) {
  if (!checkLive(id, "setMotionType")) return;
  if (!validMotion(motion)) {
    reportError(ErrorCode::invalidArgument, "setMotionType: motion type " +
                                                std::to_string(int(motion)) +
                                                " is not static, kinematic or dynamic");
    return;
  }
  const uint32_t i = id.index;
  Rules& r = rules_[i];
  const Filter& filter = filters_[r.filterSlot];
  special_ += uint32_t(isSpecial(motion, filter)) - uint32_t(isSpecial(r.motion, filter));
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
  pendingRemoves_.push_back(structure_->handleOf(slot_[i]));
  state_[i] = kPendingAdd | kRehome;
  pendingAdds_.push_back(i);
}

bool BroadPhase::Impl::contains(ProxyId id) const { return pool_.isLive(id); }

uint64_t BroadPhase::Impl::userData(uint32_t index) const {
  if (!pool_.isLiveIndex(index)) {
    reportError(ErrorCode::staleHandle,
                "userData: no live proxy at index " + std::to_string(index));
    return 0;
  }
  return userData_[index];
}

ProxyId BroadPhase::Impl::handleOf(uint32_t index) const {
  if (!pool_.isLiveIndex(index)) {
    reportError(ErrorCode::staleHandle,
                "handleOf: no live proxy at index " + std::to_string(index));
    return ProxyId{};
  }
  return pool_.handleOf(index);
}

ProxyDesc BroadPhase::Impl::desc(ProxyId id) const {
  if (!checkLive(id, "desc")) return ProxyDesc{.box = Aabb::empty()};
  const uint32_t i = id.index;
  return {boxes_[i], rules_[i].motion, filters_[rules_[i].filterSlot], userData_[i],
          rules_[i].layer};
}

uint32_t BroadPhase::Impl::proxyCount() const { return pool_.liveCount(); }

// --- The frame ----------------------------------------------------------------

void BroadPhase::Impl::applyPending() {
  // Removals first, so that a slot freed and reused within the frame leaves
  // its structure before its new occupant arrives.
  Side& side = *structure_;
  if (dworld_ && dworld_->count != 0) applyDoubleBoxes();
  for (const ProxyId inner : pendingRemoves_) side.remove(inner);
  pendingRemoves_.clear();

  for (uint32_t i : pendingAdds_) {
    if (!(state_[i] & kPendingAdd)) continue;  // removed before it arrived, or a duplicate
    slot_[i] =
        side.add(boxes_[i], rules_[i].motion == MotionType::staticBody, rules_[i].layer, i).index;
    state_[i] = kInStructure;
    if (view_) view_->added.push_back(i);
  }
  // A list grown by loading a world (every proxy a pending add) is released
  // once the adds are few: it would keep 4 bytes a proxy. A steady churn
  // never meets the condition, so it does not allocate.
  if (pendingAdds_.capacity() > 8 * pendingAdds_.size() + 65536)
    std::vector<uint32_t>().swap(pendingAdds_);
  else
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
  const EvenChunks split = moveChunks(n);
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
        moveIds_[k] = side.handleOf(slot_[i]);
        moveBoxes_[k] = boxes_[i];
      }
    });
    side.moveBatch(moveIds_, moveBoxes_, *scheduler_);
  }
  // Only the query view's publish reads the applied moves: without one (a
  // view exists from construction or never) the list stays empty, 4 bytes
  // a proxy saved when every proxy moves.
  if (view_) appliedMoves_.swap(pendingMoves_);
  pendingMoves_.clear();
}

}  // namespace bp
