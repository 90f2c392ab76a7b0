/* Rank 0 sends tag 0 to rank 1 (small: it completes eagerly) and goes on to
 * a barrier; rank 1 waits for tag 1 from rank 0, which never comes.
 * The two disagree on the tag: both are named.
 * TRUTH np=2 verdict=hang culprits=0,1 ops=0:MPI_Barrier,1:MPI_Recv words=tag~mismatch */
#include <mpi.h>
int main(int argc, char** argv) {
  int rank, x = 3;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) MPI_Send(&x, 1, MPI_INT, 1, 0, MPI_COMM_WORLD);
  else MPI_Recv(&x, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
