#!/usr/bin/env bash
# Golden reports (uftrace style): for each line of tests/golden/cases.txt,
# simulate the job (or take the dump tests/golden/dumps/NAME, for `@dump`),
# analyze it, and compare the whole text report with tests/golden/NAME.txt
# and the JSON (--format json, the contract docs/JSON.md describes) with
# tests/golden/NAME.json, the folders it names written WORK and GOLDEN, so
# that any change of wording, of a field or of a diagnosis is seen.
# UPDATE=1 rewrites the expected files instead.
#   tests/check_golden.sh BUILD_DIR
set -euo pipefail
build=$(cd "${1:?usage: $0 BUILD_DIR}" && pwd)
here=$(cd "$(dirname "$0")/golden" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0
while IFS='|' read -r name args; do
  name=$(echo "$name" | xargs)
  [ -z "$name" ] || [ "${name:0:1}" = "#" ] && continue
  if [ "$(echo "$args" | xargs)" = "@dump" ]; then
    # A dump kept as it was taken (node.json): the stacks-only diagnosis.
    input="$here/dumps/$name"
  else
    # shellcheck disable=SC2086
    "$build/bin/hangtrace" simulate $args --out "$work/$name" > /dev/null 2>&1
    input="$work/$name/sim"
  fi
  TZ=UTC "$build/bin/hangtrace" analyze "$input" > "$work/$name.txt" 2>&1 || true
  TZ=UTC "$build/bin/hangtrace" analyze --format json "$input" 2>&1 |
    sed -e "s|$work|WORK|g" -e "s|$here|GOLDEN|g" > "$work/$name.json" || true
  for kind in txt json; do
    if [ -n "${UPDATE:-}" ]; then
      cp "$work/$name.$kind" "$here/$name.$kind"
      echo "updated $name.$kind"
    elif ! diff -u "$here/$name.$kind" "$work/$name.$kind"; then
      echo "FAIL: $name: the report differs from tests/golden/$name.$kind (UPDATE=1 $0 $1 if the change is meant)"
      failed=1
    else
      echo "ok $name.$kind"
    fi
  done
done < "$here/cases.txt"
# docs/ANALYSIS.md says how many there are: kept true.
sims=$(grep -v '^#' "$here/cases.txt" | grep -c '|' | tr -d ' ')
dumps=$(grep -v '^#' "$here/cases.txt" | grep -c '@dump' | tr -d ' ')
sims=$((sims - dumps))
doc=$(cd "$here/../.." && pwd)/docs/ANALYSIS.md
if ! tr '\n' ' ' < "$doc" | grep -q "report of $sims simulated jobs and $dumps dumps"; then
  echo "FAIL: docs/ANALYSIS.md does not say 'report of $sims simulated jobs and $dumps dumps' (tests/golden/cases.txt has them)"
  failed=1
fi
exit $failed
