#!/usr/bin/env bash
# The generated catalogue of MPI bug programs, whole (tests/mpi/generated):
# every family crossed with every call it applies to, each program run
# traced under Open MPI and its report checked against the truth the
# generator computed, and a compact dump of its files checked against the
# whole files (tests/compare_compact.py). About 42 minutes on 2 cores; ctest
# runs two programs of each family. The score per family goes into docs/accuracy.md by hand.
#   scripts/catalogue.sh [run_catalogue.py options: --family F, --only NAME, ...]
set -uo pipefail
cd "$(dirname "$0")/.."
[ -x build/bin/hangtrace ] || { echo "catalogue.sh: build first (./scripts/test.sh builds)" >&2; exit 2; }
exec python3 tests/mpi/generated/run_catalogue.py --build build --results build/catalogue-results.txt "$@"
