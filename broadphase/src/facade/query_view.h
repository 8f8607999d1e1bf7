// BroadPhase::Impl::QueryView: the structure every const query reads when
// BroadPhaseConfig::concurrentQueries is set, and BroadPhase::Impl::QueryRead, one
// query's hold on whichever structure it reads.
//
// The view is a second structure of the configured kind (makeStructure():
// a Bvh for Structure::bvh, else a SweepGrid), with its own slot -> proxy
// map and its own copy of what queries read: each proxy's filter, its user
// data as of the published frame, and whether it is there. (A Bvh view
// behind the sweep cast no faster through the facade, and its rebuilds held
// the lock for up to 170 ms: docs/decisions/concurrent_queries.md.)
// update() never touches it until its last step, publish(), which under
// the exclusive lock applies the frame's removes and adds and records its
// moves; queries take the lock shared. The structure's own work (the
// moves, its update()) is left to the first query that reads the view
// after a publish: it takes the lock exclusive, catches up on its own
// thread and reads on under the lock shared. Moves recorded by several
// publishes without a query between them are kept once a proxy (its last
// box), so a view nobody reads costs the writer O(moves) copies a frame and
// at most one entry a proxy.
// Between updates the writer takes the lock only to write what queries
// read: remove() (the proxy vanishes at once), setFilter() (queries use the
// new filter at once), shiftOrigin() (a fresh view swapped in).
//
// Double proxies (docs/large_worlds.md): queries test their exact DAabbs
// as of the published frame, and the origin of that frame; the publish
// copies them from the writer's DoubleWorld (outside the lock, swapped in
// under it), since add(), move() and the update write the writer's.
// Every proxy is in layer 0 here: queries ignore layers, and one tree (or
// one set of cells) per part is what they walk fastest.
//
// Invariants between calls of the writer: a live proxy is in the view (a
// slot[p]) exactly when it is in the main structure and no add of it
// is pending, or its add is a rehome (static <-> moving: the view, as the
// main structure, keeps it where it was until the next update). A proxy has
// at most one recorded move, and only while it is in the view; `stale` is
// set while any add, remove or move has not reached `side` through its
// update().
#pragma once

#include "facade/broad_phase_impl.h"
#include "facade/broad_phase_side.h"
#include "facade/double_world.h"

#include <broadphase/jobs/scheduler.h>

#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

namespace bp {

struct BroadPhase::Impl::QueryView {
  // --- Read by queries under `mutex` shared; written under it exclusive.
  // Both are taken through `gate`, so that a reader arriving while the
  // writer waits queues behind it: back to back queries from several
  // threads cannot starve a publish (the rwlock under std::shared_mutex
  // in glibc prefers readers).
  mutable std::shared_mutex mutex;
  mutable std::mutex gate;
  std::unique_ptr<Side> side;      // side->outer maps its slots to proxies
  std::vector<Rules> rules;        // per proxy index: the filter queries test (a slot of `filters`)
  FilterStore filters;             // the view's own: the writer's slots change under queries
  std::vector<uint64_t> userData;  // per proxy index: as of the published frame
  std::vector<uint8_t> live;       // per proxy index: 1 while a query may report it
  uint64_t frame = 0;              // publishes so far (QueryFrame::index)
  DoubleWorld doubles;             // origin and applied DAabbs of the published frame
  bool doubleWorld = false;        // whether `doubles` is in use (the writer has a DoubleWorld)

  // --- Written by the writer under `mutex` exclusive, read by it without
  // (and by a catch-up, under the lock).
  // Proxy index -> its slot in `side` (kNullIndex: none), 4 bytes where the
  // handle takes 8 (side->handleOf(slot) gives the handle).
  std::vector<uint32_t> slot;

  // --- The writer's alone: queries never read these.
  std::vector<ProxyId> removed;       // handles to take out at the next publish (forgotten)
  std::vector<uint32_t> added;        // proxies applyPending() put in the main structure
  std::vector<uint32_t> userDataSet;  // proxies given user data since the last publish
  // Under `mutex` exclusive (publish, forget, catchUp): the moves recorded
  // since the last catch-up, one entry a proxy, with their boxes. A sparse
  // set: while pendingIndexed, p's entry is pendingAt[p] when recorded(p),
  // and pendingAt is neither cleared nor initialised (a stale value fails
  // the test). A publish onto an empty list leaves it unindexed: the frame
  // a query follows never looks an entry up.
  std::vector<uint32_t> moveProxies;
  std::vector<Aabb> moveBoxes;
  std::vector<uint32_t> pendingAt;
  bool pendingIndexed = true;
  std::vector<ProxyId> moveIds;  // catchUp(): the entries' handles in `side`
  // Read under `mutex` shared: whether `side` has changes its update() has
  // not applied yet (a query catches up before it reads).
  bool stale = false;
  // The catch-up's scheduler: the calling (query) thread alone, which never
  // takes, nor waits for, the workers of the frame it runs beside.
  Scheduler callerOnly{1};
  DoubleWorld stagedDoubles;  // publish(): the next `doubles`, copied outside the lock
  // The double proxies whose applied DAabb or flag changed since the last
  // publish, and those published then: while stagedDoublesLag, stagedDoubles
  // is the frame before the published one, so a publish copies only the
  // entries of both lists into it, not every proxy's (after a rebuild, or
  // without a DoubleWorld, it copies all).
  std::vector<uint32_t> doublesTouched;
  std::vector<uint32_t> doublesTouchedBefore;
  bool stagedDoublesLag = false;

  explicit QueryView(std::unique_ptr<Side> structure);

  void lockShared() const {
    const std::lock_guard g(gate);
    mutex.lock_shared();
  }
  void unlockShared() const { mutex.unlock_shared(); }
  std::unique_lock<std::shared_mutex> lockExclusive() const {
    const std::lock_guard g(gate);
    return std::unique_lock(mutex);
  }

  const DoubleWorld* doubleView() const { return doubleWorld ? &doubles : nullptr; }
  // Brings stagedDoubles to the writer's origin and applied DAabbs (the
  // touched entries, or all); true when it has a DoubleWorld. Under the
  // lock, swapDoubles() puts them in.
  bool stageDoubles(const BroadPhase::Impl& bp);
  void swapDoubles(bool present);

  bool recorded(uint32_t proxy) const {
    const uint32_t at = pendingAt[proxy];
    return at < moveProxies.size() && moveProxies[at] == proxy;
  }
  bool has(uint32_t proxy) const { return proxy < slot.size() && slot[proxy] != kNullIndex; }
  // remove(): the proxy stops being reported now; its slot leaves `side` at
  // the next publish.
  void forget(uint32_t proxy);
  // Under the lock exclusive: the proxy's recorded move, if any, is dropped.
  void dropRecordedMove(uint32_t proxy);
  // Under the lock exclusive: pendingAt made valid for every entry.
  void indexRecordedMoves();
  // setFilter(): queries test the new filter now (a proxy not in the view
  // gets its filter when its add is published).
  void setFilter(uint32_t proxy, const Filter& filter);
  // The end of update(): the frame's removes, adds (rehomes included) and
  // user data applied and its moves recorded, under the lock.
  // Takes the writer's list of the frame's moves (appliedMoves_) when it
  // has caught up, handing back its own emptied one.
  void publish(BroadPhase::Impl& bp);
  // Under the lock exclusive: the recorded moves and the structure's
  // update(), on the calling thread; `stale` is false after it.
  void catchUp();
  // Takes the lock shared with `side` up to date: while it is stale, drops
  // it, catches up under the lock exclusive, and takes it shared again (a
  // publish in between makes it stale again; the loop ends once a reader
  // finds it current).
  void lockSharedCurrent();
  // shiftOrigin(): a fresh view of every live proxy, built outside the lock
  // and swapped in under it.
  void rebuild(const BroadPhase::Impl& bp);
  // Catches up first (the writer's thread, the lock exclusive).
  std::string validate(const BroadPhase::Impl& bp);
  size_t memoryBytes() const;
};

// What one query reads, held for the query's duration: with a view, the view
// under its lock shared (unless this thread holds a QueryFrame of the
// BroadPhase already, which holds it); else the main structure, no lock.
struct BroadPhase::Impl::QueryRead {
  explicit QueryRead(const BroadPhase::Impl& bp);
  DVec3 origin() const { return dworld ? dworld->origin : DVec3{}; }
  ~QueryRead() {
    if (locked != nullptr) locked->unlockShared();
  }
  QueryRead(const QueryRead&) = delete;
  QueryRead& operator=(const QueryRead&) = delete;
  // True when the calling thread holds a QueryFrame of `bp`.
  static bool heldHere(const BroadPhase::Impl& bp);

  const QueryView* const locked;  // first: the lock is taken before anything is read
  const Side& side;
  // The proxies' filters as this query reads them: each proxy's slot (its
  // Rules) in a store of filters.
  struct Filters {
    const std::vector<Rules>& rules;
    const FilterStore& store;
    const Filter& operator[](uint32_t p) const { return store[rules[p].filterSlot]; }
  };
  const Filters filters;
  const DoubleWorld* const dworld;  // null in a float world
  // The BroadPhase's workers, or null when reading a view: a query thread's
  // work (a batch of rays, the view's ray tree) then stays on that thread,
  // which never waits for, nor takes, the workers of the frame it runs beside.
  Scheduler* const workers;
  // Every proxy has the default filter, so a query's filter accepts all of
  // them or none (filtersOf). Only known for the pair structure's side.
  const bool defaultFilters;

  // The filters a query with `filter` must read, or null when it accepts
  // every proxy; `none` is set when it accepts none.
  const Filters* filtersOf(const Filter& filter, bool& none) const {
    none = defaultFilters && !filter.accepts(Filter{});
    return defaultFilters ? nullptr : &filters;
  }
};

}  // namespace bp
