// The subcommands; each returns the process exit code.
#pragma once

#include "cli.h"

namespace bpbench {

int commandPairs(const Options& options);    // pairs.cpp
int commandRays(const Options& options);     // rays.cpp
int commandNearest(const Options& options);  // nearest.cpp
int commandCliffs(const Options& options);   // cliffs.cpp
int commandStress(const Options& options);   // stress.cpp
int commandScaling(const Options& options);  // scaling.cpp
int commandBound(const Options& options);    // bound.cpp
int commandPile(const Options& options);     // pile.cpp
int commandList(const Options& options);     // main.cpp

// rollback.cpp
int commandRollback(const Options& options);

}  // namespace bpbench
