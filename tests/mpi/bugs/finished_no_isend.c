/* Rank 1 posts MPI_Irecv from rank 0 (tag 4) and waits for it in MPI_Wait;
 * rank 0 finishes without sending it. Rank 0 in MPI_Finalize waits for no
 * one who waits for it: a hang with rank 0 the culprit, not a deadlock of
 * MPI_Finalize and MPI_Wait.
 * TRUTH np=2 verdict=hang culprits=0 ops=0:MPI_Finalize,1:MPI_Wait words=without~sending */
#include <mpi.h>
int main(int argc, char** argv) {
  int rank, x = 0;
  MPI_Request req;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 1) {
    MPI_Irecv(&x, 1, MPI_INT, 0, 4, MPI_COMM_WORLD, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
  }
  MPI_Finalize();
  return 0;
}
