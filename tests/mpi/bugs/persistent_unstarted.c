/* Rank 0 makes a persistent send to rank 1 (MPI_Send_init) and never starts
 * it, then waits in a barrier; rank 1 waits in the receive. Rank 0 never
 * sent: the culprit.
 * TRUTH np=2 verdict=hang culprits=0 ops=0:MPI_Barrier,1:MPI_Recv words=never~started */
#include <mpi.h>
int main(int argc, char** argv) {
  int rank, x = 1;
  MPI_Request req;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) MPI_Send_init(&x, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, &req);  /* MPI_Start forgotten */
  if (rank == 1) MPI_Recv(&x, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
