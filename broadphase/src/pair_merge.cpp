// The radix merges of pair_merge.h.
#include "pair_merge.h"

#include <algorithm>

namespace bp {

namespace {

// The fewest LSD passes of at most 12-bit digits (4096 counters: they stay in
// L1) over a key of `bits` bits, with the bits spread evenly: 34-bit keys
// (N = 10^5) take 3 passes of 12 bits rather than 4 of 11.
struct RadixPlan {
  uint32_t digitBits;
  uint32_t passes;
};
RadixPlan planRadix(uint32_t bits) {
  const uint32_t passes = std::max(1u, (bits + 11) / 12);
  return {(bits + passes - 1) / passes, passes};
}

}  // namespace

// Concatenates the workers' buffers into `out` sorted by (a, b): an LSD radix
// sort on the compact key (a << idBits) | b, which orders like Pair::key()
// because b < 2^idBits. Digits of at most 12 bits (planRadix); all digit histograms come from one
// read of the buffers, and the first scatter reads the buffers directly, so the pairs cross memory
// once per digit. Deterministic: the key of a pair is unique.
void mergePairs(std::span<const std::span<const Pair>> buffers, std::vector<Pair>& out,
                std::vector<Pair>& scratch, uint32_t capacity) {
  size_t n = 0;
  for (const std::span<const Pair>& b : buffers) n += b.size();
  out.resize(n);
  if (n < 1024) {
    size_t at = 0;
    for (const std::span<const Pair>& b : buffers) {
      std::copy(b.begin(), b.end(), out.begin() + ptrdiff_t(at));
      at += b.size();
    }
    std::sort(out.begin(), out.end());
    return;
  }
  uint32_t idBits = 1;
  while (idBits < 32 && (uint64_t(1) << idBits) < capacity) ++idBits;
  const RadixPlan plan = planRadix(2 * idBits);
  const uint32_t kDigitBits = plan.digitBits;
  const uint32_t kBuckets = 1u << kDigitBits;
  const uint32_t passes = plan.passes;
  auto keyOf = [idBits](const Pair& p) { return (uint64_t(p.a) << idBits) | p.b; };

  thread_local std::vector<uint32_t> count;  // kept across frames: no allocation
  count.assign(size_t(passes) * kBuckets, 0);
  for (const std::span<const Pair>& b : buffers)
    for (const Pair& p : b) {
      const uint64_t k = keyOf(p);
      for (uint32_t d = 0; d < passes; ++d)
        ++count[d * kBuckets + (uint32_t(k >> (d * kDigitBits)) & (kBuckets - 1))];
    }
  for (uint32_t d = 0; d < passes; ++d) {
    uint32_t sum = 0;
    for (uint32_t b = 0; b < kBuckets; ++b) {
      const uint32_t c = count[d * kBuckets + b];
      count[d * kBuckets + b] = sum;
      sum += c;
    }
  }
  // Destinations alternate so that the last pass writes into `out`.
  scratch.resize(n);
  Pair* dst = passes % 2 == 1 ? out.data() : scratch.data();
  Pair* other = passes % 2 == 1 ? scratch.data() : out.data();
  uint32_t* offset = count.data();
  for (const std::span<const Pair>& b : buffers)
    for (const Pair& p : b) dst[offset[uint32_t(keyOf(p)) & (kBuckets - 1)]++] = p;
  for (uint32_t d = 1; d < passes; ++d) {
    std::swap(dst, other);  // `other` now holds the last pass's output
    offset = count.data() + size_t(d) * kBuckets;
    const uint32_t shift = d * kDigitBits;
    for (size_t i = 0; i < n; ++i) {
      const Pair& p = other[i];
      dst[offset[uint32_t(keyOf(p) >> shift) & (kBuckets - 1)]++] = p;
    }
  }
}

// The parallel form of mergeSorted for several threads and many pairs: the
// buffers are concatenated in parallel, then each radix pass counts and
// scatters equal chunks in parallel (per-chunk histograms, offsets by digit
// then chunk: a stable pass, so the result is the same unique sorted list).
void mergePairsParallel(Scheduler& scheduler, std::span<const std::span<const Pair>> buffers,
                        std::vector<Pair>& out, std::vector<Pair>& scratch, uint32_t capacity) {
  const int workers = int(buffers.size());
  // Kept across frames (no allocation). Bound to a reference on this thread:
  // the tasks below run on other threads, where the thread_local name would
  // mean their own, empty, instance.
  thread_local std::vector<size_t> startScratch;
  std::vector<size_t>& start = startScratch;
  start.assign(size_t(workers) + 1, 0);
  for (int w = 0; w < workers; ++w)
    start[size_t(w) + 1] = start[size_t(w)] + buffers[size_t(w)].size();
  const size_t n = start.back();
  out.resize(n);
  scratch.resize(n);
  scheduler.forEach(0, uint32_t(workers), 1, [&](uint32_t begin, uint32_t end) {
    for (uint32_t w = begin; w < end; ++w)
      std::copy(buffers[size_t(w)].begin(), buffers[size_t(w)].end(),
                out.begin() + ptrdiff_t(start[w]));
  });
  uint32_t idBits = 1;
  while (idBits < 32 && (uint64_t(1) << idBits) < capacity) ++idBits;
  const RadixPlan plan = planRadix(2 * idBits);
  const uint32_t kDigitBits = plan.digitBits;
  const uint32_t kBuckets = 1u << kDigitBits;
  const uint32_t passes = plan.passes;
  const uint32_t chunks =
      uint32_t(std::min<size_t>(size_t(scheduler.threadCount()) * 2, n / 4096 + 1));
  const size_t chunkSize = (n + chunks - 1) / chunks;
  thread_local std::vector<uint32_t> countScratch;
  std::vector<uint32_t>& count = countScratch;  // see startScratch
  count.assign(size_t(chunks) * kBuckets, 0);
  Pair* src = out.data();
  Pair* dst = scratch.data();
  for (uint32_t d = 0; d < passes; ++d) {
    const uint32_t shift = d * kDigitBits;
    auto digit = [&](const Pair& p) {
      return uint32_t(((uint64_t(p.a) << idBits) | p.b) >> shift) & (kBuckets - 1);
    };
    scheduler.forEach(0, chunks, 1, [&](uint32_t begin, uint32_t end) {
      for (uint32_t c = begin; c < end; ++c) {
        uint32_t* h = count.data() + size_t(c) * kBuckets;
        std::fill(h, h + kBuckets, 0u);
        const size_t lo = c * chunkSize, hi = std::min(n, lo + chunkSize);
        for (size_t i = lo; i < hi; ++i) ++h[digit(src[i])];
      }
    });
    uint32_t sum = 0;
    for (uint32_t b = 0; b < kBuckets; ++b)
      for (uint32_t c = 0; c < chunks; ++c) {
        uint32_t& h = count[size_t(c) * kBuckets + b];
        const uint32_t v = h;
        h = sum;
        sum += v;
      }
    scheduler.forEach(0, chunks, 1, [&](uint32_t begin, uint32_t end) {
      for (uint32_t c = begin; c < end; ++c) {
        uint32_t* h = count.data() + size_t(c) * kBuckets;
        const size_t lo = c * chunkSize, hi = std::min(n, lo + chunkSize);
        for (size_t i = lo; i < hi; ++i) dst[h[digit(src[i])]++] = src[i];
      }
    });
    std::swap(src, dst);
  }
  if (src != out.data()) out.swap(scratch);
}

}  // namespace bp
