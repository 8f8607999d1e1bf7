// The table of backends: name, what it is, what it can do, its factory.
#include "backend.h"

#include <array>
#include <string>
#include <string_view>

namespace bpbench {
namespace {

constexpr unsigned kRays = kRaysClosest | kRaysAny | kRaysAll;

std::array<BackendInfo, 16> makeTable() {
#ifdef BPBENCH_HAVE_BULLET
  constexpr Factory dbvt = &makeBulletDbvt, sap = &makeBulletSap;
#else
  constexpr Factory dbvt = nullptr, sap = nullptr;
#endif
#ifdef BPBENCH_HAVE_EMBREE
  constexpr Factory embree = &makeEmbree, embreeP8 = &makeEmbreePacket8,
                    embreeP16 = &makeEmbreePacket16, embreeStream = &makeEmbreeStream;
#else
  constexpr Factory embree = nullptr, embreeP8 = nullptr, embreeP16 = nullptr,
                    embreeStream = nullptr;
#endif
#ifdef BPBENCH_HAVE_JOLT
  constexpr Factory jolt = &makeJolt;
  const std::string joltName = "Jolt Physics " + joltVersion();
#else
  constexpr Factory jolt = nullptr;
  const std::string joltName = "Jolt Physics";
#endif
#ifdef BPBENCH_HAVE_PHYSX
  constexpr Factory physxAbp = &makePhysxAbp, physxMbp = &makePhysxMbp;
  const std::string physxName = "PhysX " + physxVersion();
#else
  constexpr Factory physxAbp = nullptr, physxMbp = nullptr;
  const std::string physxName = "PhysX 5";
#endif
  // A built peer's description names its version (`bpbench list` prints it,
  // where a table of results can pick it up). Static: the table is made once
  // and points into them for the process's lifetime.
  static const std::string joltText =
      joltName +
      " BroadPhaseQuadTree driven as PhysicsSystem drives it (two layers; pairs filtered to the "
      "exact boxes), one thread";
  static const std::string physxAbpText =
      physxName +
      " ABP (Bp::BroadPhase) driven as the scene's AABBManager drives it (statics in the static "
      "group; pair set from created/deleted pairs, filtered to the exact boxes), one thread";
  static const std::string physxMbpText =
      physxName +
      " MBP (Bp::BroadPhase), 8x8 regions over the world bounds, otherwise as physx-abp, one "
      "thread";
  constexpr const char* physxMissing =
      "needs PhysX 5's physx/ folder: configure with -DBP_PHYSX_ROOT=<dir> or run "
      "scripts/peers.sh --physx <dir>";
  return {{
      {"brute", "the oracle (brute_force.h): all pairs O(N^2) on one thread; rays over threads",
       kPairs | kRays | kChurn | kThreadedRays | kNearest, &makeBrute, "", 50000},
      {"bullet-dbvt",
       "Bullet 3 btDbvtBroadphase + btHashedOverlappingPairCache (rays: rayTest), one thread",
       kPairs | kRays | kChurn, dbvt, "Bullet (pkg-config bullet) not found at configure time", 0},
      {"bullet-sap", "Bullet 3 bt32BitAxisSweep3 (default settings), one thread", kPairs | kChurn,
       sap, "Bullet (pkg-config bullet) not found at configure time", 0},
      {"embree", "Embree 3 user-geometry boxes, rtcIntersect1/rtcOccluded1 loop, one thread",
       kRaysClosest | kRaysAny, embree, "Embree 3 (find_package(embree 3)) not found", 0},
      {"embree-p8", "Embree 3 as `embree`, packets of 8 rays (rtcIntersect8/rtcOccluded8)",
       kRaysClosest | kRaysAny, embreeP8, "Embree 3 (find_package(embree 3)) not found", 0},
      {"embree-p16", "Embree 3 as `embree`, packets of 16 rays (rtcIntersect16/rtcOccluded16)",
       kRaysClosest | kRaysAny, embreeP16, "Embree 3 (find_package(embree 3)) not found", 0},
      {"embree-stream",
       "Embree 3 as `embree`, the batch as one coherent stream (rtcIntersect1M/rtcOccluded1M)",
       kRaysClosest | kRaysAny, embreeStream, "Embree 3 (find_package(embree 3)) not found", 0},
      // At most 2^23 bodies: the index bits of Jolt's BodyID.
      {"jolt", joltText.c_str(), kPairs | kChurn, jolt,
       "needs a Jolt Physics checkout: configure with -DBP_JOLT_ROOT=<dir> or run "
       "scripts/peers.sh --jolt <dir>",
       1u << 23},
      // At most 2^28 boxes: PhysX's filter groups are the handle shifted by 3.
      {"physx-abp", physxAbpText.c_str(), kPairs | kChurn, physxAbp, physxMissing, 1u << 28},
      {"physx-mbp", physxMbpText.c_str(), kPairs | kChurn, physxMbp, physxMissing, 1u << 28},
      {"bvh", "bp::Bvh (broadphase/src/bvh/bvh.h)", kPairs | kRays | kChurn | kThreaded | kNearest,
       &makeBvh, "", 0},
      {"sweep", "bp::SweepGrid (broadphase/src/sweep/sweep_grid.h)",
       kPairs | kRays | kChurn | kThreaded | kNearest, &makeSweep, "", 0},
      {"auto", "bp::BroadPhase (broadphase/broad_phase.h) in automatic mode",
       kPairs | kRays | kChurn | kThreaded | kNearest, &makeAuto, "", 0},
      {"facade-bvh", "bp::BroadPhase with Structure::bvh",
       kPairs | kRays | kChurn | kThreaded | kNearest, &makeFacadeBvh, "", 0},
      {"facade-sweep", "bp::BroadPhase with Structure::sweep",
       kPairs | kRays | kChurn | kThreaded | kNearest, &makeFacadeSweep, "", 0},
      {"auto-cq",
       "bp::BroadPhase in automatic mode with concurrentQueries (a second sweep for queries, "
       "brought up to date by the first query after a frame)",
       kPairs | kRays | kChurn | kThreaded, &makeAutoConcurrentQueries, "", 0},
  }};
}

}  // namespace

std::span<const BackendInfo> allBackends() {
  static const auto table = makeTable();
  return table;
}

const BackendInfo* findBackend(std::string_view name) {
  for (const BackendInfo& b : allBackends())
    if (name == b.name) return &b;
  return nullptr;
}

}  // namespace bpbench
