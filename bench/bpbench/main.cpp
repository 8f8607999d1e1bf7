// bpbench: the benchmark and stress tool of broadphase. See bench/README.md.
#include "commands.h"
#include "table.h"

#include <cstdio>
#include <exception>

namespace bpbench {

int commandList(const Options& o) {
  std::vector<Row> rows;
  for (const BackendInfo& b : allBackends()) {
    std::string can;
    if (b.caps & kPairs) can += "pairs ";
    if (b.caps & kRaysClosest) can += "rays:closest ";
    if (b.caps & kRaysAny) can += "rays:any ";
    if (b.caps & kRaysAll) can += "rays:all ";
    if (!can.empty()) can.pop_back();
    Row r;
    r.add("backend", b.name)
        .add("built", b.make ? "yes" : "not built")
        .add("pairs_threads", (b.caps & kThreadedPairs) ? "scheduler" : "1 (serial)")
        .add("rays_threads", (b.caps & kThreadedRays) ? "scheduler" : "1 (serial)")
        .add("measures", can)
        .add("what", b.make ? b.description : b.missing);
    rows.push_back(r);
  }
  printRows(rows, o.format, {});
  return 0;
}

}  // namespace bpbench

int main(int argc, char** argv) {
  using namespace bpbench;
  Options options;
  try {
    options = parseArgs(argc - 1, argv + 1);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "bpbench: error: %s\n(run `bpbench --help` for usage)\n", e.what());
    return 2;
  }
  try {
    if (options.command == "help") {
      std::fputs(usage().c_str(), stdout);
      return 0;
    }
    if (options.command == "pairs") return commandPairs(options);
    if (options.command == "rays") return commandRays(options);
    if (options.command == "nearest") return commandNearest(options);
    if (options.command == "cliffs") return commandCliffs(options);
    if (options.command == "stress") return commandStress(options);
    if (options.command == "scaling") return commandScaling(options);
    if (options.command == "bound") return commandBound(options);
    if (options.command == "rollback") return commandRollback(options);
    if (options.command == "pile") return commandPile(options);
    if (options.command == "list") return commandList(options);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "bpbench: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bpbench: failed: %s\n", e.what());
    return 1;
  }
  return 2;
}
