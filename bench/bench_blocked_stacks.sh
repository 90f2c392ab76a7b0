#!/usr/bin/env bash
# How complete a blocked thread's stack is when read from its stack pointer
# and pc alone (what every capture does by default: docs/DUMP.md, "How
# stacks are captured"), against the stack from all its registers (a ptrace
# stop: `hangtrace dump --stop-all`). Each job is dumped twice, both ways, a
# moment apart; threads blocked in a system call at both looks (the same
# /proc syscall line) are compared frame by frame:
#   same        the same frames
#   shorter     a prefix of the full stack (the read stopped early)
#   other       something else (the thread moved between the looks, or a
#               wrong frame: should be 0)
#   scanned     of `same`, how many needed a frame pointer found on the stack
# Jobs: the bundled trainer's seed hang (traced), a torch.distributed job
# (gloo, untraced), the seed hang in mpi4py, and LAMMPS and GROMACS from
# Debian with a rank stopped (a stopped rank's threads are read where they
# stopped, running code included).
#   bench/bench_blocked_stacks.sh
set -uo pipefail
cd "$(dirname "$0")/.."
src=$PWD
ht=$src/build/bin/hangtrace
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
work=$(mktemp -d /tmp/hangtrace-bench-blocked-XXXXXX)
job=0
# Every process of a case carries the marker: ranks that sit in process
# groups of their own (torch's, blocked in gloo, outlive their mpirun) are
# killed by it.
export HANGTRACE_BENCH_RUN=$work
kill_marked() {
  local p
  for p in /proc/[0-9]*; do
    grep -qs "HANGTRACE_BENCH_RUN=$work" "$p/environ" && kill -9 "${p#/proc/}" 2>/dev/null
  done
  return 0
}
trap '[ "$job" -gt 0 ] && kill -9 -- -"$job" 2>/dev/null; kill_marked; rm -rf "$work"' EXIT
cd "$work"

run_case() {  # NAME SETTLE_S CMD...: start the job, wait, dump both ways, compare
  local name=$1 settle=$2
  shift 2
  rm -rf a b traces
  setsid "$@" > job.out 2>&1 &
  job=$!
  sleep "$settle"
  [ -n "${stop_rank:-}" ] && kill -STOP "$(pgrep -f "$stop_rank" | sed -n 2p)" 2>/dev/null
  "$ht" dump -p "$job" -o a --quiet > /dev/null 2>&1
  "$ht" dump -p "$job" -o b --quiet --stop-all > /dev/null 2>&1
  kill -9 -- -"$job" 2>/dev/null
  wait "$job" 2>/dev/null
  kill_marked
  job=0
  python3 "$src/bench/compare_blocked_stacks.py" "$name" a b
}

printf '%-22s %8s %6s %8s %6s %8s\n' job blocked same shorter other scanned
run_case trainer-seed-hang 12 mpirun -np 8 "$ht" run --dir "$work/traces" --timeout 3 -- \
  "$src/build/bin/hangtrace-trainer" --tp 2 --pp 2 --dp 2 --steps 20 --fault seed-hang@rank=3,step=3
if /usr/bin/python3 -c 'import torch.distributed' 2> /dev/null; then
  run_case torch-gloo-skip 25 mpirun -np 4 /usr/bin/python3 "$src/tests/python/torch_hang.py" skip
fi
if /usr/bin/python3 -c 'import mpi4py' 2> /dev/null; then
  run_case mpi4py-seed-hang 8 mpirun -np 4 /usr/bin/python3 "$src/tests/python/seed_hang.py" --hang-rank 3 --steps 50
fi
if command -v lmp > /dev/null; then
  cp "$src/tests/apps/lj_melt.in" in.lj
  stop_rank=lmp run_case lammps-rank-stopped 8 mpirun -np 4 lmp -in in.lj -var steps 1000000 -log none
fi
if command -v gmx_mpi > /dev/null; then
  export GMX_MAXBACKUP=-1
  gmx solvate -cs spc216.gro -box 2.5 2.5 2.5 -o conf.gro > /dev/null 2>&1
  printf '#include "oplsaa.ff/forcefield.itp"\n#include "oplsaa.ff/spce.itp"\n[ system ]\nwater\n[ molecules ]\nSOL %d\n' \
    "$(grep -c OW conf.gro)" > topol.top
  printf '%s\n' "integrator = md" "dt = 0.002" "nsteps = 5000000" "cutoff-scheme = Verlet" "coulombtype = PME" \
    "rcoulomb = 1.0" "rvdw = 1.0" "tcoupl = v-rescale" "tc-grps = System" "tau-t = 0.1" "ref-t = 300" \
    "constraints = h-bonds" > md.mdp
  gmx grompp -f md.mdp -c conf.gro -p topol.top -o md.tpr > /dev/null 2>&1
  stop_rank=gmx_mpi run_case gromacs-rank-stopped 15 mpirun -np 4 gmx_mpi mdrun -s md.tpr -ntomp 1 -deffnm md
fi
