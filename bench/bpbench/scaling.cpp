// `bpbench scaling`: the pairs benchmark at each thread count, as speed-up
// over the first thread count and parallel efficiency.
#include "commands.h"
#include "pairs.h"
#include "plot.h"
#include "table.h"

#include <cstdio>

namespace bpbench {

int commandScaling(const Options& o) {
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
  int rc = 0;
  for (const BackendInfo* b : o.backends) {
    if (!(b->caps & kThreadedPairs)) serialPeer = true;
    PlotSeries series{b->name, {}}, ideal{std::string(b->name) + " ideal", {}, true};
    double baseMs = 0;
    int baseThreads = 0;
    for (int t : o.threads) {
      PairsSpec spec{b, o.scene, o.ns[0], o.seed, o.frames, t, false, o.quiet, o.noFork};
      PairsResult r;
      try {
        r = runPairs(spec);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "bpbench: backend %s, %d threads failed: %s\n", b->name, t, e.what());
        rc = 1;
        continue;
      }
      const int used = resolveThreads(t);  // what was asked for (peers still use one)
      if (baseThreads == 0) baseMs = r.medianMs, baseThreads = used;
      const double speedup = baseMs / r.medianMs;
      const double efficiency = speedup / (double(used) / double(baseThreads));
      Row row;
      row.add("backend", b->name)
          .add("scene", bp::sceneName(o.scene))
          .add("n", uint64_t(o.ns[0]))
          .add("seed", o.seed)
          .add("threads", uint64_t(used))
          .add("threads_used", uint64_t(r.threads))
          .add("median_ms", r.medianMs, 3)
          .add("p99_ms", r.p99Ms, 3)
          .add("pairs", r.pairs)
          .add("pairs_fnv1a", hex16(r.hash))
          .add("peak_mib", r.peakMib, 1)
          .add("speedup", speedup, 3)
          .add("efficiency", efficiency, 3)
          .add("_speedup", formatFixed(speedup, 2) + "x")
          .add("_efficiency", formatFixed(efficiency * 100, 0) + "%");
      rows.push_back(row);
      series.points.push_back({double(used), r.medianMs});
      ideal.points.push_back({double(used), baseMs * baseThreads / used});
    }
    if (!series.points.empty()) {
      plot.series.push_back(series);
      if (b->caps & kThreadedPairs) plot.series.push_back(ideal);
    }
  }
  // Identical pairs at every thread count: the determinism promise.
  for (size_t i = 1; i < rows.size(); ++i) {
    if (rows[i].find("backend")->text == rows[0].find("backend")->text &&
        rows[i].find("pairs_fnv1a")->text != rows[i - 1].find("pairs_fnv1a")->text &&
        rows[i].find("backend")->text == rows[i - 1].find("backend")->text) {
      std::fprintf(stderr, "bpbench: FAILED: %s gives different pairs at different thread counts\n",
                   rows[i].find("backend")->text.c_str());
      rc = 1;
    }
  }
  std::vector<std::string> notes = {
      "speed-up: median at the first thread count / this median; efficiency: speed-up / "
      "(threads / first threads)."};
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
