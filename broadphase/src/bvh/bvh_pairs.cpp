// findPairs: a simultaneous traversal of the dynamic tree against itself and
// against the static tree.
//
// Self(n) yields the pairs inside node n: Self of each child plus Cross of the
// two children when their boxes overlap. Cross(a, b) descends both sides at
// once, testing the 2 x 2 child boxes that sit in the two nodes' cache lines.
// Every unordered pair of leaves has one lowest common ancestor, so each pair
// is produced exactly once, with no dedup. Static leaves only ever appear in
// Cross(dynamic, static), so static-static pairs never arise.
//
// Tight mode walks 4-wide copies of the trees instead (WideWalk, below): the
// same recursion with one box tested against four per vector compare, over
// a third as many nodes. Keeping the dynamic copy current costs the refit a
// second write of every box, so findPairs only uses it while the pair count
// says the walk is the bigger cost.
//
// Parallelism: the first levels of this recursion are unrolled serially into
// a list of independent tasks (a fixed number, not per thread), which workers
// take through Scheduler::forEach with per-worker output buffers. The sorted
// result is then identical for any thread count because keys are unique.
//
// A PairBudget (pairs/pair_budget.h) bounds a frame: each worker charges
// what its buffer gained every batch() pairs (the same compare that streams
// chunks, so a walk without a budget pays nothing for it) and at the end of
// its tasks; once the budget is exceeded, the task's stack is emptied and
// the worker's remaining tasks are skipped.
#include "bvh/bvh.h"
#include "bvh/bvh_stack.h"

#include <algorithm>
#include <cstdint>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

namespace bp {

namespace {

// overlaps() for two boxes that sit inside nodes, three axes in one compare.
// Each 16-byte load reads one float past the corner, which is still inside
// the node (the next box or the child indices); that lane is masked off.
inline bool slotsOverlap(const Aabb& a, const Aabb& b) {
#if defined(__SSE2__)
  const __m128 aMin = _mm_loadu_ps(a.min.data()), aMax = _mm_loadu_ps(a.max.data());
  const __m128 bMin = _mm_loadu_ps(b.min.data()), bMax = _mm_loadu_ps(b.max.data());
  const __m128 ok = _mm_and_ps(_mm_cmple_ps(aMin, bMax), _mm_cmple_ps(bMin, aMax));
  return (_mm_movemask_ps(ok) & 7) == 7;
#else
  return overlaps(a, b);
#endif
}

// overlaps() for any two boxes (exact boxes may end their array): max is
// loaded from one float earlier and shuffled down, so no load leaves the box.
inline bool boxesOverlap(const Aabb& a, const Aabb& b) {
#if defined(__SSE2__)
  const __m128 aMin = _mm_loadu_ps(a.min.data()), bMin = _mm_loadu_ps(b.min.data());
  const __m128 aHi = _mm_loadu_ps(a.min.data() + 2), bHi = _mm_loadu_ps(b.min.data() + 2);
  const __m128 aMax = _mm_shuffle_ps(aHi, aHi, _MM_SHUFFLE(3, 3, 2, 1));
  const __m128 bMax = _mm_shuffle_ps(bHi, bHi, _MM_SHUFFLE(3, 3, 2, 1));
  const __m128 ok = _mm_and_ps(_mm_cmple_ps(aMin, bMax), _mm_cmple_ps(bMin, aMax));
  return (_mm_movemask_ps(ok) & 7) == 7;
#else
  return overlaps(a, b);
#endif
}

constexpr size_t kPairTasks = 256;
constexpr size_t kStreamChunk = 4096;
// Pairs per dynamic leaf above which findPairs switches to the wide walk, and
// below which it switches back.
constexpr double kWideEnter = 0.25;
constexpr double kWideLeave = 0.15;

// A task's output: the worker's buffer, plus what is done with it as it
// grows (streamed in chunks, charged to a budget). emit() appends and makes
// one compare, against settleAt, which is past any size when there is
// nothing to do; settle() does what is due.
struct PairSink {
  std::vector<Pair>* buffer;
  FunctionRef<void(std::span<const Pair>)>* consume;
  PairBudget* budget;
  BvhStack<PairTask>* stack = nullptr;  // the running task's walk, cut short on a stop
  size_t charged = 0;                   // buffer[0, charged) is paid for with the budget
  size_t settleAt = 0;                  // emit() calls settle() at this many pairs

  // At the start of a run of tasks on a worker: the buffer holds only pairs
  // charged by the last run (each run settles its tail at the end).
  PairSink(std::vector<Pair>& b, FunctionRef<void(std::span<const Pair>)>* c, PairBudget* pb)
      : buffer(&b), consume(c), budget(pb), charged(b.size()) {
    plan();
  }

  void emit(uint32_t p, uint32_t q) {
    buffer->push_back(makePair(p, q));
    if (buffer->size() >= settleAt) [[unlikely]]
      settle(false);
  }
  // Charges the tail to the budget (a stop clears the buffer and the walk),
  // hands a full chunk, or with `last` any rest, to the consumer.
  void settle(bool last) {
    if (budget) {
      if (!budget->exceeded()) {
        const size_t kept =
            budget->charge(buffer->data() + charged, buffer->data() + buffer->size());
        buffer->resize(charged + kept);
        charged += kept;
      }
      if (budget->exceeded()) {
        buffer->clear();
        charged = 0;
        if (stack) stack->clear();
        settleAt = 0;  // whatever the current step still emits comes back here
        return;
      }
    }
    if (consume && !buffer->empty() && (last || buffer->size() >= kStreamChunk)) {
      (*consume)(std::span<const Pair>(*buffer));
      buffer->clear();
      charged = 0;
    }
    plan();
  }
  void plan() {
    settleAt = consume ? kStreamChunk : SIZE_MAX;
    if (budget) settleAt = std::min(settleAt, charged + budget->batch());
  }
};

struct PairWalk {
  const BvhNode* dynamicNodes;
  const BvhNode* staticNodes;
  const Aabb* exact;
  bool exactSlots;  // leaf slots hold exact boxes (Bvh::tight_): no second test

  // One step of the recursion: children of `t` go to `push`, leaf pairs to `sink`.
  template <class Push>
  void step(const PairTask& t, Push&& push, PairSink* sink) const {
    if (t.kind == PairKind::self) {
      // Pushed so that the slot-0 subtree pops first: it starts at the next
      // node in memory (preorder), so the walk streams forward.
      const BvhNode& n = dynamicNodes[t.a];
      if (slotsOverlap(n.bounds[0], n.bounds[1]))
        push({n.child[0], n.child[1], PairKind::crossDynamic});
      if (!isBvhLeaf(n.child[1])) push({n.child[1], 0, PairKind::self});
      if (!isBvhLeaf(n.child[0])) push({n.child[0], 0, PairKind::self});
      return;
    }
    const BvhNode* bNodes = t.kind == PairKind::crossStatic ? staticNodes : dynamicNodes;
    const bool aLeaf = isBvhLeaf(t.a), bLeaf = isBvhLeaf(t.b);
    if (aLeaf && bLeaf) {
      const uint32_t p = bvhLeafProxy(t.a), q = bvhLeafProxy(t.b);
      if (sink && boxesOverlap(exact[p], exact[q])) sink->emit(p, q);
      if (!sink) push(t);
      return;
    }
    if (aLeaf || bLeaf) {
      // Leaf against subtree: prune with the leaf's exact box.
      const uint32_t leaf = aLeaf ? t.a : t.b;
      const Aabb& box = exact[bvhLeafProxy(leaf)];
      const BvhNode& n = aLeaf ? bNodes[t.b] : dynamicNodes[t.a];
      unsigned mask =
          unsigned(boxesOverlap(box, n.bounds[0])) | unsigned(boxesOverlap(box, n.bounds[1])) << 1;
      while (mask) {
        const int s = __builtin_ctz(mask);
        mask &= mask - 1;
        const uint32_t c = n.child[s];
        if (sink && isBvhLeaf(c)) {
          if (exactSlots || boxesOverlap(box, exact[bvhLeafProxy(c)]))
            sink->emit(bvhLeafProxy(leaf), bvhLeafProxy(c));
        } else {
          push(aLeaf ? PairTask{t.a, c, t.kind} : PairTask{c, t.b, t.kind});
        }
      }
      return;
    }
    const BvhNode& na = dynamicNodes[t.a];
    const BvhNode& nb = bNodes[t.b];
    // The four tests first, then a loop over the hits: one loop exit to
    // predict instead of four coin-flip branches.
    unsigned mask = unsigned(slotsOverlap(na.bounds[0], nb.bounds[0])) |
                    unsigned(slotsOverlap(na.bounds[0], nb.bounds[1])) << 1 |
                    unsigned(slotsOverlap(na.bounds[1], nb.bounds[0])) << 2 |
                    unsigned(slotsOverlap(na.bounds[1], nb.bounds[1])) << 3;
    while (mask) {
      const int bit = __builtin_ctz(mask);
      mask &= mask - 1;
      const uint32_t ca = na.child[bit >> 1], cb = nb.child[bit & 1];
      if (sink && isBvhLeaf(ca) && isBvhLeaf(cb)) {
        const uint32_t p = bvhLeafProxy(ca), q = bvhLeafProxy(cb);
        if (exactSlots || boxesOverlap(exact[p], exact[q])) sink->emit(p, q);
      } else {
        push({ca, cb, t.kind});
      }
    }
  }
};

// The same recursion over the 4-wide copies of the trees (tight mode only:
// a slot test between two leaves is then the exact test). One box against
// a wide node's four is one vector test, and a wide node covers two binary
// levels, so the walk meets far fewer nodes and branches.
struct WideWalk {
  const BvhWideNode* dynamicNodes;
  const BvhWideNode* staticNodes;
  const Aabb* exact;

  // Bit k set when slot k of w overlaps [lo, hi] (closed intervals).
  static unsigned overlapMask(const BvhWideNode& w, const float* lo, const float* hi) {
#if defined(__SSE2__)
    const __m128 x = _mm_and_ps(_mm_cmple_ps(_mm_load_ps(w.minX), _mm_set1_ps(hi[0])),
                                _mm_cmple_ps(_mm_set1_ps(lo[0]), _mm_load_ps(w.maxX)));
    const __m128 y = _mm_and_ps(_mm_cmple_ps(_mm_load_ps(w.minY), _mm_set1_ps(hi[1])),
                                _mm_cmple_ps(_mm_set1_ps(lo[1]), _mm_load_ps(w.maxY)));
    const __m128 z = _mm_and_ps(_mm_cmple_ps(_mm_load_ps(w.minZ), _mm_set1_ps(hi[2])),
                                _mm_cmple_ps(_mm_set1_ps(lo[2]), _mm_load_ps(w.maxZ)));
    return unsigned(_mm_movemask_ps(_mm_and_ps(x, _mm_and_ps(y, z))));
#else
    unsigned mask = 0;
    for (int k = 0; k < 4; ++k)
      mask |= unsigned(int(w.minX[k] <= hi[0]) & int(lo[0] <= w.maxX[k]) & int(w.minY[k] <= hi[1]) &
                       int(lo[1] <= w.maxY[k]) & int(w.minZ[k] <= hi[2]) & int(lo[2] <= w.maxZ[k]))
              << k;
    return mask;
#endif
  }
  static unsigned slotMask(const BvhWideNode& of, int k, const BvhWideNode& against) {
    const float lo[3] = {of.minX[k], of.minY[k], of.minZ[k]};
    const float hi[3] = {of.maxX[k], of.maxY[k], of.maxZ[k]};
    return overlapMask(against, lo, hi);
  }

  template <class Push>
  void step(const PairTask& t, Push&& push, PairSink* sink) const {
    if (t.kind == PairKind::self) {
      const BvhWideNode& w = dynamicNodes[t.a];
      // Pairs between the slots, then each slot's own subtree.
      // Bit 4i + j: slot i overlaps slot j > i. All tests first, then one
      // loop over the hits (empty slots never overlap).
      unsigned mask = (slotMask(w, 0, w) & 0xEu) | (slotMask(w, 1, w) & 0xCu) << 4 |
                      (slotMask(w, 2, w) & 0x8u) << 8;
      while (mask) {
        const int bit = __builtin_ctz(mask);
        mask &= mask - 1;
        const uint32_t ci = w.child[bit >> 2], cj = w.child[bit & 3];
        if (sink && isBvhLeaf(ci) && isBvhLeaf(cj))
          sink->emit(bvhLeafProxy(ci), bvhLeafProxy(cj));
        else
          push({ci, cj, PairKind::crossDynamic});
      }
      for (int k = 4; k-- > 0;)
        if (!isBvhLeaf(w.child[k])) push({w.child[k], 0, PairKind::self});
      return;
    }
    const BvhWideNode* bNodes = t.kind == PairKind::crossStatic ? staticNodes : dynamicNodes;
    const bool aLeaf = isBvhLeaf(t.a), bLeaf = isBvhLeaf(t.b);
    if (aLeaf && bLeaf) {  // only from the serial unrolling
      const uint32_t p = bvhLeafProxy(t.a), q = bvhLeafProxy(t.b);
      if (sink && boxesOverlap(exact[p], exact[q])) sink->emit(p, q);
      if (!sink) push(t);
      return;
    }
    if (aLeaf || bLeaf) {
      const uint32_t leaf = aLeaf ? t.a : t.b;
      const Aabb& box = exact[bvhLeafProxy(leaf)];
      const BvhWideNode& w = aLeaf ? bNodes[t.b] : dynamicNodes[t.a];
      unsigned mask = overlapMask(w, box.min.data(), box.max.data());
      while (mask) {
        const int k = __builtin_ctz(mask);
        mask &= mask - 1;
        const uint32_t c = w.child[k];
        if (sink && isBvhLeaf(c))
          sink->emit(bvhLeafProxy(leaf), bvhLeafProxy(c));
        else
          push(aLeaf ? PairTask{t.a, c, t.kind} : PairTask{c, t.b, t.kind});
      }
      return;
    }
    const BvhWideNode& wa = dynamicNodes[t.a];
    const BvhWideNode& wb = bNodes[t.b];
    // Bit 4i + j: slot i of a overlaps slot j of b. All sixteen tests first,
    // then one loop over the hits (empty slots never overlap).
    unsigned mask = slotMask(wa, 0, wb) | slotMask(wa, 1, wb) << 4 | slotMask(wa, 2, wb) << 8 |
                    slotMask(wa, 3, wb) << 12;
    while (mask) {
      const int bit = __builtin_ctz(mask);
      mask &= mask - 1;
      const uint32_t ca = wa.child[bit >> 2], cb = wb.child[bit & 3];
      if (sink && isBvhLeaf(ca) && isBvhLeaf(cb))
        sink->emit(bvhLeafProxy(ca), bvhLeafProxy(cb));
      else
        push({ca, cb, t.kind});
    }
  }
};

// Runs one task of a walk (PairWalk or WideWalk) to the end with an explicit
// stack, leaf pairs to `sink`.
template <class Walk>
void runTask(const Walk& walk, const PairTask& task, BvhStack<PairTask>& stack, PairSink& sink) {
  stack.clear();
  stack.push(task);
  while (!stack.empty()) {
    const PairTask t = stack.pop();
    walk.step(
        t,
        [&](const PairTask& c) {
          // The pushed nodes are popped soon (LIFO): start loading them now.
          if (!isBvhLeaf(c.a)) __builtin_prefetch(&walk.dynamicNodes[c.a]);
          if (c.kind != PairKind::self && !isBvhLeaf(c.b))
            __builtin_prefetch(c.kind == PairKind::crossStatic ? &walk.staticNodes[c.b]
                                                               : &walk.dynamicNodes[c.b]);
          stack.push(c);
        },
        &sink);
  }
}

// Unrolls the top of a walk's recursion into `tasks` until there are enough
// to share among workers, then runs them with per-worker buffers.
// With a budget, a worker skips its tasks once it is exceeded.
template <class Walk>
void runPairWalk(const Walk& walk, Scheduler& scheduler, std::vector<PairTask>& tasks,
                 std::vector<PairTask>& next, PerWorker<std::vector<Pair>>& buffers,
                 FunctionRef<void(std::span<const Pair>)>* consume, PairBudget* budget) {
  while (!tasks.empty() && tasks.size() < kPairTasks) {
    next.clear();
    for (const PairTask& t : tasks)
      walk.step(
          t, [&](const PairTask& c) { next.push_back(c); }, nullptr);
    const bool grew = next.size() > tasks.size();
    tasks.swap(next);
    if (!grew) break;
  }
  scheduler.forEach(0, static_cast<uint32_t>(tasks.size()), 1, [&](uint32_t begin, uint32_t end) {
    PairSink sink(buffers.local(), consume, budget);
    BvhStack<PairTask> stack;
    sink.stack = &stack;
    for (uint32_t k = begin; k < end; ++k) {
      if (budget && budget->exceeded()) break;
      runTask(walk, tasks[k], stack, sink);
    }
    sink.settle(true);
  });
}

}  // namespace

void Bvh::collectPairs(Scheduler& scheduler, std::vector<Pair>* sorted,
                       FunctionRef<void(std::span<const Pair>)>* consume, PairBudget* budget) {
  update(scheduler);
  if (pairBuffers_.size() != scheduler.threadCount()) pairBuffers_.resize(scheduler.threadCount());
  pairBuffers_.forEachSlot([](std::vector<Pair>& b) { b.clear(); });

  std::vector<PairTask>& tasks = scratchTasks_;
  tasks.clear();
  // Moving leaves: what the pair count is judged against below.
  uint32_t movingLeaves = trees_[0].leafCount;
  if (plainLayers()) {
    // The wide walk needs the wide copies; the dynamic one is kept up by the
    // ordered refit only (any other update would mean a collapse per frame).
    const bool wide = tight_ && wideWalk_ && trees_[0].ordered;
    if (trees_[0].root != kNullIndex) {
      const uint32_t dynamicRoot = wide ? 0 : trees_[0].root;
      const uint32_t staticRoot = wide ? 0 : trees_[1].root;
      tasks.push_back({dynamicRoot, 0, PairKind::self});
      if (trees_[1].root != kNullIndex)
        tasks.push_back({dynamicRoot, staticRoot, PairKind::crossStatic});
    }
    if (wide) {
      for (BvhTree* tree : {&trees_[0], &trees_[1]})
        if (!tree->wideValid) collapseWide(*tree);
      const WideWalk walk{trees_[0].wide.data(), trees_[1].wide.data(), exact_.data()};
      runPairWalk(walk, scheduler, tasks, scratchTasksNext_, pairBuffers_, consume, budget);
    } else {
      const PairWalk walk{trees_[0].nodes.data(), trees_[1].nodes.data(), exact_.data(), tight_};
      runPairWalk(walk, scheduler, tasks, scratchTasksNext_, pairBuffers_, consume, budget);
    }
  } else {
    // One walk per pair of trees the layer table lets collide: a moving
    // tree against itself, or against another tree (as the dynamic tree
    // against the static one). Trees of layers that never collide are
    // never walked against each other.
    movingLeaves = 0;
    for (size_t g = 0; g < trees_.size(); g += 2) movingLeaves += trees_[g].leafCount;
    listLayerWalks(layerWalks_);
    for (const auto& [a, b] : layerWalks_) {
      if (budget && budget->exceeded()) break;
      BvhTree& ta = trees_[a];
      BvhTree& tb = trees_[b];
      if (ta.root == kNullIndex || tb.root == kNullIndex) continue;
      const bool wide = tight_ && wideWalk_ && ta.ordered && (b % 2 == 1 || tb.ordered);
      tasks.clear();
      if (a == b)
        tasks.push_back({wide ? 0 : ta.root, 0, PairKind::self});
      else
        tasks.push_back({wide ? 0 : ta.root, wide ? 0 : tb.root, PairKind::crossStatic});
      if (wide) {
        for (BvhTree* tree : {&ta, &tb})
          if (!tree->wideValid) collapseWide(*tree);
        const WideWalk walk{ta.wide.data(), tb.wide.data(), exact_.data()};
        runPairWalk(walk, scheduler, tasks, scratchTasksNext_, pairBuffers_, consume, budget);
      } else {
        const PairWalk walk{ta.nodes.data(), tb.nodes.data(), exact_.data(), tight_};
        runPairWalk(walk, scheduler, tasks, scratchTasksNext_, pairBuffers_, consume, budget);
      }
    }
  }
  if (budget && budget->exceeded()) {
    // The frame has more pairs than the budget: none are kept, and the
    // walk's mode stays as it was (no count to judge it by).
    pairBuffers_.forEachSlot([](std::vector<Pair>& b) { b.clear(); });
    if (sorted) sorted->clear();
    return;
  }
  if (!sorted) return;

  sortPairs(scheduler, *sorted);
  // Keeping the dynamic wide copy costs a rewrite of every moved box in the
  // refit; it pays when the walk has work, which the pair count measures
  // (plane: 0.07 pairs per moving proxy, the wide walk lost; uniform: 0.5, it
  // won; docs/performance.md, "Figures from the code's history"). Hysteresis
  // keeps it from flipping every frame.
  const double perLeaf = double(sorted->size()) / double(std::max(movingLeaves, 1u));
  if (wideWalk_ && perLeaf < kWideLeave) {
    wideWalk_ = false;
    for (size_t g = 0; g < trees_.size(); g += 2)
      trees_[g].wideValid = false;  // stop the refit's copies
  } else if (!wideWalk_ && perLeaf > kWideEnter) {
    wideWalk_ = true;
  }
}

void Bvh::findPairs(Scheduler& scheduler, std::vector<Pair>& out, PairBudget* budget) {
  collectPairs(scheduler, &out, nullptr, budget);
}

void Bvh::findPairs(Scheduler& scheduler, FunctionRef<void(std::span<const Pair>)> consume,
                    PairBudget* budget) {
  collectPairs(scheduler, nullptr, &consume, budget);
}

}  // namespace bp
