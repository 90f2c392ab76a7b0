/* Ranks 1-3 start an MPI_Ibcast from root 0 and wait for it; the root never
 * starts it and waits in a barrier. The waits are on the broadcast, not on
 * point-to-point requests; at world's first collective the root's barrier
 * meets the others' broadcast: a mismatch, the root the odd one.
 * TRUTH np=4 verdict=mismatch culprits=0 ops=0:MPI_Barrier,1:MPI_Wait,2:MPI_Wait,3:MPI_Wait */
#include <mpi.h>
int main(int argc, char** argv) {
  int rank, x = 5;
  MPI_Request req;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    MPI_Ibcast(&x, 1, MPI_INT, 0, MPI_COMM_WORLD, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
