#!/usr/bin/env bash
# libhangtrace.so must load into programs without MPI: no strong reference
# to an MPI library's symbols (interpose/mpi_weak.h makes them weak).
set -euo pipefail
lib=$1
strong=$(nm -D --undefined-only "$lib" | awk '$1 == "U" && $2 ~ /^(ompi_|MPI_|PMPI_|MPIR_)/ {print $2}')
if [ -n "$strong" ]; then
  echo "strong references to MPI symbols in $lib (add them to interpose/mpi_weak.h):"
  echo "$strong"
  exit 1
fi
echo "no strong MPI references in $(basename "$lib")"
