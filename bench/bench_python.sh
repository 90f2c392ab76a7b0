#!/usr/bin/env bash
# The cost of capturing Python frames in the process: per capture round and
# per thread, with HANGTRACE_PYTHON=1 (native stacks + CPython's dumper, the
# other threads held meanwhile) against HANGTRACE_PYTHON=0 (native only),
# for several thread counts. Interleaved runs; medians.
#   bench/bench_python.sh [PYTHON] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
py=${1:-/usr/bin/python3}
rounds=${2:-50}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
printf "%-8s %-14s %-14s %-16s\n" threads "native (us)" "+python (us)" "python/thread (us)"
for n in 1 8 32 63; do
  off=() on=()
  for rep in 1 2 3; do
    off+=("$(HANGTRACE_PYTHON=0 build/bin/hangtrace run --dir "$dir" --timeout 0 -- "$py" bench/python_capture.py $((n - 1)) "$rounds" | awk '{print $6}')")
    on+=("$(HANGTRACE_PYTHON=1 build/bin/hangtrace run --dir "$dir" --timeout 0 -- "$py" bench/python_capture.py $((n - 1)) "$rounds" | awk '{print $6}')")
  done
  a=$(printf "%s\n" "${off[@]}" | sort -n | sed -n 2p)
  b=$(printf "%s\n" "${on[@]}" | sort -n | sed -n 2p)
  printf "%-8s %-14s %-14s %-16s\n" "$n" "$a" "$b" "$(awk -v a="$a" -v b="$b" -v n="$n" 'BEGIN {printf "%.1f", (b - a) / n}')"
done
