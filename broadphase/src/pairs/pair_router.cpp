// PairRouter (pair_router.h).
#include "pairs/pair_router.h"

#include "common/grow.h"
#include "common/wide_available.h"
#include "pairs/pair_merge.h"
#include "pairs/pair_route_wide.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>

namespace bp {

void PairRouter::begin(int threads, uint32_t capacity) {
  if (workers_.size() != threads) workers_.resize(threads);
  if (threads != threads_) cutsFromPairs_ = false;  // the cuts were made for other parts
  threads_ = threads;
  capacity_ = capacity;
  const uint32_t idBits = idBitsFor(std::max(capacity, 1u));
  binShift_ = idBits > 8 ? idBits - 8 : 0;
  if (!cutsFromPairs_) guessCuts(uint32_t(std::clamp(threads, 1, int(kBins))), capacity);
  parts_ = uint32_t(cuts_.size()) + 1;
  if (parts_ > 2) {
    for (uint32_t bin = 0; bin < kBins; ++bin) {
      const uint64_t first = uint64_t(bin) << binShift_;
      partOfBin_[bin] =
          uint8_t(std::upper_bound(cuts_.begin(), cuts_.end(), first) - cuts_.begin());
    }
  }
  if (parts_ <= kWideParts) {
    firstA_[0] = 0;
    for (uint32_t q = 1; q < parts_; ++q) {
      if (parts_ == 2) {
        firstA_[q] = cuts_[0];
        continue;
      }
      uint32_t bin = 0;
      while (bin < kBins && partOfBin_[bin] < q) ++bin;
      // No bin in part q or after: empty, and no id reaches the start.
      firstA_[q] =
          bin < kBins ? uint32_t(uint64_t(bin) << binShift_) : std::numeric_limits<uint32_t>::max();
    }
  }
  workers_.forEachSlot([&](std::vector<PairBuffer>& w) {
    if (w.size() != parts_) w.resize(parts_);
    for (PairBuffer& b : w) b.clear();
  });
}

// No pairs seen yet: as if the two ids of a pair were independent and
// uniform below the capacity, so that a = min(i, j) falls below x * capacity
// with probability 1 - (1 - x)^2. Only this frame's time depends on it.
void PairRouter::guessCuts(uint32_t parts, uint32_t capacity) {
  cuts_.resize(parts - 1);
  for (uint32_t q = 1; q < parts; ++q) {
    const double share = double(q) / parts;
    cuts_[q - 1] = uint32_t((1.0 - std::sqrt(1.0 - share)) * capacity);
  }
}

void PairRouter::route(PairBuffer& buffer) {
  std::vector<PairBuffer>& out = workers_.local();
  const uint32_t parts = parts_, shift = binShift_;
  // In blocks, so that each part needs room for a block only (a dense cell
  // hands over 10^5 pairs at once; room for all of them in every part would
  // be parts times that).
  constexpr size_t kBlock = 512;
  const Pair* p = buffer.begin();
  const Pair* const end = buffer.end();
  if (wide_ && parts >= 2 && parts <= kWideParts) {
    Pair* at[kWideParts];
    while (p != end) {
      const size_t k = std::min<size_t>(size_t(end - p), kBlock);
      for (uint32_t q = 0; q < parts; ++q) at[q] = out[q].writable(k + 8);
      const Pair* const stop = p + k;
      p = wide::routePairs(p, stop, at, firstA_.data(), parts);
      for (; p != stop; ++p) {  // the last few, one by one
        uint32_t q = parts - 1;
        while (p->a < firstA_[q]) --q;
        *at[q]++ = *p;
      }
      for (uint32_t q = 0; q < parts; ++q) out[q].setEnd(at[q]);
    }
  } else if (parts == 2) {
    // Two threads: one compare a pair, both write positions in registers,
    // and the position picked by arithmetic (a branch on the part would be
    // mispredicted for about every other pair).
    const uint32_t cut = cuts_[0];
    while (p != end) {
      const size_t k = std::min<size_t>(size_t(end - p), kBlock);
      Pair* at0 = out[0].writable(k);
      Pair* at1 = out[1].writable(k);
      for (const Pair* const stop = p + k; p != stop; ++p) {
        const ptrdiff_t q = p->a >= cut;
        at0[(at1 - at0) & -q] = *p;
        at0 += 1 - q;
        at1 += q;
      }
      out[0].setEnd(at0);
      out[1].setEnd(at1);
    }
  } else if (parts > 2) {
    const uint8_t* partOf = partOfBin_.data();
    Pair* at[kBins];
    while (p != end) {
      const size_t k = std::min<size_t>(size_t(end - p), kBlock);
      for (uint32_t q = 0; q < parts; ++q) at[q] = out[q].writable(k);
      for (const Pair* const stop = p + k; p != stop; ++p) *at[partOf[p->a >> shift]]++ = *p;
      for (uint32_t q = 0; q < parts; ++q) out[q].setEnd(at[q]);
    }
  } else {
    const size_t k = buffer.size();
    std::copy_n(buffer.begin(), k, out[0].writable(k));
    out[0].advance(k);
  }
  buffer.clear();
}

void PairRouter::merge(Scheduler& scheduler, std::vector<Pair>& out, std::vector<Pair>& scratch) {
  const int workers = workers_.size();
  partStart_.assign(size_t(parts_) + 1, 0);
  for (uint32_t q = 0; q < parts_; ++q)
    for (int w = 0; w < workers; ++w) partStart_[q + 1] += workers_[w][q].size();
  for (uint32_t q = 0; q < parts_; ++q) partStart_[q + 1] += partStart_[q];
  const size_t n = partStart_[parts_];
  resizeWithHeadroom(out, n);
  resizeWithHeadroom(scratch, n);
  if (n < kParallelMergeFrom) {
    // Few pairs: one sort of them all (tasks would cost more than they save).
    thread_local std::vector<std::span<const Pair>> pieces;
    pieces.clear();
    for (int w = 0; w < workers; ++w)
      for (const PairBuffer& b : workers_[w])
        if (!b.empty()) pieces.push_back(b.pairs());
    mergePairs(pieces, out, scratch, capacity_);
  } else {
    // With an odd number of radix passes, a part's scratch array is the
    // running worker's own buffer of that part (grown to the part's size):
    // the first pass has read it by the time the second writes there, and
    // the sort then runs over two arrays of the part and the other worker's
    // piece, not three, and writes its scratch where this core wrote last
    // (as mergePairsFrom on one thread). The merge is faster for it on two
    // threads, whole frames within the noise (docs/decisions.md, "The pair
    // pipeline").
    const bool ownScratch = radixPassesOdd(capacity_);
    scheduler.forEach(0, parts_, 1, [&](uint32_t begin, uint32_t end) {
      // Per thread (this body runs on the workers), kept: no allocation.
      thread_local std::vector<std::span<const Pair>> pieces;
      for (uint32_t q = begin; q < end; ++q) {
        const size_t at = partStart_[q], count = partStart_[q + 1] - at;
        // Before the pieces are listed: growing may move this buffer.
        Pair* const y = ownScratch ? workers_.local()[q].storageFor(count) : scratch.data() + at;
        pieces.clear();
        for (int w = 0; w < workers; ++w)
          if (!workers_[w][q].empty()) pieces.push_back(workers_[w][q].pairs());
        sortPairsInto(pieces, count, out.data() + at, y, capacity_);
      }
    });
  }
  remember(out, threads_);
}

void PairRouter::discard() {
  workers_.forEachSlot([](std::vector<PairBuffer>& w) {
    for (PairBuffer& b : w) b.clear();
  });
}

// Next frame's parts: as many as this frame's count asks, cut where its
// pairs divide evenly.
void PairRouter::remember(std::span<const Pair> sorted, int threads) {
  const size_t n = sorted.size();
  lastPairs_ = n;
  if (n == 0) return;
  threads_ = threads;
  const uint32_t parts = mergePartCount(n, threads);
  cuts_.resize(parts - 1);
  for (uint32_t q = 1; q < parts; ++q) cuts_[q - 1] = sorted[n * q / parts].a;
  cutsFromPairs_ = true;
}

bool PairRouter::wideRouteAvailable() {
  static_assert(kWideParts == wide::kMaxRouteParts);
  return wide::available();
}

bool PairRouter::worthRouting(int threads) const {
  return lastPairs_ <= (size_t(std::max(threads, 1)) << 16);
}

size_t PairRouter::memoryBytes() const {
  size_t bytes = cuts_.capacity() * sizeof(uint32_t) + partStart_.capacity() * sizeof(size_t);
  for (int w = 0; w < workers_.size(); ++w)
    for (const PairBuffer& b : workers_[w]) bytes += b.memoryBytes();
  return bytes;
}

}  // namespace bp
