// physx-abp and physx-mbp: PhysX 5's CPU broadphases (ABP, and MBP over an
// 8x8 grid of regions), driven through PhysX's low-level Bp module as its
// scene's AABB manager drives them.
//
// Built only when the build is given PhysX's `physx/` folder (BP_PHYSX_ROOT,
// scripts/peers.sh). The adapter talks to Bp::BroadPhase, the interface
// PhysX's scene (Sc::Scene) creates with Bp::BroadPhase::create and its
// AABBManager updates each step: the public PxBroadPhase wraps the same
// object but lives in the immediate-mode module, which would pull in much of
// the SDK. What the AABB manager owns around the broadphase, the adapter
// owns too, and nothing more:
//
// - Bounds, filter groups and contact distances in arrays indexed by a
//   handle (PhysX's bounds index), with one spare entry past the last handle
//   (the broadphases read 16 bytes from each box's maximum, so the array is
//   always one box longer than the handles in it, as BoundsArray keeps it).
//   Handles are given out as PhysX's scene gives element ids (a
//   Cm::DeferredIDPool): the last freed one first, else a new one, and a
//   removed handle is freed only after the next update, since one update
//   may not name a handle twice (removed and created).
// - Statics in the static filter group, each dynamic body in a group of its
//   own (getFilterGroup_Dynamics of its handle), so that every body pairs
//   with every other and statics never with statics (PhysX's rule and
//   bpbench's). The filter table is the scene's default (kinematic pairs
//   kept).
// - Each box's contact distance is PxShape's default contact offset, 0.02
//   (0.02 PxTolerancesScale::length): PhysX grows every box by it before the
//   broadphase sees it. Its integer-encoded boxes then round outward (minima
//   even, maxima odd), so touching boxes are reported; its pairs are a
//   superset of the exact ones.
// - The created, updated and removed lists from bitmaps scanned in handle
//   order (AABBManager::updateBPFirstPass), then one update() on the calling
//   thread: eABP is ABP's serial form (ePABP forks tasks), and MBP runs
//   serially whatever task it is given.
// - The broadphase reports pairs created and deleted by this update; the
//   pairs of removed objects are not reported at all (the scene drops a
//   removed shape's interactions itself, NPhaseCore::onVolumeRemoved). So
//   the adapter keeps the set of current pairs, as the scene keeps its
//   interactions: a dense array with an open-addressing index from the
//   handle pair to its slot, deleted pairs swapped out, created ones
//   appended, and the pairs of removed handles dropped in one pass over the
//   array in the frame that removes them.
//
// The frame's output is that set filtered by the exact boxes, then sorted,
// as the Bullet and Jolt adapters do: the set, its upkeep, the filter and
// the sort are all in the frame time, since a narrowphase needs the exact
// list and PhysX's own step keeps the pair set too.
//
// MBP needs regions: the world bounds (the motion domain grown by the largest
// box and the contact distance, so no box ever leaves every region) cut into
// an 8x8 grid of columns over x and z, y being up, as
// PxBroadPhaseExt::createRegionsFromWorldBounds cuts them. A 4x4 grid fails
// at 10^6 boxes: MBP holds at most 64K objects a region, and reports it
// through the error callback, which here fails the run. A box outside every
// region would lose its pairs; the adapter checks that none is.
#include "backend.h"

#include <PxBroadPhase.h>
#include <foundation/PxAllocatorCallback.h>
#include <foundation/PxBounds3.h>
#include <foundation/PxErrorCallback.h>
#include <foundation/PxFoundation.h>
#include <foundation/PxPhysicsVersion.h>

#include "BpBroadPhase.h"
#include "BpBroadPhaseUpdate.h"
#include "BpFiltering.h"
#include "PxcScratchAllocator.h"

#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace bpbench {
namespace {

namespace px = physx;

// 16-byte aligned blocks, as PhysX requires of its allocator, from
// memalign as PxDefaultAllocator takes them on Linux (so PhysX's arrays lie
// where they would in a PhysX program). The blocks' usable sizes are summed:
// the bytes PhysX holds are the structure's memory in bpbench's tables (one
// PhysX backend a process, as bpbench runs each backend in a child of its
// own).
class Allocator final : public px::PxAllocatorCallback {
 public:
  void* allocate(size_t size, const char*, const char*, int) override {
    void* p = ::memalign(16, size);
    if (p) live_.fetch_add(::malloc_usable_size(p), std::memory_order_relaxed);
    return p;
  }
  void deallocate(void* ptr) override {
    if (!ptr) return;
    live_.fetch_sub(::malloc_usable_size(ptr), std::memory_order_relaxed);
    std::free(ptr);
  }
  size_t live() const { return live_.load(std::memory_order_relaxed); }

 private:
  std::atomic<size_t> live_{0};
};

Allocator& allocator() {
  static Allocator a;
  return a;
}

// PhysX reports misuse and limits (MBP's 64K objects a region) through the
// foundation's error callback and carries on; the adapter keeps the first
// message and fails the frame with it. Not thread-safe: PhysX runs on the
// calling thread here.
class ErrorSink final : public px::PxErrorCallback {
 public:
  void reportError(px::PxErrorCode::Enum code, const char* message, const char* file,
                   int line) override {
    if (code == px::PxErrorCode::eDEBUG_INFO || !first_.empty()) return;
    first_ = std::string(message ? message : "") + " (" + (file ? file : "?") + ":" +
             std::to_string(line) + ")";
  }
  void throwIfAny() {
    if (first_.empty()) return;
    const std::string what = "physx: " + first_;
    first_.clear();
    throw std::runtime_error(what);
  }

 private:
  std::string first_;
};

ErrorSink& errors() {
  static ErrorSink sink;
  return sink;
}

// The foundation (PX_ALLOC and error reporting go through it), once per
// process: PhysX allows one.
void initPhysxOnce() {
  static px::PxFoundation* const foundation =
      PxCreateFoundation(PX_PHYSICS_VERSION, allocator(), errors());
  if (!foundation) throw std::runtime_error("physx: PxCreateFoundation failed");
}

// PxShape's default contact offset (0.02 PxTolerancesScale::length, length 1).
constexpr float kContactDistance = 0.02f;
constexpr uint32_t kMbpGrid = 8;  // regions per side (see the header comment)
constexpr uint32_t kNoHandle = ~0u;

// A bitmap over handles, scanned in handle order as PhysX's PxBitMap is.
class Bits {
 public:
  void resize(uint32_t bits) { words_.resize((bits + 63) / 64, 0); }
  void set(uint32_t i) { words_[i >> 6] |= uint64_t(1) << (i & 63); }
  void reset(uint32_t i) { words_[i >> 6] &= ~(uint64_t(1) << (i & 63)); }
  bool test(uint32_t i) const { return (words_[i >> 6] >> (i & 63)) & 1; }
  // Appends the set bits that are not set in `skip` to `out`, in
  // increasing order, and clears them all.
  void drainTo(std::vector<uint32_t>& out, const Bits* skip = nullptr) {
    for (size_t w = 0; w < words_.size(); ++w) {
      const uint64_t keep = skip ? words_[w] & ~skip->words_[w] : words_[w];
      for (uint64_t b = keep; b != 0; b &= b - 1)
        out.push_back(uint32_t(w * 64 + size_t(std::countr_zero(b))));
      words_[w] = 0;
    }
  }

 private:
  std::vector<uint64_t> words_;
};

// The current broadphase pairs: a dense array (what the frame reads) and an
// open-addressing index with linear probing from a handle pair to its slot
// there. Load at most 1/2; removal by backward shift, so no tombstones.
class PairSet {
 public:
  struct Entry {
    uint64_t key;  // (lower handle << 32) | higher handle
    Pair pair;     // the same two bodies as scene ids
  };

  void insert(uint64_t key, Pair pair) {
    if ((dense_.size() + 1) * 2 > slots_.size()) grow();
    size_t s = home(key);
    while (slots_[s].key != kEmpty) s = (s + 1) & mask_;
    slots_[s] = Slot{key, uint32_t(dense_.size())};
    dense_.push_back(Entry{key, pair});
  }

  // The pair must be present (PhysX deletes only pairs it created).
  void erase(uint64_t key) {
    size_t s = find(key);
    const uint32_t index = slots_[s].index;
    // The last entry takes the erased one's place in the dense array.
    const uint32_t last = uint32_t(dense_.size() - 1);
    if (index != last) {
      dense_[index] = dense_[last];
      slots_[find(dense_[index].key)].index = index;
    }
    dense_.pop_back();
    // Backward shift: move later entries of the cluster into the hole when
    // their home is not between the hole and them.
    for (size_t next = (s + 1) & mask_; slots_[next].key != kEmpty; next = (next + 1) & mask_) {
      const size_t h = home(slots_[next].key);
      if (((next - h) & mask_) >= ((next - s) & mask_)) {
        slots_[s] = slots_[next];
        s = next;
      }
    }
    slots_[s].key = kEmpty;
  }

  // Erases every pair for which dead(entry) holds.
  template <class Dead>
  void eraseIf(Dead dead) {
    for (size_t i = 0; i < dense_.size();) {
      if (dead(dense_[i]))
        erase(dense_[i].key);  // moves the last entry to i
      else
        ++i;
    }
  }

  std::span<const Entry> entries() const { return dense_; }
  size_t bytes() const {
    return dense_.capacity() * sizeof(Entry) + slots_.capacity() * sizeof(Slot);
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t(0);  // handles are below 2^30
  struct Slot {
    uint64_t key;
    uint32_t index;
  };

  size_t home(uint64_t key) const {
    return size_t((key * 0x9E3779B97F4A7C15ull) >> shift_) & mask_;
  }
  size_t find(uint64_t key) const {
    size_t s = home(key);
    while (slots_[s].key != key) s = (s + 1) & mask_;
    return s;
  }
  void grow() {
    const size_t size = std::max<size_t>(1024, slots_.size() * 2);
    slots_.assign(size, Slot{kEmpty, 0});
    mask_ = size - 1;
    shift_ = 64 - std::countr_zero(size);
    for (uint32_t i = 0; i < dense_.size(); ++i) {
      size_t s = home(dense_[i].key);
      while (slots_[s].key != kEmpty) s = (s + 1) & mask_;
      slots_[s] = Slot{dense_[i].key, i};
    }
  }

  std::vector<Entry> dense_;
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  int shift_ = 64;
};

class PhysxBackend final : public Backend {
 public:
  explicit PhysxBackend(px::PxBroadPhaseType::Enum type) : type_(type) {}

  ~PhysxBackend() override {
    if (broadphase_) broadphase_->release();
  }

  void build(const Scene& scene, Scheduler&) override {
    const uint32_t n = scene.n;
    // Group ids are (handle + 1) << 3 in 32 bits, handles below BpHandle's
    // invalid value: 2^28 leaves room for churn's deferred handles.
    if (n > (1u << 28)) throw std::runtime_error("physx: at most 2^28 boxes");
    boxes_ = scene.boxes;
    uint32_t statics = 0;
    for (uint32_t i = 0; i < n; ++i) statics += scene.isStatic[i] != 0;
    // The scene's limits (PxSceneLimits) as a user who knows them sets them:
    // the shape counts, so the first update need not grow the arrays.
    const uint32_t regions = type_ == px::PxBroadPhaseType::eMBP ? kMbpGrid * kMbpGrid : 0;
    broadphase_ = px::Bp::BroadPhase::create(type_, regions, 0, statics, n - statics, 0);
    if (!broadphase_) throw std::runtime_error("physx: Bp::BroadPhase::create failed");
    if (type_ == px::PxBroadPhaseType::eMBP) addRegions(scene);
    errors().throwIfAny();

    handleOf_.assign(n, kNoHandle);
    std::vector<uint32_t> all(n);
    for (uint32_t i = 0; i < n; ++i) all[i] = i;
    add(all, scene.boxes, scene.isStatic);
    // The scene's first step inserts them: done here, so frame 1 is a frame
    // like the others.
    std::vector<Pair> unused;
    update(unused);
  }

  void move(std::span<const uint32_t> ids, std::span<const Aabb> boxes, Scheduler&) override {
    for (size_t k = 0; k < ids.size(); ++k) {
      const uint32_t h = handleOf_[ids[k]];
      boxes_[ids[k]] = boxes[k];
      bounds_[h] = toPx(boxes[k]);
      changed_.set(h);
    }
  }

  void findPairs(Scheduler&, std::vector<Pair>& out) override { update(out); }

  // AABBManager::removeBounds: a handle added since the last update never
  // reached the broadphase and is just forgotten; the others go in the
  // removed list. Either way the handle is released after the next update.
  void remove(std::span<const uint32_t> ids) override {
    for (uint32_t id : ids) {
      const uint32_t h = handleOf_[id];
      changed_.reset(h);
      if (added_.test(h))
        added_.reset(h);
      else
        removed_.set(h);
      groups_[h] = px::Bp::FilterGroup::eINVALID;
      released_.push_back(h);
      handleOf_[id] = kNoHandle;
    }
  }

  void add(std::span<const uint32_t> ids, std::span<const Aabb> boxes,
           std::span<const uint8_t> isStatic) override {
    for (size_t k = 0; k < ids.size(); ++k) {
      const uint32_t h = newHandle();
      const uint32_t id = ids[k];
      boxes_[id] = boxes[k];
      bounds_[h] = toPx(boxes[k]);
      groups_[h] = isStatic[k] ? px::Bp::getFilterGroup_Statics()
                               : px::Bp::getFilterGroup_Dynamics(h, false);
      handleOf_[id] = h;
      sceneOf_[h] = id;
      added_.set(h);
    }
  }

  // Rays are not measured for this peer (no kRays capability).
  void castRays(Scheduler&, std::span<const Ray>, RayQuery, std::span<RayHit>) override {}
  void castRaysAll(Scheduler&, std::span<const Ray>, std::vector<RayHit>& out,
                   std::vector<uint32_t>& offsets) override {
    out.clear();
    offsets.clear();
  }

  // What PhysX holds (the broadphase and the foundation), and the arrays
  // and pair set the scene would hold around it.
  size_t memoryBytes() const override {
    return allocator().live() + bounds_.capacity() * sizeof(px::PxBounds3) +
           groups_.capacity() * sizeof(px::Bp::FilterGroup::Enum) +
           distances_.capacity() * sizeof(float) + sceneOf_.capacity() * sizeof(uint32_t) +
           pairs_.bytes();
  }

 private:
  static px::PxBounds3 toPx(const Aabb& b) {
    return px::PxBounds3(px::PxVec3(b.min.x(), b.min.y(), b.min.z()),
                         px::PxVec3(b.max.x(), b.max.y(), b.max.z()));
  }

  // The 8x8 columns over x and z of the world bounds, before any object is
  // added (so none need populating).
  void addRegions(const Scene& scene) {
    float half = 0;
    for (const bp::Vec3& e : scene.extents) half = std::max(half, 0.5f * e.maxCoeff());
    const float margin = half + kContactDistance + 1.0f;
    const px::PxVec3 lo(-margin, -margin, -margin);
    const px::PxVec3 hi(scene.bounds.x() + margin, scene.bounds.y() + margin,
                        scene.bounds.z() + margin);
    const float dx = (hi.x - lo.x) / float(kMbpGrid), dz = (hi.z - lo.z) / float(kMbpGrid);
    for (uint32_t j = 0; j < kMbpGrid; ++j)
      for (uint32_t i = 0; i < kMbpGrid; ++i) {
        px::PxBroadPhaseRegion region;
        region.mBounds =
            px::PxBounds3(px::PxVec3(lo.x + dx * float(i), lo.y, lo.z + dz * float(j)),
                          px::PxVec3(lo.x + dx * float(i + 1), hi.y, lo.z + dz * float(j + 1)));
        region.mUserData = nullptr;
        if (broadphase_->addRegion(region, false, nullptr, nullptr) == 0xffffffff)
          throw std::runtime_error("physx: MBP refused a region");
      }
  }

  // The ID pool's order: the last freed handle first, else a new one, the
  // arrays grown to keep one spare box past it.
  uint32_t newHandle() {
    if (!free_.empty()) {
      const uint32_t h = free_.back();
      free_.pop_back();
      return h;
    }
    const uint32_t h = handleCount_++;
    const uint32_t size = handleCount_ + 1;
    if (bounds_.size() < size) {
      const uint32_t grown = std::max(size, uint32_t(bounds_.size() * 3 / 2));
      bounds_.resize(grown, px::PxBounds3::empty());
      groups_.resize(grown, px::Bp::FilterGroup::eINVALID);
      distances_.resize(grown, kContactDistance);
      sceneOf_.resize(grown, kNoHandle);
      added_.resize(grown);
      changed_.resize(grown);
      removed_.resize(grown);
    }
    return h;
  }

  // One step of the broadphase and of the pair set, then the exact sorted
  // pairs in `out`.
  void update(std::vector<Pair>& out) {
    created_.clear();
    updated_.clear();
    removedList_.clear();
    // A handle added since the last update is created, not updated, even if
    // it moved since (updateBPFirstPass skips it in the changed map).
    changed_.drainTo(updated_, &added_);
    added_.drainTo(created_);
    removed_.drainTo(removedList_);
    const px::Bp::BroadPhaseUpdateData data(
        created_.data(), uint32_t(created_.size()), updated_.data(), uint32_t(updated_.size()),
        removedList_.data(), uint32_t(removedList_.size()), bounds_.data(), groups_.data(),
        distances_.data(), uint32_t(bounds_.size()), filter_, true, false);
    // AABBManager skips the broadphase when nothing changed.
    if (!created_.empty() || !updated_.empty() || !removedList_.empty()) {
      broadphase_->update(&scratch_, data, nullptr);
      errors().throwIfAny();
      if (broadphase_->getNbOutOfBoundsObjects() != 0)
        throw std::runtime_error("physx: a box is outside every MBP region");

      // Deleted first, then created, as AABBManager::postBroadPhase reads them.
      uint32_t count = 0;
      const px::Bp::BroadPhasePair* deleted = broadphase_->getDeletedPairs(count);
      for (uint32_t k = 0; k < count; ++k) pairs_.erase(keyOf(deleted[k]));
      const px::Bp::BroadPhasePair* created = broadphase_->getCreatedPairs(count);
      for (uint32_t k = 0; k < count; ++k) {
        const uint32_t a = created[k].mVolA, b = created[k].mVolB;
        pairs_.insert(keyOf(created[k]), bp::makePair(sceneOf_[a], sceneOf_[b]));
      }
      broadphase_->freeBuffers();
    }
    // The pairs of removed handles, which PhysX does not report, before the
    // handles can be reused.
    if (!removedList_.empty()) {
      for (uint32_t h : removedList_) removed_.set(h);  // drained above; a lookup now
      pairs_.eraseIf([&](const PairSet::Entry& e) {
        return removed_.test(uint32_t(e.key >> 32)) || removed_.test(uint32_t(e.key));
      });
      for (uint32_t h : removedList_) removed_.reset(h);
    }
    free_.insert(free_.end(), released_.begin(), released_.end());
    released_.clear();

    out.clear();
    for (const PairSet::Entry& e : pairs_.entries())
      if (bp::overlaps(boxes_[e.pair.a], boxes_[e.pair.b])) out.push_back(e.pair);
    std::sort(out.begin(), out.end());
  }

  static uint64_t keyOf(const px::Bp::BroadPhasePair& p) {
    const uint32_t a = std::min(p.mVolA, p.mVolB), b = std::max(p.mVolA, p.mVolB);
    return (uint64_t(a) << 32) | b;
  }

  // First: the members after it allocate through the foundation.
  struct Foundation {
    Foundation() { initPhysxOnce(); }
  } foundation_;
  const px::PxBroadPhaseType::Enum type_;
  px::Bp::BroadPhase* broadphase_ = nullptr;
  px::PxcScratchAllocator scratch_;  // no block: PhysX's scene default (heap)
  // The scene's default filtering: kinematic-kinematic and static-kinematic
  // pairs kept (PxPairFilteringMode::eDEFAULT).
  const px::Bp::BpFilter filter_{false, false};

  // By handle, one spare entry past the last handle.
  std::vector<px::PxBounds3> bounds_;
  std::vector<px::Bp::FilterGroup::Enum> groups_;
  std::vector<float> distances_;
  std::vector<uint32_t> sceneOf_;
  Bits added_, changed_, removed_;
  uint32_t handleCount_ = 0;
  std::vector<uint32_t> free_;                             // reusable handles, the next one last
  std::vector<uint32_t> released_;                         // removed since the last update
  std::vector<uint32_t> created_, updated_, removedList_;  // one update's lists

  std::vector<uint32_t> handleOf_;  // by scene id
  std::vector<Aabb> boxes_;         // exact boxes, by scene id
  PairSet pairs_;
};

}  // namespace

#define BPBENCH_STR2(x) #x
#define BPBENCH_STR(x) BPBENCH_STR2(x)

std::string physxVersion() {
  return BPBENCH_STR(PX_PHYSICS_VERSION_MAJOR) "." BPBENCH_STR(
      PX_PHYSICS_VERSION_MINOR) "." BPBENCH_STR(PX_PHYSICS_VERSION_BUGFIX);
}

std::unique_ptr<Backend> makePhysxAbp() {
  return std::make_unique<PhysxBackend>(physx::PxBroadPhaseType::eABP);
}
std::unique_ptr<Backend> makePhysxMbp() {
  return std::make_unique<PhysxBackend>(physx::PxBroadPhaseType::eMBP);
}

}  // namespace bpbench
