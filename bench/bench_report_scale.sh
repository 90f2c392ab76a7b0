#!/usr/bin/env bash
# The automatic report at scale (issue "Fast where users feel it", item 3).
#
# 1. The reporter: a simulated job of NODES nodes of 8 ranks (2,048: 16,384
#    ranks) with the seed's hang, its round laid out in a report folder as
#    every node's two dumps leave it (bench/report_folder_at_scale.cc:
#    compact copies and node.json), then `hangtrace auto-report` as the
#    node that reports, its own dump empty: the time and peak memory from
#    the last node's dump to the printed report (the wait for the nodes, the
#    analysis of the two looks, report.txt, .json and .html).
# 2. The metadata operations one node makes on the shared report folder
#    (creates, opens, renames, stats, listings: on Lustre or GPFS each costs
#    a server round trip, and every node makes them at once): a real traced
#    job of 2 stuck ranks, whose node's helper is run under strace twice,
#    into an empty report folder and into the one of step 1 (the other
#    nodes' round already there, reported by another), counted by kind.
#    A constant number per node is the goal: the two counts must be equal.
#
#   bench/bench_report_scale.sh [BUILD_DIR] [NODES] [WORK_FOLDER]
# Figures: bench/README.md. Needs strace (apt-get install strace) for part 2.
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(realpath "${1:-build}")
nodes=${2:-2048}
work=${3:-$(mktemp -d /tmp/hangtrace-report-scale-XXXXXX)}
ht=$build/bin/hangtrace
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ranks=$((nodes * 8))
dp=$((ranks / 128))
[ "$dp" -ge 1 ] && [ $((dp * 128)) = "$ranks" ] || { echo "NODES must be a multiple of 16" >&2; exit 2; }
rm -rf "$work/sim" "$work/shared" "$work/empty" "$work/node"
mkdir -p "$work/empty"

echo "== 1. the reporter, $nodes nodes of 8 ranks ($ranks ranks)"
"$ht" simulate --tp 8 --pp 16 --dp "$dp" --records 200 --fault seed-hang@rank=127 --out "$work/sim" > /dev/null
run=$("$build/bench/report_folder_at_scale" "$work/sim/sim" "$work/shared" 8)  # the files' run ("" none)
run_dir=$work/shared/${run:-run}
du -sh "$work/shared" | awk '{print "report folder: " $1}'
sync
# The page cache as a node that just wrote its dump finds it: warm.
cat "$run_dir"/round-*/second/*/node.json > /dev/null
/usr/bin/time -f '%e s, %M KB peak' -o "$work/time.txt" \
  "$ht" auto-report --dir "$work/empty" --job sim --run "$run" --out "$work/shared" --settle 0 --wait 5 \
  --timeout 120 --log "$work/report.log" || true
echo "reporter: $(cat "$work/time.txt")"
head -n 3 "$work/report.log"
calls=openat,open,close,dup,dup2,dup3,clone,clone3,fork,vfork,mkdirat,mkdir,unlinkat,unlink,newfstatat,statx
calls=$calls,readlinkat,renameat,renameat2,rename,linkat,symlinkat,getdents64,fstat,fstatfs,fsync,fdatasync
if command -v strace > /dev/null; then
  # Again, counted: its metadata operations on the report folder.
  rm -f "$run_dir"/round-*/reporter "$work/report.log" "$run_dir"/round-*/report.*
  strace -f -qq -o "$work/reporter.strace" -e trace=$calls \
    "$ht" auto-report --dir "$work/empty" --job sim --run "$run" --out "$work/shared" --settle 0 --wait 5 \
    --timeout 120 --log "$work/report.log" > /dev/null 2>&1 || true
  echo "the reporter's operations on the report folder ($((nodes * 2)) node dumps of $nodes nodes):"
  python3 bench/count_folder_ops.py "$work/shared" "$work/reporter.strace"
fi

echo
echo "== 2. metadata operations of one node on the shared folder"
command -v strace > /dev/null || { echo "strace is not installed: part 2 skipped"; exit 0; }
mkdir -p "$work/node/traces"
setsid mpirun -np 2 --oversubscribe "$ht" run --dir "$work/node/traces" --job job --timeout 120 -- \
  "$build/tests/mpi_prog" stuck > "$work/node/job.out" 2>&1 &
job_pid=$!
trap 'kill -9 -- -$job_pid 2> /dev/null || true' EXIT
for _ in $(seq 600); do grep -q stuck "$work/node/job.out" && break; sleep 0.1; done
node_run=$("$ht" inspect "$work/node/traces/job" 2> /dev/null | sed -n 's/.* run \([^ ,]*\).*/\1/p' | head -1)
count() {  # $1: the report folder, $2: a name; the node's metadata calls on it, by kind
  local out=$1 log=$work/node/strace.$2
  strace -f -qq -o "$log" -e trace=$calls \
    "$ht" auto-report --dir "$work/node/traces" --job job --run "$node_run" --out "$out" --settle 0 --wait 0 \
    --timeout 120 --log "$work/node/log.$2" > /dev/null 2>&1 || true
  python3 bench/count_folder_ops.py "$out" "$log"
}
# The node's round, reported by another node: the node dumps twice and is done.
round=$(basename "$(ls -d "$run_dir"/round-* | head -1)")
mkdir -p "$work/node/alone/$node_run/$round/first" "$work/node/alone/$node_run/$round/second"
echo "$round" > "$work/node/alone/$node_run/round.started"
touch "$work/node/alone/$node_run/$round/reporter"
echo "alone in its round:"
count "$work/node/alone" alone
# The round of step 1 as this node's run's (its reporter done): the node's
# dumps go beside $nodes others.
[ "${run:-run}" = "$node_run" ] || mv "$run_dir" "$work/shared/$node_run"
touch "$work/shared/$node_run/round.started"
echo "beside $nodes other nodes:"
count "$work/shared" beside
