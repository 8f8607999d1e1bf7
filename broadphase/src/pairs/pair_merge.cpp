// The radix merges of pair_merge.h.
#include "pairs/pair_merge.h"

#include "common/grow.h"

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

// LSD radix sort by the compact key (a << idBits) | b of the n pairs held in
// `pieces`. All digit histograms come from one read of the pieces, and the
// first pass scatters straight from them, so the pairs cross memory once per
// digit. Passes alternate between `x` (written first) and `y`: the sorted
// pairs end in x after an odd number of passes, in y after an even one. A
// piece may lie in y (not in x).
void radixSort(std::span<const std::span<const Pair>> pieces, size_t n, Pair* x, Pair* y,
               uint32_t idBits, const RadixPlan& plan) {
  // The plan in locals: the counter stores could alias the fields of a
  // reference (all uint32_t), and the compiler then reloads them at every
  // pair (measurably slower: docs/performance.md, "Figures from the code's
  // history").
  const uint32_t passes = plan.passes, digitBits = plan.digitBits;
  const uint32_t buckets = 1u << digitBits;
  thread_local std::vector<uint32_t> countScratch;  // per thread, kept: no allocation
  countScratch.assign(size_t(passes) * buckets, 0);
  uint32_t* const count = countScratch.data();
  auto keyOf = [idBits](const Pair& p) { return (uint64_t(p.a) << idBits) | p.b; };
  // The first three digits written out (10^5 proxies take three): a loop
  // over the digits here made the whole sort measurably slower
  // (docs/performance.md, "Figures from the code's history").
  const uint32_t mask = buckets - 1;
  for (const std::span<const Pair>& piece : pieces)
    for (const Pair& p : piece) {
      const uint64_t k = keyOf(p);
      ++count[uint32_t(k) & mask];
      if (passes > 1) ++count[buckets + (uint32_t(k >> digitBits) & mask)];
      if (passes > 2) ++count[2 * buckets + (uint32_t(k >> (2 * digitBits)) & mask)];
      for (uint32_t d = 3; d < passes; ++d)
        ++count[d * buckets + (uint32_t(k >> (d * digitBits)) & mask)];
    }
  for (uint32_t d = 0; d < passes; ++d) {
    uint32_t sum = 0;
    for (uint32_t k = 0; k < buckets; ++k) {
      const uint32_t c = count[d * buckets + k];
      count[d * buckets + k] = sum;
      sum += c;
    }
  }
  for (const std::span<const Pair>& piece : pieces)
    for (const Pair& p : piece) x[count[uint32_t(keyOf(p)) & mask]++] = p;
  Pair* src = x;
  Pair* dst = y;
  for (uint32_t d = 1; d < passes; ++d) {
    uint32_t* offset = count + size_t(d) * buckets;
    const uint32_t shift = d * digitBits;
    for (size_t i = 0; i < n; ++i) {
      const Pair& p = src[i];
      dst[offset[uint32_t(keyOf(p) >> shift) & mask]++] = p;
    }
    std::swap(src, dst);
  }
}

}  // namespace

uint32_t mergePartCount(size_t pairs, int threads) {
  const size_t t = size_t(std::max(threads, 1));
  const size_t wanted = std::max(t, pairs >> 15);
  return uint32_t(std::min<size_t>((wanted + t - 1) / t * t, 256));
}

uint32_t idBitsFor(uint32_t capacity) {
  uint32_t idBits = 1;
  while (idBits < 32 && (uint64_t(1) << idBits) < capacity) ++idBits;
  return idBits;
}

bool radixPassesOdd(uint32_t capacity) {
  return planRadix(2 * idBitsFor(capacity)).passes % 2 == 1;
}

void sortPairsInto(std::span<const std::span<const Pair>> pieces, size_t n, Pair* out,
                   Pair* scratch, uint32_t capacity) {
  const uint32_t idBits = idBitsFor(capacity);
  const RadixPlan plan = planRadix(2 * idBits);
  // The passes end in the array the first one writes when their count is odd.
  if (plan.passes % 2 == 1)
    radixSort(pieces, n, out, scratch, idBits, plan);
  else
    radixSort(pieces, n, scratch, out, idBits, plan);
}

void mergePairsFrom(std::span<Pair> buffer, std::vector<Pair>& out, std::vector<Pair>& scratch,
                    uint32_t capacity) {
  const size_t n = buffer.size();
  const std::span<const Pair> piece(buffer);
  const uint32_t idBits = idBitsFor(capacity);
  const RadixPlan plan = planRadix(2 * idBits);
  if (n < 1024 || plan.passes % 2 == 0) {
    mergePairs(std::span(&piece, 1), out, scratch, capacity);
    return;
  }
  resizeWithHeadroom(out, n);
  radixSort(std::span(&piece, 1), n, out.data(), buffer.data(), idBits, plan);
}

// Concatenates the workers' buffers into `out` sorted by (a, b): radixSort on
// the compact key (a << idBits) | b, which orders like Pair::key() because
// b < 2^idBits, in digits of at most 12 bits (planRadix). Deterministic: the
// key of a pair is unique.
void mergePairs(std::span<const std::span<const Pair>> buffers, std::vector<Pair>& out,
                std::vector<Pair>& scratch, uint32_t capacity) {
  size_t n = 0;
  for (const std::span<const Pair>& b : buffers) n += b.size();
  resizeWithHeadroom(out, n);
  if (n < 1024) {
    size_t at = 0;
    for (const std::span<const Pair>& b : buffers) {
      std::copy(b.begin(), b.end(), out.begin() + ptrdiff_t(at));
      at += b.size();
    }
    std::sort(out.begin(), out.end());
    return;
  }
  resizeWithHeadroom(scratch, n);
  sortPairsInto(buffers, n, out.data(), scratch.data(), capacity);
}

// The parallel form of mergePairs, for several threads and many pairs: a
// split of the key range, then a radix sort per part, each on one thread.
// (1) Each piece of the workers' buffers counts its pairs by the top 8 bits
// of `a`; the 256 bins are cut into parts of about equal pair count: one a
// thread at least, more when there are many pairs, so that a part fits in
// L2. (2) Each piece scatters its pairs to their parts (per piece and
// part offsets: stable, though any order would do, as keys are unique). (3) Each
// part is radix-sorted on its own, from its own stretch of memory, with no
// synchronisation between passes. Three parallel steps in all; the earlier
// form, a parallel LSD sort with a fork and join per histogram and per
// scatter (seven steps), gained nothing on two threads at 5*10^4 pairs.
void mergePairsParallel(Scheduler& scheduler, std::span<const std::span<const Pair>> buffers,
                        std::vector<Pair>& out, std::vector<Pair>& scratch, uint32_t capacity) {
  constexpr uint32_t kBins = 256;
  size_t n = 0;
  for (const std::span<const Pair>& b : buffers) n += b.size();
  // The buffers cut into pieces of at most a share of n (a worker that swept
  // the heavy cells of a pile holds most of the pairs).
  thread_local std::vector<std::span<const Pair>> pieceScratch;
  std::vector<std::span<const Pair>>& pieces = pieceScratch;
  pieces.clear();
  const size_t pieceSize = std::max<size_t>(4096, n / (2 * size_t(scheduler.threadCount())) + 1);
  for (const std::span<const Pair>& b : buffers)
    for (size_t at = 0; at < b.size(); at += pieceSize)
      pieces.push_back(b.subspan(at, std::min(pieceSize, b.size() - at)));
  const uint32_t workers = uint32_t(pieces.size());
  resizeWithHeadroom(out, n);
  resizeWithHeadroom(scratch, n);
  const uint32_t idBits = idBitsFor(capacity);
  const uint32_t binShift = idBits > 8 ? idBits - 8 : 0;
  const RadixPlan plan = planRadix(2 * idBits);
  // Kept across frames (no allocation). Bound to references on this thread:
  // the tasks below run on other threads, where the thread_local names would
  // mean their own, empty, instances.
  thread_local std::vector<uint32_t> binScratch;
  thread_local std::vector<size_t> offsetScratch;
  thread_local std::vector<uint32_t> partScratch;
  thread_local std::vector<size_t> sizeScratch;
  std::vector<uint32_t>& bins = binScratch;     // [piece][bin] counts
  std::vector<size_t>& offset = offsetScratch;  // [piece][part] write positions
  std::vector<uint32_t>& partOfBin = partScratch;
  std::vector<size_t>& partStart = sizeScratch;  // parts + 1
  bins.assign(size_t(workers) * kBins, 0);
  scheduler.forEach(0, workers, 1, [&](uint32_t begin, uint32_t end) {
    for (uint32_t w = begin; w < end; ++w) {
      uint32_t h[kBins] = {};  // local: see the scatter below
      for (const Pair& p : pieces[w]) ++h[p.a >> binShift];
      std::copy_n(h, kBins, bins.data() + size_t(w) * kBins);
    }
  });
  // Parts of about n / parts pairs each, in bin order (mergePartCount; faster
  // than the earlier form of this merge: docs/performance.md, "Figures from
  // the code's history").
  const uint32_t parts = mergePartCount(n, scheduler.threadCount());
  partOfBin.resize(kBins);
  partStart.assign(size_t(parts) + 1, 0);
  {
    size_t seen = 0;
    for (uint32_t bin = 0; bin < kBins; ++bin) {
      size_t inBin = 0;
      for (uint32_t w = 0; w < workers; ++w) inBin += bins[size_t(w) * kBins + bin];
      const uint32_t part = uint32_t(
          std::min<size_t>(parts - 1, (seen + inBin / 2) * parts / std::max<size_t>(n, 1)));
      partOfBin[bin] = part;
      partStart[part + 1] += inBin;
      seen += inBin;
    }
  }
  for (uint32_t part = 0; part < parts; ++part) partStart[part + 1] += partStart[part];
  // Piece w writes part p from the start of p plus what the pieces before w
  // put there: first each piece's count per part, then the running sums.
  offset.assign(size_t(workers) * parts, 0);
  for (uint32_t w = 0; w < workers; ++w)
    for (uint32_t bin = 0; bin < kBins; ++bin)
      offset[size_t(w) * parts + partOfBin[bin]] += bins[size_t(w) * kBins + bin];
  for (uint32_t part = 0; part < parts; ++part) {
    size_t at = partStart[part];
    for (uint32_t w = 0; w < workers; ++w) {
      const size_t count = offset[size_t(w) * parts + part];
      offset[size_t(w) * parts + part] = at;
      at += count;
    }
  }
  // The passes alternate between two arrays; the scatter writes the one
  // from which an even or odd number of passes ends in `out`.
  Pair* first = plan.passes % 2 == 0 ? out.data() : scratch.data();
  Pair* second = plan.passes % 2 == 0 ? scratch.data() : out.data();
  scheduler.forEach(0, workers, 1, [&](uint32_t begin, uint32_t end) {
    for (uint32_t w = begin; w < end; ++w) {
      // The write positions in a local copy: pieces scattered side by side
      // would otherwise bump counters on a shared cache line at every pair.
      size_t at[kBins];
      std::copy_n(offset.data() + size_t(w) * parts, parts, at);
      for (const Pair& p : pieces[w]) first[at[partOfBin[p.a >> binShift]]++] = p;
    }
  });
  scheduler.forEach(0, parts, 1, [&](uint32_t begin, uint32_t end) {
    for (uint32_t part = begin; part < end; ++part) {
      const size_t lo = partStart[part], size = partStart[part + 1] - lo;
      const std::span<const Pair> piece(first + lo, size);
      radixSort(std::span(&piece, 1), size, second + lo, first + lo, idBits, plan);
    }
  });
}

}  // namespace bp
