#!/usr/bin/env bash
# The README's first command: installs what is missing, builds the Release
# configuration, and runs the main job: a stress run of the standard
# `uniform` scene through the BroadPhase API (motion plus 1 % churn per
# frame), with live progress and a summary table at the end.
#   bash scripts/quickstart.sh [bpbench stress options, e.g. --n 1000000 --seconds 60]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/setup.sh"
cmake -S "$root" -B "$root/build/release" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$root/build/release" -j"$(nproc)" --target bpbench
if [ $# -eq 0 ]; then set -- --n 100000 --seconds 20; fi
exec "$root/build/release/bench/bpbench" stress "$@"
