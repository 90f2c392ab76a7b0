#!/usr/bin/env bash
# Time of `hangtrace dump`: one traced process with 64 threads (parked in
# pause()), with and without symbols, and 8 such processes of 8 threads; the
# figures are the dump's own wall time (node.json "seconds"), medians of
# ROUNDS. Then the srun-driven end-to-end time on 4 emulated SLURM nodes
# (tests/slurm/test_srun_dump.sh prints it).
#   bench/bench_dump.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
work=$(mktemp -d /tmp/hangtrace-bench-dump-XXXXXX)
pids=()
trap 'kill -9 "${pids[@]}" 2>/dev/null || true; rm -rf "$work"' EXIT
start() {  # start N processes of T threads each
  for i in $(seq "$1"); do
    LD_PRELOAD=$PWD/build/lib/libhangtrace.so HANGTRACE_DIR="$work/traces" HANGTRACE_JOB=j RANK=$i \
      build/tests/traced_prog park "$2" > /dev/null &
    pids+=($!)
  done
  sleep 1
}
median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
dump() {  # prints the dump's seconds
  rm -rf "$work/out"
  build/bin/hangtrace dump --dir "$work/traces" --job j --out "$work/out" --quiet "$@"
  python3 -c "import json,sys,glob; print(json.load(open(glob.glob('$work/out/*/node.json')[0]))['seconds'])"
}
start 1 63
threads=$(ls /proc/"${pids[0]}"/task | wc -l)
sym=$(for r in $(seq "$rounds"); do dump; done | median)
nosym=$(for r in $(seq "$rounds"); do dump --no-symbols; done | median)
nostack=$(for r in $(seq "$rounds"); do dump --no-stacks; done | median)
kill -9 "${pids[@]}"; pids=(); rm -rf "$work/traces"
start 8 7
eight=$(for r in $(seq "$rounds"); do dump; done | median)
awk -v t="$threads" -v s="$sym" -v n="$nosym" -v ns="$nostack" -v e="$eight" 'BEGIN {
  printf "1 process, %d threads:   %.3f s with symbols (%.2f ms/thread), %.3f s without (%.2f ms/thread), %.3f s trace file only\n", t, s, 1000 * s / t, n, 1000 * n / t, ns
  printf "8 processes x 9 threads: %.3f s with symbols (%.1f ms/process)\n", e, 1000 * e / 8
}'
if command -v slurmctld > /dev/null; then
  for r in $(seq 3); do tests/slurm/test_srun_dump.sh build 2>/dev/null | awk '/^srun-dump took/ {print $3}'; done |
    median | awk '{printf "srun-dump, 4 emulated nodes x 2 ranks, end to end (dump + analysis): %.2f s (median of 3)\n", $1}'
fi
