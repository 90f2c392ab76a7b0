#!/usr/bin/env bash
# The srun-driven live dump on a real SLURM cluster of 4 emulated nodes
# (tests/slurm/cluster.sh): a traced 8-rank trainer (TP=2, PP=2, DP=2, two
# ranks per node) hangs with the seed's fault; `hangtrace srun-dump JOBID`
# must name rank 3 as the culprit, rank 1 in the pipeline broadcast, the
# others in the world all-reduce, with merged stacks from every node. Then
# one node's slurmd is frozen: the dump must name that node as silent and
# still analyze the others, with the same culprit (its ranks are not seen,
# not blamed).
# Before that, the automatic report (HANGTRACE_REPORT, on by default): node4's
# two ranks are stopped once the job hangs, so that node never answers;
# within the watchdog's timeout + 10 s the job's log must hold one report
# for the whole job, gathered by the other nodes, rank 3 the culprit and
# ranks 6-7 named as missing, not blamed. At the end, two steps of one
# allocation hang at once: each gets its own report.
#   tests/slurm/test_srun_dump.sh BUILD_DIR
set -euo pipefail
build=$(cd "${1:?usage: $0 BUILD_DIR}" && pwd)
src=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d /tmp/hangtrace-slurm-test-XXXXXX)
cleanup() {
  [ -n "${SLURM_CONF:-}" ] && scancel --quiet "${job:-0}" 2>/dev/null || true
  if [ -n "${srun_pid:-}" ]; then pkill -9 -P "$srun_pid" 2>/dev/null || true; kill -9 "$srun_pid" 2>/dev/null || true; fi
  "$src/tests/slurm/cluster.sh" stop "$work/cluster" || true
  pkill -9 -f -- "--job-name=seedhang" 2>/dev/null || true  # srun clients of every attempt
  rm -rf "$work"
}
trap cleanup EXIT
[ -n "${KEEP:-}" ] && trap - EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

eval "$("$src/tests/slurm/cluster.sh" start "$work/cluster" 4)"
export SLURM_CONF
echo "cluster up: $(sinfo -h -o '%D nodes %T')"

# The job, traced, through Open MPI's PMIx under srun, its trace files in
# the default folder of each node's own /dev/shm: only a dump on the node
# reads them. Eight spinning ranks share 2 cores here: MPI yields when
# idle, or a step takes seconds.
# Its own TMPDIR: Open MPI's session folders of earlier runs never collide.
export OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_btl_tcp_if_include=lo TMPDIR="$work/tmp"
# Shared memory in each node's own /dev/shm, gone with the cluster (a
# folder scripts/test.sh made in this machine's /dev/shm is not there).
unset OMPI_MCA_btl_vader_backing_directory
mkdir -p "$work/tmp"
# The automatic report gathers in a folder every node sees.
export HANGTRACE_REPORT_DIR="$work/report"
# The ranks of job $job on node $1 (the trainer's processes there).
node_ranks() {
  local p
  for p in $(pgrep -x hangtrace-train); do
    tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "SLURMD_NODENAME=$1" &&
      tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "SLURM_JOB_ID=$job" && echo "$p"
  done
}
start_job() {  # $1: attempt
  srun -N 4 --ntasks-per-node=2 --mpi=pmix --job-name="seedhang$1" \
    "$build/bin/hangtrace" run --timeout 5 -- \
    "$build/bin/hangtrace-trainer" --tp 2 --pp 2 --dp 2 --steps 50 --fault seed-hang@rank=3,step=3 \
    > "$work/job$1.out" 2>&1 &
  srun_pid=$!
  disown "$srun_pid"  # killed at the end: no job-control message
  job=""
  for i in $(seq 100); do
    job=$(squeue -h -n "seedhang$1" -o %i | head -1)
    [ -n "$job" ] && break
    sleep 0.2
  done
  [ -n "$job" ] || fail "the job did not start"
  echo "job $job running"
  # Until the hang has happened (step 3, after step 2's line), node4's
  # ranks stopped a second later, before their watchdog (5 s) fires; then
  # the automatic report from the other three nodes. Or until the job ends
  # without hanging.
  for i in $(seq 300); do
    if grep -q "iteration *2/" "$work/job$1.out"; then
      hung_at=$(date +%s.%N)
      sleep 1
      stopped=$(node_ranks node4)
      [ "$(echo $stopped | wc -w)" = 2 ] || fail "node4 does not hold two ranks of the job: $stopped"
      kill -STOP $stopped
      for i in $(seq 200); do
        grep -q "hangtrace: the report: " "$work/job$1.out" && break
        kill -0 "$srun_pid" 2>/dev/null || break
        sleep 0.1
      done
      reported_at=$(date +%s.%N)
      kill -CONT $stopped
      grep -q "hangtrace: the report: " "$work/job$1.out" && return 0
      break
    fi
    kill -0 "$srun_pid" 2>/dev/null || break
    sleep 0.1
  done
  # It did not hang: say why (its trace files are on the nodes, gone with
  # the job's end; the watchdog and MPI said what they saw).
  cat "$work/job$1.out"
  return 1
}
# Open MPI's TCP wire-up between emulated nodes has failed once in many runs
# on this 2-core VM (a rank died at start-up); the diagnosis above says what
# happened, and one more attempt is made. Twice is a failure.
attempt=1
if ! start_job 1; then
  echo "the job ended before hanging; trying once more"
  kill -9 "$srun_pid" 2>/dev/null || true
  scancel --quiet "$job" 2>/dev/null || true
  attempt=2
  start_job 2 || fail "the job did not hang, twice"
fi

# The automatic report, in the job's log.
sed -n '/hangtrace: automatic report/,/hangtrace: the report: /p' "$work/job$attempt.out" | head -20
awk -v a="$hung_at" -v b="$reported_at" 'BEGIN { printf "automatic report %.1f s after the hang\n", b - a; exit !(b - a <= 15) }' ||
  fail "the automatic report came later than the timeout (5 s) + 10 s"
[ "$(grep -c 'hangtrace: automatic report of job' "$work/job$attempt.out")" = 1 ] || fail "not exactly one automatic report"
grep -q 'hangtrace: watchdog:' "$work/job$attempt.out" && fail "watchdog lines per rank beside the report"
grep -q '^hangtrace: HANG: rank 3 never entered' "$work/job$attempt.out" || fail "the automatic report does not blame rank 3"
grep -q 'culprit rank [67]' "$work/job$attempt.out" && fail "the automatic report blames a rank of the silent node"
grep -q 'ranks 6-7 .*missing' "$work/job$attempt.out" || fail "the automatic report does not name node4's ranks as missing"

start=$(date +%s.%N)
status=0
"$build/bin/hangtrace" srun-dump "$job" --out "$work/dump" > "$work/report.txt" 2> "$work/report.err" || status=$?
end=$(date +%s.%N)
[ "$status" = 3 ] || fail "srun-dump of a hung job exited $status, not 3 (a hang found): $(head -c 3000 "$work/report.err"; head -c 2000 "$work/report.txt")"
cat "$work/report.err" "$work/report.txt" | head -30
echo "srun-dump took $(awk -v a="$start" -v b="$end" 'BEGIN {printf "%.2f", b - a}') s"
grep -q 'culprit rank 3 ' "$work/report.txt" || fail "rank 3 is not named the culprit"
grep -q 'rank 1 .*in MPI_Bcast #[0-9]* on pp1' "$work/report.txt" || fail "rank 1 is not shown in the pp1 broadcast"
grep -q 'ranks 0,2-7 .*in MPI_Allreduce #[0-9]* on world' "$work/report.txt" || fail "ranks 0,2-7 are not shown in the world all-reduce"
grep -q 'stacks, merged' "$work/report.txt" || fail "no merged stacks"
grep -q 'PMPI_Bcast' "$work/report.txt" || fail "the merged stacks lack the broadcast"
grep -q '4 of 4 node(s) answered' "$work/report.err" || fail "not every node answered"
for n in 1 2 3 4; do
  for look in first second; do [ -f "$work/dump/$look/node$n/node.json" ] || fail "no $look dump from node$n"; done
done
grep -q 'progress since the earlier snapshot: no rank moved' "$work/report.txt" || fail "srun-dump did not look twice"

# A node that does not answer: freeze node4's slurmd.
slurmd4=$(pgrep -f '^slurmd -D -N node4$' | head -1)
[ -n "$slurmd4" ] || fail "cannot find node4's slurmd"
kill -STOP "$slurmd4"
"$build/bin/hangtrace" srun-dump "$job" --out "$work/dump2" --node-timeout 5 \
  > "$work/report2.txt" 2> "$work/report2.err" || true
kill -CONT "$slurmd4"
cat "$work/report2.err" | head -5
grep -q 'node4' "$work/report2.txt" "$work/report2.err" || fail "the silent node is not named"
grep -q '3 of 4 node(s) answered' "$work/report2.err" || fail "the partial result was not analyzed"
# Silent at the first look, it is not asked for the second (which it would
# hold for the whole --node-timeout).
grep -q 'the second look skips node(s) node4, silent at the first' "$work/report2.err" ||
  fail "the second look waited for the silent node again"
grep -q '^hangtrace: HANG: rank 3 never entered' "$work/report2.txt" || fail "rank 3 is not the verdict without node4"
# Node4's ranks (6, 7) are not seen: the culprit stays rank 3, they are named
# apart, not blamed (as when a node is lost after the hang).
grep -q 'culprit rank [67]' "$work/report2.txt" && fail "a rank of the silent node is blamed"
grep -q 'ranks 6-7 are missing from the dump (its node sent none' "$work/report2.txt" ||
  fail "node4's ranks are not named as missing from the dump"

# The seed's own case, in Python: an 8-rank mpi4py job under srun (its
# libmpi comes by dlopen), hung at step 2 by rank 3. No stacks are captured
# in the processes (--no-stacks): srun-dump reads every rank's Python
# frames from outside, on every node, and names the Python line each rank
# waits at.
scancel --quiet "$job" 2>/dev/null || true
kill -9 "$srun_pid" 2>/dev/null || true
# Starts an 8-rank job on the 4 nodes: true once its first step ran; else
# says why (its output) and ends it.
start_job() {  # NAME OUTPUT COMMAND...
  local name=$1 out=$2 i
  shift 2
  srun -N 4 --ntasks-per-node=2 --mpi=pmix --job-name="$name" "$@" > "$out" 2>&1 &
  srun_pid=$!
  disown "$srun_pid"
  for i in $(seq 120); do grep -q 'step 1 loss' "$out" && return 0; sleep 0.5; done
  cat "$out"
  scancel --quiet --name="$name" 2>/dev/null || true
  kill -9 "$srun_pid" 2>/dev/null || true
  return 1
}
start_py() {  # $1: attempt
  start_job pyhang "$work/py.out" "$build/bin/hangtrace" run --dir "$work/pytraces$1" --timeout 0 --no-stacks -- \
    /usr/bin/python3 -u "$src/tests/python/seed_hang.py" --hang-rank 3 --hang-step 4 --steps 50 && return 0
  # It did not run: say why from its own trace files too.
  "$build/bin/hangtrace" analyze "$work/pytraces$1" 2>&1 | head -20 || true
  return 1
}
# The same Open MPI wire-up failure as above may end it at start: once more.
if ! start_py 1; then
  echo "the Python job ended before running; trying once more"
  start_py 2 || fail "the Python job did not run, twice"
fi
# Hung a few seconds, at step 4: with no watchdog, one look calls it a hang
# once the ranks have waited 10x the longest of their earlier all-reduces
# (at least 3 of them), and at least 2 s (docs/ANALYSIS.md, "One look").
sleep 3
job=$(squeue -h -n pyhang -o %i | head -1)
start=$(date +%s.%N)
# No --dir: each node's dump finds the traced files from the ranks' own maps.
"$build/bin/hangtrace" srun-dump "$job" --out "$work/pydump" > "$work/py.txt" 2> "$work/py.err" || [ $? = 3 ] ||
  fail "srun-dump of the hung Python job found no hang: $(head -2 "$work/py.txt")"
end=$(date +%s.%N)
head -12 "$work/py.txt"
echo "srun-dump of the 8-rank Python job took $(awk -v a="$start" -v b="$end" 'BEGIN {printf "%.2f", b - a}') s"
grep -q 'culprit rank 3 .*at train_step (seed_hang.py:' "$work/py.txt" || fail "the Python culprit's line is not named"
grep -q 'rank 2 .*in MPI_Bcast .*at _aggregate_total_loss (seed_hang.py:' "$work/py.txt" || fail "rank 2's Python line is not named"
grep -q '4 of 4 node(s) answered' "$work/py.err" || fail "not every node answered (Python job)"
scancel --quiet "$job" 2>/dev/null || true
kill -9 "$srun_pid" 2>/dev/null || true

# The seed's case as it really was: the same job started under no tool.
# srun-dump finds its ranks by SLURM_JOB_ID on each node, their ranks from
# their environment, their stacks from outside; the report says it stands
# on stacks alone.
# The Python job's ranks gone first (their ports and shared memory freed):
# under load, a job started beside a dying one failed its wire-up (a rank
# crashed in Open MPI's shared-memory setup), as the retries above allow for.
for i in $(seq 40); do [ -z "$(squeue -h -n pyhang -o %i)" ] && break; sleep 0.25; done
start_untraced() {
  start_job untraced "$work/untraced.out" \
    /usr/bin/python3 -u "$src/tests/python/seed_hang.py" --hang-rank 3 --hang-step 2 --steps 50
}
if ! start_untraced; then
  echo "the untraced job ended before running; trying once more"
  start_untraced || fail "the untraced job did not run, twice"
fi
sleep 1
job=$(squeue -h -n untraced -o %i | head -1)
status=0
"$build/bin/hangtrace" srun-dump "$job" --out "$work/udump" > "$work/untraced.txt" 2> "$work/untraced.err" || status=$?
head -8 "$work/untraced.txt"
[ "$status" = 3 ] || { cat "$work/untraced.err"; fail "srun-dump of the untraced hung job exited $status, not 3"; }
grep -q '^hangtrace: HANG: stacks only: ' "$work/untraced.txt" || fail "the untraced job's report does not say it is from stacks"
grep -q 'ranks 0-7 from their stacks only' "$work/untraced.txt" || fail "not every untraced rank was found once"
grep -q 'in MPI_Bcast at _aggregate_total_loss (seed_hang.py:' "$work/untraced.txt" || fail "the untraced ranks' Python line is not named"
grep -q '4 of 4 node(s) answered' "$work/untraced.err" || fail "not every node answered (untraced job)"
scancel --quiet "$job" 2>/dev/null || true

# Two steps of one allocation hang at once: they share SLURM_JOB_ID, and so
# each node's trace folder and the report folder. Each step is a run of its
# own (job, step, restart count): each gets one automatic report, in its own
# log, about its own ranks.
alloc=$(salloc -N 2 --no-shell --job-name=twosteps 2>&1 | grep -o 'allocation [0-9]*' | grep -o '[0-9]*$' | head -1 || true)
[ -n "$alloc" ] || fail "no allocation for the two steps"
step_pids=()
for s in a b; do
  srun --jobid="$alloc" --overlap -N 2 --ntasks-per-node=1 --mpi=pmix \
    "$build/bin/hangtrace" run --timeout 2 -- "$build/tests/mpi_prog" stuck > "$work/step-$s.out" 2>&1 &
  step_pids+=($!)
done
for i in $(seq 300); do
  grep -q "hangtrace: the report: " "$work/step-a.out" && grep -q "hangtrace: the report: " "$work/step-b.out" && break
  sleep 0.2
done
kill -9 "${step_pids[@]}" 2>/dev/null || true
scancel --quiet "$alloc" 2>/dev/null || true
for s in a b; do
  [ "$(grep -c 'hangtrace: automatic report of job' "$work/step-$s.out")" = 1 ] ||
    { cat "$work/step-$s.out"; fail "step $s did not get exactly one automatic report"; }
  grep -q '^hangtrace: HANG: rank 1 never entered MPI_Allreduce' "$work/step-$s.out" ||
    { cat "$work/step-$s.out"; fail "step $s's report does not blame its rank 1"; }
done
report_a=$(grep -o 'the report: [^ ]*' "$work/step-a.out") report_b=$(grep -o 'the report: [^ ]*' "$work/step-b.out")
[ "$report_a" != "$report_b" ] || fail "the two steps share one report: $report_a"
echo "two steps of allocation $alloc: ${report_a#the report: } and ${report_b#the report: }"

# A job that is not running.
if "$build/bin/hangtrace" srun-dump 999999 --out "$work/dump3" 2> "$work/report3.err"; then
  fail "srun-dump of an unknown job succeeded"
fi
grep -q 'not known to SLURM' "$work/report3.err" || fail "unclear error for an unknown job"
echo "PASS"
