/* Rank 1 waits in MPI_Recv from rank 0, tag 0; rank 0 finishes (MPI_Finalize)
 * without sending it. Finishing is not waiting: rank 0 is the culprit.
 * TRUTH np=2 verdict=hang culprits=0 ops=0:MPI_Finalize,1:MPI_Recv words=without~sending */
#include <mpi.h>
int main(int argc, char** argv) {
  int rank, x = 0;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 1) MPI_Recv(&x, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  MPI_Finalize();
  return 0;
}
