#!/usr/bin/env bash
# Runs every test (ctest), after setup when needed. Ends with ctest's summary.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
# Tests run as root in CI; OpenMPI refuses that unless told.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# The jobs the tests kill leave Open MPI's shared-memory segments
# (vader_segment.*) behind: in a folder of this run, removed at its end, not
# in /dev/shm itself, where hundreds of megabytes piled up run after run.
shm=$(mktemp -d /dev/shm/hangtrace-tests-XXXXXX)
trap 'rm -rf "$shm"' EXIT
export OMPI_MCA_btl_vader_backing_directory=$shm
cd build
ctest --output-on-failure -j"$(nproc)" "$@"
