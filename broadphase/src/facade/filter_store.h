// FilterStore: the proxies' filters, apart from their other rules.
//
// Most proxies keep the default filter: they hold slot kDefaultFilter, which
// this store keeps once and never frees, and pay only the 4-byte slot in
// their Rules. A proxy with another filter holds a slot of its own, freed
// when it goes back to the default or is removed, and reused by the next
// filter set. (A 16-byte Filter in every proxy's Rules made them 24 bytes
// with their padding; the slot makes them 8.) Slots never reach an answer:
// which slot a proxy holds depends on the order of calls, its filter does
// not.
//
// Not thread-safe: a world's store is written by its writer, and a query
// view keeps a store of its own (query_view.h).
#pragma once

#include <broadphase/broad_phase.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace bp {

inline constexpr uint32_t kDefaultFilter = 0;

inline bool isDefaultFilter(const Filter& f) {
  return f.category == Filter{}.category && f.mask == Filter{}.mask;
}

class FilterStore {
 public:
  const Filter& operator[](uint32_t slot) const { return filters_[slot]; }

  // The slot of a proxy that held `slot` and now has filter f: kDefaultFilter
  // for the default (its own slot freed), else its own slot rewritten, or a
  // new one.
  uint32_t set(uint32_t slot, const Filter& f) {
    if (isDefaultFilter(f)) {
      release(slot);
      return kDefaultFilter;
    }
    if (slot == kDefaultFilter) {
      if (free_.empty()) {
        slot = static_cast<uint32_t>(filters_.size());
        filters_.push_back(f);
        return slot;
      }
      slot = free_.back();
      free_.pop_back();
    }
    filters_[slot] = f;
    return slot;
  }
  // A proxy holding `slot` is removed.
  void release(uint32_t slot) {
    if (slot != kDefaultFilter) free_.push_back(slot);
  }
  // Slots held or free, the default's included.
  uint32_t slotCount() const { return static_cast<uint32_t>(filters_.size()); }
  uint32_t freeCount() const { return static_cast<uint32_t>(free_.size()); }
  // Checks the store against the slots its holders hold (`slots`, one
  // entry a holder, kDefaultFilter for the default): each other slot held
  // once, with a filter that is not the default, or free, never both.
  // Empty when it holds.
  std::string validate(std::span<const uint32_t> slots) const {
    std::vector<uint8_t> seen(filters_.size(), 0);
    for (const uint32_t slot : slots) {
      if (slot == kDefaultFilter) continue;
      if (slot >= seen.size() || seen[slot]) return "filter slot out of range or held twice";
      if (isDefaultFilter(filters_[slot])) return "a filter slot holds the default filter";
      seen[slot] = 1;
    }
    for (const uint32_t slot : free_) {
      if (slot == kDefaultFilter || slot >= seen.size() || seen[slot])
        return "filter slot both free and held, or freed twice";
      seen[slot] = 1;
    }
    for (size_t slot = 1; slot < seen.size(); ++slot)
      if (!seen[slot]) return "a filter slot neither held nor free";
    return {};
  }
  size_t memoryBytes() const {
    return filters_.capacity() * sizeof(Filter) + free_.capacity() * sizeof(uint32_t);
  }

 private:
  std::vector<Filter> filters_ = std::vector<Filter>(1);  // slot 0: the default
  std::vector<uint32_t> free_;
};

}  // namespace bp
