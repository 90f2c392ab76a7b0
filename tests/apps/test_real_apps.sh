#!/usr/bin/env bash
# Real MPI applications from Debian's packages (hpcc, NetPIPE built with
# Open MPI and with MPICH, Elk in Fortran, LAMMPS, GROMACS), which
# nobody wrote for hangtrace, traced or not, healthy or with one rank
# stopped (SIGSTOP: what a wedged rank looks like from outside). Each
# scenario checks the report against what really happened.
#   tests/apps/test_real_apps.sh BUILD_DIR SCENARIO
# SCENARIO:
#   netpipe-stopped   NPopenmpi (blocking ping-pong) traced, rank 1 stopped:
#                     a hang, rank 1 the culprit, rank 0 in MPI_Recv from it
#   netpipe-auto      the same with the automatic report on (a 2 s
#                     watchdog): within 12 s of the stop the job's log holds
#                     one report, rank 1 the culprit, and no line per rank
#   netpipe-mpich-stopped
#                     the same with NPmpich2 (NetPIPE built with MPICH) under
#                     mpirun.mpich
#   elk-stopped       Elk (elk-lapw, Fortran, Open MPI's Fortran bindings)
#                     traced, rank 2 stopped in its self-consistent loop: a
#                     hang, rank 2 the culprit, the others in MPI calls with
#                     their communicator and sequence number
#   hpcc-stopped      hpcc traced, rank 2 stopped in MPIRandomAccess, where
#                     the others poll MPI_Test/Testany on a receive and a send
#                     in turn: a hang (two snapshots: nobody moved), rank 2
#                     the culprit, the others polling
#   lammps-untraced   LAMMPS started under no tool, rank 1 stopped, dumped
#                     by mpirun's pid: stacks only, rank 1 the culprit, the
#                     others in MPI calls (not always one) under
#                     LAMMPS_NS::Verlet::run
#   lammps-healthy    LAMMPS traced and untraced: the same thermodynamic
#                     output (the tracer changes nothing), no hang reported
#   gromacs-stopped   GROMACS (gmx_mpi mdrun, 510 waters, PME) traced, rank 2
#                     stopped: a hang, rank 2 the culprit, never a cycle
#                     among the others (its halo exchanges are MPI_Sendrecv
#                     to one rank and from another)
#   gromacs-untraced  the same started under no tool, dumped by mpirun's pid:
#                     stacks only, rank 2 the culprit, the tree through
#                     do_md with long signatures shortened ("do_force(...)")
set -euo pipefail
build=$(cd "${1:?usage: $0 BUILD_DIR SCENARIO}" && pwd)
scenario=${2:?usage: $0 BUILD_DIR SCENARIO}
hangtrace=$build/bin/hangtrace
src=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d /tmp/hangtrace-apps-XXXXXX)
job_pid=""
cleanup() {
  if [ -n "$job_pid" ]; then
    kill -CONT -- "-$job_pid" 2>/dev/null || true
    kill -9 -- "-$job_pid" 2>/dev/null || true
  fi
  # Every process of this run carries the marker (a launcher may have put
  # ranks in process groups of their own); the folder goes once they are
  # gone, not while one still writes its output there (Elk does).
  local p
  for _ in $(seq 50); do
    local left=0
    for p in /proc/[0-9]*; do
      [ "${p#/proc/}" = $$ ] && continue
      if grep -qs "HANGTRACE_APPS_TEST=$work" "$p/environ" 2>/dev/null; then
        kill -9 "${p#/proc/}" 2>/dev/null
        left=1
      fi
    done
    [ "$left" = 0 ] && break
    sleep 0.1
  done
  rm -rf "$work" 2>/dev/null || { sleep 0.5; rm -rf "$work"; }
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  for f in report.txt analyze.err dump.out job.out; do [ -f "$work/$f" ] && { echo "--- $f"; head -60 "$work/$f"; }; done >&2
  exit 1
}
need() { command -v "$1" > /dev/null || fail "$1 is not installed (./scripts/setup.sh installs $2)"; }

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
export TMPDIR=$work/tmp HANGTRACE_APPS_TEST=$work  # the ranks of this run carry it in their environment
mkdir -p "$TMPDIR"
cd "$work"

start() {  # a job in a process group of its own; its output in job.out
  setsid "$@" > job.out 2>&1 &
  job_pid=$!
  disown "$job_pid"  # killed at the end: no job-control message
}
# The pid of rank $2 among the processes named $1 of this run.
rank_pid() {
  local p env
  for p in $(pgrep -x "$1"); do
    env=$( { tr '\0' '\n' < "/proc/$p/environ"; } 2>/dev/null) || continue  # it may be gone
    if grep -qx "HANGTRACE_APPS_TEST=$work" <<< "$env" && grep -qxE "(OMPI_COMM_WORLD_RANK|PMI_RANK)=$2" <<< "$env"; then
      echo "$p"
      return 0
    fi
  done
}
wait_for() {  # $1 tries of 0.1 s until "${@:2}" succeeds
  local tries=$1
  shift
  for _ in $(seq "$tries"); do "$@" && return 0; kill -0 "$job_pid" 2>/dev/null || return 1; sleep 0.1; done
  return 1
}
trace_of_rank() {  # the trace file of rank $1 of $2 (a file may exist before it is laid out: tried for 5 s)
  local f
  for _ in $(seq 50); do
    for f in "$work"/traces/*/*.htrace; do
      [[ "$("$hangtrace" inspect "$f" --events 0 2> /dev/null)" == *"rank $1 of $2"* ]] && { echo "$f"; return 0; }
    done
    sleep 0.1
  done
  fail "no trace file of rank $1"
}
files_at_least() { [ "$(find "$work/traces" -name '*.htrace' 2>/dev/null | wc -l)" -ge "$1" ]; }
# The analysis, its exit status in $status.
analyze() {
  status=0
  "$hangtrace" analyze "$@" > report.txt 2> analyze.err || status=$?
}
expect() {  # a pattern the report must hold
  grep -qE -- "$1" report.txt || fail "$scenario: the report lacks /$1/"
}
stop_rank() {  # SIGSTOP rank $2 of program $1; its pid in $victim
  victim=$(rank_pid "$1" "$2")
  [ -n "$victim" ] || fail "rank $2 of $1 not found"
  kill -STOP "$victim"
}
# Two reads $1 s apart of the traced job with $victim (rank $2) stopped: a
# hang, that rank the culprit, nobody moving.
expect_stopped_culprit() {
  analyze "$work"/traces/*/ --interval "$1"
  [ "$status" -eq 3 ] || fail "analyze exited $status, not 3 (a hang)"
  expect '^hangtrace: HANG'
  expect "culprit rank $2 \(.*pid $victim\): is stopped"
  expect 'progress since the earlier snapshot: no rank moved'
}

case "$scenario" in
netpipe-stopped | netpipe-mpich-stopped)
  # NetPIPE built with Open MPI, or with MPICH (Debian's netpipe-mpich2) under
  # MPICH's launcher: the MPICH build of the wrappers records that one.
  if [ "$scenario" = netpipe-stopped ]; then
    prog=NPopenmpi package=netpipe-openmpi launch=(mpirun -np 2 --oversubscribe)
  else
    prog=NPmpich2 package=netpipe-mpich2 launch=(mpirun.mpich -np 2)
  fi
  need "$prog" "$package"
  start "${launch[@]}" "$hangtrace" run --dir "$work/traces" --timeout 0 "$prog" -o np.out
  wait_for 300 files_at_least 2 || fail "NetPIPE's ranks did not start"
  sleep 1
  stop_rank "$prog" 1
  sleep 1.5
  expect_stopped_culprit 1 1
  expect 'rank 0 +1 +in MPI_Recv #[0-9]+ on world from rank 1'
  ;;
netpipe-auto)
  need NPopenmpi netpipe-openmpi
  start env HANGTRACE_REPORT=1 HANGTRACE_REPORT_DIR="$work/report" \
    mpirun -np 2 --oversubscribe "$hangtrace" run --dir "$work/traces" --timeout 2 NPopenmpi -o np.out
  wait_for 300 files_at_least 2 || fail "NetPIPE's ranks did not start"
  sleep 1
  stop_rank NPopenmpi 1
  since=$(date +%s.%N)
  reported() { grep -q "hangtrace: the report: " job.out; }
  wait_for 150 reported || fail "no automatic report in the job's log"
  awk -v a="$since" -v b="$(date +%s.%N)" 'BEGIN { printf "automatic report %.1f s after the stop\n", b - a; exit !(b - a <= 12) }' ||
    fail "the automatic report came later than the timeout (2 s) + 10 s"
  [ "$(grep -c 'hangtrace: automatic report of job' job.out)" = 1 ] || fail "not exactly one automatic report"
  grep -q 'hangtrace: watchdog:' job.out && fail "watchdog lines per rank beside the report"
  cp job.out report.txt
  expect '^hangtrace: HANG'
  expect "culprit rank 1 \(.*pid $victim\): is stopped"
  expect 'rank 0 +1 +in MPI_Recv #[0-9]+ on world from rank 1'
  kill -CONT "$victim"
  ;;
elk-stopped)
  # Elk (elk-lapw), a Fortran DFT code: Open MPI's Fortran bindings, whose
  # entry points hangtrace wraps. Its aluminium example, 8x8x8 k-points.
  need elk-lapw elk-lapw
  sed -e "s|'../../../species/'|'/usr/share/elk-lapw/species/'|" -e 's/^  4  4  4$/  8  8  8/' \
    /usr/share/doc/elk-lapw/examples/basic/Al/elk.in > elk.in
  export OMP_NUM_THREADS=1  # one thread per rank: 4 ranks on this machine
  start mpirun -np 4 --oversubscribe "$hangtrace" run --dir "$work/traces" --timeout 0 elk-lapw
  wait_for 300 files_at_least 4 || fail "Elk's ranks did not start"
  # In its self-consistent loop once rank 0 has broadcast a few times.
  rank0=$(trace_of_rank 0 4)
  looping() { [ "$("$hangtrace" inspect "$rank0" --events 400 | grep -c 'BEGIN    MPI_')" -ge 20 ]; }
  wait_for 300 looping || fail "Elk never reached its loop"
  stop_rank elk-lapw 2
  sleep 2
  expect_stopped_culprit 1 2
  expect 'in MPI_[A-Za-z]+ #[0-9]+ on '
  ;;
hpcc-stopped)
  need hpcc hpcc
  # The example input with N=4000: MPIRandomAccess, hpcc's first phase,
  # runs for seconds.
  sed '6s/^[0-9]* /4000 /' /usr/share/doc/hpcc/examples/_hpccinf.txt > hpccinf.txt
  start mpirun -np 4 --oversubscribe "$hangtrace" run --dir "$work/traces" --timeout 0 hpcc
  wait_for 300 files_at_least 4 || fail "hpcc's ranks did not start"
  rank0=$(trace_of_rank 0 4)
  # RandomAccess has begun when rank 0 posts its first MPI_Isend.
  sends() { [[ "$("$hangtrace" inspect "$rank0" --events 200)" == *MPI_Isend* ]]; }
  wait_for 300 sends || fail "hpcc never reached MPIRandomAccess"
  stop_rank hpcc 2
  sleep 2
  expect_stopped_culprit 2 2
  # The others poll or wait for it: MPI_Test* in RandomAccess's main loop,
  # or MPI_Wait* where a rank reached its end (timing decides which).
  "$hangtrace" analyze "$work"/traces/*/ --format json > report.json 2> /dev/null || true
  python3 - <<'PY' || fail "ranks 0,1,3 are not all waiting in MPI_Test*/MPI_Wait*"
import json
j = json.load(open("report.json"))
waiting = set()
for g in j["groups"]:
    if g["state"] == "in_call" and g["op"] == "wait" and g["api"].startswith(("MPI_Test", "MPI_Wait")):
        waiting |= set(g["rank_list"])
assert waiting == {0, 1, 3}, waiting
PY
  ;;
lammps-untraced | lammps-healthy)
  need lmp lammps
  cp "$src/tests/apps/lj_melt.in" in.lj  # LAMMPS's Lennard-Jones melt benchmark, 32,000 atoms
  ;;&
lammps-untraced)
  start mpirun -np 4 --oversubscribe lmp -in in.lj -var steps 1000000 -log none
  running() { grep -q '^ *Step' job.out; }
  wait_for 600 running || fail "LAMMPS did not start its run"
  stop_rank lmp 1
  sleep 1
  "$hangtrace" dump -p "$job_pid" -o "$work/dump" > dump.out 2>&1 || fail "dump failed"
  grep -q '4 untraced' dump.out || fail "the dump did not find LAMMPS's 4 ranks under mpirun"
  analyze "$work/dump"
  [ "$status" -eq 3 ] || fail "analyze exited $status, not 3 (a hang)"
  expect '^hangtrace: HANG: stacks only'
  expect "culprit rank 1 \(.*pid $victim\): stopped"
  expect 'LAMMPS_NS::Verlet::run'
  expect '0 of 4 ranks traced'
  # Every other rank waits in an MPI call, not always the same one: a rank
  # whose exchange with rank 1's neighbours was still under way when rank 1
  # stopped waits in MPI_Send where the rest wait in MPI_Sendrecv.
  "$hangtrace" analyze "$work/dump" --format json > report.json 2> /dev/null || true
  python3 - <<'PY' || fail "ranks 0,2,3 are not all in MPI calls"
import json
j = json.load(open("report.json"))
in_mpi = set()
for g in j["groups"]:
    if g["state"] == "in_call" and g["api"].startswith("MPI_"):
        in_mpi |= set(g["rank_list"])
assert in_mpi == {0, 2, 3}, in_mpi
PY
  ;;
lammps-healthy)
  thermo() { sed -n '/^ *Step/,/^Loop time/p' "$1" | grep -v '^Loop time'; }
  mpirun -np 2 --oversubscribe lmp -in in.lj -var steps 200 -log none > plain.out 2>&1 || fail "LAMMPS failed untraced"
  mpirun -np 2 --oversubscribe "$hangtrace" run --dir "$work/traces" lmp -in in.lj -var steps 200 -log none \
    > traced.out 2>&1 || fail "LAMMPS failed traced"
  [ "$(thermo plain.out | wc -l)" -ge 5 ] || fail "no thermodynamic output"
  diff <(thermo plain.out) <(thermo traced.out) > /dev/null || fail "traced LAMMPS computed something else"
  analyze "$work"/traces/*/
  [ "$status" -eq 0 ] || fail "analyze exited $status on a healthy run, not 0"
  expect '^hangtrace: NO-HANG: every rank exited'
  expect '2 of 2 ranks traced'
  ;;
gromacs-stopped | gromacs-untraced)
  need gmx_mpi gromacs
  export GMX_MAXBACKUP=-1
  gmx solvate -cs spc216.gro -box 2.5 2.5 2.5 -o conf.gro > solvate.out 2>&1 || fail "gmx solvate failed"
  printf '#include "oplsaa.ff/forcefield.itp"\n#include "oplsaa.ff/spce.itp"\n[ system ]\nwater\n[ molecules ]\nSOL %d\n' \
    "$(grep -c OW conf.gro)" > topol.top
  printf '%s\n' "integrator = md" "dt = 0.002" "nsteps = 5000000" "cutoff-scheme = Verlet" "coulombtype = PME" \
    "rcoulomb = 1.0" "rvdw = 1.0" "tcoupl = v-rescale" "tc-grps = System" "tau-t = 0.1" "ref-t = 300" \
    "constraints = h-bonds" "nstenergy = 1000" "nstlog = 1000" > md.mdp
  gmx grompp -f md.mdp -c conf.gro -p topol.top -o md.tpr > grompp.out 2>&1 || fail "gmx grompp failed"
  tool=("$hangtrace" run --dir "$work/traces" --timeout 0)
  [ "$scenario" = gromacs-untraced ] && tool=()
  start mpirun -np 4 --oversubscribe "${tool[@]}" gmx_mpi mdrun -s md.tpr -ntomp 1 -deffnm md
  stepping() { [ -f md.log ] && grep -q '^ *Step *Time' md.log; }
  wait_for 600 stepping || fail "GROMACS did not start its run"
  stop_rank gmx_mpi 2
  sleep 2
  ;;&
gromacs-untraced)
  "$hangtrace" dump -p "$job_pid" -o "$work/dump" > dump.out 2>&1 || fail "dump failed"
  analyze "$work/dump"
  [ "$status" -eq 3 ] || fail "analyze exited $status, not 3 (a hang)"
  expect '^hangtrace: HANG: stacks only'
  expect "culprit rank 2 \(.*pid $victim\): stopped"
  expect 'gmx::LegacySimulator::do_md\(\)'
  # Where the others are depends on the moment; some frame under do_md is a
  # long C++ signature, shown shortened.
  expect '^[ |]*[A-Za-z_:]+\(\.\.\.\)  \['
  ;;
gromacs-stopped)
  expect_stopped_culprit 2 2
  # Where the others wait depends on the moment (a halo Sendrecv, PME's
  # Alltoall): never a cycle among them. The Sendrecv case itself is the
  # catalogue's sendrecv_shift.
  grep -q DEADLOCK report.txt && fail "$scenario: a deadlock where rank 2 is stopped"
  ;;
*) fail "unknown scenario $scenario" ;;
esac
echo "ok $scenario"
