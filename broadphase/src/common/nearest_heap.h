// keepNearest: the k best neighbours so far of a k-nearest search, as a
// max-heap under neighbourBefore (the worst kept at front()). Every search
// here (the BVH's, the sweep's, the rays' tree's) offers its candidates to it.
#pragma once

#include <broadphase/query.h>
#include "common/assert.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace bp {

/// Offers `candidate` to `heap`, which holds at most k entries; true when it
/// is kept (then heap.front() may have changed).
inline bool keepNearest(std::vector<Neighbour>& heap, uint32_t k, const Neighbour& candidate) {
  BP_ASSERT(heap.size() <= k);
  const auto before = [](const Neighbour& a, const Neighbour& b) { return neighbourBefore(a, b); };
  if (heap.size() < k) {
    heap.push_back(candidate);
    std::push_heap(heap.begin(), heap.end(), before);
    return true;
  }
  if (!before(candidate, heap.front())) return false;
  std::pop_heap(heap.begin(), heap.end(), before);
  heap.back() = candidate;
  std::push_heap(heap.begin(), heap.end(), before);
  return true;
}

}  // namespace bp
