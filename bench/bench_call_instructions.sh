#!/usr/bin/env bash
# Instructions a traced call adds, counted by callgrind on one rank (a
# singleton, no mpirun): the difference between runs of 2N and N calls,
# divided by N, cancels start-up and MPI_Init. For a 1-byte MPI_Allreduce
# and a 1-byte MPI_Send + MPI_Recv pair to itself (C), a Fortran
# MPI_Allreduce (`use mpi`), and the C MPI_Allreduce built with MPICH,
# untraced and traced.
#   [LIB=path/to/libhangtrace.so] bench/bench_call_instructions.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind > /dev/null || { echo "bench_call_instructions.sh needs valgrind: apt-get install valgrind" >&2; exit 2; }
n=${1:-50000}
dir=$(mktemp -d /dev/shm/hangtrace-bench-calls-XXXXXX)
trap 'rm -rf "$dir"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
prog=build/tests/mpi_prog
lib=${LIB:-$PWD/build/lib/libhangtrace.so}  # LIB=...: another build of the library, to compare
count() {  # traced(0/1) COMMAND... -> instructions
  local out=$dir/cg.out traced=$1
  shift
  if [ "$traced" = 1 ]; then
    HANGTRACE_DIR=$dir/traces LD_PRELOAD=$lib valgrind --tool=callgrind --callgrind-out-file="$out" "$@" \
      > /dev/null 2> "$dir/log"
  else
    valgrind --tool=callgrind --callgrind-out-file="$out" "$@" > /dev/null 2> "$dir/log"
  fi
  sed -n 's/^summary: //p' "$out"
}
for mode in loop loop-p2p fortran mpich; do
  what=$(case $mode in loop) echo "MPI_Allreduce" ;; loop-p2p) echo "MPI_Send + MPI_Recv" ;;
         fortran) echo "Fortran MPI_Allreduce" ;; mpich) echo "MPI_Allreduce (MPICH)" ;; esac)
  run=("$prog" "$mode")
  if [ $mode = fortran ]; then
    [ -x build/tests/other/loop_fortran ] || { echo "$what: build/tests/other/loop_fortran not built (gfortran)"; continue; }
    run=(build/tests/other/loop_fortran)
  elif [ $mode = mpich ]; then
    [ -x build/tests/other/stuck_mpich ] || { echo "$what: build/tests/other/stuck_mpich not built (mpich)"; continue; }
    run=(build/tests/other/stuck_mpich loop)
  fi
  u1=$(count 0 "${run[@]}" "$n"); u2=$(count 0 "${run[@]}" $((2 * n)))
  t1=$(count 1 "${run[@]}" "$n"); t2=$(count 1 "${run[@]}" $((2 * n)))
  awk -v u1="$u1" -v u2="$u2" -v t1="$t1" -v t2="$t2" -v n="$n" -v what="$what" 'BEGIN {
    u = (u2 - u1) / n; t = (t2 - t1) / n
    printf "%-22s untraced %6.1f, traced %6.1f instructions per iteration: %+.1f\n", what, u, t, t - u }'
done
