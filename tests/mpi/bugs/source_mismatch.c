/* Rank 0 sends to rank 1 (small: it completes eagerly) and goes on to a
 * barrier; rank 1 waits for a message from rank 2, which never sends and
 * waits in the barrier. The message rank 1 should take is rank 0's: the two
 * disagree on the source; rank 2 has done nothing wrong.
 * TRUTH np=3 verdict=hang culprits=0,1 ops=0:MPI_Barrier,1:MPI_Recv,2:MPI_Barrier words=source~mismatch */
#include <mpi.h>
int main(int argc, char** argv) {
  int rank, x = 3;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) MPI_Send(&x, 1, MPI_INT, 1, 0, MPI_COMM_WORLD);
  if (rank == 1) MPI_Recv(&x, 1, MPI_INT, 2, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
