// mpi_support.cc built for MPICH's ABI (interpose/CMakeLists.txt sets
// HT_MPICH, HT_MPI_NS, HT_MPI_PREFIX and HT_MPI_HEADER for this file).
#include "interpose/mpi_support.cc"
