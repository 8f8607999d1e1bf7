// BroadPhase::Impl::QueryView, BroadPhase::Impl::QueryRead and BroadPhase::QueryFrame:
// queries while update() runs (BroadPhaseConfig::concurrentQueries).
#include "facade/query_view.h"

#include "common/report_error.h"

#include <mutex>

namespace bp {

namespace {

// The QueryFrames the calling thread holds, newest first (a stack through
// QueryFrame::below_): a query on a BroadPhase whose frame this thread holds
// takes no second lock (a recursive shared lock is undefined, and would
// deadlock behind a waiting writer).
thread_local const BroadPhase::QueryFrame* tFrames = nullptr;

}  // namespace

// --- QueryView ----------------------------------------------------------------

BroadPhase::Impl::QueryView::QueryView(std::unique_ptr<Side> structure)
    : side(std::move(structure)) {}

void BroadPhase::Impl::QueryView::forget(uint32_t proxy) {
  if (!has(proxy)) return;  // its add is not published: no query reports it
  const ProxyId h = side->handleOf(slot[proxy]);
  {
    const auto lock = lockExclusive();
    dropRecordedMove(proxy);
    side->forget(h.index);
    live[proxy] = 0;
    filters.release(rules[proxy].filterSlot);
    rules[proxy].filterSlot = kDefaultFilter;
    slot[proxy] = kNullIndex;
  }
  removed.push_back(h);
}

void BroadPhase::Impl::QueryView::setFilter(uint32_t proxy, const Filter& filter) {
  if (!has(proxy)) return;  // publish() copies it with the add
  const auto lock = lockExclusive();
  rules[proxy].filterSlot = filters.set(rules[proxy].filterSlot, filter);
}

bool BroadPhase::Impl::QueryView::stageDoubles(const BroadPhase::Impl& bp) {
  const DoubleWorld* w = bp.dworld_.get();
  if (w == nullptr) return false;
  // Into kept pages: a steady frame does not allocate.
  stagedDoubles.origin = w->origin;
  stagedDoubles.count = w->count;
  if (!stagedDoublesLag) {  // every double proxy (after a rebuild, or the first)
    stagedDoubles.slots[0].clear();
    stagedDoubles.flags.clear();
    w->forEachDouble([&](uint32_t i) { stagedDoubles.publish(*w, i); });
    return true;
  }
  // The entries that changed since these were copied.
  for (const std::vector<uint32_t>* touched : {&doublesTouchedBefore, &doublesTouched})
    for (const uint32_t i : *touched) stagedDoubles.publish(*w, i);
  return true;
}

void BroadPhase::Impl::QueryView::swapDoubles(bool present) {
  doubleWorld = present;
  if (!present) return;
  std::swap(doubles.origin, stagedDoubles.origin);
  doubles.slots[0].swap(stagedDoubles.slots[0]);
  doubles.flags.swap(stagedDoubles.flags);
  std::swap(doubles.count, stagedDoubles.count);
}

void BroadPhase::Impl::QueryView::indexRecordedMoves() {
  if (pendingIndexed) return;
  for (uint32_t k = 0; k < moveProxies.size(); ++k) pendingAt[moveProxies[k]] = k;
  pendingIndexed = true;
}

void BroadPhase::Impl::QueryView::dropRecordedMove(uint32_t proxy) {
  if (moveProxies.empty()) return;
  indexRecordedMoves();
  if (!recorded(proxy)) return;
  // The last entry takes the dropped one's place.
  const uint32_t at = pendingAt[proxy];
  const uint32_t last = moveProxies.back();
  moveBoxes[at] = moveBoxes.back();
  moveProxies[at] = last;
  pendingAt[last] = at;
  moveBoxes.pop_back();
  moveProxies.pop_back();
}

void BroadPhase::Impl::QueryView::publish(BroadPhase::Impl& bp) {
  const size_t n = bp.rules_.size();
  const bool doublesNow = stageDoubles(bp);
  const auto lock = lockExclusive();
  swapDoubles(doublesNow);
  if (slot.size() < n) {
    slot.resize(n, kNullIndex);
    pendingAt.resize(n);
    rules.resize(n);
    userData.resize(n);
    live.resize(n, 0);
  }
  // Removes first, so that a slot freed here can take an add. A removed
  // proxy's recorded move went with its forget().
  for (const ProxyId h : removed) side->remove(h);
  for (const uint32_t p : added) {
    if (has(p)) {  // a rehome: out of its old part, with the move recorded there
      dropRecordedMove(p);
      side->remove(side->handleOf(slot[p]));
    }
    const Rules& r = bp.rules_[p];
    slot[p] = side->add(bp.boxes_[p], r.motion == MotionType::staticBody, 0, p).index;
    // (A proxy not in the view holds no slot of the view's: forget() freed it.)
    rules[p] = {filters.set(rules[p].filterSlot, bp.filters_[r.filterSlot]), r.motion, r.layer};
    userData[p] = bp.userData_[p];
    live[p] = 1;
  }
  for (const uint32_t p : userDataSet)
    if (live[p]) userData[p] = bp.userData_[p];
  // The frame's moves (left by applyPending() in appliedMoves_, by proxy
  // index): a moved proxy was in the view before the frame and is neither
  // added nor removed in it (a proxy whose add is pending takes its box with
  // the add, and a removed one is not kept among the moves).
  std::vector<uint32_t>& moved = bp.appliedMoves_;
  const bool anyMoved = !moved.empty();
  if (moveProxies.empty()) {
    // Caught up since the last publish: every entry is new, and none is
    // looked up unless a later publish or remove() needs to (indexed then).
    // The list is taken whole, the writer keeping the empty one for its
    // next frame, and the boxes appended, not zeroed first and then
    // written: a frame's publish writes only the moved boxes' bytes.
    moveProxies.swap(moved);
    moveBoxes.clear();
    for (const uint32_t p : moveProxies) moveBoxes.push_back(bp.boxes_[p]);
    pendingIndexed = !anyMoved;
  } else {  // a proxy recorded already keeps its entry and takes the new box
    indexRecordedMoves();
    for (const uint32_t p : moved) {
      if (recorded(p)) {
        moveBoxes[pendingAt[p]] = bp.boxes_[p];
        continue;
      }
      pendingAt[p] = static_cast<uint32_t>(moveProxies.size());
      moveProxies.push_back(p);
      moveBoxes.push_back(bp.boxes_[p]);
    }
  }
  stale |= !removed.empty() || !added.empty() || anyMoved;
  ++frame;
  // `stagedDoubles` now holds the frame published before this one.
  doublesTouchedBefore.swap(doublesTouched);
  doublesTouched.clear();
  stagedDoublesLag = doublesNow;
  removed.clear();
  added.clear();
  userDataSet.clear();
}

void BroadPhase::Impl::QueryView::catchUp() {
  if (!stale) return;
  if (!moveProxies.empty()) {
    moveIds.resize(moveProxies.size());
    for (size_t k = 0; k < moveProxies.size(); ++k)
      moveIds[k] = side->handleOf(slot[moveProxies[k]]);
    side->moveBatch(moveIds, moveBoxes, callerOnly);
  }
  side->update(callerOnly);
  moveBoxes.clear();
  moveProxies.clear();
  pendingIndexed = true;
  stale = false;
}

void BroadPhase::Impl::QueryView::lockSharedCurrent() {
  lockShared();
  while (stale) {
    unlockShared();
    {
      const auto lock = lockExclusive();
      catchUp();
    }
    lockShared();
  }
}

// What the writer's structure holds, proxy by proxy, with the box it holds
// there (after shiftOrigin every live proxy, at its box; after loadState
// the proxies in the structure, at the boxes the saved queries saw).
void BroadPhase::Impl::QueryView::rebuild(const BroadPhase::Impl& bp) {
  const uint32_t n = static_cast<uint32_t>(bp.rules_.size());
  std::unique_ptr<Side> fresh = bp.makeStructure();
  std::vector<uint32_t> freshSlot(n, kNullIndex);
  std::vector<uint8_t> freshLive(n, 0);
  const Side& main = *bp.structure_;
  for (uint32_t p = 0; p < n; ++p) {
    if (!bp.pool_.isLiveIndex(p)) continue;
    const uint8_t s = bp.state_[p];
    if ((s & kPendingAdd) && !(s & kRehome)) continue;  // not in the structure yet
    const Aabb box = main.visit([&](const auto& st) { return st.box(bp.slot_[p]); });
    freshSlot[p] = fresh->add(box, bp.rules_[p].motion == MotionType::staticBody, 0, p).index;
    freshLive[p] = 1;
  }
  const bool doublesNow = stageDoubles(bp);
  fresh->update(*bp.scheduler_);
  std::vector<Rules> freshRules = bp.rules_;
  FilterStore freshFilters;  // the view's own slots, for the proxies it holds
  for (uint32_t p = 0; p < n; ++p)
    freshRules[p].filterSlot =
        freshLive[p] ? freshFilters.set(kDefaultFilter, bp.filters_[bp.rules_[p].filterSlot])
                     : kDefaultFilter;
  std::vector<uint64_t> freshUserData = bp.userData_;
  {
    const auto lock = lockExclusive();
    side.swap(fresh);
    rules.swap(freshRules);
    std::swap(filters, freshFilters);
    userData.swap(freshUserData);
    live.swap(freshLive);
    swapDoubles(doublesNow);
    // The recorded moves were the old structure's.
    moveBoxes.clear();
    moveProxies.clear();
    pendingIndexed = true;
    stale = false;
    slot.swap(freshSlot);
    pendingAt.resize(n);
    ++frame;
  }
  doublesTouched.clear();
  doublesTouchedBefore.clear();
  stagedDoublesLag = false;  // `stagedDoubles` holds an older view: copied whole next time
  removed.clear();
  added.clear();
  userDataSet.clear();
}  // the old view is freed here, outside the lock

std::string BroadPhase::Impl::QueryView::validate(const BroadPhase::Impl& bp) {
  {
    const auto lock = lockExclusive();
    catchUp();
  }
  if (std::string e = side->validate(); !e.empty()) return "query structure: " + e;
  uint32_t inView = 0;
  std::vector<uint32_t> filterSlots;
  for (uint32_t p = 0; p < slot.size(); ++p) {
    const bool present = has(p);
    inView += present;
    if (present != (p < live.size() && live[p]))
      return "query structure: proxy " + std::to_string(p) + " is live there but has no slot";
    if (!present) {
      if (p < rules.size() && rules[p].filterSlot != kDefaultFilter)
        return "query structure: proxy " + std::to_string(p) + " holds a filter slot, not there";
      continue;
    }
    filterSlots.push_back(rules[p].filterSlot);
    const Filter& mine = filters[rules[p].filterSlot];
    const Filter& writers = bp.filters_[bp.rules_[p].filterSlot];
    if (mine.category != writers.category || mine.mask != writers.mask)
      return "query structure: proxy " + std::to_string(p) + " has another filter there";
    if (!bp.pool_.isLiveIndex(p))
      return "query structure: removed proxy " + std::to_string(p) + " is still reported";
    if (side->outer[slot[p]] != p)
      return "query structure: proxy " + std::to_string(p) + " maps to a slot that maps elsewhere";
    const uint8_t s = bp.state_[p];
    if ((s & kPendingAdd) && !(s & kRehome))
      return "query structure: proxy " + std::to_string(p) + " is there before its add";
  }
  if (std::string e = filters.validate(filterSlots); !e.empty()) return "query structure: " + e;
  for (uint32_t p = 0; p < bp.state_.size(); ++p)
    if (bp.pool_.isLiveIndex(p) && !(bp.state_[p] & kPendingAdd) && !has(p))
      return "query structure: proxy " + std::to_string(p) + " is missing";
  if (side->proxyCount() != inView + removed.size())
    return "query structure: holds " + std::to_string(side->proxyCount()) + " proxies, expected " +
           std::to_string(inView + removed.size());
  return {};
}

size_t BroadPhase::Impl::QueryView::memoryBytes() const {
  return side->memoryBytes() + doubles.memoryBytes() + stagedDoubles.memoryBytes() +
         rules.capacity() * sizeof(Rules) + filters.memoryBytes() +
         userData.capacity() * sizeof(uint64_t) + live.capacity() +
         (removed.capacity() + moveIds.capacity()) * sizeof(ProxyId) +
         moveBoxes.capacity() * sizeof(Aabb) +
         (added.capacity() + userDataSet.capacity() + doublesTouched.capacity() +
          doublesTouchedBefore.capacity() + moveProxies.capacity() + pendingAt.capacity() +
          slot.capacity()) *
             sizeof(uint32_t);
}

// --- QueryRead ----------------------------------------------------------------

bool BroadPhase::Impl::QueryRead::heldHere(const BroadPhase::Impl& bp) {
  for (const QueryFrame* f = tFrames; f != nullptr; f = f->below_)
    if (f->owner_.impl_.get() == &bp) return true;
  return false;
}

namespace {
// Takes the view's lock shared unless there is no view or this thread holds
// it already; returns the view it locked, or null.
template <class View>
const View* lockFor(View* view, bool held) {
  if (view == nullptr || held) return nullptr;
  view->lockSharedCurrent();
  return view;
}
}  // namespace

BroadPhase::Impl::QueryRead::QueryRead(const BroadPhase::Impl& bp)
    : locked(lockFor(bp.view_.get(), bp.view_ && heldHere(bp))),
      side(bp.view_ ? *bp.view_->side : *bp.structure_),
      filters{bp.view_ ? bp.view_->rules : bp.rules_, bp.view_ ? bp.view_->filters : bp.filters_},
      dworld(bp.view_ ? bp.view_->doubleView() : bp.dworld_.get()),
      workers(bp.view_ ? nullptr : bp.scheduler_.get()),
      defaultFilters(!bp.view_ && bp.special_ == 0) {}

// --- QueryFrame ---------------------------------------------------------------

BroadPhase::QueryFrame::QueryFrame(const BroadPhase& broadphase)
    : owner_(broadphase), below_(tFrames) {
  Impl::QueryView* view = broadphase.impl_->view_.get();
  if (view == nullptr) {
    reportError(ErrorCode::invalidArgument,
                "QueryFrame: the BroadPhase was built without concurrentQueries");
    return;  // not on the stack: holds nothing
  }
  if (!Impl::QueryRead::heldHere(*broadphase.impl_)) {
    view->lockSharedCurrent();
    locked_ = true;
  }
  index_ = view->frame;
  tFrames = this;
}

BroadPhase::QueryFrame::~QueryFrame() {
  const Impl::QueryView* view = owner_.impl_->view_.get();
  if (view == nullptr) return;
  tFrames = below_;  // frames end in the reverse order of their making
  if (locked_) view->unlockShared();
}

uint64_t BroadPhase::QueryFrame::userData(uint32_t proxy) const {
  const Impl::QueryView* view = owner_.impl_->view_.get();
  if (view == nullptr) return owner_.userData(proxy);
  if (proxy >= view->live.size() || !view->live[proxy]) {
    reportError(ErrorCode::staleHandle, "QueryFrame::userData: no proxy at index " +
                                            std::to_string(proxy) + " in frame " +
                                            std::to_string(index_));
    return 0;
  }
  return view->userData[proxy];
}

}  // namespace bp
