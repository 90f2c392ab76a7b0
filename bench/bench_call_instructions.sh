#!/usr/bin/env bash
# Instructions a traced call adds, counted by callgrind on one rank (a
# singleton, no mpirun): the difference between runs of 2N and N calls,
# divided by N, cancels start-up and MPI_Init. For a 1-byte MPI_Allreduce
# and a 1-byte MPI_Send + MPI_Recv pair to itself (C), a Fortran
# MPI_Allreduce (`use mpi`), the C MPI_Allreduce built with MPICH, and
# torch's dist.all_reduce on one float (gloo, one rank, Debian's
# python3-torch; N/25 calls: a run takes a minute under callgrind) traced by
# the hook's C++ record path and by its ctypes fallback; untraced and traced.
#   [LIB=path/to/libhangtrace.so] [MODES="loop torch ..."] bench/bench_call_instructions.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind > /dev/null || { echo "bench_call_instructions.sh needs valgrind: apt-get install valgrind" >&2; exit 2; }
n=${1:-50000}
dir=$(mktemp -d /dev/shm/hangtrace-bench-calls-XXXXXX)
trap 'rm -rf "$dir"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
prog=build/tests/mpi_prog
lib=${LIB:-$PWD/build/lib/libhangtrace.so}  # LIB=...: another build of the library, to compare
hook=$(dirname "$lib")/hangtrace/python  # the Python hook, as `hangtrace run` puts it on PYTHONPATH
count() {  # traced(0/1) COMMAND... -> instructions
  local out=$dir/cg.out traced=$1
  shift
  if [ "$traced" = 1 ]; then
    HANGTRACE_DIR=$dir/traces LD_PRELOAD=$lib PYTHONPATH=$hook valgrind --tool=callgrind \
      --callgrind-out-file="$out" "$@" > /dev/null 2> "$dir/log"
  else
    valgrind --tool=callgrind --callgrind-out-file="$out" "$@" > /dev/null 2> "$dir/log"
  fi
  sed -n 's/^summary: //p' "$out"
}
for mode in ${MODES:-loop loop-p2p fortran mpich torch torch-ctypes}; do
  what=$(case $mode in loop) echo "MPI_Allreduce" ;; loop-p2p) echo "MPI_Send + MPI_Recv" ;;
         fortran) echo "Fortran MPI_Allreduce" ;; mpich) echo "MPI_Allreduce (MPICH)" ;;
         torch) echo "dist.all_reduce" ;; torch-ctypes) echo "dist.all_reduce, ctypes" ;; esac)
  run=("$prog" "$mode")
  calls=$n
  if [ ${mode%-ctypes} = torch ]; then
    /usr/bin/python3 -c "import torch.distributed" 2> /dev/null || { echo "$what: no python3-torch"; continue; }
    export OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$((20000 + RANDOM % 20000))
    export HANGTRACE_TORCH=$([ $mode = torch ] && echo 1 || echo ctypes)
    export WARMUP=1000  # 2N - N cancels it anyway
    run=(/usr/bin/python3 bench/torch_allreduce.py)
    calls=$((n / 25))
  elif [ $mode = fortran ]; then
    [ -x build/tests/other/loop_fortran ] || { echo "$what: build/tests/other/loop_fortran not built (gfortran)"; continue; }
    run=(build/tests/other/loop_fortran)
  elif [ $mode = mpich ]; then
    [ -x build/tests/other/stuck_mpich ] || { echo "$what: build/tests/other/stuck_mpich not built (mpich)"; continue; }
    run=(build/tests/other/stuck_mpich loop)
  fi
  if [ $mode = torch-ctypes ] && [ -n "${torch_u2:-}" ]; then  # the same untraced runs as torch's
    u1=$torch_u1 u2=$torch_u2
  else
    u1=$(count 0 "${run[@]}" "$calls"); u2=$(count 0 "${run[@]}" $((2 * calls)))
  fi
  [ $mode = torch ] && torch_u1=$u1 torch_u2=$u2
  t1=$(count 1 "${run[@]}" "$calls"); t2=$(count 1 "${run[@]}" $((2 * calls)))
  awk -v u1="$u1" -v u2="$u2" -v t1="$t1" -v t2="$t2" -v n="$calls" -v what="$what" 'BEGIN {
    u = (u2 - u1) / n; t = (t2 - t1) / n
    printf "%-22s untraced %6.1f, traced %6.1f instructions per iteration: %+.1f\n", what, u, t, t - u }'
done
