// `bpbench bound`: how BroadPhaseConfig::maxPairs bounds a frame that has
// far more pairs: N identical boxes (N (N - 1) / 2 pairs), one update() that
// must throw Error(capacityExceeded). Reports the seconds until the error,
// the peak resident memory of the process, and the BroadPhase's own
// memoryBytes() after the error. Each case runs in its own forked child
// process, so that peaks do not mix (child.h).
#include "commands.h"

#include "child.h"
#include "memory.h"
#include "progress.h"
#include "table.h"

#include <broadphase/broad_phase.h>

#include <chrono>
#include <cstdio>
#include <string>

namespace bpbench {
namespace {

using Clock = std::chrono::steady_clock;

// The structure each backend name stands for here: the facade, configured.
bp::Structure structureOf(const BackendInfo& b) {
  const std::string name = b.name;
  if (name == "bvh") return bp::Structure::bvh;
  if (name == "sweep") return bp::Structure::sweep;
  return bp::Structure::automatic;
}

struct BoundResult {
  int threads = 1;
  bool threw = false;
  bool capacity = false;  // the error was capacityExceeded
  bool valid = false;     // validate() was empty after it
  double seconds = 0, baseMib = 0, beforeMib = 0, peakMib = 0, structMib = 0;
  std::string message;
};

void measure(const BackendInfo& backend, uint32_t n, uint64_t maxPairs, int threads, bool quiet,
             Bytes& out) {
  BoundResult r;
  r.baseMib = currentRssMib();
  bp::BroadPhase broadphase(
      {.structure = structureOf(backend), .threads = threads, .maxPairs = maxPairs});
  r.threads = broadphase.threadCount();
  {
    const std::vector<bp::ProxyDesc> descs(n,
                                           {.box = bp::Aabb{bp::Vec3(0, 0, 0), bp::Vec3(1, 1, 1)}});
    std::vector<bp::ProxyId> ids(n);
    broadphase.add(descs, ids);
  }
  r.beforeMib = currentRssMib();
  Progress progress(std::string("bound ") + backend.name + " n=" + std::to_string(n), quiet);
  const auto start = Clock::now();
  progress.during("update", [&] {
    try {
      broadphase.update();
    } catch (const bp::Error& e) {
      r.threw = true;
      r.capacity = e.code() == bp::ErrorCode::capacityExceeded;
      r.message = e.what();
    }
  });
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  progress.finish();
  r.peakMib = peakRssMib();
  r.structMib = double(broadphase.memoryBytes()) / (1024.0 * 1024.0);
  r.valid = broadphase.validate().empty();

  out.put(r.threads);
  out.put(uint8_t(r.threw));
  out.put(uint8_t(r.capacity));
  out.put(uint8_t(r.valid));
  for (double v : {r.seconds, r.baseMib, r.beforeMib, r.peakMib, r.structMib}) out.put(v);
  out.putString(r.message);
}

BoundResult runBound(const BackendInfo& backend, uint32_t n, uint64_t maxPairs, int threads,
                     const Options& o) {
  Bytes b = runIsolated([&](Bytes& out) { measure(backend, n, maxPairs, threads, o.quiet, out); },
                        !o.noFork);
  BoundResult r;
  r.threads = b.get<int>();
  r.threw = b.get<uint8_t>() != 0;
  r.capacity = b.get<uint8_t>() != 0;
  r.valid = b.get<uint8_t>() != 0;
  for (double* v : {&r.seconds, &r.baseMib, &r.beforeMib, &r.peakMib, &r.structMib})
    *v = b.get<double>();
  r.message = b.getString();
  return r;
}

}  // namespace

int commandBound(const Options& o) {
  std::vector<Row> rows;
  std::vector<std::string> failures;
  for (uint32_t n : o.ns) {
    const uint64_t pairs = uint64_t(n) * (n - 1) / 2;
    if (pairs <= o.maxPairs)
      failures.push_back("n=" + std::to_string(n) + ": " + std::to_string(pairs) +
                         " pairs do not exceed --max-pairs " + std::to_string(o.maxPairs));
    for (int threads : o.threads) {
      for (const BackendInfo* b : o.backends) {
        const std::string what = std::string(b->name) + " n=" + std::to_string(n) +
                                 " threads=" + std::to_string(resolveThreads(threads));
        BoundResult r;
        try {
          r = runBound(*b, n, o.maxPairs, threads, o);
        } catch (const std::exception& e) {
          failures.push_back(what + ": " + e.what());
          std::fprintf(stderr, "bpbench: %s failed: %s\n", what.c_str(), e.what());
          continue;
        }
        if (!r.capacity)
          failures.push_back(what + ": " +
                             (r.threw ? "another error: " + r.message : "update() did not throw"));
        if (!r.valid) failures.push_back(what + ": validate() failed after the error");
        Row row;
        row.add("backend", b->name)
            .add("n", uint64_t(n))
            .add("max_pairs", o.maxPairs)
            .add("pairs", pairs)
            .add("threads", uint64_t(r.threads))
            .add("error", r.capacity ? "capacityExceeded"
                          : r.threw  ? "other"
                                     : "none")
            .add("seconds", r.seconds, 3)
            .add("base_mib", r.baseMib, 1)
            .add("before_mib", r.beforeMib, 1)
            .add("peak_mib", r.peakMib, 1)
            .add("struct_mib", r.structMib, 1)
            .add("valid", r.valid ? "yes" : "no");
        rows.push_back(row);
      }
    }
  }
  printRows(rows, o.format,
            {{"backend", "backend"},
             {"n", "N"},
             {"max_pairs", "max pairs"},
             {"threads", "threads"},
             {"error", "error"},
             {"seconds", "s to error"},
             {"before_mib", "MiB before"},
             {"peak_mib", "peak MiB"},
             {"struct_mib", "struct MiB"},
             {"valid", "valid"}},
            o.format == Format::table
                ? std::vector<std::string>{"N identical boxes, one BroadPhase::update() that must "
                                           "throw capacityExceeded; bvh, sweep, auto: "
                                           "Structure::bvh, sweep, automatic.",
                                           "MiB before: resident after the adds, before the "
                                           "update; peak MiB: the child process's peak; struct "
                                           "MiB: memoryBytes() after the error."}
                : std::vector<std::string>{});
  return printFailures(failures);
}

}  // namespace bpbench
