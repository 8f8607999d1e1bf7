// `bpbench nearest`: k-nearest queries against a standard scene's frame 0.
// The points are drawn uniformly in the scene's motion domain (SceneRng,
// seed --seed + 3), one query per ten boxes unless --queries says. Timed:
// the queries one after another on the calling thread, after the build and
// what the backend makes for queries on demand (prepareRays: the facade's
// ray tree). Every backend's answers must equal the first's; --check also
// compares the first's with brute force on the first queries.
#include "child.h"
#include "commands.h"
#include "progress.h"
#include "query_points.h"
#include "table.h"

#include <broadphase/testkit/brute_force.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace bpbench {
namespace {

using Clock = std::chrono::steady_clock;

struct NearestResult {
  double buildMs = 0, seconds = 0;
  ParentVector<uint64_t> digest;  // per query: FNV-1a of its (proxy, distance bits)
};

uint64_t digestNeighbours(const std::vector<bp::Neighbour>& found) {
  uint64_t h = 14695981039346656037ull;
  for (const bp::Neighbour& n : found) {
    uint32_t bits;
    std::memcpy(&bits, &n.distanceSquared, 4);
    for (const uint32_t v : {n.proxy, bits})
      for (int byte = 0; byte < 4; ++byte) {
        h ^= (v >> (8 * byte)) & 0xffu;
        h *= 1099511628211ull;
      }
  }
  return h;
}

uint32_t queriesFor(const Options& o, uint32_t n) {
  return o.queries ? o.queries : std::max<uint32_t>(1, n / 10);
}

void measure(const BackendInfo& info, const Options& o, uint32_t n, uint32_t k, Bytes& out) {
  Scheduler scheduler(1);
  const bp::Scene scene = bp::makeScene(o.scene, n, o.seed);
  const std::vector<bp::Vec3> points = makeQueryPoints(scene, queriesFor(o, n), o.seed);
  std::unique_ptr<Backend> backend = info.make();
  Progress progress(
      std::string("nearest ") + info.name + " n=" + std::to_string(n) + " k=" + std::to_string(k),
      o.quiet);
  auto t0 = Clock::now();
  progress.during("building", [&] {
    backend->build(scene, scheduler);
    backend->prepareRays();
  });
  const double buildMs = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  std::vector<uint64_t> digest(points.size());
  std::vector<bp::Neighbour> found;
  // The median of --repeat passes over every point (each the same answers).
  std::vector<double> passes;
  for (uint32_t pass = 0; pass < o.repeat; ++pass) {
    t0 = Clock::now();
    progress.during("querying", [&] {
      for (size_t q = 0; q < points.size(); ++q) {
        backend->nearest(points[q], k, found);
        if (pass == 0) digest[q] = digestNeighbours(found);
      }
    });
    passes.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  progress.finish();
  std::sort(passes.begin(), passes.end());
  out.put(buildMs);
  out.put(passes[passes.size() / 2]);
  out.putVector(digest);
}

NearestResult run(const BackendInfo& info, const Options& o, uint32_t n, uint32_t k) {
  Bytes b = runIsolated([&](Bytes& out) { measure(info, o, n, k, out); }, !o.noFork);
  NearestResult r;
  r.buildMs = b.get<double>();
  r.seconds = b.get<double>();
  r.digest = b.getVector<uint64_t, DontForkAllocator<uint64_t>>();
  return r;
}

int64_t firstDifference(const NearestResult& a, const NearestResult& b, size_t count) {
  for (size_t q = 0; q < count; ++q)
    if (a.digest[q] != b.digest[q]) return int64_t(q);
  return -1;
}

}  // namespace

int commandNearest(const Options& o) {
  std::vector<Row> rows;
  std::vector<std::string> failures;
  for (uint32_t n : o.ns) {
    for (uint32_t k : o.ks) {
      std::vector<NearestResult> results;
      std::vector<const BackendInfo*> who;
      for (const BackendInfo* b : o.backends) {
        NearestResult r;
        try {
          r = run(*b, o, n, k);
        } catch (const std::exception& e) {
          failures.push_back(std::string(b->name) + " n=" + std::to_string(n) + ": " + e.what());
          continue;
        }
        const double us = r.seconds / double(queriesFor(o, n)) * 1e6;
        const double firstUs =
            results.empty() ? us : results[0].seconds / double(queriesFor(o, n)) * 1e6;
        Row row;
        row.add("backend", b->name)
            .add("scene", bp::sceneName(o.scene))
            .add("n", uint64_t(n))
            .add("k", uint64_t(k))
            .add("queries", uint64_t(queriesFor(o, n)))
            .add("build_ms", r.buildMs, 2)
            .add("us_per_query", us, 3)
            .add("ratio", us / firstUs, 3)
            .add("ratio_to", results.empty() ? b->name : who[0]->name)
            .add("_ratio", formatFixed(us / firstUs, 2) + "x");
        rows.push_back(row);
        results.push_back(std::move(r));
        who.push_back(b);
      }
      if (results.empty()) continue;
      for (size_t i = 1; i < results.size(); ++i) {
        const int64_t q = firstDifference(results[0], results[i], results[0].digest.size());
        if (q >= 0)
          failures.push_back(std::string(who[i]->name) + " differs from " + who[0]->name +
                             " at n=" + std::to_string(n) + " k=" + std::to_string(k) + ", query " +
                             std::to_string(q));
      }
      if (!o.check || std::string(who[0]->name) == "brute") continue;
      // The oracle on the first queries, here, on one thread.
      const bp::Scene scene = bp::makeScene(o.scene, n, o.seed);
      const std::vector<bp::Vec3> points = makeQueryPoints(scene, queriesFor(o, n), o.seed);
      const size_t count = std::min<size_t>(points.size(), std::max<size_t>(100, size_t(2e8 / n)));
      for (size_t q = 0; q < count; ++q)
        if (digestNeighbours(bp::brute::nearest(scene.boxes, points[q], k)) !=
            results[0].digest[q]) {
          failures.push_back(std::string(who[0]->name) +
                             " differs from brute at n=" + std::to_string(n) +
                             " k=" + std::to_string(k) + ", query " + std::to_string(q));
          break;
        }
      std::fprintf(stderr, "bpbench: n=%u k=%u: the first %zu queries checked against brute\n", n,
                   k, count);
    }
  }
  printRows(rows, o.format,
            {{"backend", "backend"},
             {"scene", "scene"},
             {"n", "N"},
             {"k", "k"},
             {"queries", "queries"},
             {"build_ms", "build ms"},
             {"us_per_query", "us/query"},
             {"_ratio", "time ratio"}},
            {"one thread; time ratio: this backend's time a query / the first's (< 1: faster)."});
  if (o.check && failures.empty())
    std::fprintf(stderr, "bpbench: check passed: every backend gave the same neighbours\n");
  return printFailures(failures);
}

}  // namespace bpbench
