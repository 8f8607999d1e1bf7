#!/usr/bin/env bash
# Installs what broadphase needs from Debian's packages, and nothing when all
# of it is present. Run as root, or as a user with sudo.
set -euo pipefail

packages=(
  g++ cmake make pkg-config
  libtbb-dev libeigen3-dev libgtest-dev libbenchmark-dev  # required
  libbullet-dev libembree-dev                             # peers for bpbench
  clang libclang-rt-dev                                   # libFuzzer target
  ccache                                                  # compiler cache (scripts/test.sh, .ci/run)
  doxygen                                                 # API reference (target docs)
  graphviz                                                # docs/architecture.svg (scripts/diagrams.sh)
  libopenmpi-dev openmpi-bin                              # broadphase::mpi, its tests and bench
  pybind11-dev python3-dev python3-pybind11 python3-numpy python3-pytest  # Python module, its tests
  python3-scipy python3-rtree                             # peers for python/bench/bench_python.py
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all packages present"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
echo "setup: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
