// Command line: subcommands, options, validation. Every bad argument throws
// UsageError, which main() turns into a message on stderr and exit code 2.
#pragma once

#include "backend.h"

#include <broadphase/testkit/ray_workloads.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace bpbench {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class Format { table, csv, json };

struct Options {
  std::string command;  // pairs, rays, nearest, cliffs, stress, scaling, bound, rollback, list
  bp::SceneKind scene = bp::SceneKind::uniform;
  std::vector<uint32_t> ns;  // one row group per N
  uint32_t frames = 30;
  std::vector<int> threads;  // 0: every hardware thread
  std::vector<const BackendInfo*> backends;
  uint64_t seed = 1;
  bool check = false;
  uint32_t rays = 1000000;
  RayQuery query = RayQuery::closest;
  bp::RayWorkload workload = bp::RayWorkload::random;  // rays: which rays (docs/scenes.md)
  double seconds = 30;
  double churnPercent = 1;       // stress, rollback
  uint64_t maxPairs = 10000000;  // bound: BroadPhaseConfig::maxPairs
  uint32_t repeat = 1;           // scaling: rounds of every thread count; rays: casts
  double maxRoundTripNs = 0;     // scaling: keep rounds under this core round trip (0: all)
  Format format = Format::table;
  std::string plot;  // SVG path, empty: none
  bool quiet = false;
  bool noFork = false;
  bool wakeWorkers = false;  // pairs, scaling: wake the workers before each frame
  bool serialStep = false;   // pairs, scaling: step the scene on the calling thread alone
  double offset = 0;         // pairs: also run auto's double path, the scene translated by this
  std::vector<uint32_t> ks;  // nearest: k of each row group
  uint32_t queries = 0;      // nearest: queries (0: one per ten boxes)
  std::vector<bp::SceneKind> scenes;  // cliffs: its scenes
};

// Parses argv (without the program name). Throws UsageError.
Options parseArgs(int argc, char** argv);

std::string usage();

// Hardware threads available to this process (affinity mask), resolving 0.
int resolveThreads(int requested);

const char* queryName(RayQuery q);

}  // namespace bpbench
