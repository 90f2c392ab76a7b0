/* Rank 3 passes root 1 to a broadcast where the others pass root 0: the
 * call may complete with wrong data, or hang; either way the arguments differ.
 * TRUTH np=4 verdict=mismatch culprits=3 ops= words=root */
#include <mpi.h>
#include <unistd.h>
int main(int argc, char** argv) {
  int rank, x = 0;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Bcast(&x, 1, MPI_INT, rank == 3 ? 1 : 0, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  pause();
  MPI_Finalize();
  return 0;
}
