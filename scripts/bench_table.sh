#!/usr/bin/env bash
# Produces the README performance table (markdown, on stdout) from ONE run of
# bpbench: every scene of SCENES.md at one N, every backend in the same run,
# ratios against the first backend measured in that same run, every pair list
# checked across backends (--check), then the rays.
#
#   scripts/bench_table.sh [--n N] [--frames F] [--threads T] [--backends LIST]
#                          [--ray-backends LIST] [--rays R] [--bpbench PATH]
#
# Defaults: N = 100000, F = 30, every hardware thread, pair backends
# bullet-dbvt plus every one of ours that is built, ray backends embree plus
# ours, R = 1000000. The raw CSV of the run is kept next to the table
# (bench_table.csv / bench_table_rays.csv in the current directory) so that
# every figure can be traced back.
set -euo pipefail

n=100000
frames=30
threads=0
rays=1000000
backends=""
ray_backends=""
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bpbench="$here/build/release/bench/bpbench"

while [[ $# -gt 0 ]]; do
  case "$1" in
    --n) n="$2"; shift 2 ;;
    --frames) frames="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --rays) rays="$2"; shift 2 ;;
    --backends) backends="$2"; shift 2 ;;
    --ray-backends) ray_backends="$2"; shift 2 ;;
    --bpbench) bpbench="$2"; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "bench_table.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ -x "$bpbench" ]] || { echo "bench_table.sh: no bpbench at $bpbench (build first)" >&2; exit 2; }

# Backends that are built, from `bpbench list`.
built() { "$bpbench" list --format csv | awk -F, 'NR > 1 && $2 == "yes" { print $1 }'; }
pick() {  # pick CANDIDATES...: the built ones, comma-separated, in order
  local out="" b
  for b in "$@"; do
    if built | grep -qx "$b"; then out="${out:+$out,}$b"; fi
  done
  echo "$out"
}
[[ -n "$backends" ]] || backends="$(pick bullet-dbvt sweep bvh auto)"
[[ -n "$ray_backends" ]] || ray_backends="$(pick embree sweep bvh auto)"

pairs_csv="bench_table.csv"
rays_csv="bench_table_rays.csv"
: > "$pairs_csv"
for scene in uniform clustered sizes static plane; do
  cmd=("$bpbench" pairs --scene "$scene" --n "$n" --frames "$frames" --threads "$threads"
       --backend "$backends" --check --format csv)
  echo "bench_table.sh: ${cmd[*]}" >&2
  out="$("${cmd[@]}")"
  if [[ ! -s "$pairs_csv" ]]; then echo "$out" > "$pairs_csv"; else echo "$out" | tail -n +2 >> "$pairs_csv"; fi
done
if [[ -n "$ray_backends" ]]; then
  cmd=("$bpbench" rays --n "$n" --rays "$rays" --threads "$threads" --backend "$ray_backends"
       --check --format csv)
  echo "bench_table.sh: ${cmd[*]}" >&2
  "${cmd[@]}" > "$rays_csv"
fi

cpu="$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)"
commit="$(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown)"
first="${backends%%,*}"
echo "Measured $(date -u +%Y-%m-%d) on ${cpu:-unknown CPU}, $(nproc) hardware threads, commit $commit,"
echo "one run of \`scripts/bench_table.sh --n $n --frames $frames --threads $threads\`."
echo "Median and p99 ms per frame over frames 2..$frames (a frame = moves + complete sorted exact pairs);"
echo "speed-up = median of $first / median of the backend, same scene, same run. Peers run on one thread."
echo
echo "| scene | backend | threads | median ms | p99 ms | pairs | peak MiB | speed-up vs $first |"
echo "|---|---|---:|---:|---:|---:|---:|---:|"
awk -F, 'NR == 1 { for (i = 1; i <= NF; ++i) col[$i] = i; next }
  { printf "| %s | %s | %s | %s | %s | %s | %s | %.2fx |\n", $col["scene"], $col["backend"],
      $col["threads"], $col["median_ms"], $col["p99_ms"], $col["pairs"], $col["peak_mib"],
      $col["ratio"] }' "$pairs_csv"
if [[ -s "$rays_csv" ]]; then
  echo
  echo "Rays: closest hit, scene uniform N = $n, $rays rays of length L/4."
  echo
  echo "| backend | threads | Mrays/s | Mrays/s per thread | hits |"
  echo "|---|---:|---:|---:|---:|"
  awk -F, 'NR == 1 { for (i = 1; i <= NF; ++i) col[$i] = i; next }
    { printf "| %s | %s | %s | %s | %s |\n", $col["backend"], $col["threads"],
        $col["mrays_per_s"], $col["mrays_per_s_per_thread"], $col["hits"] }' "$rays_csv"
fi
