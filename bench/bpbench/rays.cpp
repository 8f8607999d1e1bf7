// `bpbench rays`: a ray workload of docs/scenes.md (testkit's
// makeWorkloadRays: random by default, the rays of SCENES.md, or a lidar's
// scans, probes or lines of sight) against a standard scene's frame 0
// (`uniform` by default).
// Timed: each of --repeat castRays calls over all rays (the structure is
// built and updated, and what it makes for rays on demand made, before the
// clock starts: build ms counts them); the median is reported, and every
// call must give the same hits. A single cold call was the least steady
// figure: it pays the process's first touches of memory (see
// bench/README.md).
#include "child.h"
#include "commands.h"
#include "memory.h"
#include "plot.h"
#include "progress.h"
#include "table.h"

#include <broadphase/testkit/brute_force.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace bpbench {
namespace {

using Clock = std::chrono::steady_clock;

struct RaysResult {
  int threads = 1;
  uint64_t rays = 0;  // cast (a workload may give fewer than --rays)
  double buildMs = 0, seconds = 0, firstSeconds = 0, peakMib = 0;  // seconds: the median cast
  uint64_t hits = 0;
  // Kept by the parent across later forks: not inherited (see child.h).
  ParentVector<RayHit> first;     // closest / any: one per ray
  ParentVector<uint32_t> counts;  // all: hits per ray
  ParentVector<uint64_t> digest;  // all: FNV-1a of each ray's sorted (proxy, t bits)
};

uint64_t digestHits(std::span<const RayHit> hits) {
  uint64_t h = 14695981039346656037ull;
  for (const RayHit& hit : hits) {
    uint32_t tb;
    std::memcpy(&tb, &hit.t, 4);
    for (uint32_t v : {hit.proxy, tb}) {
      for (int byte = 0; byte < 4; ++byte) {
        h ^= (v >> (8 * byte)) & 0xffu;
        h *= 1099511628211ull;
      }
    }
  }
  return h;
}

void measure(const BackendInfo& info, const Options& o, uint32_t n, int threads, Bytes& out) {
  RaysResult r;
  Scheduler scheduler(threads);
  r.threads = (info.caps & kThreadedRays) ? scheduler.threadCount() : 1;
  const bp::Scene scene = bp::makeScene(o.scene, n, o.seed);
  const std::vector<Ray> rays = bp::makeWorkloadRays(o.workload, scene, o.rays);
  r.rays = rays.size();
  std::unique_ptr<Backend> backend = info.make();
  Progress progress(std::string("rays ") + info.name + " n=" + std::to_string(n), o.quiet);
  auto t0 = Clock::now();
  progress.during("building", [&] {
    backend->build(scene, scheduler);
    backend->prepareRays();
  });
  r.buildMs = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();

  // Casts the batch `repeat` times: r.seconds is the median, r.firstSeconds
  // the first. Each cast's answer is digested as --check compares them (any
  // hit: hit or not) and must equal the first's.
  std::vector<double> casts;
  uint64_t firstDigest = 0;
  auto timeCasts = [&](const std::string& what, auto&& cast, auto&& digest) {
    for (uint32_t k = 0; k < o.repeat; ++k) {
      t0 = Clock::now();
      progress.during(what, cast);
      casts.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      const uint64_t d = digest();
      if (k == 0)
        firstDigest = d;
      else if (d != firstDigest)
        throw std::runtime_error("cast " + std::to_string(k + 1) +
                                 " of the same batch gave other hits than the first");
    }
    r.firstSeconds = casts[0];
    std::sort(casts.begin(), casts.end());
    r.seconds = casts[casts.size() / 2];
  };
  const std::string what = "casting " + std::to_string(rays.size()) + " rays";
  std::vector<RayHit> all;
  std::vector<uint32_t> offsets;
  if (o.query == RayQuery::all) {
    timeCasts(
        what, [&] { backend->castRaysAll(scheduler, rays, all, offsets); },
        [&] {
          uint64_t h = digestHits(all);
          for (uint32_t v : offsets) h = (h ^ v) * 1099511628211ull;
          return h;
        });
    r.hits = all.size();
    for (size_t i = 0; i + 1 < offsets.size(); ++i) {
      r.counts.push_back(offsets[i + 1] - offsets[i]);
      r.digest.push_back(digestHits(std::span(all).subspan(offsets[i], r.counts.back())));
    }
  } else {
    r.first.resize(rays.size());
    timeCasts(
        what, [&] { backend->castRays(scheduler, rays, o.query, r.first); },
        [&] {
          if (o.query != RayQuery::any) return digestHits(r.first);
          uint64_t h = 14695981039346656037ull;
          for (const RayHit& hit : r.first) h = (h ^ uint64_t(hit.hit())) * 1099511628211ull;
          return h;
        });
    for (const RayHit& h : r.first) r.hits += h.hit();
  }
  progress.finish();
  r.peakMib = peakRssMib();
  out.put(r.threads);
  out.put(r.rays);
  out.put(r.buildMs);
  out.put(r.seconds);
  out.put(r.firstSeconds);
  out.put(r.peakMib);
  out.put(r.hits);
  out.putVector(r.first);
  out.putVector(r.counts);
  out.putVector(r.digest);
}

RaysResult run(const BackendInfo& info, const Options& o, uint32_t n, int threads) {
  Bytes b = runIsolated([&](Bytes& out) { measure(info, o, n, threads, out); }, !o.noFork);
  RaysResult r;
  r.threads = b.get<int>();
  r.rays = b.get<uint64_t>();
  r.buildMs = b.get<double>();
  r.seconds = b.get<double>();
  r.firstSeconds = b.get<double>();
  r.peakMib = b.get<double>();
  r.hits = b.get<uint64_t>();
  r.first = b.getVector<RayHit, DontForkAllocator<RayHit>>();
  r.counts = b.getVector<uint32_t, DontForkAllocator<uint32_t>>();
  r.digest = b.getVector<uint64_t, DontForkAllocator<uint64_t>>();
  return r;
}

// The first ray where two results differ, or -1.
int64_t firstDifference(const RaysResult& a, const RaysResult& b, RayQuery q, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    if (q == RayQuery::all) {
      if (a.counts[i] != b.counts[i] || a.digest[i] != b.digest[i]) return int64_t(i);
    } else if (q == RayQuery::any) {
      if (a.first[i].hit() != b.first[i].hit()) return int64_t(i);
    } else if (!(a.first[i] == b.first[i])) {
      return int64_t(i);
    }
  }
  return -1;
}

std::string describeRay(const RaysResult& r, RayQuery q, size_t i) {
  char buf[96];
  if (q == RayQuery::all)
    std::snprintf(buf, sizeof buf, "%u hits (digest %016llx)", r.counts[i],
                  static_cast<unsigned long long>(r.digest[i]));
  else if (!r.first[i].hit())
    std::snprintf(buf, sizeof buf, "no hit");
  else if (q == RayQuery::any)
    std::snprintf(buf, sizeof buf, "a hit");
  else
    std::snprintf(buf, sizeof buf, "box %u at t=%.9g", r.first[i].proxy, r.first[i].t);
  return buf;
}

}  // namespace

int commandRays(const Options& o) {
  std::vector<Row> rows;
  std::vector<std::string> failures;
  std::vector<PlotSeries> series(o.backends.size());
  bool anySerial = false;
  for (uint32_t n : o.ns) {
    for (int threads : o.threads) {
      std::vector<RaysResult> results;
      std::vector<const BackendInfo*> who;
      for (size_t bi = 0; bi < o.backends.size(); ++bi) {
        const BackendInfo* b = o.backends[bi];
        RaysResult r;
        try {
          r = run(*b, o, n, threads);
        } catch (const std::exception& e) {
          failures.push_back(std::string(b->name) + " n=" + std::to_string(n) + ": " + e.what());
          std::fprintf(stderr, "bpbench: backend %s failed: %s\n", b->name, e.what());
          continue;
        }
        if (!(b->caps & kThreadedRays)) anySerial = true;
        const double mrays = double(r.rays) / r.seconds / 1e6;
        const double firstMrays =
            results.empty() ? mrays : double(results[0].rays) / results[0].seconds / 1e6;
        Row row;
        row.add("backend", b->name)
            .add("scene", bp::sceneName(o.scene))
            .add("n", uint64_t(n))
            .add("workload", bp::rayWorkloadName(o.workload))
            .add("rays", r.rays)
            .add("threads", uint64_t(r.threads))
            .add("query", queryName(o.query))
            .add("build_ms", r.buildMs, 2)
            .add("seconds", r.seconds, 4)
            .add("mrays_per_s", mrays, 4)
            .add("mrays_per_s_per_thread", mrays / r.threads, 4)
            .add("casts", uint64_t(o.repeat))
            .add("first_mrays_per_s", double(r.rays) / r.firstSeconds / 1e6, 4)
            .add("hits", r.hits)
            .add("peak_mib", r.peakMib, 1)
            .add("ratio", mrays / firstMrays, 3)
            .add("ratio_to", results.empty() ? b->name : who[0]->name)
            .add("_threads",
                 std::to_string(r.threads) + ((b->caps & kThreadedRays) ? "" : " (serial)"))
            .add("_ratio", formatFixed(mrays / firstMrays, 2) + "x");
        rows.push_back(row);
        series[bi].name = b->name;
        series[bi].points.push_back({double(n), mrays});
        results.push_back(std::move(r));
        who.push_back(b);
      }
      if (!o.check || results.empty()) continue;
      // Every backend against the first, every ray.
      for (size_t k = 1; k < results.size(); ++k) {
        const int64_t i = firstDifference(results[0], results[k], o.query, results[0].rays);
        if (i >= 0)
          failures.push_back(std::string(who[k]->name) + " differs from " + who[0]->name +
                             " at n=" + std::to_string(n) + ", ray " + std::to_string(i) + ": " +
                             describeRay(results[k], o.query, size_t(i)) + " vs " +
                             describeRay(results[0], o.query, size_t(i)));
      }
      // The oracle on the first rays (all of them for small N): here, on one
      // thread, after the children are done.
      const bool firstIsBrute = std::string(who[0]->name) == "brute";
      const size_t count =
          firstIsBrute ? 0
                       : std::min<size_t>(results[0].rays, std::max<size_t>(1000, size_t(2e8 / n)));
      if (count) {
        const bp::Scene scene = bp::makeScene(o.scene, n, o.seed);
        // The batch's first `count` rays: every workload draws its rays in
        // batch order, so a shorter batch is the longer one's start.
        const std::vector<Ray> rays =
            bp::makeWorkloadRays(o.workload, scene, static_cast<uint32_t>(count));
        RaysResult oracle;
        for (const Ray& ray : rays) {
          if (o.query == RayQuery::all) {
            const auto h = bp::brute::castRayAll(scene.boxes, ray);
            oracle.counts.push_back(static_cast<uint32_t>(h.size()));
            oracle.digest.push_back(digestHits(h));
          } else {
            oracle.first.push_back(bp::brute::castRayClosest(scene.boxes, ray));
          }
        }
        const int64_t i = firstDifference(oracle, results[0], o.query, count);
        if (i >= 0)
          failures.push_back(
              std::string(who[0]->name) + " differs from brute at n=" + std::to_string(n) +
              ", ray " + std::to_string(i) + ": " + describeRay(results[0], o.query, size_t(i)) +
              " vs " + describeRay(oracle, o.query, size_t(i)));
        else
          std::fprintf(stderr, "bpbench: n=%u: the first %zu rays match brute force\n", n, count);
      }
    }
  }
  std::vector<std::string> notes;
  if (anySerial)
    notes.push_back(
        "(serial): peers run on one thread (embree: one rtcIntersect1/rtcOccluded1 loop).");
  notes.push_back("ratio: Mrays/s of this backend / Mrays/s of the first (> 1: faster).");
  printRows(rows, o.format,
            {{"backend", "backend"},
             {"scene", "scene"},
             {"n", "N"},
             {"workload", "workload"},
             {"rays", "rays"},
             {"query", "query"},
             {"_threads", "threads"},
             {"build_ms", "build ms"},
             {"mrays_per_s", "Mrays/s"},
             {"mrays_per_s_per_thread", "Mrays/s/thread"},
             {"hits", "hits"},
             {"peak_mib", "peak MiB"},
             {"_ratio", "ratio"}},
            notes);
  if (!o.plot.empty()) {
    PlotSpec p;
    p.title = std::string("bpbench rays: ") + queryName(o.query) + " hit, scene " +
              bp::sceneName(o.scene);
    p.subtitle = std::to_string(o.rays) + " rays, workload " + bp::rayWorkloadName(o.workload) +
                 " (docs/scenes.md); peers on one thread";
    p.xLabel = "N (boxes)";
    p.yLabel = "Mrays/s";
    p.logX = true;
    p.logY = true;
    for (auto& s : series)
      if (!s.points.empty()) p.series.push_back(s);
    writeSvg(o.plot, p);
  }
  if (o.check && failures.empty())
    std::fprintf(stderr, "bpbench: check passed: every backend gave the same hits\n");
  return printFailures(failures);
}

}  // namespace bpbench
