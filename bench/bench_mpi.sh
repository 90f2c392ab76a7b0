#!/usr/bin/env bash
# Overhead of the MPI wrappers: a 1-byte MPI_Allreduce loop on 2 ranks,
# untraced and traced runs interleaved (so drift hits both alike); prints the
# median ns per call of each, their ratio and the ns added per call.
#   bench/bench_mpi.sh [CALLS_PER_RUN] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
calls=${1:-200000}
rounds=${2:-9}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
dir=$(mktemp -d /tmp/hangtrace-bench-mpi-XXXXXX)
trap 'rm -rf "$dir"' EXIT
prog=build/tests/mpi_prog
run() { mpirun -np 2 --oversubscribe "$@" | awk '/^ns_per_allreduce/ {print $2}'; }
echo "round  untraced_ns  traced_ns"
for i in $(seq "$rounds"); do
  base=$(run "$prog" loop "$calls")
  traced=$(run build/bin/hangtrace run --dir "$dir" -- "$prog" loop "$calls")
  echo "$i  $base  $traced"
done | tee "$dir/rounds"
awk -v unit=ns -v what="per MPI_Allreduce" -f bench/interleaved.awk "$dir/rounds"
