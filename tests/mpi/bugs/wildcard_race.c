/* Rank 0 receives twice with MPI_ANY_SOURCE, then once from rank 2 by
 * name; ranks 1 and 2 each send one message. Whichever the wildcards take,
 * the named receive from rank 2 waits for a message a wildcard already took
 * (when both wildcards matched 1 and 2). Rank 0 waits in MPI_Recv from 2;
 * ranks 1 and 2 wait in the final barrier.
 * TRUTH np=3 verdict=hang culprits=0 ops=0:MPI_Recv,1:MPI_Barrier,2:MPI_Barrier words=MPI_ANY_SOURCE~receives~took */
#include <mpi.h>
int main(int argc, char** argv) {
  int rank, x = 1;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) {
    MPI_Recv(&x, 1, MPI_INT, MPI_ANY_SOURCE, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Recv(&x, 1, MPI_INT, MPI_ANY_SOURCE, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Recv(&x, 1, MPI_INT, 2, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  } else {
    MPI_Send(&x, 1, MPI_INT, 0, 0, MPI_COMM_WORLD);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
