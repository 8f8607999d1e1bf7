#include "pairs.h"

#include "commands.h"

#include "child.h"
#include "memory.h"
#include "plot.h"
#include "progress.h"
#include "scene_step.h"
#include "stats.h"
#include "table.h"

#include <broadphase/testkit/brute_force.h>
#include <broadphase/testkit/brute_force_double.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <sstream>

namespace bpbench {
namespace {

using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// The first few differences between two sorted pair lists.
std::string describeDifference(const std::vector<Pair>& expected, const std::vector<Pair>& actual) {
  std::ostringstream s;
  s << "expected " << expected.size() << " pairs, got " << actual.size();
  size_t i = 0, j = 0;
  int shown = 0;
  while ((i < expected.size() || j < actual.size()) && shown < 5) {
    if (j == actual.size() || (i < expected.size() && expected[i] < actual[j])) {
      s << "; missing (" << expected[i].a << ", " << expected[i].b << ")";
      ++i, ++shown;
    } else if (i == expected.size() || actual[j] < expected[i]) {
      s << "; extra (" << actual[j].a << ", " << actual[j].b << ")";
      ++j, ++shown;
    } else {
      ++i, ++j;
    }
  }
  return s.str();
}

void measure(const PairsSpec& spec, Bytes& out) {
  PairsResult r;
  r.baseMib = currentRssMib();
  Scheduler scheduler(spec.threads);
  r.threads = (spec.backend->caps & kThreadedPairs) ? scheduler.threadCount() : 1;
  bp::Scene scene = bp::makeScene(spec.scene, spec.n, spec.seed);
  std::unique_ptr<Backend> backend = spec.backend->make();
  const bool offset = spec.offset != 0.0;
  if (offset && !backend->useOffset(spec.offset))
    throw std::runtime_error(std::string("--offset: backend ") + spec.backend->name +
                             " has no double path");
  const bp::DVec3 shift{spec.offset, spec.offset, spec.offset};
  std::vector<bp::DAabb> movedDouble, sceneDouble;

  std::vector<uint32_t> moving;
  for (uint32_t i = 0; i < scene.n; ++i)
    if (!scene.isStatic[i]) moving.push_back(i);
  std::vector<Aabb> moved(moving.size());
  std::vector<Pair> pairs;
  const bool bruteCheck =
      spec.check && spec.n <= kBruteCheckLimit && std::string(spec.backend->name) != "brute";

  Progress progress(std::string("pairs ") + spec.backend->name + " " + bp::sceneName(spec.scene) +
                        " n=" + std::to_string(spec.n),
                    spec.quiet);
  const auto t0 = Clock::now();
  progress.during("building", [&] { backend->build(scene, scheduler); });
  r.buildMs = msSince(t0);
  Scheduler callerOnly(1);            // --serial-step's staging
  std::vector<uint64_t> frameFaults;  // frames 1..F, as r.frameMs
  std::vector<double> firstQueries;   // frames 2..F
  for (uint32_t f = 1; f <= spec.frames; ++f) {
    stepScene(scene, scheduler, spec.serialStep);
    if (spec.wakeWorkers) backend->wakeWorkers(scheduler);
    for (size_t k = 0; k < moving.size(); ++k) moved[k] = scene.boxes[moving[k]];
    if (offset) {  // the engine's double boxes, untimed as the float ones
      movedDouble.resize(moving.size());
      for (size_t k = 0; k < moving.size(); ++k)
        movedDouble[k] = bp::brute::translated(moved[k], shift);
    }
    backend->stageMoves(moving, spec.serialStep ? callerOnly : scheduler);

    const uint64_t faultsBefore = minorFaults();
    const auto start = Clock::now();
    if (offset)
      backend->moveDouble(moving, movedDouble, scheduler);
    else
      backend->move(moving, moved, scheduler);
    backend->findPairs(scheduler, pairs);
    const double ms = msSince(start);
    frameFaults.push_back(minorFaults() - faultsBefore);
    backend->exportPairs(scheduler, pairs);
    if (const double q = backend->firstQueryMs(); q >= 0 && f > 1) firstQueries.push_back(q);

    r.frameMs.push_back(ms);
    r.frameCounts.push_back(pairs.size());
    r.frameHashes.push_back(bp::hashPairs(pairs));
    if (bruteCheck && r.checkError.empty()) {
      sceneDouble.clear();
      for (const Aabb& b : scene.boxes) sceneDouble.push_back(bp::brute::translated(b, shift));
      const std::vector<Pair> expected =
          offset ? bp::brute::findPairs(std::span<const bp::DAabb>(sceneDouble), scene.isStatic)
                 : bp::brute::findPairs(scene.boxes, scene.isStatic);
      ++r.bruteChecked;
      if (expected != pairs)
        r.checkError = "frame " + std::to_string(f) + ": " + describeDifference(expected, pairs);
    }
    char text[128];
    std::snprintf(text, sizeof text, "frame %u/%u  %.2f ms  %zu pairs", f, spec.frames, ms,
                  pairs.size());
    progress.update(double(f) / spec.frames, text);
  }
  progress.finish();

  const size_t untimed = r.frameMs.size() > 1 ? 1 : 0;  // frame 1, when there are more
  std::vector<double> timed(r.frameMs.begin() + ptrdiff_t(untimed), r.frameMs.end());
  r.medianMs = median(timed);
  r.p99Ms = percentile(timed, 99);
  r.maxMs = percentile(timed, 100);
  double sum = 0;
  for (double v : timed) sum += v;
  r.meanMs = sum / double(timed.size());
  for (size_t f = untimed; f < frameFaults.size(); ++f) {
    r.faultsMax = std::max(r.faultsMax, frameFaults[f]);
    r.faultsMean += double(frameFaults[f]);
  }
  r.faultsMean /= double(timed.size());
  r.pairs = r.frameCounts.back();
  r.hash = r.frameHashes.back();
  r.structMib = double(backend->memoryBytes()) / (1024.0 * 1024.0);
  r.memoryParts = backend->memoryParts();
  r.peakMib = peakRssMib();
  if (!firstQueries.empty()) r.firstQueryMs = median(firstQueries);

  out.put(r.threads);
  for (double v :
       {r.buildMs, r.medianMs, r.p99Ms, r.meanMs, r.maxMs, r.baseMib, r.peakMib, r.structMib})
    out.put(v);
  out.put(r.pairs);
  out.put(r.hash);
  out.put(r.faultsMax);
  out.put(r.faultsMean);
  out.putVector(r.frameMs);
  out.putVector(r.frameCounts);
  out.putVector(r.frameHashes);
  out.put(r.bruteChecked);
  out.putString(r.checkError);
  out.putVector(r.memoryParts);
  out.put(r.firstQueryMs);
}

}  // namespace

PairsResult runPairs(const PairsSpec& spec) {
  Bytes b = runIsolated([&](Bytes& out) { measure(spec, out); }, !spec.noFork);
  PairsResult r;
  r.threads = b.get<int>();
  for (double* v : {&r.buildMs, &r.medianMs, &r.p99Ms, &r.meanMs, &r.maxMs, &r.baseMib, &r.peakMib,
                    &r.structMib})
    *v = b.get<double>();
  r.pairs = b.get<uint64_t>();
  r.hash = b.get<uint64_t>();
  r.faultsMax = b.get<uint64_t>();
  r.faultsMean = b.get<double>();
  r.frameMs = b.getVector<double>();
  r.frameCounts = b.getVector<uint64_t>();
  r.frameHashes = b.getVector<uint64_t>();
  r.bruteChecked = b.get<uint32_t>();
  r.checkError = b.getString();
  r.memoryParts = b.getVector<double>();
  r.firstQueryMs = b.get<double>();
  return r;
}

int commandPairs(const Options& o) {
  std::vector<Row> rows;
  std::vector<std::string> failures;
  std::vector<PlotSeries> series;
  bool anySerial = false;
  bool anyFirstQuery = false;
  const bool byThreads = o.ns.size() == 1 && o.threads.size() > 1;
  std::map<std::string, size_t> seriesOf;

  for (uint32_t n : o.ns) {
    for (int threads : o.threads) {
      double firstMedian = 0;
      std::string firstName;
      const PairsResult* reference = nullptr;
      std::vector<PairsResult> results;
      results.reserve(o.backends.size());
      // With --offset, auto runs twice: the float API, then the double API
      // with the scene translated (docs/large_worlds.md); ratio compares them.
      std::vector<std::pair<const BackendInfo*, double>> runs;
      for (const BackendInfo* b : o.backends) {
        runs.push_back({b, 0.0});
        if (o.offset != 0.0 && std::string(b->name) == "auto") runs.push_back({b, o.offset});
      }
      for (const auto& [b, offset] : runs) {
        PairsSpec spec{b,       o.scene, n,        o.seed,        o.frames,    threads,
                       o.check, o.quiet, o.noFork, o.wakeWorkers, o.serialStep};
        spec.offset = offset;
        char offsetText[32];
        std::snprintf(offsetText, sizeof offsetText, "%g", offset);
        const std::string label =
            offset != 0.0 ? std::string(b->name) + " +" + offsetText : std::string(b->name);
        PairsResult r;
        try {
          r = runPairs(spec);
        } catch (const std::exception& e) {
          failures.push_back(label + " n=" + std::to_string(n) + ": " + e.what());
          std::fprintf(stderr, "bpbench: backend %s failed: %s\n", b->name, e.what());
          continue;
        }
        results.push_back(r);
        const PairsResult& res = results.back();
        if (!reference) {
          reference = &res;
          firstMedian = res.medianMs;
          firstName = label;
        }
        if (!(b->caps & kThreadedPairs)) anySerial = true;

        if (o.check) {
          if (!res.checkError.empty())
            failures.push_back(label + " differs from brute at n=" + std::to_string(n) + ", " +
                               res.checkError);
          // Against the first backend, every frame.
          // (A translated scene may round to other pairs: brute in double checks it.)
          if (&res != reference && offset == 0.0) {
            for (size_t f = 0; f < res.frameHashes.size(); ++f) {
              if (res.frameHashes[f] != reference->frameHashes[f] ||
                  res.frameCounts[f] != reference->frameCounts[f]) {
                failures.push_back(
                    label + " differs from " + firstName + " at n=" + std::to_string(n) +
                    ", frame " + std::to_string(f + 1) + ": " + std::to_string(res.frameCounts[f]) +
                    " pairs (fnv1a " + hex16(res.frameHashes[f]) + ") vs " +
                    std::to_string(reference->frameCounts[f]) + " (fnv1a " +
                    hex16(reference->frameHashes[f]) + ")");
                break;
              }
            }
          }
        }

        Row row;
        row.add("backend", label)
            .add("scene", bp::sceneName(o.scene))
            .add("n", uint64_t(n))
            .add("seed", o.seed)
            .add("frames", uint64_t(o.frames))
            .add("threads", uint64_t(res.threads))
            .add("build_ms", res.buildMs, 2)
            .add("median_ms", res.medianMs, 3)
            .add("p99_ms", res.p99Ms, 3)
            .add("mean_ms", res.meanMs, 3)
            .add("faults_max", res.faultsMax)
            .add("faults_mean", res.faultsMean, 1)
            .add("pairs", res.pairs)
            .add("pairs_fnv1a", hex16(res.hash))
            .add("peak_mib", res.peakMib, 1)
            .add("base_mib", res.baseMib, 1)
            .add("structure_mib", res.structMib, 1)
            .add("bytes_per_proxy", res.structMib * 1048576.0 / double(n), 0)
            .add("ratio", firstMedian / res.medianMs, 3)
            .add("ratio_to", firstName)
            .add("checked", o.check ? (res.bruteChecked ? "brute+cross" : "cross") : "no");
        row.add("offset", offset, 0);
        if (res.firstQueryMs >= 0) {
          row.add("first_query_ms", res.firstQueryMs, 3);
          anyFirstQuery = true;
        }
        // The facade's bytes by part: a proxy's share of each, but for the
        // pair and event lists, which grow with the pairs: bytes a pair.
        for (size_t k = 0; k < res.memoryParts.size(); ++k) {
          const std::string part = kMemoryParts[k];
          const bool perPair = part == "pairs" || part == "events";
          const double per = perPair ? double(std::max<uint64_t>(res.pairs, 1)) : double(n);
          row.add("mem_" + part + (perPair ? "_per_pair" : "_per_proxy"), res.memoryParts[k] / per,
                  1);
        }
        row.add("_threads",
                std::to_string(res.threads) + ((b->caps & kThreadedPairs) ? "" : " (serial)"));
        row.add("_ratio", formatFixed(firstMedian / res.medianMs, 2) + "x");
        rows.push_back(row);

        const std::string key = label + (byThreads ? "" : " (" + std::to_string(threads) + "t)");
        const std::string seriesName = o.threads.size() > 1 && !byThreads ? key : label;
        if (!seriesOf.count(seriesName)) {
          seriesOf[seriesName] = series.size();
          series.push_back({seriesName, {}});
        }
        series[seriesOf[seriesName]].points.push_back(
            {byThreads ? double(res.threads) : double(n), res.medianMs});
      }
    }
  }

  std::vector<std::string> notes;
  if (anySerial)
    notes.push_back("(serial): peers and the oracle run on one thread whatever --threads says.");
  notes.push_back("ratio: median of the first backend / this median (> 1: faster than it).");
  std::vector<Column> columns = {
      {"backend", "backend"},   {"scene", "scene"},       {"n", "N"},
      {"_threads", "threads"},  {"build_ms", "build ms"}, {"median_ms", "median ms"},
      {"p99_ms", "p99 ms"},     {"pairs", "pairs"},       {"pairs_fnv1a", "fnv1a"},
      {"peak_mib", "peak MiB"}, {"_ratio", "ratio"}};
  if (anyFirstQuery) {
    columns.insert(columns.begin() + 7, {"first_query_ms", "1st query ms"});
    notes.push_back(
        "1st query ms: median time of the first query after a frame, made untimed after it "
        "(auto-cq: the query structure's catch-up, which a query thread pays).");
  }
  printRows(rows, o.format, columns, notes);

  if (!o.plot.empty()) {
    PlotSpec p;
    p.title = std::string("bpbench pairs: scene ") + bp::sceneName(o.scene);
    p.subtitle = std::to_string(o.frames) + " frames, seed " + std::to_string(o.seed) +
                 ", median of frames 2.." + std::to_string(o.frames) + "; peers on one thread";
    p.xLabel = byThreads ? "threads" : "N (boxes)";
    p.yLabel = "median ms per frame";
    p.logX = !byThreads;
    p.logY = true;
    p.series = series;
    writeSvg(o.plot, p);
  }

  if (o.check && failures.empty()) {
    std::fprintf(stderr, "bpbench: check passed: every backend gave the same pairs every frame%s\n",
                 o.ns.back() <= kBruteCheckLimit ? ", equal to brute::findPairs" : "");
  }
  return printFailures(failures);
}

}  // namespace bpbench
