#!/usr/bin/env bash
# dump/python_offsets.gen.cc must be what the headers of the CPythons on this
# machine say (scripts/gen_python_offsets.sh writes it). Skipped (77) when no
# CPython 3.10+ with headers is installed under pyenv.
set -euo pipefail
src=$1
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
root=${PYENV_ROOT:-$HOME/.pyenv}
if ! ls -d "$root"/versions/3.1[0-9].*/include/python3*/internal >/dev/null 2>&1; then
  echo "no pyenv CPython 3.10+ with headers: nothing to compare"
  exit 77
fi
"$src/scripts/gen_python_offsets.sh" "$tmp" >/dev/null
if ! diff -u "$src/dump/python_offsets.gen.cc" "$tmp"; then
  echo "dump/python_offsets.gen.cc differs from the installed CPython headers: run scripts/gen_python_offsets.sh"
  exit 1
fi
echo "python_offsets.gen.cc matches the headers of $(grep -c '^    {0x' "$tmp") CPython versions"
