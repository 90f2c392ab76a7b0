#!/usr/bin/env bash
# Host-side overhead of the NCCL and kernel-launch wrappers, on the FAKE
# libraries of tests/fakes (there is no GPU here): ns per ncclAllReduce and
# per cudaLaunchKernel as issued (batches of 256, then a sync), untraced and
# traced with HANGTRACE_DEVICE_EVENTS=off, coll and all, and all with
# HANGTRACE_BLOCKING=all (each call waits for its stream), rounds interleaved.
# The fakes' own cost (a mutex and a queue per call; a second queue entry per
# event) is in every column; the differences are what hangtrace adds here.
# On a real GPU an event record costs what cudaEventRecord costs there.
#   bench/bench_gpu.sh [CALLS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
calls=${1:-50000}
rounds=${2:-7}
prog=build/bench/gpu_calls
[ -x "$prog" ] || { echo "bench_gpu: $prog not built (needs the CUDA/NCCL headers)" >&2; exit 1; }
dir=$(mktemp -d /tmp/hangtrace-bench-gpu-XXXXXX)
trap 'rm -rf "$dir"; rm -f /dev/shm/hangtrace-test-fakenccl-*' EXIT
run() { "$@" "$prog" "$calls" | awk '{printf "%s ", $2} END {print ""}'; }
echo "round  untraced(nccl launch)  events=off  events=coll  events=all  blocking=all"
for i in $(seq "$rounds"); do
  a=$(run env)
  b=$(run env HANGTRACE_DEVICE_EVENTS=off build/bin/hangtrace run --dir "$dir" --)
  c=$(run env HANGTRACE_DEVICE_EVENTS=coll build/bin/hangtrace run --dir "$dir" --)
  d=$(run env HANGTRACE_DEVICE_EVENTS=all build/bin/hangtrace run --dir "$dir" --)
  e=$(run env HANGTRACE_DEVICE_EVENTS=all HANGTRACE_BLOCKING=all build/bin/hangtrace run --dir "$dir" --)
  echo "$i  $a $b $c $d $e"
done | tee "$dir/rounds"
awk '
  function median(v, n,   i, j, t) {
    for (i = 1; i <= n; ++i) for (j = i + 1; j <= n; ++j) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
    return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
  }
  { n++; for (k = 2; k <= 11; ++k) col[k, n] = $k }
  END {
    split("untraced events=off events=coll events=all blocking=all", name, " ")
    for (k = 2; k <= 11; ++k) { for (i = 1; i <= n; ++i) v[i] = col[k, i]; m[k] = median(v, n) }
    printf "\nmedian ns per call over %d rounds (added over untraced)\n", n
    printf "  %-12s %18s %18s\n", "", "ncclAllReduce", "cudaLaunchKernel"
    for (c = 0; c < 5; ++c) {
      printf "  %-12s %9.1f (%+6.1f) %9.1f (%+6.1f)\n", name[c + 1], m[2 + 2 * c], m[2 + 2 * c] - m[2], m[3 + 2 * c], m[3 + 2 * c] - m[3]
    }
  }' "$dir/rounds"
