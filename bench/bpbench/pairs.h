// `bpbench pairs`: frames of motion, each one timed from the moves to the
// complete sorted exact pair list. Also the engine under `scaling`.
#pragma once

#include "cli.h"

#include <cstdint>
#include <string>
#include <vector>

namespace bpbench {

struct PairsSpec {
  const BackendInfo* backend;
  bp::SceneKind scene;
  uint32_t n;
  uint64_t seed;
  uint32_t frames;
  int threads;  // requested (0: all)
  bool check;   // compare every frame with the oracle (N <= kBruteCheckLimit)
  bool quiet;
  bool noFork;
  // Wake the workers after the scene step, before the moves are gathered
  // (untimed), as an engine would when its frame's serial part starts.
  bool wakeWorkers = false;
  // Step the scene and stage the moves on the calling thread alone (untimed;
  // scene_step.h): the workers idle before every frame and may sleep.
  bool serialStep = false;
  // Not 0: the facade's double path (Backend::useOffset), the scene
  // translated by this on every axis, checked against brute::findPairs in
  // double.
  double offset = 0;
};

inline constexpr uint32_t kBruteCheckLimit = 20000;

struct PairsResult {
  int threads = 1;  // actually used
  double buildMs = 0, medianMs = 0, p99Ms = 0, meanMs = 0, maxMs = 0;
  uint64_t pairs = 0, hash = 0;
  double baseMib = 0, peakMib = 0, structMib = 0;
  std::vector<double> memoryParts;  // bytes, kMemoryParts' order (empty: not split)
  std::vector<double> frameMs;      // frames 1..F
  double firstQueryMs = -1;         // median of Backend::firstQueryMs() on frames 2..F (< 0: none)
  // Minor page faults in the timed part of frames 2..F: the most in one
  // frame, and the mean.
  uint64_t faultsMax = 0;
  double faultsMean = 0;
  std::vector<uint64_t> frameCounts, frameHashes;
  uint32_t bruteChecked = 0;  // frames compared with the oracle
  std::string checkError;     // empty: every compared frame matched
};

// Runs one backend on one scene, in a forked child unless spec.noFork.
PairsResult runPairs(const PairsSpec& spec);

}  // namespace bpbench
