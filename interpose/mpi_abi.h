// The two MPI ABIs of one library: Open MPI's (handles are pointers to
// its data) and MPICH's, which Intel MPI, Cray MPICH and MVAPICH share
// (handles are integers). The wrappers are built once for each
// (mpi_support.h: HT_MPI_PREFIX), and every exported MPI symbol is a jump
// through hangtrace_mpi_targets (mpi_abi.gen.cc, from mpi.spec). At the
// first MPI call, mpi_abi.cc finds which MPI the process loaded (linked or
// dlopen'ed) and points every entry at that build's wrapper.
#pragma once

namespace hangtrace::mpi_abi {

struct Entry {
  const char* name;  // the exported symbol
  void* ompi;        // the Open MPI build's wrapper
  void* mpich;       // the MPICH build's; null: the MPI library's own (a
                     // Fortran name: MPICH's Fortran bindings call the C
                     // functions, whose wrappers record them)
};
extern const Entry kEntries[];
extern const unsigned kNumEntries;

}  // namespace hangtrace::mpi_abi

namespace hangtrace::mpich {
void RegisterMpiCalls();  // the MPICH build's table (the same calls)
}

extern "C" void* hangtrace_mpi_targets[];
