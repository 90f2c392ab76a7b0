// The generated wrappers built for MPICH's ABI (the same flags as
// mpich_support.cc).
#include "mpi_wrappers.gen.cc"
