#!/usr/bin/env bash
# Strong and weak scaling of bpbench-mpi over 1-4 ranks on this machine, as
# csv (one row per rank per run), for docs/mpi.md. Strong: one scene of N
# boxes split over 1..4 ranks. Weak: N/4 boxes per rank. Run as root, Open
# MPI needs the two variables below; on 2 cores, 3 and 4 ranks oversubscribe.
#   bash scripts/mpi_scaling.sh [scene] [N] [frames] [threads]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bench="$root/build/release/mpi/bench/bpbench-mpi"
scene=${1:-uniform}
n=${2:-100000}
frames=${3:-30}
threads=${4:-1}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_mpi_yield_when_idle=1
header=1
for mode in strong weak; do
  for np in 1 2 3 4; do
    count=$n
    extra=()
    if [ "$mode" = weak ]; then
      count=$((n / 4))
      extra=(--weak)
    fi
    out=$(mpirun -np "$np" --oversubscribe "$bench" --scene "$scene" --n "$count" \
      --frames "$frames" --threads "$threads" --format csv "${extra[@]}")
    if [ $header = 1 ]; then echo "$out" | head -n 1; header=0; fi
    echo "$out" | tail -n +2
  done
done
