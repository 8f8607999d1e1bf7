#!/usr/bin/env bash
# Builds bpbench with the peers that come as source checkouts rather than as
# distribution packages (Jolt Physics, PhysX 5), so that bpbench can compare
# against them. CI does not need them: without a checkout bpbench builds as
# usual and lists these backends as `not built`.
#
#   scripts/peers.sh [--jolt DIR] [--physx DIR] [--build-dir build/peers] [--jobs N]
#
# --jolt: a Jolt Physics checkout (its Build/ and Jolt/ folders); --physx:
# PhysX 5's physx/ folder (the one with include/ and source/). Either or
# both. Configures a Release build of this repository in --build-dir
# (default build/peers) with BP_JOLT_ROOT and BP_PHYSX_ROOT set to the ones
# given, builds bpbench (the peers' libraries with it), then prints `bpbench
# list`. --jobs is passed to the build (default: the build tool's own). Extra
# CMake options can be given after `--`.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
jolt=""
physx=""
build_dir="$here/build/peers"
jobs=""
extra=()

while [[ $# -gt 0 ]]; do
  case "$1" in
    --jolt) jolt="$2"; shift 2 ;;
    --physx) physx="$2"; shift 2 ;;
    --build-dir) build_dir="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "peers.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ -n "$jolt" || -n "$physx" ]] || {
  echo "peers.sh: no peer given: --jolt DIR and/or --physx DIR (see --help)" >&2
  exit 2
}
options=()
if [[ -n "$jolt" ]]; then
  [[ -f "$jolt/Build/CMakeLists.txt" && -f "$jolt/Jolt/Jolt.h" ]] || {
    echo "peers.sh: --jolt $jolt is not a Jolt Physics checkout (no Build/CMakeLists.txt, Jolt/Jolt.h)" >&2
    exit 2
  }
  options+=("-DBP_JOLT_ROOT=$(cd "$jolt" && pwd)")
fi
if [[ -n "$physx" ]]; then
  [[ -f "$physx/include/PxPhysicsAPI.h" && -f "$physx/source/lowlevelaabb/src/BpBroadPhase.cpp" ]] || {
    echo "peers.sh: --physx $physx is not PhysX 5's physx/ folder (no include/PxPhysicsAPI.h, source/lowlevelaabb/src/BpBroadPhase.cpp)" >&2
    exit 2
  }
  options+=("-DBP_PHYSX_ROOT=$(cd "$physx" && pwd)")
fi
if [[ -n "$jobs" && ! "$jobs" =~ ^[1-9][0-9]*$ ]]; then
  echo "peers.sh: --jobs must be a positive integer" >&2
  exit 2
fi

cmake -S "$here" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release "${options[@]}" "${extra[@]}"
cmake --build "$build_dir" --target bpbench ${jobs:+-j "$jobs"}
"$build_dir/bench/bpbench" list
