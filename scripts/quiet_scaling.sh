#!/usr/bin/env bash
# Runs two-thread scaling sets (docs/threading.md, "What two threads gain")
# only in quiet stretches of a noisy VM: a set starts when one core round
# trip is under 150 ns and a one-thread `static` 10^5 probe runs under
# PROBE_MS, and then runs every scene three ways: as bpbench does by default
# (the scene stepped on the workers, as an engine's integration), with
# --serial-step (stepped on the calling thread: the workers idle before each
# frame), and with --serial-step --wake-workers (`bpbench scaling --repeat 5
# --max-round-trip 150`, which gates each round again). Appends each set's
# table to the log; stop it with Ctrl-C.
#
#   scripts/quiet_scaling.sh [--bpbench PATH] [--log FILE] [--probe-ms MS] [--sets K]
#
# The speed-ups still depend on the machine's state: keep only the sets
# whose one-thread frame is in its quiet range (docs/threading.md).
set -euo pipefail

bpbench=build/release/bench/bpbench
log=quiet_scaling.log
probe_ms=0.45
sets=0  # 0: until interrupted
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bpbench) bpbench=$2; shift 2 ;;
    --log) log=$2; shift 2 ;;
    --probe-ms) probe_ms=$2; shift 2 ;;
    --sets) sets=$2; shift 2 ;;
    *) echo "quiet_scaling.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[[ -x "$bpbench" ]] || { echo "quiet_scaling.sh: no bpbench at '$bpbench' (build first)" >&2; exit 2; }

done_sets=0
while [[ $sets -eq 0 || $done_sets -lt $sets ]]; do
  # The probe: one round of the one-thread static frame, with the round-trip
  # gate (a failed gate gives no row); median_ms is the csv's 8th column.
  ms=$("$bpbench" scaling --scene static --n 100000 --threads 1 --frames 12 --backend sweep \
         --repeat 1 --max-round-trip 150 --quiet --format csv 2>/dev/null |
       awk -F, '$1 == "sweep" { print $8 }') || ms=""
  if [[ -z "$ms" ]] || ! awk -v m="$ms" -v p="$probe_ms" 'BEGIN { exit !(m < p) }'; then
    sleep 5
    continue
  fi
  for scene in static sizes uniform; do
    for mode in "" "--serial-step" "--serial-step --wake-workers"; do
      echo "== $scene ${mode:-default} (probe $ms ms)" >> "$log"
      "$bpbench" scaling --scene "$scene" --n 100000 --threads 1,2 --frames 30 --backend sweep \
        --repeat 5 --max-round-trip 150 $mode --quiet >> "$log" 2>&1 || true
    done
  done
  done_sets=$((done_sets + 1))
done
