// sortPairs: the per-worker pair buffers into one list sorted by (a, b).
//
// A counting sort on `a` (indices are dense, < capacity) followed by a sort
// of each small bucket on `b`: linear, unlike a comparison sort of the whole
// list, which took half the frame on dense scenes. With one buffer (one
// thread) it is a two-pass LSD radix sort instead, see radixSortSerial(). Pair keys are unique, so
// the order in which workers scatter into a bucket does not matter: sorting
// the bucket gives the one canonical order for any thread count.
#include <broadphase/bvh.h>

#include <algorithm>
#include <atomic>

namespace bp {

namespace {

void sortBucket(Pair* begin, Pair* end) {
  if (end - begin <= 32) {
    for (Pair* i = begin + 1; i < end; ++i) {
      const Pair v = *i;
      Pair* j = i;
      for (; j > begin && v.b < (j - 1)->b; --j) *j = *(j - 1);
      *j = v;
    }
  } else {
    std::sort(begin, end, [](const Pair& x, const Pair& y) { return x.b < y.b; });
  }
}

}  // namespace

void Bvh::sortPairs(Scheduler& scheduler, std::vector<Pair>& out) {
  const int buffers = pairBuffers_.size();
  size_t total = 0;
  int used = 0;
  for (int w = 0; w < buffers; ++w) {
    total += pairBuffers_[w].size();
    used += pairBuffers_[w].empty() ? 0 : 1;
  }
  out.resize(total);
  if (total == 0) return;

  const uint32_t buckets = pool_.capacity();
  std::vector<uint32_t>& start = bucketStart_;
  start.assign(size_t(buckets) + 1, 0);
  // Serial when one buffer holds everything; atomics only when workers share.
  const bool parallel = used > 1 && scheduler.threadCount() > 1;
  if (!parallel) {
    radixSortSerial(out);
    return;
  }
  auto forEachBuffer = [&](auto&& body) {
    if (!parallel) {
      for (int w = 0; w < buffers; ++w) body(pairBuffers_[w]);
      return;
    }
    scheduler.forEach(0, uint32_t(buffers), 1, [&](uint32_t b, uint32_t e) {
      for (uint32_t w = b; w < e; ++w) body(pairBuffers_[int(w)]);
    });
  };

  forEachBuffer([&](const std::vector<Pair>& buffer) {
    if (parallel) {
      for (const Pair& p : buffer)
        std::atomic_ref<uint32_t>(start[p.a + 1]).fetch_add(1, std::memory_order_relaxed);
    } else {
      for (const Pair& p : buffer) ++start[p.a + 1];
    }
  });
  for (uint32_t a = 0; a < buckets; ++a) start[a + 1] += start[a];

  std::vector<uint32_t>& cursor = bucketCursor_;
  cursor.assign(start.begin(), start.end() - 1);
  Pair* dst = out.data();
  forEachBuffer([&](const std::vector<Pair>& buffer) {
    if (parallel) {
      for (const Pair& p : buffer)
        dst[std::atomic_ref<uint32_t>(cursor[p.a]).fetch_add(1, std::memory_order_relaxed)] = p;
    } else {
      for (const Pair& p : buffer) dst[cursor[p.a]++] = p;
    }
  });

  scheduler.forEach(0, buckets, 8192, [&](uint32_t begin, uint32_t end) {
    for (uint32_t a = begin; a < end; ++a)
      if (start[a + 1] - start[a] > 1) sortBucket(dst + start[a], dst + start[a + 1]);
  });
}

// Serial: two counting passes, LSD (by b, then stably by a), so no bucket is
// ever sorted by comparisons: a big box's bucket of thousands of pairs made
// the comparison sorts a sixth of findPairs on `sizes`. Both passes count in
// one read of the buffers. Expects bucketStart_ zeroed, capacity + 1 long.
void Bvh::radixSortSerial(std::vector<Pair>& out) {
  const uint32_t buckets = pool_.capacity();
  std::vector<uint32_t>& byA = bucketStart_;
  std::vector<uint32_t>& byB = bucketCursor_;
  byB.assign(size_t(buckets) + 1, 0);
  for (int w = 0; w < pairBuffers_.size(); ++w)
    for (const Pair& p : pairBuffers_[w]) {
      ++byA[p.a + 1];
      ++byB[p.b + 1];
    }
  for (uint32_t k = 0; k < buckets; ++k) {
    byA[k + 1] += byA[k];
    byB[k + 1] += byB[k];
  }
  std::vector<Pair>& tmp = scratchPairs_;
  tmp.resize(out.size());
  for (int w = 0; w < pairBuffers_.size(); ++w)
    for (const Pair& p : pairBuffers_[w]) tmp[byB[p.b]++] = p;
  for (const Pair& p : tmp) out[byA[p.a]++] = p;
}

}  // namespace bp
