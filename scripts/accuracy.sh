#!/usr/bin/env bash
# The accuracy matrix: every fault of the trainer's catalogue, on several
# topologies and fault positions, run for real under hangtrace, analyzed,
# and compared with the trainer's truth file. Writes docs/accuracy.md.
#   scripts/accuracy.sh [--quick]
set -uo pipefail
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export HANGTRACE_REPORT=0  # the analysis of the files is measured here, not the automatic report
topologies=("2 2 2" "2 3 2" "4 2 2" "2 2 8")
[ "${1:-}" = "--quick" ] && topologies=("2 2 2")
faults=(seed-hang stop crash swap count dtype root p2p-deadlock straggler)
work=$(mktemp -d /tmp/hangtrace-accuracy-XXXXXX)
rows=()
pass=0 total=0

# Ranks where a fault can strike: the first and the last the catalogue
# allows (trainer/faults.h, through the trainer's --list-faults).
eligible() {  # fault tp pp dp
  build/bin/hangtrace-trainer --list-faults --tp "$2" --pp "$3" --dp "$4" |
    awk -v f="$1" '$1 == f && $3 != "-" { n = split($3, r, ","); print r[1], r[n] }'
}

for topo in "${topologies[@]}"; do
  read -r tp pp dp <<< "$topo"
  np=$((tp * pp * dp))
  for f in "${faults[@]}"; do
    for rank in $(eligible $f $tp $pp $dp | tr ' ' '\n' | sort -un); do
      spec="$f@rank=$rank,step=2"
      [ $f = straggler ] && spec="$f@rank=$rank,factor=3"
      dir="$work/$f-$tp$pp$dp-$rank"
      mkdir -p "$dir"
      setsid mpirun -np $np --oversubscribe build/bin/hangtrace run --dir "$dir" --job job --timeout 2 -- \
        build/bin/hangtrace-trainer --tp $tp --pp $pp --dp $dp --layers $((2 * pp)) --steps 5 \
        --fault "$spec" --truth "$dir/truth.json" > "$dir/job.log" 2>&1 &
      job=$!
      for _ in $(seq 120); do kill -0 $job 2>/dev/null || break; sleep 0.1; done
      kill -TERM -- -$job 2>/dev/null; sleep 0.5; kill -KILL -- -$job 2>/dev/null; wait $job 2>/dev/null
      build/bin/hangtrace analyze "$dir" --format json > "$dir/report.json" 2> /dev/null
      # The files as the job left them, dumped compact and whole: the same diagnosis?
      python3 tests/compare_compact.py build/bin/hangtrace "$dir" job > "$dir/compact.diff" 2>&1
      compact=$?
      row=$(python3 - "$dir/truth.json" "$dir/report.json" "$compact" <<'PY'
import json, sys
t, r = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
compact_same = sys.argv[3] == "0"
def ranks(s):
    out = set()
    for part in filter(None, s.split(",")):
        a, _, b = part.partition("-"); out |= set(range(int(a), int(b or a) + 1))
    return out
ok_verdict = t["verdict"] == r["verdict"]
ok_culprits = set(t["culprits"]) == {c["rank"] for c in r["culprits"]}
ok_stuck = True
if "stuck_complete" not in t:
    got = {}
    for g in r["groups"]:
        if g["state"] == "in_call":
            for x in ranks(g["ranks"]): got[x] = (g["op"], g["comm"])
    want = {x: (s["op"], s["comm"]) for s in t["stuck"] for x in ranks(s["ranks"])}
    ok_stuck = got == want
ok = ok_verdict and ok_culprits and ok_stuck and compact_same
print(f'{"ok" if ok else "WRONG"}|{t["verdict"]}|{r["verdict"]}|{sorted(t["culprits"])}|{sorted(c["rank"] for c in r["culprits"])}|{"yes" if "stuck_complete" not in t else "n/a"}{"" if ok_stuck else " (differs)"}|{"same" if compact_same else "DIFFERS"}')
PY
)
      total=$((total + 1))
      [ "${row%%|*}" = ok ] && pass=$((pass + 1))
      rows+=("| $f | ${tp}x${pp}x${dp} ($np) | $rank | ${row//|/ | } |")
      echo "$f ${tp}x${pp}x${dp} rank $rank: ${row%%|*}"
      [ $compact = 0 ] || cat "$dir/compact.diff"
    done
  done
done

# The other sections (the generated catalogue, scored by scripts/catalogue.sh;
# tests/mpi/bugs, scored by test_mpi) are kept as they are.
catalogue=$(awk '/^## / {on = 1} on' docs/accuracy.md 2>/dev/null || true)
{
  echo "# Accuracy of the diagnosis on real runs"
  echo
  echo "Every fault of the trainer's catalogue, on several topologies (TPxPPxDP, ranks) and at the"
  echo "first and the last rank where it applies, run for real under \`hangtrace run\` (Open MPI,"
  echo "oversubscribed on 2 cores), analyzed with \`hangtrace analyze\`, and compared with the truth"
  echo "file the trainer writes. A case is right when the verdict and the culprits equal the truth's,"
  echo "and, where the truth determines them, every stuck rank's (op, comm), and when a compact dump"
  echo "of the files (\`hangtrace dump\`'s default, about 64 KB per rank) gives the same report as the"
  echo "whole files (\`--full\`): tests/compare_compact.py."
  echo
  echo "Produced by \`scripts/accuracy.sh\` on $(date -u +%Y-%m-%d): **$pass of $total right**."
  echo "A swap is injected at the broadcast's root only (\`CanInject\`, trainer/faults.h): a receiver's"
  echo "swap hangs or not as the MPI library decides, so it has no truth and is refused everywhere."
  echo
  echo "| fault | topology | rank | result | truth verdict | analyzed verdict | truth culprits | analyzed culprits | stuck classes compared | compact dump |"
  echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
  printf '%s\n' "${rows[@]}"
  if [ -n "$catalogue" ]; then echo; printf '%s\n' "$catalogue"; fi
} > docs/accuracy.md
echo "$pass of $total right; table in docs/accuracy.md"
rm -rf "$work"
[ $pass -eq $total ]
