#!/usr/bin/env bash
# The demo (the README's first command): set up and build, then run the
# bundled trainer on 8 ranks (TP=2, PP=2, DP=2) under `hangtrace run` with
# the seed's hang injected: at step 3, rank 3, the last pipeline stage and so
# the root of its group's loss broadcast, never broadcasts and goes on to the
# end-of-step all-reduce. Its pipeline group waits in the broadcast, every
# other rank in the all-reduce. The watchdog notices, and within seconds the
# job's own log holds the automatic report (no command typed); `hangtrace dump` takes
# a live dump (trace snapshots and every thread's native stack, read from
# outside); `hangtrace analyze` reads it and names the culprit, with merged
# stacks; the job is torn down. Then the same hang in a Python job (mpi4py,
# its libmpi loaded by dlopen), diagnosed from a live dump with every rank's
# Python function and line.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export PATH=/usr/bin:$PATH  # Debian's python3, which has mpi4py

dir=$(mktemp -d /tmp/hangtrace-demo-XXXXXX)
step() { printf '\n== %s\n' "$*"; }

step "1. start the trainer on 8 ranks under hangtrace (watchdog after 3 s), with the seed's hang at step 3"
export HANGTRACE_REPORT_DIR=$dir/report  # where the automatic report gathers (a folder every node sees)
cmd=(mpirun -np 8 --oversubscribe build/bin/hangtrace run --dir "$dir" --job demo --timeout 3 --
     build/bin/hangtrace-trainer --tp 2 --pp 2 --dp 2 --steps 20 --fault seed-hang@rank=3,step=3
     --truth "$dir/truth.json")
echo "   ${cmd[*]}"
setsid "${cmd[@]}" > "$dir/job.log" 2>&1 &
job=$!
teardown() { kill -TERM -- "-$job" 2>/dev/null || true; sleep 1; kill -KILL -- "-$job" 2>/dev/null || true; wait "$job" 2>/dev/null || true; }
trap teardown EXIT

step "2. the job trains, then stops making progress; the watchdog fires after 3 s and, seconds later, the job's log says:"
for _ in $(seq 300); do
  grep -q 'hangtrace: the report: ' "$dir/job.log" && break
  sleep 0.1
done
grep ' iteration' "$dir/job.log" | sed 's/^/   /'
sed -n '/hangtrace: automatic report/,/hangtrace: the report: /p' "$dir/job.log" | sed 's/^/   /'

step "3. a live dump of the node: hangtrace dump --dir $dir --job demo --out $dir/dump"
build/bin/hangtrace dump --dir "$dir" --job demo --out "$dir/dump" 2>&1 | sed 's/^/   /'

# analyze exits 3 when it finds a hang: here, the expected outcome.
analyze() { build/bin/hangtrace analyze "$@" || [ $? = 3 ]; }

step "4. the diagnosis, from the dump: hangtrace analyze $dir/dump"
analyze "$dir/dump" --html "$dir/report.html" --perfetto "$dir/trace.json" --graph "$dir/waits.svg" --dot "$dir/stacks.svg" | sed 's/^/   /'
analyze "$dir/dump" --format json > "$dir/report.json"

step "5. tear the job down"
teardown
trap - EXIT
echo "   done; the trace files stay readable after the job"

step "6. what the trainer says really happened ($dir/truth.json)"
sed 's/^/   /' "$dir/truth.json"

step "7. the same hang in Python: tests/python/seed_hang.py (mpi4py) on 4 ranks; rank 3 skips its broadcast"
pycmd=(mpirun -np 4 --oversubscribe build/bin/hangtrace run --dir "$dir" --job pydemo --timeout 0 --
       python3 -u tests/python/seed_hang.py --hang-rank 3 --hang-step 4 --steps 50)
echo "   ${pycmd[*]}"
setsid "${pycmd[@]}" > "$dir/py.log" 2>&1 &
job=$!
trap teardown EXIT
for _ in $(seq 300); do grep -q 'step 1 loss' "$dir/py.log" && break; sleep 0.1; done
# Hung at step 4. No watchdog here: the dump's two looks, 2 s apart, show
# that nobody moved (one look could not tell a wait from a hang until the
# ranks had waited 10x the longest of their earlier all-reduces and 2 s:
# docs/ANALYSIS.md, "One look").
sleep 1
build/bin/hangtrace dump --dir "$dir" --job pydemo --out "$dir/pydump" 2>&1 | sed 's/^/   /'
analyze "$dir/pydump" | sed -n '1,/^stacks, merged/p' | sed 's/^/   /'
analyze "$dir/pydump" | awk '/^stacks, merged/ {on = 1} on && /\.py:/' | sed 's/^/   /'
teardown
trap - EXIT

step "8. the seed's case as it was: the same job started under no tool, dumped by its launcher's pid"
pycmd=(mpirun -np 4 --oversubscribe python3 -u tests/python/seed_hang.py --hang-rank 3 --hang-step 2 --steps 50)
echo "   ${pycmd[*]}"
setsid "${pycmd[@]}" > "$dir/untraced.log" 2>&1 &
job=$!
trap teardown EXIT
for _ in $(seq 300); do grep -q 'step 1 loss' "$dir/untraced.log" && break; sleep 0.1; done
sleep 1
echo "   hangtrace dump -p $job -o $dir/udump"
build/bin/hangtrace dump -p "$job" -o "$dir/udump" 2>&1 | sed 's/^/   /'
analyze "$dir/udump" | awk '/^classes/ { table = 1 } table && /^$/ { done = 1 } !done' | sed 's/^/   /'
teardown
trap - EXIT

echo
echo "the report as a page: $dir/report.html   (one file; opens offline in any browser)"
echo "JSON report:     $dir/report.json"
echo "Perfetto trace:  $dir/trace.json   (open in https://ui.perfetto.dev)"
echo "wait-for graph:   $dir/waits.svg   (who waits for whom; the culprit in red)"
echo "stack tree:      $dir/stacks.svg"
