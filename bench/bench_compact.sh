#!/usr/bin/env bash
# Compact dumps against whole files (docs/DUMP.md, "Compact dumps"):
#  1. the trainer after a long run (8 ranks, 400 steps, the seed's hang at
#     the last): bytes per rank `hangtrace dump` ships, compact (the default)
#     and --full, the dump's time, and whether the two diagnoses agree;
#  2. a simulated job of RANKS ranks with RECORDS records per rank: the
#     folder compacted (bench/compact_folder, as the dump compacts on each
#     node), bytes and `hangtrace analyze` time, compact and whole.
#   bench/bench_compact.sh [RANKS] [RECORDS]    (defaults 16384 8192)
set -euo pipefail
cd "$(dirname "$0")/.."
ranks=${1:-16384}
records=${2:-8192}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
work=$(mktemp -d /tmp/hangtrace-bench-compact-XXXXXX)
export HANGTRACE_REPORT_DIR=$work/report  # the job's automatic report
job=""
trap '[ -n "$job" ] && kill -KILL -- -$job 2>/dev/null; rm -rf "$work"' EXIT
ht=build/bin/hangtrace
allocated() { find "$1" -name '*.htrace' -printf '%b\n' | awk '{s += $1 * 512} END {print s}'; }

echo "== the trainer, 8 ranks, 400 steps, hung at the last"
setsid mpirun -np 8 --oversubscribe $ht run --dir "$work/t" --job long --timeout 3 -- build/bin/hangtrace-trainer \
  --tp 2 --pp 2 --dp 2 --steps 400 --fault seed-hang@rank=3,step=399 > "$work/job.out" 2>&1 &
job=$!
for _ in $(seq 600); do grep -q "iteration *398/" "$work/job.out" && break; sleep 0.1; done
sleep 4  # the watchdog's stacks
for mode in compact full; do
  flag=""; [ $mode = full ] && flag=--full
  t0=$(date +%s.%N)
  $ht dump --dir "$work/t" --job long --no-stacks --quiet $flag --out "$work/d-$mode" > /dev/null
  t1=$(date +%s.%N)
  b=$(allocated "$work/d-$mode")
  awk -v b="$b" -v a="$t0" -v z="$t1" -v m=$mode 'BEGIN {printf "  %-7s %8.1f KB per rank, dump %.2f s\n", m, b / 8 / 1024, z - a}'
  { $ht analyze "$work/d-$mode" || true; } | head -1 > "$work/verdict-$mode"
done
kill -KILL -- -$job 2>/dev/null || true
job=""
cmp -s "$work/verdict-compact" "$work/verdict-full" && echo "  same verdict: $(cat "$work/verdict-full")" ||
  { echo "  verdicts differ:"; cat "$work/verdict-compact" "$work/verdict-full"; }
rm -rf "$work/t" "$work/d-compact" "$work/d-full"

echo "== simulated: $ranks ranks, about $records records per rank, the seed's hang"
$ht simulate --tp 8 --pp 16 --dp $((ranks / 128)) --records "$records" --fault seed-hang@rank=127 \
  --out "$work/sim" > /dev/null
job_dir=$(ls -d "$work"/sim/*/ | head -1)
echo "  compacting: $(build/bench/compact_folder "$job_dir" "$work/compact")"
for f in "$job_dir" "$work/compact"; do
  sync; best=""
  for r in 1 2 3; do
    t0=$(date +%s.%N); $ht analyze "$f" > "$work/report.txt" || true; t1=$(date +%s.%N)
    best=$(awk -v a="$t0" -v b="$t1" -v best="$best" 'BEGIN {t = b - a; print (best == "" || t < best) ? t : best}')
  done
  awk -v b="$(allocated "$f")" -v t="$best" -v f="$([ "$f" = "$job_dir" ] && echo whole || echo compact)" \
    'BEGIN {printf "  %-7s %9.1f MB, analyze %.2f s (best of 3): ", f, b / 1e6, t}'
  head -1 "$work/report.txt"
done
