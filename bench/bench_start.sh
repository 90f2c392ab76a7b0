#!/usr/bin/env bash
# Process start cost, rounds interleaved so drift hits all alike:
#  - processes that make no traced call (/bin/true; a shell running one
#    command; a fork child), untraced, with LD_PRELOAD (what a rank's
#    children, data loaders and scripts inherit) and under `hangtrace run`;
#  - a rank (its launcher's variables set), which makes its file and starts
#    its thread at once.
# Prints medians and ratios, and how many trace files were left behind.
#   bench/bench_start.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-200}
dir=$(mktemp -d /dev/shm/hangtrace-bench-start-XXXXXX)
trap 'rm -rf "$dir"' EXIT
lib=$PWD/build/lib/libhangtrace.so
cli=$PWD/build/bin/hangtrace
tool=build/bench/process_start
summary() {  # file, column, label
  awk -v c="$2" -v what="$3" 'NR > 1 { b[NR-1] = $2; t[NR-1] = $c; n = NR-1 }
    function median(a, n,   i, j, x) {
      for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { x = a[i]; a[i] = a[j]; a[j] = x }
      return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
    END { mb = median(b, n); mt = median(t, n)
      printf "%-40s untraced %.3f ms, traced %.3f ms, ratio %.2f\n", what, mb, mt, mt / mb }' "$1"
}
for prog in "/bin/true" "sh -c /bin/true"; do
  # shellcheck disable=SC2086
  "$tool" spawn "$rounds" "$lib" "$cli" HANGTRACE_DIR="$dir/traces" -- $prog > "$dir/rounds"
  summary "$dir/rounds" 3 "$prog, LD_PRELOAD:"
  summary "$dir/rounds" 4 "$prog, hangtrace run:"
done
left=$(find "$dir/traces" -type f 2>/dev/null | wc -l || true)
for i in $(seq 9); do
  a=$("$tool" fork "$rounds" | awk '{print $2}')
  b=$(HANGTRACE_DIR="$dir/traces" LD_PRELOAD=$lib "$tool" fork "$rounds" | awk '{print $2}')
  echo "$i $a $b"
done > "$dir/forks"
awk -v unit=us -v what="fork child (fork to wait)" -f bench/interleaved.awk "$dir/forks"
left=$((left + $(find "$dir/traces" -type f 2>/dev/null | wc -l || true)))
echo "trace files left by $((rounds * 4 + 9 * rounds)) processes that made no traced call: $left"
# A rank: the file (tables allocated on /dev/shm), the signal handlers and
# the background thread at start; removed at its clean exit.
"$tool" spawn "$rounds" "$lib" "$cli" HANGTRACE_DIR="$dir/traces" OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=1 \
  -- /bin/true > "$dir/rounds"
summary "$dir/rounds" 3 "a rank running /bin/true, LD_PRELOAD:"
summary "$dir/rounds" 4 "a rank running /bin/true, hangtrace run:"
