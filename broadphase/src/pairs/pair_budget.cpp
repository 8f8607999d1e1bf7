// PairBudget (pair_budget.h).
#include "pairs/pair_budget.h"

#include <algorithm>

namespace bp {

namespace {

// A worker charges once it gathered limit / kBatchShare pairs, between
// kMinBatch and kMaxBatch: a charge is one atomic add on a line every worker
// writes, so a batch of a few hundred pairs makes it cost under a cycle a
// pair, while what a worker holds uncharged stays small next to the limit
// (and at most 128 KiB).
constexpr uint64_t kBatchShare = 16;
constexpr uint64_t kMinBatch = 256;
constexpr uint64_t kMaxBatch = 16384;

}  // namespace

PairBudget::PairBudget(uint64_t limit) {
  state_.limit = limit;
  state_.batch = size_t(std::clamp(limit / kBatchShare, kMinBatch, kMaxBatch));
}

PairBudget::PairBudget(uint64_t limit, Predicate accept) : PairBudget(limit) {
  state_.accept.emplace(accept);
}

size_t PairBudget::charge(Pair* first, Pair* last) {
  size_t kept = size_t(last - first);
  if (state_.accept) {
    const Predicate& accept = *state_.accept;
    Pair* out = first;
    for (Pair* p = first; p != last; ++p)
      if (accept(*p)) *out++ = *p;
    kept = size_t(out - first);
  }
  if (kept == 0) return 0;
  const uint64_t total = count_.value.fetch_add(kept, std::memory_order_relaxed) + kept;
  if (total > state_.limit) state_.stop.store(true, std::memory_order_relaxed);
  return kept;
}

bool PairBudget::settle(PairBuffer& buffer) {
  if (!exceeded()) {
    Pair* const data = buffer.pairs().data();
    const size_t from = buffer.charged();
    const size_t kept = charge(data + from, data + buffer.size());
    buffer.setEnd(data + from + kept);
    buffer.setCharged(from + kept);
  }
  if (!exceeded()) return true;
  buffer.clear();
  return false;
}

}  // namespace bp
