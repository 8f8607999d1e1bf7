// SweepGrid's membership changes: a proxy that was added, removed, or moved
// out of its registered cells leaves some cells and enters others.
//
// A relink is planned first (planRelink: the proxy's new range, its own
// per-proxy fields, and a list of cell events, each with the cell found by a
// read-only lookup), then applied. Planning touches only the proxy's own
// fields and reads the cell maps, so the plans of many proxies can be made in
// parallel tasks; applying them is what must follow the dirty-list order, so
// that the layout of the cells is the same for any thread count:
// - serially, one proxy at a time (relink(): the path for small updates);
// - or, when every moving cell is refreshed anyway, in two steps:
//   resolveRelinks() runs serially in dirty-list order but does only the
//   order-dependent part (creating the cells that were missing, the overflow
//   set, listing cells for refresh) and groups the enter/leave events by
//   cell, stably; each cell then applies its own events at the start of its
//   refresh (applyCellEvents), in the parallel refresh tasks. The expensive
//   part, the scattered writes into cells, is off the serial path. (Uniform
//   10^5: about 3.7 k proxies relink a frame; applied serially they were the
//   largest serial step on two threads: docs/decisions.md, "Relinks".)
#include "sweep/sweep_grid.h"

#include "sweep/sweep_cell_range.h"

#include <algorithm>

namespace bp {

// Plans the relink of proxy i into `plan` and updates the proxy's own fields
// (kind_, rangeKey_, layer_, rangeChanged_; a wide range's slot is left to
// applyOrderedParts). Reads the cell maps, writes no
// cell: safe in parallel for distinct proxies. Cells are to be marked for
// refresh unless every moving cell is refreshed anyway (refreshAll).
void SweepGrid::planRelink(uint32_t i, bool refreshAll, RelinkPlan& plan) {
  const uint8_t newLayer = groupOf(i);
  const bool mark = !refreshAll || isStaticGroup(newLayer);
  const Registration oldKind = kind_[i];
  const uint8_t oldLayer = layer_[i];
  CellRange newRange{};
  Registration newKind = Registration::none;
  if (pool_.isLiveIndex(i)) {
    newRange = rangeOf(boxes_[i].box);
    newKind = classify(newRange);
  }
  const CellRange oldRange = rangeAt(i);
  const bool wasInCells = oldKind == Registration::cells && oldLayer == newLayer;
  if (wasInCells && newKind == Registration::cells && oldRange == newRange) {
    // Same cells: only their refresh (a moved static's cells are listed).
    if (mark)
      forEachCoord(newRange, [&](const CellCoord& c) {
        const uint32_t idx = maps_[newLayer].find(c);
        if (idx != CellMap::kAbsent)
          plan.events.push_back({idx, i, CellEvent::kTouch, 1, newLayer, c});
      });
    return;
  }
  if (oldKind == Registration::cells) {
    // The old cells the proxy leaves get a leave event naming it (their
    // refresh drops exactly the members named); those it keeps are only
    // listed for refresh, when every moving cell is not refreshed anyway.
    const uint8_t markOld = !refreshAll || isStaticGroup(oldLayer);
    const bool keepsSome = wasInCells && newKind == Registration::cells;
    forEachCoord(oldRange, [&](const CellCoord& c) {
      const bool kept = keepsSome && rangeContains(newRange, c);
      if (kept && !markOld) return;
      const uint32_t idx = maps_[oldLayer].find(c);
      if (idx != CellMap::kAbsent)
        plan.events.push_back(
            {idx, i, kept ? CellEvent::kTouch : CellEvent::kLeave, markOld, oldLayer, c});
    });
    rangeChanged_[i] = 1;
    plan.changed.push_back(i);
  }
  if (oldKind == Registration::overflow && newKind != Registration::overflow)
    plan.overflow.push_back({i, false});
  if (newKind == Registration::cells) {
    forEachCoord(newRange, [&](const CellCoord& c) {
      if (wasInCells && rangeContains(oldRange, c)) return;
      // kAbsent: the cell is created when the plan is applied.
      plan.events.push_back({maps_[newLayer].find(c), i, CellEvent::kEnter, mark, newLayer, c});
    });
    layer_[i] = newLayer;
  }
  if (newKind == Registration::overflow && oldKind != Registration::overflow)
    plan.overflow.push_back({i, true});
  kind_[i] = newKind;
  if (rangeKey_[i].wide() || (newKind != Registration::none && !fitsRangeKey(newRange))) {
    plan.wide.push_back({i, newRange});  // slots are allocated in plan order
    return;
  }
  // (Registered nowhere: the range lanes mean nothing and are left.)
  if (newKind != Registration::none) packRange(rangeKey_[i], newRange);
  setStayLane(i);
}

void SweepGrid::relink(uint32_t i, bool refreshAll) {
  RelinkPlan& plan = relinkPlans_.empty() ? relinkPlans_.emplace_back() : relinkPlans_[0];
  plan.clear();
  planRelink(i, refreshAll, plan);
  for (const CellEvent& e : plan.events) {
    const uint32_t idx = e.cell != CellMap::kAbsent ? e.cell : findOrCreateCell(e.coord, e.layer);
    SweepCell& cell = cells_[idx].value;
    if (e.kind == CellEvent::kEnter) appendMember(cell, e.proxy);
    if (e.kind == CellEvent::kLeave) cell.leaving = 1;
    if (e.mark) markCellDirty(idx);
  }
  applyOrderedParts(plan);
}

// The parts of a plan whose effect depends on the order of proxies: the
// overflow set's order and the list of proxies whose range changed.
void SweepGrid::applyOrderedParts(const RelinkPlan& plan) {
  for (const auto& [proxy, range] : plan.wide) storeRange(proxy, range);
  for (const auto& [proxy, add] : plan.overflow)
    if (add)
      addToOverflow(proxy);
    else
      removeFromOverflow(proxy);
  changed_.insert(changed_.end(), plan.changed.begin(), plan.changed.end());
}

void SweepGrid::appendMember(SweepCell& cell, uint32_t proxy) {
  std::vector<uint32_t>& ids = cell.ids;
  if (ids.size() == ids.capacity()) ids.reserve(ids.size() + ids.size() / 2 + 8);
  ids.push_back(proxy);
}

template <class ForEachEvent>
void SweepGrid::groupEventsByCell(ForEachEvent&& forEachEvent, uint32_t first, uint32_t cells,
                                  std::vector<uint32_t>& begin, std::vector<uint32_t>& events) {
  // Counts at begin[c + 2], summed: begin[c + 1] is then where cell c's
  // events start, and the scatter bumps it to where they end, which is
  // where cell c + 1's start. (e.cell - first wraps for kAbsent: skipped.)
  begin.assign(size_t(cells) + 2, 0);
  forEachEvent([&](const CellEvent& e) {
    if (e.kind != CellEvent::kTouch && e.cell - first < cells) ++begin[e.cell - first + 2];
  });
  for (size_t c = 2; c < begin.size(); ++c) begin[c] += begin[c - 1];
  events.resize(begin.back());
  forEachEvent([&](const CellEvent& e) {
    if (e.kind != CellEvent::kTouch && e.cell - first < cells)
      events[begin[e.cell - first + 1]++] =
          e.kind == CellEvent::kEnter ? e.proxy : e.proxy | kLeaveEvent;
  });
}

void SweepGrid::groupPlanEvents(RelinkPlan& plan, uint32_t cells) {
  for (uint32_t k = 0; k < plan.events.size(); ++k) {
    const CellEvent& e = plan.events[k];
    if ((e.cell == CellMap::kAbsent) | (e.mark != 0)) plan.ordered.push_back(k);
  }
  groupEventsByCell(
      [&](auto&& visit) {
        for (const CellEvent& e : plan.events) visit(e);
      },
      0, cells, plan.cellBegin, plan.cellEvents);
}

// Applies the plans of relinkPlans_[0, count), in order, leaving the enter and
// leave events to each cell's refresh: creates the missing cells, lists the
// cells to refresh, updates the overflow set, and groups the events by cell.
// When the planning tasks grouped their own events (into the cells that
// existed), only their ordered events are visited here, and only those that
// enter a new cell are grouped. (Uniform 10^5, about 3.7 k relinks a frame:
// the grouping here was the largest serial step on two threads.)
void SweepGrid::resolveRelinks(uint32_t count, bool grouped) {
  eventTables_.clear();
  const uint32_t oldCells = static_cast<uint32_t>(cells_.size());
  // The events this step must see: a grouped plan's ordered ones, else all.
  auto forEachEventOf = [grouped](RelinkPlan& plan, auto&& visit) {
    if (grouped)
      for (const uint32_t k : plan.ordered) visit(plan.events[k]);
    else
      for (CellEvent& e : plan.events) visit(e);
  };
  for (uint32_t p = 0; p < count; ++p) {
    RelinkPlan& plan = relinkPlans_[p];
    forEachEventOf(plan, [&](CellEvent& e) {
      if (e.cell == CellMap::kAbsent) e.cell = findOrCreateCell(e.coord, e.layer);
      if (e.mark) markCellDirty(e.cell);
    });
    applyOrderedParts(plan);
  }
  const uint32_t cells = static_cast<uint32_t>(cells_.size());
  if (grouped) {
    for (uint32_t p = 0; p < count; ++p) {
      const RelinkPlan& plan = relinkPlans_[p];
      if (!plan.cellEvents.empty())
        eventTables_.push_back({plan.cellBegin.data(), plan.cellEvents.data(), 0, oldCells});
    }
    if (cells == oldCells) return;
  }
  // All the events, or those of the new cells.
  const uint32_t first = grouped ? oldCells : 0;
  groupEventsByCell(
      [&](auto&& visit) {
        for (uint32_t p = 0; p < count; ++p) forEachEventOf(relinkPlans_[p], visit);
      },
      first, cells - first, cellEventBegin_, cellEvents_);
  eventTables_.push_back({cellEventBegin_.data(), cellEvents_.data(), first, cells - first});
}

// A cell's own enter and leave events from resolveRelinks(), at the start of
// its refresh (by the task refreshing it: no other task touches this cell).
// The proxies that leave go to `leavers`, in event order.
void SweepGrid::applyCellEvents(uint32_t cell, std::vector<uint32_t>& leavers) {
  SweepCell& c = cells_[cell].value;
  leavers.clear();
  for (const CellEventTable& t : eventTables_) {
    const uint32_t at = cell - t.first;  // wraps below first
    if (at >= t.cells) continue;
    for (uint32_t k = t.begin[at]; k < t.begin[at + 1]; ++k) {
      const uint32_t event = t.events[k];
      if (event & kLeaveEvent)
        leavers.push_back(event & ~kLeaveEvent);
      else
        appendMember(c, event);
    }
  }
}

}  // namespace bp
