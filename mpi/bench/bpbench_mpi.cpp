// bpbench-mpi: what DistributedBroadPhase costs each rank per frame, on the
// standard scenes. Like `bpbench pairs`: a frame is the batch move of every
// moving box a rank owns plus the update() that returns the exact pairs;
// the scene itself is stepped untimed, in full on every rank (so that a
// proxy's motion does not depend on where it lives).
//
//   mpirun -np 4 bpbench-mpi --scene uniform --n 100000 --frames 30 --threads 1
//   mpirun -np 4 bpbench-mpi --scene uniform --n 25000 --weak   # 25 000 per rank
//
// Rank 0 prints one row per rank: median frame time (wall), the rank's own
// work in it (its thread's CPU time outside MPI calls: what a machine with a
// core per rank would see, whatever else runs here) and the part of that in
// the rank's BroadPhase, the wall time in MPI calls (waiting for slower ranks
// included), bytes and
// messages sent per frame, ghosts held, ghost records and migrations per
// frame, proxies owned; then the frame time of the job (each frame's slowest
// rank, median over frames) and the load imbalance. --check compares every
// timed frame's union of pairs, begun and ended with one BroadPhase on rank
// 0 (untimed). --baseline (one rank) also times one plain BroadPhase on the
// same frames, for the facade's overhead.
#include <broadphase/mpi/distributed_broad_phase.h>
#include <broadphase/testkit/scene.h>

#include <mpi.h>
#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

namespace {

using bp::mpi::DistributedBroadPhase;
using bp::mpi::FrameStats;
using bp::mpi::GlobalPair;

struct Options {
  bp::SceneKind scene = bp::SceneKind::uniform;
  uint64_t n = 100000;
  int frames = 30;
  int warmup = 3;
  int threads = 1;
  bp::Structure structure = bp::Structure::automatic;
  float halo = 0;
  bool weak = false;
  bool check = false;
  bool baseline = false;
  bool csv = false;
};

struct Usage {
  std::string message;
};

const char* kUsage =
    "usage: bpbench-mpi [--scene uniform|clustered|sizes|static|plane] [--n N] [--frames F]\n"
    "                   [--warmup W] [--threads T] [--structure automatic|sweep|bvh]\n"
    "                   [--halo H] [--weak] [--check] [--baseline] [--format table|csv]\n"
    "  --n: boxes in all (or per rank with --weak); default 100000\n";

long integer(const std::string& option, const std::string& text, long lo, long hi) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || v != std::floor(v) || v < double(lo) || v > double(hi))
    throw Usage{"--" + option + ": '" + text + "' is not an integer in [" + std::to_string(lo) +
                ", " + std::to_string(hi) + "]"};
  return long(v);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int k = 1; k < argc; ++k) {
    const std::string arg = argv[k];
    if (arg.rfind("--", 0) != 0) throw Usage{"unexpected argument '" + arg + "'"};
    const std::string name = arg.substr(2);
    if (name == "weak") {
      o.weak = true;
      continue;
    }
    if (name == "check") {
      o.check = true;
      continue;
    }
    if (name == "baseline") {
      o.baseline = true;
      continue;
    }
    if (k + 1 >= argc) throw Usage{"--" + name + " needs a value"};
    const std::string value = argv[++k];
    if (name == "scene") {
      const auto s = bp::parseScene(value);
      if (!s)
        throw Usage{"--scene: '" + value + "' is not uniform, clustered, sizes, static or plane"};
      o.scene = *s;
    } else if (name == "n") {
      o.n = uint64_t(integer(name, value, 1, 100000000));
    } else if (name == "frames") {
      o.frames = int(integer(name, value, 1, 100000));
    } else if (name == "warmup") {
      o.warmup = int(integer(name, value, 0, 1000));
    } else if (name == "threads") {
      o.threads = int(integer(name, value, 0, 1024));
    } else if (name == "structure") {
      if (value == "automatic")
        o.structure = bp::Structure::automatic;
      else if (value == "sweep")
        o.structure = bp::Structure::sweep;
      else if (value == "bvh")
        o.structure = bp::Structure::bvh;
      else
        throw Usage{"--structure: '" + value + "' is not automatic, sweep or bvh"};
    } else if (name == "halo") {
      char* end = nullptr;
      o.halo = std::strtof(value.c_str(), &end);
      if (value.empty() || *end != '\0' || !(o.halo >= 0) || !std::isfinite(o.halo))
        throw Usage{"--halo: '" + value + "' is not a number >= 0"};
    } else if (name == "format") {
      if (value != "table" && value != "csv")
        throw Usage{"--format: '" + value + "' is not table or csv"};
      o.csv = value == "csv";
    } else {
      throw Usage{"unknown option --" + name};
    }
  }
  return o;
}

// The calling thread's CPU seconds (not counting time without a core).
double threadCpu() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / double(v.size());
}

// One rank's summary, as rank 0 gathers it: medians of times, means of
// counts per frame.
struct RankRow {
  double frameMs;     // wall: moveOwned + update
  double workMs;      // the rank thread's CPU outside MPI calls, same span
  double localMs;     // the rank thread's CPU in its BroadPhase::update
  double exchangeMs;  // wall: in MPI calls, waiting for other ranks included
  double bytesSent, messagesSent, collectives;
  double ghosts, ghostRecords, migrations, pairsSent, owned, reported;
  double bytesPerOwned;       // memoryBytes() / owned, after the last frame
  double localBytesPerOwned;  // the rank's BroadPhase's part of it
};

std::vector<GlobalPair> gatherPairs(std::span<const GlobalPair> mine, int size) {
  const int count = int(mine.size() * sizeof(GlobalPair));
  std::vector<int> counts(static_cast<size_t>(size)), displs(static_cast<size_t>(size));
  MPI_Gather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  int total = 0;
  for (int r = 0; r < size; ++r) {
    displs[size_t(r)] = total;
    total += counts[size_t(r)];
  }
  std::vector<GlobalPair> all(size_t(total) / sizeof(GlobalPair));
  MPI_Gatherv(mine.data(), count, MPI_BYTE, all.data(), counts.data(), displs.data(), MPI_BYTE, 0,
              MPI_COMM_WORLD);
  std::sort(all.begin(), all.end(), bp::mpi::pairBefore);
  return all;
}

std::vector<GlobalPair> toGlobal(std::span<const bp::ProxyPair> pairs) {
  std::vector<GlobalPair> out;
  out.reserve(pairs.size());
  for (const bp::ProxyPair& p : pairs) out.push_back({p.a, p.b, p.userDataA, p.userDataB});
  std::sort(out.begin(), out.end(), bp::mpi::pairBefore);
  return out;
}

int run(const Options& o, int rank, int size) {
  const uint64_t total = o.weak ? o.n * uint64_t(size) : o.n;
  bp::Scene scene = bp::makeScene(o.scene, uint32_t(total));
  DistributedBroadPhase world(
      MPI_COMM_WORLD, {.local = {.structure = o.structure, .threads = o.threads}, .halo = o.halo});
  // The reference: one BroadPhase over the whole scene on rank 0, where a
  // proxy's index is its id (added in id order) and its user data too.
  std::unique_ptr<bp::BroadPhase> single;
  if ((o.check || (o.baseline && size == 1)) && rank == 0)
    single = std::make_unique<bp::BroadPhase>(
        bp::BroadPhaseConfig{.structure = o.structure, .threads = o.threads});
  for (uint32_t i = 0; i < scene.n; ++i) {
    const bp::ProxyDesc d{
        .box = scene.boxes[i],
        .motion = scene.isStatic[i] ? bp::MotionType::staticBody : bp::MotionType::dynamic,
        .userData = i};
    if (int(i % uint32_t(size)) == rank) world.add(i, d);
    if (single) single->add(d);
  }
  world.update();
  if (single) single->update();

  std::vector<FrameStats> stats;
  std::vector<double> frameMs, workMs, singleMs, singleCpuMs;
  std::vector<bp::Aabb> boxes;
  std::vector<bp::ProxyId> handles;
  std::vector<bp::Aabb> allBoxes;
  bool checked = true;
  uint64_t pairsLast = 0;
  for (int frame = 0; frame < o.warmup + o.frames; ++frame) {
    scene.step();
    boxes.clear();
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    // Every owned box, moving or not: moveOwned skips those that did not
    // change, as an engine that hands over all its bodies would rely on.
    for (uint64_t id : world.ownedIds()) boxes.push_back(scene.boxes[id]);
    const double c0 = threadCpu();
    world.moveOwned(boxes);
    const double moveCpu = threadCpu() - c0;
    const bp::mpi::GlobalFrame& f = world.update();
    const double t1 = MPI_Wtime();
    if (frame < o.warmup) {
      if (single) {
        for (uint32_t i = 0; i < scene.n; ++i)
          if (!scene.isStatic[i])
            single->move(bp::ProxyId{i, single->handleOf(i).generation}, scene.boxes[i]);
        single->update();
      }
      continue;
    }
    frameMs.push_back((t1 - t0) * 1e3);
    workMs.push_back((moveCpu + world.stats().workCpuSeconds) * 1e3);
    stats.push_back(world.stats());
    if (single) {
      handles.clear();
      allBoxes.clear();
      for (uint32_t i = 0; i < scene.n; ++i) {
        if (scene.isStatic[i]) continue;
        handles.push_back(single->handleOf(i));
        allBoxes.push_back(scene.boxes[i]);
      }
      const double s0 = MPI_Wtime();
      const double sc0 = threadCpu();
      single->move(handles, allBoxes);
      single->update();
      singleCpuMs.push_back((threadCpu() - sc0) * 1e3);
      singleMs.push_back((MPI_Wtime() - s0) * 1e3);
    }
    uint64_t mine = f.pairs.size();
    MPI_Reduce(rank == 0 ? MPI_IN_PLACE : &mine, &mine, 1, MPI_UINT64_T, MPI_SUM, 0,
               MPI_COMM_WORLD);
    pairsLast = mine;
    if (o.check) {
      const std::vector<GlobalPair> pairs = gatherPairs(f.pairs, size);
      const std::vector<GlobalPair> begun = gatherPairs(f.begun, size);
      const std::vector<GlobalPair> ended = gatherPairs(f.ended, size);
      if (rank == 0) {
        const bp::FramePairs& s = single->lastPairs();
        const bool same =
            pairs == toGlobal(s.pairs) && begun == toGlobal(s.begun) && ended == toGlobal(s.ended);
        if (!same) {
          std::fprintf(stderr, "check: frame %d differs from one BroadPhase\n", frame);
          checked = false;
        }
      }
    }
  }

  // Per rank: medians of times, means of counts.
  auto series = [&](auto field) {
    std::vector<double> v;
    for (const FrameStats& s : stats) v.push_back(double(field(s)));
    return v;
  };
  const double owned = std::max<double>(1.0, double(world.ownedIds().size()));
  RankRow row{
      median(frameMs),
      median(workMs),
      median(series([](const FrameStats& s) { return s.localCpuSeconds * 1e3; })),
      median(series([](const FrameStats& s) { return s.exchangeSeconds * 1e3; })),
      mean(series([](const FrameStats& s) { return s.bytesSent; })),
      mean(series([](const FrameStats& s) { return s.messagesSent; })),
      mean(series([](const FrameStats& s) { return s.collectives; })),
      mean(series([](const FrameStats& s) { return s.ghosts; })),
      mean(series([](const FrameStats& s) { return s.ghostRecords; })),
      mean(series([](const FrameStats& s) { return s.migratedIn; })),
      mean(series([](const FrameStats& s) { return s.pairsSent; })),
      mean(series([](const FrameStats& s) { return s.owned; })),
      mean(series([](const FrameStats& s) { return s.reported; })),
      double(world.memoryBytes()) / owned,
      double(world.localBroadPhase().memoryBytes()) / owned,
  };
  std::vector<RankRow> rows(static_cast<size_t>(size));
  MPI_Gather(&row, sizeof(RankRow), MPI_BYTE, rows.data(), sizeof(RankRow), MPI_BYTE, 0,
             MPI_COMM_WORLD);
  // The job's frame: each frame's slowest rank.
  std::vector<double> slowest(frameMs.size());
  MPI_Reduce(frameMs.data(), slowest.data(), int(frameMs.size()), MPI_DOUBLE, MPI_MAX, 0,
             MPI_COMM_WORLD);
  const double imbalance = mean(series([](const FrameStats& s) { return s.imbalance; }));
  const int rebalances = int(
      std::count_if(stats.begin(), stats.end(), [](const FrameStats& s) { return s.rebalanced; }));
  if (rank != 0) return 0;

  const char* scaling = o.weak ? "weak" : "strong";
  if (o.csv) {
    std::printf(
        "scaling,scene,n_total,ranks,threads,rank,frame_ms,work_ms,local_ms,mpi_ms,bytes_sent,"
        "messages_sent,collectives,ghosts,ghost_records,migrations,pairs_sent,owned,"
        "pairs_reported,bytes_per_owned\n");
    for (int r = 0; r < size; ++r) {
      const RankRow& w = rows[size_t(r)];
      std::printf(
          "%s,%s,%llu,%d,%d,%d,%.3f,%.3f,%.3f,%.3f,%.0f,%.1f,%.1f,%.0f,%.1f,%.1f,%.1f,%.0f,%.0f,"
          "%.0f\n",
          scaling, bp::sceneName(o.scene), (unsigned long long)total, size, o.threads, r, w.frameMs,
          w.workMs, w.localMs, w.exchangeMs, w.bytesSent, w.messagesSent, w.collectives, w.ghosts,
          w.ghostRecords, w.migrations, w.pairsSent, w.owned, w.reported, w.bytesPerOwned);
    }
  } else {
    std::printf(
        "bpbench-mpi: %s scaling, scene %s, %llu boxes, %d ranks x %d threads, %d frames "
        "(+%d warm-up)\n",
        scaling, bp::sceneName(o.scene), (unsigned long long)total, size, o.threads, o.frames,
        o.warmup);
    std::printf("%4s %9s %8s %8s %8s %10s %5s %4s %7s %9s %7s %8s %8s %8s %7s\n", "rank",
                "frame_ms", "work_ms", "local_ms", "mpi_ms", "bytes/frm", "msg/f", "coll", "ghosts",
                "ghost_rec", "migr/f", "pairs_tx", "owned", "reported", "B/owned");
    for (int r = 0; r < size; ++r) {
      const RankRow& w = rows[size_t(r)];
      std::printf(
          "%4d %9.3f %8.3f %8.3f %8.3f %10.0f %5.1f %4.1f %7.0f %9.1f %7.1f %8.1f %8.0f %8.0f "
          "%7.0f\n",
          r, w.frameMs, w.workMs, w.localMs, w.exchangeMs, w.bytesSent, w.messagesSent,
          w.collectives, w.ghosts, w.ghostRecords, w.migrations, w.pairsSent, w.owned, w.reported,
          w.bytesPerOwned);
    }
    std::printf(
        "job frame (slowest rank, median): %.3f ms; pairs %llu; imbalance %.3f; "
        "rebalances %d\n",
        median(slowest), (unsigned long long)pairsLast, imbalance, rebalances);
    std::printf("memory per owned proxy (rank 0): %.0f bytes, of which its BroadPhase %.0f\n",
                rows[0].bytesPerOwned, rows[0].localBytesPerOwned);
    if (!singleMs.empty())
      std::printf("one plain BroadPhase, same frames, same process: %.3f ms (CPU %.3f ms)\n",
                  median(singleMs), median(singleCpuMs));
  }
  if (o.check) std::printf("check: %s\n", checked ? "every frame equals one BroadPhase" : "FAILED");
  return checked ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int rc = 0;
  try {
    const Options o = parse(argc, argv);
    if (o.baseline && size != 1) throw Usage{"--baseline needs one rank"};
    rc = run(o, rank, size);
  } catch (const Usage& u) {
    // Every rank parsed the same arguments and got here.
    if (rank == 0) std::fprintf(stderr, "bpbench-mpi: %s\n%s", u.message.c_str(), kUsage);
    rc = 2;
  }
  MPI_Finalize();
  return rc;
}
