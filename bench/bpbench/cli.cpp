#include "cli.h"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <thread>

namespace bpbench {
namespace {

const char* const kCommands[] = {"pairs",   "rays",  "nearest",  "cliffs", "stress",
                                 "scaling", "bound", "rollback", "pile",   "list"};

// Options each subcommand accepts (flags without a value are marked "!").
const std::map<std::string, std::set<std::string>> kAllowed = {
    {"pairs",
     {"scene", "n", "frames", "threads", "backend", "seed", "!check", "format", "plot", "!quiet",
      "!no-fork", "!wake-workers", "!serial-step", "offset"}},
    {"rays",
     {"scene", "n", "rays", "query", "workload", "threads", "backend", "seed", "repeat", "!check",
      "format", "plot", "!quiet", "!no-fork"}},
    {"nearest",
     {"scene", "n", "k", "queries", "backend", "seed", "repeat", "!check", "format", "!quiet",
      "!no-fork"}},
    {"cliffs", {"scene", "n", "backend", "seed", "format", "!quiet", "!no-fork"}},
    {"stress",
     {"scene", "n", "seconds", "threads", "backend", "churn", "seed", "format", "plot", "!quiet"}},
    {"scaling",
     {"scene", "n", "frames", "threads", "backend", "seed", "repeat", "max-round-trip", "format",
      "plot", "!quiet", "!no-fork", "!wake-workers", "!serial-step"}},
    {"bound", {"n", "max-pairs", "threads", "backend", "format", "!quiet", "!no-fork"}},
    {"rollback",
     {"scene", "n", "frames", "threads", "backend", "seed", "churn", "!check", "format", "!quiet",
      "!no-fork"}},
    {"pile", {"n", "frames", "threads", "backend", "seed", "format", "!quiet"}},
    {"list", {"format", "!quiet"}},
};

std::string join(const std::vector<std::string>& items, const char* sep = ", ") {
  std::string s;
  for (size_t i = 0; i < items.size(); ++i) s += (i ? sep : "") + items[i];
  return s;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, ',')) out.push_back(cur);
  if (!s.empty() && s.back() == ',') out.push_back("");
  return out;
}

// A whole number written as digits or in scientific form (1e5, 2.5e4), in
// [lo, hi]. Anything else names the option and the accepted range.
uint64_t parseInteger(const std::string& option, const std::string& text, uint64_t lo,
                      uint64_t hi) {
  const std::string range =
      "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  if (text.empty() ||
      !(std::isdigit(static_cast<unsigned char>(text[0])) || text[0] == '-' || text[0] == '+'))
    throw UsageError("--" + option + ": '" + text + "' is not a number; expected " + range);
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || errno == ERANGE || !std::isfinite(v))
    throw UsageError("--" + option + ": '" + text + "' is not a number; expected " + range);
  if (v != std::floor(v))
    throw UsageError("--" + option + ": '" + text + "' is not a whole number; expected " + range);
  if (v < double(lo) || v > double(hi))
    throw UsageError("--" + option + ": " + text + " is out of range; expected " + range);
  return static_cast<uint64_t>(v);
}

double parseReal(const std::string& option, const std::string& text, double lo, double hi,
                 bool loOpen) {
  std::ostringstream r;
  r << "a number in " << (loOpen ? "(" : "[") << lo << ", " << hi << "]";
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end == text.c_str() || *end != '\0' || errno == ERANGE || !std::isfinite(v))
    throw UsageError("--" + option + ": '" + text + "' is not a number; expected " + r.str());
  if (v < lo || (loOpen && v == lo) || v > hi)
    throw UsageError("--" + option + ": " + text + " is out of range; expected " + r.str());
  return v;
}

std::vector<std::string> backendNames() {
  std::vector<std::string> names;
  for (const BackendInfo& b : allBackends()) names.push_back(b.name);
  return names;
}

bool builtAndCapable(const BackendInfo& b, unsigned need) {
  return b.make && (b.caps & need) == need;
}

unsigned needFor(const Options& o) {
  if (o.command == "rays") {
    return o.query == RayQuery::closest ? kRaysClosest
           : o.query == RayQuery::any   ? kRaysAny
                                        : kRaysAll;
  }
  if (o.command == "stress") return kPairs | kChurn;
  if (o.command == "nearest") return kNearest;
  return kPairs;
}

void pickDefaultBackends(Options& o) {
  const unsigned need = needFor(o);
  std::vector<std::string> order;
  if (o.command == "pairs") order = {"bullet-dbvt", "bvh", "sweep", "auto"};
  if (o.command == "rays") order = {"embree", "bvh", "sweep", "auto"};
  if (o.command == "nearest") order = {"bvh", "facade-bvh", "facade-sweep", "auto"};
  if (o.command == "stress" || o.command == "scaling") order = {"auto", "sweep", "bvh"};
  if (o.command == "bound" || o.command == "rollback" || o.command == "pile" ||
      o.command == "cliffs")
    order = {"bvh", "sweep", "auto"};
  for (const std::string& name : order) {
    const BackendInfo* b = findBackend(name);
    if (b && builtAndCapable(*b, need)) {
      o.backends.push_back(b);
      if (o.command == "stress" || o.command == "scaling") break;
    }
  }
  if (o.backends.empty() && (o.command == "stress" || o.command == "scaling")) {
    const BackendInfo* b = findBackend("bullet-dbvt");
    if (b && builtAndCapable(*b, need)) o.backends.push_back(b);
  }
  if (o.backends.empty()) o.backends.push_back(findBackend("brute"));
}

void parseBackends(Options& o, const std::string& text) {
  const unsigned need = needFor(o);
  for (const std::string& name : split(text)) {
    if (name == "all") {
      for (const BackendInfo& b : allBackends())
        if (builtAndCapable(b, need)) o.backends.push_back(&b);
      continue;
    }
    const BackendInfo* b = findBackend(name);
    if (!b)
      throw UsageError("--backend: unknown backend '" + name + "'; valid: " + join(backendNames()) +
                       ", all");
    if (!b->make)
      throw UsageError("--backend: '" + name + "' is not built in this binary: " + b->missing +
                       " (see `bpbench list`)");
    if ((b->caps & need) != need) {
      std::string what = o.command == "rays"      ? std::string("--query ") + queryName(o.query)
                         : o.command == "stress"  ? "pairs with churn"
                         : o.command == "nearest" ? "nearest"
                                                  : "pairs";
      throw UsageError("--backend: '" + name + "' does not support " + what + " (" +
                       b->description + ")");
    }
    if (std::find(o.backends.begin(), o.backends.end(), b) != o.backends.end())
      throw UsageError("--backend: '" + name + "' is listed twice");
    o.backends.push_back(b);
  }
  if (o.backends.empty()) throw UsageError("--backend: no backend in '" + text + "'");
  if (o.command == "bound" || o.command == "rollback" || o.command == "pile" ||
      o.command == "cliffs")
    for (const BackendInfo* b : o.backends)
      if (std::string(b->name) != "bvh" && std::string(b->name) != "sweep" &&
          std::string(b->name) != "auto")
        throw UsageError("--backend: " + o.command +
                         " runs BroadPhase structures only (bvh, sweep, auto), got '" +
                         std::string(b->name) + "'");
  if (o.command == "stress" && o.backends.size() > 1)
    throw UsageError("--backend: stress runs one backend, got '" + text + "'");
}

}  // namespace

const char* queryName(RayQuery q) {
  return q == RayQuery::closest ? "closest" : q == RayQuery::any ? "any" : "all";
}

int resolveThreads(int requested) {
  if (requested > 0) return requested;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

std::string usage() {
  return R"(usage: bpbench <command> [options]

commands:
  pairs    --scene S --n N[,N...] [--frames F] [--threads T[,T...]] [--backend B,...]
           [--seed K] [--check]            median/p99 ms per frame, pairs, hash, peak MiB
           [--offset D]                    auto also through the double API, the scene
                                           translated by D (docs/large_worlds.md)
  rays     [--scene S] --n N[,N...] --rays R [--query closest|any|all] [--threads T]
           [--workload random|lidar|probes|sight] [--backend B,...] [--repeat C] [--check]
                                           Mrays/s against a scene's frame 0 (uniform): the
                                           median of C casts of the batch (each the same hits);
                                           the workload's rays (docs/scenes.md, default random)
  nearest  [--scene S] --n N[,N...] [--k K[,K...]] [--queries Q] [--backend B,...]
           [--repeat C] [--check]          us a k-nearest query, one thread, Q points in the
                                           scene's domain (default N/10); the median of C passes
  cliffs   [--scene S[,S...]] [--n N] [--backend bvh,sweep,auto]
                                           every public call of BroadPhase timed at N and
                                           4N, one thread: a call's time, its growth, and
                                           CLIFF where it grows faster than n log n
  stress   [--n N] [--seconds S] [--threads T] [--backend B] [--churn PCT] [--scene S]
           [--plot F.svg]                  a long run with motion and churn; flat memory?
  scaling  --scene S --n N --threads 1,2,4 [--backend B] [--frames F] [--repeat R]
           [--max-round-trip NS]           speed-up and parallel efficiency per thread count;
                                           R rounds (median, min, max), keeping only the
                                           rounds whose core round trip stayed under NS
  bound    --n N[,N...] --max-pairs M [--threads T[,T...]] [--backend bvh,sweep,auto]
                                           N identical boxes, one update that must throw
                                           capacityExceeded: seconds to the error, peak MiB
  rollback --scene S --n N[,N...] --frames F [--threads T[,T...]] [--backend bvh,sweep,auto]
           [--churn PCT] [--check]         saveState at frame F/2, run on, loadState, re-run:
                                           every re-run frame identical? save/load ms, bytes
                                           per proxy against memoryBytes()
  pile     --n N[,N...] [--frames F] [--threads T] [--backend bvh,sweep,auto]
                                           piles of 1000 boxes that must not pair with each
                                           other: broadphase layers against category/mask
                                           filters in the same run (ms, candidates, pairs)
  list                                     the backends and whether they are built

common options:
  --format table|csv|json   output (json: one object per line)
  --plot FILE.svg           write a chart (ms/frame against N or threads; stress: against time)
  --quiet                   no progress on stderr
  --no-fork                 run backends in this process (peak memory is then shared)
  --wake-workers            pairs, scaling: before each frame, after the scene step
                            (untimed), wake the backend's workers as an engine would
                            when its frame's serial part starts (Scheduler::wake)
  --serial-step             pairs, scaling: step the scene and stage the moves on the
                            calling thread alone (untimed; by default they run on the
                            workers, as an engine's integration), so that the workers
                            idle before each frame and may be asleep when it starts

defaults: --scene uniform, --n 10000 (stress: 100000), --frames 30, --threads 0 (every
hardware thread), --seed 1, --rays 1000000, --query closest, --seconds 30, --churn 1;
cliffs: --scene uniform,clustered, --n 100000, backends bvh, sweep, auto;
rays: --repeat 3; nearest: --k 1,8,64, --repeat 3, backends bvh, facade-bvh,
facade-sweep, auto; bound: --n 1000000, --max-pairs 10000000; rollback: backends bvh, sweep, auto; backends: pairs bullet-dbvt + ours built, rays
embree + ours, stress/scaling the first of auto, sweep, bvh (else bullet-dbvt), bound bvh,
sweep, auto. Numbers may be written 100000 or 1e5.

scenes: uniform, clustered, sizes, static, plane
backends: brute, bullet-dbvt, bullet-sap, embree, bvh, sweep, auto, auto-cq, facade-bvh,
  facade-sweep, all (every built one)
)";
}

Options parseArgs(int argc, char** argv) {
  Options o;
  if (argc < 1)
    throw UsageError(
        "missing command; valid: pairs, rays, nearest, cliffs, stress, scaling, bound, "
        "rollback, pile, list");
  o.command = argv[0];
  if (o.command == "-h" || o.command == "--help" || o.command == "help") {
    o.command = "help";
    return o;
  }
  if (!kAllowed.count(o.command)) {
    std::vector<std::string> cmds(std::begin(kCommands), std::end(kCommands));
    throw UsageError("unknown command '" + o.command + "'; valid: " + join(cmds));
  }
  const std::set<std::string>& allowed = kAllowed.at(o.command);

  std::map<std::string, std::string> values;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      o.command = "help";
      return o;
    }
    if (arg.rfind("--", 0) != 0) throw UsageError("unexpected argument '" + arg + "'");
    std::string key = arg.substr(2), value;
    const size_t eq = key.find('=');
    bool hasValue = false;
    if (eq != std::string::npos) {
      value = key.substr(eq + 1);
      key = key.substr(0, eq);
      hasValue = true;
    }
    const bool isFlag = allowed.count("!" + key) != 0;
    if (!isFlag && !allowed.count(key)) {
      std::vector<std::string> names;
      for (const std::string& a : allowed) names.push_back("--" + (a[0] == '!' ? a.substr(1) : a));
      throw UsageError("unknown option '--" + key + "' for '" + o.command +
                       "'; valid: " + join(names));
    }
    if (isFlag) {
      if (hasValue) throw UsageError("--" + key + " takes no value");
      values[key] = "1";
      continue;
    }
    if (!hasValue) {
      if (i + 1 >= argc) throw UsageError("--" + key + " needs a value");
      value = argv[++i];
    }
    if (values.count(key)) throw UsageError("--" + key + " given twice");
    values[key] = value;
  }

  auto has = [&](const char* k) { return values.count(k) != 0; };
  if (has("format")) {
    const std::string& f = values["format"];
    if (f == "table")
      o.format = Format::table;
    else if (f == "csv")
      o.format = Format::csv;
    else if (f == "json")
      o.format = Format::json;
    else
      throw UsageError("--format: unknown format '" + f + "'; valid: table, csv, json");
  }
  if (o.command == "list") return o;

  if (has("scene")) {
    // cliffs takes a list; every other command one scene.
    for (const std::string& name :
         o.command == "cliffs" ? split(values["scene"]) : std::vector{values["scene"]}) {
      auto s = bp::parseScene(name);
      if (!s)
        throw UsageError("--scene: unknown scene '" + name +
                         "'; valid: uniform, clustered, sizes, static, plane");
      o.scene = *s;
      o.scenes.push_back(*s);
    }
  } else {
    o.scenes = {bp::SceneKind::uniform, bp::SceneKind::clustered};
  }
  const uint32_t defaultN = o.command == "stress" || o.command == "cliffs" ? 100000
                            : o.command == "bound"                         ? 1000000
                                                                           : 10000;
  if (has("n")) {
    for (const std::string& t : split(values["n"]))
      o.ns.push_back(static_cast<uint32_t>(parseInteger("n", t, 1, 100000000)));
    if ((o.command == "stress" || o.command == "cliffs") && o.ns.size() > 1)
      throw UsageError("--n: " + o.command + " takes one value, got '" + values["n"] + "'");
  } else {
    o.ns.push_back(defaultN);
  }
  if (has("frames"))
    o.frames = static_cast<uint32_t>(parseInteger("frames", values["frames"], 1, 1000000));
  if (has("threads")) {
    for (const std::string& t : split(values["threads"]))
      o.threads.push_back(static_cast<int>(parseInteger("threads", t, 0, 1024)));
    if (o.command == "stress" && o.threads.size() > 1)
      throw UsageError("--threads: stress takes one value, got '" + values["threads"] + "'");
  } else {
    o.threads.push_back(o.command == "scaling" ? -1 : 0);
  }
  if (o.command == "scaling" && o.threads[0] == -1) {
    // Default: 1, 2, 4, ... up to the hardware threads.
    o.threads.clear();
    const int hw = resolveThreads(0);
    for (int t = 1; t < hw; t *= 2) o.threads.push_back(t);
    o.threads.push_back(hw);
  }
  if (has("max-pairs"))
    o.maxPairs = parseInteger("max-pairs", values["max-pairs"], 1, uint64_t(1) << 53);
  if (has("seed")) o.seed = parseInteger("seed", values["seed"], 0, UINT64_MAX >> 11);
  o.check = has("check");
  o.quiet = has("quiet");
  o.noFork = has("no-fork");
  o.wakeWorkers = has("wake-workers");
  o.serialStep = has("serial-step");
  if (has("rays"))
    o.rays = static_cast<uint32_t>(parseInteger("rays", values["rays"], 1, 100000000));
  if (has("query")) {
    const std::string& q = values["query"];
    if (q == "closest")
      o.query = RayQuery::closest;
    else if (q == "any")
      o.query = RayQuery::any;
    else if (q == "all")
      o.query = RayQuery::all;
    else
      throw UsageError("--query: unknown query '" + q + "'; valid: closest, any, all");
  }
  if (has("workload")) {
    const auto w = bp::parseRayWorkload(values["workload"]);
    if (!w)
      throw UsageError("--workload: unknown workload '" + values["workload"] +
                       "'; valid: random, lidar, probes, sight");
    o.workload = *w;
  }
  if (has("offset")) o.offset = parseReal("offset", values["offset"], -1e300, 1e300, false);
  if (has("seconds")) o.seconds = parseReal("seconds", values["seconds"], 0, 86400, true);
  if (has("repeat"))
    o.repeat = static_cast<uint32_t>(parseInteger("repeat", values["repeat"], 1, 1000));
  else if (o.command == "rays" || o.command == "nearest")
    o.repeat = 3;
  if (has("k")) {
    for (const std::string& t : split(values["k"]))
      o.ks.push_back(static_cast<uint32_t>(parseInteger("k", t, 1, 1000000)));
  } else {
    o.ks = {1, 8, 64};
  }
  if (has("queries"))
    o.queries = static_cast<uint32_t>(parseInteger("queries", values["queries"], 1, 100000000));
  if (has("max-round-trip"))
    o.maxRoundTripNs = parseReal("max-round-trip", values["max-round-trip"], 0, 1e9, false);
  if (has("churn")) o.churnPercent = parseReal("churn", values["churn"], 0, 100, false);
  if (has("plot")) {
    o.plot = values["plot"];
    if (o.plot.empty()) throw UsageError("--plot: needs a file name ending in .svg");
  }

  if (has("backend"))
    parseBackends(o, values["backend"]);
  else
    pickDefaultBackends(o);

  // Scene-size limits of each backend (the oracle is O(N^2); peers' handles
  // have so many bits).
  for (const BackendInfo* b : o.backends) {
    for (uint32_t n : o.ns) {
      if (b->maxN && n > b->maxN)
        throw UsageError("--n: backend '" + std::string(b->name) + "' refuses N = " +
                         std::to_string(n) + " (limit " + std::to_string(b->maxN) +
                         (std::string(b->name) == "brute" ? ": it tests every pair, O(N^2))"
                                                          : ": the library's handle bits)"));
      if (o.command == "rays" && std::string(b->name) == "brute" &&
          double(n) * double(o.rays) > 2e10)
        throw UsageError("--rays: backend 'brute' refuses N x rays = " + std::to_string(n) + " x " +
                         std::to_string(o.rays) + " (limit 2e10 ray-box tests); use fewer --rays");
    }
  }
  if (o.command == "scaling" && o.ns.size() > 1)
    throw UsageError("--n: scaling takes one value, got several");
  return o;
}

}  // namespace bpbench
