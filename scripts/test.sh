#!/usr/bin/env bash
# The README's test command: installs what is missing, builds the Release
# configuration and runs every test (unit, differential, package, CLI).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/setup.sh"
cmake -S "$root" -B "$root/build/release" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$root/build/release" -j"$(nproc)"
cd "$root/build/release"
ctest --output-on-failure -j"$(nproc)"
