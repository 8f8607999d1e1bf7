// SweepGrid::validate(): checks every invariant of the structure and says
// which one fails. Proxies with pending changes (dirty) are checked only for
// the consistency of what is registered, since their new box is not applied.
#include "sweep/sweep_grid.h"

#include <algorithm>
#include <limits>

namespace bp {

namespace {

std::string at(uint32_t i) { return " (index " + std::to_string(i) + ")"; }

bool rangeHolds(const CellRange& r, const CellCoord& c) {
  return r.lo[0] <= c.x && c.x <= r.hi[0] && r.lo[1] <= c.y && c.y <= r.hi[1] && r.lo[2] <= c.z &&
         c.z <= r.hi[2];
}

uint64_t cellsIn(const CellRange& r) {
  uint64_t n = 1;
  for (int a = 0; a < 3; ++a) n *= uint64_t(int64_t(r.hi[a]) - r.lo[a] + 1);
  return n;
}

}  // namespace

std::string SweepGrid::validate() const {
  if (std::string why = pool_.validate(); !why.empty()) return "handle pool: " + why;
  const uint32_t cap = pool_.capacity();
  for (const size_t size : {boxes_.size(), static_.size(), dirty_.size(), kind_.size(),
                            rangeKey_.size(), rangeChanged_.size() - 3})
    if (size != cap) return "per-proxy arrays are not capacity() long";
  if (!dirtyCells_.empty()) return "dirty cell list not empty between updates";
  if (!eventTables_.empty()) return "cell events left over from an update";

  // Dirty lists: each relinking proxy once in dirtyList_, each staying one
  // in stayedList_ (which may also hold proxies that rose to relink since)
  // or counted in unlistedStays_.
  uint64_t relinks = 0, stays = 0;
  // Range keys: the stay lane as canStay() says; a range in a wide slot
  // exactly when it does not fit the lanes, each slot held once or free.
  std::vector<uint8_t> slotHeld(wideRanges_.size(), 0);
  for (const uint32_t slot : freeWide_) {
    if (slot >= slotHeld.size() || slotHeld[slot]) return "wide range free list broken";
    slotHeld[slot] = 1;
  }
  for (uint32_t i = 0; i < cap; ++i) {
    const RangeKey& key = rangeKey_[i];
    if (key.lane[6] != (canStay(i) ? 0 : 1) || (key.lane[7] != 0 && key.lane[7] != 1))
      return "range key's stay lane does not match the registration" + at(i);
    if (key.wide()) {
      if (kind_[i] == Registration::none) return "unregistered proxy holds a wide range" + at(i);
      if (key.wideSlot() >= slotHeld.size() || slotHeld[key.wideSlot()])
        return "wide range slot out of range or shared" + at(i);
      slotHeld[key.wideSlot()] = 1;
    }
    if (kind_[i] != Registration::none && key.wide() == fitsRangeKey(rangeAt(i)))
      return "range key holds its range in the wrong place" + at(i);
    if (dirty_[i] > kDirtyRelink) return "bad dirty state" + at(i);
    relinks += dirty_[i] == kDirtyRelink;
    stays += dirty_[i] == kDirtyStayed;
    // "Stayed" is trusted by update(): the proxy must really be in its cells,
    // and be one that can stay (a moving proxy in moving cells).
    if (dirty_[i] == kDirtyStayed &&
        (!pool_.isLiveIndex(i) || !canStay(i) || rangeOf(boxes_[i].box) != rangeAt(i)))
      return "proxy marked as staying in its cells but its box left them" + at(i);
  }
  if (std::find(slotHeld.begin(), slotHeld.end(), 0) != slotHeld.end())
    return "a wide range slot is neither held nor free";
  if (relinks != dirtyList_.size()) return "relink states do not match the dirty list";
  for (const uint32_t i : dirtyList_)
    if (i >= cap || dirty_[i] != kDirtyRelink)
      return "dirty list holds a proxy not relinking" + at(i);
  uint64_t listedStays = 0;
  for (const uint32_t i : stayedList_) {
    if (i >= cap || dirty_[i] == kDirtyNone) return "stayed list holds a clean proxy" + at(i);
    listedStays += dirty_[i] == kDirtyStayed;
  }
  // A batch move may count staying proxies instead of listing them (some of
  // which may have risen to relink since).
  if (unlistedStays_ == 0 ? listedStays != stays : listedStays + unlistedStays_ < stays)
    return "stayed states do not match the stayed list";

  // Per proxy: registration matches the box (unless a change is pending).
  uint64_t expectedEntries = 0;
  uint32_t overflowCount = 0;
  for (uint32_t i = 0; i < cap; ++i) {
    const bool live = pool_.isLiveIndex(i);
    if (live && !isValid(boxes_[i].box)) return "live proxy with an invalid box" + at(i);
    const auto pos = overflowPos_.find(i);
    if (kind_[i] == Registration::overflow) {
      ++overflowCount;
      if (pos == overflowPos_.end() || pos->second >= overflow_.size() ||
          overflow_[pos->second] != i)
        return "overflow position wrong" + at(i);
    } else if (pos != overflowPos_.end()) {
      return "overflow position set for a proxy not in overflow" + at(i);
    }
    if (kind_[i] == Registration::cells) {
      if (classify(rangeAt(i)) != Registration::cells)
        return "registered in cells but spans too many" + at(i);
      expectedEntries += cellsIn(rangeAt(i));
    }
    if (rangeChanged_[i]) return "range-changed flag left set" + at(i);
    if (dirty_[i]) continue;
    if (!live) {
      if (kind_[i] != Registration::none) return "dead proxy still registered" + at(i);
      continue;
    }
    if (kind_[i] == Registration::none) return "live proxy not registered" + at(i);
    const CellRange r = rangeOf(boxes_[i].box);
    if (!(r == rangeAt(i))) return "registered range differs from the box's cells" + at(i);
    if (classify(r) != kind_[i])
      return "registration kind does not match the overflow rule" + at(i);
  }
  if (overflowCount != overflow_.size() || overflowPos_.size() != overflow_.size())
    return "overflow set size mismatch";
  if (cap > 0 && !hasPendingChanges() && pool_.liveCount() > 0 && !(side_[0] > 0.0f))
    return "no cell size after an update";

  // Cells: in the map, non-empty, unique members that belong there, sorted,
  // SoA equal to the exact boxes, sentinel in place.
  size_t mapped = 0;
  for (const CellMap& map : maps_) mapped += map.size();
  if (mapped != cells_.size()) return "cell map sizes differ from the cell count";
  uint64_t entries = 0;
  std::vector<uint32_t> seen;
  CellRange bounds{{INT32_MAX, INT32_MAX, INT32_MAX}, {INT32_MIN, INT32_MIN, INT32_MIN}};
  for (uint32_t ci = 0; ci < cells_.size(); ++ci) {
    const SweepCell& c = cells_[ci].value;
    const std::string where = " in cell (" + std::to_string(c.coord.x) + ", " +
                              std::to_string(c.coord.y) + ", " + std::to_string(c.coord.z) + ")";
    if (c.layer >= maps_.size()) return "bad cell layer" + where;
    if (maps_[c.layer].find(c.coord) != ci) return "cell map does not point at its cell" + where;
    if (c.dirty || c.leaving) return "cell left dirty" + where;
    if (c.sorted != c.size()) return "cell has members appended since its refresh" + where;
    float maxExtentX = 0.0f;
    for (uint32_t k = 0; k < c.size(); ++k)
      maxExtentX = std::max(maxExtentX, c.maxX()[k] - c.minX()[k]);
    if (c.maxExtentX < maxExtentX) return "cell's largest x extent too small" + where;
    const uint32_t n = c.size();
    if (n == 0) return "empty cell kept" + where;
    if (c.keys.size() != 6 * c.stride() || c.flags.size() != c.stride())
      return "SoA arrays have the wrong size" + where;
    for (uint32_t p = n; p < c.stride(); ++p)
      if (c.minX()[p] != std::numeric_limits<float>::infinity()) return "sentinel missing" + where;
    entries += n;
    seen.assign(c.ids.begin(), c.ids.end());
    std::sort(seen.begin(), seen.end());
    if (std::adjacent_find(seen.begin(), seen.end()) != seen.end())
      return "a proxy is twice in one cell" + where;
    for (uint32_t k = 0; k < n; ++k) {
      const uint32_t id = c.ids[k];
      if (id >= cap || kind_[id] != Registration::cells || !rangeHolds(rangeAt(id), c.coord) ||
          layer_[id] != c.layer)
        return "member not registered in this cell" + where + at(id);
      if (!dirty_[id] && groupOf(id) != c.layer) return "proxy in the wrong layer" + where + at(id);
      if (k > 0 && c.minX()[k - 1] > c.minX()[k]) return "cell not sorted on min x" + where;
      const Aabb& b = boxes_[id].box;
      if (dirty_[id]) continue;  // its keys are refreshed at the next update
      const Aabb e = c.box(k);
      if (e.min != b.min || e.max != b.max)
        return "cell keys differ from the exact box" + where + at(id);
      const CellRange r = rangeAt(id);
      const uint8_t flags = uint8_t((r.lo[0] == c.coord.x) | ((r.lo[1] == c.coord.y) << 1) |
                                    ((r.lo[2] == c.coord.z) << 2));
      if (c.flags[k] != flags) return "entry flags wrong" + where + at(id);
    }
    bounds.lo[0] = std::min(bounds.lo[0], c.coord.x);
    bounds.lo[1] = std::min(bounds.lo[1], c.coord.y);
    bounds.lo[2] = std::min(bounds.lo[2], c.coord.z);
    bounds.hi[0] = std::max(bounds.hi[0], c.coord.x);
    bounds.hi[1] = std::max(bounds.hi[1], c.coord.y);
    bounds.hi[2] = std::max(bounds.hi[2], c.coord.z);
  }
  // Every registered proxy is in each cell of its range exactly once: the
  // counts match and no member is foreign or doubled (checked above).
  if (entries != expectedEntries)
    return "cell entries " + std::to_string(entries) + " but registered ranges cover " +
           std::to_string(expectedEntries);
  if (!cells_.empty() && !(bounds == gridBounds_)) return "grid bounds stale";
  return {};
}

}  // namespace bp
