// SideRays: the RayTree a BroadPhase::Impl::Side keeps beside its structure for
// rays, over the boxes the structure holds (leaf ids are structure slots),
// built or refit on demand.
//
// The structure's version (Side::version) counts every change queries can
// see: an add (new slots: the tree is rebuilt) and a batch move (the same
// slots: refit). A remove needs neither: its slot stops mapping to a proxy
// at once, and the refit gives a freed slot the empty box.
//
// BroadPhaseConfig::rayTree decides when the tree is made:
// - always: on the first ray after a change;
// - automatic: once the rays cast since the change, or those cast between
//   the last two changes (a frame predicts the next), would pay for it: a
//   refit after slots / kRefitDivisor rays, a build after slots /
//   kBuildDivisor (at least 64 either way); and a build once this version
//   and the one before each cast slots / kSteadyDivisor: a world that casts
//   that many every frame then refits at each, and the refits pay back the
//   build (without it a lidar of just under `slots` rays a frame, over a
//   world that all moves, would never reach a build and would walk the
//   structure at a twentieth of the tree's rate: docs/decisions/rays.md);
// - never: rays walk the structure.
//
// Thread safety: queries are const and run side by side, and the Side does
// not change while any runs. One query at a time makes the tree (an atomic
// flag, taken without waiting); the others walk the structure meanwhile. The
// tree is read only when `readyFor` equals the Side's version, and written
// only while it does not, so a tree being made is never read.
#pragma once

#include <broadphase/broad_phase.h>
#include "raytree/ray_tree.h"

#include <atomic>
#include <cstdint>

namespace bp {

struct SideRays {
  static constexpr uint64_t kNever = ~uint64_t(0);
  // The break-even points measured on `uniform` (docs/decisions.md, "Rays"):
  // a refit pays after about slots / 24 rays, a build after about slots.
  static constexpr uint32_t kRefitDivisor = 24;
  static constexpr uint32_t kBuildDivisor = 1;
  // Steady casting: three refits' worth of rays a version, so that each
  // refit leaves about twice its cost to pay back the build.
  static constexpr uint32_t kSteadyDivisor = 8;
  // A refit whose cost (RayTree::cost) passes this multiple of the cost at
  // the last build gives way to a build.
  static constexpr double kRefitCostLimit = 1.3;

  RayTree tree;
  std::atomic<uint64_t> readyFor{kNever};  // the Side version the tree answers for
  std::atomic<bool> making{false};
  // The rays the structure answered at version `countedFor`, and at the
  // version before.
  std::atomic<uint64_t> countedFor{kNever};
  std::atomic<uint64_t> rays{0};
  std::atomic<uint64_t> raysBefore{0};
  // Side::topology at the last build: written by the maker, read by every
  // ray for the price (a refit's or a build's).
  std::atomic<uint64_t> builtTopology{kNever};
  double costAtBuild = 0;  // only the maker reads and writes it

  SideRays() = default;
  SideRays(const SideRays&) = delete;
  SideRays& operator=(const SideRays&) = delete;
};

}  // namespace bp
