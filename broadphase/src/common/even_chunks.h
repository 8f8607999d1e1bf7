// How SweepGrid and BroadPhase cut a list into parallel tasks (a batch
// move's entries, the relinks to plan, the pending moves, the pairs).
#pragma once

#include <broadphase/jobs/scheduler.h>
#include "common/assert.h"

#include <algorithm>
#include <cstdint>

namespace bp {

struct EvenChunks {
  uint32_t count;  // 0 for an empty list
  uint32_t size;   // items a chunk; the last may hold fewer
};

// Chunks of equal size and at most maxSize items, as many as a multiple of
// the thread count so that the threads end together (a last chunk much
// smaller than the others left one thread idle at the end: the 10^4 moves of
// `static` 10^5 were 8192 + 1808), but none below minSize items unless the
// list is that short.
inline EvenChunks evenChunks(uint32_t n, uint32_t maxSize, uint32_t minSize, uint32_t threads) {
  if (n == 0) return {0, 0};
  uint32_t count = (n + maxSize - 1) / maxSize;
  if (threads > 1) count = (count + threads - 1) / threads * threads;
  count = std::min(count, std::max(1u, n / minSize));
  const EvenChunks split{count, (n + count - 1) / count};
  BP_ASSERT(split.count >= 1 && uint64_t(split.count) * split.size >= n);  // every item in a chunk
  return split;
}

// Calls body(c, begin, end) for every chunk c of `split` over a list of n
// items, the chunk holding items [begin, end), as the scheduler's tasks.
template <class Body>
void forEachChunk(Scheduler& scheduler, EvenChunks split, uint32_t n, Body&& body) {
  scheduler.forEach(0, split.count, 1, [&](uint32_t first, uint32_t last) {
    for (uint32_t c = first; c < last; ++c) {
      const uint32_t begin = std::min(n, c * split.size);
      body(c, begin, std::min(n, begin + split.size));
    }
  });
}

}  // namespace bp
