#!/usr/bin/env bash
# How soon the automatic report reaches the job's log after the hang, for
# every scenario of tests/jobs/test_hung_jobs.sh that waits for one (the
# goal, issue "a report whenever the job hangs": the timeout + 10 s). The
# tests print the figure and never assert it; this runs them one at a time
# on an otherwise idle machine and lists the figures against the goal.
#   bench/bench_auto_report.sh [BUILD_DIR] [SCENARIO ...]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
shift || true
scenarios=("$@")
if [ ${#scenarios[@]} = 0 ]; then
  # Each scenario that calls auto_report, in the order the script has them.
  mapfile -t scenarios < <(awk '/^  [a-z0-9-]+\)/ {s = substr($1, 1, length($1) - 1)} /^ *auto_report [0-9]/ {print s}' \
    tests/jobs/test_hung_jobs.sh | uniq)
fi
over=0
for s in "${scenarios[@]}"; do
  out=$(tests/jobs/test_hung_jobs.sh "$build" "$s" 2>&1) || { echo "$s: FAILED"; echo "$out" | tail -5; over=1; continue; }
  echo "$out" | grep -o 'automatic report .* after the hang (goal [0-9]* s)' | while read -r line; do
    awk -v s="$s" -v l="$line" 'BEGIN { split(l, w, " "); goal = w[9]; printf "%-24s %5.1f s  (goal %s s)%s\n", s, w[3], goal, (w[3] + 0 > goal + 0) ? "  LATE" : "" }'
  done
done
exit $over
