// SweepGrid proxies: add, remove, move and the accessors. Every mutation only
// records the new state of the index and lists it (dirtyList_ or
// stayedList_); the cells are brought up to date in update()
// (sweep_cells.cpp).
#include "sweep/sweep_grid.h"
#include <broadphase/error.h>

#include "common/batch_check.h"
#include "common/even_chunks.h"
#include "common/report_error.h"
#include "sweep/sweep_kernel_wide.h"
#include "sweep/sweep_simd.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <string>
#include <type_traits>
#include <utility>

namespace bp {

namespace {

// Reports a bad box, the message after `where` (false then).
bool checkBox(const Aabb& box, const char* where) {
  if (isValid(box)) return true;
  reportError(ErrorCode::invalidBox, std::string(where) + describeInvalid(box));
  return false;
}

std::string describeHandle(ProxyId id) {
  return "handle (index " + std::to_string(id.index) + ", generation " +
         std::to_string(id.generation) + ") is not a live proxy of this SweepGrid";
}

}  // namespace

// A bad field is reported; when the handler returns, the field takes its
// default and the next field is checked.
SweepGrid::SweepGrid(const SweepGridConfig& config) : config_(config) {
  const SweepGridConfig defaults;
  auto reject = [&](auto SweepGridConfig::*field, const char* why) {
    reportError(ErrorCode::invalidArgument, std::string("SweepGridConfig::") + why);
    config_.*field = defaults.*field;
  };
  if (!(config.cellSize >= 0.0f) || !std::isfinite(config.cellSize))
    reject(&SweepGridConfig::cellSize, "cellSize must be finite and >= 0");
  if (!(config.cellSizeFactor > 0.0f) || !std::isfinite(config.cellSizeFactor))
    reject(&SweepGridConfig::cellSizeFactor, "cellSizeFactor must be > 0");
  if (!(config.targetBoxesPerCell >= 0.0f) || !std::isfinite(config.targetBoxesPerCell))
    reject(&SweepGridConfig::targetBoxesPerCell, "targetBoxesPerCell must be >= 0");
  if (!(config.cellStretchX >= 1.0f && config.cellStretchX <= 64.0f))
    reject(&SweepGridConfig::cellStretchX, "cellStretchX must be in [1, 64]");
  if (config.maxCellsPerProxy == 0 || config.maxCellsPerProxy > (1u << 20))
    reject(&SweepGridConfig::maxCellsPerProxy, "maxCellsPerProxy must be in [1, 2^20]");
  if (config.kernel == SweepKernel::wide && !wide::available())
    reject(&SweepGridConfig::kernel, "kernel is wide, but this CPU has no AVX-512 (F, BW, VL, DQ)");
  wide_ = config_.kernel != SweepKernel::narrow && wide::available();
}

void SweepGrid::markDirty(uint32_t index) { markMoved(index, kDirtyRelink); }

void SweepGrid::markMoved(uint32_t index, uint8_t state) {
  const uint8_t old = dirty_[index];
  if (joinsRelinks(old, state)) dirtyList_.push_back(index);
  if (joinsStayed(old, state)) stayedList_.push_back(index);
  dirty_[index] = std::max(old, state);
}

ProxyId SweepGrid::add(const Aabb& box, bool isStatic, uint32_t layer) {
  if (!checkBox(box, "SweepGrid::add: ")) return ProxyId{};
  // The grouped cell events tag a leaving proxy with the top bit.
  if (pool_.liveCount() >= kLeaveEvent - 1) {
    reportError(ErrorCode::capacityExceeded, "SweepGrid::add: 2^31 - 1 proxies at most");
    return ProxyId{};
  }
  const ProxyId id = pool_.allocate();
  if (id.index >= boxes_.size()) {
    const size_t n = size_t(id.index) + 1;
    boxes_.resize(n);
    static_.resize(n, 0);
    dirty_.resize(n, 0);
    kind_.resize(n, Registration::none);
    layer_.resize(n, kMovingLayer);
    proxyLayer_.resize(n, 0);
    rangeKey_.resize(n, kNeverStays);
    rangeChanged_.resize(n + 3, 0);  // padded (see the declaration)
  }
  boxes_[id.index].box = box;
  static_[id.index] = isStatic ? 1 : 0;
  proxyLayer_[id.index] = uint8_t(layer);
  layeredProxies_ += layer != 0;
  // The relink planning reads the maps of a group in parallel tasks: they
  // exist before the update.
  if (maps_.size() < 2 * size_t(layer) + 2) maps_.resize(2 * size_t(layer) + 2);
  // (A reused index may still be registered, its removal pending: the key
  // keeps that range for the relink that leaves it.)
  setStayLane(id.index);
  markDirty(id.index);
  return id;
}

void SweepGrid::remove(ProxyId id) {
  if (!pool_.isLive(id)) {
    reportError(ErrorCode::staleHandle, "SweepGrid::remove: " + describeHandle(id));
    return;
  }
  pool_.release(id);
  layeredProxies_ -= proxyLayer_[id.index] != 0;
  markDirty(id.index);
}

void SweepGrid::moveUnchecked(uint32_t index, const Aabb& box) {
  boxes_[index].box = box;
  markMoved(index, dirtyStateFor(index, box));
}

// kDirtyStayed when `box` lies in exactly the registered cells of `index`.
uint8_t SweepGrid::dirtyStateFor(uint32_t index, const Aabb& box) const {
#if defined(__AVX2__)
  return dirtyStateInLanes(loadBox(box), invSide8_, rangeKey_[index]);
#else
  return rangeKeyOf(box) == rangeKey_[index] ? kDirtyStayed : kDirtyRelink;
#endif
}

void SweepGrid::storeRange(uint32_t index, const CellRange& r) {
  RangeKey& key = rangeKey_[index];
  if (key.wide()) freeWide_.push_back(key.wideSlot());
  key = kNeverStays;
  if (kind_[index] != Registration::none) {
    if (fitsRangeKey(r)) {
      packRange(key, r);
    } else {
      uint32_t slot;
      if (!freeWide_.empty()) {
        slot = freeWide_.back();
        freeWide_.pop_back();
        wideRanges_[slot] = r;
      } else {
        slot = static_cast<uint32_t>(wideRanges_.size());
        wideRanges_.push_back(r);
      }
      key.lane[0] = int16_t(uint16_t(slot & 0xFFFFu));
      key.lane[1] = int16_t(uint16_t(slot >> 16));
      key.lane[7] = 1;
    }
  }
  setStayLane(index);
}

RangeKey SweepGrid::rangeKeyOf(const Aabb& box) const {
  const CellRange r = rangeOf(box);
  RangeKey key{};
  for (int a = 0; a < 3; ++a) {
    key.lane[a] = int16_t(std::clamp(r.lo[a], -32768, 32767));
    key.lane[a + 3] = int16_t(std::clamp(r.hi[a], -32768, 32767));
  }
  return key;
}

void SweepGrid::move(ProxyId id, const Aabb& box) {
  if (!pool_.isLive(id)) {
    reportError(ErrorCode::staleHandle, "SweepGrid::move: " + describeHandle(id));
    return;
  }
  if (!checkBox(box, "SweepGrid::move: ")) return;
  moveUnchecked(id.index, box);
}

namespace {

// A move batch's check of its sizes (the ids and the boxes side by side).
bool sizesMatch(size_t ids, size_t boxes) {
  if (ids == boxes) return true;
  reportError(ErrorCode::invalidArgument, "SweepGrid::move: " + std::to_string(ids) + " ids but " +
                                              std::to_string(boxes) + " boxes");
  return false;
}

}  // namespace

void SweepGrid::move(std::span<const ProxyId> ids, std::span<const Aabb> boxes) {
  if (sizesMatch(ids.size(), boxes.size()))
    moveBatch(HandleBatch{ids, boxes}, uint32_t(ids.size()), nullptr, true);
}

void SweepGrid::move(std::span<const ProxyId> ids, std::span<const Aabb> boxes,
                     Scheduler& scheduler) {
  if (sizesMatch(ids.size(), boxes.size()))
    moveBatch(HandleBatch{ids, boxes}, uint32_t(ids.size()), &scheduler, true);
}

void SweepGrid::moveUnchecked(std::span<const ProxyId> ids, std::span<const Aabb> boxes,
                              Scheduler& scheduler) {
  if (sizesMatch(ids.size(), boxes.size()))
    moveBatch(HandleBatch{ids, boxes}, uint32_t(ids.size()), &scheduler, false);
}

void SweepGrid::moveUnchecked(std::span<const uint32_t> indices, std::span<const Aabb> boxesByIndex,
                              Scheduler& scheduler) {
  moveBatch(IndexBatch{indices, boxesByIndex.data()}, uint32_t(indices.size()), &scheduler, false);
}

// The first bad entry of a batch that failed its check, reported: the
// slow search runs on this path only.
void SweepGrid::moveBatchCulprit(std::span<const ProxyId> ids, std::span<const Aabb> boxes) const {
  for (size_t k = 0; k < ids.size(); ++k) {
    const std::string entry = "SweepGrid::move: entry " + std::to_string(k) + ": ";
    if (!pool_.isLive(ids[k])) {
      reportError(ErrorCode::staleHandle, entry + describeHandle(ids[k]));
      return;
    }
    if (!checkBox(boxes[k], entry.c_str())) return;
  }
}

// A bad entry throws before anything changes (the slow search for the first
// culprit only runs then); entries are written in batch order, so a handle
// given twice ends with its last box, as with one-by-one moves. Unchecked
// (moveUnchecked), one thread skips the check pass.
// - One thread: a check pass, then a write pass that also works out each
//   dirty state while the box is in registers.
// - With workers: the check pass runs in parallel chunks and notes whether
//   the handles come in strictly increasing index order (an engine's usual
//   batch: its bodies in order). Then no index can repeat, and the chunks
//   also write in parallel, each listing into its own stretch of the dirty
//   lists (its entries' places), closed up afterwards; otherwise the writes
//   are serial. (The check pass used to work the states out too, to count
//   each chunk's list entries in advance: on plane 10^5, two threads, that
//   pass took longer than the writes; docs/decisions.md, "The batch move".)
// - A batch large enough that update() will refresh every moving cell and
//   clear the dirty states wholesale (see beginUpdate) only counts the
//   proxies that stay in their cells (unlistedStays_) rather than listing
//   them: update() would not read the list.
// Both passes are branch-free per entry (the box checked and moved in one
// register; see allLiveAndValid and writeBatch), which made the batch move
// markedly faster (docs/decisions.md, "The batch move").
template <class Batch>
void SweepGrid::moveBatch(const Batch& batch, uint32_t n, Scheduler* scheduler, bool checked) {
  constexpr bool kHandles = std::is_same_v<Batch, HandleBatch>;
  // Chunks of at most 8192 entries (evenChunks).
  constexpr uint32_t kChunk = 8192;
  const uint32_t threads = scheduler ? uint32_t(scheduler->threadCount()) : 1;
  const bool parallel = threads > 1 && n > kChunk;
  // (Plain names, not a structured binding: the lambdas below capture them.)
  const EvenChunks split = parallel ? evenChunks(n, kChunk, 1, threads) : EvenChunks{1, n};
  const uint32_t chunks = split.count, chunkSize = split.size;
  bool good = true;
  if (parallel) {
    chunkAscending_.resize(chunks);
    std::atomic<bool> bad{false};
    forEachChunk(*scheduler, split, n, [&](uint32_t c, uint32_t begin, uint32_t end) {
      if constexpr (kHandles) {
        if (checked && !allLiveAndValid(pool_, batch.ids, batch.boxes, begin, end))
          bad.store(true, std::memory_order_relaxed);
        chunkAscending_[c] = indicesAscending(batch.ids, begin, end);
      } else {
        chunkAscending_[c] = indicesAscending(batch.indices, begin, end);
      }
    });
    good = !bad.load(std::memory_order_relaxed);
  } else if constexpr (kHandles) {
    if (checked) good = allLiveAndValid(pool_, batch.ids, batch.boxes, 0, n);
  }
  if (!good) {
    if constexpr (kHandles) moveBatchCulprit(batch.ids, batch.boxes);
    return;
  }

  // Whether update() will surely take its path that needs no stayed list: a
  // batch of n proxies leaves at least n pending when its indices are
  // unique, which is assumed here; if repeats make the guess wrong,
  // beginUpdate() rebuilds the list from dirty_.
  const bool listStays = !(uint64_t(n) * 2 >= cells_.size() && uint64_t(n) * 16 >= dirty_.size());
  const size_t relinks = dirtyList_.size(), stays = stayedList_.size();
  dirtyList_.resize(relinks + n);
  if (listStays) stayedList_.resize(stays + n);
  uint32_t* relinkOut = dirtyList_.data() + relinks;
  uint32_t* stayedOut = listStays ? stayedList_.data() + stays : nullptr;
  const bool unique = parallel && std::all_of(chunkAscending_.begin(), chunkAscending_.end(),
                                              [](uint8_t a) { return a != 0; });
  Listed added;
  if (unique) {
    chunkListed_.resize(chunks);
    forEachChunk(*scheduler, split, n, [&](uint32_t c, uint32_t begin, uint32_t end) {
      chunkListed_[c] =
          writeBatch(batch, begin, end, relinkOut + begin, stayedOut ? stayedOut + begin : nullptr);
    });
    // Close up the stretches, in chunk order.
    for (uint32_t c = 0; c < chunks; ++c) {
      const uint32_t begin = std::min(n, c * chunkSize);
      const Listed& l = chunkListed_[c];
      std::copy_n(relinkOut + begin, l.relink, relinkOut + added.relink);
      if (stayedOut) std::copy_n(stayedOut + begin, l.stayed, stayedOut + added.stayed);
      added.relink += l.relink;
      added.stayed += l.stayed;
    }
  } else {
    added = writeBatch(batch, 0, n, relinkOut, stayedOut);
  }
  dirtyList_.resize(relinks + added.relink);
  if (listStays)
    stayedList_.resize(stays + added.stayed);
  else
    unlistedStays_ += added.stayed;
}

// Writes entries [begin, end) of a checked batch: the box and its dirty state
// (worked out here, as markMoved), and each index that joins a list to
// `relinkOut` or `stayedOut` (null: counted only). Returns how many joined
// each list.
template <class Batch>
SweepGrid::Listed SweepGrid::writeBatch(const Batch& batch, uint32_t begin, uint32_t end,
                                        uint32_t* relinkOut, uint32_t* stayedOut) {
  Listed added;
  for (uint32_t k = begin; k < end; ++k) {
    const uint32_t i = batch.index(k);
#if defined(__AVX2__)
    // The box and its zero padding in one aligned store.
    const __m256 v = loadBox(batch.box(k));
    storeBox(boxes_[i], v);
    const uint8_t state = dirtyStateInLanes(v, invSide8_, rangeKey_[i]);
    // The move no longer reads the registration of the proxies that stay
    // (the key holds what it needs), so update()'s relink planning would meet
    // these fields cold: fetch them now for the few that relink (without
    // this, the planning lost more than the move saved: docs/decisions.md,
    // "The batch move").
    if (state == kDirtyRelink) {
      _mm_prefetch(reinterpret_cast<const char*>(&kind_[i]), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(&layer_[i]), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(&static_[i]), _MM_HINT_T0);
    }
#else
    boxes_[i].box = batch.box(k);
    const uint8_t state = dirtyStateFor(i, batch.box(k));
#endif
    // A list index is written only when the proxy joins: with chunks
    // writing side by side, a chunk's write past its own stretch would land
    // in the next chunk's (a race TSan caught on a batch of proxies already
    // dirty).
    const uint8_t old = dirty_[i];
    if (joinsRelinks(old, state)) relinkOut[added.relink++] = i;
    if (joinsStayed(old, state)) {
      if (stayedOut) stayedOut[added.stayed] = i;
      ++added.stayed;
    }
    dirty_[i] = std::max(old, state);
  }
  return added;
}

void SweepGrid::reportDeadIndex(uint32_t index, const char* operation) const {
  reportError(ErrorCode::staleHandle, std::string("SweepGrid::") + operation + ": index " +
                                          std::to_string(index) + " is not live");
}

const Aabb& SweepGrid::box(uint32_t index) const {
  if (!pool_.isLiveIndex(index)) {
    reportDeadIndex(index, "box");
    static const Aabb kNoBox = Aabb::empty();  // initialised here, off the path that succeeds
    return kNoBox;
  }
  return boxes_[index].box;
}

bool SweepGrid::isStatic(uint32_t index) const {
  if (!pool_.isLiveIndex(index)) {
    reportDeadIndex(index, "isStatic");
    return false;
  }
  return static_[index] != 0;
}

ProxyId SweepGrid::handleOf(uint32_t index) const {
  if (!pool_.isLiveIndex(index)) {
    reportDeadIndex(index, "handleOf");
    return ProxyId{};
  }
  return pool_.handleOf(index);
}

size_t SweepGrid::memoryBytes() const {
  size_t bytes = 0;
  auto add = [&bytes](const auto& v) { bytes += v.capacity() * sizeof(v[0]); };
  add(boxes_);
  add(static_);
  add(dirty_);
  add(kind_);
  add(wideRanges_);
  add(freeWide_);
  // The map's buckets and nodes (a node: the entry and its link, as
  // libstdc++ lays it out, about).
  bytes += overflowPos_.bucket_count() * sizeof(void*) +
           overflowPos_.size() * (sizeof(std::pair<const uint32_t, uint32_t>) + sizeof(void*));
  add(layer_);
  add(proxyLayer_);
  add(rangeKey_);
  add(rangeChanged_);
  add(changed_);
  add(dirtyList_);
  add(stayedList_);
  add(overflow_);
  add(cells_);
  add(dirtyCells_);
  add(sortScratch_);
  add(chunkListed_);
  add(chunkAscending_);
  add(eventTables_);
  add(cellEventBegin_);
  add(cellEvents_);
  add(sweepRanges_);
  for (const RelinkPlan& plan : relinkPlans_) {
    add(plan.events);
    add(plan.changed);
    add(plan.overflow);
    add(plan.cellBegin);
    add(plan.cellEvents);
    add(plan.ordered);
    add(plan.wide);
  }
  add(spareCells_);
  for (const SweepCell& c : spareCells_) {
    add(c.ids);
    add(c.keys);
    add(c.flags);
  }
  for (const PaddedCell& pc : cells_) {
    const SweepCell& c = pc.value;
    add(c.ids);
    add(c.keys);
    add(c.flags);
  }
  for (int w = 0; w < pairBuffers_.size(); ++w) bytes += pairBuffers_[w].memoryBytes();
  bytes += router_.memoryBytes();
  for (const CellMap& map : maps_) bytes += map.memoryBytes();
  bytes += pool_.memoryBytes();
  return bytes;
}

size_t SweepGrid::pairBytes() const {
  size_t bytes = router_.memoryBytes() + sortScratch_.capacity() * sizeof(Pair);
  for (int w = 0; w < pairBuffers_.size(); ++w) bytes += pairBuffers_[w].memoryBytes();
  return bytes;
}

}  // namespace bp
