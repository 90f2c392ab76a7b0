/* Rank 0 sends synchronously (MPI_Issend) to rank 1 and waits in MPI_Wait;
 * rank 1 finishes without receiving it, as does rank 2. Rank 1 is the
 * culprit, not in a deadlock with rank 0.
 * TRUTH np=3 verdict=hang culprits=1 ops=0:MPI_Wait,1:MPI_Finalize,2:MPI_Finalize words=without~receiving */
#include <mpi.h>
int main(int argc, char** argv) {
  int rank, x = 1;
  MPI_Request req;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) {
    MPI_Issend(&x, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
  }
  MPI_Finalize();
  return 0;
}
