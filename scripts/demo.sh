#!/usr/bin/env bash
# The demo: set up and build, then run an unmodified 4-rank MPI program under
# `hangtrace run` that hangs the way large jobs do: rank 1, the root of a
# broadcast on communicator "split", never calls it and goes on to an
# allreduce on world, so ranks 0, 2 and 3 wait in the broadcast and rank 1
# waits in the allreduce. The watchdog flags the calls and saves every
# thread's stack into each rank's crash-durable trace file; `hangtrace
# analyze` reads the files and names the culprit.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

dir=$(mktemp -d /tmp/hangtrace-demo-XXXXXX)
echo
echo "== 1. run 4 ranks traced; rank 1 skips the broadcast it is the root of (watchdog: 1 s)"
echo "   mpirun -np 4 hangtrace run --dir $dir --timeout 1 -- build/tests/mpi_prog hang"
# The program kills itself with SIGALRM after 3 s, so the job ends by itself.
mpirun -np 4 --oversubscribe build/bin/hangtrace run --dir "$dir" --job demo --timeout 1 \
  -- build/tests/mpi_prog hang > "$dir/job.log" 2>&1 || true
echo
echo "== 2. the watchdog's lines, one per rank, from the job's stderr:"
grep "hangtrace: watchdog" "$dir/job.log" | sed 's/^/   /' | sort
echo
echo "== 3. the diagnosis: hangtrace analyze $dir"
build/bin/hangtrace analyze "$dir" --perfetto "$dir/trace.json" --dot "$dir/stacks.dot" \
  | sed -e 's/^/   /'
build/bin/hangtrace analyze "$dir" --format json > "$dir/report.json"
echo
echo "== 4. one rank's own file: rank 1, the root that never broadcast (hangtrace inspect)"
f=$(build/bin/hangtrace inspect "$dir" --events 0 | awk '/^== / {path = $2} /^process/ && $7 == "1" {print path}')
build/bin/hangtrace inspect "$f" --events 6 | sed -n '1,12p;/^events/,$p' | sed -e 's/^/   /'
echo
echo "JSON report:     $dir/report.json"
echo "Perfetto trace:  $dir/trace.json   (open in https://ui.perfetto.dev)"
echo "stack tree:      $dir/stacks.dot   (dot -Tsvg $dir/stacks.dot > stacks.svg)"
