#!/usr/bin/env bash
# The performance table of README.md and docs/performance.md, from ONE run of
# this script: every standard scene (docs/scenes.md) at N = 10^5 and 10^6,
# our structures (sweep, bvh) and the facade (auto) on one thread and on two,
# against the peers bpbench builds, each figure a ratio against a peer
# measured in the same bpbench invocation; then the ray workloads against
# Embree's APIs.
#
#   scripts/bench_table.sh [--ns LIST] [--frames F] [--frames-large F] [--frames-slow F]
#                          [--threads LIST] [--reference B] [--peers LIST] [--ours LIST]
#                          [--slow-peers LIST] [--large-skip SCENES]
#                          [--rays R] [--ray-ns LIST] [--workloads LIST] [--ray-repeat C]
#                          [--out DIR] [--wait-quiet LOAD] [--wait-minutes M]
#                          [--bpbench PATH]
#   scripts/bench_table.sh --from DIR     # the tables and chart again from DIR's CSVs
#
# Defaults: --ns 100000,1000000; --frames 30 (N <= 10^5; 10 on clustered),
# --frames-large 4 (N > 10^5); --threads 1,2; --reference bullet-dbvt;
# --peers physx-abp,physx-mbp,jolt; --ours sweep,bvh,auto;
# --slow-peers bullet-sap; --large-skip clustered; --rays 1000000; --ray-repeat 3;
# --ray-ns = --ns; --workloads random,lidar,probes,sight;
# --out bench_table (in the current directory). Backends that this bpbench
# does not build are left out (scripts/peers.sh builds PhysX and Jolt).
#
# Per scene and N, for each thread count T: one invocation
#   bpbench pairs --scene S --n N --threads T --backend REF,PEERS,OURS --check
# so that every ratio comes from one process tree, one scene, one stretch of
# the machine. Peers run on one thread in every invocation (their APIs are
# serial). Each of ours is reported as a ratio against the best peer of its
# invocation (the lowest median of --peers), or against REF (Bullet, which
# every Debian machine can build) where no peer is built.
# The slow peers (default bullet-sap) run once per scene, at N <= 10^5 only,
# in an invocation of their own with the reference (--threads 1,
# --frames-slow, default 10): bt32BitAxisSweep3 inserts proxies one by one
# into sorted endpoint arrays, so its build grows as N^2 (about 4 minutes
# at 10^5 on a 2-vCPU VM; hours at 10^6).
# At N > 10^5 neither REF nor the peers run on the --large-skip scenes
# (clustered 10^6 has 28 M pairs; Bullet's dbvt frame there takes many
# minutes); those rows have no ratio.
# --check compares every backend's pairs with the first backend's at every
# frame.
#
# Rays: per workload W, query Q (closest, any), ray N and thread count T, one
#   bpbench rays --n N --rays R --workload W --query Q --threads T --repeat C
#          --backend embree,embree-p8,embree-p16,embree-stream,OURS --check
# against scene uniform, each rate the median of C casts of the batch (the
# first cast of a process pays the first touch of its scratch); each of
# ours as a ratio against the best Embree API of its invocation (the
# highest Mrays/s).
#
# --wait-quiet LOAD waits (polling every 60 s, at most --wait-minutes M,
# default 60) for the 1-minute load average to fall below LOAD before the
# first measurement; the load averages at start and end are printed.
#
# Writes to DIR: pairs.csv and rays.csv (every bpbench field, plus the
# invocation number `run`), commands.txt, meta.sh (machine, commits, load,
# the peers' versions and checkouts), table.md (also printed on stdout) and
# pairs.svg (median ms per frame, log scale, every backend and scene). A
# failed --check is reported and makes the script exit 1 at the end.
set -euo pipefail

ns=100000,1000000
frames=30
frames_clustered=10
frames_large=4
frames_slow=10
threads_list=1,2
reference=bullet-dbvt
peers=physx-abp,physx-mbp,jolt
ours=sweep,bvh,auto
slow_peers=bullet-sap
large_skip=clustered
rays=1000000
ray_ns=""
workloads=random,lidar,probes,sight
ray_repeat=3
embree_apis=embree,embree-p8,embree-p16,embree-stream
out=bench_table
wait_quiet=""
wait_minutes=60
from=""
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bpbench="$here/build/release/bench/bpbench"

# The exact argument list, for the record (before the loop shifts it away).
invocation="scripts/bench_table.sh${*:+ $*}"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --ns) ns="$2"; shift 2 ;;
    --frames) frames="$2"; frames_clustered="$2"; shift 2 ;;
    --frames-large) frames_large="$2"; shift 2 ;;
    --frames-slow) frames_slow="$2"; shift 2 ;;
    --threads) threads_list="$2"; shift 2 ;;
    --reference) reference="$2"; shift 2 ;;
    --peers) peers="$2"; shift 2 ;;
    --ours) ours="$2"; shift 2 ;;
    --slow-peers) slow_peers="$2"; shift 2 ;;
    --large-skip) large_skip="$2"; shift 2 ;;
    --rays) rays="$2"; shift 2 ;;
    --ray-ns) ray_ns="$2"; shift 2 ;;
    --workloads) workloads="$2"; shift 2 ;;
    --ray-repeat) ray_repeat="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --wait-quiet) wait_quiet="$2"; shift 2 ;;
    --wait-minutes) wait_minutes="$2"; shift 2 ;;
    --bpbench) bpbench="$2"; shift 2 ;;
    --from) from="$2"; shift 2 ;;
    -h|--help) sed -n '2,59p' "$0"; exit 0 ;;
    *) echo "bench_table.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
failed=()
[[ -z "$from" ]] || out="$from"
pairs_csv="$out/pairs.csv"
rays_csv="$out/rays.csv"
commands="$out/commands.txt"
if [[ -n "$from" ]]; then
  ray_repeat=1  # a run's meta.sh from before --ray-repeat: one cast a rate
  # shellcheck source=/dev/null
  source "$out/meta.sh"
else
[[ -x "$bpbench" ]] || { echo "bench_table.sh: no bpbench at $bpbench (build first)" >&2; exit 2; }

# Backends that are built, from `bpbench list`.
built_list="$("$bpbench" list --format csv | awk -F, 'NR > 1 && $2 == "yes" { print $1 }')"
is_built() { grep -qx "$1" <<< "$built_list"; }
keep_built() {  # comma list -> the built ones, comma-separated
  local o="" b
  for b in ${1//,/ }; do if is_built "$b"; then o="${o:+$o,}$b"; fi; done
  echo "$o"
}
ours="$(keep_built "$ours")"
peers="$(keep_built "$peers")"
slow_peers="$(keep_built "$slow_peers")"
embree_apis="$(keep_built "$embree_apis")"
[[ -n "$ray_ns" ]] || ray_ns="$ns"
is_built "$reference" || reference=""
[[ -n "$ours" ]] || { echo "bench_table.sh: none of our backends is built" >&2; exit 2; }

load1() { cut -d' ' -f1 /proc/loadavg; }
waited=0
if [[ -n "$wait_quiet" ]]; then
  while ! awk -v l="$(load1)" -v q="$wait_quiet" 'BEGIN { exit !(l < q) }'; do
    if (( waited >= wait_minutes )); then
      echo "bench_table.sh: load $(load1) still >= $wait_quiet after $waited min; running anyway" >&2
      break
    fi
    echo "bench_table.sh: load $(load1) >= $wait_quiet, waiting (minute $waited of $wait_minutes)" >&2
    sleep 60
    waited=$((waited + 1))
  done
fi
load_start="$(cut -d' ' -f1-3 /proc/loadavg)"

mkdir -p "$out"
: > "$pairs_csv"
: > "$commands"
run=0
append_csv() {  # append_csv FILE RUN < csv: adds the column `run`
  awk -F, -v r="$2" -v first="$([[ -s "$1" ]] && echo 0 || echo 1)" \
    'NR == 1 { if (first) print "run," $0; next } { print r "," $0 }' >> "$1"
}
bench() {  # bench CSV ARGS...: one bpbench invocation, logged and appended
  local csv="$1"; shift
  run=$((run + 1))
  echo "$run: bpbench $*" >> "$commands"
  echo "bench_table.sh [$run] bpbench $*" >&2
  if ! "$bpbench" "$@" --check --quiet --format csv | append_csv "$csv" "$run"; then
    echo "bench_table.sh: [$run] FAILED (see above)" >&2
    failed+=("$run")
  fi
}

for n in ${ns//,/ }; do
  for scene in uniform clustered sizes static plane; do
    refs="$reference"
    [[ -z "$peers" ]] || refs="${refs:+$refs,}$peers"
    if (( n > 100000 )); then
      f="$frames_large"
      [[ ",$large_skip," == *",$scene,"* ]] && refs=""
    elif [[ "$scene" == clustered ]]; then
      f="$frames_clustered"
    else
      f="$frames"
    fi
    for t in ${threads_list//,/ }; do
      bench "$pairs_csv" pairs --scene "$scene" --n "$n" --frames "$f" --threads "$t" \
        --backend "${refs:+$refs,}$ours"
    done
    if (( n <= 100000 )) && [[ -n "$slow_peers" && -n "$reference" ]]; then
      bench "$pairs_csv" pairs --scene "$scene" --n "$n" --frames "$frames_slow" --threads 1 \
        --backend "$reference,$slow_peers"
    fi
  done
done

ray_backends="${embree_apis:+$embree_apis,}$ours"
: > "$rays_csv"
for n in ${ray_ns//,/ }; do
  for w in ${workloads//,/ }; do
    for q in closest any; do
      for t in ${threads_list//,/ }; do
        bench "$rays_csv" rays --n "$n" --rays "$rays" --workload "$w" --query "$q" \
          --threads "$t" --repeat "$ray_repeat" --backend "$ray_backends"
      done
    done
  done
done
load_end="$(cut -d' ' -f1-3 /proc/loadavg)"

cpu="$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)"
commit="$(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown)"
# The last commit that changed what is measured (the library and bpbench):
# documentation commits after it change no figure.
code_commit="$(git -C "$here" log -1 --format=%h -- broadphase math jobs bench/bpbench CMakeLists.txt 2>/dev/null || echo unknown)"
threads_hw="$(nproc) hardware threads, $(uname -m)"
# Each peer: what bpbench says it is (its version), and the checkout it was
# built from (the BP_*_ROOT of the build's CMake cache, at its git commit).
cache="$(dirname "$bpbench")/../CMakeCache.txt"
peer_checkout() {  # peer_checkout CACHE_VARIABLE -> "DIR at COMMIT" or ""
  local dir
  dir="$(sed -n "s/^$1:PATH=//p" "$cache" 2>/dev/null | head -1)"
  [[ -n "$dir" ]] || return 0
  if git -C "$dir" rev-parse --short=12 HEAD > /dev/null 2>&1; then
    echo "$dir at commit $(git -C "$dir" rev-parse --short=12 HEAD)"
  else
    echo "$dir (not a git checkout)"
  fi
}
peer_info=""
for b in ${peers//,/ }; do
  what="$("$bpbench" list --format json | sed -n "s/.*\"backend\": \"$b\".*\"what\": \"\(.*\)\"}.*/\1/p")"
  case "$b" in
    physx-*) src="$(peer_checkout BP_PHYSX_ROOT)" ;;
    jolt) src="$(peer_checkout BP_JOLT_ROOT)" ;;
    *) src="" ;;
  esac
  peer_info+="- \`$b\`: $what${src:+; built from $src}"$'\n'
done
declare -p invocation load_start load_end waited wait_quiet cpu commit code_commit threads_hw \
  reference peers peer_info ours slow_peers threads_list rays ray_ns workloads ray_repeat > "$out/meta.sh"
fi  # measuring

# --- The tables (markdown) ---------------------------------------------------
# Awk functions the tables share: a figure to three significant digits, N
# as a power of ten, and a header whose last columns are ours (-v ours) at
# each thread count (-v tl), after the columns in h and sep (nt, no, T and
# O are left set for the rows).
awk_common='
  function fmt(v) { return v >= 100 ? sprintf("%.0f", v) : v >= 10 ? sprintf("%.1f", v) : sprintf("%.2f", v) }
  function nname(n) { return n == 100000 ? "10^5" : n == 1000000 ? "10^6" : n }
  function printHeader(h, sep,   o, t) {
    nt = split(tl, T, ","); no = split(ours, O, ",")
    for (o = 1; o <= no; ++o) for (t = 1; t <= nt; ++t) {
      h = h " | " O[o] ", " T[t] (T[t] == 1 ? " thread" : " threads"); sep = sep "|---:"
    }
    print h " |"; print sep "|"
  }'
{
echo "Machine: ${cpu:-unknown CPU} ($threads_hw); tree at $commit, library and bpbench as of $code_commit."
echo "Command: \`$invocation\` (the bpbench invocations are in commands.txt)."
echo "Load average (1, 5, 15 min) at start: $load_start; at end: $load_end${wait_quiet:+; waited $waited min for the 1-min load to fall below $wait_quiet}."
if [[ -n "${peer_info:-}" ]]; then
  echo
  echo "Peers:"
  printf '%s' "$peer_info"
fi
echo
echo "Median ms per frame (a frame = the batch move of every moving box + the complete, exact,"
echo "sorted pair list; frames 2..F). Peers run on one thread. In brackets: the speed-up over the"
if [[ -n "${peers:-}" ]]; then
  echo "best peer (the fastest of ${peers//,/, }) in the same bpbench invocation, i.e. its"
  echo "median / this median; over $reference where no peer ran."
else
  echo "$reference, i.e. $reference's median / this median, both measured in the same bpbench invocation."
fi
[[ -z "$slow_peers" ]] || echo "$slow_peers ran in invocations of their own with $reference (N <= 10^5, one thread); their ratio is against that invocation's $reference."
echo
# Summary: one row per scene and N.
awk -F, -v ref="$reference" -v peers="${peers:-}" -v ours="$ours" -v slow="$slow_peers" -v tl="$threads_list" "$awk_common"'
  NR == 1 { for (i = 1; i <= NF; ++i) c[$i] = i; next }
  {
    key = $c["scene"] SUBSEP $c["n"]
    if (!(key in seen)) { seen[key] = 1; order[++rows] = key }
    run = $c["run"]; b = $c["backend"]
    med[run, b] = $c["median_ms"]
    if (!((key, b, $c["threads"]) in runOf)) runOf[key, b, $c["threads"]] = run  # the first run wins
    if (index("," peers ",", "," b ",") && (!(run in best) || $c["median_ms"] < best[run])) {
      best[run] = $c["median_ms"]; bestName[run] = b
    }
    if (b != ref && (b == slow || index("," slow ",", "," b ",")))
      slowRun[key, b] = run
  }
  function times(r) { return sprintf(" (%sx)", r >= 10 ? sprintf("%.0f", r) : sprintf("%.2f", r)) }
  # Ours against the best peer of the run, else against the reference; the
  # slow peers (own runs with the reference) against the reference.
  function cell(run, b, againstRef,   m) {
    if (run == "" || !((run, b) in med)) return "-"
    m = med[run, b]
    if (!againstRef && (run in best) && b != bestName[run]) return fmt(m) times(best[run] / m)
    if ((run, ref) in med && b != ref) return fmt(m) times(med[run, ref] / m)
    return fmt(m)
  }
  function bestCell(run) { return (run != "" && (run in best)) ? fmt(best[run]) " " bestName[run] : "-" }
  END {
    ns = split(slow, S, ",")
    h = "| scene | N | " ref " ms"; sep = "|---|---|---:"
    if (peers != "") { h = h " | best peer ms"; sep = sep "|---:" }
    for (s = 1; s <= ns; ++s) { h = h " | " S[s] " ms"; sep = sep "|---:" }
    printHeader(h, sep)
    for (k = 1; k <= rows; ++k) {
      split(order[k], p, SUBSEP)
      first = runOf[order[k], O[1], T[1]]
      line = "| " p[1] " | " nname(p[2]) " | " cell(runOf[order[k], ref, 1], ref, 1)
      if (peers != "") line = line " | " bestCell(first)
      for (s = 1; s <= ns; ++s) line = line " | " cell(slowRun[order[k], S[s]], S[s], 1)
      for (o = 1; o <= no; ++o) for (t = 1; t <= nt; ++t)
        line = line " | " cell(runOf[order[k], O[o], T[t]], O[o], 0)
      print line " |"
    }
  }' "$pairs_csv"
echo
echo "Every row, with p99, pairs and peak memory (run = the bpbench invocation in commands.txt):"
echo
echo "| run | scene | N | backend | threads | frames | median ms | p99 ms | pairs | peak MiB | speed-up vs $reference | vs best peer |"
echo "|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"
awk -F, -v ref="$reference" -v peers="${peers:-}" '
  NR == 1 { for (i = 1; i <= NF; ++i) c[$i] = i; next }
  {
    row[NR] = $0; run = $c["run"]
    if ($c["backend"] == ref) refm[run] = $c["median_ms"]
    if (index("," peers ",", "," $c["backend"] ",") && (!(run in best) || $c["median_ms"] < best[run]))
      best[run] = $c["median_ms"]
  }
  END {
    for (k = 2; k <= NR; ++k) {
      split(row[k], f, ",")
      run = f[c["run"]]; m = f[c["median_ms"]]
      r = (run in refm) ? sprintf("%.2fx", refm[run] / m) : "-"
      p = (run in best) ? sprintf("%.2fx", best[run] / m) : "-"
      printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", run, f[c["scene"]],
        f[c["n"]], f[c["backend"]], f[c["threads"]], f[c["frames"]], m, f[c["p99_ms"]],
        f[c["pairs"]], f[c["peak_mib"]], r, p
    }
  }' "$pairs_csv"
if [[ -s "$rays_csv" ]]; then
  echo
  echo "Rays against scene uniform (frame 0), the workloads of docs/scenes.md, $rays rays each; million"
  casts="the median of $ray_repeat casts"
  (( ray_repeat > 1 )) || casts="one cast"
  echo "rays per second, all threads together ($casts). Best Embree: the highest rate of"
  echo "${embree_apis:-embree} in the invocation; in brackets each of ours over it."
  echo
  awk -F, -v ours="$ours" -v tl="$threads_list" -v apis="${embree_apis:-embree}" "$awk_common"'
    NR == 1 { for (i = 1; i <= NF; ++i) c[$i] = i; next }
    {
      w = ("workload" in c) ? $c["workload"] : "random"  # older CSVs: random rays only
      key = w SUBSEP $c["query"] SUBSEP $c["n"]
      if (!(key in seen)) { seen[key] = 1; order[++rows] = key }
      run = $c["run"]; b = $c["backend"]; v = $c["mrays_per_s"]
      rate[run, b] = v
      if (!((key, b, $c["threads"]) in runOf)) runOf[key, b, $c["threads"]] = run
      if (index("," apis ",", "," b ",") && (!(run in best) || v > best[run])) {
        best[run] = v; bestName[run] = b
      }
    }
    function cell(run, b,   v) {
      if (run == "" || !((run, b) in rate)) return "-"
      v = rate[run, b]
      return (run in best) ? fmt(v) sprintf(" (%.2fx)", v / best[run]) : fmt(v)
    }
    END {
      printHeader("| workload | query | boxes | best Embree Mrays/s", "|---|---|---|---:")
      for (k = 1; k <= rows; ++k) {
        split(order[k], p, SUBSEP)
        first = runOf[order[k], O[1], T[1]]
        line = "| " p[1] " | " p[2] " | " nname(p[3]) " | " \
          ((first in best) ? fmt(best[first]) " " bestName[first] : "-")
        for (o = 1; o <= no; ++o) for (t = 1; t <= nt; ++t)
          line = line " | " cell(runOf[order[k], O[o], T[t]], O[o])
        print line " |"
      }
    }' "$rays_csv"
  echo
  echo "Every ray row (ratio = this rate / the invocation's first backend's):"
  echo
  echo "| run | workload | query | boxes | backend | threads | Mrays/s | ratio | hits |"
  echo "|---:|---|---|---:|---|---:|---:|---:|---:|"
  awk -F, 'NR == 1 { for (i = 1; i <= NF; ++i) c[$i] = i; next }
    { w = ("workload" in c) ? $c["workload"] : "random"
      printf "| %s | %s | %s | %s | %s | %s | %s | %.2fx (vs %s) | %s |\n", $c["run"], w, $c["query"],
        $c["n"], $c["backend"], $c["threads"], $c["mrays_per_s"], $c["ratio"], $c["ratio_to"], $c["hits"] }' "$rays_csv"
fi
} | tee "$out/table.md"

# --- The chart (SVG, no scripts) -------------------------------------------
# One row per scene and N; x = median ms per frame on a log scale; one colour
# per backend; filled markers one thread, hollow markers two or more.
awk -F, -v foot="$invocation (docs/performance.md)" -v title="bpbench pairs: median ms per frame, log scale (${cpu:-unknown CPU}, $threads_hw; library as of $code_commit)" '
  NR == 1 { for (i = 1; i <= NF; ++i) c[$i] = i; next }
  {
    key = $c["scene"] " " ($c["n"] == 100000 ? "10^5" : $c["n"] == 1000000 ? "10^6" : $c["n"])
    if (!(key in rowOf)) { rowOf[key] = ++rows; label[rows] = key }
    b = $c["backend"]; if (!(b in col)) { col[b] = ++nb; bname[nb] = b }
    if ((key, b, $c["threads"]) in done) next  # a peer is plotted from its first invocation
    done[key, b, $c["threads"]] = 1
    k = ++pts; pr[k] = rowOf[key]; pb[k] = col[b]; pt[k] = $c["threads"]; pm[k] = $c["median_ms"]
    v = log($c["median_ms"]) / log(10)
    if (pts == 1 || v < lo) lo = v; if (pts == 1 || v > hi) hi = v
  }
  END {
    split("#1a73e8 #e8710a #188038 #d93025 #9334e6 #5f6368 #12b5cb #f538a0 #795548 #b0b000", pal, " ")
    lo = int(lo - (lo < 0 ? 1 : 0)); hi = int(hi) + (hi > int(hi) ? 1 : 0)
    if (hi == lo) hi = lo + 1
    L = 130; W = 560; top = 50; rh = 24; H = top + rows * rh + 70
    printf "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" font-size=\"12\">\n", L + W + 190, H
    printf "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
    printf "<text x=\"%d\" y=\"22\" font-size=\"13\">%s</text>\n", 10, title
    for (d = lo; d <= hi; ++d) {
      x = L + (d - lo) / (hi - lo) * W
      printf "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#ddd\"/>\n", x, top - 8, x, top + rows * rh
      printf "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", x, top + rows * rh + 16, (d >= 0 ? 10 ^ d : sprintf("%g", 10 ^ d))
    }
    printf "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">ms per frame</text>\n", L + W / 2, top + rows * rh + 34
    printf "<text x=\"%d\" y=\"%d\" fill=\"#555\" font-size=\"11\">%s</text>\n", 10, top + rows * rh + 56, foot
    for (r = 1; r <= rows; ++r) {
      y = top + (r - 0.5) * rh
      printf "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" dominant-baseline=\"middle\">%s</text>\n", L - 8, y, label[r]
      if (r > 1 && substr(label[r], index(label[r], " ")) != substr(label[r - 1], index(label[r - 1], " ")))
        printf "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#999\"/>\n", 10, y - rh / 2, L + W, y - rh / 2
    }
    for (k = 1; k <= pts; ++k) {
      x = L + (log(pm[k]) / log(10) - lo) / (hi - lo) * W
      y = top + (pr[k] - 0.5) * rh + (pt[k] > 1 ? 5 : -3)
      colr = pal[(pb[k] - 1) % 10 + 1]
      if (pt[k] > 1) printf "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4.5\" fill=\"white\" stroke=\"%s\" stroke-width=\"2\"><title>%s %s threads: %s ms</title></circle>\n", x, y, colr, bname[pb[k]], pt[k], pm[k]
      else printf "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4.5\" fill=\"%s\"><title>%s 1 thread: %s ms</title></circle>\n", x, y, colr, bname[pb[k]], pm[k]
    }
    lx = L + W + 45
    for (b = 1; b <= nb; ++b) {
      y = top + (b - 1) * 20
      printf "<circle cx=\"%d\" cy=\"%d\" r=\"5\" fill=\"%s\"/><text x=\"%d\" y=\"%d\" dominant-baseline=\"middle\">%s</text>\n", lx, y, pal[(b - 1) % 10 + 1], lx + 12, y, bname[b]
    }
    y = top + nb * 20 + 10
    printf "<circle cx=\"%d\" cy=\"%d\" r=\"4.5\" fill=\"#444\"/><text x=\"%d\" y=\"%d\" dominant-baseline=\"middle\">1 thread</text>\n", lx, y, lx + 12, y
    printf "<circle cx=\"%d\" cy=\"%d\" r=\"4.5\" fill=\"white\" stroke=\"#444\" stroke-width=\"2\"/><text x=\"%d\" y=\"%d\" dominant-baseline=\"middle\">2 threads</text>\n", lx, y + 20, lx + 12, y + 20
    print "</svg>"
  }' "$pairs_csv" > "$out/pairs.svg"
echo "bench_table.sh: wrote $out/table.md, $out/pairs.csv, $out/rays.csv, $out/commands.txt, $out/pairs.svg" >&2
if (( ${#failed[@]} > 0 )); then
  echo "bench_table.sh: --check failed in run(s) ${failed[*]}" >&2
  exit 1
fi
