/* An MPI stub of the kind serial builds of MPI libraries link (MUMPS's
 * libseq, PETSc's mpiuni): MPI_* defined for one process, no PMPI_*, no
 * mpi.h of a real MPI. Built as libmpi_stub.so; stub_prog links it. */
#include <string.h>

typedef int MPI_Comm;
typedef int MPI_Datatype;
typedef int MPI_Op;

static int initialized = 0;

int MPI_Init(int* argc, char*** argv) {
  (void)argc;
  (void)argv;
  initialized = 1;
  return 0;
}
int MPI_Initialized(int* flag) {
  *flag = initialized;
  return 0;
}
int MPI_Comm_rank(MPI_Comm comm, int* rank) {
  (void)comm;
  *rank = 0;
  return 0;
}
int MPI_Comm_size(MPI_Comm comm, int* size) {
  (void)comm;
  *size = 1;
  return 0;
}
/* One process: the reduction of one contribution is the contribution
 * (the stub knows only 4-byte elements). */
int MPI_Allreduce(const void* in, void* out, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  (void)type;
  (void)op;
  (void)comm;
  memmove(out, in, (size_t)count * 4);
  return 0;
}
int MPI_Barrier(MPI_Comm comm) {
  (void)comm;
  return 0;
}
int MPI_Finalize(void) {
  initialized = 0;
  return 0;
}
