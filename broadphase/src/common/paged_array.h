// PagedArray: entries by index, held in pages of 1024 that are made when an
// entry of theirs is first written. For data that only some proxies have
// (the double proxies' DAabbs): a first entry at a high index costs one
// page, not an array up to that index touched for the first time (a stall
// that grew with the world), and a world with a few such proxies holds a
// few pages.
//
// Invariant: a page, once made, stays until clear(); an entry of a page
// never made reads as T{} (find() returns null).
#pragma once

#include "common/assert.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace bp {

template <class T>
class PagedArray {
 public:
  static constexpr uint32_t kPageBits = 10;
  static constexpr uint32_t kPageSize = 1u << kPageBits;

  /// Entry i, or null when its page was never made.
  const T* find(uint32_t i) const {
    const size_t p = i >> kPageBits;
    return p < pages_.size() && !pages_[p].empty() ? &pages_[p][i & (kPageSize - 1)] : nullptr;
  }
  /// Entry i, its page made (every entry T{}) if it was not.
  T& at(uint32_t i) {
    const size_t p = i >> kPageBits;
    if (p >= pages_.size()) pages_.resize(p + 1);
    if (pages_[p].empty()) pages_[p].resize(kPageSize);
    return pages_[p][i & (kPageSize - 1)];
  }
  /// Entry i of a page already made (find(i) != null).
  T& operator[](uint32_t i) {
    BP_ASSERT(find(i) != nullptr);
    return pages_[i >> kPageBits][i & (kPageSize - 1)];
  }
  const T& operator[](uint32_t i) const {
    BP_ASSERT(find(i) != nullptr);
    return pages_[i >> kPageBits][i & (kPageSize - 1)];
  }

  /// Every index with an entry is below this.
  uint64_t extent() const { return uint64_t(pages_.size()) << kPageBits; }
  /// Calls fn(i, entry) for every entry of every page made, in index order.
  template <class Fn>
  void forEachMade(Fn&& fn) const {
    for (size_t p = 0; p < pages_.size(); ++p)
      for (uint32_t k = 0; k < pages_[p].size(); ++k)
        fn(uint32_t((p << kPageBits) | k), pages_[p][k]);
  }
  /// The pages of `other` that this one lacks, made (entries T{}).
  void makePagesOf(const PagedArray& other) {
    if (pages_.size() < other.pages_.size()) pages_.resize(other.pages_.size());
    for (size_t p = 0; p < other.pages_.size(); ++p)
      if (!other.pages_[p].empty() && pages_[p].empty()) pages_[p].resize(kPageSize);
  }
  void clear() { pages_.clear(); }
  void swap(PagedArray& other) noexcept { pages_.swap(other.pages_); }
  size_t memoryBytes() const {
    size_t bytes = pages_.capacity() * sizeof(std::vector<T>);
    for (const std::vector<T>& page : pages_) bytes += page.capacity() * sizeof(T);
    return bytes;
  }

 private:
  std::vector<std::vector<T>> pages_;  // empty: never made
};

}  // namespace bp
