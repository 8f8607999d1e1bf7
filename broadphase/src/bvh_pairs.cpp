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
// Parallelism: the first levels of this recursion are unrolled serially into
// a list of independent tasks (a fixed number, not per thread), which workers
// take through Scheduler::forEach with per-worker output buffers. The sorted
// result is then identical for any thread count because keys are unique.
#include <broadphase/bvh.h>
#include <broadphase/bvh_stack.h>

#include <algorithm>

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

struct PairSink {
  std::vector<Pair>* buffer;
  FunctionRef<void(std::span<const Pair>)>* consume;

  void emit(uint32_t p, uint32_t q) {
    buffer->push_back(makePair(p, q));
    if (consume && buffer->size() >= kStreamChunk) flush();
  }
  void flush() {
    if (consume && !buffer->empty()) {
      (*consume)(std::span<const Pair>(*buffer));
      buffer->clear();
    }
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
      unsigned mask = unsigned(boxesOverlap(box, n.bounds[0])) |
                      unsigned(boxesOverlap(box, n.bounds[1])) << 1;
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

  void run(const PairTask& task, BvhStack<PairTask>& stack, PairSink& sink) const {
    stack.clear();
    stack.push(task);
    while (!stack.empty()) {
      const PairTask t = stack.pop();
      step(
          t,
          [&](const PairTask& c) {
            // The pushed nodes are popped soon (LIFO): start loading them now.
            if (!isBvhLeaf(c.a)) __builtin_prefetch(&dynamicNodes[c.a]);
            if (c.kind != PairKind::self && !isBvhLeaf(c.b))
              __builtin_prefetch(c.kind == PairKind::crossStatic ? &staticNodes[c.b]
                                                                 : &dynamicNodes[c.b]);
            stack.push(c);
          },
          &sink);
    }
  }
};

}  // namespace

void Bvh::collectPairs(Scheduler& scheduler, std::vector<Pair>* sorted,
                       FunctionRef<void(std::span<const Pair>)>* consume) {
  update(scheduler);
  if (pairBuffers_.size() != scheduler.threadCount()) pairBuffers_.resize(scheduler.threadCount());
  pairBuffers_.forEachSlot([](std::vector<Pair>& b) { b.clear(); });

  const PairWalk walk{dynamic_.nodes.data(), static_.nodes.data(), exact_.data(), tight_};
  std::vector<PairTask>& tasks = scratchTasks_;
  std::vector<PairTask>& next = scratchTasksNext_;
  tasks.clear();
  if (dynamic_.root != kNullIndex) {
    tasks.push_back({dynamic_.root, 0, PairKind::self});
    if (static_.root != kNullIndex)
      tasks.push_back({dynamic_.root, static_.root, PairKind::crossStatic});
  }
  // Unroll the top of the recursion until there are enough tasks to share.
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
    PairSink sink{&pairBuffers_.local(), consume};
    BvhStack<PairTask> stack;
    for (uint32_t k = begin; k < end; ++k) walk.run(tasks[k], stack, sink);
    sink.flush();
  });
  if (!sorted) return;

  sortPairs(scheduler, *sorted);
}

void Bvh::findPairs(Scheduler& scheduler, std::vector<Pair>& out) {
  collectPairs(scheduler, &out, nullptr);
}

void Bvh::findPairs(Scheduler& scheduler, FunctionRef<void(std::span<const Pair>)> consume) {
  collectPairs(scheduler, nullptr, &consume);
}

}  // namespace bp
