#!/usr/bin/env bash
# Overhead of the torch.distributed hook: a loop of dist.all_reduce on one
# float (gloo, 2 ranks, Debian's python3-torch), untraced and traced runs
# interleaved; prints the median ns per call of each, their ratio and the ns
# added per call, after a warm-up (bench/torch_allreduce.py says why).
#   [RANKS=1] [HANGTRACE_TORCH=ctypes] bench/bench_torch.sh [CALLS_PER_RUN] [ROUNDS]
# HANGTRACE_TORCH=ctypes: the hook's ctypes fallback in place of its C++
# record path (python/_hangtrace_torch.cc), to compare.
set -euo pipefail
cd "$(dirname "$0")/.."
calls=${1:-20000}
ranks=${RANKS:-2}  # RANKS=1: one rank, no network: the hook's own cost stands out
rounds=${2:-5}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 MASTER_ADDR=127.0.0.1
dir=$(mktemp -d /dev/shm/hangtrace-bench-torch-XXXXXX)  # where trace files go by default (tmpfs: no writeback)
trap 'rm -rf "$dir"' EXIT
run() {
  MASTER_PORT=$((20000 + RANDOM % 20000)) mpirun -np "$ranks" --oversubscribe -x MASTER_ADDR -x MASTER_PORT \
    -x HANGTRACE_TORCH="${HANGTRACE_TORCH:-1}" "$@" |
    awk '/^ns_per_allreduce/ {print $2}'
}
echo "round  untraced_ns  traced_ns"
for i in $(seq "$rounds"); do
  base=$(run /usr/bin/python3 bench/torch_allreduce.py "$calls")
  traced=$(run build/bin/hangtrace run --dir "$dir" -- /usr/bin/python3 bench/torch_allreduce.py "$calls")
  echo "$i  $base  $traced"
done | tee "$dir/rounds"
awk -v unit=ns -v what="per dist.all_reduce" -f bench/interleaved.awk "$dir/rounds"
