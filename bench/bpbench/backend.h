// Backend: what bpbench drives. One adapter per structure or peer library.
//
// Ids are scene indices: proxy i is scene.boxes[i]. An adapter maps them to
// its own handles and reports pairs and hits in scene indices, so every
// backend's output is comparable bit for bit with the oracle's.
//
// Adding a backend: subclass Backend (override what it supports), write a
// factory `std::unique_ptr<Backend> makeX()`, and add one line to the table in
// registry.cpp. About 40 lines for a structure with the contract's API.
#pragma once

#include <broadphase/jobs/scheduler.h>
#include <broadphase/math/aabb.h>
#include <broadphase/math/daabb.h>
#include <broadphase/math/ray.h>
#include <broadphase/pair.h>
#include <broadphase/query.h>
#include <broadphase/ray_hit.h>
#include <broadphase/testkit/scene.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace bpbench {

using bp::Aabb;
using bp::Pair;
using bp::Ray;
using bp::RayHit;
using bp::RayQuery;
using bp::Scene;
using bp::Scheduler;

class Backend {
 public:
  virtual ~Backend() = default;

  // --- pairs ---
  // Adds every box of the scene (ids 0..n-1, static flag from scene.isStatic).
  virtual void build(const Scene& scene, Scheduler& scheduler) = 0;
  // Applies new exact boxes to the given ids, as one batch.
  virtual void move(std::span<const uint32_t> ids, std::span<const Aabb> boxes,
                    Scheduler& scheduler) = 0;
  // Untimed, just before move() is given the same ids: an adapter may map
  // them to its own handles here, as an engine reads each body's handle while
  // it gathers the boxes (which bpbench does untimed too).
  virtual void stageMoves(std::span<const uint32_t> ids, Scheduler& scheduler) {
    (void)ids, (void)scheduler;
  }
  // The complete exact pair list (closed intervals, static-static left out),
  // sorted by Pair::key(), in scene ids: written to `out` here, or by
  // exportPairs().
  virtual void findPairs(Scheduler& scheduler, std::vector<Pair>& out) = 0;
  // Untimed, just after findPairs(): a backend whose frame leaves the pairs
  // in a form of its own writes them to `out` here. The facade's frame ends
  // with its ProxyPair lists, which an engine reads in place: their copy
  // into scene-id pairs, for the hash and the checks, is bpbench's work.
  virtual void exportPairs(Scheduler& scheduler, std::vector<Pair>& out) {
    (void)scheduler, (void)out;
  }
  // Untimed, just after exportPairs(): the time, in ms, of the first query
  // a query thread makes on this frame, where that query pays for reading
  // it (`auto-cq`: the query structure's catch-up); negative where none.
  virtual double firstQueryMs() { return -1.0; }
  // Churn: removes these ids, then adds them back with their boxes. The ids
  // keep their meaning (an adapter remaps if its handles differ).
  virtual void remove(std::span<const uint32_t> ids) = 0;
  virtual void add(std::span<const uint32_t> ids, std::span<const Aabb> boxes,
                   std::span<const uint8_t> isStatic) = 0;

  // --- rays --- (after build)
  // What the backend makes for rays on demand, made now: `bpbench rays`
  // counts it in the build, not in the timed cast.
  virtual void prepareRays() {}
  // Closest or any hit, one result per ray.
  virtual void castRays(Scheduler& scheduler, std::span<const Ray> rays, RayQuery kind,
                        std::span<RayHit> out) = 0;
  // Every hit of each ray, sorted by hitBefore(), in a flat list: the hits of
  // ray i are out[offsets[i] .. offsets[i + 1]). offsets has rays.size() + 1
  // entries.
  virtual void castRaysAll(Scheduler& scheduler, std::span<const Ray> rays,
                           std::vector<RayHit>& out, std::vector<uint32_t>& offsets) = 0;

  // --- nearest --- (after build and prepareRays)
  // The k boxes nearest to `point`, sorted by neighbourBefore() (nearer
  // first, ties to the lower scene id), in scene ids. One query on the
  // calling thread.
  virtual void nearest(const bp::Vec3& point, uint32_t k, std::vector<bp::Neighbour>& out) {
    (void)point, (void)k;
    out.clear();
  }

  // Called when a frame's serial part starts (bpbench --wake-workers): the
  // workers the frame will fork to are woken meanwhile (Scheduler::wake).
  virtual void wakeWorkers(Scheduler& scheduler) { scheduler.wake(); }

  // --- double precision (pairs --offset) ---
  // Called before build(): from then on the boxes go in through the double
  // API, translated by `offset` on every axis (build() translates the
  // scene's; moveDouble() takes them translated). False: not supported.
  virtual bool useOffset(double offset) {
    (void)offset;
    return false;
  }
  virtual void moveDouble(std::span<const uint32_t> ids, std::span<const bp::DAabb> boxes,
                          Scheduler& scheduler) {
    (void)ids, (void)boxes, (void)scheduler;
  }

  // Heap bytes the structure says it owns (0: unknown).
  virtual size_t memoryBytes() const { return 0; }
  // Those bytes by part (BroadPhase::memoryUse(), in kMemoryParts' order);
  // empty: no split known.
  virtual std::vector<double> memoryParts() const { return {}; }
};

// The parts of BroadPhase::memoryUse(), as memoryParts() lists them.
inline constexpr const char* kMemoryParts[] = {"structure", "ray_tree", "proxies", "changes",
                                               "pairs",     "events",   "doubles", "query_view"};

// What a backend can do, for the registry and the CLI.
enum Capability : unsigned {
  kPairs = 1,
  kRaysClosest = 2,
  kRaysAny = 4,
  kRaysAll = 8,
  kThreadedPairs = 16,  // pairs use the Scheduler; otherwise one thread
  kChurn = 32,          // remove/add supported
  kThreadedRays = 64,   // rays use the Scheduler; otherwise one thread
  kThreaded = kThreadedPairs | kThreadedRays,
  kNearest = 128,  // nearest() answers
};

using Factory = std::unique_ptr<Backend> (*)();

struct BackendInfo {
  const char* name;
  const char* description;
  unsigned caps;
  Factory make;         // nullptr: not built in this binary
  const char* missing;  // why not built
  uint32_t maxN;        // refuse larger scenes (0: no limit)
};

// Every backend bpbench knows, built or not, in a fixed order.
std::span<const BackendInfo> allBackends();
const BackendInfo* findBackend(std::string_view name);

// Factories, defined in the adapter files. An adapter that is not compiled
// (library or header missing) has a null factory in the registry table.
std::unique_ptr<Backend> makeBrute();
std::unique_ptr<Backend> makeBulletDbvt();
std::unique_ptr<Backend> makeBulletSap();
std::unique_ptr<Backend> makeEmbree();
std::unique_ptr<Backend> makeEmbreePacket8();
std::unique_ptr<Backend> makeEmbreePacket16();
std::unique_ptr<Backend> makeEmbreeStream();
std::unique_ptr<Backend> makeJolt();
std::unique_ptr<Backend> makePhysxAbp();
std::unique_ptr<Backend> makePhysxMbp();
// The peers' versions ("5.6.1"), from their own version macros, for the
// descriptions `bpbench list` prints; defined in the adapters.
std::string joltVersion();
std::string physxVersion();
std::unique_ptr<Backend> makeBvh();
std::unique_ptr<Backend> makeSweep();
std::unique_ptr<Backend> makeAuto();
std::unique_ptr<Backend> makeFacadeBvh();
std::unique_ptr<Backend> makeFacadeSweep();
std::unique_ptr<Backend> makeAutoConcurrentQueries();

// Shared helper for "all hits": runs `one(ray, hits)` (which appends the
// sorted hits of one ray) for each ray, in chunks over the scheduler, and
// concatenates the chunks in ray order.
template <class One>
void castRaysAllWith(Scheduler& scheduler, std::span<const Ray> rays, std::vector<RayHit>& out,
                     std::vector<uint32_t>& offsets, One&& one) {
  constexpr uint32_t kChunk = 1024;
  const uint32_t n = static_cast<uint32_t>(rays.size());
  const uint32_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<std::vector<RayHit>> hits(chunks);
  std::vector<std::vector<uint32_t>> counts(chunks);
  scheduler.forEach(0, chunks, 1, [&](uint32_t begin, uint32_t end) {
    for (uint32_t c = begin; c < end; ++c) {
      const uint32_t lo = c * kChunk, hi = std::min(n, lo + kChunk);
      for (uint32_t i = lo; i < hi; ++i) {
        const size_t before = hits[c].size();
        one(rays[i], hits[c]);
        counts[c].push_back(static_cast<uint32_t>(hits[c].size() - before));
      }
    }
  });
  out.clear();
  offsets.assign(1, 0);
  for (uint32_t c = 0; c < chunks; ++c) {
    out.insert(out.end(), hits[c].begin(), hits[c].end());
    for (uint32_t k : counts[c]) offsets.push_back(offsets.back() + k);
  }
}

}  // namespace bpbench
