#!/usr/bin/env bash
# Builds bpbench with the peers that come as source checkouts rather than as
# distribution packages (today Jolt Physics), so that bpbench can compare
# against them. CI does not need them: without a checkout bpbench builds as
# usual and lists these backends as `not built`.
#
#   scripts/peers.sh --jolt /path/to/JoltPhysics [--build-dir build/peers] [--jobs N]
#
# Configures a Release build of this repository in --build-dir (default
# build/peers) with -DBP_JOLT_ROOT set, builds bpbench (Jolt's library with
# it), then prints `bpbench list`. --jobs is passed to the build (default:
# the build tool's own). Extra CMake options can be given after `--`.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
jolt=""
build_dir="$here/build/peers"
jobs=""
extra=()

while [[ $# -gt 0 ]]; do
  case "$1" in
    --jolt) jolt="$2"; shift 2 ;;
    --build-dir) build_dir="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "peers.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ -n "$jolt" ]] || { echo "peers.sh: no peer given: --jolt DIR (see --help)" >&2; exit 2; }
[[ -f "$jolt/Build/CMakeLists.txt" && -f "$jolt/Jolt/Jolt.h" ]] || {
  echo "peers.sh: --jolt $jolt is not a Jolt Physics checkout (no Build/CMakeLists.txt, Jolt/Jolt.h)" >&2
  exit 2
}
jolt="$(cd "$jolt" && pwd)"
if [[ -n "$jobs" && ! "$jobs" =~ ^[1-9][0-9]*$ ]]; then
  echo "peers.sh: --jobs must be a positive integer" >&2
  exit 2
fi

cmake -S "$here" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DBP_JOLT_ROOT="$jolt" "${extra[@]}"
cmake --build "$build_dir" --target bpbench ${jobs:+-j "$jobs"}
"$build_dir/bench/bpbench" list
