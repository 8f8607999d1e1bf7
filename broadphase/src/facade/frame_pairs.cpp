// BroadPhase's frame pairs: the structure's pairs mapped to proxy indices,
// filtered by the rules (accepts), sorted by key, and the events begun and
// ended from the last frame's sorted list (computeEvents, or both in one
// merge, mergePairsAndEvents); streamed unsorted for update(consume). The
// invariant: pairs_ and previous_ are sorted by ProxyPair::key() with no
// repeat, so one merge gives the events and any order of work the same list.
#include "facade/broad_phase_impl.h"

#include "common/assert.h"
#include "common/batch_check.h"
#include "common/even_chunks.h"
#include "common/grow.h"
#include "common/report_error.h"
#include "facade/broad_phase_side.h"
#include "facade/double_world.h"
#include "facade/layer_check.h"
#include "facade/pair_events.h"
#include "facade/query_view.h"

#include <tbb/parallel_sort.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstring>
#include <optional>
#include <string>
#include <utility>

namespace bp {

namespace {

// Below this many pairs, mapping and sorting run on the calling thread.
constexpr uint32_t kPairGrain = 16384;

// An event list that a frame of many events grew (the first update, where
// every pair begins) is released once frames are back to few: on
// `clustered` 10^6 the first frame's begun list alone kept 0.68 GB. The test
// is against the last frame's count, so a steady state never meets it and
// does not allocate (as the sweep's relink scratch). The list released
// makes way for one of twice the last frame's count, reserved and not yet
// written: the frame fills it without growing it step by step (each step a
// copy into fresh memory).
// `slack`: the capacity always kept (kKeptEventCapacity over the lists that
// share it).
constexpr size_t kKeptEventCapacity = 65536;
void releaseIfOversized(std::vector<ProxyPair>& list, size_t slack = kKeptEventCapacity) {
  if (list.capacity() <= 8 * list.size() + slack) return;
  std::vector<ProxyPair> smaller;
  smaller.reserve(2 * list.size());
  list.swap(smaller);
}

// mergePairsAndEvents(): up to how many bytes of this frame's pair list the
// begun pairs' user data is looked up in a pass after the merge (the lookups
// independent of each other, so their misses overlap; the begun pairs' places
// in the list are still in the cache), and, for longer lists, how many pairs
// ahead the merge fetches it (see docs/decisions.md).
constexpr size_t kDeferLookupsBytes = size_t(16) << 20;
constexpr size_t kUserAhead = 16;

inline void prefetchRead(const void* p) {
#if defined(__GNUC__)
  __builtin_prefetch(p, 0, 3);
#else
  (void)p;
#endif
}

// Pair p with its user data written at dst as three 8-byte words (no wider
// load of them follows soon, see mergePairsAndEvents()).
inline void writePair(ProxyPair* dst, Pair p, uint64_t userDataA, uint64_t userDataB) {
  static_assert(offsetof(ProxyPair, userDataA) == 8 && offsetof(ProxyPair, userDataB) == 16);
  char* const d = reinterpret_cast<char*>(dst);
  std::memcpy(d, &p, 8);
  std::memcpy(d + 8, &userDataA, 8);
  std::memcpy(d + 16, &userDataB, 8);
}

}  // namespace

// Filters and motion rules: static-static never reaches here; kinematic-static
// never pairs, kinematic-kinematic only on request.
bool BroadPhase::Impl::accepts(uint32_t a, uint32_t b) const {
  if (special_ == 0) return true;  // default filters, no kinematic proxy: every pair stands
  // Only double proxies are special: their pairs are decided in double, and
  // no other pair need read the rules (a random access a pair).
  if (onlyDoubleSpecial()) return exactOverlap(a, b);
  const Rules& da = rules_[a];
  const Rules& db = rules_[b];
  if (!filters_[da.filterSlot].accepts(filters_[db.filterSlot])) return false;
  const bool aKin = da.motion == MotionType::kinematic;
  const bool bKin = db.motion == MotionType::kinematic;
  if (aKin && (bKin ? !config_.pairKinematicKinematic : db.motion == MotionType::staticBody))
    return false;
  if (bKin && da.motion == MotionType::staticBody) return false;
  return !dworld_ || dworld_->count == 0 || exactOverlap(a, b);
}

EvenChunks BroadPhase::Impl::pairChunks(uint32_t n) const {
  const uint32_t threads = uint32_t(scheduler_->threadCount());
  return threads > 1 && n > kPairGrain ? evenChunks(n, kPairGrain, 1, threads) : EvenChunks{1, n};
}

bool BroadPhase::Impl::onlyDoubleSpecial() const { return dworld_ && special_ == dworld_->count; }

// The structure's pairs into structure_->pairs. With maxPairs, under a
// budget that stops the structure's tasks as soon as the frame is known to
// hold more: the bound is on the pairs the filters accept, so with filters
// active the budget keeps only those (the later pass applies the same rules
// again, to pairs that all pass). False then, with the structure up to date
// and its pair list empty.
bool BroadPhase::Impl::findStructurePairs() {
  Side& main = *structure_;
  if (config_.maxPairs == 0) {
    main.findPairs(*scheduler_, nullptr);
    return true;
  }
  auto accept = [&main, this](Pair p) { return accepts(main.outer[p.a], main.outer[p.b]); };
  std::optional<PairBudget> budget;
  if (special_ != 0)
    budget.emplace(config_.maxPairs, accept);
  else
    budget.emplace(config_.maxPairs);
  main.findPairs(*scheduler_, &*budget);
  return !budget->exceeded();
}

void BroadPhase::Impl::collectPairs(std::vector<ProxyPair>& out) {
  Side& main = *structure_;
  // Pair k of the structure becomes out[k]: fixed places, so the result does
  // not depend on the thread count, and a structure whose slots map to
  // proxies in order (no churn since it was built) hands over sorted pairs
  // that need no sort, nor a look at the slot map. Pairs the filters reject
  // are marked, then compacted.
  const std::vector<Pair>& raw = main.pairs;
  const std::vector<uint32_t>& outer = main.outer;
  const uint32_t n = static_cast<uint32_t>(raw.size());
  constexpr uint32_t kRejected = kNullIndex;
  resizeWithHeadroom(out, n);
  const bool filtered = special_ != 0;
  const bool identity = main.remapped == 0;
  const EvenChunks split = pairChunks(n);
  forEachChunk(*scheduler_, split, n, [&](uint32_t, uint32_t begin, uint32_t end) {
    if (identity && !filtered) {
      // Slot == proxy index: no dependent load between a pair and its user
      // data (perf, uniform 10^5, one thread: the map's share of the run
      // fell from 6.2 % to 3.6 % of the samples).
      for (uint32_t k = begin; k < end; ++k) {
        const Pair p = raw[k];
        out[k] = ProxyPair{p.a, p.b, userData_[p.a], userData_[p.b]};
      }
      return;
    }
    for (uint32_t k = begin; k < end; ++k) {
      uint32_t a = outer[raw[k].a];
      uint32_t b = outer[raw[k].b];
      if (a > b) std::swap(a, b);
      // (Without filters every pair stands: no call per pair.)
      out[k] = !filtered || accepts(a, b) ? ProxyPair{a, b, userData_[a], userData_[b]}
                                          : ProxyPair{kRejected, kRejected, 0, 0};
    }
  });
  if (special_ != 0)
    out.erase(
        std::remove_if(out.begin(), out.end(), [](const ProxyPair& p) { return p.a == kRejected; }),
        out.end());
  // Keys are unique, so any sort gives the one canonical order.
  // (The structure's pairs are sorted by slot: with slot == proxy index
  // they need no check.)
  auto byKey = [](const ProxyPair& x, const ProxyPair& y) { return x.key() < y.key(); };
  if (!identity && !std::is_sorted(out.begin(), out.end(), byKey)) {
    if (out.size() < kPairGrain || scheduler_->threadCount() == 1)
      std::sort(out.begin(), out.end(), byKey);
    else
      scheduler_->run([&] { tbb::parallel_sort(out.begin(), out.end(), byKey); });
  }
}

// begun = in this frame's list only, ended = in the last frame's only (or in
// both but renewed: a proxy removed in between, its slot reused). Both lists
// are sorted by key, so this is a merge; with workers and many pairs it runs
// on key ranges in parallel (cut at this frame's chunk starts, found in the
// last frame's list by binary search) and the pieces are joined in range
// order: the same lists for any thread count.
void BroadPhase::Impl::computeEvents() {
  // Both lists sorted by key without repeats: the merge below walks them once.
  const auto ascending = [](const std::vector<ProxyPair>& list) {
    return std::adjacent_find(list.begin(), list.end(), [](const ProxyPair& x, const ProxyPair& y) {
             return !(x.key() < y.key());
           }) == list.end();
  };
  BP_ASSERT(ascending(pairs_) && ascending(previous_));
  (void)ascending;
  // Most frames renew no proxy: then a pair in both lists stands without a
  // look at renewed_ (two scattered reads a pair).
  const bool anyRenewed = !renewedList_.empty();
  const auto renewed = [&](uint32_t p) { return renewed_[p] != 0; };
  mergeInRanges(
      pairs_.size(), [&](size_t j) { return pairs_[j].key(); },
      [&](size_t i, size_t iEnd, size_t j, size_t jEnd, EventPieces piece) {
        eventsBetween(std::span<const ProxyPair>(previous_).subspan(i, iEnd - i),
                      std::span<const ProxyPair>(pairs_).subspan(j, jEnd - j), anyRenewed, renewed,
                      piece.begun, piece.ended);
      });
}

// The pairs and events at once, when the structure's pairs are the frame's
// (slot == proxy index, every pair accepted): pair j of the structure is
// pairs_[j], merged against the last frame's list as it is written. A pair
// that stands copies its entry from the last frame's list while no user data
// has changed since (userDataChanged_), so only the pairs that begin look
// their user data up, fetched some pairs ahead (without, each lookup behind
// the merge's branches waited for the last, and the merge took longer than
// the two passes it replaces). Against collectPairs() then computeEvents(),
// this saves writing the list in one pass and reading it back in the next,
// and most of the user-data reads (see docs/decisions.md).
void BroadPhase::Impl::mergePairsAndEvents() {
  const std::vector<Pair>& raw = structure_->pairs;
  const size_t nc = raw.size();
  resizeWithHeadroom(pairs_, nc);
  const bool anyRenewed = !renewedList_.empty();
  const bool lookUp = userDataChanged_;
  const bool copyRuns = !anyRenewed && !lookUp;
  // The begun pairs' user data: looked up after the merge while the list
  // fits in the caches (each begun entry holds its place in pairs_ until
  // then); for a list that streams from memory, and while every pair looks
  // its user data up, inline, fetched kUserAhead pairs ahead.
  const bool deferLookups = !lookUp && nc * sizeof(ProxyPair) <= kDeferLookupsBytes;
  // A pair's key from its first 8 bytes (a, then b: both Pair and ProxyPair
  // start so), in one load; ~0 past the end of a list (no pair has a == b).
  auto keyAt = [](const void* pair) {
    uint64_t v;
    std::memcpy(&v, pair, sizeof v);
    return (v << 32) | (v >> 32);
  };
  static_assert(offsetof(Pair, a) == 0 && offsetof(Pair, b) == 4);
  static_assert(offsetof(ProxyPair, a) == 0 && offsetof(ProxyPair, b) == 4);
  // How many of the next kRun pairs of this frame and of the last have the
  // same first 8 bytes (a, b), counted from the first: branch-free, so that
  // where the run stops costs no misprediction.
  constexpr size_t kRun = 8;
  auto sameCount = [](const Pair* now, const ProxyPair* prev) {
    uint32_t differ = 0;
    for (size_t k = 0; k < kRun; ++k) {
      uint64_t x, y;
      std::memcpy(&x, &now[k], sizeof x);
      std::memcpy(&y, &prev[k], sizeof y);
      differ |= uint32_t(x != y) << k;
    }
    return size_t(std::countr_zero(differ | (1u << kRun)));
  };
  mergeInRanges(
      nc, [&](size_t j) { return keyAt(&raw[j]); },
      [&](size_t i, size_t iEnd, size_t j, size_t jEnd, EventPieces piece) {
        const Pair* const now = raw.data();
        const ProxyPair* const prev = previous_.data();
        ProxyPair* const out = pairs_.data();
        const uint64_t* const user = userData_.data();
        const uint8_t* const renewed = renewed_.data();
        std::vector<ProxyPair>& begun = piece.begun;
        std::vector<ProxyPair>& ended = piece.ended;
        auto prevKey = [&](size_t k) { return k < iEnd ? keyAt(&prev[k]) : ~uint64_t(0); };
        uint64_t last = prevKey(i);
        for (; j < jEnd; ++j) {
          // Runs of standing pairs: where the next pairs of both lists have
          // the same (a, b) words, and no proxy was renewed nor user data
          // changed, they stand and their entries are copied whole, kRun
          // entries at a time (those past the run's end are rewritten
          // next), without a branch or a lookup a pair. The pair where a
          // run stops goes through the steps below. (Four at a time and
          // only whole runs of four, clustered 10^5's merge took 1.3x as
          // long: a pair begins or ends every few pairs there.)
          if (copyRuns) {
            while (j + kRun <= jEnd && i + kRun <= iEnd) {
              const size_t same = sameCount(&now[j], &prev[i]);
              std::memcpy(static_cast<void*>(&out[j]), &prev[i], kRun * sizeof(ProxyPair));
              j += same;
              i += same;
              if (same < kRun) break;
            }
            last = prevKey(i);
            if (j == jEnd) break;
          }
          // The user data of a pair some steps ahead, in case it begins:
          // read behind the merge's branches, each lookup would wait for
          // the last.
          if (!deferLookups && j + kUserAhead < jEnd) {
            const Pair ahead = now[j + kUserAhead];
            prefetchRead(&user[ahead.a]);
            prefetchRead(&user[ahead.b]);
          }
          const uint64_t key = keyAt(&now[j]);
          while (last < key) {
            ended.push_back(prev[i]);
            last = prevKey(++i);
          }
          const Pair p = now[j];
          if (last == key) {
            if (!(anyRenewed && (renewed[p.a] || renewed[p.b]))) {  // the pair stands
              out[j] = lookUp ? ProxyPair{p.a, p.b, user[p.a], user[p.b]} : prev[i];
              last = prevKey(++i);
              continue;
            }
            ended.push_back(prev[i]);  // a renewed proxy: the old pair ends, a new one begins
            last = prevKey(++i);
          }
          if (deferLookups) {  // its user data after the merge; its place until then
            begun.emplace_back();
            writePair(&begun.back(), p, j, 0);
            continue;
          }
          // The pair written to both lists from registers: copying out[j]
          // back read 16 bytes across the two stores just made to it, which
          // the store buffer cannot forward (clustered 10^5, one thread:
          // the merge's share of the samples fell by 4 %).
          const uint64_t ua = user[p.a], ub = user[p.b];
          writePair(&out[j], p, ua, ub);
          begun.emplace_back();
          writePair(&begun.back(), p, ua, ub);
        }
        for (; i < iEnd; ++i) ended.push_back(prev[i]);
        if (deferLookups) {
          // No lookup waits on another here: the misses overlap.
          for (ProxyPair& e : begun) {
            const size_t at = size_t(e.userDataA);
            const uint64_t ua = user[e.a], ub = user[e.b];
            e.userDataA = ua;
            e.userDataB = ub;
            writePair(&out[at], Pair{e.a, e.b}, ua, ub);
          }
        }
      });
}

// merge(i, iEnd, j, jEnd, pieces) over the last frame's pairs [i, iEnd)
// and this frame's [j, jEnd) (nc of them, keyOf(j) the key of pair j), into
// the piece's begun and ended lists (empty when it is called), joined into
// begun_ and ended_. With workers and many pairs it runs on
// key ranges in parallel (cut at this frame's chunk starts, found in the
// last frame's list by binary search) and the pieces are joined in range
// order: the same lists for any thread count. Clears the renewed marks.
template <class KeyOf, class Merge>
void BroadPhase::Impl::mergeInRanges(size_t nc, KeyOf&& keyOf, Merge&& merge) {
  clearEvents();
  const size_t np = previous_.size();
  // A multiple of the thread count, so that the threads end together (three
  // chunks for uniform 10^5's 49 k pairs left one of two threads idle for a
  // third of the merge).
  const size_t threads = size_t(scheduler_->threadCount());
  // (No pairs this frame: one piece, as the cuts are keys of this frame's.)
  const uint32_t chunks =
      threads > 1 && nc > 0 && np + nc >= 4 * size_t(kPairGrain)
          ? uint32_t(std::min(4 * threads, (nc / kPairGrain + threads) / threads * threads))
          : 1;
  if (chunks == 1) {
    merge(0, np, 0, nc, EventPieces{begun_, ended_});
  } else {
    eventChunks_.resize(chunks);
    auto cut = [&](uint32_t c) {  // where chunk c starts in (previous_, this frame's pairs)
      if (c == chunks) return std::pair<size_t, size_t>(np, nc);
      const size_t j = nc * c / chunks;
      if (c == 0) return std::pair<size_t, size_t>(0, 0);
      const uint64_t key = keyOf(j);
      const size_t i =
          size_t(std::lower_bound(previous_.begin(), previous_.end(), key,
                                  [](const ProxyPair& p, uint64_t k) { return p.key() < k; }) -
                 previous_.begin());
      return std::pair<size_t, size_t>(i, j);
    };
    scheduler_->forEach(0, chunks, 1, [&](uint32_t begin, uint32_t end) {
      for (uint32_t c = begin; c < end; ++c) {
        EventChunk& e = eventChunks_[c];
        e.begun.clear();
        e.ended.clear();
        const auto [i, j] = cut(c);
        const auto [iEnd, jEnd] = cut(c + 1);
        merge(i, iEnd, j, jEnd, EventPieces{e.begun, e.ended});
      }
    });
    for (const EventChunk& e : eventChunks_) {
      begun_.insert(begun_.end(), e.begun.begin(), e.begun.end());
      ended_.insert(ended_.end(), e.ended.begin(), e.ended.end());
    }
  }
  finishEvents();
}

void BroadPhase::Impl::clearEvents() {
  // Sizes are still the last frame's here.
  releaseIfOversized(begun_);
  releaseIfOversized(ended_);
  for (EventChunk& e : eventChunks_) {
    releaseIfOversized(e.begun, kKeptEventCapacity / eventChunks_.size());
    releaseIfOversized(e.ended, kKeptEventCapacity / eventChunks_.size());
  }
  begun_.clear();
  ended_.clear();
}

void BroadPhase::Impl::finishEvents() {
  for (uint32_t r : renewedList_) renewed_[r] = 0;
  renewedList_.clear();
  userDataChanged_ = false;  // the pairs now carry the current user data
}

// Moves every proxy into a fresh structure. Proxy indices, handles and the
// pair lists are untouched, so events stay exact.
// previous_, which the next update() writes its pairs to, made at least as
// long as this frame's list, with its pages touched now, when it is
// shorter (the first update, or a frame with more pairs than either list
// held). Otherwise the frame after the first update writes its list into
// fresh memory: `sizes` 10^6, 36 MB, took 8 850 page faults, about 100 ms on
// the project's VMs (docs/decisions.md). The first update, usually part of
// loading a scene, pays instead. Its contents are not needed past the
// events (the last frame's list).
void BroadPhase::Impl::readySpareList() {
  if (previous_.capacity() >= pairs_.size()) return;
  previous_.clear();
  resizeWithHeadroom(previous_, pairs_.size());  // value-initialised: every page written
  previous_.clear();
}

// update(consume)'s pairs: the structure's, mapped to proxy indices and
// filtered, handed to `consume` in chunks of up to 256 from the workers,
// unsorted, each pair once.
void BroadPhase::Impl::streamPairs(FunctionRef<void(std::span<const ProxyPair>)> consume) {
  const Side& main = *structure_;
  const std::vector<Pair>& raw = main.pairs;
  const std::vector<uint32_t>& outer = main.outer;
  scheduler_->forEach(0, uint32_t(raw.size()), kPairGrain, [&](uint32_t begin, uint32_t end) {
    ProxyPair chunk[256];
    int n = 0;
    for (uint32_t k = begin; k < end; ++k) {
      uint32_t a = outer[raw[k].a], b = outer[raw[k].b];
      if (a > b) std::swap(a, b);
      if (!accepts(a, b)) continue;
      chunk[n++] = {a, b, userData_[a], userData_[b]};
      if (n == 256) {
        consume(std::span<const ProxyPair>(chunk, n));
        n = 0;
      }
    }
    if (n) consume(std::span<const ProxyPair>(chunk, n));
  });
}

}  // namespace bp
