#!/usr/bin/env bash
# The tracer's overhead on a real job: the trainer, untraced and traced
# (record-only, and with the watchdog's default timeout) runs interleaved;
# the mean step time of steps 3..N of each run, then the medians and their
# ratio. Also the peak RSS added per process.
#   bench/bench_trainer.sh [STEPS] [ROUNDS] [TOPOLOGY]
# TOPOLOGY defaults to "2 2 2" (TP PP DP: 8 ranks, 4 per core here, so the
# figure is noise-bound); "2 1 1" keeps one rank per core: the quiet run.
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-40}
rounds=${2:-5}
read -r tp pp dp <<< "${3:-2 2 2}"
np=$((tp * pp * dp))
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
dir=$(mktemp -d /tmp/hangtrace-bench-trainer-XXXXXX)
trap 'rm -rf "$dir"' EXIT
trainer=(build/bin/hangtrace-trainer --tp "$tp" --pp "$pp" --dp "$dp" --layers "$((2 * pp))" --steps "$steps" --hidden 128)
mean_step() { awk -F'elapsed time per iteration \\(ms\\): *' 'NF > 1 {split($2, a, " "); n++; if (n > 2) {s += a[1]; c++}} END {printf "%.3f", s / c}'; }
echo "round  untraced_ms  traced_ms"
for i in $(seq "$rounds"); do
  base=$(mpirun -np "$np" --oversubscribe "${trainer[@]}" | mean_step)
  traced=$(mpirun -np "$np" --oversubscribe build/bin/hangtrace run --dir "$dir" -- "${trainer[@]}" | mean_step)
  echo "$i  $base  $traced"
done | tee "$dir/rounds"
awk -v unit=ms -v what="step time" -f bench/interleaved.awk "$dir/rounds"
# Memory: the peak RSS of one rank, untraced vs traced (1-rank run).
rss() { /usr/bin/time -f "%M" "$@" 2>&1 >/dev/null | tail -1; }
u=$(rss mpirun -np 1 build/bin/hangtrace-trainer --steps 5 --hidden 128)
t=$(rss mpirun -np 1 build/bin/hangtrace run --dir "$dir" -- build/bin/hangtrace-trainer --steps 5 --hidden 128)
echo "peak RSS of mpirun + 1 rank: untraced $u KB, traced $t KB (+$((t - u)) KB)"
