#!/usr/bin/env bash
# What libhangtrace.so links to, since it is loaded into every process of a
# job:
# - no MPI library symbol at link time, weakly or not: it must load into
#   programs without MPI, and find an MPI that arrives later by dlopen
#   (mpi4py, torch). Open MPI's handles are looked up by name at the first
#   MPI call (interpose/mpi_support.cc, FindOpenMpi).
# - no libstdc++ or libgcc_s of its own (they are linked in, hidden): the
#   program's own C++ runtime (a conda environment's) is the one it gets;
#   nothing but libc at all (process start, bench/bench_start.sh).
# - no exported symbol beyond interpose/exports.map's.
set -euo pipefail
lib=$1
refs=$(nm -D --undefined-only "$lib" | awk '$2 ~ /^(ompi_|MPI_|PMPI_|MPIR_|opal_)/ {print $1, $2}')
if [ -n "$refs" ]; then
  echo "link-time references to MPI symbols in $lib (look them up at run time instead):"
  echo "$refs"
  exit 1
fi
needed=$(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
if grep -E '^(libstdc\+\+|libgcc_s)' <<< "$needed"; then
  echo "$lib needs a C++ runtime of its own (link it with -static-libstdc++ -static-libgcc)"
  exit 1
fi
# libc only: every process of a job loads what it needs, traced or not
# (libunwind is loaded when a process makes its trace file).
extra=$(grep -vE '^(libc\.so|ld-linux)' <<< "$needed" || true)
if [ -n "$extra" ]; then
  echo "$lib needs more than libc at load, in every process of a job: $extra"
  exit 1
fi
cxx=$(nm -D --undefined-only "$lib" | grep -E '@(GLIBCXX|CXXABI)_' || true)
if [ -n "$cxx" ]; then
  echo "$lib takes symbols from libstdc++:"
  echo "$cxx"
  exit 1
fi
# It exports the wrapped families, its C API and the libc functions it
# stands in for (interpose/exports.map), nothing of its C++ insides.
others=$(nm -D --defined-only "$lib" | awk '{print $3}' |
         grep -vE '^(MPI_|mpi_|nccl|cuda|cu|__cuda|hip|hangtrace_)|^ompi_[a-z_]*_f$|^(dlsym|_exit|_Exit|sigaction|signal|bsd_signal)$' || true)
if [ -n "$others" ]; then
  echo "$lib exports more than interpose/exports.map means to:"
  echo "$others"
  exit 1
fi
echo "$(basename "$lib"): no link-time MPI references; needs only: $(echo $needed); exports $(nm -D --defined-only "$lib" | wc -l) symbols"
