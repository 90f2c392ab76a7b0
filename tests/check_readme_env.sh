#!/usr/bin/env bash
# The README's environment table must be exactly what `hangtrace env
# --markdown` prints from the one settings table (tracer/config.h).
set -euo pipefail
cli=$1 readme=$2
want=$("$cli" env --markdown)
got=$(awk '/^\| variable \| default \| meaning \|/{on=1} on&&/^\|/{print; next} on{exit}' "$readme")
if [ "$want" != "$got" ]; then
  echo "README.md's environment table differs from 'hangtrace env --markdown':"
  diff <(echo "$want") <(echo "$got") || true
  exit 1
fi
echo "README environment table matches ($(echo "$want" | wc -l) lines)"
