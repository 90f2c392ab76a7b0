#!/usr/bin/env bash
# Memory and time of `hangtrace analyze` against how long the job ran: the
# same simulated job (1024 ranks, 2000 records each, the seed's hang) whose
# communicators had already done SEQ_BASE collectives before what its rings
# hold. Memory must follow the records, not the sequence numbers.
#   bench/bench_analyze_seq.sh [OTHER_HANGTRACE]   (e.g. a build of an older commit, to compare)
set -euo pipefail
cd "$(dirname "$0")/.."
other=${1:-}
work=$(mktemp -d /tmp/hangtrace-bench-seq-XXXXXX)
trap 'rm -rf "$work"' EXIT
printf "%-14s %-22s %s\n" seq_base "analyze (s, MiB)" "${other:+$other (s, MiB)}"
for base in 0 10000 1000000 100000000 10000000000; do
  rm -rf "$work/sim"
  build/bin/hangtrace simulate --tp 8 --pp 16 --dp 8 --records 2000 --seq-base "$base" \
    --fault seed-hang@rank=127 --out "$work/sim" 2> /dev/null
  run() {
    # Exit status 3 is the hang found (older builds said 0); time's last
    # line is the figures.
    /usr/bin/time -f "%e %M" -o "$work/t" timeout 120 "$1" analyze "$work/sim/sim" > "$work/r" 2>&1 || true
    if grep -q "culprit rank 127 " "$work/r"; then
      tail -1 "$work/t" | awk '{printf "%s s, %d MiB", $1, $2 / 1024}'
    else
      echo "failed ($(head -c 60 "$work/r" | tr '\n' ' '))"
    fi
  }
  printf "%-14s %-22s %s\n" "$base" "$(run build/bin/hangtrace)" "$( [ -n "$other" ] && run "$other")"
done
