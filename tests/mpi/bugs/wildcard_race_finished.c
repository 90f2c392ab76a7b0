/* Ranks 0 and 1 each send rank 2 one message (tag 0) and finish. Rank 2's
 * two MPI_ANY_SOURCE receives take both; its MPI_Irecv from rank 0, waited
 * for in MPI_Wait, waits for a second message of rank 0 that never comes:
 * rank 0 is the culprit, and the report says the wildcards took it.
 * TRUTH np=3 verdict=hang culprits=0 ops=0:MPI_Finalize,1:MPI_Finalize,2:MPI_Wait words=message~race */
#include <mpi.h>
int main(int argc, char** argv) {
  int rank, x = 1, y = 0;
  MPI_Request req;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank < 2) MPI_Send(&x, 1, MPI_INT, 2, 0, MPI_COMM_WORLD);
  if (rank == 2) {
    MPI_Recv(&y, 1, MPI_INT, MPI_ANY_SOURCE, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Recv(&y, 1, MPI_INT, MPI_ANY_SOURCE, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Irecv(&y, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
  }
  MPI_Finalize();
  return 0;
}
