#!/usr/bin/env bash
# libhangtrace.so must load into programs without MPI, and find an MPI that
# arrives later by dlopen (mpi4py, torch): it may not reference any MPI
# library symbol at link time, weakly or not. Open MPI's handles are looked
# up by name at the first MPI call (interpose/mpi_support.cc, FindOpenMpi).
set -euo pipefail
lib=$1
refs=$(nm -D --undefined-only "$lib" | awk '$2 ~ /^(ompi_|MPI_|PMPI_|MPIR_|opal_)/ {print $1, $2}')
if [ -n "$refs" ]; then
  echo "link-time references to MPI symbols in $lib (look them up at run time instead):"
  echo "$refs"
  exit 1
fi
echo "no link-time MPI references in $(basename "$lib")"
