/// PairBudget: an upper bound on the pairs of one findPairs call, shared by
/// the tasks that find them, so that a frame with far more pairs than the
/// bound stops early instead of building them all: its time and memory
/// follow the bound and the proxy count, not the pairs that would exist.
///
/// Workers charge it in batches, never per pair: each keeps what it found
/// since its last charge at the tail of its own buffer and charges that
/// tail (settle()) once it holds batch() pairs, at the end of each task, and
/// before it hands pairs on (to a router, to a streaming consumer). With a
/// predicate, a charge first drops the pairs the predicate rejects,
/// compacting the tail in place, so that the count is the count of accepted
/// pairs and the buffers hold nothing else. Once the count passes the limit,
/// exceeded() turns true; every worker stops at its next check (each batch,
/// each task, and in a cell's sweep each entry), and the structure's
/// findPairs returns with an empty output and its worker buffers cleared.
///
/// The count only grows, and every charged pair is a pair of the frame, so
/// a count past the limit at any time means the frame has more than
/// limit() pairs: findPairs never stops a frame that has at most limit().
/// One budget serves one findPairs call. Internal to the library: BroadPhase
/// builds one per update() when BroadPhaseConfig::maxPairs is set.
#pragma once

#include <broadphase/function_ref.h>
#include <broadphase/jobs/cache_padded.h>
#include <broadphase/pair.h>
#include "pairs/pair_buffer.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace bp {

class PairBudget {
 public:
  /// Over the structure's pair indices (slots): true keeps the pair.
  /// Called from the worker threads, so it must be safe to call
  /// concurrently.
  using Predicate = FunctionRef<bool(Pair)>;

  /// A budget of `limit` pairs (> 0), every pair counted.
  explicit PairBudget(uint64_t limit);
  /// Only the pairs `accept` keeps are counted and kept. `accept` must
  /// outlive the findPairs call.
  PairBudget(uint64_t limit, Predicate accept);
  PairBudget(const PairBudget&) = delete;
  PairBudget& operator=(const PairBudget&) = delete;

  uint64_t limit() const { return state_.limit; }
  /// How many pairs a worker gathers between two charges.
  size_t batch() const { return state_.batch; }
  bool filters() const { return state_.accept.has_value(); }
  /// True once the pairs charged passed the limit (the stop flag the tasks read).
  bool exceeded() const { return state_.stop.load(std::memory_order_relaxed); }
  /// The pairs charged so far: once the tasks ended, and when not exceeded,
  /// the frame's (accepted) pairs.
  uint64_t count() const { return count_.value.load(std::memory_order_relaxed); }

  /// Charges the pairs [first, last): keeps those the predicate accepts at
  /// the front, in order, adds their number to the count, and returns it.
  /// Sets the stop flag when the count passes the limit.
  size_t charge(Pair* first, Pair* last);
  /// Charges what `buffer` gained since its charged() mark, compacted as
  /// charge() does, and moves the mark to its end. Returns false, with the
  /// buffer cleared, once the budget is exceeded (by this charge or an
  /// earlier one of any worker).
  bool settle(PairBuffer& buffer);

 private:
  // Read at every check by every worker: the settings and the stop flag,
  // which is written once. On a line pair of their own, apart from the count
  // that every charge writes.
  struct alignas(kFalseSharingRange) State {
    uint64_t limit;
    size_t batch;
    std::optional<Predicate> accept;
    std::atomic<bool> stop{false};
  };
  State state_;
  CachePadded<std::atomic<uint64_t>> count_;
};

// Workers charge the count side by side while they read the stop flag at
// every check: the two sit on different 128-byte line pairs.
static_assert(sizeof(PairBudget) == 2 * kFalseSharingRange);
static_assert(alignof(PairBudget) == kFalseSharingRange);

}  // namespace bp
