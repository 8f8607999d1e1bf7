// `bpbench rollback`: BroadPhase::saveState / loadState as rollback netcode
// uses them. F frames of a standard scene (motion, churn), a snapshot taken
// at frame F/2 with that frame's moves and churn pending, the run carried
// on to F, the snapshot loaded back into the same object, and frames F/2..F
// run again: each re-run frame's digest (pairs, begun, ended with their user
// data, the handles add() returned, closest hits of rays) must equal the
// first run's. Reports the save and load times, the snapshot's bytes per
// proxy against memoryBytes(). Each case runs in its own forked child
// process (child.h).
#include "commands.h"

#include "child.h"
#include "progress.h"
#include "table.h"

#include <broadphase/broad_phase.h>
#include <broadphase/testkit/scene.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdio>
#include <string>

namespace bpbench {
namespace {

using Clock = std::chrono::steady_clock;

bp::Structure structureOf(const BackendInfo& b) {
  const std::string name = b.name;
  if (name == "bvh") return bp::Structure::bvh;
  if (name == "sweep") return bp::Structure::sweep;
  return bp::Structure::automatic;
}

// FNV-1a 64 over 64-bit words.
struct Digest {
  uint64_t h = 0xcbf29ce484222325ull;
  void add(uint64_t v) {
    for (int k = 0; k < 8; ++k) h = (h ^ ((v >> (8 * k)) & 0xFF)) * 0x100000001b3ull;
  }
};

// The engine side of a run: the scene, each box's handle (a null handle
// while churned out), the churn's random draws. Copied at the save point.
struct World {
  bp::Scene scene;
  std::vector<bp::ProxyId> handle;
  bp::SceneRng rng{99};
  std::vector<uint32_t> out;     // boxes removed by the last frame's churn
  std::vector<bp::ProxyId> ids;  // scratch of the batch move
  std::vector<bp::Aabb> boxes;
};

// The calls of frame f before its update: the moves (one batch), then the
// churn: the boxes removed last frame come back (new handles, from the free
// slots those removals left, so their order matters), and `churn` others
// are removed.
void prepare(World& w, bp::BroadPhase& bp, uint32_t churn, Digest& d) {
  w.scene.step();
  w.ids.clear();
  w.boxes.clear();
  for (uint32_t j = 0; j < w.scene.n; ++j) {
    if (w.scene.isStatic[j] || w.handle[j] == bp::ProxyId{}) continue;
    w.ids.push_back(w.handle[j]);
    w.boxes.push_back(w.scene.boxes[j]);
  }
  bp.move(w.ids, w.boxes);
  for (uint32_t j : w.out) {
    w.handle[j] = bp.add(
        {.box = w.scene.boxes[j],
         .motion = w.scene.isStatic[j] ? bp::MotionType::staticBody : bp::MotionType::dynamic,
         .userData = j});
    d.add(uint64_t(w.handle[j].index) << 32 | w.handle[j].generation);
  }
  w.out.clear();
  for (uint32_t c = 0; c < churn; ++c) {
    const uint32_t j = uint32_t(w.rng.next() % w.scene.n);
    if (w.handle[j] == bp::ProxyId{}) continue;
    bp.remove(w.handle[j]);
    w.handle[j] = bp::ProxyId{};
    w.out.push_back(j);
  }
}

// The update (its time in `updateMs`) and what it returns, then rays
// through the new frame.
void finish(bp::BroadPhase& bp, const std::vector<bp::Ray>& rays, Digest& d, double& updateMs) {
  const auto start = Clock::now();
  const bp::FramePairs& f = bp.update();
  updateMs = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  for (std::span<const bp::ProxyPair> list : {f.pairs, f.begun, f.ended}) {
    d.add(list.size());
    for (const bp::ProxyPair& p : list) {
      d.add(p.key());
      d.add(p.userDataA);
      d.add(p.userDataB);
    }
  }
  for (const bp::Ray& r : rays) {
    const bp::RayHit hit = bp.castRay(r);
    d.add(uint64_t(hit.proxy) << 32 | std::bit_cast<uint32_t>(hit.t));
  }
}

struct RollbackResult {
  int threads = 1;
  double saveMs = 0, loadMs = 0, updateMs = 0;
  uint64_t bytes = 0, settledBytes = 0, memoryBytes = 0, proxies = 0;
  uint32_t framesRerun = 0, framesDiffering = 0, firstDiffering = 0;
};

double medianOf(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void measure(const BackendInfo& backend, const Options& o, uint32_t n, int threads, Bytes& out) {
  RollbackResult r;
  const uint32_t frames = o.frames;
  const uint32_t saveAt = std::max(1u, frames / 2);
  const uint32_t churn = uint32_t(double(n) * o.churnPercent / 100.0);
  bp::BroadPhase bp({.structure = structureOf(backend), .threads = threads});
  r.threads = bp.threadCount();
  World w{bp::makeScene(o.scene, n, o.seed), {}, bp::SceneRng(o.seed + 99), {}, {}, {}};
  for (uint32_t j = 0; j < n; ++j)
    w.handle.push_back(bp.add(
        {.box = w.scene.boxes[j],
         .motion = w.scene.isStatic[j] ? bp::MotionType::staticBody : bp::MotionType::dynamic,
         .userData = j}));
  bp.update();
  const std::vector<bp::Ray> rays = bp::makeRays(n, 64);
  Progress progress(std::string("rollback ") + backend.name + " n=" + std::to_string(n), o.quiet);

  std::vector<uint64_t> digests(frames + 1);
  std::vector<std::byte> snapshot;
  World atSave = w;
  std::vector<double> updates;
  constexpr int kTimings = 5;  // save and load each timed this many times (median)
  const double steps = double(frames + (frames - saveAt + 1));
  for (uint32_t f = 1; f <= frames; ++f) {
    progress.update(double(f - 1) / steps, "frame " + std::to_string(f));
    Digest d;
    prepare(w, bp, churn, d);
    if (f == saveAt) {
      std::vector<double> ms;
      for (int k = 0; k < kTimings; ++k) {
        const auto start = Clock::now();
        bp.saveState(snapshot);
        ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
      }
      r.saveMs = medianOf(ms);
      r.bytes = snapshot.size();
      r.memoryBytes = bp.memoryBytes();
      r.proxies = bp.proxyCount();
      atSave = w;
      d = Digest{};  // the re-run starts here
    }
    double ms = 0;
    finish(bp, rays, d, ms);
    updates.push_back(ms);
    if (f == saveAt) {
      // The size of a snapshot with nothing pending (not loaded).
      std::vector<std::byte> settled;
      bp.saveState(settled);
      r.settledBytes = settled.size();
    }
    digests[f] = d.h;
  }
  r.updateMs = medianOf(updates);
  std::vector<double> ms;
  for (int k = 0; k < kTimings; ++k) {
    const auto start = Clock::now();
    bp.loadState(snapshot);
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  r.loadMs = medianOf(ms);
  w = atSave;
  for (uint32_t f = saveAt; f <= frames; ++f) {
    progress.update(double(frames + f - saveAt) / steps, "re-run frame " + std::to_string(f));
    Digest d;
    if (f != saveAt) prepare(w, bp, churn, d);
    double ms = 0;
    finish(bp, rays, d, ms);
    ++r.framesRerun;
    if (d.h != digests[f] && r.framesDiffering++ == 0) r.firstDiffering = f;
  }
  progress.finish();
  out.put(r);
}

}  // namespace

int commandRollback(const Options& o) {
  std::vector<Row> rows;
  std::vector<std::string> failures;
  for (uint32_t n : o.ns) {
    for (int threads : o.threads) {
      for (const BackendInfo* b : o.backends) {
        const std::string what = std::string(b->name) + " n=" + std::to_string(n) +
                                 " threads=" + std::to_string(resolveThreads(threads));
        RollbackResult r;
        try {
          Bytes bytes =
              runIsolated([&](Bytes& out) { measure(*b, o, n, threads, out); }, !o.noFork);
          r = bytes.get<RollbackResult>();
        } catch (const std::exception& e) {
          failures.push_back(what + ": " + e.what());
          std::fprintf(stderr, "bpbench: %s failed: %s\n", what.c_str(), e.what());
          continue;
        }
        if (o.check && r.framesDiffering != 0)
          failures.push_back(what + ": " + std::to_string(r.framesDiffering) + " of " +
                             std::to_string(r.framesRerun) +
                             " re-run frames differ from the first run, the first at frame " +
                             std::to_string(r.firstDiffering));
        const double perProxy = r.proxies ? double(r.bytes) / double(r.proxies) : 0;
        const double memPerProxy = r.proxies ? double(r.memoryBytes) / double(r.proxies) : 0;
        Row row;
        row.add("backend", b->name)
            .add("scene", bp::sceneName(o.scene))
            .add("n", uint64_t(n))
            .add("frames", uint64_t(o.frames))
            .add("threads", uint64_t(r.threads))
            .add("update_ms", r.updateMs, 3)
            .add("save_ms", r.saveMs, 3)
            .add("load_ms", r.loadMs, 3)
            .add("save_over_update", r.updateMs > 0 ? r.saveMs / r.updateMs : 0, 2)
            .add("load_over_update", r.updateMs > 0 ? r.loadMs / r.updateMs : 0, 2)
            .add("bytes", r.bytes)
            .add("bytes_per_proxy", perProxy, 1)
            .add("settled_bytes_per_proxy",
                 r.proxies ? double(r.settledBytes) / double(r.proxies) : 0, 1)
            .add("memory_bytes", r.memoryBytes)
            .add("memory_per_proxy", memPerProxy, 1)
            .add("memory_over_bytes", r.bytes ? double(r.memoryBytes) / double(r.bytes) : 0, 1)
            .add("frames_rerun", uint64_t(r.framesRerun))
            .add("identical", r.framesDiffering == 0 ? "yes" : "NO")
            .add("checked", o.check ? "yes" : "no");
        rows.push_back(row);
      }
    }
  }
  printRows(rows, o.format,
            {{"backend", "backend"},
             {"n", "N"},
             {"threads", "threads"},
             {"update_ms", "update ms"},
             {"save_ms", "save ms"},
             {"load_ms", "load ms"},
             {"bytes_per_proxy", "B/proxy"},
             {"settled_bytes_per_proxy", "settled B/proxy"},
             {"memory_per_proxy", "mem B/proxy"},
             {"memory_over_bytes", "mem/snapshot"},
             {"frames_rerun", "re-run"},
             {"identical", "identical"}},
            o.format == Format::table
                ? std::vector<std::string>{"Saved at frame F/2 with its moves and churn pending, "
                                           "run on to F, loaded back, frames F/2..F run again "
                                           "and compared (pairs, begun, ended, handles, rays).",
                                           "B/proxy: snapshot bytes / live proxies; settled: "
                                           "saved again after that frame's update (nothing "
                                           "pending); mem B/proxy: memoryBytes() / live "
                                           "proxies, at the save; update: median over the "
                                           "frames; save, load: median of 5."}
                : std::vector<std::string>{});
  return printFailures(failures);
}

}  // namespace bpbench
