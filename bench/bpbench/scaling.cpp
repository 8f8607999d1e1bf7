// `bpbench scaling`: the pairs benchmark at each thread count, as speed-up
// over the first thread count and parallel efficiency.
//
// With --repeat R the thread counts run R times in rounds (1, 2, 1, 2, ...),
// and each round's speed-up is its own ratio: the runs it compares are
// seconds apart, so a machine that drifts between a fast and a slow state
// moves both. The table gives the median round with the range. With
// --max-round-trip NS a round counts only when the core round trip stayed
// under NS before and after it (round_trip.h); others are run again, up to
// 4R rounds in all.
#include "commands.h"
#include "pairs.h"
#include "plot.h"
#include "round_trip.h"
#include "stats.h"
#include "table.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>

namespace bpbench {
namespace {

// One backend at one thread count, over the kept rounds.
struct Series {
  std::vector<double> medianMs, p99Ms, speedup;
  PairsResult last;
  std::vector<uint64_t> hashes;  // every run's, kept or not
};

}  // namespace

int commandScaling(const Options& o) {
  const size_t nb = o.backends.size(), nt = o.threads.size();
  std::vector<Series> series(nb * nt);
  auto at = [&](size_t b, size_t t) -> Series& { return series[b * nt + t]; };
  int rc = 0;

  const bool gated = o.maxRoundTripNs > 0;
  const bool measureTrips = gated || o.repeat > 1;
  const uint32_t maxRounds = gated ? 4 * o.repeat : o.repeat;
  uint32_t kept = 0, ran = 0;
  std::vector<double> keptTrips;
  for (; kept < o.repeat && ran < maxRounds; ++ran) {
    const double before = measureTrips ? measureCoreRoundTripNs() : -1;
    std::vector<PairsResult> round(nb * nt);
    std::vector<char> ok(nb * nt, 0);
    for (size_t b = 0; b < nb; ++b) {
      for (size_t t = 0; t < nt; ++t) {
        PairsSpec spec{o.backends[b], o.scene, o.ns[0],  o.seed,        o.frames,    o.threads[t],
                       false,         o.quiet, o.noFork, o.wakeWorkers, o.serialStep};
        try {
          round[b * nt + t] = runPairs(spec);
          ok[b * nt + t] = 1;
          at(b, t).hashes.push_back(round[b * nt + t].hash);
        } catch (const std::exception& e) {
          std::fprintf(stderr, "bpbench: backend %s, %d threads failed: %s\n", o.backends[b]->name,
                       o.threads[t], e.what());
          rc = 1;
        }
      }
    }
    const double after = measureTrips ? measureCoreRoundTripNs() : -1;
    // Fewer than two CPUs: no round trip to gate on.
    const bool good =
        !gated || before < 0 || (before <= o.maxRoundTripNs && after <= o.maxRoundTripNs);
    if (measureTrips && !o.quiet)
      std::fprintf(stderr, "bpbench: round %u: core round trip %.0f ns before, %.0f after: %s\n",
                   ran + 1, before, after, good ? "kept" : "discarded");
    if (!good) continue;
    ++kept;
    if (before >= 0) keptTrips.push_back(std::max(before, after));
    for (size_t b = 0; b < nb; ++b) {
      for (size_t t = 0; t < nt; ++t) {
        if (!ok[b * nt + t]) continue;
        Series& s = at(b, t);
        const PairsResult& r = round[b * nt + t];
        s.medianMs.push_back(r.medianMs);
        s.p99Ms.push_back(r.p99Ms);
        s.last = r;
        if (ok[b * nt]) s.speedup.push_back(round[b * nt].medianMs / r.medianMs);
      }
    }
  }
  if (kept < o.repeat) {
    std::fprintf(stderr,
                 "bpbench: FAILED: only %u of %u rounds had a core round trip under %.0f ns "
                 "(%u run)\n",
                 kept, o.repeat, o.maxRoundTripNs, ran);
    rc = 1;
  }

  std::vector<Row> rows;
  PlotSpec plot;
  plot.title = std::string("bpbench scaling: scene ") + bp::sceneName(o.scene) +
               ", N = " + std::to_string(o.ns[0]);
  plot.subtitle = std::to_string(o.frames) + " frames, median of frames 2.." +
                  std::to_string(o.frames) + "; dashed: ideal (first / threads)";
  plot.xLabel = "threads";
  plot.yLabel = "median ms per frame";
  plot.logY = true;
  bool serialPeer = false;
  for (size_t b = 0; b < nb; ++b) {
    const BackendInfo* backend = o.backends[b];
    if (!(backend->caps & kThreadedPairs)) serialPeer = true;
    PlotSeries line{backend->name, {}}, ideal{std::string(backend->name) + " ideal", {}, true};
    const int baseThreads = resolveThreads(o.threads[0]);
    const double baseMs = median(at(b, 0).medianMs);
    for (size_t t = 0; t < nt; ++t) {
      Series& s = at(b, t);
      if (s.medianMs.empty()) continue;
      const int used = resolveThreads(o.threads[t]);  // what was asked for (peers still use one)
      const double ms = median(s.medianMs);
      const double speedup = median(s.speedup);
      // No speed-up when the first thread count failed in every kept round.
      const bool none = s.speedup.empty();
      const double lo = none ? NAN : *std::min_element(s.speedup.begin(), s.speedup.end());
      const double hi = none ? NAN : *std::max_element(s.speedup.begin(), s.speedup.end());
      const double efficiency = speedup / (double(used) / double(baseThreads));
      std::string shown = formatFixed(speedup, 2) + "x";
      if (s.speedup.size() > 1) shown += " (" + formatFixed(lo, 2) + "-" + formatFixed(hi, 2) + ")";
      Row row;
      row.add("backend", backend->name)
          .add("scene", bp::sceneName(o.scene))
          .add("n", uint64_t(o.ns[0]))
          .add("seed", o.seed)
          .add("threads", uint64_t(used))
          .add("threads_used", uint64_t(s.last.threads))
          .add("rounds", uint64_t(s.speedup.size()))
          .add("median_ms", ms, 3)
          .add("p99_ms", median(s.p99Ms), 3)
          .add("pairs", s.last.pairs)
          .add("pairs_fnv1a", hex16(s.last.hash))
          .add("peak_mib", s.last.peakMib, 1)
          .add("speedup", speedup, 3)
          .add("speedup_min", lo, 3)
          .add("speedup_max", hi, 3)
          .add("efficiency", efficiency, 3)
          .add("_speedup", shown)
          .add("_efficiency", formatFixed(efficiency * 100, 0) + "%");
      rows.push_back(row);
      line.points.push_back({double(used), ms});
      ideal.points.push_back({double(used), baseMs * baseThreads / used});
    }
    if (!line.points.empty()) {
      plot.series.push_back(line);
      if (backend->caps & kThreadedPairs) plot.series.push_back(ideal);
    }
    // Identical pairs at every thread count and in every round: the
    // determinism promise.
    std::vector<uint64_t> hashes;
    for (size_t t = 0; t < nt; ++t)
      hashes.insert(hashes.end(), at(b, t).hashes.begin(), at(b, t).hashes.end());
    if (std::adjacent_find(hashes.begin(), hashes.end(), std::not_equal_to<>()) != hashes.end()) {
      std::fprintf(
          stderr,
          "bpbench: FAILED: %s gives different pairs in different runs (thread counts, rounds)\n",
          backend->name);
      rc = 1;
    }
  }
  std::vector<std::string> notes = {
      "speed-up: median at the first thread count / this median; efficiency: speed-up / "
      "(threads / first threads)."};
  if (o.repeat > 1 || gated) {
    std::string n = "rounds: " + std::to_string(kept) + " kept of " + std::to_string(ran);
    if (gated)
      n += ", each with a core round trip under " + formatFixed(o.maxRoundTripNs, 0) + " ns";
    if (!keptTrips.empty())
      n += " (kept rounds: " + formatFixed(median(keptTrips), 0) + " ns median)";
    n += "; ms is the median round, speed-up the median of the rounds' own ratios (min-max).";
    notes.push_back(n);
  }
  if (o.wakeWorkers)
    notes.push_back(
        "--wake-workers: each frame's workers were woken after the scene step, before the "
        "moves were gathered (untimed).");
  if (o.serialStep)
    notes.push_back(
        "--serial-step: the scene was stepped and the moves staged on the calling thread "
        "alone (untimed), so each frame's workers had idled through it.");
  if (serialPeer)
    notes.push_back("note: peers and the oracle run on one thread; their scaling is flat.");
  printRows(rows, o.format,
            {{"backend", "backend"},
             {"scene", "scene"},
             {"n", "N"},
             {"threads", "threads"},
             {"median_ms", "median ms"},
             {"p99_ms", "p99 ms"},
             {"pairs", "pairs"},
             {"_speedup", "speed-up"},
             {"_efficiency", "efficiency"}},
            o.format == Format::table ? notes : std::vector<std::string>{});
  if (!o.plot.empty()) writeSvg(o.plot, plot);
  return rc;
}

}  // namespace bpbench
