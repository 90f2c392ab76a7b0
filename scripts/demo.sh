#!/usr/bin/env bash
# The demo: set up and build, then run a program under `hangtrace run` that
# hangs inside a traced call; the watchdog notices it and captures every
# thread's stack into the crash-durable trace file, which `hangtrace
# inspect` then reads.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh

dir=$(mktemp -d /tmp/hangtrace-demo-XXXXXX)
echo
echo "== demo: a program hangs inside a traced call (watchdog timeout 2 s)"
echo "   hangtrace run --dir $dir --timeout 2 -- build/tests/traced_prog hold"
build/bin/hangtrace run --dir "$dir" --job demo --timeout 2 -- build/tests/traced_prog hold \
  > "$dir/program.out" 2> "$dir/program.err" &
pid=$!
for _ in $(seq 100); do
  grep -q "watchdog" "$dir/program.err" 2>/dev/null && break
  sleep 0.1
done
echo "== the watchdog's line on the program's stderr:"
sed 's/^/   /' "$dir/program.err"
echo
echo "== hangtrace inspect $dir  (reads the file while the process is hung)"
build/bin/hangtrace inspect "$dir" --events 8
kill -KILL "$pid" 2>/dev/null || true
wait "$pid" 2>/dev/null || true
echo "== the process was killed; its trace file stays readable:"
build/bin/hangtrace inspect "$dir" --events 0 | grep -E "^(state|threads|  tid)"
echo
echo "Trace files kept in $dir"
